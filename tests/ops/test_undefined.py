"""Edge values that are undefined behaviour in naive C: the bundle computes a defined result
(docs/operators.md, "Defined results"), on the host and on the boards of AOTC_TEST_BOARDS
(cortex-m0plus among the defaults), and scripts/sanitize.sh (ASan + UBSan) reports nothing.

The oracle is onnxruntime where it defines the result (wrap-around arithmetic, BitShift,
RoiAlign inside the batch). Where onnxruntime refuses the run (integer division by zero, a
batch index outside the batch), crashes (INT_MIN / -1: SIGFPE on x86) or returns whatever the
CPU's conversion instruction gives (float -> int out of range or NaN), the expected values are
written out below from numpy's integer semantics and the saturation rule, and onnxruntime is
still the oracle for the same model on the inputs it defines. Integer results are exact;
RoiAlign's float outputs within 1e-5.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from opcheck import NP_TO_ONNX, check, compile_and_run, make_model, ort_run, run_on_boards

ROOT = Path(__file__).resolve().parents[2]


def _model(nodes: list, inputs: Mapping[str, np.ndarray], outputs: Iterable[str],
           opset: int = 18, initializers: Mapping[str, np.ndarray] | None = None
           ) -> onnx.ModelProto:
    """The outputs' types and shapes are onnx's strict inference."""
    m = make_model(nodes, inputs, {}, initializers, opset)
    for o in outputs:
        m.graph.output.append(helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None))
    return onnx.shape_inference.infer_shapes(m, strict_mode=True)


def check_defined(model, feeds: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray],
                  atol: float = 0.0) -> None:
    """Host build against ``want`` (exact for integers), then the boards against the host."""
    with tempfile.TemporaryDirectory(prefix="aotc_test_") as tmp:
        got, bundle = compile_and_run(model, feeds, Path(tmp) / "bundle")
        for k, w in want.items():
            w = np.asarray(w)
            assert got[k].dtype == w.dtype, (k, got[k].dtype, w.dtype)
            if w.dtype.kind == "f":
                np.testing.assert_allclose(got[k], w, atol=atol, rtol=0, err_msg=k)
            else:
                np.testing.assert_array_equal(got[k], w, err_msg=k)
        run_on_boards(bundle, feeds, got, Path(tmp) / "fw")


def info(dt: type) -> np.iinfo:
    return np.iinfo(np.dtype(dt))


# ------------------------------------------------------------------ wrap-around (onnxruntime)
@pytest.mark.parametrize("dt", [np.int32, np.int64, np.int8, np.int16])
def test_add_sub_mul_neg_abs_wrap(dt):
    lo, hi = int(info(dt).min), int(info(dt).max)
    a = np.array([hi, lo, lo, hi, -1, lo, 3, hi // 2 + 1], dt)
    b = np.array([1, -1, lo, hi, lo, 2, -5, 2], dt)
    nodes = [helper.make_node(op, ["a", "b"], [op.lower()]) for op in ("Add", "Sub", "Mul")]
    nodes += [helper.make_node(op, ["a"], [op.lower()]) for op in ("Neg", "Abs")]
    check(_model(nodes, {"a": a, "b": b}, ("add", "sub", "mul", "neg", "abs")),
          {"a": a, "b": b})


def test_uint16_mul_wraps():
    """uint16 operands promote to int in C: 65535 * 65535 overflows it."""
    a = np.array([65535, 65535, 300, 2], np.uint16)
    check(_model([helper.make_node("Mul", ["a", "a"], ["y"])], {"a": a}, {"y": np.uint16}),
          {"a": a})


@pytest.mark.parametrize("dt", [np.int32, np.int64])
def test_cumsum_wraps(dt):
    lo, hi = int(info(dt).min), int(info(dt).max)
    x = np.array([[hi, 1, hi, lo], [lo, -1, lo, 3], [hi, hi, 2, 2]], dt)
    m = _model([helper.make_node("CumSum", ["x", "axis"], ["y"])], {"x": x}, ["y"],
               initializers={"axis": np.array(1, np.int64)})
    check(m, {"x": x})


@pytest.mark.parametrize("dt", [np.int32, np.int64])
def test_reduce_sum_prod_wrap(dt):
    """numpy's np.sum/np.prod in the dtype wrap around; onnxruntime 1.32 does not (ReduceSum
    of [MAX, 1, 0, 0] gives MAX there, ReduceProd of [MAX, MAX, 2, 2] MAX, not 4), so the
    overflowing rows are checked against numpy and onnxruntime is the oracle on the rows that
    do not overflow."""
    lo, hi = int(info(dt).min), int(info(dt).max)
    x = np.array([[hi, 1, hi, lo], [lo, -1, lo, 3], [hi, hi, 2, 2], [hi, 1, 0, 0],
                  [7, -3, 5, 2], [-9, 4, 1, 1]], dt)
    nodes = [helper.make_node(op, ["x", "axes"], [op], keepdims=0)
             for op in ("ReduceSum", "ReduceProd", "ReduceSumSquare")]
    axes = {"axes": np.array([1], np.int64)}
    m = _model(nodes, {"x": x}, ["ReduceSum", "ReduceProd", "ReduceSumSquare"],
               initializers=axes)
    check_defined(m, {"x": x}, {"ReduceSum": np.sum(x, axis=1, dtype=dt),
                                "ReduceProd": np.prod(x, axis=1, dtype=dt),
                                "ReduceSumSquare": np.sum(x * x, axis=1, dtype=dt)})
    small = x[4:]
    check(_model(nodes, {"x": small}, ["ReduceSum", "ReduceProd", "ReduceSumSquare"],
                 initializers=axes), {"x": small})


# ------------------------------------------------------------------ division (numpy, ORT refuses)
@pytest.mark.parametrize("dt", [np.int32, np.int64, np.int8, np.uint32, np.uint8])
def test_div_mod_by_zero_and_min_by_minus_one(dt):
    """x / 0 = 0 and x % 0 = 0 (numpy's integer results; onnxruntime refuses the run with
    "Integer division by zero"); INT_MIN / -1 = INT_MIN (numpy wraps; onnxruntime dies of
    SIGFPE) and INT_MIN % -1 = 0 (numpy and onnxruntime)."""
    signed = np.dtype(dt).kind == "i"
    lo = int(info(dt).min)
    a = np.array([7, 0, 9, 7, 9] + ([-7, lo, lo, -7] if signed else [200, 5, 1, 3]), dt)
    b = np.array([0, 0, 2, 3, 4] + ([0, -1, 1, 2] if signed else [0, 0, 7, 3]), dt)
    div = [0, 0, 4, 2, 2] + ([0, lo, lo, -3] if signed else [0, 0, 0, 1])
    mod = [0, 0, 1, 1, 1] + ([0, 0, 0, 1] if signed else [0, 0, 1, 0])  # sign of the divisor
    fmod = [0, 0, 1, 1, 1] + ([0, 0, 0, -1] if signed else [0, 0, 1, 0])  # sign of the dividend
    nodes = [helper.make_node("Div", ["a", "b"], ["div"]),
             helper.make_node("Mod", ["a", "b"], ["mod"], fmod=0),
             helper.make_node("Mod", ["a", "b"], ["fmod"], fmod=1)]
    m = _model(nodes, {"a": a, "b": b}, {"div": dt, "mod": dt, "fmod": dt})
    with np.errstate(all="ignore"):  # numpy agrees on mod and fmod, zeros included
        np.testing.assert_array_equal(np.mod(a, b), np.array(mod, dt))
        np.testing.assert_array_equal(np.fmod(a, b), np.array(fmod, dt))
    check_defined(m, {"a": a, "b": b}, {"div": np.array(div, dt), "mod": np.array(mod, dt),
                                        "fmod": np.array(fmod, dt)})
    ok = (b != 0) & ~((a == lo) & (b == -1)) if signed else b != 0
    sub = {"a": a[ok], "b": b[ok]}
    check(_model(nodes, sub, {"div": dt, "mod": dt, "fmod": dt}), sub)


# ------------------------------------------------------------------ BitShift (onnxruntime)
@pytest.mark.parametrize("dt", [np.uint8, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift_by_width_or_more_is_zero(dt, direction):
    w = 8 * np.dtype(dt).itemsize
    x = np.array([1, 1, 1, 1, int(info(dt).max), 5, int(info(dt).max)], dt)
    y = np.array([0, w - 1, w, w + 1, 200, 255, w // 2], dt)
    m = _model([helper.make_node("BitShift", ["x", "y"], ["z"], direction=direction)],
               {"x": x, "y": y}, {"z": dt})
    check(m, {"x": x, "y": y})


# ------------------------------------------------------------------ float -> int saturates
EDGES = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 1e20, -1e20, 300.7, -300.7, 127.9,
                  -128.9, 255.5, -0.7, -0.0, 2.5, 70000.0, -70000.0], np.float32)


def saturated(x: np.ndarray, dt: type) -> np.ndarray:
    """The documented rule, written out: truncate toward zero, NaN -> 0, clamp to the type."""
    out = []
    for v in np.asarray(x, np.float64).reshape(-1):
        if np.isnan(v):
            out.append(0)
        else:
            out.append(min(max(int(np.trunc(v)) if np.isfinite(v) else (1 << 70) * int(np.sign(v)),
                               int(info(dt).min)), int(info(dt).max)))
    return np.array(out, dt).reshape(np.shape(x))


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64])
def test_cast_float_to_int_saturates(dt):
    """onnxruntime converts with the CPU instruction (x86: INT_MIN for every int32 overflow
    and NaN); the bundle saturates. onnxruntime is the oracle on the values in range."""
    to = NP_TO_ONNX[np.dtype(dt)]
    nodes = [helper.make_node("Cast", ["x"], ["cast"], to=to),
             helper.make_node("Round", ["x"], ["r"]),
             helper.make_node("Cast", ["r"], ["round_cast"], to=to),
             helper.make_node("Floor", ["x"], ["f"]),
             helper.make_node("Cast", ["f"], ["floor_cast"], to=to)]
    m = _model(nodes, {"x": EDGES}, {"cast": dt, "round_cast": dt, "floor_cast": dt})
    check_defined(m, {"x": EDGES}, {"cast": saturated(EDGES, dt),
                                    "round_cast": saturated(np.round(EDGES), dt),
                                    "floor_cast": saturated(np.floor(EDGES), dt)})
    x = EDGES[np.isfinite(EDGES)]
    lo, hi = float(info(dt).min), float(info(dt).max)
    x = x[(np.floor(x) >= lo) & (np.ceil(x) <= hi)]
    check(_model(nodes, {"x": x}, {"cast": dt, "round_cast": dt, "floor_cast": dt}), {"x": x})


def test_pow_integer_base_float_exponent_saturates():
    x = np.array([2, 10, -3, 0, 3, -2], np.int32)
    y = np.array([40.0, 10.0, 0.5, -1.0, 2.0, 3.0], np.float32)
    m = _model([helper.make_node("Pow", ["x", "y"], ["z"])], {"x": x, "y": y}, {"z": np.int32})
    with np.errstate(all="ignore"):
        p = np.power(x.astype(np.float32), y)  # powf: 2^40, 1e10, NaN, inf, 9, -8
    check_defined(m, {"x": x, "y": y}, {"z": saturated(p, np.int32)})
    ok = np.isfinite(p) & (np.abs(p) < 2.0**31)
    check(_model([helper.make_node("Pow", ["x", "y"], ["z"])], {"x": x[ok], "y": y[ok]},
                 {"z": np.int32}), {"x": x[ok], "y": y[ok]})


# ------------------------------------------------------------------ NaN into a quantise
@pytest.mark.parametrize("dt, zp", [(np.int8, 5), (np.uint8, 128), (np.int16, -7)])
def test_quantize_linear_nan_gives_integer_zero(dt, zp):
    """A NaN reaching QuantizeLinear gives the integer 0 (the saturating conversion; it was a
    C cast of NaN, which UBSan's float-cast-overflow reports), +-inf the type's ends, the rest
    the ONNX formula. onnxruntime is the oracle on the finite values."""
    scale = np.float32(0.5)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])]
    inits = {"s": np.array(scale), "z": np.array(zp, dt)}
    m = _model(nodes, {"x": EDGES}, {"y": dt}, opset=21, initializers=inits)
    info_ = info(dt)
    with np.errstate(invalid="ignore"):
        q = np.clip(np.rint(EDGES / scale) + zp, info_.min, info_.max)
    want = np.where(np.isnan(EDGES), 0, q).astype(dt)
    check_defined(m, {"x": EDGES}, {"y": want})
    x = EDGES[np.isfinite(EDGES)]
    check(_model(nodes, {"x": x}, {"y": dt}, opset=21, initializers=inits), {"x": x})


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_grid_sample_nan_coordinate_is_defined(mode):
    """A NaN grid coordinate's float index is converted without UB (NaN -> index 0 before the
    in-range test); the other samples are onnxruntime's (1e-5)."""
    X = np.arange(2 * 4 * 5, dtype=np.float32).reshape(1, 2, 4, 5) / 7
    grid = np.random.default_rng(0).uniform(-1.2, 1.2, (1, 3, 3, 2)).astype(np.float32)
    bad = grid.copy()
    bad[0, 1, 1, 0] = np.nan
    bad[0, 2, 0, 1] = np.nan
    node = helper.make_node("GridSample", ["X", "grid"], ["Y"], mode=mode)
    m = _model([node], {"X": X, "grid": bad}, {"Y": np.float32}, opset=20)
    got, _ = compile_and_run(m, {"X": X, "grid": bad})
    want = ort_run(m, {"X": X, "grid": grid})["Y"]
    ok = ~np.isnan(bad).any(axis=-1)
    np.testing.assert_allclose(got["Y"][:, :, ok[0]], want[:, :, ok[0]], atol=1e-5, rtol=1e-5)


