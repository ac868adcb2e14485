"""Integer kernels QLinearConv and ConvInteger, and what all quantised kernels share:
requantisation (Requant) and integer conv/matmul arithmetic (IntArith); the integer matmuls
(QLinearMatMul, MatMulInteger) are in matmul.py. QuantizeLinear/DequantizeLinear are in
quantize_linear.py, the com.microsoft QLinear* element ops in qlinear.py, softmax and table ops
in tables.py. The QDQ pass (aotc/passes/qdq.py) rewrites DequantizeLinear -> op ->
QuantizeLinear into these kernels, so QDQ and QOperator models share one set of integer
kernels.

Integer kernels accumulate in int32 and requantise in the compile's mode (``_requant`` attr,
set by the qdq pass from ``CompileOptions.requant``): ``tflite`` (fixed-point multiplier and
shift, integer-only, bit-exact with TFLM's reference kernels) or ``onnx`` (float scale, round half
to even). Scales, zero points, multipliers and shifts are compile-time constants: they become
immediates or const tables in flash, never RAM.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.dtypes import DType
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Bin, Call, Cast, Const, Expr, bmax, bmin, call
from aotc.ops import OpDef, register
from aotc.ops.nn.conv import Conv, ConvArith
from aotc.ops.quant import arith as qmath

QT = ("int8", "uint8")
I32 = dtypes.int32
I64 = dtypes.int64
F32 = dtypes.float32
# ONNX TensorProto codes of the output_dtype attribute.
ONNX_DTYPES = {2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32"}


def qrange(dt: DType) -> tuple[int, int]:
    info = np.iinfo(dt.np)
    return int(info.min), int(info.max)


def const_of(node: Node, v: Value | None, what: str) -> np.ndarray | None:
    if v is None:
        return None
    if not v.is_const:
        raise AotcError(f"{what} must be a compile-time constant", node.name, node.op)
    return np.asarray(v.const)


def mode_of(node: Node) -> str:
    return str(node.attrs.get("_requant", "tflite"))


class QuantOp(OpDef):
    """Base of the integer ops: the reference gets the requant mode from ``_requant``."""

    kind = "kernel"

    def run_reference(self, node: Node, args: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        attrs = {k: v for k, v in node.attrs.items() if not k.startswith("_")}
        out = self.compute(list(args), attrs, node)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        return [np.asarray(o) for o in outs]

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        return self.reference(*[a for a in args], **attrs)


# ------------------------------------------------------------------------------ requantisation
class Requant:
    """int32 accumulator -> clamp(requant(acc) + zero point) as the output integer type.
    ``real`` holds the multipliers (one, or one per channel) in float64."""

    def __init__(self, real: np.ndarray, zero_point: int, lo: int, hi: int, mode: str,
                 out: DType, wide: bool = False) -> None:
        self.real = np.atleast_1d(np.asarray(real, np.float64))
        self.wide = wide  # an int64 accumulator: TFLM's 16x8 requantisation (arith.mbqm64)
        self.zp, self.lo, self.hi, self.mode, self.out = int(zero_point), lo, hi, mode, out
        self._tables: dict[int, tuple[Any, ...]] = {}
        # The largest |accumulator| of the kernel, where a DSP lowering proved one
        # (dsp.py, depthwise_int.py): below 2^30 it may be doubled (aotc_q_requant_h).
        self.acc_bound: int | None = None
        # Each channel's accumulator range (lowest, highest), where the lowering proved it.
        self.acc_ranges: tuple[np.ndarray, np.ndarray] | None = None
        # Kernels (id of their builder) that read aotc_q_requant_h's three per-channel
        # constants from one table, (multiplier, added constant, right shift) a channel: one
        # pointer instead of three where a tile requantises its channels (schedules/conv/dsp.py).
        self.packed_kbs: set[int] = set()
        # Kernels whose accumulators are doubled (weights and bias times 2 at compile time,
        # where h_applies): aotc_q_requant_hd, no shift per output.
        self.doubled_kbs: set[int] = set()

    def _per(self, kb: Any, name: str, values: np.ndarray, dt: DType, ch: Expr | None) -> Expr:
        """One value per channel: a constant when all channels share it, else a table in
        flash (int8 tables are widened to int32 where they are read)."""
        if (values == values.ravel()[0]).all():
            return Const(values.ravel()[0].item(), I32 if dt == dtypes.int8 else dt)
        key = (id(kb), name)
        if key not in self._tables:
            self._tables[key] = (kb.const(name, values, dt),)
        assert ch is not None
        v = self._tables[key][0][[ch]]
        return Cast(v, I32) if dt == dtypes.int8 else v

    def tflite_params(self) -> tuple[np.ndarray, np.ndarray]:
        """(significand, shift) per channel (int64, shift > 0 a left shift) of the tflite
        mode; a zero multiplier, which gives 0 whatever the shift, gets a right shift."""
        qm = [qmath.quantize_multiplier(float(r)) for r in self.real]
        mult = np.array([m for m, _ in qm], np.int64)
        shift = np.array([s for _, s in qm], np.int64)
        return mult, np.where(mult == 0, np.minimum(shift, -1), shift)

    def _h_params(self, mult: np.ndarray, shift: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(multiplier, right shift, added constant) per channel for aotc_q_requant_h, or None
        where it does not apply. Where the lowering proved each channel's accumulator range
        (acc_ranges), a channel whose output (requantised, plus the zero point, clamped) is
        the same number K at both ends of its range (MultiplyByQuantizedMultiplier is
        monotonic for m >= 0 and a right shift, and so is the clamp) is K for every
        accumulator: it gets m = 0, right 1 and the constant 1 + (K << 1), which give K for
        any sum ((1 + 2K - [x < 0]) >> 1), left as it is by the clamp. Such channels
        (weights near 0 against a large bias, right shifts of 23-31 in VWW's pointwise
        convs; or saturated) would otherwise keep the whole conv off it: their accumulators
        reach 2^30 and their constants 2^(right - 1) + (zp << right) pass 2^30.
        The other channels need right >= 1, |acc| < 2^30 and |constant| < 2^30."""
        right = -shift
        ranges = self.acc_ranges
        if ranges is None:
            if not (shift < 0).all() or not self._doubled(right):
                return None
            return mult, right, (1 << (right - 1)) + (self.zp << right)
        lo, hi = (np.broadcast_to(np.asarray(r, np.int64), mult.shape) for r in ranges)
        m_out, r_out, c_out = mult.copy(), right.copy(), np.zeros_like(mult)
        for c, (m, sh, a, b) in enumerate(zip(mult.tolist(), shift.tolist(), lo.tolist(),
                                              hi.tolist())):
            k = self._clamped(a, m, sh) if sh < 0 else None
            if k is not None and k == self._clamped(b, m, sh):
                m_out[c], r_out[c], c_out[c] = 0, 1, 1 + (k << 1)
            elif sh >= 0 or max(abs(a), abs(b)) >= 1 << 30:
                return None
            else:
                c_out[c] = (1 << (-sh - 1)) + (self.zp << -sh)
        if int(np.abs(c_out).max(initial=0)) >= 1 << 30:
            return None
        return m_out, r_out, c_out

    def _clamped(self, acc: int, m: int, shift: int) -> int:
        """The output of one accumulator: requantised, plus the zero point, clamped."""
        return min(max(qmath.mbqm(acc, m, shift) + self.zp, self.lo), self.hi)

    def _doubled(self, right: np.ndarray) -> bool:
        """Whether aotc_q_requant_h applies: a proven |acc| < 2^30 and |c| < 2^30."""
        add = (1 << (right - 1)) + (self.zp << right)
        return (self.acc_bound is not None and self.acc_bound < 1 << 30
                and int(np.abs(add).max()) < 1 << 30)

    def h_applies(self, kb: Any) -> bool:
        """Whether __call__ takes aotc_q_requant_h (|acc| < 2^30 proven: the accumulator may
        be doubled)."""
        if self.mode != "tflite" or self.wide or "dsp" not in kb.features:
            return False
        mult, shift = self.tflite_params()
        return not (mult == qmath.INT32_MIN).any() and self._h_params(mult, shift) is not None

    def __call__(self, kb: Any, acc: Expr, ch: Expr | None) -> Expr:
        if self.mode == "tflite":
            mult, shift = self.tflite_params()
            if self.wide:
                # (acc * reduced + 2^(total - 1)) >> total, as TFLM's int64 overload.
                red, total = (np.array(v, np.int64) for v in zip(*(
                    qmath.mbqm64_params(int(m), int(sh)) for m, sh in zip(mult, shift))))
                rm = self._per(kb, "qmul", red.astype(np.int32), I32, ch)
                rnd = self._per(kb, "qrnd", np.left_shift(1, total - 1), I64, ch)
                tsh = self._per(kb, "qrsh", total.astype(np.int8), dtypes.int8, ch)
                v = Cast(Bin("shr", acc * Cast(rm, I64) + rnd, tsh, I64), I32)
                mul = None
            else:
                hp = None
                if "dsp" in kb.features and not (mult == qmath.INT32_MIN).any():
                    hp = self._h_params(mult, shift)
                packed = hp is not None and ch is not None and id(kb) in self.packed_kbs
                mul = Const(0, I32) if packed else self._per(
                    kb, "qmul", (mult if hp is None else hp[0]).astype(np.int32), I32, ch)
            if mul is None:
                pass
            elif (mult == qmath.INT32_MIN).any():  # SRDHM's saturating case: keep it
                # Shifts fit int8: a quarter of the flash of int32 (TFLM keeps int32 in RAM).
                sh = self._per(kb, "qshift", shift.astype(np.int8), dtypes.int8, ch)
                v = call("q_mbqm", acc, mul, sh, dtype=I32)
            elif hp is not None:
                # |acc| < 2^30 on a DSP core: SMMLAR of the doubled accumulator, the output
                # zero point in the added constant (runtime_c/aotc_runtime.h); channels of a
                # constant result by m = 0 (_h_params).
                _, right, add = hp
                if packed:
                    key = (id(kb), "qch")
                    if key not in self._tables:
                        table = np.stack([np.broadcast_to(t, mult.shape).astype(np.int32)
                                          for t in (hp[0], add, right)], axis=1)
                        self._tables[key] = (kb.const("qch", table.reshape(-1), I32),)
                    qch = self._tables[key][0]
                    mul, c, rsh = (qch[[ch * 3 + k]] for k in range(3))
                else:
                    c = self._per(kb, "qadd", add.astype(np.int32), I32, ch)
                    rsh = self._per(kb, "qright", right.astype(np.int8), dtypes.int8, ch)
                v = call("q_requant_hd" if id(kb) in self.doubled_kbs else "q_requant_h",
                         acc, mul, c, rsh, dtype=I32)
            elif (shift < 0).all():
                # Right shifts only (the usual case): both roundings in one 64-bit sum and
                # one shift, from per-channel constants (runtime_c/aotc_runtime.h).
                right = -shift
                rnd = self._per(kb, "qrnd", (1 << 30) + (1 << (30 + right)), I64, ch)
                rsh = self._per(kb, "qrsh", (right - 1).astype(np.int8), dtypes.int8, ch)
                v = call("q_requant_r", acc, mul, rnd, rsh, dtype=I32)
            else:
                # The shift split into its left and right parts at compile time (TFLM's
                # Prepare): no branch on its sign per output; a part every channel shares is
                # an immediate.
                left = self._per(kb, "qlsh", np.maximum(shift, 0).astype(np.int8),
                                 dtypes.int8, ch)
                right = self._per(kb, "qrsh", np.maximum(-shift, 0).astype(np.int8),
                                  dtypes.int8, ch)
                v = call("q_requant", acc, mul, left, right, dtype=I32)
            if self.zp and not (isinstance(v, Call) and v.fn in ("q_requant_h", "q_requant_hd")):
                v = v + Const(self.zp, I32)
            full = qrange(self.out) == (self.lo, self.hi)
            if full and "dsp" in kb.features and self.out.itemsize == 1:
                # SSAT/USAT: one instruction where gcc -Os would branch twice.
                v = call("ssat" if self.out.is_signed else "usat", v, Const(8, I32), dtype=I32)
            else:
                v = bmin(bmax(v, Const(self.lo, I32)), Const(self.hi, I32))
            return Cast(v, self.out)
        scale = self._per(kb, "qscale", self.real.astype(np.float32), F32, ch)
        f = call("rint", Cast(acc, F32) * scale)
        if self.zp:
            f = f + Const(float(self.zp), F32)
        f = bmin(bmax(f, Const(float(self.lo), F32)), Const(float(self.hi), F32))
        return Cast(f, self.out)


