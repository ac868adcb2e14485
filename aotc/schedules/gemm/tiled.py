"""The tiled dot products of Gemm / MatMul (and their integer forms): the generic register
tiles of gemm.tile columns x gemm.tile_rows rows (tiled_dot, over_rows), the DSP extension's
dual MAC over packed weight words (tiled_dot_dsp) and Helium's dot products (tiled_dot_mve).
The op (aotc/ops/nn/gemm.py) states the computation and picks the path from its knobs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aotc import dtypes
from aotc.loops import dsp, mve
from aotc.loops.builder import BufRef
from aotc.loops.loop_ir import Const, Expr, Var, call, consecutive, vldm
from aotc.schedules.gemm import knobs as GEMM


def tiled_dot(kb: Any, rows: int, n_total: int, K: int, a_at: Callable[[int, Expr], Expr],
               b_at: Callable[[Expr, Expr], Expr], store: Callable[[int, Expr, Expr], None],
               init: Callable[[Expr], Expr], dtype: Any) -> None:
    """For r in [0, rows) and n in [0, n_total): store(r, n, init(n) + sum_k a_at(r, k) *
    b_at(k, n)).

    Columns are processed a tile (the gemm.tile knob) at a time with that many scalar
    accumulators per row and k outermost, so each element still sums over k in order
    (bit-identical to the plain loop) while the independent chains vectorise, the tile's
    columns share every load of A and the rows every load of B. Float on cores with an FPU
    (gemm.vldm): each k's weights of the tile and a row's unrolled k steps of A, when
    consecutive, by one VLDM each (loop_ir.vldm)."""
    tile, unroll = kb.knob(GEMM.TILE), kb.knob(GEMM.UNROLL)
    runs = (unroll and dtype.is_float and "fpu" in kb.features
            and "autovec" not in kb.features and kb.knob(GEMM.VLDM))

    def block(n0: Expr, width: int) -> None:
        # Local accumulator arrays with j innermost: C compilers vectorise this form.
        accs = [kb.local_array(width, "acc", dtype) for _ in range(rows)]
        for acc in accs:
            with kb.loop(width, "j", unroll=unroll) as j:
                kb.store(acc, [j], init(n0 + j))
        def step(k: Expr, u: int = 0, a_run: list[Var] | None = None) -> None:
            if runs and width > 1:
                step_runs(k, u, a_run)
                return
            avs = [kb.local(a_at(r, k), "a", dtype) for r in range(rows)]
            with kb.loop(width, "j", unroll=unroll) as j:
                if rows == 1:
                    kb.store(accs[0], [j], accs[0][[j]] + avs[0] * b_at(k, n0 + j))
                else:
                    bv = kb.local(b_at(k, n0 + j), "bv", dtype)
                    for acc, av in zip(accs, avs):
                        kb.store(acc, [j], acc[[j]] + av * bv)

        def step_runs(k: Expr, u: int, a_run: list[Var] | None) -> None:
            """step() with the tile's weights of this k in FPU registers from ku (two sets
            in turn when they fit) by one VLDM, when they are consecutive."""
            avs = [a_run[u]] if a_run else [kb.local(a_at(r, k), "a", dtype)
                                            for r in range(rows)]
            loads = [b_at(k, n0 + j) for j in range(width)]
            base = 32 - width  # the top registers: the allocator fills from s0 up
            seq = consecutive(loads)
            bvs = [kb.local(vldm(ld, base, width, j) if seq else ld, "bv", dtype)  # type: ignore[arg-type]
                   for j, ld in enumerate(loads)]
            for j, bv in enumerate(bvs):
                for acc, av in zip(accs, avs):
                    kb.store(acc, [Const(j)], acc[[Const(j)]] + av * bv)

        # k unrolled by gemm.unroll_k (k still in order: the same sums), the rest one at a time.
        ku = min(kb.knob(GEMM.UNROLL_K, integer=not dtype.is_float) if unroll else 1, K)
        with kb.loop(K // ku, "k") as k:
            a_run = None
            if runs and rows == 1 and ku > 1:
                # One row's ku values of A, consecutive in its row: one VLDM into s0...
                loads = [a_at(0, k * ku + u) for u in range(ku)]
                if consecutive(loads):
                    a_run = [kb.local(vldm(ld, 32 - tile - ku, ku, u), "a", dtype)  # type: ignore[arg-type]
                             for u, ld in enumerate(loads)]
            for u in range(ku):
                step(k * ku + u if ku > 1 else k, u, a_run)
        for u in range(K // ku * ku, K):
            step(Const(u))
        if unroll and not dtype.is_float:
            # Requantisation in a function of its own: its 64-bit constants, which gcc -Os
            # would otherwise hoist out of the tile loop, then never compete with the k loop's
            # accumulators for registers (AD int8 on cortex-m4f spilled them).
            with kb.outline():
                for r, acc in enumerate(accs):
                    with kb.loop(width, "j", unroll=True) as j:
                        store(r, n0 + j, acc[[j]])
            return
        for r, acc in enumerate(accs):
            with kb.loop(width, "j", unroll=unroll) as j:
                store(r, n0 + j, acc[[j]])

    over_tiles(kb, n_total, tile, lambda n0, width, t: block(n0, width))


def over_rows(kb: Any, M: int, integer: bool, body: Callable[[Expr, int], None]) -> None:
    """body(first row, rows) for the M rows in tiles of the gemm.tile_rows knob (rows that
    share each load of B), the last one narrower."""
    rows = kb.knob(GEMM.TILE_ROWS, integer=integer) if M > 1 else 1
    full, rest = divmod(M, rows)
    if rows == 1:
        with kb.loop(M, "m") as m:
            body(m, 1)
        return
    if full:
        with kb.loop(full, "mt") as mt:
            with kb.block():
                body(mt * rows, rows)
    if rest:
        with kb.block():
            body(Const(full * rows), rest)


def over_tiles(kb: Any, n_total: int, tile: int,
                block: Callable[[Expr, int, Expr], None]) -> None:
    """block(first column, width, tile index) for the columns in tiles of ``tile``, the last
    one narrower."""
    full, rest = divmod(n_total, tile)
    if full:
        with kb.loop(full, "nt") as nt:
            with kb.block():
                block(nt * tile, tile, nt)
    if rest:
        with kb.block():
            block(Const(full * tile), rest, Const(full))


def store_tile(kb: Any, acc: Any, n0: Expr, width: int, store: Callable[[Expr, Expr], None],
                dtype: Any) -> None:
    """The tile's sums copied out of the accumulators, then stored (requantised) in a rolled
    loop: the accumulators are dead before any call, so they stay in registers during the sum."""
    res = kb.local_array(width, "res", dtype)
    for j in range(width):
        kb.store(res, [j], acc[[j]])
    with kb.loop(width, "j") as j:
        store(n0 + j, res[[j]])


def tiled_dot_dsp(kb: Any, n_total: int, K: int, a_at: Callable[[Expr], Expr], words: BufRef,
                   store: Callable[[Expr, Expr], None], init: Callable[[Expr], Expr],
                   arith: Any, tile: int) -> None:
    """_tiled_dot for int8 weights on cores with the DSP extension: columns in tiles of
    ``tile``, k two at a time; ``words`` holds each tile's weights as loops/dsp.py's
    pack_words of its [K, 1, tile] slice, tile after tile. Same int32 sums."""
    pairs = -(-K // 2)

    def block(n0: Expr, width: int, base: int | Expr) -> None:
        half = -(-width // 2)
        acc = kb.local_array(width, "acc", arith.acc)
        for j in range(width):
            kb.store(acc, [j], init(n0 + j))
        if K // 2:
            with kb.loop(K // 2, "kp") as kp:
                xp = kb.local(dsp.x_pair(a_at(2 * kp), a_at(2 * kp + 1), arith.x_zp), "xp",
                              arith.acc)
                dsp.mac_tile(kb, acc, words, base + kp * half, width, xp)
        if K % 2:
            xp = kb.local(dsp.x_pair(a_at(Const(K - 1)), None, arith.x_zp), "xp", arith.acc)
            dsp.mac_tile(kb, acc, words, base + (pairs - 1) * half, width, xp)
        store_tile(kb, acc, n0, width, store, arith.acc)

    over_tiles(kb, n_total, tile, lambda n0, width, t: block(n0, width,
                                                               t * (pairs * (tile // 2))))


def tiled_dot_dsp_quads(kb: Any, n_total: int, K: int, a_at: Callable[[Expr], Expr],
                         words: BufRef, store: Callable[[Expr, Expr], None],
                         init: Callable[[Expr], Expr], x_zp: int, tile: int, step: int,
                         wide: bool = False) -> None:
    """tiled_dot_dsp for signed 8-bit activations and K a multiple of 4: columns in tiles of
    ``tile``, ``step`` k (a multiple of 4) per loop step; each 4 k one word load of the
    activations (dsp.x_quad) and per column one word of its 4 weights (``words``: each tile's
    dsp.pack_quads of its [K, width] slice, tile after tile), two SMLADs. Same int32 sums (the
    four products in another order: integer sums, identical). ``wide`` (gemm.dsp_wide): the
    words are dsp.pack_quads_wide's, two per column and quad already in int16 lanes (two word
    loads, no SXTB16 on the weights), each tile's even lanes before its odd ones."""
    quads, per = K // 4, step // 4
    nw = 2 if wide else 1

    def block(n0: Expr, width: int, base: Expr | int) -> None:
        acc = kb.local_array(width, "acc", dtypes.int32)
        for j in range(width):
            kb.store(acc, [j], init(n0 + j))

        def quad(q: Expr) -> None:
            a = a_at(q * 4)
            assert a.dtype.itemsize == 1 and a.dtype.is_signed, a.dtype
            xa, xb = dsp.x_quad(kb.local(dsp.ld_word8(a), "xw", dtypes.int32), x_zp)
            xa, xb = kb.local(xa, "xa", dtypes.int32), kb.local(xb, "xb", dtypes.int32)
            for j in range(width):
                if wide:  # the tile's even lanes, then its odd ones
                    at = base + q * width + j
                    we = kb.local(words.flat(at), "we", dtypes.int32)
                    wo = kb.local(words.flat(at + quads * width), "wo", dtypes.int32)
                    kb.store(acc, [j], call("smlad", we, xa, acc[[j]], dtype=dtypes.int32))
                    kb.store(acc, [j], call("smlad", wo, xb, acc[[j]], dtype=dtypes.int32))
                    continue
                w = kb.local(words.flat(base + q * width + j), "wq", dtypes.int32)
                kb.store(acc, [j], call("smlad", call("sxtb16", w, dtype=dtypes.int32), xa,
                                        acc[[j]], dtype=dtypes.int32))
                kb.store(acc, [j], call("smlad", call("sxtb16_ror8", w, dtype=dtypes.int32),
                                        xb, acc[[j]], dtype=dtypes.int32))

        if quads // per:
            with kb.loop(quads // per, "kq") as kq:
                for u in range(per):
                    quad(kq * per + u if per > 1 else kq)
        for q in range(quads // per * per, quads):
            quad(Const(q))
        store_tile(kb, acc, n0, width, store, dtypes.int32)

    over_tiles(kb, n_total, tile,
               lambda n0, width, t: block(n0, width, t * (quads * tile * nw)))


def tiled_dot_mve(kb: Any, n_total: int, K: int, a_at: Callable[[Expr], Expr], words: BufRef,
                   store: Callable[[Expr, Expr], None], init: Callable[[Expr], Expr],
                   tile: int) -> None:
    """_tiled_dot for int8 x int8 on cores with Helium (the input zero point folded into
    ``init``): columns in tiles of ``tile``, k 16 at a time; ``words`` holds column n's weights
    as row n of loops/mve.py's pack_rows. Same int32 sums."""
    row = mve.padded(K)
    order = kb.knob(GEMM.MVE_ORDER)
    ordered = False if order == "compiler" else order

    def block(n0: Expr, width: int) -> None:
        acc = kb.local_array(width, "acc", dtypes.int32)
        for j in range(width):
            kb.store(acc, [j], init(n0 + j))
        mve.dot_tile(kb, [acc], lambda p, k: a_at(k),
                     lambda j, k: words.flat((n0 + j) * row + k), K, width, ordered)
        store_tile(kb, acc, n0, width, store, dtypes.int32)

    over_tiles(kb, n_total, tile, lambda n0, width, t: block(n0, width))
