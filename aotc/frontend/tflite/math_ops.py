"""TFLite elementwise math, comparison, logic and reduction builtins -> ONNX nodes.

float32 runs as the float ONNX op. int8 runs on the integers where the op only orders or
moves values (MAXIMUM, MINIMUM, also int16; SELECT_V2, REDUCE_MAX/MIN, ARG_MAX/MIN: the
operands must then share one scale and zero point, as TFLM's kernels assume); comparisons
compare TFLM's rescaled int32 operands (``_scaled_operand``); RSQRT is TFLM's table; int8 /
int16 SQUARED_DIFFERENCE, PRELU and int8 ADD_N, CUMSUM, L2_NORMALIZATION, LOG_SOFTMAX are TFLM's
kernels (aotc.ops.quant.qlinear QSquaredDifference, QPRelu, QAddN, QCumSum, QL2Norm,
QLogSoftmax); otherwise as
QDQ (DequantizeLinear, the float op, QuantizeLinear), which aotc.passes.qdq turns into a table
for the one-input functions, and only where that is bit-exact with TFLM's kernel (``TYPES`` in
builtins.py: the int8 forms not listed there are refused before conversion). int32/int64/bool run
on their values. Constant operands fold at compile time (``fold`` in builtins.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.frontend.tflite.builder import Builder
from aotc.frontend.tflite.helpers import (
    _ins,
    _layout_for,
    _operand,
    _outs,
    _pads,
    _same_q,
    plain,
)
from aotc.frontend.tflite.options import _opts
from aotc.frontend.tflite.reductions import arg_min_max, cumsum, reducer

Emit = Callable[[Builder, list[str]], str]


def _raw_operand(b: Builder, t: int, layout: str, rank: int) -> str:
    """Operand ``t`` as stored (no DequantizeLinear), re-laid out like ``_operand``."""
    from aotc.frontend.tflite.builder import TO_NCHW

    c = b.const(t)
    if layout == "nchw" and c is not None and c.ndim < 4:
        return b.init(c.reshape((1,) * (4 - c.ndim) + c.shape).transpose(TO_NCHW), "constant")
    return b.get(t, layout)


COMPARISONS = {"EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL"}


def _comparison_scale(b: Builder, t: int) -> np.ndarray:
    """TFLM's int8 comparison operand for each code q (comparisons.cc, ComparisonWithScaling):
    MultiplyByQuantizedMultiplierSmallerThanOneExp((q - zp) << 8, QuantizeMultiplier(scale))."""
    from aotc.ops.quant import arith as qmath

    scale, zp, _ = b.quant(t)  # type: ignore[misc]
    if len(scale) != 1:
        raise AotcError(f"per-channel parameters on {b.tname(t)!r}")
    mult, shift = qmath.quantize_multiplier(float(np.float32(scale[0])))
    if shift > 0:
        raise AotcError(f"int8 {b.op_name}: scale {float(scale[0])} >= 1 (TFLM requires a "
                        f"scale below 1)")
    return np.array([qmath.rdbpot(qmath.srdhm((q - int(zp[0])) * 256, mult), -shift)
                     for q in range(-128, 128)], np.int32)


def _scaled_operand(b: Builder, t: int, layout: str, rank: int) -> str:
    """Operand ``t`` of an int8 comparison as the int32 TFLM compares: a constant mapped at
    compile time, an activation through a 256-entry table (Gather)."""
    from aotc.frontend.tflite.builder import TO_NCHW

    table = _comparison_scale(b, t)
    c = b.const(t)
    if c is not None:
        v = table[np.asarray(c).astype(np.int64) + 128]
        if layout == "nchw" and v.ndim < 4:
            v = v.reshape((1,) * (4 - v.ndim) + v.shape).transpose(TO_NCHW)
        elif layout == "nchw":
            v = v.transpose(TO_NCHW)
        return b.init(np.ascontiguousarray(v), "scaled")
    idx = b.add("Cast", [b.get(t, layout)], "as_int", to=6)[0]
    idx = b.add("Add", [idx, b.init(np.int32(128), "offset")], "code")[0]
    return b.add("Gather", [b.init(table, "scale_table"), idx], "scaled", axis=0)[0]


# TFLM's CalculateActivationRange<int32_t>: RELU, RELU_N1_TO_1, RELU6 (any other: no clamp).
_INT32_RANGES = {1: (0, 2**31 - 1), 2: (-1, 1), 3: (0, 6)}


def _int32_activation(b: Builder, out: str, fused: int, ts: list[int]) -> str:
    """The fused activation of an int32 ADD / SUB / MUL / DIV as TFLM applies it: SUB, MUL
    and DIV clamp to CalculateActivationRange; ADD ignores it (add.cc runs its int32 kernel
    with the whole int32 range)."""
    if any(b.dtype(t) != np.int32 for t in ts) or b.op_name not in ("ADD", "SUB", "MUL",
                                                                      "DIV"):
        raise AotcError("a fused activation on a non-float output is not supported (TFLM "
                        "clamps int32 ADD / SUB / MUL / DIV only)")
    if b.op_name == "ADD" or fused not in _INT32_RANGES:
        return out
    lo, hi = _INT32_RANGES[fused]
    return b.add("Clip", [out, b.init(np.int32(lo), "act_min"), b.init(np.int32(hi), "act_max")],
                 "activation")[0]


def _same_all(b: Builder, ts: list[int]) -> bool:
    return all(_same_q(b, ts[0], t) for t in ts[1:])


def elementwise(emit: Emit, options: str | None = None, raw_int8: bool = False,
                logic: bool = False) -> Callable[[Builder, Any], None]:
    """A converter for an elementwise builtin whose float form ``emit`` writes. ``raw_int8``:
    int8 runs on the stored integers (an order-only op, every tensor with equal parameters);
    ``logic``: the output is bool (a comparison) computed on the operands as stored when
    they share parameters."""
    def convert(b: Builder, op: Any) -> None:
        ins, (y,) = [t for t in _ins(op) if t >= 0], _outs(op)
        layout = _layout_for(b, ins, y)
        if layout == "flat":
            layout = "nhwc"
        rank = b.rank(y)
        o = _opts(op, options) if options else None
        fused = o.FusedActivationFunction() if o is not None else 0
        q = [t for t in ins if b.quant(t) is not None and b.dtype(t) != np.int32]
        if plain(b, ins + ([] if logic else [y])) and (b.dtype(y) != np.float32 or logic):
            args = [_raw_operand(b, t, layout, rank) for t in ins]
            out = emit(b, args)
            if fused:
                out = _int32_activation(b, out, fused, ins + [y])
            b.define(y, b.add("Identity", [out], "out", outputs=[b.out_name(y)])[0], layout)
            return
        if q and logic and b.op_name in COMPARISONS:
            if any(b.dtype(t) != np.int8 or t not in q for t in ins):
                raise AotcError(f"int8 {b.op_name} needs both operands int8 with "
                                f"quantisation parameters")
            out = emit(b, [_scaled_operand(b, t, layout, rank) for t in ins])
            b.define(y, b.add("Identity", [out], "out", outputs=[b.out_name(y)])[0], layout)
            return
        if q and (logic or raw_int8):
            group = [t for t in (ins if logic else ins + [y]) if b.dtype(t) != np.bool_]
            if not _same_all(b, group) or fused:
                raise AotcError(f"{np.dtype(b.dtype(q[0])).name} {b.op_name} needs one scale "
                                f"and zero point on "
                                f"{'its inputs' if logic else 'its inputs and output'} "
                                f"(TFLM's kernel compares the stored integers)")
            out = emit(b, [_raw_operand(b, t, layout, rank) for t in ins])
            b.define(y, b.add("Identity", [out], "out", outputs=[b.out_name(y)])[0], layout)
            return
        args = [_operand(b, t, layout, rank) if b.dtype(t) in (np.float32, np.int8, np.int16)
                or b.quant(t) is not None else _raw_operand(b, t, layout, rank) for t in ins]
        b.fout(y, emit(b, args), layout, fused)
    return convert


def op1(onnx_op: str, **attrs: Any) -> Emit:
    return lambda b, a: b.add(onnx_op, a[:1], onnx_op.lower(), **attrs)[0]


def op2(onnx_op: str, **attrs: Any) -> Emit:
    return lambda b, a: b.add(onnx_op, a[:2], onnx_op.lower(), **attrs)[0]


def opn(onnx_op: str) -> Emit:
    return lambda b, a: b.add(onnx_op, a, onnx_op.lower())[0]


def _clip(lo: float, hi: float) -> Emit:
    return lambda b, a: b.add("Clip", [a[0], b.init(np.float32(lo), "min"),
                                       b.init(np.float32(hi), "max")], "clip")[0]


def _rsqrt(b: Builder, a: list[str]) -> str:
    return b.add("Reciprocal", [b.add("Sqrt", a[:1], "sqrt")[0]], "rsqrt")[0]


def rsqrt(b: Builder, op: Any) -> None:
    """float: 1 / sqrt(x). int8: TFLM's fixed-point RSQRT for each of the 256 codes
    (aotc.ops.quant.tables), looked up with Gather."""
    from aotc.ops.quant.tables import tflm_table

    (x, *_), (y,) = _ins(op), _outs(op)
    if b.quant(x) is None or b.dtype(x) != np.int8:
        elementwise(_rsqrt)(b, op)
        return
    qx, qy = b.quant(x), b.quant(y)
    if qy is None or b.dtype(y) != np.int8 or len(qx[0]) != 1 or len(qy[0]) != 1:
        raise AotcError("int8 RSQRT needs per-tensor int8 input and output")
    table = tflm_table("Rsqrt", "tflite", np.dtype(np.int8), float(qx[0][0]), int(qx[1][0]),
                       float(qy[0][0]), int(qy[1][0]))
    idx = b.add("Cast", [b.get(x)], "as_int", to=6)[0]
    idx = b.add("Add", [idx, b.init(np.int32(128), "offset")], "code")[0]
    b.define(y, b.add("Gather", [b.init(table, "rsqrt_table"), idx], "rsqrt",
                      outputs=[b.out_name(y)], axis=0)[0])


def _square(b: Builder, a: list[str]) -> str:
    return b.add("Mul", [a[0], a[0]], "square")[0]


def _squared_difference(b: Builder, a: list[str]) -> str:
    d = b.add("Sub", a[:2], "difference")[0]
    return b.add("Mul", [d, d], "square")[0]


def _tflm_binary(b: Builder, op: Any, kernel: str) -> None:
    """A quantised two-input builtin as aotc's integer ``kernel`` (aotc.ops.quant.qlinear),
    TFLM's arithmetic: inputs (x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp), as
    com.microsoft's QLinearAdd takes them."""
    (x, w), (y,) = _ins(op)[:2], _outs(op)
    for t in (x, w, y):
        q = b.quant(t)
        if q is None or len(q[0]) != 1:
            raise AotcError(f"quantised {b.op_name} needs per-tensor parameters on "
                            f"{b.tname(t)!r}")
    layout = _layout_for(b, [x, w], y)
    rank = b.rank(y)
    args = []
    for t in (x, w, y):
        scale, zp, _ = b.quant(t)  # type: ignore[misc]
        if t != y:
            args.append(_raw_operand(b, t, layout, rank))
        args += [b.init(np.float32(scale[0]), "scale"),
                 b.init(np.array(zp[0], b.dtype(t)), "zero_point")]
    out = b.add(kernel, args, b.op_name.lower(), outputs=[b.out_name(y)], domain="aotc")[0]
    b.define(y, out, layout)


