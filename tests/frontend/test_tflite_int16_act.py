"""TFLite's int16 (16x8) RELU, RELU6, LOGISTIC, TANH, SOFTMAX, MEAN and SUM on every int16
input code (-32768..32767), for several input and output scales (powers of two, which take
TFLM's power-of-two paths, and others; SOFTMAX also several betas), each a single-op model
with the parameters set here. HARD_SWISH, REDUCE_MAX and REDUCE_MIN have no int16 kernel in
TFLM (its interpreter refuses them) and stay refused.

Reference: TensorFlow Lite Micro's Python interpreter. Tolerance: none (bit-exact), and the
compiled graph runs aotc's integer kernel (no DequantizeLinear / QuantizeLinear left).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as S
from test_tflite_int16 import Net16, _compile_run
from tflite_builder import interpret_tflm, options

import aotc
from aotc.errors import AotcError

CODES = np.arange(-32768, 32768, dtype=np.int16)


def _model(code: str, shape: tuple[int, ...], sx: float, sy: float, out_shape: Any = None,
           axes: list[int] | None = None, opts: Any = None) -> bytes:
    """One ``code`` operator, int16 in and out with zero points 0 and the scales given."""
    net = Net16({})
    x = net._tensor(shape, np.int16, "input0", None, sx, 0)
    net.inputs.append(x)
    y = net._tensor(out_shape or shape, np.int16, "y", None, sy, 0)
    net.op_into(code, [x] + ([net.ints(axes)] if axes is not None else []), [y])
    if opts is not None:
        o = net.ops[-1]
        o.builtinOptionsType = getattr(S.BuiltinOptions, type(opts).__name__[:-1])
        o.builtinOptions = opts
    return net.build([y])


def _exact(model: bytes, x: np.ndarray, tmp: Path, kernel: str) -> None:
    want = interpret_tflm(model, [x])[0]
    got, ops = _compile_run(model, [x], tmp)
    assert got.dtype == want.dtype == np.int16 and got.shape == want.shape
    diff = np.nonzero(got.ravel() != want.ravel())[0]
    assert diff.size == 0, (f"{diff.size} of {want.size} differ from TFLM; first at x="
                            f"{x.ravel()[diff[0]]}: {got.ravel()[diff[0]]} vs "
                            f"{want.ravel()[diff[0]]}")
    assert kernel in ops and not ops & {"DequantizeLinear", "QuantizeLinear"}, ops


SHAPE = (1, 256, 256, 1)


@pytest.mark.parametrize("code", ["LOGISTIC", "TANH"])
@pytest.mark.parametrize("sx", [2.0 ** -12, 2.0 ** -11, 2.0 ** -15, 2.0 ** -9, 8 / 32767,
                                1 / 3000, 1e-3, 3.1e-5],
                         ids=["pot12", "pot11", "pot15", "pot9", "8", "3000", "1e-3", "3e-5"])
def test_logistic_tanh_every_code(code, sx, tmp_path):
    model = _model(code, SHAPE, sx, 2.0 ** -15)
    _exact(model, CODES.reshape(SHAPE), tmp_path,
           {"LOGISTIC": "QLogistic16", "TANH": "QTanh16"}[code])


@pytest.mark.parametrize("sx,sy", [(1e-3, 5e-4), (1e-3, 1e-3), (3e-4, 7e-4),
                                   (2.0 ** -10, 2.0 ** -12), (5e-5, 1.7e-4)])
def test_relu_every_code(sx, sy, tmp_path):
    _exact(_model("RELU", SHAPE, sx, sy), CODES.reshape(SHAPE), tmp_path, "QRelu")


@pytest.mark.parametrize("sx", [1e-3, 2e-4, 3e-4, 5e-5, 2.0 ** -12])
def test_relu6_every_code(sx, tmp_path):
    """TFLM's RELU6 clamps the input's codes to [0, round(6 / x_scale)] (output parameters
    equal to the input's, as TFLite writes them)."""
    _exact(_model("RELU6", SHAPE, sx, sx), CODES.reshape(SHAPE), tmp_path, "QRelu")


@pytest.mark.parametrize("code", ["MEAN", "SUM"])
@pytest.mark.parametrize("sx,sy", [(1e-3, 1e-3), (1e-3, 3.3e-4), (2e-4, 1.1e-3)])
def test_reduce_every_code(code, sx, sy, tmp_path):
    """Every code once, shuffled, averaged (summed) over H and W in 256 channels."""
    shape = (1, 16, 16, 256)
    x = np.random.default_rng(0).permutation(CODES).reshape(shape)
    if code == "SUM":
        sy *= 64
    model = _model(code, shape, sx, sy, (1, 1, 1, 256), [1, 2],
                   options("ReducerOptions", keepDims=True))
    _exact(model, x, tmp_path, "QReduce")


@pytest.mark.parametrize("sx,beta", [(1e-3, 1.0), (2.0 ** -12, 1.0), (3e-5, 1.0), (1e-2, 1.0),
                                     (1e-3, 0.5), (4e-4, 2.3)])
def test_softmax_every_code(sx, beta, tmp_path):
    """Rows of 256 consecutive codes (small differences from the row maximum) and the same
    codes shuffled (differences up to 65535): every code twice."""
    shape = (512, 256)
    x = np.concatenate([CODES, np.random.default_rng(1).permutation(CODES)]).reshape(shape)
    model = _model("SOFTMAX", shape, sx, 2.0 ** -15, opts=options("SoftmaxOptions", beta=beta))
    _exact(model, x, tmp_path, "QSoftmax16")


def test_refused_output_scale(tmp_path):
    """TFLM's int16 LOGISTIC requires the output scale 2^-15 (its Prepare fails otherwise):
    a one-line error, not a float kernel."""
    model = _model("LOGISTIC", (1, 8), 1e-3, 1e-4)
    (tmp_path / "m.tflite").write_bytes(model)
    with pytest.raises(AotcError, match="output scale 2\\^-15"):
        aotc.compile(tmp_path / "m.tflite", tmp_path / "out", name="m")
