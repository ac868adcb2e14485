"""Shape and Size: folded at compile time (static shapes); checked through the generated C
against onnxruntime, as graph outputs and inside shape arithmetic feeding a Reshape."""

import numpy as np
import pytest
from onnx import helper
from opcheck import check, make_model, rand


@pytest.mark.parametrize("attrs,opset,n", [({}, 13, 4), ({"start": 1}, 15, 3),
                                           ({"start": -3, "end": -1}, 15, 2), ({"end": 2}, 15, 2)])
def test_shape_output(attrs, opset, n):
    x = rand(2, 3, 4, 5)
    node = helper.make_node("Shape", ["x"], ["s"], **attrs)
    m = make_model([node], {"x": x}, {"s": (np.int64, [n])}, opset=opset)
    check(m, {"x": x})


def test_size_output():
    x = rand(2, 3, 4)
    m = make_model([helper.make_node("Size", ["x"], ["n"])], {"x": x}, {"n": (np.int64, [])})
    check(m, {"x": x})


def test_shape_arithmetic_feeds_reshape():
    # y = Reshape(x, concat(shape(x)[0:1], [-1])): the usual exported "flatten" idiom.
    x = rand(2, 3, 4)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
        helper.make_node("Unsqueeze", ["b", "ax"], ["b1"]),
        helper.make_node("Concat", ["b1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    inits = {"zero": np.array(0, np.int64), "ax": np.array([0], np.int64),
             "minus1": np.array([-1], np.int64)}
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [2, 12])}, inits)
    bundle = check(m, {"x": x})
    assert len(bundle.kernels) == 1  # everything but the Relu folded away or became a view
