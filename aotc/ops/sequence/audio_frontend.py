"""TFLite Micro's Signal library, the spectral half of an audio front end: Window, FftAutoScale,
Energy, FilterBank, FilterBankSquareRoot, FilterBankSpectralSubtraction, PCAN, FilterBankLog,
as aotc-domain ops with TFLM's integer arithmetic, operation for operation (the unsigned
wrap-arounds, the int16 truncations, the square root's bit loop, the log's table), so the
results are bit-exact with TFLM's kernels (tests/frontend/test_tflite_signal.py).

The streaming half (Delay, Framer, Stacker, OverlapAdd: circular buffers between calls) is in
audio_stream.py; the TFLite converter in aotc/frontend/tflite/signal.py. Parameters that TFLM
reads from the custom operator's flexbuffer are attributes; FilterBankSpectralSubtraction's
noise estimate, which TFLM keeps between calls, is an input and an output the importer makes a
slot of the caller's state buffer (written in place: ``writes_over``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Bin, Cast, Const, Expr, Var, as_expr, bmin, cmp, land, select
from aotc.ops import OpDef, register

I16, I32, I64 = (dtypes.BY_NAME[n] for n in ("int16", "int32", "int64"))
U32, U64 = dtypes.BY_NAME["uint32"], dtypes.BY_NAME["uint64"]
M32, M64 = (1 << 32) - 1, (1 << 64) - 1

# TFLM's log2 fraction table (signal/src/log.cc): 128 segments of the correction
# log2(1 + f) - f in 1/65536, the last entry repeated for the interpolation's right end.
LOG_LUT = np.array([
    0, 224, 442, 654, 861, 1063, 1259, 1450, 1636, 1817, 1992, 2163, 2329, 2490, 2646, 2797,
    2944, 3087, 3224, 3358, 3487, 3611, 3732, 3848, 3960, 4068, 4172, 4272, 4368, 4460, 4549,
    4633, 4714, 4791, 4864, 4934, 5001, 5063, 5123, 5178, 5231, 5280, 5326, 5368, 5408, 5444,
    5477, 5507, 5533, 5557, 5578, 5595, 5610, 5622, 5631, 5637, 5640, 5641, 5638, 5633, 5626,
    5615, 5602, 5586, 5568, 5547, 5524, 5498, 5470, 5439, 5406, 5370, 5332, 5291, 5249, 5203,
    5156, 5106, 5054, 5000, 4944, 4885, 4825, 4762, 4697, 4630, 4561, 4490, 4416, 4341, 4264,
    4184, 4103, 4020, 3935, 3848, 3759, 3668, 3575, 3481, 3384, 3286, 3186, 3084, 2981, 2875,
    2768, 2659, 2549, 2437, 2323, 2207, 2090, 1971, 1851, 1729, 1605, 1480, 1353, 1224, 1094,
    963, 830, 695, 559, 421, 282, 142, 0, 0], np.int32)
LOG_COEFF = 45426  # ln(2) in 1/65536
PCAN_SNR_BITS, PCAN_OUTPUT_BITS = 12, 6


def i16(v: int) -> int:
    """C's conversion to int16_t (two's complement wrap, as GCC does)."""
    return (v + 0x8000) % 0x10000 - 0x8000


def i32(v: int) -> int:
    return (v + 0x80000000) % 0x100000000 - 0x80000000


def msb(v: int) -> int:
    """TFLM's MostSignificantBit32/64 as built with GCC: the bit count, and the word's width
    for 0 (``32 - __builtin_clz`` is guarded to return 32)."""
    return v.bit_length()


# ------------------------------------------------------------------------- loop IR helpers
def msb_expr(kb: Any, v: Expr, bits: int) -> Var:
    """The bit count of unsigned ``v`` (0 for 0) as an int32 local: a binary search of
    shifts, no loop and no compiler builtin."""
    x = kb.local(v, "mx", v.dtype)
    n = kb.local(0, "nbits", I32)
    s = bits // 2
    while s >= 1:
        top = kb.local(shr(x, Const(s, v.dtype)), "top", v.dtype)
        hi = cmp("ne", top, 0)
        kb.assign(n, select(hi, n + s, n, I32))
        kb.assign(x, select(hi, top, x, v.dtype))
        s //= 2
    kb.assign(n, n + Cast(cmp("ne", x, 0), I32))
    return n  # type: ignore[no-any-return]


def c(v: int, dt: dtypes.DType) -> Const:
    return Const(int(v), dt)


def shl(a: Expr, b: Expr | int) -> Expr:
    return Bin("shl", a, as_expr(b, a.dtype), a.dtype)


def shr(a: Expr, b: Expr | int) -> Expr:
    return Bin("shr", a, as_expr(b, a.dtype), a.dtype)


def band(a: Expr, b: Expr | int) -> Expr:
    return Bin("band", a, as_expr(b, a.dtype), a.dtype)


def bor(a: Expr, b: Expr | int) -> Expr:
    return Bin("bor", a, as_expr(b, a.dtype), a.dtype)


class _Signal(OpDef):
    domain = "aotc"

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        raise NotImplementedError


# -------------------------------------------------------------------------------- Window
@register
class SignalWindow(_Signal):
    """y = saturate_int16((x * w) >> shift) along the last axis (w: its length)."""

    name = "SignalWindow"
    dtypes = ("int16",)
    const_inputs = (1,)

    def reference(self, x: np.ndarray, w: np.ndarray, *, shift: int = 0) -> np.ndarray:
        raw = (x.astype(np.int64) * w.astype(np.int64)) >> shift
        return np.clip(raw, -32768, 32767).astype(np.int16)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x, w = ins[0], ins[1]
        assert x is not None and w is not None
        if len(w.type.shape) != 1 or not x.type.shape or x.type.shape[-1] != w.type.shape[0]:
            raise AotcError(f"the window has shape {list(w.type.shape)}; it must be the input's "
                            f"last axis ({list(x.type.shape)})", node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        return [ins[0].type]  # type: ignore[union-attr]

    def lower(self, node: Node, kb: Any) -> None:
        x, w = kb.inputs[0], kb.inputs[1]
        n = w.shape[0]
        shift = int(node.attrs.get("shift", 0))
        with kb.loops((x.numel // n, n), ("o", "i")) as (o, i):
            raw = shr(Cast(x.flat(o * n + i), I32) * Cast(w[i], I32), c(shift, I32))
            v = select(cmp("lt", raw, -32768), -32768,
                       select(cmp("gt", raw, 32767), 32767, raw, I32), I32)
            kb.store_output([o, i], Cast(v, I16), flat=o * n + i)


# -------------------------------------------------------------------------- FftAutoScale
@register
class SignalFftAutoScale(_Signal):
    """Shifts the int16 frame left by the most bits that keep its largest magnitude in
    range; output 1 is that shift (int32). TFLM's max-abs keeps an int16 running maximum, so
    -32768 wraps (its magnitude does not fit): the shift is then 0, as there."""

    name = "SignalFftAutoScale"
    dtypes = ("int16",)

    def reference(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = 0
        for v in x.reshape(-1).tolist():
            if v > m:
                m = v
            elif -v > m:
                m = i16(-v)
        nb = msb(m & M32) if m else 32
        bits = max(16 - nb - 1, 0)
        y = np.array([i16(v * (1 << bits)) for v in x.reshape(-1).tolist()], np.int16)
        return y.reshape(x.shape), np.array(bits, np.int32)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        return [x.type, TensorType((), I32)]

    def lower(self, node: Node, kb: Any) -> None:
        x = kb.inputs[0]
        n = x.numel
        m = kb.local(0, "mx16", I32)
        with kb.loop(n, "i") as i:
            v = kb.local(Cast(x.flat(i), I32), "v", I32)
            neg = Cast(Cast(-v, I16), I32)  # an int16 running maximum: -(-32768) wraps
            kb.assign(m, select(cmp("gt", v, m), v, select(cmp("gt", -v, m), neg, m, I32), I32))
        nb = msb_expr(kb, Cast(m, U32), 32)
        nb = kb.local(select(cmp("eq", m, 0), 32, nb, I32), "nb", I32)
        bits = kb.local(16 - nb - 1, "bits", I32)
        kb.assign(bits, select(cmp("lt", bits, 0), 0, bits, I32))
        with kb.loop(n, "i") as i:
            kb.store_output([i], Cast(Cast(x.flat(i), I32) * shl(Const(1, I32), bits), I16),
                            flat=i)
        kb.store_output([], bits, out=1, flat=Const(0))


# -------------------------------------------------------------------------------- Energy
@register
class SignalEnergy(_Signal):
    """|X[k]|^2 of an int16 complex spectrum (interleaved real, imag) for start_index <= k <
    end_index, as uint32; TFLM leaves the other bins unwritten, aotc writes 0 there."""

    name = "SignalEnergy"
    dtypes = ("int16",)

    def reference(self, x: np.ndarray, *, start_index: int = 0, end_index: int = 0
                  ) -> np.ndarray:
        z = x.reshape(-1, 2).astype(np.int64)
        e = (z[:, 0] * z[:, 0] + z[:, 1] * z[:, 1]) & M32
        out = np.zeros(z.shape[0], np.uint32)
        out[start_index:end_index] = e[start_index:end_index]
        return out

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x = ins[0]
        assert x is not None
        s, e = int(node.attrs.get("start_index", 0)), int(node.attrs.get("end_index", 0))
        if len(x.type.shape) != 1 or x.type.shape[0] % 2 or not 0 <= s <= e <= \
                x.type.shape[0] // 2:
            raise AotcError(f"needs a 1-D complex int16 spectrum and 0 <= start_index <= "
                            f"end_index <= bins (got {list(x.type.shape)}, {s}, {e})",
                            node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        return [TensorType((ins[0].type.shape[0] // 2,), U32)]  # type: ignore[union-attr]

    def lower(self, node: Node, kb: Any) -> None:
        x = kb.inputs[0]
        s, e = int(node.attrs.get("start_index", 0)), int(node.attrs.get("end_index", 0))
        with kb.loop(x.shape[0] // 2, "k") as k:
            re, im = Cast(x.flat(k * 2), I32), Cast(x.flat(k * 2 + 1), I32)
            v = Cast(re * re, U32) + Cast(im * im, U32)
            inside = land(cmp("ge", k, s), cmp("lt", k, e))
            kb.store_output([k], select(inside, v, 0, U32), flat=k)


# ---------------------------------------------------------------------------- FilterBank
@register
class SignalFilterBank(_Signal):
    """Triangular (mel) channels: channel c sums the unweighted tail of config channel c and
    the weighted head of config channel c + 1 (TFLM's running pair of uint64 accumulators),
    each term int16 weight * uint32 bin in uint64 (a negative weight wraps modulo 2^64)."""

    name = "SignalFilterBank"
    dtypes = ("uint32", "int16")
    const_inputs = (1, 2, 3, 4, 5)

    def reference(self, x: np.ndarray, weights: np.ndarray, unweights: np.ndarray,
                  freq_starts: np.ndarray, weight_starts: np.ndarray, widths: np.ndarray, *,
                  num_channels: int = 0) -> np.ndarray:
        xs = [int(v) for v in x.reshape(-1)]
        out = []
        for ch in range(num_channels):
            acc = 0
            for cfg, tab in ((ch, unweights), (ch + 1, weights)):
                f0, w0 = int(freq_starts[cfg]), int(weight_starts[cfg])
                for j in range(int(widths[cfg])):
                    acc += (int(tab[w0 + j]) & M64) * xs[f0 + j]
            out.append(acc & M64)
        return np.array(out, np.uint64)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        n = int(node.attrs.get("num_channels", 0))
        x = ins[0]
        assert x is not None
        if x.type.dtype.name != "uint32":
            raise AotcError("the input must be uint32 (Energy's output)", node.name, node.op)
        tabs = [np.asarray(v.const).reshape(-1) for v in ins[1:6]]  # type: ignore[union-attr]
        w, _, fs, ws, wd = tabs
        if n < 1 or any(t.size < n + 1 for t in tabs[2:]) or any(
                int(fs[k]) < 0 or int(ws[k]) < 0 or int(wd[k]) < 0
                or int(fs[k]) + int(wd[k]) > x.type.numel or int(ws[k]) + int(wd[k]) > w.size
                for k in range(n + 1)):
            raise AotcError("the channel tables do not fit the input and weights",
                            node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        return [TensorType((int(node.attrs.get("num_channels", 0)),), U64)]

    def lower(self, node: Node, kb: Any) -> None:
        x, weights, unweights, fs, ws, wd = kb.inputs[:6]
        n = int(node.attrs.get("num_channels", 0))
        with kb.loop(n, "ch") as ch:
            acc = kb.local(0, "acc", U64)
            for cfg, tab in ((ch, unweights), (ch + 1, weights)):
                f0 = kb.local(Cast(fs.flat(cfg), I32), "f0", I32)
                w0 = kb.local(Cast(ws.flat(cfg), I32), "w0", I32)
                with kb.loop(Cast(wd.flat(cfg), I32), "j") as j:
                    kb.assign(acc, acc + Cast(tab.flat(w0 + j), U64) * Cast(x.flat(f0 + j), U64))
            kb.store_output([ch], acc, flat=ch)


# ------------------------------------------------------------------ FilterBankSquareRoot
def isqrt_tflm(num: int) -> int:
    """TFLM's Sqrt64 (Sqrt32 below 2^32): a bit-by-bit integer square root, rounded up when
    the remainder exceeds the root (unless that would overflow the half width)."""
    if num == 0:
        return 0
    width, top = (32, 0xFFFF) if num >> 32 == 0 else (64, 0xFFFFFFFF)
    res = 0
    mbn = (width - msb(num)) | 1
    bit = 1 << (width - 1 - mbn)
    for _ in range((width - 1 - mbn) // 2 + 1):
        if num >= res + bit:
            num -= res + bit
            res = (res >> 1) + bit
        else:
            res >>= 1
        bit >>= 2
    if num > res and res != top:
        res += 1
    return res


def _sqrt_loop(kb: Any, v: Expr, width: int) -> Expr:
    """TFLM's Sqrt32 (``width`` 32, on uint32) or Sqrt64's own loop (64, on uint64) of a
    non-zero ``v``, as a uint32 expression: the bit loop for TFLM's iteration count."""
    dt = v.dtype
    num = kb.local(v, "num", dt)
    nb = msb_expr(kb, num, width)
    mbn = kb.local(bor(Const(width, I32) - nb, 1), "mbn", I32)
    top = width - 1 - mbn
    bit = kb.local(shl(Const(1, dt), Cast(select(cmp("lt", top, 0), 0, top, I32), dt)), "bit",
                   dt)
    iters = kb.local(top // 2 + 1, "iters", I32)
    res = kb.local(0, "res", dt)
    # The loop runs from 32 - iters: TFLM's iteration count (at most 32).
    with kb.loop(32, "k", start=32 - bmin(iters, 32)):
        ge = kb.local(cmp("ge", num, res + bit), "ge", dtypes.BY_NAME["bool"])
        kb.assign(num, select(ge, num - (res + bit), num, dt))
        kb.assign(res, select(ge, shr(res, c(1, dt)) + bit, shr(res, c(1, dt)), dt))
        kb.assign(bit, shr(bit, c(2, dt)))
    limit = (1 << (width // 2)) - 1
    up = Cast(Cast(cmp("gt", num, res), I32) * Cast(cmp("ne", res, limit), I32), dt)
    return Cast(res + up, U32)


def isqrt_expr(kb: Any, v: Expr) -> Var:
    """isqrt_tflm of a uint64 expression as a uint32 local: Sqrt32 on uint32 below 2^32 (as
    TFLM's Sqrt64 does; half the work on a 32-bit core), else the 64-bit loop."""
    x = kb.local(v, "x", U64)
    small = kb.local(cmp("eq", shr(x, c(32, U64)), 0), "small", dtypes.BY_NAME["bool"])
    out = kb.local(0, "root", U32)
    with kb.if_(land(small, cmp("ne", x, 0))):
        kb.assign(out, _sqrt_loop(kb, Cast(x, U32), 32))
    with kb.if_(cmp("eq", small, False)):
        kb.assign(out, _sqrt_loop(kb, x, 64))
    return out  # type: ignore[no-any-return]


@register
class SignalFilterBankSquareRoot(_Signal):
    """uint32 sqrt(x) >> scale_bits per channel; scale_bits is an int32 scalar input (in a
    front end FftAutoScale's shift, known only at run time)."""

    name = "SignalFilterBankSquareRoot"
    dtypes = ("uint64", "int32")

    def reference(self, x: np.ndarray, scale_bits: np.ndarray) -> np.ndarray:
        s = int(np.asarray(scale_bits).reshape(-1)[0])
        return np.array([(isqrt_tflm(int(v)) >> s) & M32 for v in x.reshape(-1)],
                        np.uint32).reshape(x.shape)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        return [TensorType(ins[0].type.shape, U32)]  # type: ignore[union-attr]

    def lower(self, node: Node, kb: Any) -> None:
        x, sb = kb.inputs[0], kb.inputs[1]
        with kb.loop(x.numel, "ch") as ch:
            root = isqrt_expr(kb, x.flat(ch))
            kb.store_output([ch], shr(root, Cast(sb.flat(0), U32)), flat=ch)


# ------------------------------------------------------------------------- FilterBankLog
def log32_tflm(x: int, out_scale: int) -> int:
    integer = msb(x) - 1
    frac = i32(x - (1 << integer))
    frac = i32(frac << (16 - integer)) if integer < 16 else frac >> (integer - 16)
    seg = (frac & M32) >> 9
    c0, c1 = int(LOG_LUT[seg]), int(LOG_LUT[seg + 1])
    rel = i32((c1 - c0) * (frac - 512 * seg)) >> 16
    log2 = ((integer << 16) + frac + c0 + rel) & M32
    loge = ((LOG_COEFF * log2 + 32768) >> 16) & M32
    return (((out_scale & M32) * loge & M32) + 32768 & M32) >> 16


@register
class SignalFilterBankLog(_Signal):
    """output_scale * ln(x << input_correction_bits) in int16 (saturated at 32767; 0 for
    x <= 1), by TFLM's fixed-point log: the bit count, a 128-segment table of log2's
    fraction, ln 2 in 1/65536."""

    name = "SignalFilterBankLog"
    dtypes = ("uint32",)

    def reference(self, x: np.ndarray, *, input_correction_bits: int = 0,
                  output_scale: int = 1) -> np.ndarray:
        out = []
        for v in x.reshape(-1).tolist():
            s = (int(v) << input_correction_bits) & M32
            out.append(min(log32_tflm(s, output_scale), 32767) if s > 1 else 0)
        return np.array(out, np.int16).reshape(x.shape)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        return [TensorType(ins[0].type.shape, I16)]  # type: ignore[union-attr]

    def lower(self, node: Node, kb: Any) -> None:
        x = kb.inputs[0]
        corr = int(node.attrs.get("input_correction_bits", 0))
        scale = int(node.attrs.get("output_scale", 1)) & M32
        lut = kb.const("log_lut", LOG_LUT, I32)
        with kb.loop(x.numel, "ch") as ch:
            s = kb.local(shl(x.flat(ch), c(corr, U32)), "scaled", U32)
            val = kb.local(0, "logv", I32)
            with kb.if_(cmp("gt", s, 1)):
                integer = kb.local(msb_expr(kb, s, 32) - 1, "ipart", I32)
                frac = kb.local(Cast(s - shl(Const(1, U32), Cast(integer, U32)), I32), "frac",
                                I32)
                low = cmp("lt", integer, 16)
                up = Cast(select(low, 16 - integer, 0, I32), U32)
                kb.assign(frac, select(low, Cast(shl(Cast(frac, U32), up), I32),
                                       shr(frac, select(low, 0, integer - 16, I32)), I32))
                seg = kb.local(Cast(shr(Cast(frac, U32), c(9, U32)), I32), "seg", I32)
                c0 = kb.local(lut.flat(seg), "c0", I32)
                c1 = lut.flat(seg + 1)
                rel = shr((c1 - c0) * (frac - seg * 512), c(16, I32))
                log2 = shl(Cast(integer, U32), c(16, U32)) + Cast(frac + c0 + rel, U32)
                loge = Cast(shr(c(LOG_COEFF, U64) * Cast(log2, U64) + c(32768, U64), c(16, U64)),
                            U32)
                scaled = shr(c(scale, U32) * loge + c(32768, U32), c(16, U32))
                kb.assign(val, Cast(bmin(scaled, c(32767, U32)), I32))
            kb.store_output([ch], Cast(val, I16), flat=ch)


# ------------------------------------------------------------------------------- PCAN
def wdf_tflm(x: int, lut: Sequence[int]) -> int:
    """TFLM's WideDynamicFunction: the gain for noise estimate x, a piecewise quadratic."""
    if x <= 2:
        return int(lut[x])
    interval = msb(x)
    o = 4 * interval - 6
    frac = ((x << (11 - interval)) if interval < 11 else (x >> (interval - 11))) & 0x3FF
    r = (int(lut[o + 2]) * frac) >> 5
    r = i32(r + i32(((int(lut[o + 1]) & M32) << 5) & M32))
    r = i32(r * frac)
    r = (r + (1 << 14)) >> 15
    return i16(r + int(lut[o]))


def pcan_shrink(x: int) -> int:
    if x < (2 << PCAN_SNR_BITS):
        return (x * x & M32) >> (2 + 2 * PCAN_SNR_BITS - PCAN_OUTPUT_BITS)
    return ((x >> (PCAN_SNR_BITS - PCAN_OUTPUT_BITS)) - (1 << PCAN_OUTPUT_BITS)) & M32


@register
class SignalPCAN(_Signal):
    """Per-channel energy normalisation: gain = WideDynamicFunction(noise estimate), snr =
    (x * gain) >> snr_shift, output = shrink(snr) (x^2 / 4 below 2, x - 1 above)."""

    name = "SignalPCAN"
    dtypes = ("uint32", "int16")
    const_inputs = (2,)

    def reference(self, x: np.ndarray, noise: np.ndarray, lut: np.ndarray, *,
                  snr_shift: int = 0) -> np.ndarray:
        tab = [int(v) for v in lut.reshape(-1)]
        out = []
        for v, n in zip(x.reshape(-1).tolist(), noise.reshape(-1).tolist()):
            gain = wdf_tflm(int(n), tab) & M32
            snr = ((int(v) * gain) >> snr_shift) & M32
            out.append(pcan_shrink(snr))
        return np.array(out, np.uint32).reshape(x.shape)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        lut = ins[2]
        assert lut is not None
        if lut.type.numel < 4 * 32 - 6 + 3:
            raise AotcError(f"the gain table has {lut.type.numel} entries; TFLM reads up to "
                            f"index {4 * 32 - 6 + 2}", node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        return [ins[0].type]  # type: ignore[union-attr]

    def lower(self, node: Node, kb: Any) -> None:
        x, noise = kb.inputs[:2]
        shift = int(node.attrs.get("snr_shift", 0))
        lut = kb.const("gain_lut", np.asarray(kb.input_const(2)).reshape(-1), I16)
        with kb.loop(x.numel, "ch") as ch:
            n = kb.local(noise.flat(ch), "noise", U32)
            gain = kb.local(0, "gain", I32)
            with kb.if_(cmp("le", n, 2)):
                kb.assign(gain, Cast(lut.flat(Cast(n, I32)), I32))
            with kb.if_(cmp("gt", n, 2)):
                iv = msb_expr(kb, n, 32)
                o = kb.local(iv * 4 - 6, "o", I32)
                lo = select(cmp("lt", iv, 11), 11 - iv, 0, I32)
                hi = select(cmp("lt", iv, 11), 0, iv - 11, I32)
                frac = kb.local(Cast(band(shr(shl(n, Cast(lo, U32)), Cast(hi, U32)), c(0x3FF, U32)),
                                     I32), "frac", I32)
                r = kb.local(shr(Cast(lut.flat(o + 2), I32) * frac, c(5, I32)), "r", I32)
                kb.assign(r, r + Cast(shl(Cast(Cast(lut.flat(o + 1), I32), U32), c(5, U32)), I32))
                kb.assign(r, r * frac)
                kb.assign(r, shr(r + (1 << 14), c(15, I32)))
                kb.assign(gain, Cast(Cast(r + Cast(lut.flat(o), I32), I16), I32))
            snr = kb.local(Cast(shr(Cast(x.flat(ch), U64) * Cast(Cast(gain, U32), U64),
                                    c(shift, U64)), U32), "snr", U32)
            small = cmp("lt", snr, 2 << PCAN_SNR_BITS)
            sq = shr(snr * snr, c(2 + 2 * PCAN_SNR_BITS - PCAN_OUTPUT_BITS, U32))
            lin = shr(snr, c(PCAN_SNR_BITS - PCAN_OUTPUT_BITS, U32)) - c(1 << PCAN_OUTPUT_BITS,
                                                                         U32)
            kb.store_output([ch], select(small, sq, lin, U32), flat=ch)


# ---------------------------------------------------------- FilterBankSpectralSubtraction
SPECTRAL_ATTRS = ("smoothing", "one_minus_smoothing", "alternate_smoothing",
                  "alternate_one_minus_smoothing", "smoothing_bits", "min_signal_remaining",
                  "spectral_subtraction_bits", "clamping")


@register
class SignalFilterBankSpectralSubtraction(_Signal):
    """Noise reduction: a smoothed noise estimate per channel (alternate smoothing on odd
    channels), subtracted from the signal, floored at min_signal_remaining of it. Inputs: the
    channels and the estimate before the call; outputs: the result and the estimate after it
    (TFLM's output 1, and the next state: it may be written over input 1)."""

    name = "SignalFilterBankSpectralSubtraction"
    dtypes = ("uint32",)
    writes_over: ClassVar[dict[int, int]] = {1: 1}

    def reference(self, x: np.ndarray, noise: np.ndarray, *, smoothing: int = 0,
                  one_minus_smoothing: int = 0, alternate_smoothing: int = 0,
                  alternate_one_minus_smoothing: int = 0, smoothing_bits: int = 0,
                  min_signal_remaining: int = 0, spectral_subtraction_bits: int = 0,
                  clamping: int = 0) -> tuple[np.ndarray, np.ndarray]:
        out, nxt = [], []
        for i, (v, ne) in enumerate(zip(x.reshape(-1).tolist(), noise.reshape(-1).tolist())):
            sm, om = (smoothing, one_minus_smoothing) if i % 2 == 0 else \
                (alternate_smoothing, alternate_one_minus_smoothing)
            up = (int(v) << smoothing_bits) & M32
            ne = ((up * (sm & M32) + int(ne) * (om & M32)) & M64) >> spectral_subtraction_bits
            ne &= M32
            est = ne
            if est > up:
                est = up
                if clamping:
                    ne = est
            floor = ((int(v) * (min_signal_remaining & M32)) >> spectral_subtraction_bits) & M32
            sub = ((up - est) & M32) >> smoothing_bits
            out.append(max(sub, floor))
            nxt.append(ne)
        return (np.array(out, np.uint32).reshape(x.shape),
                np.array(nxt, np.uint32).reshape(noise.shape))

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x, n = ins[0], ins[1]
        assert x is not None and n is not None
        if x.type.shape != n.type.shape:
            raise AotcError("the noise estimate must have the input's shape", node.name,
                            node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        return [ins[0].type, ins[1].type]  # type: ignore[union-attr]

    def lower(self, node: Node, kb: Any) -> None:
        a = {k: int(node.attrs.get(k, 0)) for k in SPECTRAL_ATTRS}
        x, noise = kb.inputs[0], kb.inputs[1]
        nxt = kb.outputs[1]
        with kb.loop(x.numel, "ch") as ch:
            odd = cmp("ne", ch % 2, 0)
            sm = select(odd, a["alternate_smoothing"] & M32, a["smoothing"] & M32, U64)
            om = select(odd, a["alternate_one_minus_smoothing"] & M32,
                        a["one_minus_smoothing"] & M32, U64)
            xv = kb.local(x.flat(ch), "xv", U32)
            up = kb.local(shl(xv, c(a["smoothing_bits"], U32)), "up", U32)
            ne = kb.local(Cast(shr(Cast(up, U64) * sm + Cast(noise.flat(ch), U64) * om,
                                   c(a["spectral_subtraction_bits"], U64)), U32), "ne", U32)
            over = cmp("gt", ne, up)
            est = kb.local(select(over, up, ne, U32), "est", U32)
            if a["clamping"]:
                kb.assign(ne, est)
            floor = Cast(shr(Cast(xv, U64) * c(a["min_signal_remaining"] & M32, U64),
                             c(a["spectral_subtraction_bits"], U64)), U32)
            sub = kb.local(shr(up - est, c(a["smoothing_bits"], U32)), "sub", U32)
            fl = kb.local(floor, "fl", U32)
            kb.store_output([ch], select(cmp("gt", sub, fl), sub, fl, U32), flat=ch)
            kb.store(nxt, [ch], ne)
