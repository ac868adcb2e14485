"""One int8 LSTM layer (TFLite UNIDIRECTIONAL_SEQUENCE_LSTM, TFLM's integer arithmetic) on an
emulated board (default cortex-m4f): aotc's own kernel (aotc.QLstm, the DSP extension's SMLAD
tiles) against CMSIS-NN's ``arm_lstm_unidirectional_s8`` (``--byoc cmsis-nn``), both compiled
--target BOARD. Executed instructions per inference from QEMU's TCG plugin (exact) and per MAC
(the MACs of the gate products), flash and RAM, and whether each matches TFLM bit for bit on
the vectors run. The states live in the caller's state buffer: the table says whether aotc's
slots are written in place (no copy per call).

    python bench/qlstm.py [--board cortex-m4f] [--layers 32x32x8,40x64x1,...] [--vectors 3]

A layer is INPUTxHIDDENxSTEPS (batch 1). CMSIS-NN comes from --cmsis-nn-path, else
$CMSIS_NN_PATH, else ../shared/third_party/cmsis-nn. Needs the board's toolchain and QEMU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

import aotc
from aotc.api import macs_of
from aotc.targets import boards

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "frontend"))  # the model builder of the tests

DEFAULT_LAYERS = "32x32x8,40x64x1,64x64x4"


def measure(model: bytes, xs: list[np.ndarray], ref: list[np.ndarray], board: str,
            out: Path, **options: object) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    (out / "m.tflite").write_bytes(model)
    bundle = aotc.compile(out / "m.tflite", out / "bundle", name="lstm", target=board,
                          **options)
    runner = bundle.load(board)
    (spec,) = runner.meta["inputs"]
    exact = all(np.array_equal(runner.run({spec["name"]: x})["out"].reshape(e.shape), e)
                for x, e in zip(xs, ref))
    counts = boards.count_instructions(runner.elf, runner.board,
                                       runner._inputs({spec["name"]: xs[0]}))
    meta = json.loads((bundle.directory / "bundle.json").read_text())
    slots = [s["written"] for s in meta["state"]["slots"]]
    lowered = bundle.compilation.lowered
    return {"macs": sum(macs_of(bundle.compilation).values()), "instr": counts["inference"],
            "sizes": runner.sizes(), "exact": exact, "slots": slots,
            "backend": ",".join(sorted({ls.backend or "aotc" for ls in lowered}))}


def main() -> int:
    from stateful_tflite import tflm_frames
    from test_tflite_qlstm import qlstm_model, vectors

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--board", default="cortex-m4f")
    p.add_argument("--layers", default=DEFAULT_LAYERS)
    p.add_argument("--vectors", type=int, default=3)
    p.add_argument("--cmsis-nn-path", default=None)
    args = p.parse_args()
    path = (args.cmsis_nn_path or os.environ.get("CMSIS_NN_PATH")
            or str(ROOT.parent / "shared" / "third_party" / "cmsis-nn"))
    head = (f"{'layer IxHxT':<12} {'MACs':>8} {'aotc instr':>11} {'cmsis instr':>12} "
            f"{'aotc/MAC':>9} {'cmsis/MAC':>10} {'aotc flash':>10} {'cmsis flash':>11} "
            f"{'aotc RAM':>9} {'cmsis RAM':>9} {'exact':>11} {'aotc states':>17}")
    print(f"int8 LSTM layer (batch 1) on {args.board}: aotc vs arm_lstm_unidirectional_s8 "
          f"(--byoc cmsis-nn); instructions per inference from QEMU; exact = bit-exact with "
          f"TFLM on {args.vectors} vectors (aotc/cmsis)\n")
    print(head)
    print("-" * len(head))
    with tempfile.TemporaryDirectory(prefix="aotc_bench_qlstm_") as tmp:
        for layer in args.layers.split(","):
            n_in, hidden, steps = (int(v) for v in layer.split("x"))
            model = qlstm_model(batch=1, steps=steps, n_in=n_in, hidden=hidden, seed=11)
            shape = (1, steps, n_in)
            xs = vectors(np.int8, shape)[:args.vectors]
            ref = tflm_frames(model, xs)
            nat = measure(model, xs, ref, args.board, Path(tmp) / layer / "aotc")
            cms = measure(model, xs, ref, args.board, Path(tmp) / layer / "cmsis",
                          byoc=("cmsis-nn",), cmsis_nn_path=path)
            assert cms["backend"] == "cmsis-nn", cms["backend"]
            macs = nat["macs"]
            print(f"{layer:<12} {macs:>8,} {nat['instr']:>11,} {cms['instr']:>12,} "
                  f"{nat['instr'] / macs:>9.2f} {cms['instr'] / macs:>10.2f} "
                  f"{nat['sizes']['flash']:>10,} {cms['sizes']['flash']:>11,} "
                  f"{nat['sizes']['ram']:>9,} {cms['sizes']['ram']:>9,} "
                  f"{'/'.join('yes' if r['exact'] else 'NO' for r in (nat, cms)):>11} "
                  f"{'+'.join(nat['slots']):>17}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
