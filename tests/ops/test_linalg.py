"""Det and Einsum against onnxruntime: batched and pivoting determinants, singular matrices;
Einsum matmul, batch matmul, transpose, trace, diagonal, reductions, outer products,
ellipses, implicit outputs, three operands and integer dtypes."""

import numpy as np
import pytest
from onnx import helper
from opcheck import check, check_node, make_model, rand

import aotc
from aotc.errors import AotcError


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (5, 5), (4, 3, 3), (2, 3, 4, 4)])
def test_det(shape):
    check_node("Det", {"x": rand(*shape, seed=len(shape))}, opset=22, atol=1e-4, rtol=1e-4)


def test_det_needs_pivoting_and_singular():
    x = np.array([[[0.0, 2.0, 1.0], [1.0, 0.0, 3.0], [4.0, 5.0, 0.0]],   # zero leading pivot
                  [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]],   # singular
                  [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]], np.float32)
    check_node("Det", {"x": x}, opset=11, atol=1e-5, rtol=1e-5)


def test_det_rejects_non_square(tmp_path):
    node = helper.make_node("Det", ["x"], ["y"], name="det")
    m = make_model([node], {"x": rand(2, 3)}, {"y": (np.float32, None)}, opset=22)
    with pytest.raises(AotcError, match=r"is not \[\.\.\., M, M\]"):
        aotc.compile(m, tmp_path, name="m")


EINSUM = [  # (equation, operand shapes)
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ii->", [(4, 4)]),
    ("ii->i", [(4, 4)]),
    ("bii->bi", [(2, 3, 3)]),
    ("ij->i", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i", [(5,), (5,)]),
    ("ij,jk", [(3, 4), (4, 2)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 2)]),
    ("...ij->...ji", [(2, 3, 3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("i,i->i", [(6,), (6,)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum(eq, shapes):
    inputs = {f"x{k}": rand(*s, seed=k) for k, s in enumerate(shapes)}
    check_node("Einsum", inputs, {"equation": eq}, opset=12, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_einsum_integer(dtype):
    inputs = {"a": rand(3, 4, dtype=dtype, lo=-5, hi=5), "b": rand(4, 2, seed=1, dtype=dtype,
                                                                   lo=-5, hi=5)}
    node = helper.make_node("Einsum", ["a", "b"], ["y"], equation="ij,jk->ik")
    m = make_model([node], inputs, {"y": (dtype, [3, 2])}, opset=12)
    check(m, inputs)


def test_einsum_bad_equation_rejected(tmp_path):
    node = helper.make_node("Einsum", ["a"], ["y"], name="e", equation="ijk->i")
    m = make_model([node], {"a": rand(3, 4)}, {"y": (np.float32, None)}, opset=12)
    with pytest.raises(AotcError, match="does not match an input of rank 2"):
        aotc.compile(m, tmp_path, name="m")