class IntArith(ConvArith):
    """Integer convolution / matmul arithmetic: (x - x_zp) * (w - w_zp) summed in int32 from
    the int32 bias, then ``requant`` (None: the int32 accumulator is the output)."""

    rolled_finish = True

    def __init__(self, x_zp: int, w_zp: np.ndarray, requant: Requant | None,
                 acc: DType = I32, x16: bool = False) -> None:
        super().__init__(acc)  # int64: TFLM's 16x8 kernels with an int64 bias
        self.x16 = x16  # int16 inputs (16x8): no SIMD schedule reads them
        # 16x8 with an int32 sum of products (proven not to overflow: late_bias_ok) and the
        # int64 bias added after it, before the int64 requantisation: the same value as
        # TFLM's int64 sum, with 32-bit multiply-accumulates in the inner loop.
        self.late_bias = False
        self.x_zp = int(x_zp)
        self.x_zp_input = int(x_zp)  # kept when x_zp is folded: the value of a padding tap
        self.w_zp = np.atleast_1d(np.asarray(w_zp, np.int64))
        self.requant = requant
        self._wtab: dict[int, Any] = {}
        self.folded_bias: Any = None
        # int8 weights with a per-tensor zero point (a uint8 TFLite model's, made int8): kept
        # one byte in flash, the zero point subtracted as they are read (packed_weights).
        self.zp_at_run_time = False

    def x(self, e: Expr) -> Expr:
        v = Cast(e, I32)
        return v - Const(self.x_zp, I32) if self.x_zp else v

    def w(self, kb: Any, e: Expr, m: Expr) -> Expr:
        v = Cast(e, I32)
        if not self.w_zp.any():
            return v
        if self.w_zp.size == 1:
            return v - Const(int(self.w_zp[0]), I32)
        if id(kb) not in self._wtab:
            self._wtab[id(kb)] = kb.const("wzp", self.w_zp.astype(np.int32), I32)
        return v - self._wtab[id(kb)][[m]]

    def wide(self, e: Expr) -> Expr:
        """A packed weight as int32 (minus the zero point when packed_weights kept it)."""
        if self.zp_at_run_time:
            return Cast(e, I32) - Const(int(self.w_zp[0]), I32)
        return Cast(e, I32)

    def packed_weights(self, w: np.ndarray) -> np.ndarray:
        """The weights the tiled schedule packs: as they are with zero point 0; int8 with one
        zero point stays int8 (subtracted in wide()); otherwise w - zero point as int16."""
        self.zp_at_run_time = False
        if not self.w_zp.any():
            return w
        if w.dtype == np.int8 and self.w_zp.size == 1:
            self.zp_at_run_time = True
            return w
        return minus_zp(w, self.w_zp, 0).astype(np.int16)

    def wdtype(self, dt: DType, w: np.ndarray) -> DType:
        return dtypes.from_numpy(w.dtype)

    def dsp_ok(self, w: np.ndarray | None) -> bool:
        # SXTB16 unpacks signed bytes: int8 weights, and w - w_zp stays int8 only for zp 0.
        # 16x8: int16 inputs are already the lanes (zero point 0); the dual MAC sums in int32,
        # so only where the sum is int32 anyway (an int32 bias) or proven to fit (late_bias).
        if self.x16 and (self.x_zp or (self.acc != I32) or not (
                self.late_bias or self.requant is None or not self.requant.wide)):
            return False
        return w is not None and w.dtype == np.int8 and not self.w_zp.any()

    def init(self, B: Any, m: Expr) -> Expr:
        if self.folded_bias is not None:
            return self.folded_bias[[m]]
        if self.late_bias:
            return Const(0, self.acc)
        return Cast(B[[m]], self.acc) if B is not None else Const(0, self.acc)

    def fold_bias(self, kb: Any, w: np.ndarray, bias: np.ndarray | None, axis: int,
                  x_dtype: DType, fold_zp: bool) -> None:
        """The int32 bias the accumulator starts from, fixed at compile time from constant
        weights and bias:

        - with ``fold_zp`` (every tap reads the input: no padding), sum (x - zx)(w - zw) =
          sum x (w - zw) - zx sum (w - zw), and the second term is a per-channel constant
          folded into the bias, so the inner loop reads x as it is (CMSIS-NN's trick);
        - the bias is clamped to [INT32_MIN + bound, INT32_MAX - bound], bound being the
          largest |sum| the products can reach, so no partial sum overflows int32. A bias
          outside that range would wrap around in the accumulator (onnxruntime's kernels give
          the saturated output, as exact arithmetic does); clamped, every output of such a
          channel still saturates the same way unless the requantisation multiplier is below
          about 1e-7 (docs/operators.md, Defined results)."""
        red = tuple(k for k in range(w.ndim) if k != axis)
        wz = minus_zp(w, self.w_zp, axis)
        b = np.zeros(wz.sum(axis=red).shape, np.int64) if bias is None else \
            np.broadcast_to(bias.astype(np.int64).reshape(-1), wz.sum(axis=red).shape)
        x_zp, folded = self.x_zp, False
        if fold_zp and x_zp:
            cand = b - x_zp * wz.sum(axis=red)
            if np.abs(cand).max(initial=0) < 2 ** 31:
                b, x_zp, folded = cand, 0, True
        lo, hi = qrange(x_dtype)
        xmax = max(abs(lo - x_zp), abs(hi - x_zp))
        bound = np.abs(wz).sum(axis=red) * xmax
        top = 2 ** 31 - 1 - bound
        if (top < 0).any():
            if folded:  # the clamp cannot help; keep the plain (unfolded) form
                return
            top = np.maximum(top, 0)
        clamped = np.clip(b, -top, top)
        if not folded and (bias is None or (clamped == b).all()):
            return
        self.folded_bias = kb.const("bias", clamped.astype(np.int32), I32)
        self.x_zp = x_zp

    def finish(self, kb: Any, acc: Expr, m: Expr, B: Any = None) -> Expr:
        # The bias already started the accumulator (init), unless it comes late (int64).
        if self.late_bias:
            acc = Cast(acc, I64) + Cast(B[[m]], I64) if B is not None else Cast(acc, I64)
        return self.requant(kb, acc, m) if self.requant is not None else acc


