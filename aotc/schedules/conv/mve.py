"""Integer convolution on cores with Helium (board feature "mve"): Conv.lower's schedule for
int8 activations and int8 weights without a zero point, through loops/mve.py's dot products.

Per group of output pixels (the conv.pixels knob), the int8 activations a pixel reads are first
gathered into a scratch column (im2col) in the order of a weight row, (input channel, kernel
tap); a tap in the padding holds the input zero point, which the bias folding turned into a
zero term (the bias holds -x_zp * sum(w), so every tap is a raw int8 x int8 product). Each
output-channel tile then reads the column 16 bytes at a time against the weight rows, padded to
16 at compile time. The int32 sums are those of the generic schedule (wrapping alike), so both
give the same bytes."""

from __future__ import annotations

from typing import Any

import numpy as np

from aotc import dtypes
from aotc.ir.graph import Node
from aotc.loops import mve
from aotc.loops.loop_ir import BOOL, Const, Expr, Store, Un, cmp, land
from aotc.schedules.conv import knobs as CONV
from aotc.schedules.conv.pixels import (
    flat_tap,
    over_pixel_groups,
    pixel_coords,
    pixel_tiles,
    requantise_group,
    store_sums,
    strides,
    zero_accumulators,
)

I8 = dtypes.int8
I32 = dtypes.int32


def mve_conv_ok(node: Node, kb: Any, arith: Any) -> bool:
    """Whether Conv.lower takes this schedule (its tiled path, not in place), given that the
    input zero point gets folded into the bias: conv_matmul.py folds it even with padding then."""
    mg = kb.outputs[0].shape[1] // node.attrs["group"]
    return (mve.usable(kb, kb.inputs[0].dtype, kb.input_const(1), arith)
            and node.attrs.get("_inplace") is None and mg >= 2
            and kb.knob(CONV.PATH) == "simd")


