"""Elementwise ops (aotc/ops/math/elementwise.py) against onnxruntime: broadcasting, activations,
Clip across opsets, Cast, integer arithmetic, and the errors for what is not supported."""

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
TRANSCENDENTAL = dict(atol=1e-5, rtol=1e-4)


def check_node(op: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any] | None = None,
               initializers: Mapping[str, np.ndarray] | None = None,
               input_names: Sequence[str] | None = None, opset: int = 17, atol: float = 0.0,
               rtol: float = 0.0) -> aotc.Bundle:
    """opcheck.check_node declares its output float32, which strict shape inference rejects for
    integer and bool results; here onnx infers the output type from an UNDEFINED placeholder."""
    names = list(input_names) if input_names is not None else [*inputs, *(initializers or {})]
    node = helper.make_node(op, names, ["out"], name=f"{op.lower()}_node", **dict(attrs or {}))
    model = make_model([node], inputs, {}, initializers, opset)
    model.graph.output.append(helper.make_tensor_value_info("out", TensorProto.UNDEFINED, None))
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    return check(model, inputs, atol=atol, rtol=rtol)


def compile_error(model, tmp_path, match: str) -> None:
    with pytest.raises(AotcError, match=match):
        aotc.compile(model, tmp_path, name="m")


# ------------------------------------------------------------------------------ binary arithmetic
BROADCAST_SHAPES = [
    ((2, 3, 4), (2, 3, 4)),   # same shape: the flat loop
    ((2, 3, 4), (4,)),        # rank difference, B broadcast
    ((4,), (2, 3, 4)),        # rank difference, A broadcast
    ((2, 3, 4), ()),          # scalar B
    ((), (2, 3, 4)),          # scalar A
    ((2, 1, 4), (3, 1)),      # both sides broadcast
    ((1, 3, 1), (2, 1, 5)),   # both sides broadcast, same rank
    ((2, 3, 4), (1, 1, 1)),   # a single element with full rank
    ((1,), ()),               # tiny output
]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("sa,sb", BROADCAST_SHAPES)
def test_binary_broadcast(op, sa, sb):
    a = rand(*sa, seed=1)
    b = rand(*sb, seed=2, lo=0.5, hi=2.0)  # Div: keep the divisor away from zero
    check_node(op, {"a": a, "b": b}, **F32)


@pytest.mark.parametrize("op", ["Add", "Mul", "Sub", "Div"])
def test_binary_constant_operand(op):
    a = rand(2, 3, 4, seed=3)
    check_node(op, {"a": a}, initializers={"b": rand(3, 1, seed=4, lo=0.5, hi=2)}, **F32)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("sa,sb", [((3, 4), (3, 4)), ((3, 4), (4,)), ((1, 4), (3, 1))])
def test_integer_binary(op, dtype, sa, sb):
    a = rand(*sa, seed=5, dtype=dtype, lo=-50, hi=50)
    b = rand(*sb, seed=6, dtype=dtype, lo=-50, hi=50)
    check_node(op, {"a": a, "b": b})


def test_integer_large_values_int64():
    # Values beyond 32 bits must survive: the C must compute in int64_t, not int32_t.
    a = np.array([3_000_000_000, -5_000_000_000, 7], np.int64)
    b = np.array([2_000_000_000, 1, -9_000_000_000], np.int64)
    check_node("Add", {"a": a, "b": b})
    check_node("Sub", {"a": a, "b": b})


def test_integer_div_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 9, 0], np.int32)
    b = np.array([2, 2, -2, -2, 3, 5], np.int32)
    check_node("Div", {"a": a, "b": b})


def test_binary_mixed_dtypes_rejected(tmp_path):
    node = helper.make_node("Add", ["a", "b"], ["y"])
    m = make_model([node], {"a": rand(3), "b": rand(3, dtype=np.int32)}, {"y": (np.float32, [3])})
    compile_error(m, tmp_path, "has type int32 but input 0")


# ------------------------------------------------------------------------------ Pow
def test_pow_float_exponent():
    x = rand(3, 4, seed=7, lo=0.1, hi=3.0)
    y = rand(3, 4, seed=8, lo=-2.0, hi=2.0)
    check_node("Pow", {"x": x, "y": y}, **TRANSCENDENTAL)


