"""The example backend in examples/byoc_user_kernels, used as a user would: named by its file
on the command line (and passed as an object to the Python API), through the public interface
only; its kernels are verified against onnxruntime through the generated C."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from opcheck import ort_run

import aotc
from aotc.cli import main as cli_main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "byoc_user_kernels" / "backend.py"


def _model(path: Path) -> Path:
    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.5, (6, 3, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Relu", ["x"], ["r0"], name="relu_in"),
        helper.make_node("Conv", ["r0", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("MaxPool", ["c"], ["p1"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1], name="pool_relu"),
        helper.make_node("Relu", ["p1"], ["p1r"], name="relu_fused"),
        helper.make_node("MaxPool", ["p1r"], ["p2"], kernel_shape=[2, 2], strides=[2, 2],
                         ceil_mode=1, name="pool_ceil"),
        helper.make_node("MaxPool", ["p2"], ["y"], kernel_shape=[2, 2], dilations=[2, 2],
                         name="pool_dilated"),
    ]
    g = helper.make_graph(nodes, "example",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 21, 19])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_example_backend_from_the_command_line(tmp_path, capsys):
    model = _model(tmp_path / "m.onnx")
    rc = cli_main(["inspect", str(model), "--byoc", str(EXAMPLE), "--json"])
    assert rc == 0
    rows = {r["node"]: r for r in json.loads(capsys.readouterr().out)["partition"]}
    assert rows["relu_in"]["backend"] == "user-kernels"
    assert rows["pool_relu"]["backend"] == "user-kernels"  # MaxPool + fused Relu
    assert rows["pool_relu"]["ops"] == "MaxPool+Relu"
    assert rows["pool_ceil"]["backend"] == "user-kernels"
    assert rows["conv"]["backend"] == "native" and rows["conv"]["reason"] == "no pattern"
    assert rows["pool_dilated"]["backend"] == "native"
    assert "dilations are not supported" in rows["pool_dilated"]["reason"]

    out = tmp_path / "bundle"
    rc = cli_main(["verify", str(model), "--byoc", str(EXAMPLE), "-o", str(out), "--atol", "1e-5",
                   "--rtol", "1e-5"])
    assert rc == 0, capsys.readouterr()
    assert "verify OK" in capsys.readouterr().out
    src = (out / "m.c").read_text()
    assert '#include "user_kernels.h"' in src and src.count("user_maxpool2d_f32(") == 2
    cmake = (out / "CMakeLists.txt").read_text()
    assert "user_kernels.c" in cmake and "target_link_libraries(m PUBLIC user-kernels)" in cmake


def test_example_backend_as_an_object_through_the_api(tmp_path):
    spec = importlib.util.spec_from_file_location("user_backend", EXAMPLE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = _model(tmp_path / "m.onnx")
    b = aotc.compile(model, tmp_path / "b", name="m", byoc=(mod.UserKernels(),))
    assert [ls.backend for ls in b.compilation.lowered] == [
        "user-kernels", None, "user-kernels", "user-kernels", None]
    x = np.random.default_rng(1).normal(0, 1, (1, 3, 21, 19)).astype(np.float32)
    got = b.load().run({"x": x})["y"]
    # Max and max(., 0) are exact: the same floats as aotc's own kernels; onnxruntime's conv
    # rounds differently (within 1e-5).
    native = aotc.compile(model, tmp_path / "n", name="m").load().run({"x": x})["y"]
    np.testing.assert_array_equal(got, native)
    np.testing.assert_allclose(got, ort_run(onnx.load(model), {"x": x})["y"], rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("board", ["cortex-m4f"])
def test_example_backend_on_a_board(tmp_path, board):
    model = _model(tmp_path / "m.onnx")
    b = aotc.compile(model, tmp_path / "b", name="m", byoc=(str(EXAMPLE),), target=board)
    x = np.random.default_rng(2).normal(0, 1, (1, 3, 21, 19)).astype(np.float32)
    got = b.load(board).run({"x": x})["y"]
    want = ort_run(onnx.load(model), {"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # the conv's float rounding
