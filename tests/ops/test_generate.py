"""Generators (ConstantOfShape, Range, EyeLike, OneHot) against onnxruntime: folded into constant
data when small (the graph may then have no inputs: the bundle copies the constant into the
output), written by a fill kernel when large, and OneHot's run-time indices."""

from __future__ import annotations

import tempfile

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from opcheck import check, compile_and_run, make_model, rand

import aotc
from aotc.errors import AotcError

EXACT = {"atol": 0.0, "rtol": 0.0}


def one_node(op: str, inputs: dict[str, np.ndarray], inits: dict[str, np.ndarray],
             out_dtype: type, out_shape: list[int] | None, opset: int = 17,
             **attrs: object) -> tuple[object, dict[str, np.ndarray]]:
    node = helper.make_node(op, [*inputs, *inits], ["y"], name="n", **attrs)
    return make_model([node], inputs, {"y": (out_dtype, out_shape)}, inits, opset), inputs


def run(op: str, inputs: dict[str, np.ndarray], inits: dict[str, np.ndarray], out_dtype: type,
        out_shape: list[int] | None, opset: int = 17, **attrs: object) -> aotc.Bundle:
    """Against onnxruntime; for the type combinations it does not implement (EyeLike to bool,
    OneHot of int8 indices, ...) against ONNX's own reference evaluator."""
    m, feeds = one_node(op, inputs, inits, out_dtype, out_shape, opset, **attrs)
    try:
        return check(m, feeds, **EXACT)
    except ort.capi.onnxruntime_pybind11_state.NotImplemented:
        pass
    (want,) = ReferenceEvaluator(m).run(None, feeds)
    with tempfile.TemporaryDirectory() as d:
        got, bundle = compile_and_run(m, feeds, d)
    assert got["y"].dtype == np.dtype(out_dtype) and got["y"].shape == want.shape
    np.testing.assert_array_equal(got["y"], np.asarray(want).astype(out_dtype))
    return bundle


def n_inputs(bundle: aotc.Bundle) -> int:
    return len(bundle.compilation.graph.inputs)


def expect_error(model: object, match: str) -> None:
    with tempfile.TemporaryDirectory() as d, pytest.raises(AotcError, match=match):
        aotc.compile(model, d, name="m")


# ----------------------------------------------------------------------------- ConstantOfShape
@pytest.mark.parametrize("value", [None, np.array([1.5], np.float32), np.array([-3], np.int32),
                                   np.array([2**40], np.int64), np.array([True]),
                                   np.array([7], np.uint8)])
def test_constant_of_shape_without_inputs(value):
    # The graph has no inputs: its output is a folded constant copied into the user's buffer.
    attrs = {} if value is None else {"value": numpy_helper.from_array(value, "value")}
    dt = np.float32 if value is None else value.dtype
    bundle = run("ConstantOfShape", {}, {"shape": np.array([2, 3], np.int64)}, dt, [2, 3],
                 **attrs)
    assert n_inputs(bundle) == 0


def test_constant_of_shape_zero_dim():
    run("ConstantOfShape", {}, {"shape": np.array([3, 0], np.int64)}, np.float32, [3, 0])


def test_large_constant_of_shape_is_a_fill_kernel():
    # 64x64 floats are far more than the 16-byte shape: a loop, not a 16 KB table.
    value = numpy_helper.from_array(np.array([0.25], np.float32), "value")
    bundle = run("ConstantOfShape", {}, {"shape": np.array([64, 64], np.int64)}, np.float32,
                 [64, 64], value=value)
    assert bundle.weights_bytes < 1024


def test_constant_of_shape_feeds_an_add():
    x = rand(2, 3, seed=1)
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c"],
                              value=numpy_helper.from_array(np.array([2.0], np.float32))),
             helper.make_node("Add", ["x", "c"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [2, 3])},
                   {"shape": np.array([2, 3], np.int64)})
    check(m, {"x": x})


def test_constant_of_shape_negative_dim_is_an_error():
    m, _ = one_node("ConstantOfShape", {}, {"shape": np.array([2, -1], np.int64)}, np.float32,
                    None)
    expect_error(m, "negative dim")


# ---------------------------------------------------------------------------------------- Range
RANGES = [  # (dtype, start, limit, delta)
    (np.float32, 1.0, 5.0, 2.0),
    (np.float32, 0.5, -2.0, -0.75),
    (np.int32, 10, 6, -3),
    (np.int64, -5, 20, 4),
    (np.int16, 0, 9, 1),
    (np.int32, 5, 5, 1),  # empty
    (np.float32, 3.0, 1.0, 1.0),  # empty
]


@pytest.mark.parametrize("dtype,start,limit,delta", RANGES,
                         ids=[f"{np.dtype(r[0]).name}-{r[1]}-{r[2]}-{r[3]}" for r in RANGES])