def test_pow_broadcast_scalar_exponent():
    x = rand(2, 3, 4, seed=9, lo=-3.0, hi=3.0)
    check_node("Pow", {"x": x}, initializers={"y": np.array(2.0, np.float32)}, **TRANSCENDENTAL)


def test_pow_integer_exponent_input():
    # Pow-12+: the exponent may be an integer tensor of a different dtype.
    x = rand(2, 5, seed=10, lo=-3.0, hi=3.0)
    y = rand(5, seed=11, dtype=np.int64, lo=0, hi=3)
    check_node("Pow", {"x": x, "y": y}, **TRANSCENDENTAL)


# ------------------------------------------------------------------------------ unary
UNARY = [
    ("Sqrt", 0.01, 4.0, TRANSCENDENTAL),
    ("Exp", -4.0, 4.0, TRANSCENDENTAL),
    ("Log", 0.01, 10.0, TRANSCENDENTAL),
    ("Abs", -3.0, 3.0, F32),
    ("Neg", -3.0, 3.0, F32),
    ("Relu", -3.0, 3.0, F32),
    ("Sigmoid", -8.0, 8.0, TRANSCENDENTAL),
    ("Tanh", -4.0, 4.0, TRANSCENDENTAL),
    ("Erf", -3.0, 3.0, TRANSCENDENTAL),
]


@pytest.mark.parametrize("op,lo,hi,tol", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("shape", [(7,), (2, 3, 5)])
def test_unary(op, lo, hi, tol, shape):
    check_node(op, {"x": rand(*shape, seed=12, lo=lo, hi=hi)}, **tol)


@pytest.mark.parametrize("op,dtype", [
    ("Abs", np.int8), ("Abs", np.int32), ("Abs", np.int64),
    ("Neg", np.int8), ("Neg", np.int32), ("Neg", np.int64),
    ("Relu", np.int8), ("Relu", np.int32),  # onnxruntime has no int64 Relu kernel
])
def test_unary_signed_integers(op, dtype):
    check_node(op, {"x": rand(4, 5, seed=13, dtype=dtype, lo=-100, hi=100)})


def test_abs_unsigned():
    check_node("Abs", {"x": rand(6, seed=14, dtype=np.uint8, lo=0, hi=255)})


def test_unary_float_only_rejects_int(tmp_path):
    node = helper.make_node("Sqrt", ["x"], ["y"])
    m = make_model([node], {"x": rand(3, dtype=np.int32)}, {"y": (np.int32, [3])})
    compile_error(m, tmp_path, "has type int32; Sqrt-13 allows")


# ------------------------------------------------------------------------------ activations
@pytest.mark.parametrize("alpha", [None, 0.2])
def test_leaky_relu(alpha):
    attrs = {} if alpha is None else {"alpha": alpha}
    check_node("LeakyRelu", {"x": rand(3, 4, seed=15)}, attrs, **F32)


@pytest.mark.parametrize("slope_shape", [(3, 1, 1), (1,), (5,), (2, 3, 4, 5)])
def test_prelu_slope_broadcast(slope_shape):
    x = rand(2, 3, 4, 5, seed=16)
    check_node("PRelu", {"x": x}, initializers={"slope": rand(*slope_shape, seed=17, lo=0, hi=1)},
               **F32)


def test_prelu_slope_is_graph_input():
    check_node("PRelu", {"x": rand(2, 3, 4, seed=18), "slope": rand(3, 1, seed=19)}, **F32)


CLIP_CASES = {
    "min_max": (np.float32(-0.5), np.float32(0.75)),
    "only_min": (np.float32(-0.5), None),
    "only_max": (None, np.float32(0.75)),
    "none": (None, None),
}


@pytest.mark.parametrize("opset", [11, 12, 13])
@pytest.mark.parametrize("case", list(CLIP_CASES))
def test_clip(opset, case):
    lo, hi = CLIP_CASES[case]
    x = rand(3, 4, seed=20)
    inits = {}
    names = ["x"]
    if lo is not None:
        inits["lo"] = np.array(lo)
        names.append("lo")
    if hi is not None:
        inits["hi"] = np.array(hi)
        names += ([""] if lo is None else []) + ["hi"]
    check_node("Clip", {"x": x}, initializers=inits, input_names=names, opset=opset, **F32)


def test_clip_int32():
    x = rand(10, seed=21, dtype=np.int32, lo=-20, hi=20)
    check_node("Clip", {"x": x}, initializers={"lo": np.array(-5, np.int32),
                                                "hi": np.array(7, np.int32)}, opset=13)


def test_clip_fuses_as_epilogue():
    x = rand(2, 8, seed=22)
    nodes = [helper.make_node("Mul", ["x", "s"], ["t"]),
             helper.make_node("Clip", ["t", "lo", "hi"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [2, 8])},
                   {"s": np.float32(3.0), "lo": np.float32(0.0), "hi": np.float32(6.0)})
    bundle = check(m, {"x": x}, **F32)
    assert len(bundle.kernels) == 1


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int32])
@pytest.mark.parametrize("which", ["both", "only_min", "only_max"])
def test_clip_bounds_are_graph_inputs(dtype, which):
    """min/max fed at run time (two feeds: bounds inside the data, and min > max)."""
    x = rand(3, 5, seed=23, dtype=dtype, lo=-50, hi=50) if dtype != np.float32 else \
        rand(3, 5, seed=23) * 50
    names = {"both": ["x", "lo", "hi"], "only_min": ["x", "lo"], "only_max": ["x", "", "hi"]}
    node = helper.make_node("Clip", names[which], ["y"])
    for lo, hi in ((-7, 12), (9, -3)):
        feeds = {"x": x.astype(dtype), "lo": np.array(lo, dtype), "hi": np.array(hi, dtype)}
        feeds = {k: v for k, v in feeds.items() if k in names[which]}
        m = make_model([node], feeds, {"y": (dtype, [3, 5])}, opset=13)
        check(m, feeds, **F32)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_clip_bounds_computed_in_the_graph(dtype):
    """min = ReduceMin(b), max = ReduceMax(b) of another input; Clip fused after an Add."""
    x = rand(2, 6, seed=24, dtype=dtype, lo=-100, hi=100) if dtype != np.float32 else \
        rand(2, 6, seed=24) * 4
    b = rand(3, seed=25, dtype=dtype, lo=-40, hi=40) if dtype != np.float32 else rand(3, seed=25)
    nodes = [helper.make_node("ReduceMin", ["b"], ["lo"], keepdims=0),
             helper.make_node("ReduceMax", ["b"], ["hi"], keepdims=0),
             helper.make_node("Add", ["x", "x"], ["t"]),
             helper.make_node("Clip", ["t", "lo", "hi"], ["y"])]
    feeds = {"x": x, "b": b}
    m = make_model(nodes, feeds, {"y": (dtype, [2, 6])}, opset=17)
    bundle = check(m, feeds, **F32)
    assert any(k.endswith("add_clip") for k in bundle.kernels), bundle.kernels


