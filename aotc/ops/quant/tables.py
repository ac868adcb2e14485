"""Quantised softmax and table ops: com.microsoft QLinearSoftmax (TFLM's fixed-point int8
softmax in tflite mode), QLinearSigmoid, QLinearLeakyRelu, and aotc's QLut (any int8 -> int8
unary function as a 256-entry table computed at compile time; TFLM's LOGISTIC/TANH in tflite
mode)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Cast, Const, Expr, bmax, bmin, call
from aotc.ops import register
from aotc.ops.quant import arith as qmath
from aotc.ops.quant.conv_matmul import F32, I32, QT, QuantOp, mode_of, qrange
from aotc.ops.quant.qlinear import MS, _clamp_i32, _quantize_f32, _scalar, unary_params


# ------------------------------------------------------------------------------ softmax
@register
class QLinearSoftmax(QuantOp):
    """Softmax over the last axis. tflite mode (int8 output with scale 1/256 and zero point
    -128, as TFLite requires): TFLM's fixed-point algorithm, with exp of the 256 possible
    differences from the row maximum tabulated at compile time; onnx mode: float32."""

    name = "QLinearSoftmax"
    since = 1
    domain = MS
    dtypes = QT
    defined = ("with --requant tflite, int8, output scale 1/256 and zero point -128: TFLite's "
               "integer softmax (bit-exact with TFLM) when the input scale is above 2^-26, "
               "which TFLM's Prepare requires; otherwise float exp and rounding, as onnxruntime")

    def reference(self, X: np.ndarray, X_scale: np.ndarray, x_zero_point: np.ndarray,
                  y_scale: np.ndarray, y_zero_point: np.ndarray | None = None, *,
                  axis: int = -1, opset: int = 13) -> np.ndarray:
        raise NotImplementedError

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x = ins[0]
        if x is None or x.type.dtype.name not in QT:
            raise AotcError("X must be int8 or uint8", node.name, node.op)
        r = len(x.type.shape)
        axis = int(node.attrs.get("axis", -1))
        if (axis + r if axis < 0 else axis) != r - 1:
            raise AotcError(f"axis={axis}: only the last axis is supported", node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        return [TensorType(x.type.shape, x.type.dtype)]

    @staticmethod
    def fixed_point(node: Node, p: dict[str, Any], dt: np.dtype) -> bool:
        """TFLite's integer softmax applies: int8, output 1/256 and -128, and an input scale
        TFLM's Prepare accepts (input scale * 2^26 > 1, its QuantizeMultiplierGreaterThanOne
        check). Otherwise the kernel computes in float, as onnxruntime does."""
        return (mode_of(node) == "tflite" and np.dtype(dt) == np.int8 and p["zy"] == -128
                and np.float32(p["sy"]) == np.float32(1 / 256)
                and float(p["sx"]) * (1 << 26) > 1.0)

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        return node.with_(inputs=node.inputs[:1], attrs={**node.attrs, "_p": unary_params(ins)})

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        x = args[0]
        assert x is not None
        p = unary_params(args)
        rows = x.reshape(-1, x.shape[-1])
        if self.fixed_point(node, p, x.dtype):
            exp = qmath.softmax_table(p["sx"])
            return np.stack([qmath.softmax_int8_row(r, exp) for r in rows]).reshape(
                x.shape)
        f = (rows.astype(np.int64) - p["zx"]).astype(np.float32) * np.float32(p["sx"])
        e = np.exp(f - f.max(axis=1, keepdims=True))
        sm = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
        lo, hi = qrange(dtypes.from_numpy(x.dtype))
        y = np.clip(np.rint(sm / np.float32(p["sy"])) + p["zy"], lo, hi)
        return y.astype(x.dtype).reshape(x.shape)

    def lower(self, node: Node, kb: Any) -> None:
        X, Y = kb.inputs[0], kb.outputs[0]
        p = node.attrs["_p"]
        depth = X.shape[-1]
        rows = X.numel // depth
        lo, hi = qrange(Y.dtype)
        with kb.loop(rows, "r") as r:
            base = r * depth
            mx = kb.local(Cast(X.flat(base), I32), "mx", I32)
            with kb.loop(depth, "i") as i:
                kb.assign(mx, bmax(mx, Cast(X.flat(base + i), I32)))
            if self.fixed_point(node, p, X.dtype.np):
                lower_tflm_softmax_row(kb, X, Y, base, depth, mx,
                                       qmath.softmax_table(p["sx"]), lo, hi)
            else:
                sx = Const(p["sx"], F32)
                total_f = kb.local(Const(0.0, F32), "sum", F32)
                with kb.loop(depth, "i") as i:
                    d = Cast(Cast(X.flat(base + i), I32) - mx, F32) * sx
                    kb.assign(total_f, total_f + call("exp", d))
                with kb.loop(depth, "i") as i:
                    d = Cast(Cast(X.flat(base + i), I32) - mx, F32) * sx
                    kb.store_output([], _quantize_f32(call("exp", d) / total_f, p["sy"], p["zy"],
                                                      lo, hi, Y.dtype), flat=base + i)


def lower_tflm_softmax_row(kb: Any, X: Any, Y: Any, base: Expr, depth: int, mx: Any,
                           exp: np.ndarray, lo: int, hi: int) -> None:
    """One row of TFLM's fixed-point softmax from int8 (reference_ops::Softmax), its output
    Y int8 or int16 (``lo``, ``hi``: Y's range, the offset its minimum): exp of each
    difference from the row maximum ``mx`` from the table ``exp`` (softmax_table), the Q12.19
    sum, its reciprocal, and each exp times it divided by 2^(num_bits_over_unit + 31 - bits
    of Y)."""
    # Past diff_min the table is zero: keep it up to its first zero and clamp.
    zeros = np.flatnonzero(exp == 0)
    size = int(zeros[0]) + 1 if zeros.size else 256
    texp = kb.const("exp", exp[:size], I32)

    def e_at(i: Expr) -> Expr:
        d = mx - Cast(X.flat(base + i), I32)
        return texp[[bmin(d, Const(size - 1, I32)) if size < 256 else d]]

    total = kb.local(Const(0, I32), "sum", I32)
    with kb.loop(depth, "i") as i:  # Rescale<12>: the Q12.19 sum of exps
        kb.assign(total, total + call("q_rdbpot", e_at(i), Const(12, I32), dtype=I32))
    scale = kb.local(call("q_softmax_scale", total, Const(0, I32), dtype=I32), "scale", I32)
    out_bits = 8 * Y.dtype.np.itemsize
    bits = kb.local(call("q_softmax_scale", total, Const(1, I32), dtype=I32)
                    + Const(31 - out_bits, I32), "bits", I32)
    with kb.loop(depth, "i") as i:
        e = e_at(i)
        v = call("q_rdbpot", call("q_srdhm", scale, e, dtype=I32), bits, dtype=I32)
        kb.store_output([], Cast(_clamp_i32(v - Const(-lo, I32), lo, hi), Y.dtype),
                        flat=base + i)


@register
class QSoftmaxToInt16(QuantOp):
    """TFLM's SOFTMAX from int8 to int16 over the last axis (reference_ops::Softmax<int8_t,
    int16_t>): the int8 kernel's fixed point (exp of the 256 possible differences from the
    row maximum tabulated at compile time, beta folded into the table), the result divided by
    2^(num_bits_over_unit + 15) and offset by -32768. TFLM's Prepare requires the output
    zero point -32768 and scale 1/65536 (within 0.1 %) and an input scale x beta above
    2^-26; the output scale is not read. tflite mode only (the QDQ pass makes it then)."""

    name = "QSoftmaxToInt16"
    domain = "aotc"
    since = 1
    dtypes = ("int8",)

    def reference(self, X: np.ndarray, X_scale: np.ndarray, X_zero_point: np.ndarray,
                  Y_scale: np.ndarray, Y_zero_point: np.ndarray, *,
                  beta: float = 1.0) -> np.ndarray:
        raise NotImplementedError  # compute(): the parameters come from the node

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x = ins[0]
        yz = ins[4] if len(ins) > 4 else None
        if x is None or x.type.dtype.name != "int8":
            raise AotcError("X must be int8", node.name, node.op)
        if yz is None or yz.type.dtype.name != "int16":
            raise AotcError("y_zero_point must be an int16 constant", node.name, node.op)

    @staticmethod
    def params(node: Node, p: dict[str, Any]) -> float:
        """The input scale x beta the table is built for (TFLM's Prepare checks)."""
        if p["zy"] != -32768 or abs(np.float32(p["sy"]) - np.float32(1 / 65536)) > \
                np.float32(0.001 / 65536):
            raise AotcError(f"SOFTMAX from int8 to int16 needs the output scale 1/65536 and "
                            f"zero point -32768 (TFLM's kernel), got {p['sy']:g} and "
                            f"{p['zy']}", node.name, node.op)
        beta = float(np.float32(node.attrs.get("beta", 1.0)))
        if beta * float(p["sx"]) * (1 << 26) <= 1.0:
            raise AotcError(f"input scale {p['sx']:g} x beta {beta:g} is too small for TFLM's "
                            f"int8 softmax (it aborts)", node.name, node.op)
        return beta

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None
        return [TensorType(ins[0].type.shape, dtypes.BY_NAME["int16"])]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        p = unary_params(ins)
        self.params(node, p)
        return node.with_(inputs=node.inputs[:1], attrs={**node.attrs, "_p": p})

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        x = args[0]
        assert x is not None
        p = unary_params(args)
        exp = qmath.softmax_table(p["sx"], self.params(node, p))
        rows = x.reshape(-1, x.shape[-1])
        return np.stack([qmath.softmax_int8_row(r, exp, out_bits=16) for r in rows]).reshape(
            x.shape)

    def lower(self, node: Node, kb: Any) -> None:
        X, Y = kb.inputs[0], kb.outputs[0]
        p = node.attrs["_p"]
        exp = qmath.softmax_table(p["sx"], self.params(node, p))
        depth = X.shape[-1]
        with kb.loop(X.numel // depth, "r") as r:
            base = r * depth
            mx = kb.local(Cast(X.flat(base), I32), "mx", I32)
            with kb.loop(depth, "i") as i:
                kb.assign(mx, bmax(mx, Cast(X.flat(base + i), I32)))
            lower_tflm_softmax_row(kb, X, Y, base, depth, mx, exp, -32768, 32767)


# ------------------------------------------------------------------------------ tables
def lut_table(fn: Callable[[np.ndarray], np.ndarray], dt: np.dtype, sx: float, zx: int,
              sy: float, zy: int) -> np.ndarray:
    """table[q - qmin] = saturate(rint(fn(dequant(q)) / sy) + zy), in float32 (onnx mode)."""
    info = np.iinfo(dt)
    q = np.arange(info.min, info.max + 1, dtype=np.int64)
    x = (q - zx).astype(np.float32) * np.float32(sx)
    with np.errstate(all="ignore"):
        y = np.asarray(fn(x), np.float32)
    return np.clip(np.rint(y / np.float32(sy)) + zy, info.min, info.max).astype(dt)


def tflm_table(op: str, mode: str, dt: np.dtype, sx: float, zx: int, sy: float, zy: int
               ) -> np.ndarray | None:
    """TFLM's int8 LOGISTIC (output 1/256, -128) / TANH (output 1/128, 0) as a table, when the
    mode is tflite and the output parameters are TFLite's, and its int8 ABS / ELU / RSQRT /
    HARD_SWISH for any parameters (in tflite mode); else None (use the float formula)."""
    if mode != "tflite" or np.dtype(dt) != np.int8:
        return None
    if op in ("Sigmoid", "QLinearSigmoid") and zy == -128 and np.float32(sy) == np.float32(
            1 / 256):
        return qmath.int8_activation_table("sigmoid", sx, zx)
    if op == "Tanh" and zy == 0 and np.float32(sy) == np.float32(1 / 128):
        return qmath.int8_activation_table("tanh", sx, zx)
    if op == "Abs":
        return _tflm_abs(sx, zx, sy, zy)
    if op == "Elu":
        return _tflm_elu(sx, zx, sy, zy)
    if op == "Rsqrt":
        return _tflm_rsqrt(sx, zx, sy, zy)
    if op == "HardSwish":
        return _tflm_hard_swish(sx, zx, sy, zy)
    return None


def _wrap16(v: int) -> int:
    return ((v + (1 << 15)) % (1 << 16)) - (1 << 15)


def _sat16(v: int) -> int:
    return min(max(v, -(1 << 15)), (1 << 15) - 1)


def _srdhm16(a: int, b: int, rounding: bool = True) -> int:
    """The int16 doubling high multiply: gemmlowp's SaturatingRoundingDoublingHighMul (nudge
    of 2^14 toward the sign of the product), or, ``rounding=False``, TFLite's
    SaturatingDoublingHighMul (truncating toward zero); both saturate -32768 * -32768."""
    if a == b == -(1 << 15):
        return (1 << 15) - 1
    ab = a * b
    if rounding:
        ab += (1 << 14) if ab >= 0 else 1 - (1 << 14)
    q = abs(ab) >> 15  # C++ division truncates toward zero
    return _wrap16(q if ab >= 0 else -q)


def _int16_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier, then DownScaleInt32ToInt16Multiplier: (int16 significand, shift)."""
    m, shift = qmath.quantize_multiplier(real)
    m16 = (1 << 15) - 1 if m >= qmath.INT32_MAX - (1 << 15) else (m + (1 << 15)) >> 16
    return m16, shift


def _tflm_hard_swish(sx: float, zx: int, sy: float, zy: int) -> np.ndarray | None:
    """TFLM's int8 HARD_SWISH (hard_swish_common.cc's multipliers, the reference kernel's
    int16 fixed point) evaluated for every code. The scales are combined in float32 as TFLM's
    Prepare does; it refuses an output multiplier above 1 (output scale below input scale /
    128): None then, and the table is the float function's."""
    hires = np.float32(1.0 / 128.0) * np.float32(sx)
    out_m, out_e = _int16_multiplier(float(np.float32(hires / np.float32(sy))))
    if out_e > 0:
        return None
    rel_m, rel_e = _int16_multiplier(float(np.float32(hires / np.float32(3.0 / 32768.0))))
    out = []
    for q in range(-128, 128):
        hi = _wrap16((q - zx) * (1 << 7))
        pre = _srdhm16(hi, out_m)                       # on the output scale, unshifted
        r = hi
        if rel_e > 0:
            r = _sat16(r * (1 << (rel_e - 1)))
        r = _srdhm16(r, rel_m)
        if rel_e > 0:
            r = _sat16(r * 2)
        elif rel_e < 0:
            r = qmath.rdbpot(r, -rel_e)
        r = (r + (1 << 15)) >> 1                        # [-1, 1] -> [0, 1]
        v = qmath.rdbpot(_srdhm16(r, pre, rounding=False), -out_e)
        out.append(min(max(_wrap16(v + zy), -128), 127))
    return np.array(out, np.int8)


def _inv_sqrt_multiplier(value: int) -> tuple[int, int]:
    """TFLite GetInvSqrtQuantizedMultiplierExp(value, reverse_shift=-1) (common.h): a
    Newton-Raphson 1/sqrt in gemmlowp fixed point. Returns (multiplier, left shift)."""
    if value <= 1:
        return qmath.INT32_MAX, 0
    shift = 11
    while value >= 1 << 29:
        value //= 4
        shift += 1
    clz = 32 - value.bit_length()
    pairs = (clz - 1) // 2 - 1
    shift -= pairs
    value <<= 2 * pairs
    f_in = value >> 1                                   # F3
    half_in = qmath.rdbpot(f_in, 1)                     # SaturatingRoundingMultiplyByPOT<-1>
    half_three = (1 << 28) + (1 << 27)                  # 1.5 in F3
    x = 1 << 28                                         # F3::One()
    for _ in range(5):
        x3 = qmath.sat_shl(qmath.srdhm(qmath.srdhm(x, x), x), 6)       # F9 -> F3
        d = qmath._wrap32(qmath.srdhm(half_three, x) - qmath.srdhm(half_in, x3))  # F6
        x = qmath.sat_shl(d, 3)                                         # F6 -> F3
    x = qmath.srdhm(x, 1518500250)                      # * sqrt(2) / 2 (F0)
    if shift < 0:
        x = qmath._wrap32(x << -shift)
        shift = 0
    return x, -shift


def _tflm_rsqrt(sx: float, zx: int, sy: float, zy: int) -> np.ndarray:
    """TFLM's int8 RSQRT (elementwise.cc RsqrtEvalQuantized) for every code. TFLM refuses a
    negative input at run time; the table gives those codes the output's maximum, as it does
    the zero input."""
    mult, shift = qmath.quantize_multiplier(
        1.0 / float(np.float32(np.sqrt(np.float32(sx))) * np.float32(sy)))
    out = []
    for q in range(-128, 128):
        value = q - zx
        if value <= 0:
            out.append(127)
            continue
        m, s = _inv_sqrt_multiplier(value)
        data = qmath.mbqm(1, m, s + 20)
        out.append(min(max(qmath.mbqm(data, mult, shift - 20) + zy, -128), 127))
    return np.array(out, np.int8)


def _tflm_abs(sx: float, zx: int, sy: float, zy: int) -> np.ndarray:
    """TFLM's int8 ABS (elementwise.cc AbsEvalQuantized): |q - zx|, rescaled by
    QuantizeMultiplier(float(sx / sy)) when the scales differ, + zy."""
    q = np.arange(-128, 128, dtype=np.int64)
    value = np.abs(q - zx)
    if np.float32(sx) == np.float32(sy):
        out = value + zy
    else:
        mult, shift = qmath.quantize_multiplier(float(np.float32(sx) / np.float32(sy)))
        out = np.array([qmath.mbqm(int(v), mult, shift) for v in value], np.int64) + zy
    return np.clip(out, -128, 127).astype(np.int8)


def _tflm_elu(sx: float, zx: int, sy: float, zy: int) -> np.ndarray:
    """TFLM's int8 ELU table (elu.cc PopulateLookupTable): float32 exp(x) - 1 for x < 0,
    times 1 / sy in float32, rounded half away from zero, + zy."""
    q = np.arange(-128, 128, dtype=np.int64)
    x = np.float32(sx) * (q - zx).astype(np.float32)
    e = np.exp(x.astype(np.float64)).astype(np.float32) - np.float32(1)
    t = np.where(x < 0, e, x).astype(np.float32)
    r = t * (np.float32(1) / np.float32(sy))
    rounded = np.sign(r) * np.floor(np.abs(r.astype(np.float64)) + 0.5)
    return np.clip(rounded + zy, -128, 127).astype(np.int8)


@register
class QLut(QuantOp):
    """int8/uint8 -> int8/uint8 through a 256-entry table computed at compile time (``_table``,
    set by the QDQ pass or by the QLinearSigmoid/QLinearLeakyRelu imports; ``table``, a tensor
    attribute, where an importer writes the node: the TFLite frontend's uint8 <-> int8
    shift at a uint8 model's inputs and outputs)."""

    name = "QLut"
    since = 1
    domain = "aotc"
    dtypes = QT

    def reference(self, X: np.ndarray, *, table: np.ndarray | None = None) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def table(node: Node) -> np.ndarray:
        return np.asarray(node.attrs["_table"] if "_table" in node.attrs else node.attrs["table"])

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x = ins[0]
        t = self.table(node)
        if x is None or x.type.dtype.name not in QT or t.shape != (256,) \
                or t.dtype.name not in QT:
            raise AotcError("expects int8/uint8 X and a 256-entry int8/uint8 table", node.name,
                            node.op)

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        x = args[0]
        assert x is not None
        table = self.table(node)
        return table[x.astype(np.int64) - int(np.iinfo(x.dtype).min)]

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        return [TensorType(x.type.shape, dtypes.from_numpy(self.table(node).dtype))]

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        table = self.table(node)
        tab = kb.const("lut", table, dtypes.from_numpy(table.dtype))
        off = -int(np.iinfo(X.dtype.np).min)
        with kb.loop(X.numel, "i") as i:
            kb.store_output([], tab[[Cast(X.flat(i), I32) + Const(off, I32)]], flat=i)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


class _LutImport(QuantOp):
    """A com.microsoft unary QLinear op lowered as a table (X, X_scale, X_zp, Y_scale, Y_zp)."""

    domain = MS
    dtypes = QT
    fn: Callable[..., np.ndarray]

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x = ins[0]
        if x is None or x.type.dtype.name not in QT:
            raise AotcError("X must be int8 or uint8", node.name, node.op)
        for i in (1, 2, 3, 4):
            if i < len(ins):
                _scalar(node, ins[i], "scales and zero points")

    def table(self, node: Node, ins: Sequence[Any], dt: np.dtype) -> np.ndarray:
        p = unary_params(ins)
        t = tflm_table(node.op, mode_of(node), dt, p["sx"], p["zx"], p["sy"], p["zy"])
        if t is not None:
            return t
        alpha = float(node.attrs.get("alpha", 0.01))
        return lut_table(lambda x: self.fn(x, alpha), dt, p["sx"], p["zx"], p["sy"], p["zy"])

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        return [TensorType(x.type.shape, x.type.dtype)]

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        x = args[0]
        assert x is not None
        t = self.table(node, args, x.dtype)
        return t[x.astype(np.int64) - int(np.iinfo(x.dtype).min)]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        x = ins[0]
        assert x is not None
        return node.with_(inputs=node.inputs[:1],
                          attrs={**node.attrs, "_table": self.table(node, ins, x.type.dtype.np)})

    def lower(self, node: Node, kb: Any) -> None:
        QLut().lower(node, kb)


@register
class QLinearSigmoid(_LutImport):
    name = "QLinearSigmoid"
    since = 1

    @staticmethod
    def fn(x: np.ndarray, alpha: float) -> np.ndarray:
        return _sigmoid(x)

    def reference(self, X: np.ndarray, X_scale: np.ndarray, X_zero_point: np.ndarray,
                  Y_scale: np.ndarray, Y_zero_point: np.ndarray | None = None) -> np.ndarray:
        raise NotImplementedError


@register
class QLinearLeakyRelu(_LutImport):
    name = "QLinearLeakyRelu"
    since = 1

    @staticmethod
    def fn(x: np.ndarray, alpha: float) -> np.ndarray:
        return np.where(x >= 0, x, x * np.float32(alpha))

    def reference(self, X: np.ndarray, X_scale: np.ndarray, X_zero_point: np.ndarray,
                  Y_scale: np.ndarray, Y_zero_point: np.ndarray | None = None, *,
                  alpha: float = 0.01) -> np.ndarray:
        raise NotImplementedError
