"""TFLite Micro's Signal Rfft and Irfft: KISS FFT's real transform (kiss_fftr / kiss_fftri,
v130, as TFLM builds it: FIXED_POINT 16 for int16, 32 for int32, float), reproduced operation
for operation so the results are TFLM's bit for bit: the same radix-4 / radix-2 stages in the
same order, each stage's inputs divided by its radix in fixed point (C_FIXDIV), products
rounded to the scalar type (sround), every intermediate truncated to it as KISS FFT's
``kiss_fft_cpx`` temporaries are, the twiddles rounded from double as it rounds them.

Prepare happens at compile time: the factorisation, the input order of the decimation (KISS
FFT's recursion flattened into one permutation table), the twiddle tables. The kernel is the
permuting copy, one loop nest per stage over its blocks and butterflies, and the real-to-
complex split. Only lengths whose half is a power of two (radices 4 and 2) are supported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Cast, Const, Expr, Store, as_expr, bmin, cmp, select
from aotc.ops import OpDef, register
from aotc.ops.sequence.audio_frontend import shr

I16, I32, I64, F32 = (dtypes.BY_NAME[n] for n in ("int16", "int32", "int64", "float32"))
# Per scalar type: (the product type, the fraction bits, SAMP_MAX); None: float.
FIXED = {"int16": (I32, 15, 32767), "int32": (I64, 31, 2147483647), "float32": None}


def factors(n: int) -> list[tuple[int, int]]:
    """KISS FFT's kf_factor for a power of two: radix 4 while it divides, then 2; (p, m)."""
    out = []
    while n > 1:
        p = 4 if n % 4 == 0 else 2
        n //= p
        out.append((p, n))
    return out


def permutation(n: int) -> list[int]:
    """The input index each position of the first stage reads (kf_work's recursion)."""
    fac = factors(n)

    def walk(start: int, stride: int, level: int) -> list[int]:
        p, m = fac[level]
        if m == 1:
            return [start + j * stride for j in range(p)]
        return [i for j in range(p) for i in walk(start + j * stride, stride * p, level + 1)]

    return walk(0, 1, 0) if n > 1 else [0]


def stages(n: int) -> list[tuple[int, int, int]]:
    """(radix, m, fstride) per stage, in execution order (the deepest first)."""
    out, stride = [], 1
    for p, m in factors(n):
        out.append((p, m, stride))
        stride *= p
    return out[::-1]


def twiddles(n: int, kind: str, inverse: bool) -> tuple[list[Any], list[Any]]:
    """kiss_fft_alloc's table: exp(-+2 pi i k / n) rounded as KISS_FFT_COS/SIN round."""
    re, im = [], []
    for i in range(n):
        phase = -2 * math.pi * i / n
        if inverse:
            phase *= -1
        re.append(_round(math.cos(phase), kind))
        im.append(_round(math.sin(phase), kind))
    return re, im


