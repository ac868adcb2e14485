"""Comparison, logic, bitwise, Where, IsNaN/IsInf, CastLike, variadic Min/Max/Sum/Mean and
Hardmax against onnxruntime: integer and bool dtypes, broadcasting, bool outputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from opcheck import check, make_model, rand

import aotc
from aotc.errors import AotcError

F32 = dict(atol=1e-5, rtol=1e-5)


def check_node(op: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any] | None = None,
               initializers: Mapping[str, np.ndarray] | None = None,
               input_names: Sequence[str] | None = None, opset: int = 18, atol: float = 0.0,
               rtol: float = 0.0) -> aotc.Bundle:
    """A one-node model whose output type onnx infers (bool and integer outputs included)."""
    names = list(input_names) if input_names is not None else [*inputs, *(initializers or {})]
    node = helper.make_node(op, names, ["out"], name=f"{op.lower()}_node", **dict(attrs or {}))
    model = make_model([node], inputs, {}, initializers, opset)
    model.graph.output.append(helper.make_tensor_value_info("out", TensorProto.UNDEFINED, None))
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    return check(model, inputs, atol=atol, rtol=rtol)


def bools(*shape: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2, shape).astype(bool)


# ------------------------------------------------------------------------------ comparison
COMPARE = ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]


@pytest.mark.parametrize("op", COMPARE)
@pytest.mark.parametrize("sa,sb", [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5))])
def test_compare_float_broadcast(op, sa, sb):
    a = rand(*sa, seed=1, lo=-2, hi=2).round()  # rounded: equal pairs occur
    b = rand(*sb, seed=2, lo=-2, hi=2).round()
    check_node(op, {"a": a, "b": b})


@pytest.mark.parametrize("op", COMPARE)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_compare_integers(op, dtype):
    a = rand(4, 5, seed=3, dtype=dtype, lo=0, hi=4)
    b = rand(5, seed=4, dtype=dtype, lo=0, hi=4)
    check_node(op, {"a": a, "b": b})


def test_equal_bool():
    check_node("Equal", {"a": bools(3, 4, seed=5), "b": bools(4, seed=6)})


def test_compare_with_constant_operand():
    check_node("Less", {"a": rand(2, 6, seed=7)}, initializers={"b": np.float32(0.25)})


def test_compare_mixed_dtypes_rejected(tmp_path):
    node = helper.make_node("Less", ["a", "b"], ["y"])
    m = make_model([node], {"a": rand(3), "b": rand(3, dtype=np.int32)}, {"y": (bool, [3])})
    with pytest.raises(AotcError, match=r"but input 0 \(A\) has"):
        aotc.compile(m, tmp_path, name="m")


# ------------------------------------------------------------------------------ logic
@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
@pytest.mark.parametrize("sa,sb", [((3, 4), (3, 4)), ((2, 3, 4), (3, 1)), ((), (5,))])
def test_logic_binary(op, sa, sb):
    check_node(op, {"a": bools(*sa, seed=8), "b": bools(*sb, seed=9)})


def test_logic_opset7():
    check_node("And", {"a": bools(6, seed=10), "b": bools(6, seed=11)}, opset=7)


def test_not():
    check_node("Not", {"x": bools(3, 5, seed=12)}, opset=1)


def test_compare_then_logic_chain():
    # Bool kernels chain and fuse: (a < b) and not (a == 0).
    a, b = rand(4, 4, seed=13).round(), rand(4, 4, seed=14).round()
    nodes = [helper.make_node("Less", ["a", "b"], ["lt"]),
             helper.make_node("Equal", ["a", "z"], ["eq"]),
             helper.make_node("Not", ["eq"], ["ne"]),
             helper.make_node("And", ["lt", "ne"], ["y"])]
    m = make_model(nodes, {"a": a, "b": b}, {"y": (bool, [4, 4])}, {"z": np.float32(0)})
    check(m, {"a": a, "b": b})


# ------------------------------------------------------------------------------ bitwise
@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64, np.uint64])
def test_bitwise_binary(op, dtype):
    info = np.iinfo(dtype)
    a = rand(3, 4, seed=15, dtype=dtype, lo=max(info.min, -1000), hi=min(info.max, 1000))
    b = rand(4, seed=16, dtype=dtype, lo=max(info.min, -1000), hi=min(info.max, 1000))
    check_node(op, {"a": a, "b": b})


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.uint16, np.int32, np.uint64])
def test_bitwise_not(dtype):
    info = np.iinfo(dtype)
    x = rand(10, seed=17, dtype=dtype, lo=max(info.min, -1000), hi=min(info.max, 1000))
    check_node("BitwiseNot", {"x": x})


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64])  # ort has no uint16
def test_bitshift(direction, dtype):
    bits = np.dtype(dtype).itemsize * 8
    x = np.array([1, 3, 255, 16, 200, 7], dtype)
    y = np.array([0, 1, 2, 3, bits - 1, 5], dtype)
    check_node("BitShift", {"x": x, "y": y}, {"direction": direction})


def test_bitshift_broadcast_scalar_amount():
    x = rand(2, 5, seed=18, dtype=np.uint32, lo=0, hi=1 << 20)
    check_node("BitShift", {"x": x}, {"direction": "RIGHT"},
               initializers={"y": np.array(3, np.uint32)})


# ------------------------------------------------------------------------------ Where
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint8])  # ort: no bool
def test_where_broadcast(dtype):
    c = bools(3, 1, 4, seed=19)
    x = rand(2, 1, seed=20, dtype=np.int32, lo=0, hi=9).astype(dtype)
    y = rand(4, seed=21, dtype=np.int32, lo=0, hi=9).astype(dtype)
    check_node("Where", {"c": c, "x": x, "y": y})


def test_where_fuses_after_compare_as_anchor():
    x = rand(3, 7, seed=22)
    nodes = [helper.make_node("Less", ["x", "z"], ["neg"]),
             helper.make_node("Where", ["neg", "s", "x"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [3, 7])},
                   {"z": np.float32(0), "s": np.float32(-1)})
    check(m, {"x": x}, **F32)


# ------------------------------------------------------------------------------ IsNaN / IsInf
SPECIAL = np.array([1.0, np.nan, np.inf, -np.inf, 0.0, -2.5, np.nan, 3e38], np.float32)


def test_isnan():
    check_node("IsNaN", {"x": SPECIAL.reshape(2, 4)})


@pytest.mark.parametrize("pos,neg", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_isinf(pos, neg):
    check_node("IsInf", {"x": SPECIAL}, {"detect_positive": pos, "detect_negative": neg})


# ------------------------------------------------------------------------------ CastLike
@pytest.mark.parametrize("frm,to", [(np.float32, np.int32), (np.int32, np.float32),
                                    (np.float32, bool), (bool, np.float32),
                                    (np.int64, np.uint8)])
def test_castlike(frm, to):
    x = rand(3, 4, seed=23, dtype=np.int32, lo=0, hi=100).astype(frm)
    check_node("CastLike", {"x": x}, initializers={"t": np.zeros((1,), to)})


def test_castlike_target_is_graph_input():
    # The target's values are never read; a non-broadcastable shape does not matter.
    x = rand(3, 4, seed=24)
    check_node("CastLike", {"x": x, "t": np.zeros((7,), np.int32)})


# ------------------------------------------------------------------------------ variadic
@pytest.mark.parametrize("op", ["Min", "Max", "Sum", "Mean"])
@pytest.mark.parametrize("shapes", [[(3, 4)], [(3, 4), (3, 4)], [(2, 3, 4), (4,), (3, 1)],
                                    [(1,), (5,), (2, 1), ()]])
def test_variadic_float(op, shapes):
    ins = {f"x{k}": rand(*s, seed=25 + k) for k, s in enumerate(shapes)}
    check_node(op, ins, opset=13, **F32)


@pytest.mark.parametrize("op", ["Min", "Max"])  # Sum and Mean are float-only in ONNX
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_variadic_integers(op, dtype):
    ins = {"a": rand(3, 4, seed=30, dtype=dtype, lo=-50, hi=50),
           "b": rand(4, seed=31, dtype=dtype, lo=-50, hi=50),
           "c": rand(3, 1, seed=32, dtype=dtype, lo=-50, hi=50)}
    check_node(op, ins, opset=13)


@pytest.mark.parametrize("op", ["Min", "Max"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.uint64])
def test_min_max_small_ints(op, dtype):
    ins = {"a": rand(3, 4, seed=33, dtype=dtype, lo=0, hi=100),
           "b": rand(4, seed=34, dtype=dtype, lo=0, hi=100)}
    check_node(op, ins, opset=13)


# ------------------------------------------------------------------------------ Hardmax
@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_hardmax(opset, axis):
    x = rand(2, 3, 4, seed=35).round(1)
    x[0, 0, :2] = 5.0  # a tie: the first maximum wins
    attrs = {} if axis is None else {"axis": axis}
    check_node("Hardmax", {"x": x}, attrs, opset=opset)


def test_hardmax_rejects_bad_axis(tmp_path):
    node = helper.make_node("Hardmax", ["x"], ["y"], axis=3)
    m = make_model([node], {"x": rand(2, 3)}, {"y": (np.float32, [2, 3])}, opset=13)
    with pytest.raises(AotcError, match="axis=3"):
        aotc.compile(m, tmp_path, name="m")


@pytest.mark.parametrize("op", ["Min", "Max"])
def test_min_max_propagate_nan(op):
    a = np.array([np.nan, 1.0, 2.0, np.nan, -np.inf], np.float32)
    b = np.array([1.0, np.nan, 3.0, np.nan, 0.0], np.float32)
    c = np.array([0.5, 0.5, np.nan, 0.5, 0.5], np.float32)
    check_node(op, {"a": a, "b": b, "c": c}, opset=13)


@pytest.mark.parametrize("op", ["Max", "Sum", "Mean"])
def test_variadic_opset6_same_shapes(op):
    ins = {"a": rand(2, 3, seed=36), "b": rand(2, 3, seed=37)}
    check_node(op, ins, opset=6, **F32)
