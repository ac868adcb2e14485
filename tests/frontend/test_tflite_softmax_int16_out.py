"""TFLM's SOFTMAX from int8 to int16 (output scale 1/65536, zero point -32768: the SOFTMAX of
TFLM's keyword benchmark model) and the zero-point rule around it: an int16 tensor may have a
zero point other than 0 only where TFLM computes with it (QUANTIZE, this SOFTMAX's output).

Reference: TensorFlow Lite Micro's Python interpreter; bit-exact (no tolerance), and the
compiled graph runs the integer kernel QSoftmaxToInt16 (no DequantizeLinear / QuantizeLinear
left). Inputs: every int8 code, shuffled, in rows of several lengths.
"""

from __future__ import annotations

from pathlib import Path

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as S
from test_tflite_int16 import _compile_run
from tflite_builder import Net, interpret, interpret_tflm, options

import aotc
from aotc.errors import AotcError
from aotc.ir.graph import Node
from aotc.ops.quant.tables import QSoftmaxToInt16

CODES = np.arange(-128, 128)


def _model(shape: tuple[int, ...], sx: float, zx: int, beta: float = 1.0,
           sy: float = 1 / 65536, zy: int = -32768) -> bytes:
    net = Net(False)
    x = net._tensor(shape, np.int8, "input0", None, sx, zx)
    net.inputs.append(x)
    y = net._tensor(shape, np.int16, "y", None, sy, zy)
    net.op_into("SOFTMAX", [x], [y], options("SoftmaxOptions", beta=beta))
    return net.build([y])


