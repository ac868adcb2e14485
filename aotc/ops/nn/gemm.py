"""Gemm and MatMul (batched, broadcast, 1-D operands). Anchors for epilogue fusion.

Lowered as register-tiled inner products over [K, N] weights (see _tiled_dot).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops import dsp, mve
from aotc.loops.builder import BufRef
from aotc.loops.loop_ir import Const, Expr, Var, consecutive, vldm
from aotc.ops import OpDef, register
from aotc.schedules.gemm import knobs as GEMM

Getter = Callable[[Sequence[Expr], Expr, Expr], Expr]


def _tiled_dot(kb: Any, rows: int, n_total: int, K: int, a_at: Callable[[int, Expr], Expr],
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

    _over_tiles(kb, n_total, tile, lambda n0, width, t: block(n0, width))


def _over_rows(kb: Any, M: int, integer: bool, body: Callable[[Expr, int], None]) -> None:
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


def _over_tiles(kb: Any, n_total: int, tile: int,
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


def _store_tile(kb: Any, acc: Any, n0: Expr, width: int, store: Callable[[Expr, Expr], None],
                dtype: Any) -> None:
    """The tile's sums copied out of the accumulators, then stored (requantised) in a rolled
    loop: the accumulators are dead before any call, so they stay in registers during the sum."""
    res = kb.local_array(width, "res", dtype)
    for j in range(width):
        kb.store(res, [j], acc[[j]])
    with kb.loop(width, "j") as j:
        store(n0 + j, res[[j]])


def _tiled_dot_dsp(kb: Any, n_total: int, K: int, a_at: Callable[[Expr], Expr], words: BufRef,
                   store: Callable[[Expr, Expr], None], init: Callable[[Expr], Expr],
                   arith: Any, tile: int) -> None:
    """_tiled_dot for int8 weights on cores with the DSP extension: columns in tiles of
    ``tile``, k two at a time; ``words`` holds each tile's weights as lower/dsp.py's
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
        _store_tile(kb, acc, n0, width, store, arith.acc)

    _over_tiles(kb, n_total, tile, lambda n0, width, t: block(n0, width,
                                                               t * (pairs * (tile // 2))))


def _tiled_dot_mve(kb: Any, n_total: int, K: int, a_at: Callable[[Expr], Expr], words: BufRef,
                   store: Callable[[Expr, Expr], None], init: Callable[[Expr], Expr],
                   tile: int) -> None:
    """_tiled_dot for int8 x int8 on cores with Helium (the input zero point folded into
    ``init``): columns in tiles of ``tile``, k 16 at a time; ``words`` holds column n's weights
    as row n of lower/mve.py's pack_rows. Same int32 sums."""
    row = mve.padded(K)

    def block(n0: Expr, width: int) -> None:
        acc = kb.local_array(width, "acc", dtypes.int32)
        for j in range(width):
            kb.store(acc, [j], init(n0 + j))
        mve.dot_tile(kb, [acc], lambda p, k: a_at(k),
                     lambda j, k: words.flat((n0 + j) * row + k), K, width)
        _store_tile(kb, acc, n0, width, store, dtypes.int32)

    _over_tiles(kb, n_total, tile, lambda n0, width, t: block(n0, width))


def _b_getter(B: BufRef, trans: bool) -> Getter:
    nb = len(B.shape) - 2

    def get(batch: Sequence[Expr], k: Expr, n: Expr) -> Expr:
        pre = [Const(0) if d == 1 else b for d, b in zip(B.shape[:nb], batch[len(batch) - nb:])]
        return B[[*pre, n, k]] if trans else B[[*pre, k, n]]

    return get


@register
class Gemm(OpDef):
    name = "Gemm"
    since = 1
    kind = "anchor"
    onnx_tests = ("test_gemm_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        a, b = ins[0], ins[1]
        assert a is not None and b is not None
        if len(a.type.shape) != 2 or len(b.type.shape) != 2:
            raise AotcError(f"A and B must be 2-D, got {a.type.shape} and {b.type.shape}",
                            node.name, node.op)

    def reference(self, A: np.ndarray, B: np.ndarray, C: np.ndarray | None = None, *,
                  alpha: float = 1.0, beta: float = 1.0, transA: int = 0,
                  transB: int = 0) -> np.ndarray:
        a = A.T if transA else A
        b = B.T if transB else B
        y = np.float32(alpha) * (a.astype(np.float64) @ b.astype(np.float64))
        if C is not None:
            y = y + np.float32(beta) * C
        return y.astype(A.dtype)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        a, b = ins[0], ins[1]
        assert a is not None and b is not None
        m = a.type.shape[1] if node.attrs["transA"] else a.type.shape[0]
        ka = a.type.shape[0] if node.attrs["transA"] else a.type.shape[1]
        kb_ = b.type.shape[1] if node.attrs["transB"] else b.type.shape[0]
        n = b.type.shape[0] if node.attrs["transB"] else b.type.shape[1]
        if ka != kb_:
            raise AotcError(f"inner dims differ: {ka} vs {kb_}", node.name, node.op)
        c = ins[2] if len(ins) > 2 else None
        if c is not None:
            try:
                np.broadcast_shapes(c.type.shape, (m, n))
            except ValueError:
                raise AotcError(f"C {c.type.shape} does not broadcast to {(m, n)}",
                                node.name, node.op) from None
        return [TensorType((m, n), a.type.dtype)]

    def macs(self, node: Node, g: Any) -> int:
        a = g.type(node.inputs[0]).shape
        return g.type(node.outputs[0]).numel * (a[0] if node.attrs["transA"] else a[1])

    def lower(self, node: Node, kb: Any) -> None:
        A, B, C = (kb.inputs + [None])[:3]
        Y = kb.outputs[0]
        f32 = A.dtype
        ta, tb = node.attrs["transA"], node.attrs["transB"]
        K = A.shape[0] if ta else A.shape[1]
        get_b = _b_getter(B, bool(tb))
        alpha, beta = float(node.attrs["alpha"]), float(node.attrs["beta"])
        N = Y.shape[1]

        def rows(m0: Expr, count: int) -> None:
            def finish(r: int, n: Expr, acc: Expr) -> None:
                m = m0 + r if r else m0
                value: Expr = acc if alpha == 1.0 else acc * Const(alpha, f32)
                if C is not None and beta != 0.0:
                    cv = C.bcast([m, n])
                    value = value + (cv if beta == 1.0 else cv * Const(beta, f32))
                kb.store_output([m, n], value)

            def a_at(r: int, k: Expr) -> Expr:
                m = m0 + r if r else m0
                return A[[k, m]] if ta else A[[m, k]]

            _tiled_dot(kb, count, N, K, a_at, lambda k, n: get_b([], k, n), finish,
                       lambda n: Const(0.0, f32), f32)

        _over_rows(kb, Y.shape[0], False, rows)


@register
class MatMul(OpDef):
    name = "MatMul"
    since = 1
    kind = "anchor"
    onnx_tests = ("test_matmul_*",)

    def reference(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return np.matmul(A.astype(np.float64), B.astype(np.float64)).astype(A.dtype)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        a, b = ins[0], ins[1]
        assert a is not None and b is not None
        try:
            # Shape only: matmul on zero-strided views costs no memory.
            za = np.broadcast_to(np.float32(0), a.type.shape)
            zb = np.broadcast_to(np.float32(0), b.type.shape)
            shape = np.matmul(za[..., :1, :] if len(a.type.shape) > 1 else za, zb).shape
            if len(a.type.shape) > 1 and len(b.type.shape) > 1:
                shape = (*shape[:-2], a.type.shape[-2], shape[-1])
            elif len(a.type.shape) > 1:  # 1-D B: the result ends with A's M, not N
                shape = (*shape[:-1], a.type.shape[-2])
        except ValueError as e:
            raise AotcError(f"shapes {a.type.shape} and {b.type.shape} do not multiply ({e})",
                            node.name, node.op) from None
        return [TensorType(tuple(shape), a.type.dtype)]

    def macs(self, node: Node, g: Any) -> int:
        return g.type(node.outputs[0]).numel * g.type(node.inputs[0]).shape[-1]

    def lower(self, node: Node, kb: Any, arith: Any = None, bias: BufRef | None = None
              ) -> None:
        """``arith`` (a conv.ConvArith; integer kernels such as QLinearMatMul) widens the
        loads and turns the accumulator into the output; ``bias`` is indexed by column."""
        from aotc.ops.nn.conv import ConvArith

        A, B = kb.inputs[0], kb.inputs[1]
        arith = arith or ConvArith(A.dtype)
        # 1-D operands: view as [1, K] / [K, 1]; the output view drops those dims again.
        a_shape = (1, *A.shape) if len(A.shape) == 1 else A.shape
        b_shape = (*B.shape, 1) if len(B.shape) == 1 else B.shape
        A = BufRef(A.buf, a_shape)
        B = BufRef(B.buf, b_shape)
        batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
        M, K, N = a_shape[-2], a_shape[-1], b_shape[-1]
        nb = len(batch)
        na = len(a_shape) - 2
        w = kb.input_const(1)
        dsp_words = mve_words = None
        simd_tile = 0
        if (mve.usable(kb, kb.inputs[0].dtype, w, arith) and len(b_shape) == 2
                and not arith.x_zp and kb.knob(GEMM.PATH) == "simd"):
            simd_tile = kb.knob(GEMM.SIMD_TILE)
            # Helium: 16 of K per instruction against each column's padded row (lower/mve.py).
            mve_words = kb.const("wq", mve.pack_rows(np.asarray(w).reshape(b_shape).T)
                                 .reshape(-1), dtypes.int8)
        elif ("dsp" in kb.features and kb.unroll_tiles and len(b_shape) == 2
              and arith.dsp_ok(w) and kb.knob(GEMM.PATH) == "simd"):
            # Cores with the DSP extension: K two at a time, one SMLAD per column (lower/dsp.py).
            simd_tile = kb.knob(GEMM.SIMD_TILE)
            w2 = np.asarray(w).reshape(b_shape)
            dsp_words = kb.const("wq", np.concatenate(
                [dsp.pack_words(w2[:, n0:n0 + simd_tile][:, None, :]).reshape(-1)
                 for n0 in range(0, N, simd_tile)]), dtypes.int32)
        if mve_words is None and dsp_words is None:
            self._lower_rows(kb, arith, A, B, bias, batch, a_shape, M, K, N)
            return
        with kb.loops((*batch, M), [f"b{i}" for i in range(nb)] + ["m"]) as idx:
            bidx, m = idx[:nb], idx[nb]
            pre = [Const(0) if d == 1 else b for d, b in zip(a_shape[:na], bidx[nb - na:])]

            def store(n: Expr, acc: Expr) -> None:
                # Map the full index back onto Y's (possibly 1-D-squeezed) shape.
                out_idx = list(bidx)
                if len(kb.inputs[0].shape) != 1:
                    out_idx.append(m)
                if len(kb.inputs[1].shape) != 1:
                    out_idx.append(n)
                kb.store_output(out_idx, arith.finish(kb, acc, n, bias))

            if mve_words is not None:
                _tiled_dot_mve(kb, N, K, lambda k: A[[*pre, m, k]], mve_words, store,
                               lambda n: arith.init(bias, n), simd_tile)
            elif dsp_words is not None:
                _tiled_dot_dsp(kb, N, K, lambda k: A[[*pre, m, k]], dsp_words, store,
                               lambda n: arith.init(bias, n), arith, simd_tile)

    def _lower_rows(self, kb: Any, arith: Any, A: BufRef, B: BufRef, bias: BufRef | None,
                    batch: Sequence[int], a_shape: Sequence[int], M: int, K: int, N: int
                    ) -> None:
        """The generic schedule: _tiled_dot over tiles of rows of each batch item."""
        nb, na = len(batch), len(a_shape) - 2
        get_b = _b_getter(B, False)
        with kb.loops(batch, [f"b{i}" for i in range(nb)]) as bidx:
            pre = [Const(0) if d == 1 else b for d, b in zip(a_shape[:na], bidx[nb - na:])]

            def rows(m0: Expr, count: int) -> None:
                def store(r: int, n: Expr, acc: Expr) -> None:
                    # Map the full index back onto Y's (possibly 1-D-squeezed) shape.
                    out_idx = list(bidx)
                    if len(kb.inputs[0].shape) != 1:
                        out_idx.append(m0 + r if r else m0)
                    if len(kb.inputs[1].shape) != 1:
                        out_idx.append(n)
                    kb.store_output(out_idx, arith.finish(kb, acc, n, bias))

                _tiled_dot(kb, count, N, K,
                           lambda r, k: arith.x(A[[*pre, m0 + r if r else m0, k]]),
                           lambda k, n: arith.w(kb, get_b(bidx, k, n), n), store,
                           lambda n: arith.init(bias, n), arith.acc)

            _over_rows(kb, M, not arith.acc.is_float, rows)
