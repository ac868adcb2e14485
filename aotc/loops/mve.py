"""Int8 dot products with Helium (MVE, the M-profile Vector Extension), as loop IR.

A schedule choice for targets whose board.toml features include "mve" (Cortex-M55, M85): int8
conv and matmul kernels reduce 16 input channels per instruction. ``vldrbq_s8`` loads 16 int8
activations and 16 int8 weights, and ``vmladavaq_s8`` adds their 16 products to a scalar int32
accumulator. Weights are packed at compile time as one row per output channel, zero-padded to
a multiple of 16 (``pack_rows``); the activations' last partial chunk is a predicated load
(``vctp8q`` + ``vldrbq_z_s8``: lanes past the end are 0 and their bytes are not read). The
input zero point is folded into the bias (quant.IntArith.fold_bias), so the products are raw
int8 x int8 and the int32 sums are those of the generic kernels (which wrap alike): the same
bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.dtypes import DType
from aotc.loops.loop_ir import Cast, Const, Expr, Load, Store, call

I8 = dtypes.BY_NAME["int8"]
I32 = dtypes.BY_NAME["int32"]
LANES = 16  # int8 lanes of a 128-bit vector
# The type of a vldrbq result: arm_mve.h's int8x16_t (model.c.j2 defines it without MVE). Not
# a tensor type (no ONNX enum, outside dtypes' table): it only types vector loads and the
# locals that hold them.
INT8X16 = DType("int8x16", LANES, "int8x16_t", 0, False, True)


def load(x: Expr, active: int = LANES) -> Expr:
    """The 16 int8 from the Load ``x`` on: vldrbq_s8, or with ``active`` < 16 a predicated
    vldrbq_z_s8 whose lanes from ``active`` on are 0 (their bytes are not read)."""
    if active == LANES:
        return call("vldrbq_s8", x, dtype=INT8X16)
    return call("vldrbq_z_s8", x, call("vctp8q", Const(active), dtype=I32), dtype=INT8X16)


def dot(acc: Expr, a: Expr, b: Expr, ordered: bool = False) -> Expr:
    """acc + the dot product of the vectors a and b (16 int8 products, int32, wrapping).
    ``ordered``: followed by an empty volatile asm (the C helper aotc_vmladavaq_s8_ordered,
    GCC-compatible compilers on Helium only), across which GCC's instruction scheduler moves
    nothing: the vector loads of the next dot product stay after this one, so the loads and
    the multiply-accumulates alternate as the C source orders them (a Helium core overlaps a
    VLDRB's beats with a VMLADAVA's, not with another VLDRB's; GCC's scheduler would hoist
    the loads into a run)."""
    return call("vmladavaq_s8_ordered" if ordered else "vmladavaq_s8", acc, a, b, dtype=I32)


def padded(n: int) -> int:
    """n rounded up to whole vectors."""
    return -(-n // LANES) * LANES


def pack_rows(w: np.ndarray) -> np.ndarray:
    """Weights (J, L) -> int8 (J, padded(L)): row j is channel j's weights, then zeros."""
    j, n = w.shape
    out = np.zeros((j, padded(n)), np.int8)
    out[:, :n] = w
    return out


def usable(kb: Any, x_dtype: Any, w: np.ndarray | None, arith: Any) -> bool:
    """Whether the MVE schedule can take an integer conv / matmul: an "mve" target, int8
    activations and int8 weights without a zero point (raw int8 x int8 products)."""
    return ("mve" in kb.features and kb.unroll_tiles and x_dtype == I8
            and arith.dsp_ok(w))