def test_clip_run_time_bounds_between_dequantize_and_quantize():
    """int8 QDQ: the bounds are not known at compile time, so the Clip is not folded into an
    integer kernel; DequantizeLinear, Clip and QuantizeLinear run (exact vs onnxruntime)."""
    x = np.arange(-20, 20, dtype=np.int8).reshape(4, 10)
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"]),
             helper.make_node("Clip", ["xf", "lo", "hi"], ["yf"]),
             helper.make_node("QuantizeLinear", ["yf", "s", "z"], ["y"])]
    feeds = {"x": x, "lo": np.array(-0.3, np.float32), "hi": np.array(0.5, np.float32)}
    m = make_model(nodes, feeds, {"y": (np.int8, [4, 10])},
                   {"s": np.array(0.05, np.float32), "z": np.array(0, np.int8)})
    bundle = check(m, feeds)
    assert "Clip" in [n.op for n in bundle.compilation.graph.nodes]


def test_clip_run_time_bound_must_be_one_element(tmp_path):
    node = helper.make_node("Clip", ["x", "lo"], ["y"])
    m = make_model([node], {"x": rand(4), "lo": np.zeros((2,), np.float32)},
                   {"y": (np.float32, [4])}, opset=13)
    compile_error(m, tmp_path, "min computed at run time must be one float32 element")


@pytest.mark.parametrize("attrs", [{}, {"alpha": 0.3, "beta": 0.4}])
def test_hard_sigmoid(attrs):
    check_node("HardSigmoid", {"x": rand(4, 6, seed=23, lo=-5, hi=5)}, attrs, **F32)