def super_twiddles(n: int, kind: str, inverse: bool) -> tuple[list[Any], list[Any]]:
    """kiss_fftr_alloc's table for the real split (n: the complex length)."""
    re, im = [], []
    for i in range(n // 2):
        phase = -math.pi * ((i + 1) / n + .5)
        if inverse:
            phase *= -1
        re.append(_round(math.cos(phase), kind))
        im.append(_round(math.sin(phase), kind))
    return re, im


def _round(v: float, kind: str) -> Any:
    fx = FIXED[kind]
    if fx is None:
        return float(np.float32(v))
    return int(math.floor(.5 + fx[2] * v))


# ------------------------------------------------------------------------- the arithmetic
class Arith:
    """KISS FFT's scalar macros for one scalar type, on Python numbers (``kb`` None: the
    reference) or on loop IR expressions bound to locals of the scalar type."""

    def __init__(self, kind: str, kb: Any = None) -> None:
        self.kind, self.kb = kind, kb
        self.fx = FIXED[kind]
        self.T = dtypes.BY_NAME[kind]

    def val(self, v: Any) -> Any:
        """A value stored in a kiss_fft_scalar (truncated to it)."""
        if self.kb is None:
            if self.fx is None:
                return float(np.float32(v))
            bits = 16 if self.kind == "int16" else 32
            return (int(v) + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
        return self.kb.local(Cast(v, self.T) if v.dtype != self.T else v, "v", self.T)

    def wide(self, v: Any) -> Any:
        """C's promotion for + and - of two scalars: int16 to int (int32), else the type."""
        if self.kb is None or self.kind != "int16":
            return v
        return Cast(v, I32)

    def add(self, a: Any, b: Any) -> Any:
        return self.val(self.wide(a) + self.wide(b))

    def sub(self, a: Any, b: Any) -> Any:
        return self.val(self.wide(a) - self.wide(b))

    def neg(self, a: Any) -> Any:
        return self.val(-self.wide(a))

    def _smul(self, a: Any, b: Any) -> Any:
        if self.kb is None:
            return int(a) * int(b)
        return Cast(a, self.fx[0]) * (Cast(b, self.fx[0]) if isinstance(b, Expr)
                                      else Const(int(b), self.fx[0]))

    def _sround(self, x: Any) -> Any:
        frac = self.fx[1]
        if self.kb is None:
            return self.val((x + (1 << (frac - 1))) >> frac)
        return self.val(Cast(shr(x + Const(1 << (frac - 1), self.fx[0]),
                                 Const(frac, self.fx[0])), self.T))

    def fixdiv(self, c: tuple[Any, Any], k: int) -> tuple[Any, Any]:
        if self.fx is None:
            return c
        d = self.fx[2] // k
        return self._sround(self._smul(c[0], d)), self._sround(self._smul(c[1], d))

    def cmul(self, a: tuple[Any, Any], b: tuple[Any, Any]) -> tuple[Any, Any]:
        if self.fx is None:
            if self.kb is None:
                f = np.float32
                return (self.val(f(f(a[0]) * f(b[0])) - f(f(a[1]) * f(b[1]))),
                        self.val(f(f(a[0]) * f(b[1])) + f(f(a[1]) * f(b[0]))))
            return self.val(a[0] * b[0] - a[1] * b[1]), self.val(a[0] * b[1] + a[1] * b[0])
        s = self._smul
        return (self._sround(s(a[0], b[0]) - s(a[1], b[1])),
                self._sround(s(a[0], b[1]) + s(a[1], b[0])))

    def half(self, a: Any, b: Any, minus: bool) -> Any:
        """HALF_OF(a + b) (or a - b) stored in a scalar: >> 1 on the promoted integer sum,
        * .5 in floating point."""
        if self.kb is None:
            s = (np.float32(a) - np.float32(b)) if minus and self.fx is None else \
                (np.float32(a) + np.float32(b)) if self.fx is None else None
            if s is not None:
                return self.val(np.float32(s) * np.float32(.5))
            s = (a - b) if minus else (a + b)
            if self.kind == "int32":
                s = self.val(s)  # int32 arithmetic wraps before the shift
            return self.val(s >> 1)
        s = self.wide(a) - self.wide(b) if minus else self.wide(a) + self.wide(b)
        if self.fx is None:
            return self.val(s * Const(0.5, F32))
        return self.val(shr(s, 1))

    def cadd(self, a: tuple[Any, Any], b: tuple[Any, Any]) -> tuple[Any, Any]:
        return self.add(a[0], b[0]), self.add(a[1], b[1])

    def csub(self, a: tuple[Any, Any], b: tuple[Any, Any]) -> tuple[Any, Any]:
        return self.sub(a[0], b[0]), self.sub(a[1], b[1])


def bfly2(A: Arith, f: list[tuple[Any, Any]], tw: tuple[Any, Any]) -> list[tuple[Any, Any]]:
    f0, f1 = A.fixdiv(f[0], 2), A.fixdiv(f[1], 2)
    t = A.cmul(f1, tw)
    return [A.cadd(f0, t), A.csub(f0, t)]


def bfly4(A: Arith, f: list[tuple[Any, Any]], tw: Sequence[tuple[Any, Any]], inverse: bool
          ) -> list[tuple[Any, Any]]:
    a = [A.fixdiv(v, 4) for v in f]
    s0, s1, s2 = A.cmul(a[1], tw[0]), A.cmul(a[2], tw[1]), A.cmul(a[3], tw[2])
    s5 = A.csub(a[0], s1)
    f0 = A.cadd(a[0], s1)
    s3, s4 = A.cadd(s0, s2), A.csub(s0, s2)
    out2 = A.csub(f0, s3)
    out0 = A.cadd(f0, s3)
    plus = (A.add(s5[0], s4[1]), A.sub(s5[1], s4[0]))
    minus = (A.sub(s5[0], s4[1]), A.add(s5[1], s4[0]))
    return [out0, minus, out2, plus] if inverse else [out0, plus, out2, minus]


def fft_reference(z: list[tuple[Any, Any]], A: Arith, inverse: bool) -> list[tuple[Any, Any]]:
    """The complex FFT (kiss_fft) of ``z`` on Python numbers."""
    n = len(z)
    twr, twi = twiddles(n, A.kind, inverse)
    buf = [z[i] for i in permutation(n)]
    for p, m, fs in stages(n):
        for blk in range(n // (p * m)):
            base = blk * p * m
            for u in range(m):
                idx = [base + u + q * m for q in range(p)]
                tw = [(twr[u * fs * q], twi[u * fs * q]) for q in range(1, p)]
                res = bfly2(A, [buf[i] for i in idx], tw[0]) if p == 2 else \
                    bfly4(A, [buf[i] for i in idx], tw, inverse)
                for i, v in zip(idx, res):
                    buf[i] = v
    return buf


def rfft_reference(x: Sequence[Any], fft_length: int, kind: str) -> list[tuple[Any, Any]]:
    A = Arith(kind)
    n = fft_length // 2
    xs = list(x) + [0] * (fft_length - len(x))
    tmp = fft_reference([(A.val(xs[2 * k]), A.val(xs[2 * k + 1])) for k in range(n)], A,
                        False)
    sr, si = super_twiddles(n, kind, False)
    out: list[tuple[Any, Any]] = [(0, 0)] * (n + 1)
    tdc = A.fixdiv(tmp[0], 2)
    out[0] = (A.add(tdc[0], tdc[1]), A.val(0))
    out[n] = (A.sub(tdc[0], tdc[1]), A.val(0))
    for k in range(1, n // 2 + 1):
        fpk = A.fixdiv(tmp[k], 2)
        fpnk = A.fixdiv((tmp[n - k][0], A.neg(tmp[n - k][1])), 2)
        f1k, f2k = A.cadd(fpk, fpnk), A.csub(fpk, fpnk)
        tw = A.cmul(f2k, (sr[k - 1], si[k - 1]))
        out[k] = (A.half(f1k[0], tw[0], False), A.half(f1k[1], tw[1], False))
        out[n - k] = (A.half(f1k[0], tw[0], True), A.half(tw[1], f1k[1], True))
    return out


def irfft_reference(z: Sequence[tuple[Any, Any]], fft_length: int, kind: str) -> list[Any]:
    A = Arith(kind)
    n = fft_length // 2
    sr, si = super_twiddles(n, kind, True)
    tmp: list[tuple[Any, Any]] = [(0, 0)] * n
    tmp[0] = A.fixdiv((A.add(z[0][0], z[n][0]), A.sub(z[0][0], z[n][0])), 2)
    for k in range(1, n // 2 + 1):
        fk = A.fixdiv(z[k], 2)
        fnkc = A.fixdiv((z[n - k][0], A.neg(z[n - k][1])), 2)
        fek, t = A.cadd(fk, fnkc), A.csub(fk, fnkc)
        fok = A.cmul(t, (sr[k - 1], si[k - 1]))
        tmp[k] = A.cadd(fek, fok)
        r = A.csub(fek, fok)
        tmp[n - k] = (r[0], A.neg(r[1]))
    out = [v for c in fft_reference(tmp, A, True) for v in c]
    if A.fx is None:  # TFLM divides KISS FFT's float result by the length
        out = [float(np.float32(v) / np.float32(fft_length)) for v in out]
    return out


# ------------------------------------------------------------------------------ lowering
def put(kb: Any, ref: Any, i: Expr | int, v: Expr) -> None:
    """Store ``v`` at flat index ``i`` of ``ref``."""
    kb.emit(Store(ref.buf, as_expr(i), v))


def _complex_fft(kb: Any, A: Arith, buf: Any, base: Expr, n: int, inverse: bool) -> None:
    """The stages of an n-point complex FFT over interleaved ``buf`` from ``base`` (already
    in the permuted order)."""
    twr, twi = twiddles(n, A.kind, inverse)
    T = A.T
    tr = kb.const("tw_re" + ("_inv" if inverse else ""), np.array(twr), T)
    ti = kb.const("tw_im" + ("_inv" if inverse else ""), np.array(twi), T)
    for p, m, fs in stages(n):
        with kb.loops((n // (p * m), m), ("blk", "u")) as (blk, u):
            first = base + (blk * (p * m) + u) * 2
            idx = [first + q * m * 2 for q in range(p)]
            f = [(A.val(buf.flat(i)), A.val(buf.flat(i + 1))) for i in idx]
            tw = [(tr.flat(u * (fs * q)), ti.flat(u * (fs * q))) for q in range(1, p)]
            res = bfly2(A, f, tw[0]) if p == 2 else bfly4(A, f, tw, inverse)
            for i, v in zip(idx, res):
                put(kb, buf, i, v[0])
                put(kb, buf, i + 1, v[1])


def _check_length(node: Node, fft_length: int) -> None:
    if fft_length < 4 or fft_length & (fft_length - 1):
        raise AotcError(f"fft_length={fft_length} is not supported: aotc reproduces KISS FFT's "
                        f"radix-4 and radix-2 stages, so it must be a power of two >= 4",
                        node.name, node.op)


@register
class SignalRfft(OpDef):
    """The real FFT of each row of the last axis (zero-padded to fft_length): fft_length / 2
    + 1 complex bins, interleaved (real, imag), in the input's type."""

    name = "SignalRfft"
    domain = "aotc"
    dtypes = ("int16", "int32", "float32")

    def reference(self, x: np.ndarray, *, fft_length: int = 2) -> np.ndarray:
        rows = x.reshape(-1, x.shape[-1])
        out = [[v for c in rfft_reference(r.tolist(), fft_length, x.dtype.name) for v in c]
               for r in rows]
        return np.array(out, x.dtype).reshape(*x.shape[:-1], fft_length + 2)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        n = int(node.attrs.get("fft_length", 2))
        _check_length(node, n)
        x = ins[0]
        assert x is not None
        if not x.type.shape or x.type.shape[-1] > n:
            raise AotcError(f"rows of {x.type.shape[-1] if x.type.shape else 0} samples do not "
                            f"fit fft_length={n}", node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        n = int(node.attrs.get("fft_length", 2))
        return [TensorType((*x.type.shape[:-1], n + 2), x.type.dtype)]

    def lower(self, node: Node, kb: Any) -> None:
        x, y = kb.inputs[0], kb.outputs[0]
        A = Arith(x.dtype.name, kb)
        N = int(node.attrs["fft_length"])
        n = N // 2
        width = x.shape[-1]
        rows = x.numel // width
        perm = kb.const("perm", np.array(permutation(n), np.int32), I32)
        sr, si = super_twiddles(n, A.kind, False)
        sre, sim = kb.const("super_re", np.array(sr), A.T), kb.const("super_im", np.array(si), A.T)
        zero = Const(0.0 if A.fx is None else 0, A.T)
        with kb.loop(rows, "r") as r:
            out = r * (N + 2)
            # The permuted copy of the zero-padded input, as n complex values, into y.
            with kb.loop(n, "j") as j:
                src = kb.local(perm.flat(j) * 2, "src", I32)
                for part in (0, 1):
                    k = src + part
                    v = x.flat(r * width + bmin(k, width - 1))
                    put(kb, y, out + j * 2 + part,
                        select(cmp("lt", k, width), v, zero, A.T) if N > width else
                        x.flat(r * width + k))
            _complex_fft(kb, A, y, out, n, False)
            # The split into the real transform, pair (k, n - k) read before either is written.
            t0 = A.fixdiv((A.val(y.flat(out)), A.val(y.flat(out + 1))), 2)
            put(kb, y, out, A.add(t0[0], t0[1]))
            put(kb, y, out + 1, zero)
            put(kb, y, out + 2 * n, A.sub(t0[0], t0[1]))
            put(kb, y, out + 2 * n + 1, zero)
            with kb.loop(n // 2, "k0") as k0:
                k = k0 + 1
                a = out + k * 2
                b = out + (n - k) * 2
                fpk = A.fixdiv((A.val(y.flat(a)), A.val(y.flat(a + 1))), 2)
                fpnk = A.fixdiv((A.val(y.flat(b)), A.neg(A.val(y.flat(b + 1)))), 2)
                f1k, f2k = A.cadd(fpk, fpnk), A.csub(fpk, fpnk)
                tw = A.cmul(f2k, (sre.flat(k0), sim.flat(k0)))
                put(kb, y, a, A.half(f1k[0], tw[0], False))
                put(kb, y, a + 1, A.half(f1k[1], tw[1], False))
                put(kb, y, b, A.half(f1k[0], tw[0], True))
                put(kb, y, b + 1, A.half(tw[1], f1k[1], True))


@register
class SignalIrfft(OpDef):
    """The inverse real FFT of each row of fft_length / 2 + 1 interleaved complex bins:
    fft_length samples (KISS FFT's with its fixed-point scaling; float divided by
    fft_length, as TFLM does)."""

    name = "SignalIrfft"
    domain = "aotc"
    dtypes = ("int16", "int32", "float32")

    def reference(self, x: np.ndarray, *, fft_length: int = 2) -> np.ndarray:
        rows = x.reshape(-1, x.shape[-1])
        out = []
        for r in rows:
            z = [(r[2 * k].item(), r[2 * k + 1].item()) for k in range(len(r) // 2)]
            out.append(irfft_reference(z, fft_length, x.dtype.name))
        return np.array(out, x.dtype).reshape(*x.shape[:-1], fft_length)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        n = int(node.attrs.get("fft_length", 2))
        _check_length(node, n)
        x = ins[0]
        assert x is not None
        if not x.type.shape or x.type.shape[-1] != n + 2:
            raise AotcError(f"rows must hold fft_length / 2 + 1 = {n // 2 + 1} complex bins",
                            node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        n = int(node.attrs.get("fft_length", 2))
        return [TensorType((*x.type.shape[:-1], n), x.type.dtype)]

    def lower(self, node: Node, kb: Any) -> None:
        x, y = kb.inputs[0], kb.outputs[0]
        A = Arith(x.dtype.name, kb)
        N = int(node.attrs["fft_length"])
        n = N // 2
        rows = x.numel // (N + 2)
        tmp = kb.scratch_buffer("tmp", A.T, (N,))
        perm = kb.const("perm", np.array(permutation(n), np.int32), I32)
        sr, si = super_twiddles(n, A.kind, True)
        sre, sim = kb.const("super_re", np.array(sr), A.T), kb.const("super_im", np.array(si), A.T)
        with kb.loop(rows, "r") as r:
            src = r * (N + 2)
            z0r, znr = A.val(x.flat(src)), A.val(x.flat(src + 2 * n))
            t0 = A.fixdiv((A.add(z0r, znr), A.sub(z0r, znr)), 2)
            put(kb, tmp, 0, t0[0])
            put(kb, tmp, 1, t0[1])
            with kb.loop(n // 2, "k0") as k0:
                k = k0 + 1
                a, b = src + k * 2, src + (n - k) * 2
                fk = A.fixdiv((A.val(x.flat(a)), A.val(x.flat(a + 1))), 2)
                fnkc = A.fixdiv((A.val(x.flat(b)), A.neg(A.val(x.flat(b + 1)))), 2)
                fek, t = A.cadd(fk, fnkc), A.csub(fk, fnkc)
                fok = A.cmul(t, (sre.flat(k0), sim.flat(k0)))
                s = A.cadd(fek, fok)
                d = A.csub(fek, fok)
                put(kb, tmp, k * 2, s[0])
                put(kb, tmp, k * 2 + 1, s[1])
                put(kb, tmp, (n - k) * 2, d[0])
                put(kb, tmp, (n - k) * 2 + 1, A.neg(d[1]))
            out = r * N
            with kb.loop(n, "j") as j:
                p = kb.local(perm.flat(j) * 2, "src", I32)
                put(kb, y, out + j * 2, tmp.flat(p))
                put(kb, y, out + j * 2 + 1, tmp.flat(p + 1))
            _complex_fft(kb, A, y, out, n, True)
            if A.fx is None:  # TFLM divides KISS FFT's float result by the length
                with kb.loop(N, "i") as i:
                    put(kb, y, out + i, y.flat(out + i) / Const(float(N), F32))
