"""Reduce* ops, ArgMax and ArgMin against onnxruntime: axes as attribute (old opsets) and as a
constant input (ReduceSum >= 13, the others >= 18), keepdims, noop_with_empty_axes,
select_last_index, epilogue fusion and the rejected cases."""

import numpy as np
import pytest
from onnx import helper
from opcheck import check, check_node, make_model, rand

import aotc
from aotc.errors import AotcError

TOL = dict(atol=1e-5, rtol=1e-5)
TOL_TRANSCENDENTAL = dict(atol=1e-5, rtol=2e-5)

OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
       "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
AXES_INPUT_SINCE = {op: 13 if op == "ReduceSum" else 18 for op in OPS}

CASES = [  # (shape, axes (None: attribute/input omitted), keepdims)
    ((2, 3, 4), [1], 1),
    ((2, 3, 4), [1], 0),
    ((2, 3, 4), [0, 2], 0),
    ((2, 3, 4), [-1], 1),
    ((2, 3, 4), None, 1),
    ((2, 3, 4), None, 0),  # rank-0 output
    ((6,), [0], 0),
    ((2, 3, 4, 5), [1, 3], 1),
    ((2, 3, 4, 5), [0, 1, 2], 0),
]
IDS = [f"{s}-axes{a}-keep{k}" for s, a, k in CASES]


def _data(op, shape, seed=0):
    if op == "ReduceLogSum":
        return rand(*shape, seed=seed, lo=0.1, hi=2.0)  # log of a positive sum
    if op == "ReduceProd":
        return rand(*shape, seed=seed, lo=-1.5, hi=1.5)
    return rand(*shape, seed=seed)


def _tol(op):
    transcendental = ("ReduceL2", "ReduceLogSum", "ReduceLogSumExp")
    return TOL_TRANSCENDENTAL if op in transcendental else TOL


@pytest.mark.parametrize("shape,axes,keepdims", CASES, ids=IDS)
@pytest.mark.parametrize("op", OPS)
def test_reduce_axes_attribute(op, shape, axes, keepdims):
    attrs = {"keepdims": keepdims} if axes is None else {"axes": axes, "keepdims": keepdims}
    check_node(op, {"x": _data(op, shape)}, attrs, opset=11, **_tol(op))


@pytest.mark.parametrize("shape,axes,keepdims", CASES, ids=IDS)
@pytest.mark.parametrize("op", OPS)
def test_reduce_axes_input(op, shape, axes, keepdims):
    inits = {} if axes is None else {"axes": np.array(axes, np.int64)}
    check_node(op, {"x": _data(op, shape, seed=1)}, {"keepdims": keepdims}, initializers=inits,
               opset=AXES_INPUT_SINCE[op], **_tol(op))


@pytest.mark.parametrize("opset", [11, 13, 17, 18])
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax"])
def test_reduce_axes_form_follows_opset(op, opset):
    # ReduceSum takes axes as an input from 13, ReduceMean/ReduceMax from 18.
    x = rand(3, 4, 5, seed=2)
    if opset >= AXES_INPUT_SINCE[op]:
        check_node(op, {"x": x}, {"keepdims": 0}, initializers={"axes": np.array([0, 2])},
                   opset=opset, **TOL)
    else:
        check_node(op, {"x": x}, {"axes": [0, 2], "keepdims": 0}, opset=opset, **TOL)


@pytest.mark.parametrize("axes_input", ["omitted", "empty"])
@pytest.mark.parametrize("op", OPS)
def test_noop_with_empty_axes(op, axes_input):
    # No axes + noop: each element is "reduced" alone (so ReduceSumSquare still squares).
    inits = {"axes": np.array([], np.int64)} if axes_input == "empty" else {}
    check_node(op, {"x": _data(op, (2, 3), seed=3)}, {"noop_with_empty_axes": 1},
               initializers=inits, opset=AXES_INPUT_SINCE[op], **_tol(op))


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceL2"])
def test_empty_axes_input_without_noop_reduces_everything(op):
    check_node(op, {"x": _data(op, (2, 3, 2), seed=4)}, {"keepdims": 1},
               initializers={"axes": np.array([], np.int64)}, opset=AXES_INPUT_SINCE[op],
               **_tol(op))