def squared_difference(b: Builder, op: Any) -> None:
    """float32 and int32: (x - y)^2 (int32 wraps, as TFLM's int32 kernel); int8 / int16:
    TFLM's quantised kernel, aotc's QSquaredDifference (aotc.ops.quant.qlinear)."""
    (x, w), (y,) = _ins(op)[:2], _outs(op)
    dts = {b.dtype(t) for t in (x, w, y)}
    if not ({np.dtype(np.int8), np.dtype(np.int16)} & dts):
        elementwise(_squared_difference)(b, op)
        return
    if len(dts) != 1:
        raise AotcError(f"quantised SQUARED_DIFFERENCE needs one type on its inputs and "
                        f"output, got {sorted(d.name for d in dts)}")
    _tflm_binary(b, op, "QSquaredDifference")


def _floor_div(b: Builder, a: list[str]) -> str:
    return b.add("Floor", [b.add("Div", a[:2], "div")[0]], "floor")[0]


def _sign_fix(b: Builder, x: str, y: str, zero: np.generic) -> tuple[str, str]:
    """fmod(x, y) and where it is non-zero with a sign other than y's (where floor division
    differs from truncation)."""
    m = b.add("Mod", [x, y], "fmod", fmod=1)[0]
    z = b.init(zero, "zero")
    nonzero = b.add("Not", [b.add("Equal", [m, z], "is_zero")[0]], "nonzero")[0]
    differ = b.add("Xor", [b.add("Less", [m, z], "m_neg")[0],
                           b.add("Less", [y, z], "y_neg")[0]], "differ")[0]
    return m, b.add("And", [nonzero, differ], "fix")[0]