def test_hard_swish():
    check_node("HardSwish", {"x": rand(4, 6, seed=24, lo=-5, hi=5)}, opset=14, **F32)


@pytest.mark.parametrize("attrs", [{}, {"alpha": 0.5}])
def test_elu(attrs):
    check_node("Elu", {"x": rand(4, 6, seed=25, lo=-4, hi=4)}, attrs, **TRANSCENDENTAL)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    check_node("Gelu", {"x": rand(3, 7, seed=26, lo=-5, hi=5)}, {"approximate": approximate},
               opset=20, **TRANSCENDENTAL)


def test_gelu_unknown_approximation_rejected(tmp_path):
    node = helper.make_node("Gelu", ["x"], ["y"], approximate="fast")
    m = make_model([node], {"x": rand(3)}, {"y": (np.float32, [3])}, opset=20)
    compile_error(m, tmp_path, "approximate='fast'")


# ------------------------------------------------------------------------------ Cast
CAST_FROM_FLOAT = [(np.int32, -1000, 1000), (np.int8, -128, 127), (np.uint8, 0, 255),
                   (np.int64, -1000, 1000)]


@pytest.mark.parametrize("to,lo,hi", CAST_FROM_FLOAT, ids=lambda v: getattr(v, "__name__", None))
def test_cast_float_to_int_in_range(to, lo, hi):
    # In-range values only: out-of-range float->int conversion is undefined behaviour in C.
    x = rand(3, 8, seed=27, lo=lo, hi=hi)
    x[0, :3] = [lo, hi, 0.0]
    check_node("Cast", {"x": x}, {"to": helper.np_dtype_to_tensor_dtype(np.dtype(to))})


@pytest.mark.parametrize("frm", [np.int32, np.int64, np.uint8, np.int8])
def test_cast_int_to_float(frm):
    info = np.iinfo(frm)
    x = rand(12, seed=28, dtype=frm, lo=max(info.min, -1000), hi=min(info.max, 1000))
    check_node("Cast", {"x": x}, {"to": helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))})


@pytest.mark.parametrize("frm", [np.float32, np.int32, np.uint8])
def test_cast_to_bool(frm):
    x = rand(12, seed=29, dtype=frm, lo=0 if frm == np.uint8 else -2, hi=2)
    x[:3] = 0
    if frm == np.float32:
        x[3] = 0.25  # a non-zero value below 1 is still true
    check_node("Cast", {"x": x}, {"to": helper.np_dtype_to_tensor_dtype(np.dtype(bool))})


@pytest.mark.parametrize("to", [np.float32, np.int32])
def test_cast_from_bool(to):
    x = np.array([True, False, True, True, False])
    check_node("Cast", {"x": x}, {"to": helper.np_dtype_to_tensor_dtype(np.dtype(to))})


def test_cast_int_narrowing():
    x = np.array([1, -1, 127, -128, 0], np.int32)
    check_node("Cast", {"x": x}, {"to": helper.np_dtype_to_tensor_dtype(np.dtype(np.int8))})


# ------------------------------------------------------------------------------ fusion chains
def test_chain_of_elementwise_fuses_into_one_kernel():
    x = rand(2, 3, 4, seed=30)
    nodes = [helper.make_node("Mul", ["x", "a"], ["t0"]),
             helper.make_node("Add", ["t0", "b"], ["t1"]),
             helper.make_node("Sigmoid", ["t1"], ["t2"]),
             helper.make_node("Mul", ["t2", "x"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [2, 3, 4])},
                   {"a": rand(4, seed=31), "b": rand(3, 1, seed=32)})
    bundle = check(m, {"x": x}, **TRANSCENDENTAL)
    assert len(bundle.kernels) == 1


def test_fused_chain_value_as_second_operand():
    # The running value is the right operand of Sub and Div: the epilogue must keep the order.
    x = rand(2, 3, 4, seed=33)
    nodes = [helper.make_node("Exp", ["x"], ["t0"]),
             helper.make_node("Sub", ["b", "t0"], ["t1"]),
             helper.make_node("Div", ["c", "t1"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [2, 3, 4])},
                   {"b": np.float32(10.0), "c": rand(4, seed=34)})
    bundle = check(m, {"x": x}, **TRANSCENDENTAL)
    assert len(bundle.kernels) == 1