def lower_conv_mve(conv: Any, node: Node, kb: Any, X: Any, B: Any, arith: Any,
                   pads: tuple[list[int], list[int]], s: list[int], d: list[int]) -> None:
    """Conv (``conv``: the Conv op, whose ``_window`` walks a kernel window) with the integer
    arithmetic ``arith`` (quant.IntArith with the input zero point folded into the bias)."""
    Y = kb.outputs[0]
    nd = len(X.shape) - 2
    w = kb.input_const(1)
    in_sp, k_sp, out_sp = X.shape[2:], w.shape[2:], Y.shape[2:]
    pb, pe = pads
    group = node.attrs["group"]
    mg, cg = Y.shape[1] // group, w.shape[1]
    kprod = int(np.prod(k_sp, dtype=np.int64))
    npix = int(np.prod(out_sp, dtype=np.int64))
    length = cg * kprod  # a column, and a weight row before padding
    row = mve.padded(length)
    px, tw, full, rest = pixel_tiles(kb, npix, mg)
    words = kb.const("wq", mve.pack_rows(w.reshape(w.shape[0], length)).reshape(-1), I8)
    offsets = gather_offsets(kb, X, w.shape[1], k_sp, d)
    # A gathered column writes whole vectors: up to 7 bytes past the last one.
    col = kb.scratch_buffer("col", I8, (px * length + (mve.HALVES - 1
                                                       if offsets is not None else 0),))
    sums = kb.scratch_buffer("sum", I32, (px * mg,))  # the int32 sums of a group of pixels
    kstrides = strides(k_sp)
    padded = any(pb) or any(pe)
    vq = vector_requant(kb, arith, B, mg)
    order = kb.knob(CONV.MVE_ORDER)
    ordered = False if order == "compiler" else order

    def column(n: Expr, gi: Expr, pix: Expr, slot: int) -> list[Expr]:
        """Fill column ``slot`` for output pixel ``pix`` (flat); returns its coordinates."""
        o = pixel_coords(kb, pix, out_sp)
        if offsets is not None:
            top = [ov * ss - b for ov, ss, b in zip(o, s, pb)]

            def gathered() -> None:
                src = X[[n, gi * cg if group > 1 else 0, *top]]
                mve.gather_copy(kb, col, Const(slot * length), src, offsets, length)

            if not padded:
                gathered()
                return o
            inside = land(*[cmp(op, t + (k - 1) * dd if op == "lt" else t, lim)
                            for t, k, dd, i in zip(top, k_sp, d, in_sp)
                            for op, lim in (("ge", 0), ("lt", i))])
            with kb.if_(inside):
                gathered()
            with kb.if_(Un("lnot", inside, BOOL)):
                byte_column(n, gi, o, slot)
            return o
        byte_column(n, gi, o, slot)
        return o

    def byte_column(n: Expr, gi: Expr, o: list[Expr], slot: int) -> None:
        """Column ``slot`` byte by byte, the zero point where taps fall into the padding."""
        if padded:  # taps in the padding read the zero point: (x_zp - x_zp) * w = 0
            with kb.loop(length, "q") as q:
                kb.store(col, [slot * length + q], Const(arith.x_zp_input, I8))

        def tap(c: Expr) -> None:
            ic = gi * cg + c if group > 1 else c

            def one(xv: Expr, kk: list[Expr], ii: list[Expr]) -> None:
                kflat = flat_tap(kk, kstrides)
                kb.store(col, [slot * length + c * kprod + kflat], xv)

            conv._window(kb, 0, nd, X, one, n, ic, o, [], [], pb, pe, s, d, None, in_sp, k_sp)

        with kb.loop(cg, "c") as c:
            tap(c)

    def tile(gi: Expr, ml: Expr, width: int, pixels: int) -> None:
        """Channels ml .. ml + width of group gi for the pixels' columns: sums to ``sums``."""
        accs = zero_accumulators(kb, pixels, width)
        mve.dot_tile(kb, accs, lambda p, i: col.flat(p * length + i),
                     lambda j, i: words.flat((gi * mg + ml + j) * row + i), length, width,
                     ordered)
        store_sums(kb, sums, accs, mg, ml, width)

    def pixels(n: Expr, gi: Expr, pix0: Expr, count: int) -> None:
        coords = [column(n, gi, pix0 + p, p) for p in range(count)]
        with kb.outline():  # all tiles in one function: its setup once per pixel group
            if full:
                with kb.loop(full, "mt") as mt:
                    tile(gi, mt * tw, tw, count)
            if rest:
                tile(gi, Const(full * tw), rest, count)
        # Outlined: the kernel's other live values would push its pointers to the stack.
        with kb.outline():
            first = 0
            if vq is not None:
                first = requantise_vectors(kb, vq, sums, coords, n, gi, mg, arith, B)
            if first < mg:
                requantise_group(kb, sums, coords, n, gi, mg, arith, B, first)

    over_pixel_groups(kb, Y.shape[0], group, npix, px, pixels)


Epilogue4 = tuple  # () or (op, node, position of the conv's value, the other operand)


def vector_requant(kb: Any, arith: Any, B: Any, channels: int
                   ) -> tuple[mve.Requant4, Epilogue4] | None:
    """The int32x4_t requantisation (knob conv.requant), where it applies: tflite-mode int8
    outputs, an int32 bias, 4 channels or more, and no fused epilogue or a residual add with
    a vector form (qlinear.QLinearAdd.vector_expr) of an operand shaped like the output."""
    ep = epilogue4(kb)
    if (channels < mve.WORDS or ep is None or kb.outputs[0].dtype != I8
            or mve.requant_params(getattr(arith, "requant", None)) is None
            or (B is not None and B.dtype != I32 and arith.folded_bias is None)):
        return None
    if kb.knob(CONV.REQUANT) != "vector":
        return None
    return mve.Requant4(kb, arith.requant), ep


def epilogue4(kb: Any) -> Epilogue4 | None:
    steps = kb.epilogue_steps
    if steps is None or len(steps) > 1:
        return None
    if not steps:
        return ()
    op, node, pos, refs = steps[0]
    other = [r for k, r in enumerate(refs) if k != pos]
    Y = kb.outputs[0]
    if (getattr(op, "vector_expr", None) is None or node.attrs.get("_requant", "tflite") != "tflite"
            or len(other) != 1 or other[0] is None or other[0].shape != Y.shape
            or other[0].dtype != I8 or other[0].strides is not None):
        return None
    return op, node, pos, other[0]


