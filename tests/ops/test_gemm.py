"""Gemm and MatMul (aotc/ops/nn/gemm.py) against onnxruntime: transposes, alpha/beta, every shape
of C, constant and run-time B, 1-D operands, batched broadcasting, and fused epilogues."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from opcheck import check, check_node, make_model, rand

import aotc
from aotc.errors import AotcError

# Dot products of up to ~40 float32 terms.
TOL = dict(atol=1e-5, rtol=1e-5)


def gemm(M, K, N, c_shape=None, const_b=True, c_input=False, seed=0, **attrs):
    ta, tb = attrs.get("transA", 0), attrs.get("transB", 0)
    a = rand(*((K, M) if ta else (M, K)), seed=seed)
    b = rand(*((N, K) if tb else (K, N)), seed=seed + 1)
    inputs, inits = {"a": a}, {}
    (inits if const_b else inputs)["b"] = b
    if c_shape is not None:
        (inputs if c_input else inits)["c"] = rand(*c_shape, seed=seed + 2)
    names = ["a", "b"] + (["c"] if c_shape is not None else [])
    return check_node("Gemm", inputs, attrs, initializers=inits, input_names=names, atol=1e-4,
                      rtol=1e-5)


# ------------------------------------------------------------------------------ Gemm
@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("const_b", [True, False], ids=["constB", "runtimeB"])
def test_gemm_transposes(trans_a, trans_b, const_b):
    gemm(5, 7, 11, (11,), const_b, transA=trans_a, transB=trans_b)


@pytest.mark.parametrize("c_shape", [None, (6,), (1, 6), (4, 6), (), (4, 1), (1, 1)],
                         ids=["absent", "N", "1xN", "MxN", "scalar", "Mx1", "1x1"])
def test_gemm_c_shapes(c_shape):
    gemm(4, 5, 6, c_shape)


@pytest.mark.parametrize("alpha,beta", [(0.5, 1.0), (1.0, 0.25), (-2.0, 3.0), (1.5, 0.0)])
def test_gemm_alpha_beta(alpha, beta):
    gemm(3, 4, 9, (3, 9), alpha=alpha, beta=beta)


def test_gemm_alpha_without_c():
    gemm(3, 4, 5, None, alpha=0.75, transB=1)


def test_gemm_c_is_graph_input():
    gemm(4, 6, 5, (4, 5), c_input=True, beta=0.5)


@pytest.mark.parametrize("n", [1, 8, 16, 17, 23])
def test_gemm_column_tiling(n):
    # The lowering computes 8 columns at a time: full tiles, a remainder, and N < 8.
    gemm(3, 6, n, (n,), transB=1)


def test_gemm_single_row_fully_connected():
    gemm(1, 40, 10, (10,), transB=1)


def test_gemm_relu_fused():
    x = rand(2, 8, seed=10)
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["t"], transB=1),
             helper.make_node("Relu", ["t"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [2, 5])},
                   {"w": rand(5, 8, seed=11), "b": rand(5, seed=12)})
    bundle = check(m, {"x": x}, **TOL)
    assert len(bundle.kernels) == 1


def test_gemm_rejects_3d(tmp_path):
    node = helper.make_node("Gemm", ["a", "b"], ["y"])
    m = make_model([node], {"a": rand(2, 3, 4)}, {"y": (np.float32, None)}, {"b": rand(4, 5)})
    with pytest.raises(AotcError, match="must be 2-D"):
        aotc.compile(m, tmp_path, name="m")


def test_gemm_rejects_int(tmp_path):
    node = helper.make_node("Gemm", ["a", "b"], ["y"])
    m = make_model([node], {"a": rand(2, 3, dtype=np.int32)}, {"y": (np.int32, None)},
                   {"b": rand(3, 4, dtype=np.int32)})
    with pytest.raises(AotcError, match="dtype int32"):
        aotc.compile(m, tmp_path, name="m")


# ------------------------------------------------------------------------------ MatMul
MATMUL_SHAPES = [
    ((5,), (5, 3)),               # 1-D x 2-D
    ((4, 5), (5,)),               # 2-D x 1-D
    ((5,), (5,)),                 # 1-D x 1-D: a scalar
    ((2, 4, 5), (5, 3)),          # batched x 2-D
    ((4, 5), (2, 5, 3)),          # 2-D x batched
    ((2, 4, 5), (2, 5, 3)),       # same batch
    ((2, 1, 4, 5), (3, 5, 6)),    # 4-D x 3-D, batch dims broadcast both ways
    ((1, 3, 4, 5), (2, 1, 5, 9)),
    ((3, 4, 5), (5,)),            # batched x 1-D
    ((5,), (2, 5, 3)),            # 1-D x batched
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=[f"{a}x{b}" for a, b in MATMUL_SHAPES])
@pytest.mark.parametrize("const_b", [False, True], ids=["runtimeB", "constB"])
def test_matmul(sa, sb, const_b):
    a, b = rand(*sa, seed=20), rand(*sb, seed=21)
    if const_b:
        check_node("MatMul", {"a": a}, initializers={"b": b}, **TOL)
    else:
        check_node("MatMul", {"a": a, "b": b}, **TOL)


def test_matmul_constant_a():
    check_node("MatMul", {"b": rand(5, 3, seed=22)}, initializers={"a": rand(4, 5, seed=23)},
               input_names=["a", "b"], **TOL)


def test_matmul_bias_add_fused():
    x = rand(2, 3, 8, seed=24)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["t"]),
             helper.make_node("Add", ["t", "bias"], ["u"]),
             helper.make_node("Tanh", ["u"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [2, 3, 10])},
                   {"w": rand(8, 10, seed=25), "bias": rand(10, seed=26)})
    bundle = check(m, {"x": x}, atol=1e-5, rtol=1e-4)
    assert len(bundle.kernels) == 1


def test_matmul_shape_mismatch_rejected(tmp_path):
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    m = make_model([node], {"a": rand(2, 3), "b": rand(4, 5)}, {"y": (np.float32, None)})
    with pytest.raises(AotcError, match="do not multiply"):
        aotc.compile(m, tmp_path, name="m")
