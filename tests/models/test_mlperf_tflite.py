"""The MLPerf Tiny .tflite files (../shared/models) compiled directly: int8 bit-exact with
TensorFlow Lite Micro's outputs (``output_tflm``, every element of every vector), arena within
the same int8 bounds as the QDQ models, NHWC kept without a transpose kernel, integer-only C;
float32 within 1e-5 of TFLM's float outputs; the int8 bundles bit-exact on a Cortex-M4F in
QEMU."""

from __future__ import annotations

import re

import numpy as np
import pytest

import aotc

# .tflite -> its golden vectors (the QDQ model's npz carries the TFLM outputs of this file).
INT8 = {"kws_ref_model.tflite": "kws_ref_model_int8_qdq",
        "vww_96_int8.tflite": "vww_96_int8_qdq",
        "pretrainedResnet_quant.tflite": "pretrainedResnet_int8_qdq",
        "ad01_int8.tflite": "ad01_int8_qdq",
        "str_ww_ref_model.tflite": "str_ww_ref_model_int8_qdq"}
BOUNDS = {"kws_ref_model.tflite": 16_000, "vww_96_int8.tflite": 55_296,
          "pretrainedResnet_quant.tflite": 49_152, "ad01_int8.tflite": 768,
          "str_ww_ref_model.tflite": 6_656}
FLOAT = {"kws_ref_model_float32_from_savedmodel.tflite": "kws_ref_model_float",
         "vww_96_float.tflite": "vww_96_float", "pretrainedResnet.tflite": "pretrainedResnet_float",
         "ad01_fp32.tflite": "ad01_float"}


def _run_all(runner, inputs: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    in_name, out_name = runner.meta["inputs"][0]["name"], runner.meta["outputs"][0]["name"]
    return np.stack([runner.run({in_name: x})[out_name] for x in inputs])


def _vectors(mlperf_dir, tflite: str, stem: str):  # type: ignore[no-untyped-def]
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    assert str(vec["tflite"]) == tflite  # the golden outputs are this file's
    return vec


@pytest.mark.parametrize("tflite", sorted(INT8))
def test_int8_tflite_bit_exact_with_tflm(tflite, mlperf_dir, tmp_path):
    bundle = aotc.compile(mlperf_dir / tflite, tmp_path, name="m")
    vec = _vectors(mlperf_dir, tflite, INT8[tflite])
    got = _run_all(bundle.load(), vec["input"])
    want = vec["output_tflm"]
    assert got.dtype == want.dtype == np.int8
    np.testing.assert_array_equal(got.reshape(want.shape), want)

    c = bundle.compilation
    assert c.plan.size <= BOUNDS[tflite], (c.plan.size, c.lower_bound)
    ops = [n.op for n in c.graph.nodes]
    # NHWC kept: no transpose kernel (an NHWC input feeds its conv through a permuted view).
    assert "Transpose" not in ops and "Copy" not in ops, ops
    assert not set(ops) & {"DequantizeLinear", "QuantizeLinear", "Conv", "MatMul", "Softmax"}
    sources = "".join(p.read_text() for p in sorted(tmp_path.glob("*.[ch]")))
    sources = re.sub(r"/\*.*?\*/", "", sources, flags=re.S)  # comments
    assert not re.search(r"\bfloat\b", sources), "tflite mode must generate integer-only C"


@pytest.mark.parametrize("tflite", sorted(FLOAT))
def test_float_tflite_matches_tflm(tflite, mlperf_dir, tmp_path):
    bundle = aotc.compile(mlperf_dir / tflite, tmp_path, name="m")
    vec = _vectors(mlperf_dir, tflite, FLOAT[tflite])
    got = _run_all(bundle.load(), vec["input"])
    want = vec["output_tflm"]
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=0, atol=1e-5)
    assert "Transpose" not in [n.op for n in bundle.compilation.graph.nodes]


@pytest.mark.parametrize("tflite", sorted(INT8))
def test_int8_tflite_bit_exact_on_cortex_m4f(tflite, mlperf_dir, tmp_path):
    """The DSP schedules (the permuted-view first conv of VWW and the wakeword model among
    them), in QEMU."""
    bundle = aotc.compile(mlperf_dir / tflite, tmp_path, name="m", target="cortex-m4f")
    vec = _vectors(mlperf_dir, tflite, INT8[tflite])
    got = _run_all(bundle.load("cortex-m4f"), vec["input"][:2])
    want = vec["output_tflm"][:2]
    np.testing.assert_array_equal(got.reshape(want.shape), want)
