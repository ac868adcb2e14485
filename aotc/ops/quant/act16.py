"""TFLM's int16 (16x8) LOGISTIC, TANH and SOFTMAX: QLogistic16, QTanh16 and QSoftmax16,
aotc-domain ops the QDQ pass makes from an int16 DequantizeLinear -> Sigmoid / Tanh / Softmax
-> QuantizeLinear. QSoftmax16 is reference_ops::SoftmaxInt16 with its two 513-entry tables
(LUTPopulate<int16_t>, computed at compile time in float32 as TFLM's Prepare does). Both are TFLM's
reference_integer_ops::Logistic / Tanh for int16: the input rescaled by a 15-bit multiplier
(TFLM's Prepare: logistic_common.cc, tanh.cc), then the 256-entry ``sigmoid_table_uint16``
(tensorflow/lite/kernels/internal/common.h) read at the top bits of |x| and interpolated with
the low ones. The kernel is that arithmetic in int32 (every intermediate stays below 2^26), the
table a 512-byte constant; no 65536-entry table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Bin, Cast, Const, Expr, bmax, bmin, call, cmp, select
from aotc.ops import register
from aotc.ops.quant import arith as qmath
from aotc.ops.quant.conv_matmul import I32, QuantOp
from aotc.ops.quant.qlinear import _scalar, unary_params

I16 = dtypes.BY_NAME["int16"]
I64 = dtypes.BY_NAME["int64"]
U16 = dtypes.BY_NAME["uint16"]

# sigmoid(i / 24) in 0.16 fixed point, i = 0..255 (TFLite's sigmoid_table_uint16).
SIGMOID_TABLE = np.array([
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498,
    40149, 40794, 41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255,
    46817, 47369, 47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409, 51865,
    52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174,
    56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544, 58800, 59048, 59288,
    59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279, 61441,
    61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886,
    62990, 63090, 63186, 63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835,
    63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308, 64357, 64405, 64450,
    64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845,
    64873, 64900, 64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097,
    65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234, 65246, 65258,
    65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360,
    65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425,
    65429, 65433, 65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465,
    65468, 65471, 65474, 65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491,
    65493, 65495, 65497, 65498, 65500, 65501, 65503, 65504, 65505, 65507, 65508,
    65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516, 65517, 65517, 65518,
    65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524, 65525,
    65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529,
    65529, 65529, 65530, 65530, 65530, 65530, 65531, 65531, 65531, 65531, 65531,
    65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533, 65533, 65533,
    65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534,
    65534, 65534, 65535], np.uint16)


def checked_log2(x: float) -> tuple[bool, int]:
    """TFLite's CheckedLog2 (quantization_util.cc), in float32: (x is within 1e-3 of a power
    of two in log2, the rounded log2)."""
    f = np.float32
    lg = f(np.log(f(x))) * (f(1.0) / f(np.log(f(2.0))))
    r = f(np.sign(lg) * np.floor(abs(float(lg)) + 0.5))
    return bool(abs(f(lg - r)) < f(1e-3)), int(r)


def input_rescale(scale: float, tanh: bool) -> tuple[int, int]:
    """TFLM's Prepare for the int16 LOGISTIC / TANH, with its Eval's power-of-two case
    folded in: (multiplier, right shift) taking x to the table's 1/(3 * 4096) units."""
    pot, log2 = checked_log2(scale)
    shift = 12 + log2  # (15 - kInputIntegerBits) + log2(scale)
    pot = pot and shift in ((0, 1) if tanh else (0,))
    if pot:  # Eval: input_multiplier = 3 << input_left_shift, input_left_shift = 0
        return 3 << shift, 0
    m, shift = float(np.float32(scale)) * 4096.0 * 3.0, 0
    while m <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        m *= 2.0
    return int(m), shift