def test_unfusable_consumer_stays_separate():
    # t0 feeds two consumers, so it must be materialised: three kernels, still correct.
    x = rand(2, 5, seed=35)
    nodes = [helper.make_node("Relu", ["x"], ["t0"]),
             helper.make_node("Neg", ["t0"], ["t1"]),
             helper.make_node("Add", ["t0", "t1"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [2, 5])})
    bundle = check(m, {"x": x}, **F32)
    assert len(bundle.kernels) == 2  # Relu alone; Neg+Add fused (t0 is read by both)


# ------------------------------------------------------------------------------ math (float)
MATH = [
    ("Reciprocal", 0.5, 4.0, 7), ("Floor", -4.0, 4.0, 7), ("Ceil", -4.0, 4.0, 7),
    ("Sin", -4.0, 4.0, 7), ("Cos", -4.0, 4.0, 7), ("Tan", -1.2, 1.2, 7),
    ("Asin", -0.99, 0.99, 7), ("Acos", -0.99, 0.99, 7), ("Atan", -5.0, 5.0, 7),
    ("Sinh", -3.0, 3.0, 9), ("Cosh", -3.0, 3.0, 9), ("Asinh", -5.0, 5.0, 9),
    ("Acosh", 1.0, 6.0, 9), ("Atanh", -0.95, 0.95, 9),
    ("Softplus", -30.0, 30.0, 1), ("Softsign", -5.0, 5.0, 1), ("Mish", -6.0, 6.0, 18),
]


@pytest.mark.parametrize("op,lo,hi,opset", MATH, ids=[m[0] for m in MATH])
def test_math_unary(op, lo, hi, opset):
    check_node(op, {"x": rand(2, 3, 5, seed=40, lo=lo, hi=hi)}, opset=max(opset, 13),
               **TRANSCENDENTAL)


def test_softplus_large_inputs_do_not_overflow():
    # log(1 + exp(x)) computed naively overflows to inf above x ~ 88.
    x = np.array([-200.0, -90.0, -1.0, 0.0, 1.0, 90.0, 200.0], np.float32)
    check_node("Softplus", {"x": x}, **TRANSCENDENTAL)


def test_round_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 2.6, -2.6, 0.0], np.float32)
    check_node("Round", {"x": x})


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int32, np.int64, np.uint8,
                                   np.uint32])
def test_sign(dtype):
    lo = 0 if np.dtype(dtype).kind == "u" else -5
    x = rand(3, 4, seed=41, dtype=dtype, lo=lo, hi=5)
    x.flat[:2] = 0
    check_node("Sign", {"x": x})


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64])
def test_abs_wider_unsigned(dtype):
    # Unsigned Abs is the identity: no "x < 0" test, which -Wextra rejects on unsigned types.
    check_node("Abs", {"x": rand(6, seed=42, dtype=dtype, lo=0, hi=60000)})


ACTIVATIONS = [
    ("Selu", {}, 13), ("Selu", {"alpha": 2.0, "gamma": 3.0}, 13),
    ("Celu", {}, 13), ("Celu", {"alpha": 2.0}, 13),
    ("ThresholdedRelu", {}, 13), ("ThresholdedRelu", {"alpha": 0.5}, 13),
    ("Shrink", {}, 13), ("Shrink", {"lambd": 1.0, "bias": 0.5}, 13),
    ("Swish", {}, 24), ("Swish", {"alpha": 0.5}, 24),
]


@pytest.mark.parametrize("op,attrs,opset", ACTIVATIONS,
                         ids=[f"{a[0]}-{len(a[1])}" for a in ACTIVATIONS])
def test_activation_attrs(op, attrs, opset):
    check_node(op, {"x": rand(4, 6, seed=43, lo=-4, hi=4)}, attrs, opset=opset,
               **TRANSCENDENTAL)


@pytest.mark.parametrize("act", ["Selu", "Softplus", "Mish", "ThresholdedRelu"])
def test_new_activation_fuses_as_epilogue(act):
    x = rand(2, 8, seed=44)
    nodes = [helper.make_node("Mul", ["x", "s"], ["t"]), helper.make_node(act, ["t"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [2, 8])}, {"s": np.float32(3.0)},
                   opset=18)
    bundle = check(m, {"x": x}, **TRANSCENDENTAL)
    assert len(bundle.kernels) == 1