def test_deform_conv_nan_offset_is_defined():
    """A NaN sampling offset: no UB in the index conversion; the outputs it does not touch are
    onnxruntime's (1e-5)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1, 2, 5, 5)).astype(np.float32)
    W = rng.normal(size=(3, 2, 3, 3)).astype(np.float32)
    off = rng.uniform(-1, 1, (1, 18, 3, 3)).astype(np.float32)
    bad = off.copy()
    bad[0, 4, 1, 2] = np.nan
    node = helper.make_node("DeformConv", ["X", "W", "off"], ["Y"], kernel_shape=[3, 3])
    m = _model([node], {"X": X, "W": W, "off": bad}, {"Y": np.float32}, opset=19)
    got, _ = compile_and_run(m, {"X": X, "W": W, "off": bad})
    want = ort_run(m, {"X": X, "W": W, "off": off})["Y"]
    mask = np.ones(want.shape, bool)
    mask[:, :, 1, 2] = False
    np.testing.assert_allclose(got["Y"][mask], want[mask], atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------ RoiAlign at run time
def _roialign(ratio: int):
    X = np.arange(2 * 3 * 5 * 6, dtype=np.float32).reshape(2, 3, 5, 6) / 10
    rois = np.array([[-50, -50, 80, 90], [1, 1, 3, 3], [4.5, 3.5, 40, 30],
                     [-1e3, -1e3, 5e2, 5e2], [-9, -9, -4, -3], [5.9, 4.9, 6.5, 5.5]], np.float32)
    node = helper.make_node("RoiAlign", ["X", "rois", "bi"], ["Y"], output_height=2,
                            output_width=3, sampling_ratio=ratio)
    bi = np.array([0, 1, 1, 0, 1, 0], np.int64)
    return node, X, rois, bi


@pytest.mark.parametrize("ratio", [0, 2])
def test_roialign_rois_outside_the_map(ratio):
    node, X, rois, bi = _roialign(ratio)
    if ratio == 0:  # a 1500-pixel ROI takes 750^2 samples per bin: keep the big ones at ratio 2
        rois, bi = rois[[1, 2, 4, 5]], bi[[1, 2, 4, 5]]
    feeds = {"X": X, "rois": rois, "bi": bi}
    check(_model([node], feeds, {"Y": np.float32}, opset=16), feeds, atol=1e-5, rtol=1e-5)


def test_roialign_batch_index_outside_the_batch_gives_zeros():
    """onnxruntime refuses the run ("batch_indices value 2 ... is out of range"); the bundle
    used to read outside X (ASan heap-buffer-overflow). A bad index's ROI gives zeros; the
    other ROIs are onnxruntime's."""
    node, X, rois, _ = _roialign(2)
    bi = np.array([0, 2, -1, 1, 7, 1], np.int64)
    bad = (bi < 0) | (bi >= X.shape[0])
    m = _model([node], {"X": X, "rois": rois, "bi": bi}, {"Y": np.float32}, opset=16)
    want = ort_run(m, {"X": X, "rois": rois, "bi": np.where(bad, 0, bi)})["Y"]
    want[bad] = 0.0
    check_defined(m, {"X": X, "rois": rois, "bi": bi}, {"Y": want}, atol=1e-5)


