"""BoardRunner.bench's per-kernel counts on compiled models: inclusive (a kernel's calls from
entry to return: expf, soft-float helpers, requantisation helpers) and self; the kernels'
inclusive counts and the run function's row add up to the inference exactly, and the counts
repeat."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import aotc


def _float_model() -> onnx.ModelProto:
    """Gemm + Sigmoid (one kernel, its epilogue calls expf), then Softmax (expf again)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")]
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"], name="fc"),
             helper.make_node("Sigmoid", ["g"], ["s"], name="sigmoid"),
             helper.make_node("Softmax", ["s"], ["y"], name="softmax", axis=1)]
    graph = helper.make_graph(
        nodes, "sig", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _check_rows(bench: dict) -> None:
    """The rows add up: the run function calls nothing but kernels here, so what is not in a
    kernel's inclusive count is the run function's own instructions."""
    kernels, own = bench["kernels"], bench["self"]
    assert set(kernels) == set(own) and kernels
    assert sum(kernels.values()) + bench["other"] == bench["instructions"]
    assert bench["other"] == bench["run"] > 0
    assert all(kernels[k] >= own[k] for k in kernels)


@pytest.mark.parametrize("board", ["cortex-m4f", "cortex-m0plus"])
def test_float_kernels_include_libm_and_soft_float(board: str, tmp_path: Path) -> None:
    model = tmp_path / "sig.onnx"
    onnx.save(_float_model(), model)
    runner = aotc.compile(model, tmp_path / "bundle", name="sig").load(board)
    x = np.linspace(-2, 2, 16, dtype=np.float32).reshape(1, 16)
    bench = runner.bench({"x": x})
    _check_rows(bench)
    # Every kernel calls expf (and on the FPU-less M0+, __aeabi_fmul and friends too).
    for k, n in bench["kernels"].items():
        assert n > bench["self"][k] + 10, k
    assert runner.bench({"x": x})["kernels"] == bench["kernels"]


def test_kws_int8_rows_add_up(mlperf_dir: Path, tmp_path: Path) -> None:
    stem = "kws_ref_model_int8_qdq"
    runner = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path / "bundle", name="m").load(
        "cortex-m4f")
    vectors = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    feeds = {runner.meta["inputs"][0]["name"]: vectors["input"][0]}
    first, second = runner.count_instructions(feeds), runner.count_instructions(feeds)
    assert first == second
    bench = runner.bench(feeds)
    _check_rows(bench)
    assert bench["kernels"] == first["inclusive"] and bench["self"] == first["kernels"]
    # Folded kernels (k1=k3=k5=k7) are one function with one count.
    assert any("=" in k for k in bench["kernels"])
