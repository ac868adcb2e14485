"""TFLite's 16x8 quantisation (int16 activations, symmetric with zero point 0; int8 per-channel
weights; int64 bias, or int32 where the case says so) on single-op models built here, as TFLite's
converter writes them with ``EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8``:
the graph of each case is test_tflite_ops's, its float ranges from LiteRT, then quantised 16x8.

Reference: TensorFlow Lite Micro's Python interpreter (the arithmetic ``--requant tflite``
follows). Tolerance: none, every case is bit-exact, and every case runs on aotc's integer
kernels (no DequantizeLinear / QuantizeLinear left in the compiled graph).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as S
from test_tflite_ops import CASES, SHAPE, _conv
from tflite_builder import Net, interpret, interpret_tflm, options

import aotc

_TYPES = {np.dtype(np.float32): S.TensorType.FLOAT32, np.dtype(np.int8): S.TensorType.INT8,
          np.dtype(np.int16): S.TensorType.INT16, np.dtype(np.int32): S.TensorType.INT32,
          np.dtype(np.int64): S.TensorType.INT64}


class Net16(Net):
    """tflite_builder.Net writing 16x8: what Net makes int8 (activations, elementwise
    constants) is int16 with a symmetric scale; weights stay int8; biases are int64 (int32 with
    ``bias32``)."""

    # TFLM's int16 LOGISTIC, TANH and SOFTMAX want the output scale 2^-15, zero point 0.
    fixed_out = {k: (1 / 32768, 0) for k in ("LOGISTIC", "TANH", "SOFTMAX")}

    def __init__(self, ranges: dict[str, tuple[float, float]], bias32: bool = False) -> None:
        super().__init__(True, ranges)
        self.bias32 = bias32

    def _tensor(self, shape: Sequence[int], dtype: Any, name: str,
                data: np.ndarray | None = None, scale: Any = None, zp: Any = None,
                axis: int = 0) -> int:
        if np.dtype(dtype) == np.int8 and not name.startswith(("w", "q8")):
            dtype = np.int16
        t = S.TensorT()
        t.shape = np.array(shape, np.int32)
        t.type = _TYPES[np.dtype(dtype)]
        t.name = name
        t.buffer = 0
        if data is not None:
            b = S.BufferT()
            b.data = np.frombuffer(np.ascontiguousarray(data, dtype).tobytes(), np.uint8)
            self.buffers.append(b)
            t.buffer = len(self.buffers) - 1
        if scale is not None:
            q = S.QuantizationParametersT()
            q.scale = np.atleast_1d(np.asarray(scale, np.float32))
            q.zeroPoint = np.atleast_1d(np.asarray(zp, np.int64))
            q.quantizedDimension = axis
            t.quantization = q
        self.tensors.append(t)
        return len(self.tensors) - 1

    def qparams(self, name: str) -> tuple[float, int]:
        lo, hi = self.ranges.get(name, (-1.0, 1.0))
        return max(abs(lo), abs(hi), 1e-3) / 32767, 0

    def bias(self, arr: np.ndarray, x: int, w: int) -> int:
        scale = (self.scale(x)[0] * self.scale(w)).astype(np.float32)
        scale = np.broadcast_to(scale, arr.shape).astype(np.float32) if scale.size == 1 \
            and arr.size > 1 else scale
        dt = np.int32 if self.bias32 else np.int64
        q = np.round(arr / scale).astype(dt)
        return self._tensor(arr.shape, dt, f"b{len(self.tensors)}", q, scale,
                            np.zeros(scale.size, np.int64))

    def const(self, arr: np.ndarray) -> int:
        name = f"c{len(self.tensors)}"
        self.ranges[name] = (float(arr.min()), float(arr.max()))
        s, z = self.qparams(name)
        q = np.clip(np.round(arr / s), -32768, 32767).astype(np.int16)
        return self._tensor(arr.shape, np.int16, name, q, s, z)


def float_and_int16(spec: Callable[[Net], Sequence[int]], bias32: bool = False,
                    seed: int = 0, shape: Sequence[int] = SHAPE
                    ) -> tuple[bytes, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=shape).astype(np.float32)]
    fnet = Net(False, seed=seed)
    _, named = interpret(fnet.build(spec(fnet)), xs, all_tensors=True)
    ranges = {k: (float(v.min()), float(v.max())) for k, v in named.items()
              if v.dtype == np.float32 and v.size}
    qnet = Net16(ranges, bias32)
    model = qnet.build(spec(qnet))
    scale = qnet.tensors[qnet.inputs[0]].quantization.scale[0]
    return model, [np.clip(np.round(xs[0] / scale), -32768, 32767).astype(np.int16)]


def _requantize(to: str) -> Callable[[Net], list[int]]:
    """QUANTIZE of an int16 tensor to int8 (or int32) with other parameters."""
    def spec(net: Net) -> list[int]:
        x = net.input(SHAPE)
        if not net.quant:
            return [net.op("RELU", [x], SHAPE)]
        dt = {"int8": np.int8, "int32": np.int32}[to]
        y = net._tensor(SHAPE, dt, "q8_out", None, 0.013 if to == "int8" else 1e-6, 3 * (
            to == "int8"))
        net.op_into("QUANTIZE", [x], [y])
        return [y]
    return spec


# The 16x8 builtins of test_tflite_ops's cases (TFLM has int16 kernels for them all).
INT16_CASES = ("CONV_2D", "CONV_2D_valid_stride2_dil", "CONV_2D_dilated", "DEPTHWISE_CONV_2D",
               "FULLY_CONNECTED", "ADD", "ADD_const", "SUB", "MUL", "LEAKY_RELU",
               "TRANSPOSE_CONV", "PAD", "STRIDED_SLICE", "STRIDED_SLICE_shrink", "RESHAPE",
               "TRANSPOSE", "AVERAGE_POOL_2D", "MAX_POOL_2D", "CONCATENATION", "SPLIT",
               "RELU", "RELU6", "LOGISTIC", "TANH", "MEAN", "MEAN_squeezed", "SUM",
               "SOFTMAX_4D")


def _spec(case: str, after_conv: bool) -> Callable[[Net], list[int]]:
    def spec(net: Net) -> list[int]:
        x, s = net.input(SHAPE), SHAPE
        if after_conv:
            x, s = _conv(net, x, SHAPE, 4, k=1)
        return [CASES[case](net, x, s)]
    return spec


def _compile_run(model: bytes, xs: list[np.ndarray], tmp: Path, target: str | None = None
                 ) -> tuple[np.ndarray, set[str]]:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "m.tflite").write_bytes(model)
    bundle = aotc.compile(tmp / "m.tflite", tmp / "out", name="m", target=target)
    runner = bundle.load()
    got = runner.run({runner.meta["inputs"][0]["name"]: xs[0]})
    return got[runner.meta["outputs"][0]["name"]], {n.op for n in bundle.compilation.graph.nodes}


def _check(model: bytes, xs: list[np.ndarray], tmp: Path, target: str | None = None) -> None:
    want = interpret_tflm(model, xs)[0]
    got, ops = _compile_run(model, xs, tmp, target)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    diff = np.nonzero(got.ravel() != want.ravel())[0]
    assert diff.size == 0, (f"{diff.size} of {want.size} differ from TFLM; first at {diff[0]}: "
                            f"{got.ravel()[diff[0]]} vs {want.ravel()[diff[0]]}")
    # MAX_POOL_2D on int16 is dequantised, max, quantised with the same parameters (the same
    # values; ONNX's MaxPool has no int16); every other case runs on the integer kernels.
    if "MaxPool" not in ops:
        assert not ops & {"DequantizeLinear", "QuantizeLinear"}, ops


@pytest.mark.parametrize("after_conv", [False, True], ids=["input", "after_conv"])
@pytest.mark.parametrize("case", INT16_CASES)
def test_int16_op(case, after_conv, tmp_path):
    model, xs = float_and_int16(_spec(case, after_conv))
    assert interpret_tflm(model, xs)[0].dtype == np.int16
    _check(model, xs, tmp_path)


@pytest.mark.parametrize("target", [None, "cortex-m4f"])
@pytest.mark.parametrize("case", ["CONV_2D", "FULLY_CONNECTED"])
def test_int16_int32_bias(case, target, tmp_path):
    """An int32 bias: TFLM accumulates in int32 and requantises as for int8 (CONV_2D,
    FULLY_CONNECTED; its 16x8 depthwise kernel reads an int64 bias only)."""
    model, xs = float_and_int16(_spec(case, False), bias32=True)
    _check(model, xs, tmp_path, target)


def _transpose_conv_bias(net: Net, x: int, s: tuple[int, ...]) -> int:
    n, h, w, c = s
    wt = net.weight(net.rng.normal(scale=0.5, size=(3, 3, 3, c)))
    b = net.bias(net.rng.normal(scale=0.3, size=3), x, wt)
    out = (n, 2 * h, 2 * w, 3)
    return net.op("TRANSPOSE_CONV", [net.ints(out), wt, x, b], out,
                  options("TransposeConvOptions", padding=0, strideH=2, strideW=2))


@pytest.mark.parametrize("case", ["TRANSPOSE_CONV_bias", "DEPTHWISE_CONV_2D"])
def test_int16_int64_bias_only(case, tmp_path, capsys):
    """TFLM's 16x8 DEPTHWISE_CONV_2D and TRANSPOSE_CONV read the bias as int64 whatever its
    type: an int32 bias is read past the end of its data (a real model has one: XMOS's
    denoise_16x8 example, its last TRANSPOSE_CONV), so TFLM's answer is undefined. With an
    int64 bias aotc is bit-exact with TFLM; with an int32 one it refuses the model in one
    line instead of computing a third answer."""
    from aotc.cli import main as cli_main

    spec = (lambda net: [_transpose_conv_bias(net, net.input(SHAPE), SHAPE)]) \
        if case == "TRANSPOSE_CONV_bias" else _spec(case, False)
    model, xs = float_and_int16(spec)
    _check(model, xs, tmp_path / "int64")
    model32, _ = float_and_int16(spec, bias32=True)
    (tmp_path / "m32.tflite").write_bytes(model32)
    rc = cli_main(["compile", str(tmp_path / "m32.tflite"), "-o", str(tmp_path / "b32")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and len(err) == 1, (rc, err)
    assert "a bias of type int32 for an input of type int16: TFLM reads it as int64" in err[0]


@pytest.mark.parametrize("case", ["CONV_2D", "CONV_2D_valid_stride2_dil", "CONV_2D_dilated",
                                  "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"])
def test_int16_dsp_target(case, tmp_path):
    """Compiled for cortex-m4f (the DSP schedules where they take 16x8), built and run on the
    host (the runtime's portable forms of SMLAD and friends)."""
    model, xs = float_and_int16(_spec(case, True))
    _check(model, xs, tmp_path, "cortex-m4f")


def test_conv_without_bias(tmp_path):
    """No bias: TFLM's 16x8 conv accumulates in int64."""
    def spec(net: Net) -> list[int]:
        x = net.input(SHAPE)
        wt = net.weight(net.rng.normal(scale=0.5, size=(5, 3, 3, SHAPE[3])))
        out = SHAPE[:3] + (5,)
        # LiteRT's float kernel (the ranges) wants a bias; the 16x8 model has none.
        b = -1 if net.quant else net.bias(np.zeros(5), x, wt)
        return [net.op("CONV_2D", [x, wt, b], out, options(
            "Conv2DOptions", padding=0, strideH=1, strideW=1, fusedActivationFunction=0))]
    model, xs = float_and_int16(spec)
    _check(model, xs, tmp_path)


@pytest.mark.parametrize("to", ["int8", "int32"])
def test_int16_requantize(to, tmp_path):
    model, xs = float_and_int16(_requantize(to))
    _check(model, xs, tmp_path)


def test_conv_int64_sums(tmp_path):
    """Weights of full int8 magnitude over 3x3x128 taps: a sum of products can leave int32
    (|w| sums to 146,304 > 2^16), so the kernel accumulates in int64 as TFLM does (smaller
    weights take an int32 sum and add the int64 bias after it)."""
    shape = (1, 4, 4, 128)

    def spec(net: Net) -> list[int]:
        x = net.input(shape)
        wt = net.weight(net.rng.choice([-1.0, 1.0], size=(5, 3, 3, 128)))
        b = net.bias(net.rng.normal(scale=0.1, size=5), x, wt)
        return [net.op("CONV_2D", [x, wt, b], (1, 4, 4, 5), options(
            "Conv2DOptions", padding=0, strideH=1, strideW=1, fusedActivationFunction=0))]
    model, xs = float_and_int16(spec, shape=shape)
    _check(model, xs, tmp_path, "cortex-m4f")  # an int64 sum: not the DSP schedule either
    src = "".join(p.read_text() for p in (tmp_path / "out").glob("*.c"))
    assert "int64_t acc" in src
