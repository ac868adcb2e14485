"""Measure aotc's RAM and flash estimates (aotc/targets/budget.py) against the linked ELF of
the MLPerf Tiny int8 and float models on a board, and fit the board's code-size model.

    python scripts/calibrate_budget.py [--board cortex-m4f] [--models DIR]

Prints one row per model (estimate, ELF, error in percent) and the least-squares fit of
flash code = base + per_token x tokens, static RAM base = mean(ELF data + bss - arena - I/O).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

import aotc
from aotc.errors import AotcError
from aotc.targets.budget import CALIBRATION, code_tokens, estimate
from aotc.targets.runner import BoardRunner

ROOT = Path(__file__).resolve().parents[1]
MODELS = {"kws int8": "kws_ref_model.tflite", "vww int8": "vww_96_int8.tflite",
          "ic int8": "pretrainedResnet_quant.tflite", "ad int8": "ad01_int8.tflite",
          "kws float": "kws_ref_model_float.onnx", "vww float": "vww_96_float.onnx",
          "ic float": "pretrainedResnet_float.onnx", "ad float": "ad01_float.onnx"}


def measure(model: Path, board: str, out: Path) -> dict:
    """The estimate and the ELF's sizes of one model (RAM as fits_check counts it)."""
    bundle = aotc.compile(str(model), out, name="m", target=board)
    est = estimate(bundle.compilation, board)
    runner = BoardRunner(out, board, check_fit=False)
    s = runner.sizes()
    elf_ram = s["ram"] + runner.board.stack_bytes + runner.board.heap_bytes
    return {"est": est.to_json(), "elf_flash": s["flash"], "elf_ram": elf_ram,
            "elf_static_ram": s["ram"], "tokens": code_tokens((out / "m.c").read_text())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--board", default="cortex-m4f")
    ap.add_argument("--models", default=str(ROOT.parent / "shared" / "models" / "mlperf_tiny"))
    args = ap.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key, f in MODELS.items():
            out = Path(tmp) / key.replace(" ", "_")
            try:
                rows[key] = measure(Path(args.models) / f, args.board, out)
            except AotcError as e:  # too big for the board's memory map: nothing to measure
                print(f"{key}: skipped ({str(e)[:120]})")
    if not rows:
        print(f"no model fits {args.board}'s memory map: nothing to calibrate")
        return
    print(f"{'model':<10} {'flash est':>10} {'ELF':>10} {'err':>7}   {'RAM est':>9} {'ELF':>9} "
          f"{'err':>7}")
    for key, r in rows.items():
        e = r["est"]
        print(f"{key:<10} {e['flash']:>10,} {r['elf_flash']:>10,} "
              f"{100 * (e['flash'] / r['elf_flash'] - 1):>+6.2f}%   {e['ram']:>9,} "
              f"{r['elf_ram']:>9,} {100 * (e['ram'] / r['elf_ram'] - 1):>+6.2f}%")
    x = np.array([[1.0, r["tokens"]] for r in rows.values()])
    y = np.array([r["elf_flash"] - r["est"]["weights"] for r in rows.values()], float)
    (base, per_token), *_ = np.linalg.lstsq(x, y, rcond=None)
    ram_base = np.mean([r["elf_static_ram"] - r["est"]["arena"] - r["est"]["io"]
                        for r in rows.values()])
    print(f"fit for {args.board}: base {base:.0f}, per_token {per_token:.3f}, ram_base "
          f"{ram_base:.0f} (in use: {json.dumps(CALIBRATION.get(args.board))})")


if __name__ == "__main__":
    main()