def late_bias_ok(w: np.ndarray | None, axis: int) -> bool:
    """Whether every 16x8 sum of products fits int32 (|x| <= 2^15 against these constant int8
    weights, per output channel along ``axis``): then it may be summed in int32."""
    if w is None:
        return False
    red = tuple(k for k in range(w.ndim) if k != axis)
    return bool((np.abs(w.astype(np.int64)).sum(axis=red) * 32768 < 2 ** 31).all())


def minus_zp(w: np.ndarray, zp: np.ndarray | None, axis: int) -> np.ndarray:
    """w - zero point (int64): the zero point is per-tensor, or per-channel along ``axis``."""
    z = np.asarray(0 if zp is None else zp, np.int64).reshape(-1)
    if z.size == 1:
        return w.astype(np.int64) - z[0]
    return w.astype(np.int64) - z.reshape([-1 if k == axis else 1 for k in range(w.ndim)])


def int_conv(x: np.ndarray, xz: np.ndarray | None, w: np.ndarray, wz: np.ndarray | None,
             attrs: dict[str, Any]) -> np.ndarray:
    """The int64 accumulators of sum (x - x_zp)(w - w_zp) over each window (exact: float64
    holds the sums of int8 products)."""
    acc = Conv().reference(minus_zp(x, xz, 1).astype(np.float64),
                           minus_zp(w, wz, 0).astype(np.float64), **attrs)
    return np.rint(acc).astype(np.int64)


