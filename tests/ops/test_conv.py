"""Conv and ConvTranspose (aotc/ops/nn/conv.py) against onnxruntime: 1-D/2-D/3-D, groups, pads,
auto_pad, strides, dilations, bias, and the fusions around Conv (BatchNormalization folding,
residual Add + Relu epilogue)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from opcheck import check, check_node, make_model, rand

import aotc
from aotc.errors import AotcError

# Sums of up to a few hundred float32 products: accumulation order differs from onnxruntime's.
TOL = dict(atol=1e-4, rtol=1e-4)


def conv(x_shape, w_shape, bias=True, seed=0, w_input=False, **attrs):
    x = rand(*x_shape, seed=seed)
    w = rand(*w_shape, seed=seed + 1)
    inits = {"b": rand(w_shape[0], seed=seed + 2)} if bias else {}
    if w_input:
        return check_node("Conv", {"x": x, "w": w}, attrs, initializers=inits, **TOL)
    return check_node("Conv", {"x": x}, attrs, initializers={"w": w, **inits}, **TOL)


# ------------------------------------------------------------------------------ Conv geometry
@pytest.mark.parametrize("bias", [True, False])
def test_conv1d(bias):
    conv((2, 3, 11), (4, 3, 3), bias, pads=[1, 1])


@pytest.mark.parametrize("bias", [True, False])
def test_conv2d(bias):
    conv((1, 3, 7, 6), (5, 3, 3, 3), bias)


def test_conv3d():
    conv((1, 2, 4, 5, 6), (3, 2, 3, 2, 3), pads=[1, 0, 1, 1, 1, 0], strides=[1, 2, 1])


def test_conv2d_batch_and_weights_as_graph_input():
    conv((2, 2, 5, 5), (3, 2, 3, 3), w_input=True, pads=[1, 1, 1, 1])


def test_conv_non_square_kernel():
    conv((1, 2, 8, 9), (3, 2, 2, 4), pads=[0, 1, 1, 2])


@pytest.mark.parametrize("pads", [[1, 1, 1, 1], [2, 2, 2, 2], [0, 1, 2, 1], [1, 0, 0, 2]],
                         ids=["sym1", "sym2", "asym_a", "asym_b"])
def test_conv_pads(pads):
    conv((1, 2, 6, 7), (3, 2, 3, 3), pads=pads)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("strides", [[1, 1], [2, 2], [2, 1]], ids=["s11", "s22", "s21"])
def test_conv_auto_pad(auto_pad, strides):
    # 8x7 input with a 4x3 kernel: SAME_UPPER and SAME_LOWER put the odd pad on different sides.
    conv((1, 2, 8, 7), (3, 2, 4, 3), auto_pad=auto_pad, strides=strides)


def test_conv3d_auto_pad_same_lower():
    # (onnxruntime rejects SAME_* with dilations != 1, so that combination has no oracle.)
    conv((1, 2, 5, 4, 6), (2, 2, 2, 3, 2), auto_pad="SAME_LOWER", strides=[2, 1, 2])


@pytest.mark.parametrize("strides", [[2, 2], [3, 2], [1, 3]])
def test_conv_strides(strides):
    conv((1, 2, 10, 9), (3, 2, 3, 3), strides=strides, pads=[1, 1, 1, 1])


@pytest.mark.parametrize("dilations", [[2, 2], [1, 3], [2, 1]])
def test_conv_dilations(dilations):
    conv((1, 2, 10, 10), (3, 2, 3, 3), dilations=dilations, pads=[1, 2, 1, 2])


def test_conv_kernel_shape_attribute():
    conv((1, 2, 6, 6), (3, 2, 3, 2), kernel_shape=[3, 2], pads=[1, 0, 1, 1])


def test_conv_1x1():
    conv((1, 8, 5, 5), (4, 8, 1, 1))


# ------------------------------------------------------------------------------ groups
@pytest.mark.parametrize("bias", [True, False])
def test_conv_depthwise(bias):
    conv((1, 4, 7, 7), (4, 1, 3, 3), bias, group=4, pads=[1, 1, 1, 1])


def test_conv_depthwise_multiplier():
    # group == C, two output channels per input channel
    conv((2, 3, 6, 6), (6, 1, 3, 3), group=3, strides=[2, 2], pads=[1, 1, 1, 1])


def test_conv_grouped_2():
    conv((1, 4, 6, 6), (6, 2, 3, 3), group=2, pads=[0, 1, 1, 0])


def test_conv_grouped_1d():
    conv((1, 6, 9), (4, 3, 2), group=2, strides=[2])


def test_conv_depthwise_3d():
    conv((1, 2, 4, 4, 4), (2, 1, 2, 2, 2), group=2)


def test_conv_group_mismatch_rejected(tmp_path):
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=3)
    m = make_model([node], {"x": rand(1, 4, 5, 5)}, {"y": (np.float32, None)},
                   {"w": rand(6, 2, 3, 3)})
    with pytest.raises(AotcError, match="group=3"):
        aotc.compile(m, tmp_path, name="m")


def test_conv_int8_rejected(tmp_path):
    node = helper.make_node("Conv", ["x", "w"], ["y"])
    m = make_model([node], {"x": rand(1, 1, 3, 3, dtype=np.int8)}, {"y": (np.int8, None)},
                   {"w": rand(1, 1, 2, 2, dtype=np.int8)})
    with pytest.raises(AotcError, match="has type int8"):
        aotc.compile(m, tmp_path, name="m")


# ------------------------------------------------------------------------------ fusions
def _bn_params(c, seed):
    return {"scale": rand(c, seed=seed), "bnb": rand(c, seed=seed + 1),
            "mean": rand(c, seed=seed + 2), "var": rand(c, seed=seed + 3, lo=0.1, hi=2.0)}


@pytest.mark.parametrize("bias,group", [(True, 1), (False, 1), (True, 2), (False, 4)])
def test_conv_batchnorm_folded(bias, group):
    x = rand(1, 4, 6, 6, seed=40)
    w = rand(4, 4 // group, 3, 3, seed=41)
    inits = {"w": w, **_bn_params(4, 42)}
    conv_in = ["x", "w"]
    if bias:
        inits["b"] = rand(4, seed=46)
        conv_in.append("b")
    nodes = [helper.make_node("Conv", conv_in, ["c"], pads=[1, 1, 1, 1], group=group),
             helper.make_node("BatchNormalization", ["c", "scale", "bnb", "mean", "var"], ["y"],
                              epsilon=1e-3)]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [1, 4, 6, 6])}, inits)
    bundle = check(m, {"x": x}, **TOL)
    assert len(bundle.kernels) == 1


def test_conv_batchnorm_relu_single_kernel():
    x = rand(1, 3, 5, 5, seed=47)
    inits = {"w": rand(4, 3, 3, 3, seed=48), **_bn_params(4, 49)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bnb", "mean", "var"], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [1, 4, 5, 5])}, inits)
    bundle = check(m, {"x": x}, **TOL)
    assert len(bundle.kernels) == 1


def test_conv_residual_add_relu_fused():
    x = rand(1, 4, 6, 6, seed=53)
    inits = {"w": rand(4, 4, 3, 3, seed=54), "b": rand(4, seed=55)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "x"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [1, 4, 6, 6])}, inits)
    bundle = check(m, {"x": x}, **TOL)
    assert len(bundle.kernels) == 1


def test_two_convs_residual_block():
    # conv -> relu -> conv -> add(x) -> relu: two kernels, the second with a residual epilogue.
    x = rand(1, 3, 5, 5, seed=56)
    inits = {"w1": rand(3, 3, 3, 3, seed=57), "w2": rand(3, 3, 3, 3, seed=58),
             "b2": rand(3, seed=59)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["x", "c2"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [1, 3, 5, 5])}, inits)
    bundle = check(m, {"x": x}, **TOL)
    assert len(bundle.kernels) == 2


def test_conv_output_with_two_consumers_not_fused():
    x = rand(1, 2, 4, 4, seed=60)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Relu", ["c"], ["y"]),
             helper.make_node("Sigmoid", ["c"], ["z"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [1, 2, 3, 3]),
                                     "z": (np.float32, [1, 2, 3, 3])},
                   {"w": rand(2, 2, 2, 2, seed=61)})
    bundle = check(m, {"x": x}, **TOL)
    assert len(bundle.kernels) == 3


# ------------------------------------------------------------------------------ ConvTranspose
def conv_t(x_shape, w_shape, bias=True, seed=0, **attrs):
    x = rand(*x_shape, seed=seed)
    inits = {"w": rand(*w_shape, seed=seed + 1)}
    if bias:
        inits["b"] = rand(w_shape[1] * attrs.get("group", 1), seed=seed + 2)
    return check_node("ConvTranspose", {"x": x}, attrs, initializers=inits, **TOL)


@pytest.mark.parametrize("bias", [True, False])
def test_convtranspose2d(bias):
    conv_t((1, 3, 4, 5), (3, 2, 3, 3), bias)


def test_convtranspose1d():
    conv_t((2, 2, 7), (2, 3, 4), strides=[2], pads=[1, 2])


@pytest.mark.parametrize("strides", [[2, 2], [3, 2], [1, 2]])
def test_convtranspose_strides(strides):
    conv_t((1, 2, 4, 4), (2, 3, 3, 3), strides=strides)


@pytest.mark.parametrize("pads", [[1, 1, 1, 1], [0, 1, 2, 1]], ids=["sym", "asym"])
def test_convtranspose_pads(pads):
    conv_t((1, 2, 5, 5), (2, 2, 3, 3), strides=[2, 2], pads=pads)


def test_convtranspose_output_padding():
    conv_t((1, 2, 4, 4), (2, 2, 3, 3), strides=[2, 3], pads=[1, 1, 1, 1],
           output_padding=[1, 2])


@pytest.mark.parametrize("output_shape", [[9, 9], [10, 10], [10, 9]])
def test_convtranspose_output_shape(output_shape):
    # Full size 9x9; 10 asks for one more row/column than any input reaches (bias only).
    # Regression: the negative total padding shifted the whole output by one.
    conv_t((1, 2, 4, 4), (2, 2, 3, 3), strides=[2, 2], output_shape=output_shape)


@pytest.mark.parametrize("group,w_shape", [(2, (4, 3, 3, 3)), (4, (4, 1, 3, 3))],
                         ids=["group2", "depthwise"])
def test_convtranspose_group(group, w_shape):
    conv_t((1, 4, 4, 4), w_shape, group=group, strides=[2, 2], pads=[1, 1, 1, 1])


@pytest.mark.parametrize("dilations", [[2, 2], [1, 3]])
def test_convtranspose_dilations(dilations):
    conv_t((1, 2, 4, 4), (2, 2, 3, 3), dilations=dilations)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_convtranspose_auto_pad(auto_pad):
    conv_t((1, 2, 3, 4), (2, 2, 4, 3), strides=[2, 2], auto_pad=auto_pad)


def test_convtranspose_relu_fused():
    x = rand(1, 2, 3, 3, seed=62)
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["c"], strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [1, 3, 7, 7])},
                   {"w": rand(2, 3, 3, 3, seed=63), "b": rand(3, seed=64)})
    bundle = check(m, {"x": x}, **TOL)
    assert len(bundle.kernels) == 1


@pytest.mark.parametrize("auto_pad", ["NOTSET", "SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("output_shape", [[8, 8], [7, 8]])
def test_convtranspose_output_shape_odd_total_padding(auto_pad, output_shape):
    # Full size 9x9: a total padding of 1 or 2 per axis; odd totals test which side gets more
    # (regression: NOTSET with output_shape put the odd pixel at the end; ONNX says the start).
    conv_t((1, 2, 4, 4), (2, 2, 3, 3), strides=[2, 2], output_shape=output_shape,
           auto_pad=auto_pad)


def test_conv_per_channel_epilogue_fused():
    # Per-channel operands (C,1,1) and (1,C,1,1) in the epilogue are read by broadcasting.
    x = rand(1, 2, 5, 5, seed=65)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Mul", ["c", "s"], ["m"]),
             helper.make_node("Add", ["t", "m"], ["a"]),
             helper.make_node("PRelu", ["a", "slope"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [1, 3, 5, 5])},
                   {"w": rand(3, 2, 3, 3, seed=66), "s": rand(3, 1, 1, seed=67),
                    "t": rand(1, 3, 1, 1, seed=68), "slope": rand(3, 1, 1, seed=69, lo=0, hi=1)})
    bundle = check(m, {"x": x}, **TOL)
    assert len(bundle.kernels) == 1


def test_conv_output_is_graph_output_then_batchnorm():
    # The Conv result is needed as is: BatchNormalization must not be folded into it.
    x = rand(1, 2, 4, 4, seed=70)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("BatchNormalization", ["c", "scale", "bnb", "mean", "var"], ["y"])]
    m = make_model(nodes, {"x": x}, {"c": (np.float32, [1, 3, 3, 3]),
                                     "y": (np.float32, [1, 3, 3, 3])},
                   {"w": rand(3, 2, 2, 2, seed=71), **_bn_params(3, 72)})
    bundle = check(m, {"x": x}, **TOL)
    assert len(bundle.kernels) == 2


def test_convtranspose_batchnorm_not_folded():
    # fold-bn handles Conv and Gemm only; ConvTranspose + BatchNormalization stays correct.
    x = rand(1, 2, 3, 3, seed=73)
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["c"], strides=[2, 2]),
             helper.make_node("BatchNormalization", ["c", "scale", "bnb", "mean", "var"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [1, 3, 7, 7])},
                   {"w": rand(2, 3, 3, 3, seed=74), **_bn_params(3, 75)})
    check(m, {"x": x}, **TOL)