def test_range(dtype, start, limit, delta):
    inits = {k: np.array(v, dtype) for k, v in
             (("start", start), ("limit", limit), ("delta", delta))}
    n = max(int(np.ceil((limit - start) / delta)), 0)
    run("Range", {}, inits, dtype, [n])


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_large_range_is_a_kernel(dtype):
    inits = {"start": np.array(3, dtype), "limit": np.array(4003, dtype),
             "delta": np.array(2, dtype)}
    bundle = run("Range", {}, inits, dtype, [2000])
    assert bundle.weights_bytes < 1024


def test_range_feeds_a_mul():
    x = rand(8, seed=2)
    nodes = [helper.make_node("Range", ["s", "l", "d"], ["r"]),
             helper.make_node("Mul", ["x", "r"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [8])},
                   {"s": np.array(0.0, np.float32), "l": np.array(4.0, np.float32),
                    "d": np.array(0.5, np.float32)})
    check(m, {"x": x})


def test_range_zero_delta_is_an_error():
    inits = {k: np.array(v, np.int32) for k, v in (("s", 0), ("l", 4), ("d", 0))}
    m, _ = one_node("Range", {}, inits, np.int32, None)
    expect_error(m, "delta must be non-zero")


def test_range_needs_constant_inputs():
    m, feeds = one_node("Range", {"s": np.array(0, np.int32)},
                        {"l": np.array(4, np.int32), "d": np.array(1, np.int32)}, np.int32, None)
    expect_error(m, "must be a compile-time constant")


# -------------------------------------------------------------------------------------- EyeLike
@pytest.mark.parametrize("shape,k", [((4, 4), 0), ((4, 5), 1), ((5, 3), -2), ((3, 3), 7),
                                     ((2, 6), -1)])
def test_eyelike_of_a_runtime_input(shape, k):
    # The input's data is never read: one kernel writes the diagonal.
    x = rand(*shape, seed=3)
    run("EyeLike", {"x": x}, {}, np.float32, list(shape), k=k)


@pytest.mark.parametrize("dtype,to", [(np.int32, None), (np.float32, 6), (np.int64, 1),
                                      (np.int32, 9), (np.float32, 2)])
def test_eyelike_dtype(dtype, to):
    x = rand(3, 4, seed=4, dtype=dtype)
    attrs = {} if to is None else {"dtype": to}
    out = {None: dtype, 6: np.int32, 1: np.float32, 9: np.bool_, 2: np.uint8}[to]
    run("EyeLike", {"x": x}, {}, out, [3, 4], k=1, **attrs)


def test_eyelike_of_a_constant_folds():
    # A constant input: the identity matrix is constant data and the graph has no inputs.
    bundle = run("EyeLike", {}, {"c": np.zeros((3, 3), np.float32)}, np.float32, [3, 3], k=-1)
    assert n_inputs(bundle) == 0


def test_eyelike_of_a_vector_is_an_error():
    m, _ = one_node("EyeLike", {"x": rand(4)}, {}, np.float32, None)
    expect_error(m, "must be 2-D")


# --------------------------------------------------------------------------------------- OneHot
ONEHOT = [  # (indices, depth, axis)
    (np.array([0, 7, 8, 3], np.int64), 10, -1),
    (np.array([[1, -2], [9, -11]], np.int64), 10, 1),  # negative and out-of-range
    (np.array([[1.0, 9.0], [2.0, -4.0]], np.float32), 10, 0),
    (np.array([[1, 2, 0], [4, 4, 3]], np.int32), 5, -2),
    (np.array([3, 0, 200], np.uint8), 4, 0),
    (np.array([[2]], np.int8), 3, 2),
]


@pytest.mark.parametrize("indices,depth,axis", ONEHOT,
                         ids=[f"{i.dtype.name}-{d}-axis{a}" for i, d, a in ONEHOT])
@pytest.mark.parametrize("values", [np.array([0.5, -2.0], np.float32),
                                    np.array([3, 7], np.int64)])
def test_onehot(indices, depth, axis, values):
    shape = list(indices.shape)
    shape.insert(axis + indices.ndim + 1 if axis < 0 else axis, depth)
    run("OneHot", {"i": indices}, {"depth": np.array(depth, np.int64), "values": values},
        values.dtype, shape, opset=11, axis=axis)


def test_onehot_float_depth():
    i = np.array([0, 2, -1], np.int32)
    run("OneHot", {"i": i}, {"depth": np.array(3.0, np.float32),
                             "values": np.array([0, 1], np.int32)}, np.int32, [3, 3], opset=11)


def test_onehot_needs_two_values():
    m, _ = one_node("OneHot", {"i": np.array([0, 1], np.int64)},
                    {"d": np.array(3, np.int64), "v": np.array([0, 1, 2], np.float32)},
                    np.float32, None, opset=11)
    expect_error(m, r"values must be \[off_value, on_value\]")


def test_onehot_depth_must_be_constant():
    m, _ = one_node("OneHot", {"i": np.array([0, 1], np.int64), "d": np.array(3, np.int64)},
                    {"v": np.array([0, 1], np.float32)}, np.float32, None, opset=11)
    expect_error(m, "input 1 must be a compile-time constant")