def finish4(kb: Any, ep: Epilogue4, v: Expr, other: Any) -> Expr:
    """The fused epilogue ``ep`` of the int32x4_t ``v``; other(ref) loads the lanes of the
    epilogue's other operand."""
    if not ep:
        return v
    op, node, pos, ref = ep
    v = kb.local(v, "v", mve.INT32X4)
    b = other(ref)
    return op.vector_expr(kb, *((v, b) if pos == 0 else (b, v)), node)


def requantise_vectors(kb: Any, vq: tuple[mve.Requant4, Epilogue4], sums: Any,
                       coords: list[list[Expr]], n: Expr, gi: Expr, mg: int, arith: Any,
                       B: Any) -> int:
    """Requantise a group's sums 4 channels per vector (each channel vector's constants
    loaded once for the group's pixels), each vector's bytes scattered to its 4 channel
    planes; returns the first channel left to the scalar loop."""
    Y = kb.outputs[0]
    offsets = kb.local(mve.lane_offsets(int(np.prod(Y.shape[2:], dtype=np.int64))), "offs",
                       mve.UINT32X4)
    bias = arith.folded_bias if arith.folded_bias is not None else B
    with kb.loop(mg // mve.WORDS, "jv") as jv:
        j = jv * mve.WORDS
        m = gi * mg + j
        rq, ep = vq
        c = rq.consts(kb, m, mve.WORDS)
        bv = kb.local(mve.load_words(bias.flat(m)), "bv", mve.INT32X4) if bias is not None \
            else None
        for p, o in enumerate(coords):
            acc = mve.load_words(sums.flat(p * mg + j))
            if bv is not None:
                acc = mve.vec("vaddq_s32", acc, bv)
            at = Y.index([n, m, *o])
            v = finish4(kb, ep, rq(kb, acc, c),
                        lambda r, at=at: mve.gather_bytes(r.flat(at), offsets))
            kb.emit(Store(Y.buf, at, mve.scatter_bytes(offsets, v)))
    return mg - mg % mve.WORDS


def requantise_plane(kb: Any, vq: tuple[mve.Requant4, Epilogue4], sums: Any, size: int,
                     base: Expr, m: Expr, arith: Any, B: Any) -> None:
    """Requantise channel m's block of ``size`` sums (bias included) 4 outputs per vector,
    stored contiguously from output index ``base`` on; the last size % 4 one at a time."""
    Y = kb.outputs[0]
    rq, ep = vq
    c = rq.consts(kb, m, 1)
    with kb.loop(size // mve.WORDS, "q") as q:
        at = base + q * mve.WORDS
        v = finish4(kb, ep, rq(kb, mve.load_words(sums.flat(q * mve.WORDS)), c),
                    lambda r: mve.load_words(r.flat(at)))
        kb.emit(Store(Y.buf, at, mve.store_bytes(v)))
    for t in range(size - size % mve.WORDS, size):
        kb.store_output([], arith.finish(kb, sums.flat(t), m, B), flat=base + t)


def gather_offsets(kb: Any, X: Any, cg: int, k_sp: Any, d: list[int]) -> Any:
    """The byte offsets, from a pixel's first tap of its group's first channel, of its column's
    taps in (channel, tap) order (knob conv.gather): a uint16 table padded to whole vectors,
    or None where they do not fit 16 bits."""
    st = X.strides or strides(X.shape)
    rel = np.zeros((cg, *k_sp), np.int64)
    rel += np.arange(cg).reshape(-1, *[1] * len(k_sp)) * st[1]
    for i, (k, dd) in enumerate(zip(k_sp, d)):
        shape = [1] * (1 + len(k_sp))
        shape[1 + i] = k
        rel += np.arange(k).reshape(shape) * dd * st[2 + i]
    if rel.max() >= mve.GATHER_REACH or not kb.knob(CONV.GATHER):
        return None
    flat = np.zeros(-(-rel.size // mve.HALVES) * mve.HALVES, np.uint16)
    flat[:rel.size] = rel.reshape(-1)
    return kb.const("goff", flat, dtypes.BY_NAME["uint16"])