def _codes(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    v = np.concatenate([rng.permutation(CODES) for _ in range(-(-n // 256))])[:n]
    return v.astype(np.int8).reshape(shape)


def _exact(model: bytes, x: np.ndarray, tmp: Path) -> np.ndarray:
    want = interpret_tflm(model, [x])[0]
    got, ops = _compile_run(model, [x], tmp)
    assert got.dtype == want.dtype == np.int16 and got.shape == want.shape
    diff = np.nonzero(got.ravel() != want.ravel())[0]
    assert diff.size == 0, (f"{diff.size} of {want.size} differ from TFLM; first at "
                            f"{diff[0]}: {got.ravel()[diff[0]]} vs {want.ravel()[diff[0]]}")
    assert "QSoftmaxToInt16" in ops and not ops & {"DequantizeLinear", "QuantizeLinear"}, ops
    return want


@pytest.mark.parametrize("shape", [(64, 2), (8, 32), (2, 256), (2, 2, 4, 32)],
                         ids=["rows2", "rows32", "rows256", "rank4"])
@pytest.mark.parametrize("sx,zx,beta", [(0.06996273, 2, 1.0), (1 / 16, -128, 1.0),
                                        (0.01, 0, 1.0), (0.5, 127, 1.0), (0.1, -3, 0.5),
                                        (0.02, 9, 2.5)])
def test_every_code(shape, sx, zx, beta, tmp_path):
    model = _model(shape, sx, zx, beta)
    want = _exact(model, _codes(shape), tmp_path)
    assert len(np.unique(want)) > 8  # the outputs are not all saturated


@pytest.mark.parametrize("sy", [1 / 65536, 1.5259022e-05], ids=["2^-16", "1/65535"])
def test_numpy_reference_matches_tflm(sy):
    """QSoftmaxToInt16.compute (the op's numpy reference, used for constant folding) equals
    TFLM on every code; the output scale is not read (TFLM's Prepare accepts 1/65535)."""
    shape = (16, 16)
    x = _codes(shape, seed=3)
    for sx, zx, beta in [(0.06996273, 2, 1.0), (0.1, -3, 0.5)]:
        want = interpret_tflm(_model(shape, sx, zx, beta, sy), [x])[0]
        node = Node("QSoftmaxToInt16", "n", ("x", "sx", "zx", "sy", "zy"), ("y",),
                    {"beta": beta}, 1, "aotc")
        args = [x, np.float32(sx), np.int8(zx), np.float32(sy), np.int16(-32768)]
        got = QSoftmaxToInt16().compute(args, node.attrs, node)
        np.testing.assert_array_equal(got, want)


def test_after_conv(tmp_path):
    """A CONV_2D's output (kept in NCHW by aotc) into the SOFTMAX: the rows are still the
    channels, the integer kernel still runs."""
    shape = (1, 5, 5, 3)

    def spec(net: Net) -> list[int]:
        x = net.input(shape)
        wt = net.weight(net.rng.normal(scale=0.5, size=(24, 3, 3, 3)))
        c = net.op("CONV_2D", [x, wt, net.bias(np.zeros(24), x, wt)], (1, 5, 5, 24), options(
            "Conv2DOptions", padding=0, strideH=1, strideW=1, fusedActivationFunction=0))
        return [net.op("SOFTMAX", [c], (1, 5, 5, 24), options("SoftmaxOptions", beta=1.0))]

    xs = [np.random.default_rng(0).normal(size=shape).astype(np.float32)]
    fnet = Net(False)
    _, named = interpret(fnet.build(spec(fnet)), xs, all_tensors=True)
    ranges = {k: (float(v.min()), float(v.max())) for k, v in named.items()
              if v.dtype == np.float32 and v.size}
    qnet = Net(True, ranges)
    m = S.ModelT.InitFromPackedBuf(qnet.build(spec(qnet)), 0)
    y = m.subgraphs[0].tensors[int(m.subgraphs[0].outputs[0])]
    y.type = S.TensorType.INT16
    y.quantization.scale = np.array([1 / 65536], np.float32)
    y.quantization.zeroPoint = np.array([-32768], np.int64)
    fb = flatbuffers.Builder(4096)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    q = qnet.tensors[qnet.inputs[0]].quantization
    x8 = np.clip(np.round(xs[0] / q.scale[0]) + q.zeroPoint[0], -128, 127).astype(np.int8)
    _exact(bytes(fb.Output()), x8, tmp_path)


def _compile(model: bytes, tmp: Path) -> None:
    (tmp / "m.tflite").write_bytes(model)
    aotc.compile(tmp / "m.tflite", tmp / "out", name="m")


@pytest.mark.parametrize("sy,zy", [(1 / 65536, 0), (1 / 32768, -32768), (1 / 65536, -32767)])
def test_other_output_parameters_refused(sy, zy, tmp_path):
    """TFLM's Prepare refuses other output parameters: so does aotc, in one line."""
    model = _model((4, 8), 0.05, 0, sy=sy, zy=zy)
    with pytest.raises(Exception):  # noqa: B017 - TFLM's interpreter raises RuntimeError
        interpret_tflm(model, [_codes((4, 8))])
    with pytest.raises(AotcError, match="operator 0 SOFTMAX: output scale"):
        _compile(model, tmp_path)


def test_int16_zero_point_elsewhere_refused(tmp_path):
    """An int16 tensor with a zero point other than 0 that a 16x8 kernel reads (here the
    QUANTIZE output feeding a RELU, whose TFLM kernel assumes 0): still refused."""
    net = Net(False)
    x = net._tensor((2, 8), np.int16, "input0", None, 1e-3, 0)
    net.inputs.append(x)
    q = net._tensor((2, 8), np.int16, "q", None, 2e-3, 100)
    net.op_into("QUANTIZE", [x], [q])
    y = net._tensor((2, 8), np.int16, "y", None, 2e-3, 0)
    net.op_into("RELU", [q], [y])
    with pytest.raises(AotcError, match="an int16 activation with zero point 100"):
        _compile(net.build([y]), tmp_path)


@pytest.mark.parametrize("src,sx,dst,sy,zy", [(np.int16, 0.05, np.int8, 1 / 256, -128),
                                              (np.float32, None, np.int16, 1 / 32768, 0)],
                         ids=["int16_int8", "float32_int16"])
def test_other_type_pairs_refused(src, sx, dst, sy, zy, tmp_path):
    """TFLM's SOFTMAX writes its input's type, or int16 from int8; its Prepare refuses the
    others, and aotc (which would have no integer kernel for them) too, in one line."""
    net = Net(False)
    x = net._tensor((4, 8), src, "input0", None, sx, 0 if sx else None)
    net.inputs.append(x)
    y = net._tensor((4, 8), dst, "y", None, sy, zy)
    net.op_into("SOFTMAX", [x], [y], options("SoftmaxOptions", beta=1.0))
    model = net.build([y])
    with pytest.raises(Exception):  # noqa: B017 - TFLM's interpreter raises RuntimeError
        interpret_tflm(model, [np.zeros((4, 8), src)])
    with pytest.raises(AotcError, match="SOFTMAX"):
        _compile(model, tmp_path)
