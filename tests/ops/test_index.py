"""Indexing ops (GatherElements, GatherND, Scatter, ScatterElements, ScatterND, TensorScatter)
and the axis walkers (TopK, Trilu, CumSum, CumProd) against onnxruntime: indices as run-time
inputs (int64 and int32) and as constants, negative indices, every scatter reduction, and the
AotcErrors for what is not supported.

Gathers, scatters without arithmetic, TopK and Trilu only move elements: exact comparisons."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper
from opcheck import check, compile_and_run, make_model
from test_shape import EXACT, MOVE_DTYPES, data, expect_error

import aotc

I64 = np.int64


def run(op: str, names: Sequence[str], feeds: Mapping[str, np.ndarray],
        consts: Mapping[str, np.ndarray] | None = None, attrs: Mapping[str, Any] | None = None,
        n_outputs: int = 1, opset: int = 18, **tol: float) -> aotc.Bundle:
    """One ``op`` node with inputs ``names`` (in node order) taken from the graph inputs
    ``feeds`` or the initializers ``consts``; output types from onnx shape inference."""
    outs = [f"out{k}" for k in range(n_outputs)]
    node = helper.make_node(op, list(names), outs, name="n", **dict(attrs or {}))
    m = make_model([node], feeds, {o: (np.float32, None) for o in outs}, consts, opset)
    del m.graph.output[:]
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    vi = {v.name: v for v in inferred.graph.value_info}
    m.graph.output.extend(vi[o] for o in outs)
    return check(m, feeds, **(tol or EXACT))


def model(op: str, names: Sequence[str], feeds: Mapping[str, np.ndarray],
          consts: Mapping[str, np.ndarray] | None = None,
          attrs: Mapping[str, Any] | None = None, opset: int = 18,
          out_dtype: Any = np.float32) -> onnx.ModelProto:
    node = helper.make_node(op, list(names), ["y"], name="n", **dict(attrs or {}))
    return make_model([node], feeds, {"y": (out_dtype, None)}, consts, opset)


def idx(values: Any, dtype: Any = I64) -> np.ndarray:
    return np.array(values, dtype)


# ---------------------------------------------------------------------------- GatherElements
@pytest.mark.parametrize("dshape,axis,indices", [
    ((3, 3), 0, [[1, 2, 0], [2, 0, 0]]),
    ((3, 3), 1, [[0, -1], [-3, 1], [2, 2]]),
    ((2, 3, 4), -1, np.arange(24).reshape(2, 3, 4) % 7 - 3),
    ((4, 5), 0, [[3, -4, 0]]),  # indices smaller than data in the other dim
])
@pytest.mark.parametrize("idx_dtype", [I64, np.int32])
def test_gather_elements(dshape, axis, indices, idx_dtype):
    x = data(dshape)
    run("GatherElements", ["x", "i"], {"x": x, "i": idx(indices, idx_dtype)},
        attrs={"axis": axis}, opset=13)


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_gather_elements_dtypes_const_indices(dtype):
    run("GatherElements", ["x", "i"], {"x": data((3, 4), dtype)},
        {"i": idx([[3, 0, -1], [1, 1, 2]])}, attrs={"axis": 1}, opset=13)


def test_gather_elements_const_out_of_range_is_an_error():
    m = model("GatherElements", ["x", "i"], {"x": data((3, 3))}, {"i": idx([[0, 3]])},
              {"axis": 1}, opset=13)
    expect_error(m, r"index 3 is out of range for dim 3 \(axis 1\)")


# ---------------------------------------------------------------------------------- GatherND
@pytest.mark.parametrize("dshape,indices,batch_dims", [
    ((2, 2), [[0, 0], [1, 1]], 0),
    ((2, 2), [[1], [0]], 0),
    ((2, 2, 2), [[0, 1], [1, 0]], 0),
    ((2, 2, 2), [[[0, 1]], [[1, 0]]], 0),
    ((2, 2, 2), [[1], [0]], 1),
    ((2, 3, 4), [[[-1, 2], [0, -4]], [[1, 1], [2, 3]]], 1),
    ((2, 3, 4, 2), [[[0], [2]], [[1], [-1]]], 1),
    ((2, 3, 4), [[[1], [-2], [0]], [[3], [2], [2]]], 2),
])
def test_gather_nd(dshape, indices, batch_dims):
    run("GatherND", ["x", "i"], {"x": data(dshape), "i": idx(indices)},
        attrs={"batch_dims": batch_dims}, opset=13)


def test_gather_nd_int32_data_const_indices():
    run("GatherND", ["x", "i"], {"x": data((3, 4), np.int32)}, {"i": idx([[2, -1], [0, 0]])},
        opset=13)


# --------------------------------------------------------------------------- ScatterElements
REDUCTIONS = ["none", "add", "mul", "max", "min"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements_reductions(reduction, axis):
    x = data((3, 4))
    # Distinct targets for "none" (duplicates are order-dependent there).
    i = (idx([[1, -1, 0, 2], [0, 3, -2, 1]]) if axis else idx([[1, 0, -1, 2], [0, 2, 1, -3]]))
    if reduction != "none":
        i = idx([[1, 1, -1, 0], [-3, 1, 0, 0]]) if axis == 0 else idx([[1, 1, -1, 0],
                                                                        [0, 3, 3, -4]])
    run("ScatterElements", ["x", "i", "u"], {"x": x, "i": i, "u": data((2, 4), seed=1)},
        attrs={"axis": axis, "reduction": reduction}, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_scatter_elements_int_data(reduction, dtype):
    rng = np.random.default_rng(3)
    x = rng.integers(-5, 6, (2, 5)).astype(dtype)
    u = rng.integers(-5, 6, (2, 3)).astype(dtype)
    run("ScatterElements", ["x", "i", "u"], {"x": x, "i": idx([[4, 4, 0], [-1, 2, 2]]), "u": u},
        attrs={"axis": 1, "reduction": reduction})


def test_scatter_elements_int32_indices_3d():
    x, u = data((2, 3, 4)), data((2, 2, 4), seed=5)
    i = idx([[[0, 1, 2, -1], [1, 0, 0, 2]], [[2, 2, 1, 0], [-3, -2, -1, 1]]], np.int32)
    run("ScatterElements", ["x", "i", "u"], {"x": x, "i": i, "u": u}, attrs={"axis": 1},
        opset=13)


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_scatter_elements_const_indices_dtypes(dtype):
    run("ScatterElements", ["x", "i", "u"], {"x": data((3, 3), dtype), "u": data((1, 2), dtype)},
        {"i": idx([[2, -3]])}, attrs={"axis": 1}, opset=13)


@pytest.mark.parametrize("opset", [9, 10])
def test_scatter_deprecated(opset):
    run("Scatter", ["x", "i", "u"], {"x": data((3, 3)), "i": idx([[1, 0, 2], [0, 2, 1]]),
                                     "u": data((2, 3), seed=2)}, attrs={"axis": 0}, opset=opset)


def test_scatter_elements_reduction_not_in_opset_is_an_error():
    feeds = {"x": data((3,)), "i": idx([0]), "u": data((1,))}
    m = model("ScatterElements", ["x", "i", "u"], feeds, attrs={"reduction": "max"}, opset=16)
    expect_error(m, "reduction='max' is not supported at opset 16")


def test_scatter_elements_const_out_of_range_is_an_error():
    m = model("ScatterElements", ["x", "i", "u"], {"x": data((3,)), "u": data((1,))},
              {"i": idx([-4])})
    expect_error(m, r"index -4 is out of range for dim 3")


def test_scatter_elements_runtime_out_of_range_is_clamped():
    # Undefined in ONNX (onnxruntime raises): aotc clamps to the nearest end, never writes
    # outside the tensor.
    x, u = data((4,)), data((2,), seed=1)
    m = model("ScatterElements", ["x", "i", "u"], {"x": x, "i": idx([0, 1]), "u": u})
    got, _ = compile_and_run(m, {"x": x, "i": idx([9, -7]), "u": u})
    want = x.copy()
    want[3], want[0] = u[0], u[1]
    np.testing.assert_array_equal(got["y"], want)


# -------------------------------------------------------------------------------- ScatterND
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_nd_reductions(reduction):
    x = data((4, 4, 4))
    i = idx([[0], [2], [-1]]) if reduction == "none" else idx([[0], [2], [-4], [2]])
    u = data((i.shape[0], 4, 4), seed=1)
    run("ScatterND", ["x", "i", "u"], {"x": x, "i": i, "u": u},
        attrs={"reduction": reduction}, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dshape,indices", [
    ((8,), [[4], [3], [1], [7]]),
    ((3, 4), [[0, 1], [2, -1], [-3, 2]]),
    ((2, 3, 4), [[[1, 2]], [[0, -1]]]),
    ((2, 3, 4), [[1, 2, 3], [0, 0, -4]]),
])
@pytest.mark.parametrize("idx_dtype", [I64])
def test_scatter_nd_shapes(dshape, indices, idx_dtype):
    i = idx(indices, idx_dtype)
    ushape = (*i.shape[:-1], *dshape[i.shape[-1]:])
    run("ScatterND", ["x", "i", "u"], {"x": data(dshape), "i": i, "u": data(ushape, seed=4)},
        opset=13)


def test_scatter_nd_int64_data_add_const_indices():
    x, u = data((5, 2), I64), data((3, 2), I64, seed=1)
    run("ScatterND", ["x", "i", "u"], {"x": x, "u": u}, {"i": idx([[1], [-1], [1]])},
        attrs={"reduction": "add"})


def test_scatter_nd_bool_reduction_is_an_error():
    feeds = {"x": data((3,), np.bool_), "i": idx([[0]]), "u": data((1,), np.bool_)}
    m = model("ScatterND", ["x", "i", "u"], feeds, attrs={"reduction": "add"},
              out_dtype=np.bool_)
    expect_error(m, "reduction='add' on bool data")


# ---------------------------------------------------------------------------- TensorScatter
@pytest.mark.parametrize("mode,wi", [("linear", [0, 2]), ("linear", [3, 1]),
                                     ("circular", [3, 4]), ("circular", [0, 7])])
def test_tensor_scatter(mode, wi):
    past, upd = data((2, 3, 5, 4)), data((2, 3, 2, 4), seed=1)
    run("TensorScatter", ["p", "u", "w"], {"p": past, "u": upd, "w": idx(wi)},
        attrs={"mode": mode}, opset=24)


def test_tensor_scatter_no_write_indices_axis1():
    past, upd = data((2, 5, 3)), data((2, 2, 3), seed=1)
    run("TensorScatter", ["p", "u"], {"p": past, "u": upd}, attrs={"axis": 1}, opset=24)


# ------------------------------------------------------------------------------------- TopK
@pytest.mark.parametrize("shape,k,axis", [((3, 7), 3, 1), ((3, 7), 7, -1), ((4, 3, 5), 2, 0),
                                          ((4, 3, 5), 1, 1), ((6,), 0, 0)])
@pytest.mark.parametrize("largest", [1, 0])
def test_topk(shape, k, axis, largest):
    run("TopK", ["x", "k"], {"x": data(shape)}, {"k": idx([k])},
        attrs={"axis": axis, "largest": largest}, n_outputs=2, opset=11)


@pytest.mark.parametrize("largest", [1, 0])
def test_topk_ties_lower_index_first(largest):
    x = np.array([[1, 3, 3, 2, 1, 3], [0, 0, 0, 0, 0, 0]], np.float32)
    run("TopK", ["x", "k"], {"x": x}, {"k": idx([4])}, attrs={"largest": largest}, n_outputs=2,
        opset=11)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64])
def test_topk_dtypes(dtype):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 9, (3, 8)).astype(dtype)
    run("TopK", ["x", "k"], {"x": x}, {"k": idx([5])}, n_outputs=2, opset=11)


def test_topk_opset1_and_10():
    run("TopK", ["x"], {"x": data((2, 6))}, attrs={"k": 2}, n_outputs=2, opset=1)
    run("TopK", ["x", "k"], {"x": data((6, 2))}, {"k": idx([3])}, attrs={"axis": 0},
        n_outputs=2, opset=10)


def test_topk_runtime_k_is_an_error():
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"])
    m = make_model([node], {"x": data((2, 6)), "k": idx([2])},
                   {"v": (np.float32, None), "i": (I64, None)}, opset=11)
    expect_error(m, "input 1 must be a compile-time constant")


def test_topk_k_too_large_is_an_error():
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"])
    m = make_model([node], {"x": data((2, 6))}, {"v": (np.float32, None), "i": (I64, None)},
                   {"k": idx([7])}, opset=11)
    expect_error(m, r"k=7 is out of range for dim 6")


# ------------------------------------------------------------------------------------ Trilu
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 3), (5, 2)])
@pytest.mark.parametrize("k", [None, 0, 1, -2, 7])
@pytest.mark.parametrize("upper", [1, 0])
def test_trilu(shape, k, upper):
    consts = None if k is None else {"k": np.array(k, I64)}
    names = ["x"] if k is None else ["x", "k"]
    run("Trilu", names, {"x": data(shape)}, consts, attrs={"upper": upper}, opset=14)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.bool_])  # no int8 in ORT
def test_trilu_dtypes(dtype):
    run("Trilu", ["x"], {"x": data((3, 4), dtype)}, attrs={"upper": 0}, opset=14)


# --------------------------------------------------------------------------- CumSum, CumProd
@pytest.mark.parametrize("shape,axis", [((5,), 0), ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), -2)])
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumsum(shape, axis, exclusive, reverse):
    run("CumSum", ["x", "a"], {"x": data(shape)}, {"a": np.array(axis, I64)},
        attrs={"exclusive": exclusive, "reverse": reverse}, opset=14, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_cumsum_int_dtypes(dtype):
    x = np.arange(12).reshape(3, 4).astype(dtype)
    run("CumSum", ["x", "a"], {"x": x}, {"a": np.array(1, np.int32)},
        attrs={"exclusive": 1, "reverse": 1}, opset=14)


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_cumsum_unsigned(dtype):
    # onnxruntime has no unsigned CumSum kernel: numpy is the oracle here.
    x = np.arange(12).reshape(3, 4).astype(dtype) * 3
    m = model("CumSum", ["x", "a"], {"x": x}, {"a": np.array(0, I64)}, opset=14, out_dtype=dtype)
    got, _ = compile_and_run(m, {"x": x})
    np.testing.assert_array_equal(got["y"], np.cumsum(x, axis=0, dtype=dtype))


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumprod(exclusive, reverse):
    x = np.random.default_rng(0).uniform(0.5, 1.5, (3, 5)).astype(np.float32)
    run("CumProd", ["x", "a"], {"x": x}, {"a": np.array(-1, I64)},
        attrs={"exclusive": exclusive, "reverse": reverse}, opset=26, rtol=1e-5, atol=1e-6)


def test_cumsum_runtime_axis_is_an_error():
    m = model("CumSum", ["x", "a"], {"x": data((3, 4)), "a": np.array(0, I64)}, opset=14)
    expect_error(m, "input 1 must be a compile-time constant")


def test_cumsum_int8_is_an_error():
    m = model("CumSum", ["x", "a"], {"x": data((3, 4), np.int8)}, {"a": np.array(0, I64)},
              opset=14, out_dtype=np.int8)
    expect_error(m, "has type int8; CumSum-14 allows")


# ------------------------------------------------------------------ constant folding (reference)
X12 = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
FOLDED = [
    ("Gather", ["c", "i"], {"c": X12, "i": idx([2, -1])}, {"axis": 1}, 13),
    ("GatherElements", ["c", "i"], {"c": X12, "i": idx([[2, -1]])}, {"axis": 0}, 13),
    ("GatherND", ["c", "i"], {"c": X12, "i": idx([[2, -1], [0, 1]])}, {}, 13),
    ("ScatterElements", ["c", "i", "u"], {"c": X12, "i": idx([[1, 1, -1]]), "u": X12[:1, :3]},
     {"axis": 1, "reduction": "add"}, 18),
    ("ScatterND", ["c", "i", "u"], {"c": X12, "i": idx([[1], [1]]), "u": X12[:2]},
     {"reduction": "mul"}, 18),
    ("TensorScatter", ["c", "u", "w"], {"c": X12.reshape(1, 3, 4), "u": X12[None, :2],
                                        "w": idx([2])}, {"mode": "circular"}, 24),
    ("TopK", ["c", "k"], {"c": X12, "k": idx([2])}, {"largest": 0}, 11),
    ("Trilu", ["c"], {"c": X12}, {"upper": 0}, 14),
    ("CumSum", ["c", "a"], {"c": X12, "a": np.array(1, I64)}, {"exclusive": 1, "reverse": 1}, 14),
    ("CumProd", ["c", "a"], {"c": X12, "a": np.array(0, I64)}, {"exclusive": 1}, 26),
]


@pytest.mark.parametrize("op,names,consts,attrs,opset", FOLDED, ids=[f[0] for f in FOLDED])
def test_constant_inputs_fold(op, names, consts, attrs, opset):
    # All inputs constant: the node is folded with its numpy reference, which must agree.
    outs = ["t", "ti"] if op == "TopK" else ["t"]
    nodes = [helper.make_node(op, names, outs, **attrs), helper.make_node("Add", ["t", "z"], ["y"])]
    z = np.zeros((1,), np.float32)
    m = make_model(nodes, {"z": z}, {"y": (np.float32, None)}, consts, opset)
    del m.graph.output[:]
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    m.graph.output.extend(v for v in inferred.graph.value_info if v.name == "y")
    bundle = check(m, {"z": z}, **EXACT)
    assert len(bundle.kernels) == 1  # just the Add
