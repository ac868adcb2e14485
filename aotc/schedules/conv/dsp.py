"""Integer convolution on cores with the DSP extension (board feature "dsp"): Conv.lower's
schedule for int8 weights without a zero point, through loops/dsp.py's SMLAD tiles.

Per group of output pixels (the conv.pixels knob), the activations a pixel reads are first
gathered into a scratch column of int32 words, each the pair (x[c] - zp, x[c + 1] - zp) of two
input channels at one kernel tap as two int16 lanes (im2col, CMSIS-NN's trick; a tap in the
padding is the pair 0). The column is built once and read by every output-channel tile, and
each weight word is loaded and unpacked once for all the pixels of the group. The int32 sums
are those of the generic schedule (the products and their order within each pair add up to the
same exact sum), so both give the same bytes."""

from __future__ import annotations

from typing import Any

import numpy as np

from aotc import dtypes
from aotc.ir.graph import Node
from aotc.loops import dsp
from aotc.loops.builder import strides_of
from aotc.loops.loop_ir import Cast, Const, Expr, Load, call, cmp, land, lor
from aotc.schedules.conv import knobs as CONV
from aotc.schedules.conv.depthwise_int import prove_bound
from aotc.schedules.conv.pixels import (
    flat_tap,
    init_accumulators,
    over_pixel_groups,
    pixel_coords,
    pixel_tiles,
    requantise_group,
    store_sums,
    strides,
    zero_accumulators,
)
from aotc.schedules.conv.tiled import inside_range

I16 = dtypes.BY_NAME["int16"]
I32 = dtypes.int32
# The flat columns' unguarded path for pixels whose taps are all inside the input, taken
# where at least this share of the output pixels are. Estimated cycles of the first conv on
# cortex-m4f (bench/boards.py --int8 --verbose), zero fill and guarded taps -> unguarded
# path: VWW (96% of its pixels inside) 1,700,129 -> 1,401,477, ResNet-8 (88%) 1,198,582 ->
# 1,092,366, KWS (48%) 613,541 -> 661,067 (kept guarded).
FAST_INSIDE = 0.75


def word_taps(cg: int, kh: int, kw: int) -> list[tuple[int, int | None]]:
    """The flat column's words when each kernel row's kw * cg bytes are contiguous in the
    input (channels last): per row, each four bytes b0..b3 one word load, SXTB16 and
    SXTB16 ROR 8 giving the words (b0, b2) and (b1, b3); the rows' bytes past their last
    four after all of them, two a word. Each word's (low, high) lane as a flat (channel,
    tap) index, c * kh * kw + ky * kw + kx (None: the idle lane of an odd count)."""
    def flat_of(ky: int, b: int) -> int:
        kx, c = divmod(b, cg)
        return c * kh * kw + ky * kw + kx

    row = kw * cg
    words: list[tuple[int, int | None]] = []
    left: list[int] = []
    for ky in range(kh):
        for b in range(0, row - row % 4, 4):
            words += [(flat_of(ky, b), flat_of(ky, b + 2)),
                      (flat_of(ky, b + 1), flat_of(ky, b + 3))]
        left += [flat_of(ky, b) for b in range(row - row % 4, row)]
    words += [(left[i], left[i + 1] if i + 1 < len(left) else None)
              for i in range(0, len(left), 2)]
    return words


def rows_contiguous(X: Any, cg: int, group: int, k_sp: Any, d: list[int]) -> bool:
    """int8 input whose kernel rows are runs of at least four contiguous bytes: 2-D, one group,
    channels last (a channel's stride 1, a column's the channel count), no dilation along x."""
    if len(k_sp) != 2 or group != 1 or X.dtype != dtypes.int8 or d[1] != 1:
        return False
    st = X.strides or strides_of(X.shape)
    return st[3] == cg and (cg == 1 or st[1] == 1) and k_sp[1] * cg >= 4