def _floor_div_int(b: Builder, a: list[str]) -> str:
    """LiteRT's int32 FLOOR_DIV: the truncating quotient, minus 1 where the remainder is
    non-zero with the other sign than the divisor (x / 0 is 0: aotc's integer Div)."""
    x, y = a[:2]
    _, fix = _sign_fix(b, x, y, np.int32(0))
    q = b.add("Div", [x, y], "div")[0]
    return b.add("Sub", [q, b.add("Cast", [fix], "fix_int", to=6)[0]], "floor_div")[0]


def _floor_mod(b: Builder, a: list[str], zero: np.generic | None = None) -> str:
    """TFLite's FLOOR_MOD: fmod, then + y where the remainder's sign differs from y's."""
    x, y = a[:2]
    m, fix = _sign_fix(b, x, y, np.float32(0) if zero is None else zero)
    return b.add("Where", [fix, b.add("Add", [m, y], "shift")[0], m], "floor_mod")[0]


def _by_type(floats: Callable[[Builder, Any], None], ints: Callable[[Builder, Any], None]
             ) -> Callable[[Builder, Any], None]:
    """``ints`` for an int32 output (LiteRT's kernels; TFLM has float32 only), else ``floats``."""
    def convert(b: Builder, op: Any) -> None:
        (ints if b.dtype(_outs(op)[0]) == np.int32 else floats)(b, op)
    return convert