# ------------------------------------------------------------------ the sanitizer switch works
PROBE = textwrap.dedent('''
    import cffi
    import numpy as np
    from aotc.targets.host import build_shared

    def _lib(tmp_path):
        (tmp_path / "probe.c").write_text(
            "#include <stdint.h>\\n"
            "int32_t probe_add(int32_t a, int32_t b);\\n"
            "int32_t probe_load(const int32_t *p, int32_t i);\\n"
            "int32_t probe_add(int32_t a, int32_t b) { return a + b; }\\n"
            "int32_t probe_load(const int32_t *p, int32_t i) { return p[i]; }\\n")
        ffi = cffi.FFI()
        ffi.cdef("int32_t probe_add(int32_t, int32_t);"
                 "int32_t probe_load(const int32_t *, int32_t);")
        return ffi, ffi.dlopen(str(build_shared(tmp_path)))

    def test_signed_overflow(tmp_path):
        _, lib = _lib(tmp_path)
        lib.probe_add(2**31 - 1, 1)

    def test_read_past_the_end(tmp_path):
        ffi, lib = _lib(tmp_path)
        a = np.zeros(5, np.int32)
        lib.probe_load(ffi.from_buffer("int32_t[]", a), 5 + 16)

    def test_defined(tmp_path):
        _, lib = _lib(tmp_path)
        assert lib.probe_add(2, 3) == 5
''')


