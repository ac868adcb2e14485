"""Quantised builtins with TFLM's own integer kernels: SQUARED_DIFFERENCE int8 and int16
(aotc.ops.quant.qlinear.QSquaredDifference), PRELU int8 and int16 with an int8 alpha
(QPRelu), ADD_N, CUMSUM, L2_NORMALIZATION and LOG_SOFTMAX int8 (QAddN, QCumSum, QL2Norm,
QLogSoftmax). Every case of
tflite_conformance.QBINARY (chosen parameters: several scale pairs, zero points at the ends,
saturating outputs, broadcast operands, overflowing sums; every int8 code, int16 codes over
the whole range) is compared with TFLM's Python interpreter, exactly: the generated C on the
host and the op's numpy reference (what constant folding computes). TFLM's own refusals, and
what TFLM leaves undefined, are refused with a one-line reason.
"""

from __future__ import annotations

import numpy as np
import pytest
import tflite_conformance as tc
from tflite_builder import interpret_tflm

import aotc
from aotc.errors import AotcError
from aotc.ir.graph import Node
from aotc.ops.opdef import resolve

KERNELS = {"SQUARED_DIFFERENCE": "QSquaredDifference", "PRELU": "QPRelu", "ADD_N": "QAddN",
           "CUMSUM": "QCumSum", "L2_NORMALIZATION": "QL2Norm", "LOG_SOFTMAX": "QLogSoftmax"}
CASES = {k: v for k, v in tc.QBINARY.items() if k.split("_int", 1)[0] in KERNELS}


def _params(model: bytes, names: tuple[str, ...]) -> list[tuple[float, int]]:
    """(scale, zero point) of the subgraph's tensors ``names`` (as _qbinary, _qaddn name them)."""
    from ai_edge_litert import schema_py_generated as S

    sub = S.ModelT.InitFromPackedBuf(model, 0).subgraphs[0]
    by_name = {t.name.decode(): t.quantization for t in sub.tensors}
    return [(float(by_name[n].scale[0]), int(by_name[n].zeroPoint[0])) for n in names]


@pytest.mark.parametrize("name", sorted(CASES))
def test_bit_exact(name, tmp_path):
    model, xs = tc._asym16_builder(CASES[name])()
    want = interpret_tflm(model, xs)[0]
    bundle = tc.compile_case(model, tmp_path)
    got = tc.run_bundle(bundle, xs)[0]
    np.testing.assert_array_equal(got, want)
    # the numpy reference (constant folding's arithmetic), with the compiled node's attributes
    kernel = KERNELS[name.split("_int", 1)[0]]
    attrs = {k: v for k, v in next(n for n in bundle.compilation.graph.nodes
                                   if n.op == kernel).attrs.items() if not k.startswith("_")}
    dt = xs[0].dtype
    if kernel in ("QCumSum", "QL2Norm", "QLogSoftmax"):
        (sx, zx), (sy, zy) = _params(model, ("x", "out"))
        args = [xs[0], np.float32(sx), np.array(zx, dt), np.float32(sy), np.array(zy, dt)]
    elif kernel == "QAddN":
        (sx, zx), (sy, zy) = _params(model, ("x0", "out"))
        args = [np.float32(sx), np.array(zx, dt), np.float32(sy), np.array(zy, dt), *xs]
    else:
        (sa, za), (sb, zb), (sy, zy) = _params(model, ("x", "y", "out"))
        args = [xs[0], np.float32(sa), np.array(za, dt), xs[1], np.float32(sb),
                np.array(zb, xs[1].dtype), np.float32(sy), np.array(zy, dt)]
    op = resolve(kernel, 1, "aotc")
    node = Node(kernel, "k", tuple(f"i{k}" for k in range(len(args))), ("y",), attrs,
                domain="aotc")
    ref = op.run_reference(node, args)[0]
    np.testing.assert_array_equal(ref, want)
    assert ref.dtype == want.dtype


def _both_refuse(tmp_path, model: bytes, xs, match: str) -> None:
    """TFLM's interpreter refuses the model (its Prepare raises) and aotc refuses it with an
    error matching `match`."""
    with pytest.raises(Exception):  # noqa: B017 - TFLM's interpreter raises RuntimeError
        interpret_tflm(model, xs)
    (tmp_path / "m.tflite").write_bytes(model)
    with pytest.raises(AotcError, match=match):
        aotc.compile(tmp_path / "m.tflite", tmp_path / "out", name="m")


def test_squared_difference_int16_zero_point_refused(tmp_path):
    """TFLM's Prepare requires int16 zero points 0; aotc refuses the same model."""
    model, xs = tc._asym16_builder(tc._qbinary("SQUARED_DIFFERENCE", np.int16, (1e-3, 5),
                                               (1e-3, 0), (1e-2, 0)))()
    _both_refuse(tmp_path, model, xs, "zero point")


def test_add_n_parameters_refused(tmp_path):
    """ADD_N inputs with different parameters: TFLM's Prepare refuses them, and so does aotc."""
    def spec(net):
        a = net._tensor((4, 4), np.int8, "x0", None, 0.05, 0)
        b = net._tensor((4, 4), np.int8, "x1", None, 0.04, 0)
        net.inputs += [a, b]
        o = net._tensor((4, 4), np.int8, "out", None, 0.1, 0)
        net.op_into("ADD_N", [a, b], [o])
        return [o]
    model, xs = tc._asym16_builder(spec)()
    _both_refuse(tmp_path, model, xs, "one scale and zero point")


def test_l2_normalization_long_rows_refused(tmp_path):
    """Rows whose sum of squares can reach 2^28: TFLM's GetInvSqrtQuantizedMultiplierExp then
    shifts by a wrapped unsigned count (undefined in C); aotc refuses them."""
    model, _ = tc._asym16_builder(tc._ql2norm((1, 4129), (0.1, 0)))()
    (tmp_path / "m.tflite").write_bytes(model)
    with pytest.raises(AotcError, match="2\\^28"):
        aotc.compile(tmp_path / "m.tflite", tmp_path / "out", name="m")


def test_log_softmax_output_parameters_refused(tmp_path):
    """int8 LOG_SOFTMAX with an output other than 16/256, 127: TFLM's Prepare refuses it, and
    so does aotc."""
    def spec(net):
        a = net._tensor((4, 8), np.int8, "x", None, 0.1, 0)
        net.inputs.append(a)
        o = net._tensor((4, 8), np.int8, "out", None, 0.1, 127)
        net.op_into("LOG_SOFTMAX", [a], [o])
        return [o]
    model, xs = tc._asym16_builder(spec)()
    with pytest.raises(Exception):  # noqa: B017 - TFLM's interpreter raises RuntimeError
        interpret_tflm(model, xs)
    (tmp_path / "m.tflite").write_bytes(model)
    with pytest.raises(AotcError, match="16/256 and 127"):
        aotc.compile(tmp_path / "m.tflite", tmp_path / "out", name="m")
