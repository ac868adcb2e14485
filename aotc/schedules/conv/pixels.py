"""The loop skeleton the column (im2col) conv schedules share (dsp.py, mve.py): output
pixels taken ``px`` at a time, each pixel's flat index decoded into its coordinates, kernel taps
flattened, per-pixel accumulators of an output-channel tile started at 0 and written to the
int32 ``sums`` scratch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.loops.loop_ir import Const, Expr
from aotc.schedules.conv import knobs as CONV


def strides(shape: Sequence[int]) -> list[int]:
    """Row-major strides, in elements."""
    return [int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape))]


def pixel_coords(kb: Any, pix: Expr, out_sp: Sequence[int]) -> list[Expr]:
    """The coordinates of output pixel ``pix`` (flat), as locals o0, o1, ..."""
    o: list[Expr] = []
    for k, st in enumerate(strides(out_sp)):
        v = pix // st if st > 1 else pix
        o.append(kb.local(v % out_sp[k] if k else v, f"o{k}"))
    return o


def flat_tap(kk: Sequence[Expr], kstrides: Sequence[int]) -> Expr:
    """The flat index of kernel tap ``kk`` (kstrides: strides(kernel shape))."""
    kflat: Expr = Const(0)
    for kv, st in zip(kk, kstrides):
        kflat = kflat + kv * st
    return kflat


def zero_accumulators(kb: Any, pixels: int, width: int) -> list[Any]:
    """One int32 accumulator array of ``width`` output channels per pixel, all 0."""
    accs = []
    for _ in range(pixels):
        acc = kb.local_array(width, "acc", dtypes.int32)
        with kb.loop(width, "j", unroll=True) as j:
            kb.store(acc, [j], Const(0, dtypes.int32))
        accs.append(acc)
    return accs


def init_accumulators(kb: Any, pixels: int, width: int, init: Callable[[int], Expr]
                      ) -> list[Any]:
    """As zero_accumulators, each channel j's accumulators from ``init(j)`` (its bias: one
    load a channel, shared by the pixels)."""
    values = [kb.local(init(j), "b") for j in range(width)]
    accs = []
    for _ in range(pixels):
        acc = kb.local_array(width, "acc", dtypes.int32)
        for j, v in enumerate(values):
            kb.store(acc, [Const(j)], v)
        accs.append(acc)
    return accs


def pixel_tiles(kb: Any, npix: int, mg: int,
                pixels: int | None = None) -> tuple[int, int, int, int]:
    """(pixels per group, channels per tile, full tiles, channels left) from the knobs
    conv.pixels (default ``pixels``, else the knob's) and conv.simd_tile: one pixel per
    group when there are fewer pixels."""
    group_px, tw = kb.knob(CONV.PIXELS, default=pixels), kb.knob(CONV.SIMD_TILE)
    full, rest = divmod(mg, tw)
    return (group_px if npix >= group_px else 1), tw, full, rest


def requantise_group(kb: Any, sums: Any, coords: Sequence[list[Expr]], n: Expr, gi: Expr,
                     mg: int, arith: Any, B: Any, first: int = 0,
                     pix0: Expr | None = None, biased: bool = False,
                     interleave: bool = False) -> None:
    """The bias, then requantisation, of a group's sums (its channels from ``first`` on),
    after them and in a loop of their own: the tiles keep just their accumulators and
    pointers in registers (the int32 sum wraps alike in any order). The pixels of the group
    share each channel's constants. With ``pix0`` (the group's first pixel, flat) the stores
    address the output by flat index, the group's pixels one output pointer apart.
    ``biased``: the sums already hold the bias (init_accumulators). ``interleave``: a
    channel's sums of all the group's pixels loaded first, then each requantised into a
    local, then stored: the pixels' serial chains (SMMULR, add, shift, SSAT) side by side in
    the C, which gcc -Os keeps (conv.dsp_requant)."""
    Y = kb.outputs[0]
    npix = int(np.prod(Y.shape[2:], dtype=np.int64))
    with kb.loop(mg, "j", start=first) as j:
        m = gi * mg + j
        accs: list[Expr] = [sums[[p * mg + j]] if biased else sums[[p * mg + j]]
                            + arith.init(B, m) for p in range(len(coords))]
        if interleave:
            accs = [kb.local(a, "a") for a in accs]
            accs = [kb.local(arith.finish(kb, a, m, B), "v") for a in accs]
        for p, (o, a) in enumerate(zip(coords, accs)):
            flat = None if pix0 is None else (n * Y.shape[1] + m) * npix + pix0 + p
            kb.store_output([n, m, *o], a if interleave else arith.finish(kb, a, m, B),
                            flat=flat)


def store_sums(kb: Any, sums: Any, accs: Sequence[Any], mg: int, ml: Expr, width: int) -> None:
    """Pixel p's sums of channels ml .. ml + width go to sums[p * mg + ml + j]."""
    for p, acc in enumerate(accs):
        with kb.loop(width, "j", unroll=True) as j:
            kb.store(sums, [p * mg + ml + j], acc[[j]])


def over_pixel_groups(kb: Any, batch: int, group: int, npix: int, px: int,
                      pixels: Callable[[Expr, Expr, Expr, int], None]) -> None:
    """pixels(n, g, first pixel, count) for every group of ``px`` output pixels of every batch
    item and conv group; the last npix % px pixels as a group of their own."""
    with kb.loop(batch, "n") as n:
        with kb.loop(group, "g") as gi:
            with kb.loop(npix // px, "px") as pp:
                with kb.block():
                    pixels(n, gi, pp * px, px)
            if npix % px:
                with kb.block():
                    pixels(n, gi, Const(npix - npix % px), npix % px)
