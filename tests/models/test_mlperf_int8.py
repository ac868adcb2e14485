"""The MLPerf Tiny int8 QDQ models (../shared/models): bit-exact with TensorFlow Lite Micro's
outputs (``output_tflm``, every element of every vector) in the default ``tflite`` requant mode;
within 1 LSB of onnxruntime (graph optimisations disabled) in ``onnx`` mode; arena at the int8
liveness bound; integer-only C; the same bundle bit-exact on an FPU-less Cortex-M0+ in QEMU."""

from __future__ import annotations

import platform
import re

import numpy as np
import onnxruntime as ort
import pytest

import aotc

# The host latency benches' default build flags (bench/compile_and_size.py, bench/int8.py).
BENCH_HOST_CFLAGS = "-march=native -fpeel-loops" + (
    " -mprefer-vector-width=512" if platform.machine() in ("x86_64", "AMD64") else "")

INT8_MODELS = ["kws_ref_model_int8_qdq", "vww_96_int8_qdq", "pretrainedResnet_int8_qdq",
               "ad01_int8_qdq", "str_ww_ref_model_int8_qdq"]
# Liveness bound of the .tflite graph in int8 bytes (research/onnx_conformance.md §6); TFLM's
# arenas are 16,000 / 73,728 / 49,152 / 768 (AD's includes its I/O, ours are caller buffers).
BOUNDS = {"kws_ref_model_int8_qdq": 16_000, "vww_96_int8_qdq": 55_296,
          "pretrainedResnet_int8_qdq": 49_152, "ad01_int8_qdq": 768,
          "str_ww_ref_model_int8_qdq": 6_656}


def _run_all(bundle: aotc.Bundle, inputs: np.ndarray) -> np.ndarray:
    runner = bundle.load()
    in_name, out_name = runner.meta["inputs"][0]["name"], runner.meta["outputs"][0]["name"]
    return np.stack([runner.run({in_name: x})[out_name] for x in inputs])


@pytest.mark.parametrize("stem", INT8_MODELS)
def test_int8_bit_exact_with_tflm(stem, mlperf_dir, tmp_path):
    bundle = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path, name="m")
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    got = _run_all(bundle, vec["input"])
    want = vec["output_tflm"]
    assert got.dtype == want.dtype == np.int8
    np.testing.assert_array_equal(got.reshape(want.shape), want)

    c = bundle.compilation
    assert c.plan.size <= c.lower_bound <= BOUNDS[stem], (c.plan.size, c.lower_bound)
    # Integer kernels only: the QDQ pass left no float op and no float constant behind.
    ops = {n.op for n in c.graph.nodes}
    assert not ops & {"DequantizeLinear", "QuantizeLinear", "Conv", "MatMul", "Softmax"}, ops
    sources = "".join(p.read_text() for p in sorted(tmp_path.glob("*.[ch]")))
    sources = re.sub(r"/\*.*?\*/", "", sources, flags=re.S)  # comments
    assert not re.search(r"\bfloat\b", sources), "tflite mode must generate integer-only C"


@pytest.mark.parametrize("stem", INT8_MODELS)
def test_int8_host_build_with_bench_flags_bit_exact_with_tflm(stem, mlperf_dir, tmp_path,
                                                              monkeypatch):
    # The host latency benches build with BENCH_HOST_CFLAGS (gcc
    # vectorises the peeled int8 tiles with the machine's instructions): the same bytes.
    monkeypatch.setenv("AOTC_HOST_CFLAGS", BENCH_HOST_CFLAGS)
    bundle = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path, name="m", target="host")
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    got = _run_all(bundle, vec["input"])
    np.testing.assert_array_equal(got.reshape(vec["output_tflm"].shape), vec["output_tflm"])


@pytest.mark.parametrize("stem", INT8_MODELS)
def test_int8_onnx_mode_within_one_lsb_of_onnxruntime(stem, mlperf_dir, tmp_path):
    model = mlperf_dir / f"{stem}.onnx"
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    name = sess.get_inputs()[0].name
    want = np.stack([sess.run(None, {name: x})[0] for x in vec["input"]])
    got = _run_all(aotc.compile(model, tmp_path, name="m", requant="onnx"), vec["input"])
    diff = np.abs(got.reshape(want.shape).astype(np.int32) - want.astype(np.int32))
    assert diff.max() <= 1, f"{stem}: max {diff.max()} LSB from onnxruntime"


@pytest.mark.parametrize("stem,board", [("str_ww_ref_model_int8_qdq", "cortex-m0plus"),
                                        ("kws_ref_model_int8_qdq", "cortex-m4f")])
def test_int8_bit_exact_on_board(stem, board, mlperf_dir, tmp_path):
    """Cortex-M0+ has no FPU: the tflite-mode C is integer-only and still matches TFLM."""
    bundle = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path / "b", name="m")
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    host = bundle.load()
    in_name, out_name = host.meta["inputs"][0]["name"], host.meta["outputs"][0]["name"]
    fw = bundle.load(board)
    got = np.stack([fw.run({in_name: x})[out_name] for x in vec["input"][:2]])
    np.testing.assert_array_equal(got.reshape(vec["output_tflm"][:2].shape),
                                  vec["output_tflm"][:2])


@pytest.mark.parametrize("board", ["cortex-m4f", "cortex-m7", "cortex-m33"])
def test_int8_target_build_bit_exact_on_board(board, mlperf_dir, tmp_path):
    """ResNet-8 compiled --target BOARD (the DSP schedules: conv.column=rows for its 3x3
    convs, int16-widened weights on the M4 and M7, packed on the M33) matches TFLM on the
    board in QEMU."""
    stem = "pretrainedResnet_int8_qdq"
    bundle = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path / "b", name="m", target=board)
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    fw = bundle.load(board)
    in_name, out_name = fw.meta["inputs"][0]["name"], fw.meta["outputs"][0]["name"]
    got = np.stack([fw.run({in_name: x})[out_name] for x in vec["input"][:2]])
    np.testing.assert_array_equal(got.reshape(vec["output_tflm"][:2].shape),
                                  vec["output_tflm"][:2])


def test_resnet8_residual_adds_fuse_and_run_in_place(mlperf_dir):
    """Each residual QLinearAdd is its conv's epilogue, and the fused kernel writes over the
    dying skip input (read at the output's own index): the arena is two 16 KB maps, not three
    (issue 13's target, <= 32,768 B; bit-exactness is test_int8_bit_exact_with_tflm's)."""
    from aotc.compiler import CompileOptions, compile_model

    c = compile_model(mlperf_dir / "pretrainedResnet_int8_qdq.onnx", CompileOptions())
    fused = [ls.step.node for ls in c.lowered if ls.step.node.epilogue]
    assert [[e.op for e in n.epilogue] for n in fused] == [["QLinearAdd"]] * 3
    assert {ls.step.index for ls in c.lowered if ls.step.node in fused} <= set(c.liveness.inplace)
    assert c.plan.size <= 32_768, c.plan.size
