"""Integer dot products with the Arm DSP extension's dual 16-bit MAC, as loop IR.

A schedule choice for targets whose board.toml features include "dsp" (Cortex-M4, M7, M33): integer
conv and matmul kernels reduce over input channels two at a time. Two int8 activations become one
word of two int16 lanes (SXTB16), and ``__smlad(w, x, acc)`` adds both products to the int32
accumulator in one instruction. Weights are packed at compile time into int32 words of four int8,
two output channels x two input channels, in SXTB16's lane order (CMSIS-NN's "reordered" weights):
SXTB16 of the word gives channel j's pair, SXTB16 of the word shifted right by 8 (SXTB16's rotate
operand) gives channel j + 1's. The sums are the same int32 sums as the generic kernels (a 16 x 16
product of 8-bit values and the int32 sum of two cannot overflow where the plain sum does not), so
both schedules are bit-identical. Matmuls of signed 8-bit activations may instead read four
activations per word load (ld_word8, x_quad) against words of one column's four consecutive k
(pack_quads): the same four products, summed in another order, the same int32 sum."""

from __future__ import annotations

from typing import Any

import numpy as np

from aotc import dtypes
from aotc.loops.loop_ir import Bin, Cast, Const, Expr, call

I32 = dtypes.BY_NAME["int32"]
U32 = dtypes.BY_NAME["uint32"]
U8 = dtypes.BY_NAME["uint8"]
U16 = dtypes.BY_NAME["uint16"]