def _per_channel(a: np.ndarray | None, n: int, node: Node, what: str) -> np.ndarray:
    """A scale/zero point that is per-tensor (size 1) or per-channel (size n)."""
    if a is None:
        return np.zeros(1)
    a = np.asarray(a).ravel()
    if a.size not in (1, n):
        raise AotcError(f"{what} has {a.size} values; expected 1 or {n} (per channel)",
                        node.name, node.op)
    return a


def _check_int_inputs(node: Node, ins: Sequence[Value | None], data: Sequence[int],
                      consts: Sequence[int], x16: bool = False, w16: bool = False) -> None:
    """``x16``: the first data input may be int16 with int8 weights (TFLite's 16x8);
    ``w16``: or with int16 weights (TFLM's int16 BATCH_MATMUL)."""
    for i in data:
        v = ins[i] if i < len(ins) else None
        if v is None:
            continue
        if x16 and i == data[0] and v.type.dtype.name == "int16":
            w = ins[data[1]]
            ok = ("int8", "int16") if w16 else ("int8",)
            if w is not None and w.type.dtype.name not in ok:
                raise AotcError(f"int16 input with {w.type.dtype.name} weights; 16x8 takes "
                                f"int8 weights" + (" (or int16: 16x16)" if w16 else ""),
                                node.name, node.op)
            continue
        if w16 and i == data[1] and v.type.dtype.name == "int16":
            x = ins[data[0]]
            if x is None or x.type.dtype.name != "int16":
                raise AotcError("int16 weights need an int16 input (16x16)", node.name,
                                node.op)
            continue
        if v.type.dtype.name not in QT:
            raise AotcError(f"input {i} has dtype {v.type.dtype.name}; supported: int8, uint8"
                            + (", int16 (16x8)" if x16 and i == data[0] else ""),
                            node.name, node.op)
    for i in consts:
        if i < len(ins) and ins[i] is not None and not ins[i].is_const:  # type: ignore[union-attr]
            raise AotcError(f"input {i} (a scale or zero point) must be a compile-time "
                            f"constant", node.name, node.op)


