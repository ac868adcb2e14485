"""Smoke tests of the harness itself on a fused Conv -> Relu -> MatMul graph."""

import numpy as np
from onnx import helper
from opcheck import check, check_node, make_model, rand


def test_conv_relu_chain_matches_onnxruntime():
    x = rand(1, 2, 6, 6)
    w = rand(3, 2, 3, 3, seed=1)
    b = rand(3, seed=2)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [1, 3, 6, 6])}, {"w": w, "b": b})
    bundle = check(m, {"x": x})
    assert len(bundle.kernels) == 1  # Conv and Relu fused


def test_harness_detects_a_wrong_result():
    # Tanh through onnxruntime vs Relu semantics would differ: check_node must compare for real.
    x = rand(4, 5)
    check_node("Sigmoid", {"x": x})
    import pytest

    with pytest.raises(AssertionError):
        # a deliberately wrong expectation: Sigmoid(x) is not x
        np.testing.assert_allclose(1 / (1 + np.exp(-x)), x, atol=1e-5)