def dot_tile(kb: Any, accs: list[Any], x_at: Callable[[int, Expr], Expr],
             w_at: Callable[[int, Expr], Expr], length: int, width: int,
             ordered: bool | str = False) -> None:
    """accs[p][j] += sum over i < length of x_at(p, i) * w_at(j, i), for each pixel p and
    channel j < width. x_at and w_at give the Load of element i; elements i + 1 .. i + 15
    follow it in memory (a weight row is padded to whole vectors; an activation row need not
    be: its last partial vector is a predicated load). A vector load is printed once per use
    (the loop IR has no vector locals); the C compiler keeps each in a register.

    ``ordered`` (knob conv.mve_order / gemm.mve_order): True or "ordered", each dot product a
    scheduling barrier (``dot``), so that each issues after at most one new vector load
    (channel j's weights with pixel 0, pixel p's activations with channel 0): on the
    Cortex-M55 the load unit and the multiply unit then overlap instead of the loads running
    first; a chunk loop of up to two iterations is unrolled (the barriers keep GCC -Os from
    unrolling it). "pipelined": columns of up to PIPELINE_CHUNKS vectors unrolled, loads one
    ahead across chunk boundaries too (``_pipelined``); longer ones as "ordered"."""
    full, rest = divmod(length, LANES)
    if ordered == "pipelined" and full + (rest > 0) <= PIPELINE_CHUNKS:
        _pipelined(kb, accs, x_at, w_at, full, rest, width)
        return

    def chunk(i: Expr, n: int) -> None:
        xvs = [load(x_at(p, i), n) for p in range(len(accs))]
        for j in range(width):
            wv = load(w_at(j, i))
            for acc, xv in zip(accs, xvs):
                kb.store(acc, [j], dot(acc[[j]], xv, wv, bool(ordered)))

    if full:
        with kb.loop(full, "q", unroll=bool(ordered) and full <= 2) as q:
            chunk(q * LANES, LANES)
    if rest:
        chunk(Const(full * LANES), rest)


# Columns of up to this many vectors are unrolled by the pipelined order (dot_tile).
PIPELINE_CHUNKS = 40


def _pipelined(kb: Any, accs: list[Any], x_at: Callable[[int, Expr], Expr],
               w_at: Callable[[int, Expr], Expr], full: int, rest: int, width: int) -> None:
    """dot_tile's chunks unrolled into one straight run, each dot product a scheduling barrier
    with one vector load before it: the loads it needs, or, when it needs none, the next
    chunk's first (at most one vector loaded ahead), so that loads and multiply-accumulates
    alternate across chunk boundaries too (software pipelining: the Cortex-M55's load unit
    and multiply unit both busy)."""
    chunks = [(Const(c * LANES), LANES) for c in range(full)]
    if rest:
        chunks.append((Const(full * LANES), rest))
    # The loads in the order of first use: per chunk, pixel 0's activations and channel 0's
    # weights, the other pixels', then the other channels' weights.
    order: list[tuple[int, str, int]] = []
    for c in range(len(chunks)):
        order += [(c, "x", 0), (c, "w", 0)] + [(c, "x", p) for p in range(1, len(accs))] \
            + [(c, "w", j) for j in range(1, width)]
    held: dict[tuple[int, str, int], Expr] = {}
    nxt = 0

    def issue() -> None:
        nonlocal nxt
        c, kind, k = order[nxt]
        i, n = chunks[c]
        e = load(x_at(k, i), n) if kind == "x" else load(w_at(k, i))
        held[order[nxt]] = kb.local(e, "xv" if kind == "x" else "wv", INT8X16)
        nxt += 1

    for c in range(len(chunks)):
        for j in range(width):
            for p, acc in enumerate(accs):
                need = [key for key in ((c, "x", p), (c, "w", j)) if key not in held]
                for key in need:
                    while key not in held:
                        issue()
                if not need and nxt < len(order) and not any(k[0] > c for k in held):
                    issue()
                kb.store(acc, [j], dot(acc[[j]], held[(c, "x", p)], held[(c, "w", j)], True))
        for key in [k for k in held if k[0] == c]:
            del held[key]


# ----------------------------------------------------------------------------- requantisation
# Four int32 lanes (int32x4_t; uint32x4_t for scatter offsets). model.c.j2 defines them and
# the intrinsics below in C where the compiler has no MVE.
INT32X4 = DType("int32x4", 16, "int32x4_t", 0, False, True)
UINT32X4 = DType("uint32x4", 16, "uint32x4_t", 0, False, False)
WORDS = 4  # int32 lanes of a vector


def vec(fn: str, *args: Expr) -> Expr:
    """An intrinsic giving int32x4_t."""
    return call(fn, *args, dtype=INT32X4)