def wide_acc(x: Value | np.ndarray, bias: Value | np.ndarray | None) -> bool:
    """TFLM's 16x8 conv and fully connected accumulate in int64 (and requantise with
    arith.mbqm64) unless the bias is int32; int8 kernels accumulate in int32."""
    def dt(v: Value | np.ndarray) -> str:
        return v.type.dtype.name if isinstance(v, Value) else np.asarray(v).dtype.name

    if bias is not None and dt(bias) == "int64":
        return True
    return dt(x) == "int16" and (bias is None or dt(bias) != "int32")


def act_range(node: Node, out: DType) -> tuple[int, int]:
    lo, hi = qrange(out)
    return max(lo, int(node.attrs.get("_act_lo", lo))), min(hi, int(node.attrs.get("_act_hi", hi)))


# ------------------------------------------------------------------------------ conv / matmul
@register
class QLinearConv(QuantOp):
    """Integer convolution: int8/uint8 activations and weights (per-tensor or per-channel),
    int32 bias and accumulator, requantised to the output scale."""

    name = "QLinearConv"
    since = 10
    kind = "anchor"  # takes an integer epilogue: a residual QLinearAdd (ResNet's skip)
    reads_permuted = True  # Conv's lowering
    dtypes = QT
    const_inputs = (1, 2, 4, 5, 6, 7)
    onnx_tests = ("test_qlinearconv*",)
    defined = ("a constant int32 bias is clamped to [INT32_MIN + b, INT32_MAX - b], b the "
               "largest sum the products can reach, so the int32 accumulator never wraps: "
               "the output saturates as in exact arithmetic (onnxruntime) unless the "
               "requantisation multiplier is below about 1e-7")

    def reference(self, x: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray,
                  w: np.ndarray, w_scale: np.ndarray, w_zero_point: np.ndarray,
                  y_scale: np.ndarray, y_zero_point: np.ndarray, B: np.ndarray | None = None, *,
                  auto_pad: str = "NOTSET", dilations: Sequence[int] = (), group: int = 1,
                  kernel_shape: Sequence[int] = (), pads: Sequence[int] = (),
                  strides: Sequence[int] = ()) -> np.ndarray:
        raise NotImplementedError  # compute() below: needs the node's requant mode

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        x, xs, xz, w, ws, wz, ys, yz = args[:8]
        b = args[8] if len(args) > 8 else None
        assert x is not None and w is not None and yz is not None
        m = w.shape[0]
        acc = int_conv(x, xz, w, wz, attrs)
        if b is not None:
            acc = acc + b.astype(np.int64).reshape((1, -1) + (1,) * (acc.ndim - 2))
        real = _multipliers(xs, ws, ys, m, node, bool(node.attrs.get("_scale_f32")))
        lo, hi = act_range(node, dtypes.from_numpy(yz.dtype))
        return qmath.requantize_np(acc, real,
                                   int(np.asarray(yz).reshape(-1)[0]), lo, hi, mode_of(node),
                                   channel_axis=1, wide=wide_acc(x, b)).astype(yz.dtype)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        t = Conv().infer(node, [ins[0], ins[3]])[0]
        yz = ins[7]
        return [TensorType(t.shape, yz.type.dtype if yz is not None else dtypes.uint8)]

    def macs(self, node: Node, g: Any) -> int:
        w = g.type(node.inputs[3]).shape
        return g.type(node.outputs[0]).numel * int(np.prod(w[1:], dtype=np.int64))

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        _check_int_inputs(node, ins, (0, 3), (1, 2, 4, 5, 6, 7), x16=True)
        _check_conv(node, ins[0], ins[3])
        from aotc.ops.nn.conv import check_bias

        check_bias(node, ins[8] if len(ins) > 8 else None, ins[3].type.shape[0])  # type: ignore[union-attr]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        x, w = ins[0], ins[3]
        assert x is not None and w is not None
        xz = const_of(node, ins[2], "x_zero_point")
        wz = const_of(node, ins[5], "w_zero_point")
        yz = const_of(node, ins[7], "y_zero_point")
        m = w.type.shape[0]
        out = yz.dtype if yz is not None else np.dtype(np.uint8)
        real = _multipliers(const_of(node, ins[1], "x_scale"), const_of(node, ins[4], "w_scale"),
                            const_of(node, ins[6], "y_scale"), m, node,
                            bool(node.attrs.get("_scale_f32")))
        keep = [node.inputs[0], node.inputs[3]] + ([node.inputs[8]] if len(node.inputs) > 8
                                                    and node.inputs[8] else [])
        return node.with_(inputs=tuple(keep), attrs={
            **node.attrs, "_xz": int(xz.reshape(-1)[0]) if xz is not None else 0,
            "_wz": _per_channel(wz, m, node, "w_zero_point").astype(np.int64),
            "_real": real, "_yz": int(yz.reshape(-1)[0]) if yz is not None else 0,
            "_out": np.dtype(out).name,
            "_wide": wide_acc(x, ins[8] if len(ins) > 8 else None)})

    def lower(self, node: Node, kb: Any) -> None:
        if node.attrs.get("_int4"):  # TFLite int4 weights: kept packed (int4.py)
            from aotc.ops.quant.int4 import lower_packed

            attrs = {k: v for k, v in node.attrs.items() if k != "_int4"}
            lower_packed(node, kb, lambda: self.lower(node.with_(attrs=attrs), kb))
            return
        out = dtypes.BY_NAME[node.attrs["_out"]]
        lo, hi = act_range(node, out)
        wide = bool(node.attrs.get("_wide"))
        rq = Requant(node.attrs["_real"], node.attrs["_yz"], lo, hi, mode_of(node), out, wide)
        x16 = kb.inputs[0].dtype.itemsize > 1
        late = wide and late_bias_ok(kb.input_const(1), 0) and not node.attrs["_xz"]
        arith = IntArith(node.attrs["_xz"], node.attrs["_wz"], rq,
                         I64 if wide and not late else I32, x16)
        arith.late_bias = late
        if not x16:  # 16x8: no zero point to fold, no clamp (TFLM)
            _fold_bias(node, kb, arith)
        Conv().lower(node, kb, arith)


