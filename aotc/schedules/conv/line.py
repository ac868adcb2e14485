"""In place by line (--inplace-conv, aotc/steps/inplace.py conv_inplace_modes): a 2-D conv
(batch 1, NCHW) that writes its output over its dead input through a ring of D output rows.

The output is computed one *unit* at a time, in order: a depthwise conv's unit is one output
row of one channel (units (m, oy), m outermost), a plain conv's (group 1) one output row of all
its channels (units oy). Unit u is computed into ring slot u mod D, after unit u - D, the slot's
previous occupant, is copied from it to its place in Y; the last D units are copied at the end.
Every tap reads X as it was: unit j's output elements are written to Y just before unit j + D
is computed, so no unit from j + D on may read an input element at those addresses (X and Y
start at the same address and have the same element size). line_delay finds the smallest D
for which that holds, at compile time, from the geometry.

A stride-1 3x3 conv with one row of padding needs D = 2: output row r lands on input row r
(same width), which output row r + 1 still reads. The ring is then 2 output rows (x the output
channels for a plain conv) instead of a depthwise conv's whole output channel ("by channel");
a plain 3x3 conv had no in-place schedule before. The taps are the plain loop's, so the
results are those of the conv not in place, bit for bit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc.loops.builder import BufRef
from aotc.loops.loop_ir import Const, Expr, cmp


def line_delay(depthwise: bool, channels: int, out_channels: int, in_sp: Sequence[int],
               out_sp: Sequence[int], k_sp: Sequence[int], pb: Sequence[int],
               strides: Sequence[int], dil: Sequence[int]) -> int | None:
    """The smallest ring D (units, see the module docstring) such that no unit from j + D on
    reads an input element at the addresses unit j's output takes; None when the ring would
    hold every unit (no saving) or the conv is not 2-D."""
    if len(in_sp) != 2:
        return None
    (h, w), (oh, ow) = in_sp, out_sp
    # rowlast[y]: the last output row reading input row y (-1: none); cols[x]: some output
    # column reads input column x.
    rows = np.arange(oh)[:, None] * strides[0] + np.arange(k_sp[0])[None, :] * dil[0] - pb[0]
    rowlast = np.full(h, -1, np.int64)
    ok = (rows >= 0) & (rows < h)
    np.maximum.at(rowlast, rows[ok], np.broadcast_to(np.arange(oh)[:, None], rows.shape)[ok])
    cols_at = np.arange(ow)[:, None] * strides[1] + np.arange(k_sp[1])[None, :] * dil[1] - pb[1]
    cols = np.zeros(w, bool)
    cols[cols_at[(cols_at >= 0) & (cols_at < w)]] = True
    # last[c, y, x]: the last unit reading input element (c, y, x), -1 if none.
    read = (rowlast[:, None] >= 0) & cols[None, :]
    per_row = np.where(read, rowlast[:, None], -1)
    if depthwise:
        units = channels * oh
        base = (np.arange(channels) * oh)[:, None, None]
        last = np.where(per_row[None] >= 0, base + per_row[None], -1)
        pos = np.arange(units * ow).reshape(units, ow)  # unit u = (m, oy): flat u * ow + t
    else:
        units = oh
        last = np.broadcast_to(per_row, (channels, h, w))
        m = np.arange(out_channels)[None, :, None] * (oh * ow)
        pos = (m + np.arange(oh)[:, None, None] * ow + np.arange(ow)[None, None, :])
        pos = pos.reshape(units, -1)  # unit oy: (m, oy, t) for every m
    flat = last.reshape(-1)
    hit = np.where(pos < flat.size, flat[np.minimum(pos, flat.size - 1)], -1).max(axis=1)
    delay = max(1, int((hit - np.arange(units) + 1).max()))
    return delay if delay < units else None


def line_temp_elems(depthwise: bool, out_channels: int, out_sp: Sequence[int],
                    delay: int) -> int:
    """The ring's elements: D units of one output row (x the output channels, plain conv)."""
    return delay * out_sp[-1] * (1 if depthwise else out_channels)


def lower_line(conv: Any, node: Any, kb: Any, X: Any, B: Any, arith: Any,
               pads: tuple[list[int], list[int]], s: list[int], d: list[int]) -> None:
    """The conv by line (see the module docstring), scalar taps as in the plain loop."""
    W, Y = kb.inputs[1], kb.outputs[0]
    pb, pe = pads
    in_sp, k_sp, (oh, ow) = list(X.shape[2:]), list(W.shape[2:]), list(Y.shape[2:])
    mout, cg = Y.shape[1], W.shape[1]
    depthwise = node.attrs["group"] > 1
    delay = line_delay(depthwise, X.shape[1], mout, in_sp, [oh, ow], k_sp, pb, s, d)
    assert delay is not None, "conv_inplace_modes chose a line schedule the geometry lacks"
    width = ow if depthwise else mout * ow
    units = mout * oh if depthwise else oh
    ring = kb.temporary("line", Y.dtype, [delay * width])
    yflat = BufRef(Y.buf, (int(np.prod(Y.shape, dtype=np.int64)),))
    nan_at = conv._padded_nan(node, kb, [oh, ow], pb, s, d)
    acc_t = arith.acc

    def slot(u: Expr) -> Expr:
        return (u % delay) * width if delay > 1 else Const(0)

    def flush(u: Expr, at: Expr) -> None:
        """Unit u from its ring slot (from element ``at``) to its place in Y."""
        if depthwise:
            with kb.loop(ow, "t") as t:
                kb.store(yflat, [u * ow + t], ring[[at + t]])
            return
        with kb.loops([mout, ow], ["mm", "t"]) as (mm, t):
            kb.store(yflat, [mm * (oh * ow) + u * ow + t], ring[[at + mm * ow + t]])

    def row(m: Expr, oy: Expr, at: Expr) -> None:
        """Output row oy of channel m into the ring from element ``at``."""
        with kb.loop(ow, "o1") as ox:
            acc = kb.local(arith.init(B, m), "acc", acc_t)
            with kb.loop(cg, "c") as c:
                wget = lambda kk, c=c: arith.w(kb, W[[m, c, *kk]], m)  # noqa: E731
                conv._window(kb, 0, 2, X, wget, Const(0), m if depthwise else c, [oy, ox],
                             [], [], pb, pe, s, d, [acc], in_sp, k_sp, arith)
            value = arith.finish(kb, nan_at(acc, m, [oy, ox]), m, B)
            kb.store_output([Const(0), m, oy, ox], value, into=(ring, [at + ox]))

    # Unit u and unit u - D share a slot: computed once per unit, not per element.
    if depthwise:
        with kb.loops([mout, oh], ["m", "o0"]) as (m, oy):
            u = m * oh + oy
            at = kb.local(slot(u), "slot")
            with kb.if_(cmp("ge", u, delay)):
                flush(u - delay, at)
            row(m, oy, at)
    else:
        with kb.loop(oh, "o0") as oy:
            at = kb.local(slot(oy), "slot")
            with kb.if_(cmp("ge", oy, delay)):
                flush(oy - delay, at)
            with kb.loop(mout, "m") as m:
                row(m, oy, at + m * ow)
    with kb.loop(delay, "r") as r:
        flush(units - delay + r, kb.local(slot(units - delay + r), "slot"))