def _select(b: Builder, a: list[str]) -> str:
    return b.add("Where", a[:3], "select")[0]


def _prelu(b: Builder, a: list[str]) -> str:
    return b.add("PRelu", a[:2], "prelu")[0]


FLOAT_UNARY: dict[str, Emit] = {
    "ABS": op1("Abs"), "NEG": op1("Neg"), "EXP": op1("Exp"), "LOG": op1("Log"),
    "SQRT": op1("Sqrt"), "RSQRT": _rsqrt, "SQUARE": _square, "SIN": op1("Sin"),
    "COS": op1("Cos"), "FLOOR": op1("Floor"), "CEIL": op1("Ceil"), "ROUND": op1("Round"),
    "ELU": op1("Elu", alpha=1.0), "RELU_N1_TO_1": _clip(-1.0, 1.0),
    "RELU_0_TO_1": _clip(0.0, 1.0), "SIGN": op1("Sign"),
}


def _gelu(approximate: bool) -> Emit:
    """0.5 x (1 + erf(x / sqrt 2)), or with tanh(sqrt(2 / pi) (x + 0.044715 x^3)) (ONNX's
    Gelu is opset 20; aotc imports opset 17)."""
    def emit(b: Builder, a: list[str]) -> str:
        x = a[0]
        if approximate:
            x3 = b.add("Mul", [b.add("Mul", [x, x], "x2")[0], x], "x3")[0]
            inner = b.add("Add", [x, b.add("Mul", [x3, b.init(np.float32(0.044715), "c")],
                                           "cx3")[0]], "inner")[0]
            t = b.add("Tanh", [b.add("Mul", [inner, b.init(np.float32(np.sqrt(2 / np.pi)),
                                                           "k")], "scaled")[0]], "tanh")[0]
        else:
            t = b.add("Erf", [b.add("Mul", [x, b.init(np.float32(1 / np.sqrt(2)), "k")],
                                    "scaled")[0]], "erf")[0]
        one = b.add("Add", [t, b.init(np.float32(1), "one")], "one_plus")[0]
        half = b.add("Mul", [x, b.init(np.float32(0.5), "half")], "half_x")[0]
        return b.add("Mul", [half, one], "gelu")[0]
    return emit


def gelu(b: Builder, op: Any) -> None:
    o = _opts(op, "GeluOptions")
    elementwise(_gelu(bool(o is not None and o.Approximate())))(b, op)