def _fold_bias(node: Node, kb: Any, arith: IntArith) -> None:
    from aotc.ops.nn.conv import conv_pads
    from aotc.schedules.conv.mve import mve_conv_ok

    X, w = kb.inputs[0], kb.input_const(1)
    if w is None or (len(kb.inputs) > 2 and kb.input_const(2) is None):
        return
    pb, pe = conv_pads(node, X.shape[2:], w.shape[2:])
    # With padding the fold needs padding taps that read x_zp: mve.py's column has them.
    arith.fold_bias(kb, w, kb.input_const(2) if len(kb.inputs) > 2 else None, 0, X.dtype,
                    fold_zp=not any(pb) and not any(pe) or mve_conv_ok(node, kb, arith))


def _check_conv(node: Node, x: Value | None, w: Value | None) -> None:
    from aotc.ops.nn.conv import _check_rank

    assert x is not None and w is not None
    _check_rank(node, x, w)
    g = node.attrs["group"]
    if x.type.shape[1] % g or w.type.shape[0] % g or w.type.shape[1] * g != x.type.shape[1]:
        raise AotcError(f"channels do not match group={g}: X {x.type.shape}, W "
                        f"{w.type.shape}", node.name, node.op)


def _multipliers(xs: Any, ws: Any, ys: Any, n: int, node: Node, f32_product: bool = False
                 ) -> np.ndarray:
    """Per-channel real multipliers x_scale * w_scale / y_scale, in double from the float32
    scales (TFLite's PopulateConvolutionQuantizationParams); with ``f32_product`` (a uint8
    TFLite model's CONV_2D / DEPTHWISE_CONV_2D: LiteRT's uint8 convolutions multiply the two
    scales in float32, its uint8 FULLY_CONNECTED in double) the product is float32, then
    divided in double."""
    wsv = _per_channel(np.asarray(ws, np.float32), n, node, "w_scale")
    xsv = float(np.asarray(xs, np.float32).reshape(-1)[0])
    ysv = float(np.asarray(ys, np.float32).reshape(-1)[0]) if ys is not None else 1.0
    if f32_product:
        return np.array([float(np.float32(xsv) * np.float32(s)) / ysv for s in wsv], np.float64)
    return np.array([xsv * float(s) / ysv for s in wsv], np.float64)