class _Act16(QuantOp):
    """(X, X_scale, X_zero_point, Y_scale, Y_zero_point) -> int16 Y: TFLM's int16 kernel."""

    domain = "aotc"
    since = 1
    dtypes = ("int16",)
    tanh = False

    def reference(self, X: np.ndarray, X_scale: np.ndarray, X_zero_point: np.ndarray,
                  Y_scale: np.ndarray, Y_zero_point: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # compute(): the parameters come from the node

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x, yz = ins[0], ins[4] if len(ins) > 4 else None
        if x is None or yz is None or x.type.dtype.name != "int16" \
                or yz.type.dtype.name != "int16":
            raise AotcError("X and Y (Y_zero_point's type) must be int16", node.name, node.op)
        for i in (1, 2, 3, 4):
            _scalar(node, ins[i], "scales and zero points")
        self.params(node, unary_params(ins))

    def params(self, node: Node, p: dict[str, Any]) -> tuple[int, int]:
        """TFLM's Prepare checks (one-line errors), then the input multiplier and shift."""
        what = "TANH" if self.tanh else "LOGISTIC"
        if p["zx"] or p["zy"]:
            raise AotcError(f"int16 {what} needs zero points 0 (TFLM's kernel)", node.name,
                            node.op)
        pot, log2 = checked_log2(p["sy"])
        if not pot or log2 != -15:
            raise AotcError(f"int16 {what} needs the output scale 2^-15 (TFLM's kernel), got "
                            f"{p['sy']:g}", node.name, node.op)
        m, s = input_rescale(p["sx"], self.tanh)
        if m > 32767:
            raise AotcError(f"int16 {what}: input scale {p['sx']:g} is too large for TFLM's "
                            f"15-bit input multiplier", node.name, node.op)
        return m, s

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None
        return [TensorType(ins[0].type.shape, I16)]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        m, s = self.params(node, unary_params(ins))
        return node.with_(inputs=node.inputs[:1], attrs={**node.attrs, "_m": m, "_s": s})

    def evaluate(self, x: np.ndarray, m: int, s: int) -> np.ndarray:
        """TFLM's reference_integer_ops::Logistic / Tanh (int16), elementwise in int64."""
        t = SIGMOID_TABLE.astype(np.int64)
        v = (x.astype(np.int64) * m + ((1 << (s - 1)) if s > 0 else 0)) >> s
        a = np.abs(v)
        frac = 8 if self.tanh else 9
        uh = np.minimum(a >> frac, 254)
        r = (t[uh] << frac) + (a & ((1 << frac) - 1)) * (t[uh + 1] - t[uh])
        r = np.where(a >= 255 << frac, (0xFFFF << 8) if self.tanh else (0x7FFF << 10), r)
        if self.tanh:
            y = np.where(v >= 0, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1) >> 8
        else:
            y = np.where(v >= 0, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1) >> 10
        return y.astype(np.int16)

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        x = args[0]
        assert x is not None
        return self.evaluate(x, *self.params(node, unary_params(args)))

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        m, s = int(node.attrs["_m"]), int(node.attrs["_s"])
        frac = 8 if self.tanh else 9
        table = kb.const("sigmoid_u16", SIGMOID_TABLE, U16)
        with kb.loop(X.numel, "i") as i:
            v = Cast(X.flat(i), I32) * Const(m, I32)
            if s:
                v = Bin("shr", v + Const(1 << (s - 1), I32), Const(s, I32), I32)
            v = kb.local(v, "v", I32)
            a = kb.local(call("abs", v, dtype=I32), "a", I32)
            uh = kb.local(bmin(Bin("shr", a, Const(frac, I32), I32), Const(254, I32)), "uh",
                          I32)
            ua = Cast(table[[uh]], I32)
            ub = Cast(table[[uh + Const(1, I32)]], I32)
            lerp = Bin("shl", ua, Const(frac, I32), I32) \
                + Bin("band", a, Const((1 << frac) - 1, I32), I32) * (ub - ua)
            sat = Const((0xFFFF << 8) if self.tanh else (0x7FFF << 10), I32)
            r = kb.local(select(cmp("ge", a, Const(255 << frac, I32)), sat, lerp, I32), "r",
                         I32)
            pos = cmp("ge", v, Const(0, I32))
            if self.tanh:
                y = select(pos, r - Const((1 << 23) - (1 << 7), I32),
                           Const((1 << 23) + (1 << 7) - 1, I32) - r, I32)
                y = Bin("shr", y, Const(8, I32), I32)
            else:
                y = select(pos, r + Const(1 << 9, I32), Const((1 << 25) + (1 << 9) - 1, I32) - r,
                           I32)
                y = Bin("shr", y, Const(10, I32), I32)
            kb.store_output([], Cast(y, I16), flat=i)


@register
class QLogistic16(_Act16):
    """TFLM's int16 LOGISTIC (reference_integer_ops::Logistic): zero points 0, output scale
    2^-15; the input multiplier from x_scale * 3 * 4096 (a power-of-two scale: 3)."""

    name = "QLogistic16"


@register
class QTanh16(_Act16):
    """TFLM's int16 TANH (reference_integer_ops::Tanh), tanh(x) = 2 sigmoid(2x) - 1 on the
    same table: zero points 0, output scale 2^-15."""

    name = "QTanh16"
    tanh = True


# ------------------------------------------------------------------------------ softmax
def lut_populate_int16(fn: Any, in_scale: float, in_zp: int, out_scale: float, out_zp: int
                       ) -> np.ndarray:
    """TFLite's LUTPopulate<int16_t> (common.h, LUTPopulateInt16<float>): ``fn`` sampled at
    512 steps over the input range plus the end, each sample corrected by half its midpoint
    interpolation error, every operation in float32 as TFLM computes it. 513 entries."""
    f = np.float32

    def rnd(v: np.float32) -> np.float32:  # TfLiteRound: half away from zero
        return f(np.sign(v) * np.floor(abs(float(v)) + 0.5))

    in_min, in_max = f(in_scale) * f(-32768 - in_zp), f(in_scale) * f(32767 - in_zp)
    out_min, out_max = f(out_scale) * f(-32768 - out_zp), f(out_scale) * f(32767 - out_zp)
    step = (in_max - in_min) / f(512)
    half = step / f(2)
    inv = f(65536) / (out_max - out_min)
    lut = np.zeros(513, np.int16)
    for i in range(512):
        at = in_min + f(i) * step
        val, mid, nxt = fn(at), fn(at + half), fn(in_min + f(i + 1) * step)
        sample = rnd(val * inv)
        interp = rnd((nxt * inv + rnd(val * inv)) / f(2))
        bias = rnd((interp - rnd(mid * inv)) / f(2))
        lut[i] = int(min(max(sample - bias, f(-32768)), f(32767)))
    lut[512] = int(min(max(rnd(fn(in_max) * inv), f(-32768)), f(32767)))
    return lut


def _expf(v: np.float32) -> np.float32:
    """C's expf (correctly rounded: the double exp rounded to float)."""
    return np.float32(np.exp(np.float64(v)))


def _one_over_one_plus_x(v: np.float32) -> np.float32:
    return np.float32(1.0) / (np.float32(1.0) + np.float32(v))


def softmax16_luts() -> tuple[np.ndarray, np.ndarray]:
    """TFLM's int16 softmax tables (softmax_common.cc InitializeLutForInt16): exp over
    [-10, 0] and 1 / (1 + x) over [0, 1], both into [-1, 1) at 2^-15."""
    rng = 65535
    exp = lut_populate_int16(_expf, float(np.float32(10.0) / np.float32(rng)), 32767,
                             float(np.float32(2.0) / np.float32(rng)), 0)
    inv = lut_populate_int16(_one_over_one_plus_x, float(np.float32(1.0) / np.float32(rng)),
                             -32768, float(np.float32(2.0) / np.float32(rng)), 0)
    return exp, inv


def lut_lookup_np(v: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """TFLite's LUTLookup(int16_t, const int16_t*): the 9 top bits index, the 7 low ones
    interpolate."""
    v = v.astype(np.int64)
    idx = 256 + (v >> 7)
    base = lut[idx].astype(np.int64)
    slope = (lut[idx + 1].astype(np.int64) - base).astype(np.int16).astype(np.int64)
    return (base + ((slope * (v & 0x7F) + 64) >> 7)).astype(np.int16)


@register
class QSoftmax16(QuantOp):
    """TFLM's int16 SOFTMAX over the last axis (reference_ops::SoftmaxInt16): x - max rescaled
    to [-65535, 0] by one multiplier (x_scale * beta / (10 / 65535)), exp through the 513-entry
    table, the row's sum inverted through the 1 / (1 + x) table, and each exp times it. Zero
    points 0 and the output scale 2^-15, as TFLM's Prepare requires."""

    name = "QSoftmax16"
    domain = "aotc"
    since = 1
    dtypes = ("int16",)

    def reference(self, X: np.ndarray, X_scale: np.ndarray, X_zero_point: np.ndarray,
                  Y_scale: np.ndarray, Y_zero_point: np.ndarray, *,
                  beta: float = 1.0) -> np.ndarray:
        raise NotImplementedError  # compute(): the parameters come from the node

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        _Act16.check(self, node, ins)  # type: ignore[arg-type]

    def params(self, node: Node, p: dict[str, Any]) -> tuple[int, int]:
        if p["zx"] or p["zy"]:
            raise AotcError("int16 SOFTMAX needs zero points 0 (TFLM's kernel)", node.name,
                            node.op)
        if abs(np.float32(p["sy"]) - np.float32(1 / 32768)) > np.float32(0.001 / 32768):
            raise AotcError(f"int16 SOFTMAX needs the output scale 2^-15 (TFLM's kernel), "
                            f"got {p['sy']:g}", node.name, node.op)
        beta = float(np.float32(node.attrs.get("beta", 1.0)))
        return qmath.quantize_multiplier(float(np.float32(p["sx"])) * beta / (10.0 / 65535.0))

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None
        return [TensorType(ins[0].type.shape, I16)]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        m, s = self.params(node, unary_params(ins))
        return node.with_(inputs=node.inputs[:1], attrs={**node.attrs, "_m": m, "_s": s})

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        x = args[0]
        assert x is not None
        m, s = self.params(node, unary_params(args))
        exp_lut, inv_lut = softmax16_luts()
        rows = x.reshape(-1, x.shape[-1]).astype(np.int64)
        out = np.zeros(rows.shape, np.int16)
        for r, row in enumerate(rows):
            diff = row - row.max()
            scaled = np.array([qmath.mbqm(int(d), m, s) for d in diff], np.int64)
            e = lut_lookup_np(np.clip(scaled + 32767, -32768, 32767), exp_lut).astype(np.int64)
            total = int(e.sum())
            h = qmath.clz32(total)
            shifted = ((total << (h - 1)) + (1 << 13)) >> 14
            sym = np.clip(shifted - ((1 << 15) + (1 << 16)), -32768, 32767)
            recip = int(lut_lookup_np(np.array([sym]), inv_lut)[0])
            rs = 31 - h
            out[r] = np.clip((e * recip + (1 << (rs - 1))) >> rs, 0, 32767)
        return out.reshape(x.shape)

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        m, s = int(node.attrs["_m"]), int(node.attrs["_s"])
        exp_lut, inv_lut = softmax16_luts()
        texp = kb.const("exp_lut", exp_lut, I16)
        tinv = kb.const("recip_lut", inv_lut, I16)
        depth = X.shape[-1]
        rows = X.numel // depth

        def c32(v: int) -> Expr:
            return Const(v, I32)

        def lookup(v: Expr, lut: Any) -> Expr:  # LUTLookup: v in [-32768, 32767]
            idx = kb.local(Bin("shr", v, c32(7), I32) + c32(256), "idx", I32)
            base = kb.local(Cast(lut[[idx]], I32), "base", I32)
            slope = Cast(Cast(Cast(lut[[idx + c32(1)]], I32) - base, I16), I32)
            delta = Bin("shr", slope * Bin("band", v, c32(0x7F), I32) + c32(64), c32(7), I32)
            return Cast(Cast(base + delta, I16), I32)

        with kb.loop(rows, "r") as r:
            base_i = r * depth
            mx = kb.local(Cast(X.flat(base_i), I32), "mx", I32)
            with kb.loop(depth, "c") as c:
                kb.assign(mx, bmax(mx, Cast(X.flat(base_i + c), I32)))

            def exp_at(c: Expr) -> Expr:
                diff = Cast(X.flat(base_i + c), I32) - mx
                scaled = call("q_mbqm", diff, c32(m), c32(s), dtype=I32) + c32(32767)
                sym = kb.local(bmin(bmax(scaled, c32(-32768)), c32(32767)), "sym", I32)
                return kb.local(lookup(sym, texp), "e", I32)

            total = kb.local(c32(0), "sum", I32)
            with kb.loop(depth, "c") as c:
                kb.assign(total, total + exp_at(c))
            h = kb.local(call("q_clz", total, dtype=I32), "headroom", I32)
            shifted = Bin("shr", Bin("shl", Cast(total, I64), Cast(h - c32(1), I64), I64)
                          + Const(1 << 13, I64), Const(14, I64), I64)
            sym_sum = Cast(shifted, I32) - c32((1 << 15) + (1 << 16))
            ssum = kb.local(bmin(bmax(sym_sum, c32(-32768)), c32(32767)), "ssum", I32)
            recip = kb.local(lookup(ssum, tinv), "recip", I32)
            rs = kb.local(c32(31) - h, "rs", I32)
            rnd = kb.local(Bin("shl", c32(1), rs - c32(1), I32), "rnd", I32)
            with kb.loop(depth, "c") as c:
                y = Bin("shr", exp_at(c) * recip + rnd, rs, I32)
                kb.store_output([], Cast(bmin(bmax(y, c32(0)), c32(32767)), I16),
                                flat=base_i + c)