def test_sanitize_script_catches_ub(tmp_path):
    """scripts/sanitize.sh on a probe: a signed overflow and a read past a heap buffer each
    fail their test with the sanitizer's report; the defined call passes."""
    (tmp_path / "test_probe.py").write_text(PROBE)
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "AOTC_CACHE_DIR": str(tmp_path / "cache"),
           "AOTC_TEST_JOBS": "1"}
    res = subprocess.run(["bash", str(ROOT / "scripts" / "sanitize.sh"), str(tmp_path),
                          "--rootdir", str(tmp_path)], capture_output=True, text=True,
                         env=env, timeout=600, cwd=ROOT)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-3000:]
    assert "runtime error: signed integer overflow" in out, out[-3000:]
    assert "AddressSanitizer: heap-buffer-overflow" in out, out[-3000:]
    assert "2 failed, 1 passed" in out, out[-3000:]


def test_sanitize_flags_are_in_the_cache_key(tmp_path, monkeypatch):
    from aotc.targets.host import build_shared

    (tmp_path / "k.c").write_text("int k(void);\nint k(void) { return 1; }\n")
    monkeypatch.setenv("AOTC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("AOTC_SANITIZE", raising=False)
    plain = build_shared(tmp_path)
    monkeypatch.setenv("AOTC_SANITIZE", "1")
    sanitized = build_shared(tmp_path)
    assert plain != sanitized
    assert b"__asan" in sanitized.read_bytes() and b"__asan" not in plain.read_bytes()
