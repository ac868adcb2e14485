"""Op-test harness: build a one-node (or small) ONNX model, compile it with aotc, run the
generated C through cffi and compare with onnxruntime (the oracle; never aotc's own reference).

Every compile builds with -std=c99 -Wall -Wextra -Werror -pedantic (aotc.targets.host does) and the
generated sources are scanned for malloc/free/printf. check() then runs the same bundle on the
QEMU boards in AOTC_TEST_BOARDS (see run_on_boards) and compares with the host build.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import aotc

NP_TO_ONNX = {np.dtype(k): v for k, v in {
    "float32": TensorProto.FLOAT, "int8": TensorProto.INT8, "uint8": TensorProto.UINT8,
    "int16": TensorProto.INT16, "uint16": TensorProto.UINT16, "int32": TensorProto.INT32,
    "int64": TensorProto.INT64, "bool": TensorProto.BOOL, "uint32": TensorProto.UINT32,
    "uint64": TensorProto.UINT64}.items()}
FORBIDDEN = re.compile(r"\b(malloc|calloc|realloc|free|printf|fprintf|puts)\s*\(")


def make_model(nodes: Sequence[onnx.NodeProto], inputs: Mapping[str, np.ndarray],
               outputs: Mapping[str, tuple[Any, Sequence[int] | None]],
               initializers: Mapping[str, np.ndarray] | None = None, opset: int = 17,
               ) -> onnx.ModelProto:
    """inputs: name -> example array (its dtype/shape declare the input);
    outputs: name -> (numpy dtype, shape or None)."""
    g = helper.make_graph(
        list(nodes), "test",
        [helper.make_tensor_value_info(k, NP_TO_ONNX[v.dtype], list(v.shape))
         for k, v in inputs.items()],
        [helper.make_tensor_value_info(k, NP_TO_ONNX[np.dtype(dt)], shape)
         for k, (dt, shape) in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    return m


def ort_run(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, dict(feeds))))


def compile_and_run(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray],
                    out_dir: str | Path | None = None, **opts: Any
                    ) -> tuple[dict[str, np.ndarray], aotc.Bundle]:
    tmp = None
    if out_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="aotc_test_")
        out_dir = tmp.name
    try:
        opts.setdefault("verify_ir", True)  # ir.verify after every pass
        bundle = aotc.compile(model, out_dir, name=opts.pop("name", "m"), **opts)
        for f in Path(out_dir).glob("*.c"):
            text = f.read_text()
            assert not FORBIDDEN.search(text), f"{f.name} calls a forbidden function"
        outs = bundle.load().run(feeds)
        return outs, bundle
    finally:
        if tmp is not None:
            tmp.cleanup()


def check(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], atol: float = 1e-5,
          rtol: float = 1e-5, **opts: Any) -> aotc.Bundle:
    """Compile + run through cffi and assert closeness to onnxruntime, then run the same
    bundle on the boards of AOTC_TEST_BOARDS against the host outputs. Returns the bundle."""
    onnx.checker.check_model(model)
    want = ort_run(model, feeds)
    with tempfile.TemporaryDirectory(prefix="aotc_test_") as tmp:
        out_dir = opts.pop("out_dir", None) or Path(tmp) / "bundle"
        got, bundle = compile_and_run(model, feeds, out_dir, **opts)
        assert set(got) == set(want), (sorted(got), sorted(want))
        for k in want:
            w, g = np.asarray(want[k]), got[k]
            assert g.shape == w.shape, f"{k}: shape {g.shape} != {w.shape}"
            assert g.dtype == w.dtype, f"{k}: dtype {g.dtype} != {w.dtype}"
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=k)
            else:
                np.testing.assert_array_equal(g, w, err_msg=k)
        run_on_boards(bundle, feeds, got, Path(tmp) / "fw")
    return bundle


# --- the same bundle on emulated boards ------------------------------------------------------

DEFAULT_TEST_BOARDS = "cortex-m4f,cortex-m0plus"
# Outcomes per (board, "ran" | "does-not-fit"), in this process; with AOTC_TEST_BOARDS_LOG set,
# one JSON line per board run is appended there too (xdist workers are separate processes).
BOARD_RUNS: Counter[tuple[str, str]] = Counter()
# libm functions that are not correctly rounded: newlib/picolibc and glibc may differ in the
# last bit or two (the board test's expf(1.25f) differs by 1 ulp). sqrtf, fabsf, floorf, fmodf,
# fminf and friends are exact everywhere, so they do not relax the comparison.
INEXACT_LIBM = re.compile(
    r"\b(?:exp|exp2|expm1|log|log2|log10|log1p|pow|sin|cos|tan|asin|acos|atan|atan2|sinh|"
    r"cosh|tanh|asinh|acosh|atanh|erf|erfc|tgamma|lgamma|cbrt|hypot)f?\s*\(")


def hook_boards() -> list[str]:
    """Boards from AOTC_TEST_BOARDS (comma-separated; the empty string disables)."""
    value = os.environ.get("AOTC_TEST_BOARDS", DEFAULT_TEST_BOARDS)
    return [b.strip() for b in value.split(",") if b.strip()]


def run_on_boards(bundle: aotc.Bundle, feeds: Mapping[str, np.ndarray],
                  host: Mapping[str, np.ndarray], build_root: Path) -> None:
    """Runs the bundle on each test board it fits and asserts the outputs equal the host
    build's. A bundle that does not fit a board (the micro:bit has 16 KB of RAM) skips that
    board silently; it is counted in BOARD_RUNS and the log."""
    from aotc.targets.runner import BoardRunner, DoesNotFit

    sources = "".join(f.read_text() for f in sorted(Path(bundle.directory).glob("*.c")))
    # Same C, same flags (-ffp-contract=off), IEEE float on every target: float outputs are
    # bit for bit the host's unless a libm call that is not correctly rounded is involved.
    inexact = INEXACT_LIBM.search(sources) is not None
    for board in hook_boards():
        start = time.monotonic()
        try:
            runner = BoardRunner(bundle.directory, board, build_dir=build_root / board)
        except DoesNotFit:
            _record(board, "does-not-fit", bundle, start)
            continue
        got = runner.run(feeds)
        for k, h in host.items():
            g, where = got[k], f"{k} on {board} vs host"
            assert g.shape == h.shape and g.dtype == h.dtype, (where, g.shape, g.dtype)
            if h.dtype.kind == "f" and inexact:
                np.testing.assert_allclose(g, h, rtol=1e-5, atol=1e-6, equal_nan=True,
                                           err_msg=where)
            elif h.dtype.kind == "f":
                _assert_bit_exact(g, h, where)
            else:
                np.testing.assert_array_equal(g, h, err_msg=where)
        _record(board, "ran", bundle, start)


def _assert_bit_exact(got: np.ndarray, want: np.ndarray, where: str) -> None:
    """Same bits, -0.0 and +0.0 told apart; NaNs only need the same places (x86 makes a
    negative default NaN, ARM a positive one)."""
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=f"{where}: NaN positions")
    uint = np.dtype(f"u{want.dtype.itemsize}")
    bad = (got.view(uint) != want.view(uint)) & ~nan
    assert not bad.any(), (f"{where}: {int(bad.sum())} values differ in their bits, e.g. "
                           f"{got[bad][:3]} vs {want[bad][:3]}")


def _record(board: str, outcome: str, bundle: aotc.Bundle, start: float) -> None:
    BOARD_RUNS[board, outcome] += 1
    log = os.environ.get("AOTC_TEST_BOARDS_LOG")
    if log:
        line = {"test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0],
                "board": board, "outcome": outcome, "seconds": round(time.monotonic() - start, 3),
                "kernels": len(bundle.kernels)}
        with open(log, "a") as f:
            f.write(json.dumps(line) + "\n")


def check_node(op: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any] | None = None,
               initializers: Mapping[str, np.ndarray] | None = None, n_outputs: int = 1,
               opset: int = 17, atol: float = 1e-5, rtol: float = 1e-5,
               input_names: Sequence[str] | None = None, **opts: Any) -> aotc.Bundle:
    """One-node model: graph inputs from ``inputs``, constant inputs from ``initializers``
    (node input order: input_names, default inputs then initializers)."""
    names = list(input_names) if input_names is not None else [*inputs, *(initializers or {})]
    outs = [f"out{k}" for k in range(n_outputs)]
    node = helper.make_node(op, names, outs, name=f"{op.lower()}_node", **dict(attrs or {}))
    model = make_model([node], inputs, {o: (np.float32, None) for o in outs}, initializers,
                       opset)
    # Let onnx infer the real output types so the declared outputs are right.
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    vi = {v.name: v for v in inferred.graph.value_info}
    del model.graph.output[:]
    for o in outs:
        if o in vi:
            model.graph.output.append(vi[o])
        else:
            model.graph.output.append(
                [x for x in inferred.graph.output if x.name == o][0])
    feeds = {k: v for k, v in inputs.items()}
    return check(model, feeds, atol=atol, rtol=rtol, **opts)


def rand(*shape: int, seed: int = 0, dtype: Any = np.float32, lo: float = -2, hi: float = 2
         ) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(lo, hi, shape).astype(dtype)
    return rng.integers(int(lo), int(hi) + 1, shape).astype(dtype)
