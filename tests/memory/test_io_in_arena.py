"""--io-in-arena: graph inputs and outputs placed in the arena and reused once dead. The MLPerf
Tiny int8 models stay bit-exact with TFLM (host through cffi, KWS on a Cortex-M4F in QEMU), the
run function takes only the arena, and the arena is the whole activation RAM."""

from __future__ import annotations

import numpy as np
import pytest

import aotc
from aotc.cli import main as cli_main

INT8_MODELS = ["kws_ref_model_int8_qdq", "vww_96_int8_qdq", "pretrainedResnet_int8_qdq",
               "ad01_int8_qdq", "str_ww_ref_model_int8_qdq"]
# Total RAM (arena with the I/O inside) that --io-in-arena must not exceed: AD's target is
# TFLM's head (768 B, I/O included); the others, their liveness bound with I/O.
TOTAL_RAM = {"ad01_int8_qdq": 768}


def _outputs(runner, inputs: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    in_name, out_name = runner.meta["inputs"][0]["name"], runner.meta["outputs"][0]["name"]
    return np.stack([runner.run({in_name: x})[out_name] for x in inputs])


@pytest.mark.parametrize("stem", INT8_MODELS)
def test_io_in_arena_bit_exact_with_tflm(stem, mlperf_dir, tmp_path):
    bundle = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path, name="m", io_in_arena=True)
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    want = vec["output_tflm"]
    np.testing.assert_array_equal(_outputs(bundle.load(), vec["input"]).reshape(want.shape), want)

    c = bundle.compilation
    assert c.lower_bound == c.bounds.io
    assert c.plan.size <= min(c.bounds.io, TOTAL_RAM.get(stem, c.bounds.io)), c.plan.size
    header = (tmp_path / "m.h").read_text()
    assert "int m_run(void *arena, size_t arena_size);" in header
    assert "#define M_INPUT_0_OFFSET " in header and "#define m_output_0(arena)" in header


def test_io_in_arena_reuses_the_input(mlperf_dir, tmp_path):
    """AD: the 640 B input dies at the first kernel, so the arena is smaller than I/O + bound."""
    c = aotc.compile(mlperf_dir / "ad01_int8_qdq.onnx", tmp_path, name="m",
                     io_in_arena=True).compilation
    io_bytes = sum(c.graph.type(v).nbytes for v in (*c.graph.inputs, *c.graph.outputs))
    assert c.plan.size < c.bounds.scratch + io_bytes


@pytest.mark.parametrize("stem", ["kws_ref_model_int8_qdq", "vww_96_int8_qdq"])
def test_io_in_arena_on_board(stem, mlperf_dir, tmp_path):
    bundle = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path / "b", name="m",
                          io_in_arena=True)
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    got = _outputs(bundle.load("cortex-m4f"), vec["input"][:2])
    np.testing.assert_array_equal(got.reshape(vec["output_tflm"][:2].shape),
                                  vec["output_tflm"][:2])


def test_io_in_arena_cli_flag(mlperf_dir, tmp_path):
    out = tmp_path / "b"
    assert cli_main(["compile", str(mlperf_dir / "ad01_int8_qdq.onnx"), "-o", str(out),
                     "--name", "ad", "--io-in-arena", "-q"]) == 0
    header = (out / "ad.h").read_text()
    assert "int ad_run(void *arena, size_t arena_size);" in header
    assert "#define AD_OUTPUT_0_OFFSET " in header


def test_io_in_arena_output_written_over_its_input(tmp_path):
    """Relu then Add: the output takes the input's bytes (both in place), so the arena holds
    one tensor; two inputs and two outputs each get their own offset macro."""
    from onnx import TensorProto, helper

    vi = helper.make_tensor_value_info
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "y"], ["s"]),
         helper.make_node("Neg", ["y"], ["n"])],
        "two", [vi("x", TensorProto.FLOAT, [4, 8]), vi("y", TensorProto.FLOAT, [4, 8])],
        [vi("s", TensorProto.FLOAT, [4, 8]), vi("n", TensorProto.FLOAT, [4, 8])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    bundle = aotc.compile(model, tmp_path, name="m", io_in_arena=True)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 4, 8)).astype(np.float32)
    out = bundle.load().run({"x": x, "y": y})
    np.testing.assert_array_equal(out["s"], np.maximum(x, 0) + y)
    np.testing.assert_array_equal(out["n"], -y)
    c = bundle.compilation
    assert c.plan.size <= 3 * 4 * 8 * 4 < 4 * 4 * 8 * 4, c.plan.size
    assert c.io_offset("s") == c.io_offset("x")
    header = (tmp_path / "m.h").read_text()
    assert "#define M_INPUT_1_OFFSET " in header and "#define M_OUTPUT_1_OFFSET " in header
