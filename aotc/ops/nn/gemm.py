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
from aotc.loops.loop_ir import Const, Expr
from aotc.ops import OpDef, register
from aotc.schedules.gemm import knobs as GEMM
from aotc.schedules.gemm.tiled import (
    over_rows,
    tiled_dot,
    tiled_dot_dsp,
    tiled_dot_dsp_quads,
    tiled_dot_mve,
)

Getter = Callable[[Sequence[Expr], Expr, Expr], Expr]


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

            tiled_dot(kb, count, N, K, a_at, lambda k, n: get_b([], k, n), finish,
                       lambda n: Const(0.0, f32), f32)

        over_rows(kb, Y.shape[0], False, rows)


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
        dsp_k = 2
        dsp_wide = False
        simd_tile = 0
        if (mve.usable(kb, kb.inputs[0].dtype, w, arith) and len(b_shape) == 2
                and not arith.x_zp and kb.knob(GEMM.PATH) == "simd"):
            simd_tile = kb.knob(GEMM.SIMD_TILE)
            # Helium: 16 of K per instruction against each column's padded row (loops/mve.py).
            mve_words = kb.const("wq", mve.pack_rows(np.asarray(w).reshape(b_shape).T)
                                 .reshape(-1), dtypes.int8)
        elif ("dsp" in kb.features and kb.unroll_tiles and len(b_shape) == 2
              and arith.dsp_ok(w) and kb.knob(GEMM.PATH) == "simd"):
            # Cores with the DSP extension: K two at a time, one SMLAD per column, or four at
            # a time against a word of activations, two SMLADs per column (loops/dsp.py).
            x8 = kb.inputs[0].dtype.itemsize == 1 and kb.inputs[0].dtype.is_signed
            dsp_k = kb.knob(GEMM.DSP_K) if x8 and K % 4 == 0 else 2
            w2 = np.asarray(w).reshape(b_shape)
            if dsp_k > 2:
                dsp_wide = kb.knob(GEMM.DSP_WIDE)
                simd_tile = kb.knob(GEMM.SIMD_TILE,
                                    default=GEMM.dsp_quads_tile_default(N, dsp_wide))
                tiles = [w2[:, n0:n0 + simd_tile] for n0 in range(0, N, simd_tile)]
                # Wide: a tile's even lanes, then its odd ones (not adjacent: no LDRD).
                dsp_words = kb.const("wq", np.concatenate(
                    [np.concatenate([dsp.pack_quads_wide(t)[..., h].reshape(-1)
                                     for h in (0, 1)]) if dsp_wide
                     else dsp.pack_quads(t).reshape(-1) for t in tiles]), dtypes.int32)
            else:
                simd_tile = kb.knob(GEMM.SIMD_TILE, default=GEMM.dsp_simd_tile_default(N))
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
                tiled_dot_mve(kb, N, K, lambda k: A[[*pre, m, k]], mve_words, store,
                               lambda n: arith.init(bias, n), simd_tile)
            elif dsp_words is not None and dsp_k > 2:
                tiled_dot_dsp_quads(kb, N, K, lambda k: A[[*pre, m, k]], dsp_words, store,
                                     lambda n: arith.init(bias, n), arith.x_zp, simd_tile,
                                     dsp_k, dsp_wide)
            elif dsp_words is not None:
                tiled_dot_dsp(kb, N, K, lambda k: A[[*pre, m, k]], dsp_words, store,
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

                tiled_dot(kb, count, N, K,
                           lambda r, k: arith.x(A[[*pre, m0 + r if r else m0, k]]),
                           lambda k, n: arith.w(kb, get_b(bidx, k, n), n), store,
                           lambda n: arith.init(bias, n), arith.acc)

            over_rows(kb, M, not arith.acc.is_float, rows)
