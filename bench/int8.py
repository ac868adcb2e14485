"""Compile the MLPerf Tiny int8 QDQ models into integer-only C and print one row per model:
compile time, arena vs liveness bound vs TFLM's arena (measured), weights vs the constant
buffers of the matching .tflite, host latency of the generated C (--target host, gcc -O2
plus --host-cflags, 1 thread) vs TFLM (tflite-micro package, reference kernels) and
onnxruntime (1 thread), and accuracy: bit-exactness with TFLM (requant=tflite) and the max
LSB difference from onnxruntime without graph optimisations (requant=onnx).

    python bench/int8.py [kws vww ic ad sww ...] [--models DIR] [--repeat 50] [--clock cpu]
                         [--host-cflags=FLAGS] [--tuning-log LOG]

--clock cpu times all three runtimes with the calling thread's CPU time instead of wall time
(all of them compute in the calling thread): on a loaded machine, wall-clock medians of the
millisecond-long runs are inflated by preemption while sub-millisecond ones are not.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import aotc

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = ROOT.parent / "shared" / "models" / "mlperf_tiny"
# short name -> (QDQ ONNX file, matching .tflite)
INT8_MODELS = {
    "kws": ("kws_ref_model_int8_qdq.onnx", "kws_ref_model.tflite"),
    "vww": ("vww_96_int8_qdq.onnx", "vww_96_int8.tflite"),
    "ic": ("pretrainedResnet_int8_qdq.onnx", "pretrainedResnet_quant.tflite"),
    "ad": ("ad01_int8_qdq.onnx", "ad01_int8.tflite"),
    "sww": ("str_ww_ref_model_int8_qdq.onnx", "str_ww_ref_model.tflite"),
}
# The host build's extra flags by default (docs/performance.md, host latency): the machine's
# vector instructions, as onnxruntime's kernels use them, and the constant-trip tile loops
# peeled so gcc's SLP vectoriser takes them (int8 2-3x faster, the same bytes); on x86-64
# 512-bit vectors where the CPU has them (5-30% more).
HOST_CFLAGS = "-march=native -fpeel-loops" + (
    " -mprefer-vector-width=512" if platform.machine() in ("x86_64", "AMD64") else "")
# TFLM arena (head, tail) from targets.md 3.3 [measured]; used only when the interpreter's
# allocation report cannot be read.
TFLM_ARENA = {"kws": (16000, 8272), "vww": (73728, 29952), "ic": (49152, 6832),
              "ad": (768, 3216), "sww": (6656, 9984)}

HEADER = """\
int8 QDQ models -> integer-only C (aotc, requant=tflite unless noted); host x86-64, 1 thread.
  compile s  aotc.compile wall time (passes + C emission; no gcc; after a warm-up)
  arena B    our static arena;  bound B: liveness lower bound of the activations
  TFLM hd/tl TFLM arena head (non-persistent planner area) / tail (persistent structs, quant
             params, op data), read from the interpreter's allocation report (* = targets.md)
  weights B  const bytes of our bundle (weights, biases, requant multipliers/shifts, tables)
  tfl B      total bytes of the constant buffers referenced by the .tflite's tensors; w/t = ratio
  C ms       generated C (target=host, gcc -O2 + the host flags below), median via
             runner.benchmark (--clock wall)
  TFLM ms    tflite-micro Python interpreter (reference kernels), set_input + invoke, median
  ORT ms     onnxruntime 1 thread, default optimisations, on the QDQ .onnx, median
  exact      fraction of output elements equal to TFLM's (output_tflm) over all vectors
  onnx LSB   max |C - ORT| in LSB with requant=onnx vs onnxruntime ORT_DISABLE_ALL, all vectors"""


@dataclass
class Row:
    model: str
    t_compile: float
    arena: int
    bound: int
    tflm_head: int
    tflm_tail: int
    tflm_measured: bool
    weights: int
    tflite_consts: int
    t_c: float
    t_tflm: float | None
    t_ort: float
    exact: float
    onnx_lsb: int


def tflite_const_bytes(tflite: Path) -> int:
    """Bytes of the distinct non-empty buffers referenced by tensors of any subgraph (the
    constants: weights, biases, shapes); buffer 0 is the empty sentinel."""
    from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema

    model = schema.Model.GetRootAsModel(tflite.read_bytes(), 0)
    used: set[int] = set()
    for si in range(model.SubgraphsLength()):
        sg = model.Subgraphs(si)
        used.update(sg.Tensors(ti).Buffer() for ti in range(sg.TensorsLength()))
    total = 0
    for b in used - {0}:
        buf = model.Buffers(b)
        # Models over 2 GB keep data outside the flatbuffer (offset/size); not the case here.
        total += buf.DataLength() or (buf.Size() if buf.Offset() > 1 else 0)
    return total


def _capture_fd2(fn) -> str:  # type: ignore[no-untyped-def]
    """Run fn() and return what C++ code wrote to file descriptor 2."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 2)
        try:
            fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        return f.read().decode(errors="replace")