def test_reduce_logsumexp_is_stable_for_large_inputs():
    x = np.array([[1000.0, 999.0, 998.0], [-1000.0, -1001.0, -999.5]], np.float32)
    check_node("ReduceLogSumExp", {"x": x}, {"axes": [1]}, opset=13, **TOL_TRANSCENDENTAL)


def test_reduce_larger_tensor():
    # A longer reduction (1024 elements per output) stays within float32 rounding of ORT.
    x = rand(2, 1024, seed=5)
    check_node("ReduceMean", {"x": x}, {"axes": [1]}, opset=13, atol=1e-5, rtol=1e-4)


def test_reduce_mean_fuses_with_relu():
    x = rand(2, 3, 4, seed=6)
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[2], keepdims=1),
             helper.make_node("Relu", ["m"], ["y"])]
    bundle = check(make_model(nodes, {"x": x}, {"y": (np.float32, [2, 3, 1])}, opset=13),
                   {"x": x}, **TOL)
    assert len(bundle.kernels) == 1


# ------------------------------------------------------------------------------ ArgMax/ArgMin
ARG_CASES = [  # (opset, shape, attrs)
    (11, (2, 3, 4), {}),
    (11, (2, 3, 4), {"axis": 1, "keepdims": 0}),
    (11, (2, 3, 4), {"axis": -1}),
    (13, (2, 3, 4), {"axis": 2, "select_last_index": 1}),
    (13, (2, 3, 4), {"axis": 0, "keepdims": 0, "select_last_index": 1}),
    (13, (5,), {"axis": 0, "keepdims": 0}),
    (18, (3, 1, 2), {"axis": 1, "select_last_index": 1}),
]


@pytest.mark.parametrize("opset,shape,attrs", ARG_CASES,
                         ids=[f"opset{o}-{s}-{a}" for o, s, a in ARG_CASES])
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_argmax_argmin(op, opset, shape, attrs):
    # Rounded data has ties, so first-vs-last index selection matters.
    x = np.round(rand(*shape, seed=7))
    keep = bool(attrs.get("keepdims", 1))
    out_shape = list(np.argmax(x, axis=attrs.get("axis", 0), keepdims=keep).shape)
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    check(make_model([node], {"x": x}, {"y": (np.int64, out_shape)}, opset=opset), {"x": x})


@pytest.mark.parametrize("op", OPS + ["ArgMax", "ArgMin"])
def test_constant_input_folds_with_the_reference(op):
    # A reduction of a constant is computed at compile time by the numpy reference: check it.
    c = _data(op, (3, 4, 2), seed=8)
    if op.startswith("Arg"):
        c = np.round(c)  # ties, resolved by select_last_index
        attrs = {"axis": 1, "keepdims": 0, "select_last_index": 1}
    else:
        attrs = {"axes": [0, 2], "keepdims": 0}
    nodes = [helper.make_node(op, ["c"], ["r"], **attrs),
             helper.make_node("Cast", ["r"], ["f"], to=1),
             helper.make_node("Add", ["f", "x"], ["y"])]
    out = [3, 2] if op.startswith("Arg") else [4]
    x = rand(*out, seed=9)
    # Opset 12: axes is still an attribute everywhere, and select_last_index exists.
    m = make_model(nodes, {"x": x}, {"y": (np.float32, out)}, {"c": c}, opset=12)
    bundle = check(m, {"x": x}, **_tol(op))
    assert len(bundle.kernels) == 1  # only the Add is left


# ------------------------------------------------------------------------------ rejected
def _compile(tmp_path, node, x, opset, inits=None, extra_inputs=None):
    m = make_model([node], {"x": x, **(extra_inputs or {})}, {"y": (np.float32, None)},
                   inits, opset)
    return aotc.compile(m, tmp_path, name="m")


def test_non_constant_axes_input_is_rejected(tmp_path):
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], name="rs")
    with pytest.raises(AotcError, match="input 1 must be a compile-time constant"):
        _compile(tmp_path, node, rand(2, 3), 13, extra_inputs={"axes": np.array([1])})


@pytest.mark.parametrize("axes,match", [([3], "axis 3 is out of range for rank 2"),
                                        ([1, -1], "name a dimension twice")])