def l2_normalization(b: Builder, op: Any) -> None:
    """x / max(sqrt(sum(x^2, last axis)), 1e-6), TFLite's reference."""
    def emit(bb: Builder, a: list[str]) -> str:
        sq = bb.add("Mul", [a[0], a[0]], "square")[0]
        axis = 1 if layout == "nchw" else -1
        s = bb.add("ReduceSum", [sq, bb.init(np.array([axis], np.int64), "axes")], "sum",
                   keepdims=1)[0]
        n = bb.add("Max", [bb.add("Sqrt", [s], "norm")[0], bb.init(np.float32(1e-6), "eps")],
                   "norm_eps")[0]
        return bb.add("Div", [a[0], n], "l2_normalization")[0]
    (x, *_), (y,) = _ins(op), _outs(op)
    o = _opts(op, "L2NormOptions")
    if b.dtype(x) == np.int8:  # TFLM's integer kernel (aotc's QL2Norm), on the last axis
        if o is not None and o.FusedActivationFunction():
            raise AotcError("int8 L2_NORMALIZATION with a fused activation (TFLM requires "
                            "none)")
        _int8_row_kernel(b, x, y, "QL2Norm", "L2_NORMALIZATION", "l2_normalization")
        return
    layout = b.layout_of(x) if b.rank(x) == 4 else "nhwc"
    if layout == "flat":
        layout = "nhwc"
    b.fout(y, emit(b, [b.fin(x, layout)]), layout, o.FusedActivationFunction() if o else 0)


def _int8_row_kernel(b: Builder, x: int, y: int, op: str, builtin: str, name: str) -> None:
    """y = op(x), one of TFLM's int8 kernels over the last axis (aotc's QL2Norm or
    QLogSoftmax): per-tensor parameters on both sides and an int8 output, as TFLM requires."""
    qx, qy = b.quant(x), b.quant(y)
    if qx is None or qy is None or len(qx[0]) != 1 or b.dtype(y) != np.int8:
        raise AotcError(f"int8 {builtin} needs per-tensor parameters and an int8 output")
    b.define(y, b.add(op, [
        b.get(x), b.init(np.float32(qx[0][0]), "x_scale"),
        b.init(np.int8(qx[1][0]), "x_zero_point"), b.init(np.float32(qy[0][0]), "y_scale"),
        b.init(np.int8(qy[1][0]), "y_zero_point")], name,
        outputs=[b.out_name(y)], domain="aotc")[0])


def log_softmax(b: Builder, op: Any) -> None:
    (x, *_), (y,) = _ins(op), _outs(op)
    if b.dtype(x) == np.int8:  # TFLM's integer kernel (aotc's QLogSoftmax), on the last axis
        _int8_row_kernel(b, x, y, "QLogSoftmax", "LOG_SOFTMAX", "log_softmax")
        return
    layout = b.layout_of(x) if b.rank(x) == 4 else "nhwc"
    if layout == "flat":
        layout = "nhwc"
    axis = 1 if layout == "nchw" else -1
    b.fout(y, b.add("LogSoftmax", [b.fin(x, layout)], "log_softmax", axis=axis)[0], layout)


def add_n(b: Builder, op: Any) -> None:
    """float32: Sum. int8: TFLM's kernel (aotc's QAddN), every input with one scale and zero
    point, as TFLM requires."""
    ins, (y,) = [t for t in _ins(op) if t >= 0], _outs(op)
    if b.quant(y) is None:
        elementwise(opn("Sum"))(b, op)
        return
    qs = [b.quant(t) for t in ins + [y]]
    if any(q is None or len(q[0]) != 1 for q in qs):
        raise AotcError("int8 ADD_N needs per-tensor parameters on its inputs and output")
    if not _same_all(b, ins):
        raise AotcError("int8 ADD_N needs one scale and zero point on all its inputs "
                        "(TFLM's kernel)")
    layout = _layout_for(b, ins, y)
    rank = b.rank(y)
    (sx, zx, _), (sy, zy, _) = qs[0], qs[-1]  # type: ignore[misc]
    params = [b.init(np.float32(sx[0]), "x_scale"), b.init(np.int8(zx[0]), "x_zero_point"),
              b.init(np.float32(sy[0]), "y_scale"), b.init(np.int8(zy[0]), "y_zero_point")]
    out = b.add("QAddN", params + [_raw_operand(b, t, layout, rank) for t in ins], "add_n",
                outputs=[b.out_name(y)], domain="aotc")[0]
    b.define(y, out, layout)