def pack_words(w: np.ndarray) -> np.ndarray:
    """Weights (C, K, J) -> int32 words (ceil(C/2), K, ceil(J/2)): the word [cp, k, jp] holds
    the bytes w[c0, k, j0], w[c0, k, j1], w[c1, k, j0], w[c1, k, j1] (c0, c1 = 2cp, 2cp + 1;
    j0, j1 = 2jp, 2jp + 1; zeros past C or J), little-endian."""
    c, k, j = w.shape
    cp, jp = -(-c // 2), -(-j // 2)
    padded = np.zeros((2 * cp, k, 2 * jp), np.int8)
    padded[:c, :, :j] = w
    quads = padded.reshape(cp, 2, k, jp, 2).transpose(0, 2, 3, 1, 4)  # (cp, k, jp, c2, j2)
    return np.ascontiguousarray(quads).reshape(cp, k, jp, 4).view("<i4")[..., 0]


def pack_quads(w: np.ndarray) -> np.ndarray:
    """Weights (K, J), K a multiple of 4 -> int32 words (K / 4, J): the word [q, j] holds the
    bytes w[4q, j], w[4q + 1, j], w[4q + 2, j], w[4q + 3, j], little-endian (column j's four
    consecutive k, as x_quad loads the activations)."""
    k, j = w.shape
    assert k % 4 == 0, w.shape
    quads = np.ascontiguousarray(w.astype(np.int8).T.reshape(j, k // 4, 4).transpose(1, 0, 2))
    return quads.view("<i4")[..., 0]


def pack_quads_wide(w: np.ndarray) -> np.ndarray:
    """Weights (K, J), K a multiple of 4 -> int32 words (K / 4, J, 2): pack_quads' word [q, j]
    pre-extended, SXTB16 done at compile time: [q, j, 0] holds the int16 lanes (w[4q, j],
    w[4q + 2, j]), [q, j, 1] (w[4q + 1, j], w[4q + 3, j]), low lane first (x_quad's pairs'
    order). Twice pack_quads' bytes."""
    return widen(pack_quads(w))


def ld_word8(x: Expr) -> Expr:
    """Four adjacent 8-bit values from the Load ``x`` on as one int32 word (one LDR)."""
    assert x.dtype.itemsize == 1, x.dtype
    return call("ld_word8", x, dtype=I32)


def x_quad(word: Expr, x_zp: int) -> tuple[Expr, Expr]:
    """The int16 pairs (x[0] - x_zp, x[2] - x_zp) and (x[1] - x_zp, x[3] - x_zp) of a word of
    four signed 8-bit activations (ld_word8): SXTB16 and SXTB16 ROR 8. Against a pack_quads
    word w, smlad(sxtb16(w), even) + smlad(sxtb16_ror8(w), odd) is the four products' sum."""
    pairs = [call("sxtb16", word, dtype=I32), call("sxtb16_ror8", word, dtype=I32)]
    if x_zp:
        both = ((-x_zp) & 0xFFFF) * 0x10001  # -x_zp in each 16-bit lane
        zp = Const(both - (1 << 32) if both >= 1 << 31 else both, I32)
        pairs = [call("sadd16", p, zp, dtype=I32) for p in pairs]
    return pairs[0], pairs[1]


def x_pair(x0: Expr, x1: Expr | None, x_zp: int) -> Expr:
    """The int16 pair (x0 - x_zp, x1 - x_zp) of two 8-bit loads as one int32 word (or of two
    int16 loads, zero point 0: TFLite's 16x8). Without x1 (the last of an odd channel count)
    only the low lane counts: its weight's high lane is 0."""
    signed = x0.dtype.is_signed
    if x1 is None:
        v = Cast(x0, I32)
        return v - Const(x_zp, I32) if x_zp else v
    if x0.dtype.itemsize == 2:  # already the lanes
        assert not x_zp and signed
        lo16 = Cast(Cast(x0, U16), U32)
        hi16 = Bin("shl", Cast(Cast(x1, U16), U32), Const(16, U32), U32)
        return Cast(Bin("bor", hi16, lo16, U32), I32)
    lo = Cast(Cast(x0, U8), U32)
    hi = Bin("shl", Cast(Cast(x1, U8), U32), Const(16, U32), U32)
    word: Expr = Cast(Bin("bor", hi, lo, U32), I32)
    # int8: SXTB16 sign-extends bytes 0 and 2; uint8 bytes are already the zero-extended lanes.
    pair = call("sxtb16", word, dtype=I32) if signed else word
    if x_zp:
        both = ((-x_zp) & 0xFFFF) * 0x10001  # -x_zp in each 16-bit lane
        pair = call("sadd16", pair, Const(both - (1 << 32) if both >= 1 << 31 else both, I32),
                    dtype=I32)
    return pair


def halves(lo: Expr, hi: Expr, which: int) -> Expr:
    """The word of int16 lanes (lo's, hi's) of two words of two lanes each: their low lanes
    (which 0: PKHBT) or their high lanes (which 1: PKHTB)."""
    return call("pkhtb" if which else "pkhbt", lo, hi, dtype=I32)


def widen(words: np.ndarray) -> np.ndarray:
    """Packed int32 words (pack_words, pack_quads) -> int32 (..., 2): each word's SXTB16 and
    SXTB16 ROR 8 done at compile time, the two int16 lanes of each low lane first (twice the
    bytes; no SXTB16 on the weights at run time)."""
    b = np.asarray(words).astype("<i4").view(np.int8).reshape(*np.shape(words), 4)
    lanes = b[..., [0, 2, 1, 3]].astype("<i2")
    return np.ascontiguousarray(lanes).view("<i4").reshape(*np.shape(words), 2)


def mac_tile(kb: Any, accs: Any, words: Any, row: Expr, width: int, xps: Any,
             wide: bool = False, plane: int = 0) -> None:
    """accs[p][j] += the pair dot product of channel j's weights with ``xps[p]``, for j <
    width, for each pixel p (one accumulator array and activation pair each; a single pair and
    array for one pixel); the weight words of the tile are words[row], words[row + 1], ...
    (pack_words' jp). With several pixels each weight word is loaded and unpacked once.
    ``wide``: ``words`` is widen() of them, two words each, the lanes already unpacked;
    ``plane`` > 0: the odd lanes that many words after the even ones (not adjacent)."""
    accs = accs if isinstance(accs, (list, tuple)) else [accs]
    xps = xps if isinstance(xps, (list, tuple)) else [xps]
    for jp in range(-(-width // 2)):
        lanes: list[Expr]
        if wide:
            at, odd = ((row + jp, row + jp + plane) if plane
                       else ((row + jp) * 2, (row + jp) * 2 + 1))
            lanes = [words.flat(at)] + ([words.flat(odd)] if 2 * jp + 1 < width else [])
        else:
            w = kb.local(words.flat(row + jp), "wq", I32)
            lanes = [call("sxtb16", w, dtype=I32)]
            if 2 * jp + 1 < width:
                lanes.append(call("sxtb16_ror8", w, dtype=I32))
        if len(xps) > 1 or wide:
            lanes = [kb.local(lane, "wl", I32) for lane in lanes]
        for acc, xp in zip(accs, xps):
            for h, lane in enumerate(lanes):
                j = 2 * jp + h
                kb.store(acc, [j], call("smlad", lane, xp, acc[[j]], dtype=I32))


def mac_tile_staggered(kb: Any, accs: list[Any], words: Any, row: Expr, width: int,
                       loads: list[Expr], wide: bool = False, plane: int = 0) -> None:
    """mac_tile for a tile of two channels (one weight word, or its two widened lanes) and
    the pixels' column words ``loads`` (Load expressions), loaded one pixel ahead of their
    MACs: pixel p + 1's word is loaded before pixel p's two MACs, so no load's result is read
    by the next instruction (the Cortex-M33's load-use stall) while only two of them are live
    at once (fewer registers than all the pixels' words loaded first). Wider tiles: mac_tile
    with the words loaded first. The same sums in the same order per accumulator."""
    if -(-width // 2) != 1 or len(loads) < 2:
        mac_tile(kb, accs, words, row, width, [kb.local(x, "xp", I32) for x in loads],
                 wide, plane)
        return
    xs = [kb.local(loads[0], "xp", I32)]
    lanes: list[Expr]
    if wide:
        at, odd = (row, row + plane) if plane else (row * 2, row * 2 + 1)
        lanes = [kb.local(words.flat(at), "wl", I32)]
        if width > 1:
            lanes.append(kb.local(words.flat(odd), "wl", I32))
    else:
        w = kb.local(words.flat(row), "wq", I32)
        xs.append(kb.local(loads[1], "xp", I32))  # between the weight's load and its SXTB16
        lanes = [kb.local(call("sxtb16", w, dtype=I32), "wl", I32)]
        if width > 1:
            lanes.append(kb.local(call("sxtb16_ror8", w, dtype=I32), "wl", I32))
    for p, acc in enumerate(accs):
        if p + 1 < len(loads) and len(xs) == p + 1:
            xs.append(kb.local(loads[p + 1], "xp", I32))
        for j, lane in enumerate(lanes):
            kb.store(acc, [j], call("smlad", lane, xs[p], acc[[j]], dtype=I32))