def load_words(x: Expr) -> Expr:
    """4 int32 from the Load ``x`` on (vldrwq_s32); 4 int8 widened for an int8 Load
    (vldrbq_s32)."""
    return vec("vldrwq_s32" if x.dtype.itemsize == 4 else "vldrbq_s32", x)


def store_bytes(v: Expr) -> Expr:
    """The value of a Store that writes the 4 lanes of ``v``, narrowed to int8, to index,
    index + 1, ... (vstrbq_s32)."""
    return vec("vstrbq_s32", v)


def scatter_bytes(offsets: Expr, v: Expr) -> Expr:
    """The value of a Store that writes lane i of ``v``, narrowed to int8, to index +
    offsets[i] (vstrbq_scatter_offset_s32; offsets in bytes, a uint32x4_t)."""
    return vec("vstrbq_scatter_offset_s32", offsets, v)


def gather_bytes(x: Load, offsets: Expr) -> Expr:
    """Lane i: the int8 at byte offsets[i] from the Load ``x``, widened
    (vldrbq_gather_offset_s32)."""
    return vec("vldrbq_gather_offset_s32", x, offsets)


def lane_offsets(stride: int) -> Expr:
    """uint32x4_t {0, stride, 2 stride, 3 stride}."""
    return call("vmulq_n_u32", call("vidupq_n_u32", Const(0), Const(1), dtype=UINT32X4),
                Const(stride), dtype=UINT32X4)