def median_time(call: Callable[[], object], repeat: int, clock: Callable[[], float],
                warmup: int = 5) -> float:
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeat):
        t0 = clock()
        call()
        times.append(clock() - t0)
    return float(np.median(times))


def ort_latency(model: Path, feeds: dict[str, np.ndarray], repeat: int,
                clock: Callable[[], float]) -> float:
    """onnxruntime, 1 thread, default (all) graph optimisations, as compile_and_size.py."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    return median_time(lambda: sess.run(None, feeds), repeat, clock)


def tflm_run(tflite: Path, x: np.ndarray, repeat: int, clock: Callable[[], float]
             ) -> tuple[float, tuple[int, int] | None]:
    """TFLM latency (median s of set_input + invoke) and its arena (head, tail) from
    print_allocations()."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_file(str(tflite), arena_size=2 << 20)

    def call() -> None:
        it.set_input(x, 0)
        it.invoke()

    t = median_time(call, repeat, clock)
    text = _capture_fd2(it.print_allocations)
    head = re.search(r"Arena allocation head (\d+) bytes", text)
    tail = re.search(r"Arena allocation tail (\d+) bytes", text)
    arena = (int(head.group(1)), int(tail.group(1))) if head and tail else None
    return t, arena


def ort_outputs(model: Path, feeds: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    """onnxruntime without graph optimisations: its QDQ reference semantics."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    return [sess.run(None, f)[0] for f in feeds]


def warm_up() -> None:
    """Compile a one-node model so the first row's compile time excludes one-time imports
    (op registry, templates)."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "warm", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    with tempfile.TemporaryDirectory() as tmp:
        aotc.compile(m, tmp, name="warm")


def bench_model(key: str, models: Path, repeat: int, clock: Callable[[], float] | None,
                schedules: dict | None = None) -> Row:
    """One row; ``clock`` None = wall time with runner.benchmark for the C; ``schedules`` from
    a host tuning log for the requant=tflite build (the one timed)."""
    onnx_name, tflite_name = INT8_MODELS[key]
    path, tflite = models / onnx_name, models / tflite_name
    vec = np.load(models / "vectors" / (path.stem + ".npz"))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        bundle = aotc.compile(path, Path(tmp) / "tflite", name="m", target="host",
                              requant="tflite", schedules=schedules or {})
        t_compile = time.perf_counter() - t0
        runner = bundle.load()
        in_name = runner.meta["inputs"][0]["name"]
        feeds = [{in_name: x} for x in vec["input"]]
        outs = [next(iter(runner.run(f).values())) for f in feeds]
        exact = float(np.mean([np.mean(o.reshape(e.shape) == e)
                               for o, e in zip(outs, vec["output_tflm"])]))
        if clock is None:
            t_c = runner.benchmark(feeds[0], repeat)
        else:  # the same preallocated call runner.benchmark times, on another clock
            fn, c_args, _ = runner._prepare(feeds[0])
            t_c = median_time(lambda: fn(*c_args), repeat, clock)

        onnx_bundle = aotc.compile(path, Path(tmp) / "onnx", name="m", target="host",
                                   requant="onnx")
        onnx_runner = onnx_bundle.load()
        got = [next(iter(onnx_runner.run(f).values())) for f in feeds]
        ref = ort_outputs(path, feeds)
        lsb = max(int(np.max(np.abs(g.astype(np.int32).reshape(r.shape) - r.astype(np.int32))))
                  for g, r in zip(got, ref))

    t_ort = ort_latency(path, feeds[0], repeat, clock or time.perf_counter)
    try:
        t_tflm, arena = tflm_run(tflite, vec["input"][0], repeat, clock or time.perf_counter)
    except ImportError:
        t_tflm, arena = None, None
    measured = arena is not None
    head, tail = arena if arena is not None else TFLM_ARENA[key]
    return Row(onnx_name, t_compile, bundle.arena_bytes, bundle.lower_bound, head, tail,
               measured, bundle.weights_bytes, tflite_const_bytes(tflite), t_c, t_tflm, t_ort,
               exact, lsb)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("only", nargs="*", metavar="MODEL",
                    help=f"subset of {', '.join(INT8_MODELS)} (default: all)")
    ap.add_argument("--models", type=Path, default=DEFAULT_MODELS)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall: perf_counter (runner.benchmark); cpu: thread CPU time")
    ap.add_argument("--host-cflags", default=HOST_CFLAGS,
                    help=f"extra gcc flags for the host build, given as --host-cflags='...' "
                         f"(AOTC_HOST_CFLAGS; default {HOST_CFLAGS!r}; empty: plain -O2)")
    ap.add_argument("--tuning-log", default=None,
                    help="schedules from an `aotc tune --board host` log")
    args = ap.parse_args()
    os.environ["AOTC_HOST_CFLAGS"] = args.host_cflags
    schedules = {}
    if args.tuning_log:
        from aotc.tune import schedules_from_log

        schedules = dict(schedules_from_log(args.tuning_log, "host").schedules)
    clock = time.thread_time if args.clock == "cpu" else None
    unknown = [m for m in args.only if m not in INT8_MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; choose from {list(INT8_MODELS)}")
    warm_up()
    rows = []
    for key in args.only or list(INT8_MODELS):
        if not (args.models / INT8_MODELS[key][0]).exists():
            print(f"skip {key}: {INT8_MODELS[key][0]} not found", file=sys.stderr)
            continue
        rows.append(bench_model(key, args.models, args.repeat, clock, schedules))
    print(HEADER)
    print(f"  (latency clock: {args.clock}; host build: gcc -O2 {args.host_cflags}; tuning log: "
          f"{args.tuning_log})")
    hdr = (f"{'model':<31} {'compile s':>9} {'arena B':>8} {'bound B':>8} {'TFLM hd/tl B':>14} "
           f"{'weights B':>10} {'tfl B':>8} {'w/t':>5} {'C ms':>7} {'TFLM ms':>8} {'C/TFLM':>7} "
           f"{'ORT ms':>7} {'C/ORT':>6} {'exact':>6} {'onnx LSB':>8}")
    print()
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        tflm_b = f"{r.tflm_head:,}/{r.tflm_tail:,}" + ("" if r.tflm_measured else "*")
        c_ms, o_ms = r.t_c * 1e3, r.t_ort * 1e3
        tflm_cols = (f"{r.t_tflm * 1e3:>8.3f} {r.t_c / r.t_tflm:>7.3f}" if r.t_tflm
                     else f"{'n/a':>8} {'':>7}")
        print(f"{r.model:<31} {r.t_compile:>9.2f} {r.arena:>8,} {r.bound:>8,} {tflm_b:>14} "
              f"{r.weights:>10,} {r.tflite_consts:>8,} {r.weights / r.tflite_consts:>5.2f} "
              f"{c_ms:>7.3f} {tflm_cols} {o_ms:>7.3f} {c_ms / o_ms:>6.2f} {r.exact:>6.1%} "
              f"{r.onnx_lsb:>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
