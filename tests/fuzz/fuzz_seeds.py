"""The fuzzer's seed corpus: small valid ONNX models built in code (fixed weights), one per
family of kernels aotc has. Every seed compiles and matches onnxruntime unmutated
(tests/fuzz/test_fuzz.py asserts it through the same oracle the mutated cases use)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
OPSET = 17


def _w(rng: np.random.Generator, name: str, *shape: int, scale: float = 0.5,
       dtype: type = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(dtype), name)


def _const(name: str, value: object, dtype: type) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype), name)


def _model(name: str, nodes: list[onnx.NodeProto], inputs: list[tuple[str, int, list[int]]],
           outputs: list[tuple[str, int, list[int]]], inits: list[onnx.TensorProto],
           opset: int = OPSET, extra_opsets: dict[str, int] | None = None) -> onnx.ModelProto:
    g = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs], inits)
    ops = [helper.make_opsetid("", opset)]
    ops += [helper.make_opsetid(d, v) for d, v in (extra_opsets or {}).items()]
    return helper.make_model(g, opset_imports=ops, ir_version=9, producer_name="aotc-fuzz")


def conv_relu(rng: np.random.Generator) -> onnx.ModelProto:
    return _model("conv_relu", [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3], strides=[1, 1]),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ], [("x", F, [1, 3, 8, 8])], [("y", F, [1, 4, 8, 8])],
        [_w(rng, "w", 4, 3, 3, 3), _w(rng, "b", 4)])


def depthwise_conv(rng: np.random.Generator) -> onnx.ModelProto:
    return _model("dwconv", [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="dw", group=4, strides=[2, 2],
                         pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Clip", ["c", "lo", "hi"], ["y"], name="relu6"),
    ], [("x", F, [1, 4, 7, 7])], [("y", F, [1, 4, 4, 4])],
        [_w(rng, "w", 4, 1, 3, 3), _w(rng, "b", 4), _const("lo", 0.0, np.float32),
         _const("hi", 6.0, np.float32)])


def matmul_add_tanh(rng: np.random.Generator) -> onnx.ModelProto:
    return _model("mlp", [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
        helper.make_node("Add", ["m", "b"], ["a"], name="bias"),
        helper.make_node("Tanh", ["a"], ["t"], name="tanh"),
        helper.make_node("Gemm", ["t", "w2", "b2"], ["y"], name="fc", transB=1, alpha=0.5),
    ], [("x", F, [2, 5])], [("y", F, [2, 3])],
        [_w(rng, "w", 5, 7), _w(rng, "b", 7), _w(rng, "w2", 3, 7), _w(rng, "b2", 3)])


def pools(rng: np.random.Generator) -> onnx.ModelProto:
    return _model("pools", [
        helper.make_node("MaxPool", ["x"], ["p1"], name="maxpool", kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["p1"], ["p2"], name="avgpool", kernel_shape=[2, 2],
                         strides=[1, 1], ceil_mode=0, count_include_pad=0),
        helper.make_node("GlobalAveragePool", ["p2"], ["y"], name="gap"),
    ], [("x", F, [1, 2, 9, 9])], [("y", F, [1, 2, 1, 1])], [])


def softmax(rng: np.random.Generator) -> onnx.ModelProto:
    return _model("softmax", [
        helper.make_node("Mul", ["x", "k"], ["s"], name="scale"),
        helper.make_node("Softmax", ["s"], ["y"], name="softmax", axis=-1),
    ], [("x", F, [2, 10])], [("y", F, [2, 10])], [_const("k", 1.5, np.float32)])


def elementwise_chain(rng: np.random.Generator) -> onnx.ModelProto:
    return _model("chain", [
        helper.make_node("Mul", ["x", "a"], ["t1"], name="mul"),
        helper.make_node("Add", ["t1", "c"], ["t2"], name="add"),
        helper.make_node("Sigmoid", ["t2"], ["t3"], name="sigmoid"),
        helper.make_node("HardSwish", ["t2"], ["t4"], name="hswish"),
        helper.make_node("Sub", ["t3", "t4"], ["t5"], name="sub"),
        helper.make_node("LeakyRelu", ["t5"], ["t6"], name="leaky", alpha=0.1),
        helper.make_node("Elu", ["t6"], ["t7"], name="elu", alpha=1.0),
        helper.make_node("Abs", ["t7"], ["y"], name="abs"),
    ], [("x", F, [3, 4]), ("c", F, [4])], [("y", F, [3, 4])], [_w(rng, "a", 3, 1)])


def shape_ops(rng: np.random.Generator) -> onnx.ModelProto:
    return _model("shape", [
        helper.make_node("Concat", ["x", "k"], ["cat"], name="concat", axis=1),
        helper.make_node("Split", ["cat", "split"], ["s0", "s1"], name="split", axis=1),
        helper.make_node("Reshape", ["s0", "shape"], ["r"], name="reshape"),
        helper.make_node("Transpose", ["r"], ["t"], name="transpose", perm=[1, 0, 2]),
        helper.make_node("Slice", ["t", "starts", "ends", "axes", "steps"], ["sl"],
                         name="slice"),
        helper.make_node("Gather", ["s1", "idx"], ["g"], name="gather", axis=1),
        helper.make_node("Relu", ["sl"], ["y0"], name="relu"),
        helper.make_node("Neg", ["g"], ["y1"], name="neg"),
    ], [("x", F, [2, 3, 4])], [("y0", F, [2, 2, 4]), ("y1", F, [2, 3, 4])],
        [_w(rng, "k", 2, 3, 4), _const("split", [4, 2], np.int64),
         _const("shape", [2, 2, 8], np.int64), _const("starts", [0, 1], np.int64),
         _const("ends", [2, 8], np.int64), _const("axes", [0, 2], np.int64),
         _const("steps", [1, 2], np.int64), _const("idx", [1, 0, 1], np.int64)])


def reductions(rng: np.random.Generator) -> onnx.ModelProto:
    return _model("reduce", [
        helper.make_node("ReduceMean", ["x"], ["m"], name="mean", axes=[1], keepdims=1),
        helper.make_node("Sub", ["x", "m"], ["d"], name="center"),
        helper.make_node("ReduceSum", ["d", "ax"], ["s"], name="sum", keepdims=0),
        helper.make_node("ReduceMax", ["x"], ["y1"], name="max", axes=[0, 2], keepdims=0),
        helper.make_node("ArgMax", ["x"], ["y2"], name="argmax", axis=2, keepdims=0),
        helper.make_node("Abs", ["s"], ["y0"], name="abs"),
    ], [("x", F, [2, 3, 5])], [("y0", F, [2, 3]), ("y1", F, [3]),
                               ("y2", TensorProto.INT64, [2, 3])],
        [_const("ax", [2], np.int64)])


def qdq_conv(rng: np.random.Generator) -> onnx.ModelProto:
    """QDQ int8 Conv as onnxruntime's quantizer writes it: per-channel int8 weights, int32
    bias, int8 activations; the output is the int8 tensor (compared within 1 LSB)."""
    w = rng.integers(-127, 128, (4, 2, 3, 3)).astype(np.int8)
    return _model("qdq_conv", [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="q_in"),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], name="dq_in"),
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], name="dq_w", axis=0),
        helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bd"], name="dq_b", axis=0),
        helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], name="conv", pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["y"], name="q_out"),
    ], [("x", F, [1, 2, 5, 5])], [("y", TensorProto.INT8, [1, 4, 5, 5])], [
        _const("xs", 0.02, np.float32), _const("xz", 0, np.int8), numpy_helper.from_array(w, "wq"),
        _const("ws", [0.004, 0.005, 0.003, 0.006], np.float32),
        _const("wz", [0, 0, 0, 0], np.int8),
        _const("bq", rng.integers(-500, 500, 4), np.int32),
        _const("bs", [0.02 * s for s in (0.004, 0.005, 0.003, 0.006)], np.float32),
        _const("bz", [0, 0, 0, 0], np.int32),
        _const("ys", 0.01, np.float32), _const("yz", -128, np.int8)], opset=13)


def _rnn(op: str, gates: int, rng: np.random.Generator) -> onnx.ModelProto:
    h, i = 4, 3
    return _model(op.lower(), [
        helper.make_node(op, ["x", "W", "R", "B"], ["", "y"], name=op.lower(), hidden_size=h),
    ], [("x", F, [3, 1, i])], [("y", F, [1, 1, h])],
        [_w(rng, "W", 1, gates * h, i), _w(rng, "R", 1, gates * h, h),
         _w(rng, "B", 1, 2 * gates * h, scale=0.2)])


def lstm(rng: np.random.Generator) -> onnx.ModelProto:
    return _rnn("LSTM", 4, rng)


def gru(rng: np.random.Generator) -> onnx.ModelProto:
    return _rnn("GRU", 3, rng)


def resize(rng: np.random.Generator) -> onnx.ModelProto:
    return _model("resize", [
        helper.make_node("Resize", ["x", "", "scales"], ["r1"], name="nearest", mode="nearest"),
        helper.make_node("Resize", ["r1", "", "scales2"], ["y"], name="linear", mode="linear",
                         coordinate_transformation_mode="half_pixel"),
    ], [("x", F, [1, 2, 3, 3])], [("y", F, [1, 2, 9, 9])],
        [_const("scales", [1, 1, 2, 2], np.float32),
         _const("scales2", [1, 1, 1.5, 1.5], np.float32)])


def integer_ops(rng: np.random.Generator) -> onnx.ModelProto:
    i32 = TensorProto.INT32
    return _model("ints", [
        helper.make_node("Add", ["a", "b"], ["s"], name="add"),
        helper.make_node("Mul", ["s", "k"], ["m"], name="mul"),
        helper.make_node("Max", ["m", "b"], ["mx"], name="max"),
        helper.make_node("Sub", ["mx", "a"], ["y0"], name="sub"),
        helper.make_node("Cast", ["y0"], ["f"], name="cast", to=F),
        helper.make_node("Sqrt", ["f"], ["y1"], name="sqrt"),
    ], [("a", i32, [2, 6]), ("b", i32, [2, 6])], [("y0", i32, [2, 6]), ("y1", F, [2, 6])],
        [_const("k", [3, -2, 1, 0, 5, 7], np.int32)])


def pad_norm(rng: np.random.Generator) -> onnx.ModelProto:
    return _model("padnorm", [
        helper.make_node("Pad", ["x", "pads", "pv"], ["p"], name="pad", mode="constant"),
        helper.make_node("LayerNormalization", ["p", "g", "bt"], ["y"], name="ln", axis=-1,
                         epsilon=1e-5),
    ], [("x", F, [2, 3, 4])], [("y", F, [2, 3, 6])],
        [_const("pads", [0, 0, 1, 0, 0, 1], np.int64), _const("pv", 0.5, np.float32),
         _w(rng, "g", 6), _w(rng, "bt", 6)])


def conv_transpose(rng: np.random.Generator) -> onnx.ModelProto:
    return _model("convt", [
        helper.make_node("ConvTranspose", ["x", "w", "b"], ["c"], name="deconv",
                         strides=[2, 2], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Sigmoid", ["c"], ["y"], name="sigmoid"),
    ], [("x", F, [1, 2, 4, 4])], [("y", F, [1, 3, 7, 7])],
        [_w(rng, "w", 2, 3, 3, 3), _w(rng, "b", 3)])


SEEDS: dict[str, Callable[[np.random.Generator], onnx.ModelProto]] = {
    f.__name__: f for f in (conv_relu, depthwise_conv, matmul_add_tanh, pools, softmax,
                            elementwise_chain, shape_ops, reductions, qdq_conv, lstm, gru,
                            resize, integer_ops, pad_norm, conv_transpose)}


def seed_model(name: str) -> onnx.ModelProto:
    """The seed ``name`` (weights from a fixed per-seed generator: the same bytes every time)."""
    rng = np.random.default_rng(sum(name.encode()))
    return SEEDS[name](rng)
