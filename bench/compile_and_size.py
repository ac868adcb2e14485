"""Compile times of the MLPerf Tiny models (default options, and VWW int8 with the slowest
options); then compile the float models and print a table: compile time, arena vs liveness
bound (and TFLM's arena), weights vs the model's constant bytes, and host latency of the
generated C (--target host, gcc -O2 plus --host-cflags, 1 thread) vs onnxruntime (1 thread)
and TFLM (tflite-micro package, reference kernels; n/a without it: pip install -e ".[bench]").

    python bench/compile_and_size.py [--models DIR] [--repeat 50] [--host-cflags=FLAGS]
                                     [--tuning-log LOG] [--compile-only]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import aotc

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = ROOT.parent / "shared" / "models" / "mlperf_tiny"
FLOAT_MODELS = ["kws_ref_model_float.onnx", "vww_96_float.onnx", "pretrainedResnet_float.onnx",
                "ad01_float.onnx"]
# TFLM head (non-persistent arena) for the float models, targets.md 3.3 [measured].
TFLM_FLOAT_HEAD = {"kws_ref_model_float.onnx": 64000, "vww_96_float.onnx": 294912,
                   "pretrainedResnet_float.onnx": 196608, "ad01_float.onnx": 3072}
# The host build's extra flags by default (docs/performance.md, host latency): the machine's
# vector instructions, as onnxruntime's kernels use them, and the constant-trip tile loops
# peeled so gcc's SLP vectoriser takes the int8 ones; on x86-64 512-bit vectors where the CPU
# has them (int8 5-30% faster). -ffp-contract=off stays (no FMA).
HOST_CFLAGS = "-march=native -fpeel-loops" + (
    " -mprefer-vector-width=512" if platform.machine() in ("x86_64", "AMD64") else "")


def ort_latency(model: Path, feeds: dict[str, np.ndarray], repeat: int) -> float:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    for _ in range(5):
        sess.run(None, feeds)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def tflm_latency(tflite: Path, x: np.ndarray, repeat: int) -> float | None:
    """TFLM (tflite-micro Python package, reference kernels); None when not installed."""
    try:
        from tflite_micro.python.tflite_micro import runtime
    except ImportError:
        return None
    it = runtime.Interpreter.from_file(str(tflite), arena_size=2 << 20)
    times = []
    for k in range(repeat + 5):
        t0 = time.perf_counter()
        it.set_input(x, 0)
        it.invoke()
        if k >= 5:
            times.append(time.perf_counter() - t0)
    return float(np.median(times))


# Compile times: every MLPerf Tiny model with the default options (target <= 2 s each), and the
# slowest option set (target <= 10 s). Each time is aotc.compile in this process (import,
# passes, lowering, planning, writing the bundle), the best of COMPILE_RUNS.
COMPILE_MODELS = ["kws_ref_model.tflite", "vww_96_int8.tflite", "pretrainedResnet_quant.tflite",
                  "ad01_int8.tflite", "str_ww_ref_model.tflite", *FLOAT_MODELS]
COMPILE_SLOW = ("vww_96_int8.tflite", {"patches": "auto", "inplace_conv": True},
                "--patches auto --inplace-conv")
COMPILE_RUNS = 3


def compile_times(models: Path) -> list[tuple[str, str, float]]:
    cases = [(m, {}, "default") for m in COMPILE_MODELS]
    cases.append((COMPILE_SLOW[0], COMPILE_SLOW[1], COMPILE_SLOW[2]))
    out = []
    for fname, opts, label in cases:
        best = float("inf")
        for _ in range(COMPILE_RUNS):
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                aotc.compile(models / fname, tmp, name="m", **opts)
                best = min(best, time.perf_counter() - t0)
        out.append((fname, label, best))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=Path, default=DEFAULT_MODELS)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--host-cflags", default=HOST_CFLAGS,
                    help=f"extra gcc flags for the host build, given as --host-cflags='...' "
                         f"(AOTC_HOST_CFLAGS; default {HOST_CFLAGS!r}; empty: plain -O2)")
    ap.add_argument("--tuning-log", default=None,
                    help="schedules from an `aotc tune --board host` log")
    ap.add_argument("--compile-only", action="store_true",
                    help="only the compile-time table")
    args = ap.parse_args()
    print(f"{'model':<36} {'options':<30} {'compile s':>9}   (best of {COMPILE_RUNS})")
    for fname, label, t in compile_times(args.models):
        print(f"{fname:<36} {label:<30} {t:>9.2f}")
    if args.compile_only:
        return 0
    print()
    os.environ["AOTC_HOST_CFLAGS"] = args.host_cflags
    schedules = {}
    if args.tuning_log:
        from aotc.tune import schedules_from_log

        schedules = dict(schedules_from_log(args.tuning_log, "host").schedules)
    print(f"host build: gcc -O2 {args.host_cflags}; tuning log: {args.tuning_log}")
    rows = []
    for fname in FLOAT_MODELS:
        path = args.models / fname
        if not path.exists():
            print(f"skip {fname}: not found", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            # Tuned for the machine it runs on (rolled tiles that gcc -O2 vectorises).
            bundle = aotc.compile(path, tmp, name="m", target="host", schedules=schedules)
            t_compile = time.perf_counter() - t0
            runner = bundle.load()
            vec = np.load(args.models / "vectors" / (path.stem + ".npz"))
            feeds = {runner.meta["inputs"][0]["name"]: vec["input"][0]}
            got = runner.run(feeds)
            err = float(np.max(np.abs(next(iter(got.values())) - vec["output_ort"][0])))
            t_c = runner.benchmark(feeds, args.repeat)
            t_ort = ort_latency(path, feeds, args.repeat)
            t_tflm = tflm_latency(args.models / str(vec["tflite"]), vec["input"][0], args.repeat)

            c = bundle.compilation
            rows.append((fname, t_compile, c.plan.size, c.lower_bound, c.io_lower_bound,
                         TFLM_FLOAT_HEAD.get(fname, 0), c.weights_bytes, c.model_const_bytes,
                         t_c * 1e3, t_ort * 1e3, None if t_tflm is None else t_tflm * 1e3, err))
    hdr = (f"{'model':<30} {'compile s':>9} {'arena B':>9} {'bound B':>9} {'over':>6} "
           f"{'TFLM B':>8} {'weights B':>10} {'consts B':>10} {'w/c':>6} {'C ms':>8} "
           f"{'ORT ms':>8} {'C/ORT':>6} {'TFLM ms':>8} {'C/TFLM':>6} {'max err':>8}")
    print(hdr)
    print("-" * len(hdr))
    for (f, tc, arena, bound, _iob, tflm, wb, cb, tcm, tom, ttm, err) in rows:
        over = 100.0 * (arena - bound) / bound if bound else 0.0
        tflm_cols = f"{ttm:>8.3f} {tcm / ttm:>6.2f}" if ttm else f"{'n/a':>8} {'':>6}"
        print(f"{f:<30} {tc:>9.2f} {arena:>9,} {bound:>9,} {over:>5.1f}% {tflm:>8,} {wb:>10,} "
              f"{cb:>10,} {wb / cb:>6.3f} {tcm:>8.3f} {tom:>8.3f} {tcm / tom:>6.2f} {tflm_cols} "
              f"{err:>8.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