def lower_conv_dsp(conv: Any, node: Node, kb: Any, X: Any, B: Any, arith: Any,
                   pads: tuple[list[int], list[int]], s: list[int], d: list[int]) -> None:
    """Conv (``conv``: the Conv op, whose ``_window`` walks a kernel window) with the integer
    arithmetic ``arith`` (quant.IntArith: x_zp, init from the bias, finish = requantise)."""
    Y = kb.outputs[0]
    nd = len(X.shape) - 2
    w = kb.input_const(1)
    in_sp, k_sp, out_sp = X.shape[2:], w.shape[2:], Y.shape[2:]
    pb, pe = pads
    group = node.attrs["group"]
    mg, cg = Y.shape[1] // group, w.shape[1]
    kprod = int(np.prod(k_sp, dtype=np.int64))
    npix = int(np.prod(out_sp, dtype=np.int64))
    # The column: words of two int16 lanes, either (channel pairs x taps), each word a pair
    # of input channels at one tap, or "flat": (channel, tap) flattened, one int16 each, a
    # word any two neighbours (no idle lane with an odd channel count, e.g. one channel).
    kind = kb.knob(CONV.COLUMN, default=CONV.column_default(cg, kprod, nd))
    flat = kind == "flat"
    rows = kind == "rows" and nd == 2  # else pairs
    length = cg * kprod
    padded = any(pb) or any(pe)
    interior = int(np.prod([hi - lo for lo, hi in (
        inside_range(no, ni, k, b, ss, dd) for no, ni, k, b, ss, dd in zip(
            out_sp, in_sp, k_sp, pb, s, d))], dtype=np.int64))
    # Flat columns of channels-last int8 input: each kernel row read four bytes a word load
    # (word_taps' order, the weights permuted to it at compile time), int32 column words; the
    # pixels with taps in the padding through a lanes array (guarded_words), whatever their
    # share (KWS's first conv, 52% of its pixels: 570,510 -> 515,208 estimated cycles on
    # cortex-m4f, 389,230 -> 321,709 on m7, 546,102 -> 443,195 on m33).
    layout = (word_taps(cg, k_sp[0], k_sp[1]) if flat and rows_contiguous(X, cg, group, k_sp, d)
              else None)
    q_len = -(-length // 2) if flat else -(-cg // 2) * kprod  # words per column
    words = layout is not None
    wide = kb.knob(CONV.DSP_WIDE, default=CONV.dsp_wide_default(kb.cpu, flat, words))
    px, tw, full, rest = pixel_tiles(kb, npix, mg,
                                     CONV.dsp_pixels_default(kprod, flat, rows, wide, words))
    prove_bound(kb, arith, B, w, X.dtype, arith.x_zp)
    # Each tile a function of its own (its accumulators alone in the registers), or inline
    # (no call per tile: better up to 32-word columns, 128 on the M4 and M33;
    # dsp_outline_default).
    outline = kb.knob(CONV.OUTLINE,
                      default=CONV.dsp_outline_default(q_len, rows, kb.cpu))
    # The bias in the tiles' first accumulators; the pixels' requantisation side by side.
    biased = kb.knob(CONV.DSP_BIAS_TILE, default=CONV.dsp_bias_tile_default(outline))
    # int16 weights and the bias in the tiles, requantised by aotc_q_requant_h (|acc| < 2^30
    # proven): weights and bias doubled at compile time (|2w| <= 256 fits the lanes), the
    # accumulators 2 * sum exactly, aotc_q_requant_hd then skips its doubling per output.
    # Where the bias is the lowering's folded table (or none), that table is doubled; a bias
    # input of the graph stays (doubling it at run time, an LSL per channel and tile, loses:
    # ResNet-8's k7 on cortex-m4f 1,403,588 -> 1,517,500 estimated cycles).
    rq = getattr(arith, "requant", None)
    folded = getattr(arith, "folded_bias", None)
    doubled = (wide and biased and rq is not None and (folded is not None or B is None)
               and rq.h_applies(kb))
    if doubled:
        rq.doubled_kbs.add(id(kb))
        if folded is not None:
            kb.consts[folded.buf.name] = kb.consts[folded.buf.name] * 2
    # Per group, tile after tile: pack_words of the tile's [cg, K, width] weights, so word
    # (cp * kprod + k) * half + jp of a tile pairs with column word cp * kprod + k.
    parts = []
    for gi in range(group):
        wg = w[gi * mg:(gi + 1) * mg].reshape(mg, cg, kprod)
        for m0 in range(0, mg, tw):
            wt = (wg[m0:m0 + tw].reshape(-1, length).T[:, None, :] if flat
                  else wg[m0:m0 + tw].transpose(1, 2, 0))
            if layout:  # lane h of word q: row 2q + h, the tap word_taps puts there
                wt = np.stack([wt[t] if t is not None else np.zeros_like(wt[0])
                               for pair in layout for t in pair])
            packed = dsp.pack_words(wt)
            if wide:  # the tile's even lanes, then its odd ones
                lanes = dsp.widen(packed)
                if doubled:
                    lanes = (lanes.view("<i2") * 2).astype("<i2").view("<i4")
                parts.append(np.concatenate([lanes[..., 0].reshape(-1),
                                             lanes[..., 1].reshape(-1)]))
            else:
                parts.append(packed.reshape(-1))
    words = kb.const("wq", np.concatenate(parts), I32)
    per_group = sum(p.size for p in parts) // group // (2 if wide else 1)
    tile_words = q_len * (tw // 2)
    kh, kw = (k_sp[0], k_sp[1]) if rows else (1, 1)
    cgp = -(-cg // 2)  # channel pairs
    # rows: the padded input row words the output row's pixels read, per (pair, ky)
    wp = (out_sp[-1] - 1) * s[-1] + (kw - 1) * d[-1] + 1 if rows else 0
    if flat and not layout:
        col = kb.scratch_buffer("col", I16, (px * 2 * q_len,))
    else:
        col = kb.scratch_buffer("col", I32, (cgp * kh * wp,) if rows else (px * q_len,))
    kstrides = strides(k_sp)
    steps = kb.knob(CONV.DSP_UNROLL, default=CONV.dsp_unroll_default(q_len, rows, kb.cpu))
    interleave = kb.knob(CONV.DSP_REQUANT) == "interleaved"
    # Inline tiles requantise their own accumulators (no int32 sums stored and reloaded).
    fused = biased and not outline and kb.knob(
        CONV.DSP_TILE_REQUANT,
        default=CONV.dsp_tile_requant_default(kb.epilogue_steps != [], kb.cpu))
    if fused and getattr(arith, "requant", None) is not None:
        # the tile's channels' three constants from one table (one pointer, not three)
        arith.requant.packed_kbs.add(id(kb))
    # the int32 sums of a group of pixels, for the requantisation loop
    sums = None if fused else kb.scratch_buffer("sum", I32, (px * mg,))
    # 1x1, stride 1, no padding, int8 pairs: a group of 4 pixels' column words from one word
    # load per channel (its 4 pixels are adjacent in the planar input).
    quad_px = (not flat and not rows and kprod == 1 and not padded and px == 4
               and all(v == 1 for v in s) and list(in_sp) == list(out_sp)
               and X.dtype == dtypes.int8 and cg % 2 == 0
               and (X.strides is None or list(X.strides) == list(strides_of(X.shape))))
    Yc = Y.shape[1]
    # (the Cortex-M4 only: on the M7 and M33 the per-pixel loads stall their MACs)
    by_pixel = not flat and not rows and outline and wide and kb.cpu == "cortex-m4"
    # Inline 4-pixel tiles on the M4: a column word's loads in two runs of two pixels, each
    # before its pixels' MACs (one load run of the weights and two words, one of two words).
    split = (not flat and not rows and not outline and px == 4
             and kb.knob(CONV.DSP_SPLIT, default=CONV.dsp_split_default(kb.cpu, q_len, npix)))
    # The 3- or 4-pixel x 2-channel tiles software-pipelined for dual issue (conv.dsp_order;
    # not column rows, nor flat columns built tap by tap).
    pipelined = ((not flat or layout is not None) and not rows and wide and not by_pixel
                 and px in (3, 4) and tw == 2
                 and kb.knob(CONV.DSP_ORDER, default=CONV.dsp_order_default(kb.cpu, q_len))
                 == "pipelined")
    # (the Cortex-M33: each pixel's column word loaded one pixel ahead of its MACs)
    staggered = (not flat and not rows and not by_pixel
                 and kb.knob(CONV.DSP_STAGGER, default=CONV.dsp_stagger_default(kb.cpu, q_len)))

    def column(n: Expr, gi: Expr, pix: Expr, slot: int) -> list[Expr]:
        """Fill column ``slot`` for output pixel ``pix`` (flat); returns its coordinates."""
        o = pixel_coords(kb, pix, out_sp)
        if flat:
            return flat_column(n, gi, o, slot)
        if padded:  # taps in the padding stay the zero pair
            with kb.loop(q_len, "q") as q:
                kb.store(col, [slot * q_len + q], Const(0, I32))

        def taps(cp: Expr, paired: bool) -> None:
            ic = gi * cg + 2 * cp if group > 1 else 2 * cp

            def tap(xv: Expr, kk: list[Expr], ii: list[Expr]) -> None:
                kflat = flat_tap(kk, kstrides)
                x1 = X[[n, ic + 1, *ii]] if paired else None
                kb.store(col, [slot * q_len + cp * kprod + kflat],
                         dsp.x_pair(xv, x1, arith.x_zp))

            conv._window(kb, 0, nd, X, tap, n, ic, o, [], [], pb, pe, s, d, None, in_sp, k_sp)

        if cg // 2:
            with kb.loop(cg // 2, "cp") as cp:
                taps(cp, True)
        if cg % 2:
            taps(Const(cg // 2), False)
        return o

    def flat_column(n: Expr, gi: Expr, o: list[Expr], slot: int) -> list[Expr]:
        at = slot * 2 * q_len

        def value(xv: Expr) -> Expr:
            v = Cast(xv, I32) - Const(arith.x_zp, I32) if arith.x_zp else Cast(xv, I32)
            return Cast(v, I16)

        def guarded() -> None:
            if padded:  # taps in the padding stay 0
                with kb.loop(2 * q_len, "q") as q:
                    kb.store(col, [at + q], Const(0, I16))
            elif length % 2:  # the idle lane of the last word
                kb.store(col, [at + length], Const(0, I16))
            with kb.loop(cg, "c") as c:
                ic = gi * cg + c if group > 1 else c

                def tap(xv: Expr, kk: list[Expr], ii: list[Expr]) -> None:
                    kb.store(col, [at + c * kprod + flat_tap(kk, kstrides)], value(xv))

                conv._window(kb, 0, nd, X, tap, n, ic, o, [], [], pb, pe, s, d, None, in_sp,
                             k_sp)

        # A pixel whose taps all fall inside the input: its column without a bounds check or
        # a zero fill first, the channels' taps unrolled; where most pixels are (FAST_INSIDE),
        # or with the word column (layout) at any share.
        if layout and not padded:
            word_column(n, o, slot)
            return o
        if not layout and (not padded or interior < FAST_INSIDE * npix):
            guarded()
            return o
        inside = [cond for j in range(nd) for cond in (
            [cmp("ge", o[j] * s[j] - pb[j], 0)] if pb[j] > 0 else []) + (
            [cmp("lt", o[j] * s[j] + (k_sp[j] - 1) * d[j] - pb[j], in_sp[j])]
            if pe[j] > 0 else [])]
        outside = [cond for j in range(nd) for cond in (
            [cmp("lt", o[j] * s[j] - pb[j], 0)] if pb[j] > 0 else []) + (
            [cmp("ge", o[j] * s[j] + (k_sp[j] - 1) * d[j] - pb[j], in_sp[j])]
            if pe[j] > 0 else [])]
        if layout:
            with kb.if_(land(*inside)):
                word_column(n, o, slot)
            with kb.if_(lor(*outside)):
                guarded_words(n, o, slot, value)
            return o
        with kb.if_(land(*inside)):
            if length % 2:
                kb.store(col, [at + length], Const(0, I16))
            with kb.loop(cg, "c", unroll=True) as c:
                ic = gi * cg + c if group > 1 else c
                for kk in np.ndindex(*k_sp):
                    ii = [ov * ss + kv * dd - b for ov, ss, kv, dd, b in zip(o, s, kk, d, pb)]
                    kb.store(col, [at + c * kprod + flat_tap([Const(int(k)) for k in kk],
                                                             kstrides)], value(X[[n, ic, *ii]]))
        with kb.if_(lor(*outside)):
            guarded()
        return o

    def quad_columns(n: Expr, gi: Expr, pix0: Expr) -> None:
        """The 4 pixels pix0 .. pix0 + 3's pair words of a 1x1 conv (quad_px): per channel
        pair one LDR of each channel's 4 pixels, SXTB16 / SXTB16 ROR 8 give their (x0, x2) and
        (x1, x3), packed into the pixels' pair words by halves (PKHBT, PKHTB)."""
        with kb.loop(cg // 2, "cp") as cp:
            ic = gi * cg + 2 * cp if group > 1 else 2 * cp
            a, b = (dsp.x_quad(kb.local(dsp.ld_word8(X.flat((n * X.shape[1] + c) * npix + pix0)),
                                        "xa", I32), arith.x_zp) for c in (ic, ic + 1))
            lanes = [(kb.local(a[h], "xe", I32), kb.local(b[h], "xe", I32)) for h in range(2)]
            for p in range(4):
                lo_ch, hi_ch = lanes[p % 2]
                kb.store(col, [p * q_len + cp], dsp.halves(lo_ch, hi_ch, p // 2))

    def requant_tile(accs: list[Any], n: Expr, gi: Expr, ml: Expr, width: int,
                     coords: list[list[Expr]], pix0: Expr) -> None:
        """fused: the tile's accumulators (biased) requantised and stored, channel by
        channel (its constants loaded once for the pixels; conv.dsp_requant as the loop's)."""
        for j in range(width):
            m = gi * mg + ml + j
            vals: list[Expr] = [acc[[Const(j)]] for acc in accs]
            if interleave:
                vals = [kb.local(arith.finish(kb, v, m, B), "v") for v in vals]
            for p, (o, v) in enumerate(zip(coords, vals)):
                kb.store_output([n, m, *o], v if interleave else arith.finish(kb, v, m, B),
                                flat=(n * Yc + m) * npix + pix0 + p)

    def word_column(n: Expr, o: list[Expr], slot: int) -> None:
        """A pixel's column (int32 words, word_taps' order) from its kernel rows, all inside
        the input: four bytes a word load (two words by SXTB16), the rest two bytes a word."""
        assert layout is not None
        at, q, left = slot * q_len, 0, []
        row = k_sp[1] * cg
        # The window's first byte once; each row's bytes at constant offsets from it (one
        # base register, immediate offsets).
        base = kb.local(X.index([n, 0, o[0] * s[0] - pb[0], o[1] * s[1] - pb[1]]), "xb")
        ystride = (X.strides or strides_of(X.shape))[2] * d[0]
        for ky in range(k_sp[0]):
            for b in range(0, row - row % 4, 4):
                word = kb.local(dsp.ld_word8(Load(X.buf, base + (ky * ystride + b))), "xw", I32)
                for half in dsp.x_quad(word, arith.x_zp):
                    kb.store(col, [at + q], half)
                    q += 1
            left += [Load(X.buf, base + (ky * ystride + b)) for b in range(row - row % 4, row)]
        for i in range(0, len(left), 2):
            kb.store(col, [at + q], dsp.x_pair(left[i], left[i + 1] if i + 1 < len(left)
                                               else None, arith.x_zp))
            q += 1

    def guarded_words(n: Expr, o: list[Expr], slot: int, value: Any) -> None:
        """word_column for a pixel with taps in the padding: the int16 lanes in a local
        array (0 in the padding, each tap checked), then copied a word at a time."""
        assert layout is not None
        lane = {t: 2 * q + h for q, pair in enumerate(layout) for h, t in enumerate(pair)
                if t is not None}
        lanes = kb.local_array(2 * q_len, "lanes", I16)
        with kb.loop(2 * q_len, "q") as q:
            kb.store(lanes, [q], Const(0, I16))
        # A loop over the kernel rows (kx and the channels unrolled): word_taps puts a row's
        # quads' bytes, and its last bytes, a fixed number of lanes after the row before's.
        kh_, kw_ = k_sp[0], k_sp[1]
        first = {(c, kx): lane[c * kprod + kx] for c in range(cg) for kx in range(kw_)}
        step = {(c, kx): lane[c * kprod + kw_ + kx] - first[c, kx] if kh_ > 1 else 0
                for c, kx in first}
        assert all(lane[c * kprod + ky * kw_ + kx] == first[c, kx] + ky * step[c, kx]
                   for c, kx in first for ky in range(kh_))

        def bounded(j: int, i: Expr) -> list[Expr]:
            return ([cmp("ge", i, 0)] if pb[j] > 0 else []) + (
                [cmp("lt", i, in_sp[j])] if pe[j] > 0 else [])

        with kb.loop(kh_, "ky") as ky:
            iy = kb.local(o[0] * s[0] + ky * d[0] - pb[0], "iy")
            ycond = bounded(0, iy)
            with kb.if_(land(*ycond)) if ycond else kb.block():
                for kx in range(kw_):
                    ix = o[1] * s[1] + kx * d[1] - pb[1]
                    xcond = bounded(1, ix)
                    with kb.if_(land(*xcond)) if xcond else kb.block():
                        for c in range(cg):
                            kb.store(lanes, [ky * step[c, kx] + first[c, kx]],
                                     value(X[[n, c, iy, ix]]))
        for q in range(q_len):
            kb.store(col, [slot * q_len + q], call("ld_pair16", lanes[[2 * q]], dtype=I32))

    def build_rows(n: Expr, gi: Expr, oy: Expr) -> None:
        """rows: col[(cp * kh + ky) * wp + x] = the pair word of input row oy * s + ky * d -
        pad at padded column x (x - pad the input's), 0 in the padding."""
        lo = min(pb[1], wp)
        nx = max(0, min(in_sp[1], wp - lo))  # input columns in the row window
        with kb.loop(kh, "ky", unroll=True) as ky:
            iy = kb.local(oy * s[0] + ky * d[0] - pb[0], "iy")
            conds = ([cmp("ge", iy, 0)] if pb[0] > 0 else []) + (
                [cmp("lt", iy, in_sp[0])] if pe[0] > 0 or pb[0] < 0 else [])

            def fill(cp: Expr, paired: bool) -> None:
                ic = gi * cg + 2 * cp if group > 1 else 2 * cp
                at = (cp * kh + ky) * wp
                for z in list(range(lo)) + list(range(lo + nx, wp)):
                    kb.store(col, [at + z], Const(0, I32))
                # int8: four columns of both channels a step, one word load each (ld_word8):
                # SXTB16 and SXTB16 ROR 8 give each channel's (x0, x2) and (x1, x3), packed
                # into the four pair words by halves (PKHBT, PKHTB).
                quads = nx // 4 if paired and X.dtype == dtypes.int8 else 0
                if quads:
                    with kb.loop(quads, "ix") as i4:
                        a = dsp.x_quad(kb.local(dsp.ld_word8(X[[n, ic, iy, i4 * 4]]), "xa", I32),
                                       arith.x_zp)
                        b = dsp.x_quad(kb.local(dsp.ld_word8(X[[n, ic + 1, iy, i4 * 4]]), "xb",
                                                I32), arith.x_zp)
                        lanes = [(kb.local(a[h], "xe", I32), kb.local(b[h], "xe", I32))
                                 for h in range(2)]
                        for k in range(4):
                            lo_ch, hi_ch = lanes[k % 2]
                            kb.store(col, [at + lo + i4 * 4 + k], dsp.halves(lo_ch, hi_ch, k // 2))
                with kb.loop(nx, "ix", start=4 * quads) as ix:
                    x1 = X[[n, ic + 1, iy, ix]] if paired else None
                    kb.store(col, [at + lo + ix], dsp.x_pair(X[[n, ic, iy, ix]], x1, arith.x_zp))

            def pairs() -> None:
                if cg // 2:
                    with kb.loop(cg // 2, "cp") as cp:
                        fill(cp, True)
                if cg % 2:
                    fill(Const(cg // 2), False)

            if not conds:
                pairs()
                return
            with kb.if_(land(*conds)):
                pairs()
            with kb.if_(lor(*[cmp("lt", iy, 0), cmp("ge", iy, in_sp[0])])):
                with kb.loop(cgp, "cp") as cp:
                    with kb.loop(wp, "z") as z:
                        kb.store(col, [(cp * kh + ky) * wp + z], Const(0, I32))

    def tile(gi: Expr, ml: Expr, base: Expr, width: int, pixels: int,
             ox0: Expr | None = None, out: tuple[Expr, list[list[Expr]], Expr] | None = None
             ) -> None:
        """Channels ml .. ml + width of group gi for the pixels' columns: sums to ``sums``
        (rows: the pixels ox0, ox0 + 1, ... of the row the column rows hold); fused: the
        outputs, ``out`` = (batch item, the pixels' coordinates, the first's flat index)."""

        def finish() -> None:
            if fused:
                assert out is not None
                requant_tile(accs, out[0], gi, ml, width, out[1], out[2])
            else:
                store_sums(kb, sums, accs, mg, ml, width)

        half = -(-width // 2)
        accs = (init_accumulators(kb, pixels, width, lambda j: arith.init(B, gi * mg + ml + j))
                if biased else zero_accumulators(kb, pixels, width))

        def macs(q: Expr, xps: list[Expr], into: list[Any] | None = None) -> None:
            tiles = accs if into is None else into
            if wide:
                dsp.mac_tile(kb, tiles, words, base * 2 + q * half, width, xps, True,
                             q_len * half)
            else:
                dsp.mac_tile(kb, tiles, words, base + q * half, width, xps)

        if rows:
            assert ox0 is not None
            nrow = cgp * kh
            # Column rows (kw words each) per iteration: the most that divide the rows and fit
            # in ``steps`` words (no rest after the loop; at least one).
            ur = max(u for u in range(1, max(1, steps // kw) + 1) if nrow % u == 0)

            def step_row(r: Expr) -> None:
                # Pixel p's word kx is at p * s + kx * d of the row: neighbours share loads.
                loaded: dict[int, Expr] = {}
                for kx in range(kw):
                    xps = []
                    for p in range(pixels):
                        off = p * s[1] + kx * d[1]
                        if off not in loaded:
                            loaded[off] = kb.local(col.flat(r * wp + ox0 * s[1] + off), "xp", I32)
                        xps.append(loaded[off])
                    macs(r * kw + kx, xps)

            if nrow // ur > 1 or ur == 1:
                with kb.loop(nrow // ur, "r") as rs:
                    for u in range(ur):
                        step_row(rs * ur + u)
            else:
                for u in range(nrow - nrow % ur):
                    step_row(Const(u))
            for u in range(nrow - nrow % ur, nrow):
                step_row(Const(u))
            finish()
            return

        # (the full pixel groups; a rest of fewer pixels keeps the compiler's order)
        if pipelined and pixels == px and width == 2:
            pipelined_steps(accs, base)
            finish()
            return

        def step(q: Expr) -> None:
            if by_pixel:
                # Each pixel's column word loaded just before its MACs: one activation register
                # instead of one per pixel (the weight lanes' repeated loads are one after CSE).
                for p in range(pixels):
                    xp = kb.local(col.flat(p * q_len + q), "xp", I32)
                    macs(q, [xp], [accs[p]])
                return
            if split and len(accs) == 4:
                for two in ((0, 1), (2, 3)):
                    xph = [kb.local(col.flat(p * q_len + q), "xp", I32) for p in two]
                    macs(q, xph, [accs[p] for p in two])
                return
            if staggered:
                loads = [col.flat(p * q_len + q) for p in range(pixels)]
                if wide:
                    dsp.mac_tile_staggered(kb, accs, words, base * 2 + q * half, width, loads,
                                           True, q_len * half)
                else:
                    dsp.mac_tile_staggered(kb, accs, words, base + q * half, width, loads)
                return
            xps = [kb.local(call("ld_pair16", col.flat(2 * (p * q_len + q)), dtype=I32)
                            if flat and not layout else col.flat(p * q_len + q), "xp", I32)
                   for p in range(pixels)]
            macs(q, xps)

        # ``steps`` words of the column per iteration (one loop counter, compare and branch),
        # the rest after the loop, in order: the same sums.
        if q_len // steps > 1 or steps == 1:
            with kb.loop(q_len // steps, "q") as qs:
                for u in range(steps):
                    step(qs * steps + u)
        else:
            for u in range(q_len - q_len % steps):
                step(Const(u))
        for u in range(q_len - q_len % steps, q_len):
            step(Const(u))
        finish()

    def pipelined_steps(accs: list[Any], base: Expr) -> None:
        """conv.dsp_order=pipelined: a tile of 3 or 4 pixels x 2 channels (int16 weights), the
        column unrolled, software-pipelined for dual issue: each SMLAD (a scheduling barrier)
        is followed by at most one load, the next pixel's column word or the next step's
        weight lanes, at least two SMLADs before their use (no load-use stall); four operand
        registers: the step's two weight lanes, two column words. The same SMLADs on the same
        operands in the same order per accumulator: the same sums."""
        # words.flat(row + q): step q's even lanes, + q_len its odd ones; the row a local of
        # its own (gcc -Os then addresses all the tile's weights from one base register)
        row = kb.local(base * 2, "wr")
        npx = len(accs)

        def lane(q: int, h: int) -> Expr:
            return kb.local(words.flat(row + (q + h * q_len)), "wl", I32)

        def xp(q: int, p: int) -> Expr:
            return kb.local(col.flat(p * q_len + q), "xp", I32)

        def mac(p: int, j: int, w: Expr, x: Expr) -> None:
            acc = accs[p]
            kb.store(acc, [j], call("smlad_ordered", w, x, acc[[j]], dtype=I32))

        w = [lane(0, 0), lane(0, 1)]
        xs = {0: xp(0, 0)}
        for q in range(q_len):
            more = q + 1 < q_len
            nw: list[Expr] = []
            nx0 = None
            for p in range(npx):
                mac(p, 0, w[0], xs[p])
                if p + 1 < npx:  # the next pixel's word, two SMLADs ahead
                    xs[p + 1] = xp(q, p + 1)
                elif more:  # the last use of the even lane: the next step's
                    nw.append(lane(q + 1, 0))
                mac(p, 1, w[1], xs[p])
                if more and p == npx - 2:  # the next step's first word
                    nx0 = xp(q + 1, 0)
                elif more and p == npx - 1:
                    nw.append(lane(q + 1, 1))
            if more:
                assert nx0 is not None
                w, xs = nw, {0: nx0}

    def tiles(gi: Expr, count: int, out: tuple[Expr, list[list[Expr]], Expr],
              ox0: Expr | None = None) -> None:
        """The output-channel tiles of group gi for ``count`` pixels, each outlined or inline
        (conv.outline): the full tiles in a loop, then the rest (rows: from pixel ox0 on);
        ``out`` as tile() takes it."""
        gbase = gi * per_group
        if full:
            with kb.loop(full, "mt") as mt:
                with kb.outline(opaque=True) if outline else kb.block():
                    tile(gi, mt * tw, gbase + mt * tile_words, tw, count, ox0, out)
        if rest:
            with kb.outline(opaque=True) if outline else kb.block():
                tile(gi, Const(full * tw), gbase + full * tile_words, rest, count, ox0, out)

    def pixels(n: Expr, gi: Expr, pix0: Expr, count: int) -> None:
        if quad_px and count == 4:
            quad_columns(n, gi, pix0)
            coords = [pixel_coords(kb, pix0 + p, out_sp) for p in range(count)]
        else:
            coords = [column(n, gi, pix0 + p, p) for p in range(count)]
        tiles(gi, count, (n, coords, pix0))
        if not fused:
            requantise_group(kb, sums, coords, n, gi, mg, arith, B, pix0=pix0, biased=biased,
                             interleave=interleave)

    def row_pixels(n: Expr, gi: Expr, oy: Expr, ox0: Expr, count: int) -> None:
        ox = kb.local(ox0, "ox")
        coords = [[oy, ox + p] for p in range(count)]
        out = (n, coords, oy * out_sp[1] + ox)
        tiles(gi, count, out, ox0)
        if not fused:
            requantise_group(kb, sums, coords, n, gi, mg, arith, B, pix0=out[2], biased=biased,
                             interleave=interleave)

    if not rows:
        over_pixel_groups(kb, Y.shape[0], group, npix, px, pixels)
        return
    wo = out_sp[1]
    with kb.loop(Y.shape[0], "n") as n:
        with kb.loop(group, "g") as gi:
            with kb.loop(out_sp[0], "oy") as oy:
                build_rows(n, gi, oy)
                if wo // px:
                    with kb.loop(wo // px, "ox") as ox:
                        with kb.block():
                            row_pixels(n, gi, oy, ox * px, px)
                if wo % px:
                    with kb.block():
                        row_pixels(n, gi, oy, Const(wo - wo % px), wo % px)
