"""Memory of the MLPerf Tiny models (int8 and float) below the liveness bound: one row per
model with the bounds, the arena each memory option reaches, and TFLM's arena.

    python bench/memory.py [--models DIR] [kws vww ic ad sww ...]

Columns (bytes):
  bound      liveness bound of the arena: activations + scratch, kernels as they are
  bound+io   the same with the graph inputs and outputs counted (the bound on total RAM)
  floor      in-place floor from research (largest tensor + what must coexist with it when
             elementwise and depthwise kernels write in place; targets.md 3.2, int8 only)
  kept       --keep-order: the arena with the kernels in the model's order
  default    aotc's arena with the default options (graph I/O in caller buffers; kernels in
             the order of smallest liveness bound, aotc/steps/reorder.py)
  inplace    --inplace-conv (depthwise by channel, by line or, strided, by element; plain
             convs by line; 1x1 by pixel; a temporary of at most 64 B on the C stack where
             that shrinks the arena, not counted; docs/memory.md)
  io         --io-in-arena: the arena holds the graph I/O too, so it is the total RAM
  io+inpl    --io-in-arena --inplace-conv: total RAM with both
  patches    --patches auto: the first conv stage in spatial patches (grid and depth of the
             smallest arena within 25% extra MACs; the plain arena when none is smaller)
  patch MACs the extra MACs of that choice, and the grid/depth ("-": the plain plan kept)
  pat+inpl   --patches auto --inplace-conv
  p+i MACs   the extra MACs of that choice
  TFLM hd    TFLM's arena head (activations + scratch, I/O included; targets.md 3.3)
  TFLM tot   TFLM's whole arena (head + persistent tail)
Only aotc.compiler.compile_model runs (no C compiler), so the table takes seconds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aotc.compiler import CompileOptions, compile_model

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = ROOT.parent / "shared" / "models" / "mlperf_tiny"
# short name -> (int8 QDQ file, float file or None)
MODELS = {
    "kws": ("kws_ref_model_int8_qdq.onnx", "kws_ref_model_float.onnx"),
    "vww": ("vww_96_int8_qdq.onnx", "vww_96_float.onnx"),
    "ic": ("pretrainedResnet_int8_qdq.onnx", "pretrainedResnet_float.onnx"),
    "ad": ("ad01_int8_qdq.onnx", "ad01_float.onnx"),
    "sww": ("str_ww_ref_model_int8_qdq.onnx", None),
}
# targets.md 3.2 (in-place floor, int8) and 3.3 (TFLM head, tail) [measured].
FLOOR = {"kws": 8000, "vww": 36864, "ic": 32768, "ad": 640}
TFLM = {("kws", "int8"): (16000, 8272), ("vww", "int8"): (73728, 29952),
        ("ic", "int8"): (49152, 6832), ("ad", "int8"): (768, 3216),
        ("sww", "int8"): (6656, 9984), ("kws", "float"): (64000, 8208),
        ("vww", "float"): (294912, 29888), ("ic", "float"): (196608, 6768),
        ("ad", "float"): (3072, 3152)}
VARIANTS = {"kept": {"keep_order": True}, "default": {}, "inplace": {"inplace_conv": True},
            "io": {"io_in_arena": True},
            "io+inpl": {"io_in_arena": True, "inplace_conv": True},
            "patches": {"patches": "auto"}, "pat+inpl": {"patches": "auto", "inplace_conv": True}}
PATCHED = ("patches", "pat+inpl")  # each followed by its extra MACs
MACS = {"patches": "patch MACs", "pat+inpl": "p+i MACs"}
COLUMNS = ["bound", "bound+io", "floor",
           *(c for v in VARIANTS for c in ((v, MACS[v]) if v in PATCHED else (v,))),
           "TFLM hd", "TFLM tot"]


def _patch_macs(report: dict | None) -> str:
    if not report or report.get("kept_plain"):
        return "-"
    grid = "x".join(map(str, report["grid"]))
    return f"{report['extra_macs_pct']:+.1f}% {grid}/{report['depth']}"


def row(models: Path, short: str, dtype: str, file: str) -> list[str]:
    arenas: list[int | str] = []
    bounds = None
    for label, opts in VARIANTS.items():
        c = compile_model(models / file, CompileOptions(**opts))
        arenas.append(c.plan.size)
        if label in PATCHED:
            arenas.append(_patch_macs(c.patches))
        if label == "default":
            bounds = c.bounds
    assert bounds is not None
    head, tail = TFLM.get((short, dtype), (None, None))
    floor = FLOOR.get(short) if dtype == "int8" else None
    cells = [bounds.scratch, bounds.io, floor, *arenas, head,
             None if head is None else head + tail]
    return [f"{short} {dtype}"] + ["-" if v is None else v if isinstance(v, str) else f"{v:,}"
                                   for v in cells]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=list(MODELS), help="short names")
    ap.add_argument("--models", dest="dir", type=Path, default=DEFAULT_MODELS)
    args = ap.parse_args(argv)
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {list(MODELS)}")
    rows = [["model", *COLUMNS]]
    for short in args.models:
        for dtype, file in zip(("int8", "float"), MODELS[short]):
            if file is not None:
                rows.append(row(args.dir, short, dtype, file))
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) if k == 0 else c.rjust(w)
                        for k, (c, w) in enumerate(zip(r, widths))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