def requant_params(requant: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(multiplier, left shift, right shift) per channel for vector requantisation, or None
    where it does not apply: the onnx mode (float scaling), an int8 output only, and
    multipliers other than INT32_MIN (kept by the scalar path's saturating case)."""
    if requant is None or requant.mode != "tflite" or requant.out != I8:
        return None
    mult, shift = requant.tflite_params()
    if (mult == -(1 << 31)).any():
        return None
    return mult, np.maximum(shift, 0), np.maximum(-shift, 0)


def requant4(kb: Any, acc: Expr, mul: Expr, left: Expr | None, nright: Expr, any_zero: bool,
             zp: int, lo: int, hi: int) -> Expr:
    """mbqm4, + zp, clamped to [lo, hi]."""
    v = mbqm4(kb, acc, mul, left, nright, any_zero)
    if zp:
        v = vec("vaddq_n_s32", v, Const(zp, I32))
    return clamp4(v, lo, hi)


def clamp4(v: Expr, lo: int, hi: int) -> Expr:
    v = vec("vmaxq_s32", v, vec("vdupq_n_s32", Const(lo, I32)))
    return vec("vminq_s32", v, vec("vdupq_n_s32", Const(hi, I32)))


def mbqm4_const(kb: Any, acc: Expr, multiplier: int, shift: int) -> Expr:
    """mbqm4 with one (significand, shift) of qmath.quantize_multiplier for all lanes."""
    left = Const(shift, I32) if shift > 0 else None
    return mbqm4(kb, acc, Const(multiplier, I32), left, Const(min(shift, 0), I32), shift >= 0)


def mbqm4(kb: Any, acc: Expr, mul: Expr, left: Expr | None, nright: Expr,
          any_zero: bool) -> Expr:
    """TFLite's MultiplyByQuantizedMultiplier of 4 int32 lanes: bit-exact with qmath.mbqm.
    ``mul``, ``left`` (None: 0) and ``nright`` (minus the right shift) are int32x4_t per lane
    or int32 for all lanes. x << left wraps (VSHL); VQRDMULH is
    gemmlowp's SaturatingRoundingDoublingHighMul, saturating case included; VRSHL by -right
    rounds half up, so 1 is taken off negative values first (CMSIS-NN's
    arm_divide_by_power_of_two_mve): half away from zero, RoundingDivideByPOT. That fixup
    is the sign of the value where no channel has right = 0 (``any_zero`` False), else the
    sign of value & -right (0 for right = 0)."""
    vector = mul.dtype == INT32X4
    v = acc
    if left is not None:
        v = kb.local(vec("vshlq_s32" if left.dtype == INT32X4 else "vshlq_r_s32", v, left),
                     "v", INT32X4)
    v = kb.local(vec("vqrdmulhq_s32" if vector else "vqrdmulhq_n_s32", v, mul), "v", INT32X4)
    if not (isinstance(nright, Const) and nright.value == 0):
        sign: Expr = v
        if any_zero:
            nr = nright if nright.dtype == INT32X4 else vec("vdupq_n_s32", nright)
            sign = vec("vandq_s32", v, nr)
        v = vec("vqaddq_s32", v, vec("vshrq_n_s32", sign, Const(31)))
        v = vec("vrshlq_s32" if nright.dtype == INT32X4 else "vrshlq_n_s32", v, nright)
    return v


class Requant4:
    """requant4 with a requantisation's (ops/quant/conv_matmul.py Requant, tflite mode) constants:
    per
    channel tables in flash (int32 multipliers, int8 shifts widened as they load) or, shared
    by every channel, immediates. ``consts(kb, m, lanes)`` gives channel m's (lanes 1: one
    channel for all lanes) or channels m .. m + 3's (lanes 4) as locals."""

    def __init__(self, kb: Any, requant: Any) -> None:
        params = requant_params(requant)
        assert params is not None
        mult, left, right = params
        self.zp, self.lo, self.hi = requant.zp, requant.lo, requant.hi
        self.any_zero = bool((right == 0).any())
        self.mul = self._table(kb, "vqmul", mult, I32)
        self.left = self._table(kb, "vqlsh", left, I8) if left.any() else None
        self.nright = self._table(kb, "vqnrsh", -right, I8)

    @staticmethod
    def _table(kb: Any, name: str, values: np.ndarray, dt: DType) -> Any:
        if (values == values[0]).all():
            return Const(int(values[0]), I32)
        return kb.const(name, values.astype(dt.np), dt)

    def consts(self, kb: Any, m: Expr, lanes: int) -> tuple[Expr, Expr | None, Expr]:
        def at(t: Any, name: str) -> Expr | None:
            if t is None or isinstance(t, Const):
                return t
            if lanes == WORDS:
                return kb.local(load_words(t.flat(m)), name, INT32X4)
            x = t.flat(m)
            return kb.local(x if x.dtype == I32 else Cast(x, I32), name, I32)

        mul, left, nright = at(self.mul, "qm"), at(self.left, "ql"), at(self.nright, "qr")
        assert mul is not None and nright is not None
        return mul, left, nright

    def __call__(self, kb: Any, acc: Expr, c: tuple[Expr, Expr | None, Expr]) -> Expr:
        return requant4(kb, acc, c[0], c[1], c[2], self.any_zero, self.zp, self.lo, self.hi)


# ----------------------------------------------------------------------------- gathers
# Eight int16 lanes: the bytes a gather load widens, and its 16-bit offsets.
INT16X8 = DType("int16x8", 16, "int16x8_t", 0, False, True)
UINT16X8 = DType("uint16x8", 16, "uint16x8_t", 0, False, False)
HALVES = 8  # int16 lanes of a vector
GATHER_REACH = 1 << 16  # a gather's 16-bit byte offsets


def gather_copy(kb: Any, dst: Any, at: Expr, src: Load, offsets: Any, count: int) -> None:
    """dst[at + i] = src[offsets[i]] (byte offsets from the Load ``src``'s address) for
    i < padded count: VLDRB gathers of 8 bytes at the 16-bit offsets of the constant table
    ``offsets`` (uint16, padded to whole vectors: the extra lanes read src itself), each
    stored as 8 bytes (VSTRB narrowing): the last vector writes up to 7 bytes past
    at + count, which ``dst`` must have room for."""
    with kb.loop(-(-count // HALVES), "g") as g:
        offs = call("vldrhq_u16", offsets.flat(g * HALVES), dtype=UINT16X8)
        v = call("vldrbq_gather_offset_s16", src, offs, dtype=INT16X8)
        kb.emit(Store(dst.buf, at + g * HALVES, call("vstrbq_s16", v, dtype=INT16X8)))