def test_bad_axes_are_rejected(tmp_path, axes, match):
    node = helper.make_node("ReduceMean", ["x"], ["y"], name="rm", axes=axes)
    with pytest.raises(AotcError, match=match):
        _compile(tmp_path, node, rand(2, 3), 13)


def test_argmax_axis_out_of_range_is_rejected(tmp_path):
    node = helper.make_node("ArgMax", ["x"], ["y"], name="am", axis=-3)
    with pytest.raises(AotcError, match="axis -3 is out of range"):
        _compile(tmp_path, node, rand(2, 3), 13)


def test_reduce_float_only_ops_reject_integers(tmp_path):
    node = helper.make_node("ReduceL2", ["x"], ["y"], name="rl2")
    with pytest.raises(AotcError, match="dtype int32"):
        _compile(tmp_path, node, np.zeros((2, 3), np.int32), 11)


def test_reduce_bool_needs_opset_20(tmp_path):
    node = helper.make_node("ReduceMax", ["x"], ["y"], name="rm")
    with pytest.raises(AotcError, match="has type bool; ReduceMax-18 allows"):
        _compile(tmp_path, node, np.zeros((2, 3), np.bool_), 18)


# ------------------------------------------------------------------------------ dtypes, empty
INT_CASES = [  # (op, dtype) pairs onnxruntime implements
    ("ReduceSum", np.int32), ("ReduceSum", np.int64), ("ReduceMax", np.int32),
    ("ReduceMax", np.int64), ("ReduceMax", np.int8), ("ReduceMax", np.uint8),
    ("ReduceMin", np.int32), ("ReduceMin", np.int8), ("ReduceMin", np.uint8),
    ("ReduceProd", np.int32), ("ReduceProd", np.int64), ("ReduceMean", np.int32),
    ("ReduceL1", np.int32), ("ReduceL1", np.int64), ("ReduceSumSquare", np.int32),
    ("ReduceSumSquare", np.int64),
]


@pytest.mark.parametrize("op,dtype", INT_CASES, ids=[f"{o}-{np.dtype(d).name}"
                                                      for o, d in INT_CASES])
def test_reduce_integer_dtypes(op, dtype):
    lo = 0 if np.dtype(dtype).kind == "u" else -7
    x = rand(2, 3, 4, seed=10, dtype=dtype, lo=lo, hi=7)
    _check_typed(op, x, {"keepdims": 0}, [1], AXES_INPUT_SINCE[op], [2, 4])


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_max_min_bool(op, keepdims):
    x = rand(3, 4, seed=11, dtype=np.int32, lo=0, hi=1).astype(np.bool_)
    x[0] = True
    x[1] = False
    _check_typed(op, x, {"keepdims": keepdims}, [-1], 20, [3, 1] if keepdims else [3])


def _check_typed(op, x, attrs, axes, opset, out_shape):
    """check_node declares float outputs: integer and bool reductions declare their own."""
    node = helper.make_node(op, ["x", "axes"], ["y"], **attrs)
    m = make_model([node], {"x": x}, {"y": (x.dtype, out_shape)},
                   {"axes": np.array(axes, np.int64)}, opset=opset)
    check(m, {"x": x})


@pytest.mark.parametrize("op", [op for op in OPS if op != "ReduceMean"])  # mean: undefined
def test_reduce_over_empty_set_is_the_identity(op):
    # Reducing a zero-size axis: no kernel, the identity (0, 1, -inf, inf, log 0) as a constant.
    x = np.zeros((2, 0, 3), np.float32)
    bundle = check_node(op, {"x": x}, {"keepdims": 1}, initializers={"axes": np.array([1])},
                        opset=AXES_INPUT_SINCE[op])
    assert all(k.startswith("copy") or "copy" in k for k in bundle.kernels), bundle.kernels


def test_reduce_of_a_zero_size_intermediate():
    # Square of an empty input is empty (no kernel, no arena bytes); the sum is zeros.
    x = np.zeros((2, 0, 3), np.float32)
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]),
             helper.make_node("ReduceSum", ["sq", "axes"], ["y"], keepdims=0)]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [2, 3])}, {"axes": np.array([1])},
                   opset=13)
    check(m, {"x": x})


def test_reduce_with_zero_size_output():
    x = np.zeros((0, 3), np.float32)
    check_node("ReduceSum", {"x": x}, {"keepdims": 0}, initializers={"axes": np.array([1])},
               opset=13)
