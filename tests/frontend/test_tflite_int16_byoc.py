"""TFLite's 16x8 DEPTHWISE_CONV_2D and FULLY_CONNECTED through ``--byoc cmsis-nn``
(arm_depthwise_conv_wrapper_s16, arm_fully_connected_s16; int64 bias): claimed, and bit-exact
with TFLM's interpreter on the host (CMSIS-NN's pure C path) and on cortex-m4f in QEMU (its DSP
paths, which sum in int32: aotc refuses weights whose sum could leave int32). What CMSIS-NN
cannot take (an int32 bias, per-channel FULLY_CONNECTED weights) runs on aotc's kernels.
Tolerance: none.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_tflite_int16 import float_and_int16
from tflite_builder import Net, interpret_tflm, options

import aotc
from aotc.errors import AotcError

CMSIS_NN = Path(__file__).resolve().parents[3] / "shared" / "third_party" / "cmsis-nn"


def depthwise(shape: tuple[int, int, int, int], k: tuple[int, int], mult: int = 1,
              stride: int = 1, padding: int = 0) -> Callable[[Net], list[int]]:
    def spec(net: Net) -> list[int]:
        n, h, w, c = shape
        x = net.input(shape)
        wt = net.weight(net.rng.normal(scale=0.3, size=(1, *k, c * mult)), axis=3)
        b = net.bias(net.rng.normal(scale=0.1, size=c * mult), x, wt)
        oh, ow = (-(-h // stride), -(-w // stride)) if padding == 0 else \
            ((h - k[0]) // stride + 1, (w - k[1]) // stride + 1)
        return [net.op("DEPTHWISE_CONV_2D", [x, wt, b], (n, oh, ow, c * mult), options(
            "DepthwiseConv2DOptions", padding=padding, strideH=stride, strideW=stride,
            depthMultiplier=mult, fusedActivationFunction=0))]
    return spec


def fully_connected(n_in: int, n_out: int, axis: int | None = None
                    ) -> Callable[[Net], list[int]]:
    def spec(net: Net) -> list[int]:
        x = net.input((1, n_in))
        wt = net.weight(net.rng.normal(scale=0.1, size=(n_out, n_in)), axis=axis)
        b = net.bias(net.rng.normal(scale=0.1, size=n_out), x, wt)
        return [net.op("FULLY_CONNECTED", [x, wt, b], (1, n_out), options(
            "FullyConnectedOptions", fusedActivationFunction=0))]
    return spec


CASES = {
    "1x3_c32": ((1, 1, 40, 32), (1, 3), 1, 1, 0),
    "3x3_c64": ((1, 8, 8, 64), (3, 3), 1, 1, 0),
    "3x3_mult2_stride2_valid": ((1, 7, 7, 4), (3, 3), 2, 2, 1),
}


def _compile(model: bytes, tmp: Path, target: str | None) -> Any:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "m.tflite").write_bytes(model)
    return aotc.compile(tmp / "m.tflite", tmp / "out", name="m", target=target,
                        byoc=("cmsis-nn",), cmsis_nn_path=str(CMSIS_NN))


@pytest.mark.parametrize("case", list(CASES))
def test_s16_depthwise_claimed_exact(case, tmp_path):
    shape, k, mult, stride, padding = CASES[case]
    model, xs = float_and_int16(depthwise(shape, k, mult, stride, padding), shape=shape)
    runner = _compile(model, tmp_path, None).load()
    assert set(runner.meta["byoc"].values()) == {"cmsis-nn"}, runner.meta["byoc"]
    got = runner.run({runner.meta["inputs"][0]["name"]: xs[0]})
    np.testing.assert_array_equal(got[runner.meta["outputs"][0]["name"]],
                                  interpret_tflm(model, xs)[0])


def test_s16_depthwise_on_cortex_m4f(tmp_path):
    from aotc.targets.runner import BoardRunner

    shape, k, mult, stride, padding = CASES["1x3_c32"]
    model, xs = float_and_int16(depthwise(shape, k, mult, stride, padding), shape=shape)
    bundle = _compile(model, tmp_path, "cortex-m4f")
    meta = bundle.load().meta
    assert set(meta["byoc"].values()) == {"cmsis-nn"}, meta["byoc"]
    runner = BoardRunner(bundle.directory, "cortex-m4f", build_dir=tmp_path / "fw")
    got = runner.run({meta["inputs"][0]["name"]: xs[0]})[meta["outputs"][0]["name"]]
    np.testing.assert_array_equal(got, interpret_tflm(model, xs)[0])


def test_s16_depthwise_int32_bias_refused(tmp_path):
    """An int32 bias: TFLM's and CMSIS-NN's s16 depthwise read int64 only (past the end of an
    int32 bias), so the model is refused (tests/frontend/test_tflite_int16.py), with the
    backend as without it."""
    shape, k, mult, stride, padding = CASES["1x3_c32"]
    model, xs = float_and_int16(depthwise(shape, k, mult, stride, padding), bias32=True,
                                shape=shape)
    with pytest.raises(AotcError, match="TFLM reads it as int64"):
        _compile(model, tmp_path, None)


@pytest.mark.parametrize("target", [None, "cortex-m4f"])
def test_s16_fully_connected(target, tmp_path):
    model, xs = float_and_int16(fully_connected(256, 24), shape=(1, 256))
    bundle = _compile(model, tmp_path, target)
    meta = bundle.load().meta
    assert set(meta["byoc"].values()) == {"cmsis-nn"}, meta["byoc"]
    if target is None:
        runner: Any = bundle.load()
    else:
        from aotc.targets.runner import BoardRunner

        runner = BoardRunner(bundle.directory, target, build_dir=tmp_path / "fw")
    got = runner.run({meta["inputs"][0]["name"]: xs[0]})[meta["outputs"][0]["name"]]
    np.testing.assert_array_equal(got, interpret_tflm(model, xs)[0])


@pytest.mark.parametrize("why", ["per_channel", "int32_bias"])
def test_s16_fully_connected_not_claimed(why, tmp_path):
    model, xs = float_and_int16(fully_connected(64, 8, 0 if why == "per_channel" else None),
                                bias32=why == "int32_bias", shape=(1, 64))
    runner = _compile(model, tmp_path, None).load()
    assert not runner.meta.get("byoc"), runner.meta["byoc"]
    got = runner.run({runner.meta["inputs"][0]["name"]: xs[0]})
    np.testing.assert_array_equal(got[runner.meta["outputs"][0]["name"]],
                                  interpret_tflm(model, xs)[0])
