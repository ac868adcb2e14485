"""The generic conv schedule (any target, float and integer; ops/nn/conv.py picks it): register
tiles of conv.tile output channels x conv.tile_pixels output pixels. The tile's channels share
each input load and its pixels share each weight load; every output still sums over (c, k...)
in the plain loop's order (integer kernels: the same bytes; float: the same sums).

Pixels are tiled along the last spatial axis, only where every tap of that axis is inside the
input (no bounds check, so nothing is skipped per pixel); the border pixels and the remainder
run one at a time with the checks. A 1x1 stride-1 conv without padding tiles the flattened
spatial axes (its pixels are contiguous in input and output).

Float tiles on cores with an FPU (conv.vldm) load a tap's weights and, when consecutive, its
pixels' inputs with one VLDM each (loop_ir.vldm runs), and from 32 taps a tile each tile is a
function of its own (conv.outline); the inside pixels left over are then one narrower tile."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from aotc.loops.builder import BufRef
from aotc.loops.loop_ir import Const, Expr, Var, consecutive, vldm
from aotc.schedules.conv import knobs as CONV
from aotc.schedules.conv.pixels import flat_tap, strides


def inside_range(n_out: int, n_in: int, k: int, pb: int, s: int, d: int) -> tuple[int, int]:
    """[lo, hi): the output positions of one axis whose taps all fall inside the input
    (lo == hi: none)."""
    lo = min(n_out, -(-pb // s)) if pb > 0 else 0
    hi = (n_in - 1 - (k - 1) * d + pb) // s + 1
    hi = max(lo, min(n_out, hi))
    return lo, hi


def lower_tiled(conv: Any, node: Any, kb: Any, X: Any, W: Any, B: Any, arith: Any,
                pads: tuple[list[int], list[int]], s: list[int], d: list[int],
                by_pixel: bool = False) -> None:
    """The generic schedule (see the module docstring; choose.py picks it). Weights are packed at
    compile time to [tile, c, k..., j] so a tile's weights are
    contiguous.

    by_pixel (in place, a 1x1 stride-1 conv): output pixels outermost, one at a time; all
    channels of a pixel go to a one-pixel temporary, copied over the pixel's (then dead)
    input. The temporary is arena scratch, or a local array on the C stack where the compiler
    allows it (KernelBuilder.temporary)."""
    Y = kb.outputs[0]
    nd = len(X.shape) - 2
    in_sp, k_sp, out_sp = list(X.shape[2:]), list(W.shape[2:]), list(Y.shape[2:])
    pb, pe = pads
    group = node.attrs["group"]
    mg, cg = Y.shape[1] // group, W.shape[1]
    kprod = int(np.prod(k_sp, dtype=np.int64))
    integer = not arith.acc.is_float
    w = arith.packed_weights(kb.input_const(1))
    tile = kb.knob(CONV.TILE, integer=integer) if mg > 1 else 1
    unroll = kb.knob(CONV.UNROLL)
    # Float tiles on cores with an FPU: runs of consecutive loads as one VLDM each.
    runs = (unroll and arith.acc.is_float and W.dtype == arith.acc and X.dtype == arith.acc
            and "fpu" in kb.features and "autovec" not in kb.features and kb.knob(CONV.VLDM))
    # Depthwise with VLDM runs: 8 pixels (one weight load, one input VLDM per tap for 8 sums;
    # measured on VWW's depthwise convs, m4f: 7-22% fewer instructions than 4).
    px = 1 if by_pixel else kb.knob(CONV.TILE_PIXELS, integer=integer,
                                    default=8 if runs and mg == 1 else None)
    full, rest = divmod(mg, tile)
    # Packed layout per group: full tiles [full, cg, K, tile], then the rest [cg, K, rest].
    parts = []
    for gi in range(group):
        wg = w[gi * mg:(gi + 1) * mg].reshape(mg, cg, kprod)
        if full:
            t = wg[:full * tile].reshape(full, tile, cg, kprod).transpose(0, 2, 3, 1)
            parts.append(t.reshape(-1))
        if rest:
            parts.append(wg[full * tile:].transpose(1, 2, 0).reshape(-1))
    packed = kb.const("wpack", np.concatenate(parts), arith.wdtype(W.dtype, w))
    per_group = mg * cg * kprod
    nan_at = conv._padded_nan(node, kb, out_sp, pb, s, d)
    kstrides = strides(k_sp)
    acc_t = arith.acc
    # On the C stack where that shrinks the arena (the last pixel leaves no room in place).
    pixel = kb.temporary("pixel", Y.dtype, [Y.shape[1]]) if by_pixel else None
    # (Measured on cortex-m4f: VWW's pointwise convs of 32 or more input channels gain 5-10%,
    # those of 8 and 16 and the 3-channel 3x3 first conv lose: 27 taps a tile.)
    outline = runs and kb.knob(CONV.OUTLINE, default=CONV.outline_default(cg * kprod // 4))

    # The geometry the loops see: the real one, or for a pointwise conv the spatial axes as one.
    Xv, Yv = X, None
    g_in, g_k, g_out, g_pb, g_pe, g_s, g_d = in_sp, k_sp, out_sp, pb, pe, s, d
    # (Not when X is a permuted view: its pixels are not one row-major run.)
    pointwise = (all(k == 1 for k in k_sp) and all(v == 1 for v in s)
                 and not any(pb) and not any(pe) and X.strides is None)
    if px > 1 and pointwise and nd > 1:
        npix = int(np.prod(out_sp, dtype=np.int64))
        Xv = BufRef(X.buf, (X.shape[0], X.shape[1], npix))
        Yv = BufRef(Y.buf, (Y.shape[0], Y.shape[1], npix))
        g_in, g_k, g_out, g_pb, g_pe, g_s, g_d = [npix], [1], [npix], [0], [0], [1], [1]
    gnd = len(g_out)

    def coords(o: Sequence[Expr]) -> list[Expr]:
        """The output coordinates of a pixel of the loops' geometry."""
        if Yv is None:
            return list(o)
        return [(o[0] // st) % sp if st > 1 else o[0] % sp
                for st, sp in zip(strides(out_sp), out_sp)]

    # Pixels are tiled along the axis with the most positions whose taps are all inside.
    inside = [inside_range(*a) for a in zip(g_out, g_in, g_k, g_pb, g_s, g_d)]
    ax = max(range(gnd), key=lambda k: (inside[k][1] - inside[k][0], k))

    def one(n: Expr, gi: Expr, m0: Expr, base: Expr, width: int, o: list[Expr], npix: int,
            checked: bool) -> None:
        """The tile of ``width`` channels from m0 x ``npix`` pixels from ``o`` along axis
        ``ax`` (``checked``: taps of that axis may fall into the padding)."""
        # Local accumulator arrays with j innermost: C compilers vectorise this form.
        accs = [kb.local_array(width, "acc", acc_t) for _ in range(npix)]
        for acc in accs:
            with kb.loop(width, "j", unroll=unroll) as j:
                kb.store(acc, [j], arith.init(B, m0 + j))
        with kb.loop(cg, "c") as c:
            ic = gi * cg + c if group > 1 else c

            def tap(xv: Expr, kk: list[Expr], ii: list[Expr], c: Expr = c) -> None:
                row = base + (c * kprod + flat_tap(kk, kstrides)) * width
                if runs:
                    tap_runs(xv, ii, row, c)
                    return
                if npix == 1:
                    xs = kb.local(arith.x(xv), "xv", acc_t)
                    with kb.loop(width, "j", unroll=unroll) as j:
                        kb.store(accs[0], [j],
                                 accs[0][[j]] + xs * arith.wide(packed.flat(row + j)))
                    return
                xp = [kb.local(arith.x(Xv[[n, ic, *shift(ii, p * g_s[ax])]]), "xv", acc_t)
                      for p in range(npix)]
                with kb.loop(width, "j", unroll=unroll) as j:
                    wv = kb.local(arith.wide(packed.flat(row + j)), "wv", acc_t)
                    for acc, xs in zip(accs, xp):
                        kb.store(acc, [j], acc[[j]] + xs * wv)

            def tap_runs(xv: Expr, ii: list[Expr], row: Expr, c: Expr = c) -> None:
                """tap() with the pixels' inputs (consecutive along the last axis) in s0..,
                the tile's weights after them, one VLDM each."""
                if npix == 1:
                    xp = [kb.local(xv, "xv", acc_t)]
                else:
                    loads = [Xv[[n, ic, *shift(ii, p * g_s[ax])]] for p in range(npix)]
                    seq = consecutive(loads)  # type: ignore[arg-type]
                    xp = [kb.local(vldm(ld, 0, npix, p) if seq else ld, "xv", acc_t)
                          for p, ld in enumerate(loads)]
                wv = [kb.local(vldm(packed.flat(row + j), npix, width, j) if width > 1
                               else packed.flat(row + j), "wv", acc_t) for j in range(width)]
                for j, w_j in enumerate(wv):
                    for acc, xs in zip(accs, xp):
                        kb.store(acc, [Const(j)], acc[[Const(j)]] + xs * w_j)

            conv._window(kb, 0, gnd, Xv, tap, n, ic, o, [], [], g_pb, g_pe, g_s, g_d, None,
                         g_in, g_k, inside=-1 if checked else ax)
        for p, acc in enumerate(accs):
            op = shift(o, p)

            def put(j: Expr, v: Expr, op: list[Expr] = op) -> None:
                real = coords(op)
                kb.store_output([n, m0 + j, *real],
                                arith.finish(kb, nan_at(v, m0 + j, real), m0 + j, B),
                                flat=Yv.index([n, m0 + j, *op]) if Yv is not None else None,
                                into=(pixel, [m0 + j]) if pixel is not None else None)

            if arith.rolled_finish and unroll:
                # Copy the tile out, then requantise in a rolled loop: the accumulators are
                # dead before any call, so they stay in registers during the sum.
                res = kb.local_array(width, "res", acc_t)
                with kb.loop(width, "j", unroll=True) as j:
                    kb.store(res, [j], acc[[j]])
                with kb.loop(width, "j") as j:
                    put(j, res[[j]])
            else:
                with kb.loop(width, "j", unroll=unroll) as j:
                    put(j, acc[[j]])

    def shift(o: list[Expr], by: int) -> list[Expr]:
        return [v + by if k == ax and by else v for k, v in enumerate(o)]

    def pixels(body: Callable[[list[Expr], int, bool], None]) -> None:
        """body(first pixel, pixels, checked) over the loops' output pixels."""
        names = [f"o{k}" for k in range(gnd)]
        if px == 1:
            with kb.loops(g_out, names) as o:
                body(list(o), 1, True)
            return
        others = [k for k in range(gnd) if k != ax]
        with kb.loops([g_out[k] for k in others], [names[k] for k in others]) as ov:
            def at(v: Expr) -> list[Expr]:
                o: list[Expr] = list(ov)
                o.insert(ax, v)
                return o

            (lo, hi), last = inside[ax], g_out[ax]
            nb = (hi - lo) // px
            if lo:
                with kb.loop(lo, names[ax]) as ol:
                    body(at(ol), 1, True)
            if nb:
                with kb.loop(nb, "ob") as ob:
                    with kb.block():
                        body(at(lo + ob * px), px, False)
            # The inside pixels left over: with VLDM runs one narrower tile (its pixels still
            # share each weight load), else one at a time like the border (other targets: not
            # measured).
            left = hi - lo - nb * px if runs else 0
            if left > 1:
                with kb.block():
                    body(at(Const(lo + nb * px)), left, False)
            start = hi if left > 1 else lo + nb * px
            if start < last:
                with kb.loop(last, names[ax], start=start) as ol:
                    body(at(ol), 1, True)

    def outlined(n: Expr, gi: Expr, m0: Expr, base: Expr, width: int, o: list[Expr], npix: int,
             checked: bool) -> None:
        if not outline or npix * width < 8:
            one(n, gi, m0, base, width, o, npix, checked)
            return
        # Each tile a function of its own: its accumulators and loop pointers alone in the
        # registers (gcc -Os otherwise keeps the kernel's output pointers there and spills
        # the k loop's pointers).
        with kb.outline():
            one(n, gi, m0, base, width, o, npix, checked)

    def block(n: Expr, gi: Expr, m0: Expr, base: Expr, width: int,
              at: list[Var] | None) -> None:
        if at:
            one(n, gi, m0, base, width, list(at), 1, True)
        else:
            pixels(lambda o, npix, checked: outlined(n, gi, m0, base, width, o, npix, checked))

    def groups(n: Expr, at: list[Var] | None) -> None:
        with kb.loop(group, "g") as gi:
            gbase = gi * per_group
            if full:
                with kb.loop(full, "mt") as mt:
                    with kb.block():
                        block(n, gi, gi * mg + mt * tile, gbase + mt * (tile * cg * kprod),
                              tile, at)
            if rest:
                with kb.block():
                    block(n, gi, gi * mg + full * tile, gbase + full * tile * cg * kprod,
                          rest, at)

    with kb.loop(Y.shape[0], "n") as n:
        if pixel is None:
            groups(n, None)
            return
        with kb.loops(Y.shape[2:], [f"p{k}" for k in range(nd)]) as at:
            groups(n, at)
            with kb.loop(Y.shape[1], "m") as m:
                kb.store(Y, [n, m, *at], pixel[[m]])