@register
class ConvInteger(QuantOp):
    """Integer convolution with an int32 output (no requantisation)."""

    name = "ConvInteger"
    since = 10
    dtypes = QT
    const_inputs = (2, 3)
    onnx_tests = ("test_convinteger*",)

    def reference(self, x: np.ndarray, w: np.ndarray, x_zero_point: np.ndarray | None = None,
                  w_zero_point: np.ndarray | None = None, *, auto_pad: str = "NOTSET",
                  dilations: Sequence[int] = (), group: int = 1,
                  kernel_shape: Sequence[int] = (), pads: Sequence[int] = (),
                  strides: Sequence[int] = ()) -> np.ndarray:
        return int_conv(x, x_zero_point, w, w_zero_point, dict(
            auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape,
            pads=pads, strides=strides)).astype(np.int32)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        _check_int_inputs(node, ins, (0, 1), (2, 3))
        _check_conv(node, ins[0], ins[1])

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        t = Conv().infer(node, [ins[0], ins[1]])[0]
        return [TensorType(t.shape, I32)]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        w = ins[1]
        assert w is not None
        xz = const_of(node, ins[2] if len(ins) > 2 else None, "x_zero_point")
        wz = const_of(node, ins[3] if len(ins) > 3 else None, "w_zero_point")
        return node.with_(inputs=node.inputs[:2], attrs={
            **node.attrs, "_xz": int(xz.reshape(-1)[0]) if xz is not None else 0,
            "_wz": _per_channel(wz, w.type.shape[0], node, "w_zero_point").astype(np.int64)})

    def lower(self, node: Node, kb: Any) -> None:
        Conv().lower(node, kb, IntArith(node.attrs["_xz"], node.attrs["_wz"], None))