# ------------------------------------------------------------------------------ Mod
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_mod_integer_takes_divisor_sign(dtype):
    a = np.array([7, -7, 7, -7, 6, -6, 0, 5], dtype)
    b = np.array([3, 3, -3, -3, 3, -3, 4, 7], dtype)
    check_node("Mod", {"a": a, "b": b})


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_mod_integer_fmod_truncates(dtype):
    a = np.array([7, -7, 7, -7, 6], dtype)
    b = np.array([3, 3, -3, -3, 3], dtype)
    check_node("Mod", {"a": a, "b": b}, {"fmod": 1})


@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64])
def test_mod_unsigned_broadcast(dtype):
    a = rand(3, 4, seed=45, dtype=dtype, lo=0, hi=200)
    check_node("Mod", {"a": a}, initializers={"b": np.array([3, 5, 7, 11], dtype)})


def test_mod_float_fmod():
    a = rand(3, 4, seed=46, lo=-10, hi=10)
    b = rand(4, seed=47, lo=0.5, hi=3) * np.array([1, -1, 1, -1], np.float32)
    check_node("Mod", {"a": a, "b": b}, {"fmod": 1}, **F32)


def test_mod_float_without_fmod_rejected(tmp_path):
    node = helper.make_node("Mod", ["a", "b"], ["y"])
    m = make_model([node], {"a": rand(3), "b": rand(3)}, {"y": (np.float32, [3])})
    compile_error(m, tmp_path, "fmod=0")


# ------------------------------------------------------------------------------ Pow (integer)
@pytest.mark.parametrize("xt,yt", [(np.int32, np.int32), (np.int64, np.int64),
                                   (np.int32, np.int64), (np.int64, np.float32)])
def test_pow_integer_base(xt, yt):
    x = np.array([[1, 2, 3, -2], [5, -3, 0, 7]], xt)
    y = np.array([4, 5, 3, 3], yt)
    check_node("Pow", {"x": x, "y": y})


def test_pow_integer_exact_beyond_float_precision():
    # 3**19 and 7**11 need more than float32's 24-bit mantissa: computed by integer squaring.
    x = np.array([3, 7, -3, 2, 1, -1], np.int64)
    y = np.array([19, 11, 5, 40, 9, 7], np.int64)
    check_node("Pow", {"x": x, "y": y})


@pytest.mark.parametrize("attrs", [{"min": 0.0, "max": 6.0}, {"min": -0.5}, {"max": 0.5}, {}])
def test_clip_opset6_attributes(attrs):
    # Older exports (opset < 11) carry the bounds as attributes, e.g. ReLU6.
    check_node("Clip", {"x": rand(3, 4, seed=48, lo=-8, hi=8)}, attrs, opset=10, **F32)


@pytest.mark.parametrize("where", [None, "cortex-m4f"])
def test_relu_and_clip_keep_nan_signed_zero_and_inf_bits(where, tmp_path):
    # A max/min against a constant bound prints as one compare (aotc_maxfk, std::max's
    # form): bit for bit onnxruntime's Relu and Clip (Relu(-0.0) is -0.0, NaN stays NaN).
    from opcheck import ort_run

    x = np.array([np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf, -1.5, 2.5, 1e-45, -1e-45, 7.0,
                  -7.0], np.float32)
    lo = helper.make_tensor("lo", TensorProto.FLOAT, [], [-0.0])
    hi = helper.make_tensor("hi", TensorProto.FLOAT, [], [6.0])
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Constant", [], ["lo"], value=lo),
             helper.make_node("Constant", [], ["hi"], value=hi),
             helper.make_node("Clip", ["x", "lo", "hi"], ["c"])]
    model = make_model(nodes, {"x": x}, {"r": (np.float32, [12]), "c": (np.float32, [12])},
                       opset=13)
    want = ort_run(model, {"x": x})
    bundle = aotc.compile(model, tmp_path, name="m", target="cortex-m4f")
    assert "aotc_maxfk(" in (tmp_path / "m.c").read_text()
    got = bundle.load(where).run({"x": x})
    for k in ("r", "c"):
        w, g = np.asarray(want[k]), np.asarray(got[k]).reshape(-1)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=k)
        ok = ~np.isnan(w)
        np.testing.assert_array_equal(g[ok].view(np.uint32), w[ok].view(np.uint32), err_msg=k)