def batch_matmul(b: Builder, op: Any) -> None:
    o = _opts(op, "BatchMatMulOptions")
    (x, w), (y,) = _ins(op)[:2], _outs(op)
    adj = (bool(o and o.AdjX()), bool(o and o.AdjY()))
    if b.quant(x) is not None and (
            b.const(w) is None or any(d != 1 for d in b.shape(w)[:-2])
            or b.quant(w) is None or len(b.quant(w)[0]) != 1):  # type: ignore[index]
        raise AotcError(f"{np.dtype(b.dtype(x)).name} BATCH_MATMUL is supported with a "
                        "constant, per-tensor "
                        "quantised right-hand side of one matrix (TFLM's integer matmul); "
                        "not of two activations or a batch of matrices")
    args = []
    for t, flip in zip((x, w), adj):
        r = b.rank(t)
        if flip and r < 2:
            raise AotcError(f"adj on a rank-{r} operand")
        perm = tuple(range(r - 2)) + (r - 1, r - 2)
        c = b.const(t)
        if flip and c is not None:  # transposed at compile time (the integer matmul reads it)
            v = b.fin(t, arr=np.ascontiguousarray(c.transpose(perm)), perm=perm)
        else:
            v = b.fin(t)
            if flip:
                v = b.add("Transpose", [v], "adjoint", perm=list(perm))[0]
        args.append(v)
    b.fout(y, b.add("MatMul", args, "batch_matmul")[0])


def prelu(b: Builder, op: Any) -> None:
    """float32: PRelu. int8 (int16 with int8 alpha): TFLM's kernel, aotc's QPRelu."""
    (x, alpha), (y,) = _ins(op)[:2], _outs(op)
    if b.dtype(x) == np.float32:
        elementwise(_prelu)(b, op)
        return
    if b.dtype(alpha) != np.int8 or b.dtype(y) != b.dtype(x):
        raise AotcError(f"quantised PRELU needs an int8 alpha and the input's type on the "
                        f"output (TFLM's kernel), got {b.dtype(x).name} x, "
                        f"{b.dtype(alpha).name} alpha, {b.dtype(y).name} output")
    _tflm_binary(b, op, "QPRelu")


def l2_pool_2d(b: Builder, op: Any) -> None:
    """sqrt(mean of x^2 over the window's valid pixels): AveragePool of x^2 not counting the
    padding, then Sqrt."""
    o = _opts(op, "Pool2DOptions")
    (x, *_), (y,) = _ins(op), _outs(op)
    k, s = (o.FilterHeight(), o.FilterWidth()), (o.StrideH(), o.StrideW())
    xf = b.fin(x, "nchw")
    sq = b.add("Mul", [xf, xf], "square")[0]
    avg = b.add("AveragePool", [sq], "mean_square", kernel_shape=list(k), strides=list(s),
                pads=_pads(b.shape(x)[1:3], k, s, (1, 1), o.Padding()), count_include_pad=0)[0]
    b.fout(y, b.add("Sqrt", [avg], "l2_pool")[0], "nchw", o.FusedActivationFunction())


