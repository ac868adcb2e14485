"""Normalisation ops (aotc/ops/nn/norm.py, norm2.py) against onnxruntime: standalone, folded and
training-mode BatchNormalization, LayerNormalization (axis, bias, Mean/InvStdDev),
InstanceNormalization, LpNormalization, RMSNormalization, GroupNormalization (opsets 18, 21),
MeanVarianceNormalization, LRN, their fusion with a following elementwise op, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from opcheck import check, check_node, compile_and_run, make_model, ort_run, rand

import aotc
from aotc.codegen.c import CPrinter
from aotc.errors import AotcError

# Row statistics over up to ~100 elements; onnxruntime's LayerNorm uses E[x^2] - E[x]^2 in float.
TOL = dict(atol=1e-5, rtol=1e-4)
BN_PARAMS = ("scale", "bnb", "mean", "var")


def bn_params(c: int, seed: int = 0) -> dict[str, np.ndarray]:
    return {"scale": rand(c, seed=seed), "bnb": rand(c, seed=seed + 1),
            "mean": rand(c, seed=seed + 2), "var": rand(c, seed=seed + 3, lo=0.05, hi=3.0)}


def compile_error(model, tmp_path, match: str) -> None:
    with pytest.raises(AotcError, match=match):
        aotc.compile(model, tmp_path, name="m")


# ------------------------------------------------------------------------------ BatchNormalization
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (1, 4, 3, 5), (1, 2, 3, 2, 4)],
                         ids=["rank2", "rank3", "rank4", "rank5"])
def test_batchnorm_standalone_constant_params(shape):
    x = rand(*shape, seed=1)
    bundle = check_node("BatchNormalization", {"x": x}, {"epsilon": 1e-3},
                        initializers=bn_params(shape[1], seed=2), **TOL)
    assert len(bundle.kernels) == 1
    # The statistics became a per-channel scale/shift at compile time (fold-bn rewrites the BN
    # as Mul + Add with (C, 1, ...) constants): no sqrt in the kernel.
    (step,) = bundle.compilation.lowered
    assert "sqrtf" not in CPrinter().kernel(step.kernel)
    g = bundle.compilation.graph
    consts = [g.values[i].type.numel for n in g.nodes for e in (n, *n.epilogue)
              for i in e.inputs if i in g.values and g.values[i].is_const]
    assert sorted(consts) == [shape[1], shape[1]]


def test_batchnorm_params_as_graph_inputs():
    # Statistics known only at run time: the kernel computes scale/shift per channel.
    x = rand(2, 3, 4, 4, seed=5)
    check_node("BatchNormalization", {"x": x, **bn_params(3, seed=6)}, **TOL)


@pytest.mark.parametrize("opset", [11, 14, 15, 17])
def test_batchnorm_opsets(opset):
    x = rand(1, 3, 4, 4, seed=7)
    check_node("BatchNormalization", {"x": x}, initializers=bn_params(3, seed=8), opset=opset,
               **TOL)


def test_batchnorm_training_mode_zero_explicit():
    x = rand(1, 2, 3, 3, seed=9)
    check_node("BatchNormalization", {"x": x}, {"training_mode": 0},
               initializers=bn_params(2, seed=10), opset=15, **TOL)


def test_batchnorm_relu_fused():
    x = rand(1, 3, 4, 4, seed=11)
    nodes = [helper.make_node("BatchNormalization", ["x", *BN_PARAMS], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [1, 3, 4, 4])}, bn_params(3, seed=12))
    bundle = check(m, {"x": x}, **TOL)
    assert len(bundle.kernels) == 1


def test_batchnorm_after_matmul_fuses_as_an_epilogue():
    # fold-bn folds into Conv/Gemm weights only; after a MatMul the BN becomes a per-channel
    # Mul + Add that fuses with the Relu into the MatMul: one kernel.
    x = rand(2, 6, seed=13)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["t"]),
             helper.make_node("BatchNormalization", ["t", *BN_PARAMS], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [2, 4])},
                   {"w": rand(6, 4, seed=14), **bn_params(4, seed=15)})
    bundle = check(m, {"x": x}, **TOL)
    assert len(bundle.kernels) == 1


@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("c_shape", [None, (4,), (1, 4), ()], ids=["noC", "N", "1xN", "scalar"])
def test_gemm_batchnorm_folded(trans_b, c_shape):
    x = rand(3, 5, seed=16)
    w = rand(*((4, 5) if trans_b else (5, 4)), seed=17)
    inits = {"w": w, **bn_params(4, seed=18)}
    gemm_in = ["x", "w"]
    if c_shape is not None:
        inits["c"] = rand(*c_shape, seed=22)
        gemm_in.append("c")
    nodes = [helper.make_node("Gemm", gemm_in, ["t"], transB=trans_b),
             helper.make_node("BatchNormalization", ["t", *BN_PARAMS], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [3, 4])}, inits)
    bundle = check(m, {"x": x}, **TOL)
    assert len(bundle.kernels) == 1


@pytest.mark.parametrize("c_shape", [(4, 4), (4, 1)])
def test_gemm_batchnorm_per_row_bias_not_folded(c_shape):
    # C varies along M: the bias cannot become a per-column BN bias. (4, 1) with M == N == 4
    # has as many elements as a per-column bias and was once folded as if it were one.
    x = rand(4, 5, seed=23)
    nodes = [helper.make_node("Gemm", ["x", "w", "c"], ["t"]),
             helper.make_node("BatchNormalization", ["t", *BN_PARAMS], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [4, 4])},
                   {"w": rand(5, 4, seed=24), "c": rand(*c_shape, seed=25), **bn_params(4, 26)})
    check(m, {"x": x}, **TOL)


def test_conv_with_runtime_weights_then_batchnorm():
    x = rand(1, 2, 5, 5, seed=30)
    w = rand(3, 2, 3, 3, seed=31)
    nodes = [helper.make_node("Conv", ["x", "w"], ["t"]),
             helper.make_node("BatchNormalization", ["t", *BN_PARAMS], ["y"])]
    m = make_model(nodes, {"x": x, "w": w}, {"y": (np.float32, [1, 3, 3, 3])},
                   bn_params(3, seed=32))
    bundle = check(m, {"x": x, "w": w}, atol=1e-4, rtol=1e-4)
    # Weights are run-time inputs, so nothing folds into them; the BN fuses as an epilogue.
    assert len(bundle.kernels) == 1


@pytest.mark.parametrize("opset", [14, 15])
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 4, 5), (3, 2, 2, 3, 2)])
def test_batchnorm_training_mode(shape, opset):
    # Batch statistics normalise X; running_mean/running_var blend in the batch's.
    x = rand(*shape, seed=35)
    node = helper.make_node("BatchNormalization", ["x", *BN_PARAMS], ["y", "rm", "rv"],
                            training_mode=1, momentum=0.8, epsilon=1e-3)
    c = shape[1]
    m = make_model([node], {"x": x}, {"y": (np.float32, list(shape)), "rm": (np.float32, [c]),
                                      "rv": (np.float32, [c])}, bn_params(c, seed=36),
                   opset=opset)
    check(m, {"x": x}, **TOL)


def test_batchnorm_training_mode_after_conv_is_not_folded():
    x = rand(2, 2, 5, 5, seed=37)
    nodes = [helper.make_node("Conv", ["x", "w"], ["t"]),
             helper.make_node("BatchNormalization", ["t", *BN_PARAMS], ["y", "rm", "rv"],
                              training_mode=1)]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [2, 3, 3, 3]), "rm": (np.float32, [3]),
                                     "rv": (np.float32, [3])},
                   {"w": rand(3, 2, 3, 3, seed=38), **bn_params(3, seed=39)}, opset=15)
    check(m, {"x": x}, atol=1e-4, rtol=1e-4)


def test_batchnorm_extra_outputs_rejected(tmp_path):
    node = helper.make_node("BatchNormalization", ["x", *BN_PARAMS], ["y", "rm", "rv"],
                            training_mode=0)
    m = make_model([node], {"x": rand(1, 2, 3)},
                   {"y": (np.float32, [1, 2, 3]), "rm": (np.float32, [2]),
                    "rv": (np.float32, [2])}, bn_params(2), opset=15)
    compile_error(m, tmp_path, "training-mode outputs")


def test_batchnorm_trailing_empty_outputs():
    # Exporters sometimes list the unused optional outputs as "". onnxruntime crashes on such a
    # node, so its oracle is the same model with the outputs left off.
    x = rand(1, 2, 3, 3, seed=33)

    def model(outs):
        node = helper.make_node("BatchNormalization", ["x", *BN_PARAMS], outs)
        return make_model([node], {"x": x}, {"y": (np.float32, [1, 2, 3, 3])},
                          bn_params(2, seed=34), opset=11)

    want = ort_run(model(["y"]), {"x": x})["y"]
    got, _ = compile_and_run(model(["y", "", "", "", ""]), {"x": x})
    np.testing.assert_allclose(got["y"], want, **TOL)


# ------------------------------------------------------------------------------ LayerNormalization
@pytest.mark.parametrize("shape,axis", [((2, 3, 8), -1), ((2, 3, 8), 1), ((2, 3, 4, 5), -2),
                                        ((4, 6), 0), ((16,), 0)])
@pytest.mark.parametrize("bias", [True, False])
def test_layernorm(shape, axis, bias):
    x = rand(*shape, seed=40)
    a = axis + len(shape) if axis < 0 else axis
    inits = {"scale": rand(*shape[a:], seed=41)}
    if bias:
        inits["b"] = rand(*shape[a:], seed=42)
    check_node("LayerNormalization", {"x": x}, {"axis": axis}, initializers=inits, **TOL)


def test_layernorm_epsilon_and_runtime_scale():
    x = rand(3, 10, seed=43, lo=-0.05, hi=0.05)  # a small variance makes epsilon matter
    check_node("LayerNormalization", {"x": x, "scale": rand(10, seed=44), "b": rand(10, seed=45)},
               {"epsilon": 1e-2}, **TOL)


def test_layernorm_broadcast_scale():
    x = rand(2, 3, 4, seed=46)
    check_node("LayerNormalization", {"x": x}, {"axis": 1},
               initializers={"scale": rand(1, 4, seed=47), "b": rand(4, seed=48)}, **TOL)


@pytest.mark.parametrize("n_outputs", [2, 3])
def test_layernorm_mean_and_inv_std_outputs(n_outputs):
    x = rand(2, 3, 6, seed=49)
    check_node("LayerNormalization", {"x": x}, {"axis": -1},
               initializers={"scale": rand(6, seed=50), "b": rand(6, seed=51)},
               n_outputs=n_outputs, **TOL)


def test_layernorm_inv_std_without_mean():
    x = rand(3, 5, seed=57)
    node = helper.make_node("LayerNormalization", ["x", "scale"], ["y", "", "inv"])
    m = make_model([node], {"x": x}, {"y": (np.float32, [3, 5]), "inv": (np.float32, [3, 1])},
                   {"scale": rand(5, seed=58)})
    check(m, {"x": x}, **TOL)


def test_layernorm_residual_add_fused():
    x = rand(2, 4, 8, seed=52)
    r = rand(2, 4, 8, seed=53)
    nodes = [helper.make_node("LayerNormalization", ["x", "scale", "b"], ["n"]),
             helper.make_node("Add", ["n", "r"], ["y"])]
    m = make_model(nodes, {"x": x, "r": r}, {"y": (np.float32, [2, 4, 8])},
                   {"scale": rand(8, seed=54), "b": rand(8, seed=55)})
    bundle = check(m, {"x": x, "r": r}, **TOL)
    assert len(bundle.kernels) == 1


def test_layernorm_large_mean_is_accurate():
    # A large offset with a small spread: the two-pass variance stays exact enough. onnxruntime
    # (E[x^2] - E[x]^2 in float32) is not a usable oracle here, so compare with float64 numpy.
    rng = np.random.default_rng(56)
    x = (1000.0 + rng.uniform(-1, 1, (2, 64))).astype(np.float32)
    scale = np.ones(64, np.float32)
    node = helper.make_node("LayerNormalization", ["x", "scale"], ["y"])
    m = make_model([node], {"x": x}, {"y": (np.float32, [2, 64])}, {"scale": scale})
    got, _ = compile_and_run(m, {"x": x})
    xd = x.astype(np.float64)
    want = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got["y"], want, atol=1e-3)


def test_layernorm_stash_type_rejected(tmp_path):
    node = helper.make_node("LayerNormalization", ["x", "scale"], ["y"], stash_type=11)
    m = make_model([node], {"x": rand(2, 4)}, {"y": (np.float32, [2, 4])},
                   {"scale": rand(4)})
    compile_error(m, tmp_path, "stash_type=11")


def test_layernorm_bad_axis_rejected(tmp_path):
    node = helper.make_node("LayerNormalization", ["x", "scale"], ["y"], axis=3)
    m = make_model([node], {"x": rand(2, 4)}, {"y": (np.float32, [2, 4])},
                   {"scale": rand(4)})
    compile_error(m, tmp_path, "axis=3")


# ------------------------------------------------------------------------- InstanceNormalization
@pytest.mark.parametrize("shape", [(2, 3, 7), (1, 4, 3, 5), (1, 2, 3, 2, 4)])
def test_instancenorm(shape):
    x = rand(*shape, seed=60)
    c = shape[1]
    check_node("InstanceNormalization", {"x": x}, {"epsilon": 1e-3},
               initializers={"scale": rand(c, seed=61), "b": rand(c, seed=62)}, **TOL)


def test_instancenorm_relu_fused():
    x = rand(1, 3, 4, 4, seed=63)
    nodes = [helper.make_node("InstanceNormalization", ["x", "scale", "b"], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [1, 3, 4, 4])},
                   {"scale": rand(3, seed=64), "b": rand(3, seed=65)})
    bundle = check(m, {"x": x}, **TOL)
    assert len(bundle.kernels) == 1


# ------------------------------------------------------------------------------ LpNormalization
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_lpnorm(p, axis):
    check_node("LpNormalization", {"x": rand(3, 4, 5, seed=66)}, {"p": p, "axis": axis}, **TOL)


@pytest.mark.parametrize("p", [1, 2])
def test_lpnorm_zero_vector(p):
    x = rand(3, 4, seed=67)
    x[1] = 0.0
    check_node("LpNormalization", {"x": x}, {"p": p, "axis": 1}, **TOL)


def test_lpnorm_p3_rejected(tmp_path):
    node = helper.make_node("LpNormalization", ["x"], ["y"], p=3)
    m = make_model([node], {"x": rand(2, 4)}, {"y": (np.float32, [2, 4])})
    compile_error(m, tmp_path, "p=3")


def test_layernorm_scale_shape_mismatch_rejected(tmp_path):
    node = helper.make_node("LayerNormalization", ["x", "scale"], ["y"])
    m = make_model([node], {"x": rand(2, 4)}, {"y": (np.float32, [2, 4])}, {"scale": rand(3)})
    compile_error(m, tmp_path, "does not broadcast")


def test_batchnorm_param_shape_mismatch_rejected(tmp_path):
    node = helper.make_node("BatchNormalization", ["x", *BN_PARAMS], ["y"])
    params = {**bn_params(3), "var": rand(2, lo=0.1, hi=1)}
    m = make_model([node], {"x": rand(1, 3, 2)}, {"y": (np.float32, [1, 3, 2])}, params)
    compile_error(m, tmp_path, r"input 4 must have shape \(3,\)")


# ------------------------------------------------------------------------------ RMSNormalization
@pytest.mark.parametrize("shape,axis", [((2, 3, 8), -1), ((2, 3, 8), 1), ((2, 3, 4, 5), -2),
                                        ((4, 6), 0)])
def test_rmsnorm(shape, axis):
    a = axis + len(shape) if axis < 0 else axis
    check_node("RMSNormalization", {"x": rand(*shape, seed=70)}, {"axis": axis},
               initializers={"scale": rand(*shape[a:], seed=71)}, opset=23, **TOL)


def test_rmsnorm_broadcast_runtime_scale_and_relu_fused():
    x = rand(2, 3, 4, seed=72, lo=-0.05, hi=0.05)  # small values: epsilon matters
    nodes = [helper.make_node("RMSNormalization", ["x", "s"], ["n"], axis=1, epsilon=1e-3),
             helper.make_node("Relu", ["n"], ["y"])]
    m = make_model(nodes, {"x": x, "s": rand(1, 4, seed=73)}, {"y": (np.float32, [2, 3, 4])},
                   opset=23)
    bundle = check(m, {"x": x, "s": rand(1, 4, seed=73)}, **TOL)
    assert len(bundle.kernels) == 1


# ---------------------------------------------------------------------------- GroupNormalization
@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("shape,groups", [((2, 4, 5), 2), ((1, 6, 3, 4), 3), ((1, 4, 2, 2), 4),
                                          ((2, 3, 5), 1)])
def test_groupnorm(opset, shape, groups):
    n = groups if opset == 18 else shape[1]
    x = rand(*shape, seed=74)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups,
                            epsilon=1e-3)
    m = make_model([node], {"x": x}, {"y": (np.float32, list(shape))},
                   {"s": rand(n, seed=75), "b": rand(n, seed=76)}, opset=opset)
    if opset == 21:
        check(m, {"x": x}, **TOL)
        return
    # onnx's checker calls the per-group opset 18 version deprecated; onnxruntime runs it.
    got, _ = compile_and_run(m, {"x": x})
    np.testing.assert_allclose(got["y"], ort_run(m, {"x": x})["y"], **TOL)


def test_groupnorm_groups_must_divide_channels(tmp_path):
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3)
    m = make_model([node], {"x": rand(1, 4, 2)}, {"y": (np.float32, [1, 4, 2])},
                   {"s": rand(4), "b": rand(4)}, opset=21)
    compile_error(m, tmp_path, "num_groups=3 must divide")


# --------------------------------------------------------------------- MeanVarianceNormalization
# (onnx's shape inference cannot expand MVN without an explicit axes attribute.)
@pytest.mark.parametrize("shape,axes", [((2, 3, 4, 5), [0, 2, 3]), ((2, 3, 4, 5), [2, 3]),
                                        ((3, 4, 5), [-1]), ((2, 6), [0, 1])])
def test_mvn(shape, axes):
    check_node("MeanVarianceNormalization", {"x": rand(*shape, seed=77)}, {"axes": axes},
               opset=13,
               atol=1e-4, rtol=1e-4)


# ------------------------------------------------------------------------------------------ LRN
# onnxruntime takes only 4-D inputs and odd sizes.
@pytest.mark.parametrize("attrs", [dict(size=3), dict(size=3, alpha=0.01, beta=0.5, bias=2.0),
                                   dict(size=5, alpha=0.1, beta=1.0), dict(size=1)])
@pytest.mark.parametrize("shape", [(2, 5, 3, 3), (1, 4, 1, 6)])
def test_lrn(shape, attrs):
    check_node("LRN", {"x": rand(*shape, seed=78)}, attrs, opset=13, **TOL)
