"""Softmax and LogSoftmax against onnxruntime: opset < 13 (2-D coercion at axis, default 1) and
opset >= 13 (one axis, default -1), several ranks and axes, large inputs (stability)."""

import numpy as np
import pytest
from onnx import helper
from opcheck import check, check_node, compile_and_run, make_model, rand

import aotc
from aotc.errors import AotcError

# exp/log in the kernel and in onnxruntime may differ by an ulp or two.
TOL = dict(atol=1e-6, rtol=1e-5)

CASES = [  # (shape, axis or None for the default)
    ((7,), -1),
    ((7,), 0),
    ((3, 5), None),
    ((3, 5), 0),
    ((3, 5), -1),
    ((2, 3, 4), None),
    ((2, 3, 4), 1),
    ((2, 3, 4), 2),
    ((2, 3, 4, 5), None),
    ((2, 3, 4, 5), 0),
    ((2, 3, 4, 5), 2),
    ((2, 3, 4, 5), -3),
    ((1, 10, 1, 1), 1),
]


@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape,axis", CASES, ids=[f"{s}-axis{a}" for s, a in CASES])
def test_softmax(op, shape, axis, opset):
    attrs = {} if axis is None else {"axis": axis}
    check_node(op, {"x": rand(*shape, lo=-4, hi=4)}, attrs, opset=opset, **TOL)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_large_inputs_are_stable(op, opset):
    # Without subtracting the maximum, exp(1000) overflows to inf and the result is NaN.
    x = np.array([[1000.0, 1001.0, 999.5, -1000.0], [3e4, 3e4, 3e4 - 2, -3e4]], np.float32)
    check_node(op, {"x": x}, {"axis": 1}, opset=opset, **TOL)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_axis_semantics_differ_between_opset_11_and_13(op):
    # Same node, same input, axis=1 on a 3-D tensor: opset 11 normalises over dims 1 and 2
    # together, opset 13 over dim 1 only. Both must match onnxruntime and differ from each other.
    x = rand(2, 3, 4, seed=3)
    results = {}
    for opset in (11, 13):
        check_node(op, {"x": x}, {"axis": 1}, opset=opset, **TOL)
        m = make_model([helper.make_node(op, ["x"], ["y"], axis=1)], {"x": x},
                       {"y": (np.float32, [2, 3, 4])}, opset=opset)
        results[opset] = compile_and_run(m, {"x": x})[0]["y"]
    assert not np.allclose(results[11], results[13], atol=1e-3)
    if op == "Softmax":
        np.testing.assert_allclose(results[11].sum(axis=(1, 2)), 1.0, rtol=1e-5)
        np.testing.assert_allclose(results[13].sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_constant_input_folds_with_the_reference(op, opset):
    # Softmax of a constant is computed at compile time by the numpy reference: check that too.
    c = rand(2, 3, 4, seed=5)
    x = rand(2, 3, 4, seed=6)
    nodes = [helper.make_node(op, ["c"], ["s"], axis=1), helper.make_node("Add", ["s", "x"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [2, 3, 4])}, {"c": c}, opset)
    bundle = check(m, {"x": x}, **TOL)
    assert len(bundle.kernels) == 1  # only the Add is left


@pytest.mark.parametrize("opset,axis", [(11, 3), (13, -4)])
def test_axis_out_of_range_is_rejected(tmp_path, opset, axis):
    x = rand(2, 3, 4)
    m = make_model([helper.make_node("Softmax", ["x"], ["y"], axis=axis, name="sm")], {"x": x},
                   {"y": (np.float32, [2, 3, 4])}, opset=opset)
    with pytest.raises(AotcError, match=f"axis={axis} is out of range for rank 3"):
        aotc.compile(m, tmp_path, name="m")


def test_softmax_dtype_is_checked(tmp_path):
    x = np.zeros((2, 3), np.int32)
    m = make_model([helper.make_node("Softmax", ["x"], ["y"], name="sm")], {"x": x},
                   {"y": (np.int32, [2, 3])}, opset=13)
    with pytest.raises(AotcError, match="has type int32; Softmax-13 allows"):
        aotc.compile(m, tmp_path, name="m")
