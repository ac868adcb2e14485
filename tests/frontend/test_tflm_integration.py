"""TensorFlow Lite Micro's own per-layer integration tests (../shared/third_party/
tflm_integration_tests, copied unchanged from tflite-micro at 90b983c2b): every layer of the
int16x8 SEANet model (ADD, CONV_2D, LEAKY_RELU, PAD, QUANTIZE, STRIDED_SLICE, SUB,
TRANSPOSE_CONV) compiled by aotc, run on the host through cffi and compared with the golden
output TFLM's test compares against: bit-exact, no tolerance (TFLM's own criterion). Two layers
(three CONV_2D, on the DSP schedule, and a TRANSPOSE_CONV) also run on cortex-m4f in QEMU
against the same golden files. The 22 CONV_2D layers also go through ``--byoc cmsis-nn``
(arm_convolve_wrapper_s16, the pinned CMSIS-NN of ../shared/third_party) on the host, and one
on cortex-m4f (CMSIS-NN's DSP path).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import aotc

SUITE = (Path(__file__).resolve().parents[3] / "shared" / "third_party"
         / "tflm_integration_tests" / "seanet")
MODELS = sorted(SUITE.glob("*/*.tflite"))
CONVS = [m for m in MODELS if m.parent.name == "conv"]
CMSIS_NN = Path(__file__).resolve().parents[3] / "shared" / "third_party" / "cmsis-nn"
BOARD_CASES = ("conv0", "conv5", "conv10", "transpose_conv0")


def _csv(path: Path) -> np.ndarray:
    """One flat comma-separated row of integers (the suite's README)."""
    text = path.read_text().replace("\n", ",")
    return np.array([int(v) for v in text.split(",") if v.strip()], np.int64)


def _case(model: Path) -> tuple[list[Path], Path]:
    inputs = sorted(model.parent.glob(f"{model.stem}_input*_*.csv"))
    (golden,) = model.parent.glob(f"{model.stem}_golden_*.csv")
    return inputs, golden


def _feeds(meta: dict, inputs: list[Path]) -> dict[str, np.ndarray]:
    assert len(meta["inputs"]) == len(inputs), (meta["inputs"], inputs)
    return {t["name"]: _csv(f).astype(t["dtype"]).reshape(t["shape"])
            for t, f in zip(meta["inputs"], inputs)}


def test_suite_is_complete():
    """The copy holds TFLM's 127 SEANet layers over the 8 builtins (a missing folder would
    otherwise shrink the parametrisation silently)."""
    counts = {d.name: len(list(d.glob("*.tflite"))) for d in SUITE.iterdir() if d.is_dir()}
    assert counts == {"add": 17, "conv": 22, "leaky_relu": 23, "pad": 19, "quantize": 2,
                      "strided_slice": 34, "sub": 5, "transpose_conv": 5}, counts


@pytest.mark.parametrize("model", MODELS, ids=[m.stem for m in MODELS])
def test_tflm_layer_bit_exact(model, tmp_path):
    inputs, golden = _case(model)
    bundle = aotc.compile(model, tmp_path / "out", name="m")
    runner = bundle.load()
    out = runner.run(_feeds(runner.meta, inputs))
    (meta_out,) = runner.meta["outputs"]
    got = out[meta_out["name"]]
    want = _csv(golden)
    assert got.size == want.size, (got.shape, want.size)
    diff = np.nonzero(got.reshape(-1).astype(np.int64) != want)[0]
    assert diff.size == 0, (f"{diff.size} of {want.size} differ; first at {diff[0]}: "
                            f"{got.reshape(-1)[diff[0]]} vs golden {want[diff[0]]}")
    # The integer kernels ran (no float island between DequantizeLinear and QuantizeLinear).
    ops = {n.op for n in bundle.compilation.graph.nodes}
    assert not ops & {"DequantizeLinear", "QuantizeLinear", "Conv", "ConvTranspose", "Add",
                      "Sub", "LeakyRelu"}, ops


@pytest.mark.parametrize("stem", BOARD_CASES)
def test_tflm_layer_on_cortex_m4f(stem, tmp_path):
    from aotc.targets.runner import BoardRunner

    (model,) = [m for m in MODELS if m.stem == stem]
    inputs, golden = _case(model)
    bundle = aotc.compile(model, tmp_path / "out", name="m", target="cortex-m4f")
    runner = BoardRunner(bundle.directory, "cortex-m4f", build_dir=tmp_path / "fw")
    meta = bundle.load().meta
    got = runner.run(_feeds(meta, inputs))[meta["outputs"][0]["name"]]
    np.testing.assert_array_equal(got.reshape(-1).astype(np.int64), _csv(golden))


def _golden_diff(got: np.ndarray, golden: Path) -> str:
    want = _csv(golden)
    diff = np.nonzero(got.reshape(-1).astype(np.int64) != want)[0]
    return "" if diff.size == 0 else f"{diff.size} of {want.size} differ from the golden file"


@pytest.mark.parametrize("model", CONVS, ids=[m.stem for m in CONVS])
def test_tflm_conv_through_cmsis_nn(model, tmp_path):
    inputs, golden = _case(model)
    bundle = aotc.compile(model, tmp_path / "out", name="m", byoc=("cmsis-nn",),
                          cmsis_nn_path=str(CMSIS_NN))
    runner = bundle.load()
    assert set(runner.meta["byoc"].values()) == {"cmsis-nn"}, runner.meta["byoc"]
    got = runner.run(_feeds(runner.meta, inputs))[runner.meta["outputs"][0]["name"]]
    assert not _golden_diff(got, golden), _golden_diff(got, golden)


def test_tflm_conv_through_cmsis_nn_on_cortex_m4f(tmp_path):
    from aotc.targets.runner import BoardRunner

    model = CONVS[0]
    inputs, golden = _case(model)
    bundle = aotc.compile(model, tmp_path / "out", name="m", target="cortex-m4f",
                          byoc=("cmsis-nn",), cmsis_nn_path=str(CMSIS_NN))
    meta = bundle.load().meta
    assert set(meta["byoc"].values()) == {"cmsis-nn"}, meta["byoc"]
    runner = BoardRunner(bundle.directory, "cortex-m4f", build_dir=tmp_path / "fw")
    got = runner.run(_feeds(meta, inputs))[meta["outputs"][0]["name"]]
    assert not _golden_diff(got, golden), _golden_diff(got, golden)