# The converters of this family and the ONNX ops each becomes (the `aotc ops` column).
CONVERTERS: dict[str, Callable[[Builder, Any], None]] = {
    **{k: elementwise(v) for k, v in FLOAT_UNARY.items()},
    "RSQRT": rsqrt,
    "GELU": gelu,
    "L2_NORMALIZATION": l2_normalization,
    "LOG_SOFTMAX": log_softmax,
    "PRELU": prelu,
    "ADD_N": add_n,
    "DIV": elementwise(op2("Div"), "DivOptions"),
    "MAXIMUM": elementwise(op2("Max"), raw_int8=True),
    "MINIMUM": elementwise(op2("Min"), raw_int8=True),
    "SQUARED_DIFFERENCE": squared_difference,
    "FLOOR_DIV": _by_type(elementwise(_floor_div), elementwise(_floor_div_int)),
    "FLOOR_MOD": _by_type(elementwise(_floor_mod), elementwise(
        lambda b, a: _floor_mod(b, a, np.int32(0)))),
    "POW": elementwise(op2("Pow")),
    "EQUAL": elementwise(op2("Equal"), logic=True),
    "NOT_EQUAL": elementwise(lambda b, a: b.add("Not", [b.add("Equal", a[:2], "eq")[0]],
                                                "not_equal")[0], logic=True),
    "GREATER": elementwise(op2("Greater"), logic=True),
    "GREATER_EQUAL": elementwise(op2("GreaterOrEqual"), logic=True),
    "LESS": elementwise(op2("Less"), logic=True),
    "LESS_EQUAL": elementwise(op2("LessOrEqual"), logic=True),
    "LOGICAL_AND": elementwise(op2("And"), logic=True),
    "LOGICAL_OR": elementwise(op2("Or"), logic=True),
    "LOGICAL_NOT": elementwise(op1("Not"), logic=True),
    "SELECT_V2": elementwise(_select, raw_int8=True),
    "REDUCE_MAX": reducer("ReduceMax", True),
    "REDUCE_MIN": reducer("ReduceMin", True),
    "REDUCE_PROD": reducer("ReduceProd", False),
    "REDUCE_ANY": reducer("ReduceMax", True),
    "REDUCE_ALL": reducer("ReduceMin", True),
    "SUM": reducer("ReduceSum", False),
    "ARG_MAX": arg_min_max("ArgMax", "ArgMaxOptions"),
    "ARG_MIN": arg_min_max("ArgMin", "ArgMinOptions"),
    "CUMSUM": cumsum,
    "BATCH_MATMUL": batch_matmul,
    "L2_POOL_2D": l2_pool_2d,
}

ONNX_OPS: dict[str, tuple[str, ...]] = {
    "ABS": ("Abs", "aotc.QLut"), "NEG": ("Neg",), "EXP": ("Exp",),
    "LOG": ("Log",), "SQRT": ("Sqrt",), "RSQRT": ("Sqrt", "Reciprocal", "Gather"),
    "SQUARE": ("Mul",),
    "SIN": ("Sin",), "COS": ("Cos",), "FLOOR": ("Floor",), "CEIL": ("Ceil",),
    "ROUND": ("Round",), "ELU": ("Elu", "aotc.QLut"), "RELU_N1_TO_1": ("Clip",),
    "RELU_0_TO_1": ("Clip",), "SIGN": ("Sign",), "GELU": ("Erf", "Tanh", "Mul"),
    "L2_NORMALIZATION": ("ReduceSum", "Sqrt", "Div", "aotc.QL2Norm"),
    "LOG_SOFTMAX": ("LogSoftmax", "aotc.QLogSoftmax"),
    "PRELU": ("PRelu", "aotc.QPRelu"), "ADD_N": ("Sum", "aotc.QAddN"), "DIV": ("Div",),
    "MAXIMUM": ("Max",),
    "MINIMUM": ("Min",), "SQUARED_DIFFERENCE": ("Sub", "Mul", "aotc.QSquaredDifference"),
    "FLOOR_DIV": ("Div", "Floor"),
    "FLOOR_MOD": ("Mod", "Where"), "POW": ("Pow",), "EQUAL": ("Equal",),
    "NOT_EQUAL": ("Equal", "Not"), "GREATER": ("Greater",),
    "GREATER_EQUAL": ("GreaterOrEqual",), "LESS": ("Less",), "LESS_EQUAL": ("LessOrEqual",),
    "LOGICAL_AND": ("And",), "LOGICAL_OR": ("Or",), "LOGICAL_NOT": ("Not",),
    "SELECT_V2": ("Where",), "REDUCE_MAX": ("ReduceMax",),
    "REDUCE_MIN": ("ReduceMin",), "REDUCE_PROD": ("ReduceProd",), "REDUCE_ANY": ("ReduceMax",),
    "REDUCE_ALL": ("ReduceMin",), "SUM": ("ReduceSum", "aotc.QReduce"), "ARG_MAX": ("ArgMax",),
    "ARG_MIN": ("ArgMin",), "CUMSUM": ("CumSum", "aotc.QCumSum"), "BATCH_MATMUL": ("MatMul",),
    "L2_POOL_2D": ("Mul", "AveragePool", "Sqrt"),
}
