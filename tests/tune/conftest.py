"""Tiny models for the tuner's tests: a conv, a 1x1 conv and a fully connected layer (three
workloads), float and int8 QDQ (quantised with aotc quantize, onnxruntime's quantize_static)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def _float_model() -> onnx.ModelProto:
    rng = np.random.default_rng(7)

    def init(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32),
                                       name)

    inits = [init("w1", 8, 2, 3, 3), init("b1", 8), init("w2", 8, 8, 1, 1), init("b2", 8),
             init("w3", 8 * 6 * 6, 4), init("b3", 4)]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Flatten", ["r2"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], name="fc"),
    ]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.fixture(scope="session")
def tiny_float(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny") / "tiny_float.onnx"
    onnx.save(_float_model(), path)
    return path


@pytest.fixture(scope="session")
def tiny_int8(tiny_float: Path) -> Path:
    from aotc.quantize import quantize

    calib = tiny_float.with_name("calib.npz")
    rng = np.random.default_rng(3)
    np.savez(calib, x=rng.standard_normal((16, 1, 2, 8, 8)).astype(np.float32))
    out = tiny_float.with_name("tiny_int8.onnx")
    quantize(tiny_float, calib, out, check=False)
    return out
