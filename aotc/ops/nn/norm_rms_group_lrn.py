"""More normalisation ops: RMSNormalization, GroupNormalization, MeanVarianceNormalization, LRN.
Anchors like those of norm.py (a following Relu/Add fuses into their store); the statistics are
computed per row in the kernel with the same two-pass helper."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.builder import BufRef
from aotc.loops.loop_ir import Bin, Const, Expr, call, cmp, land
from aotc.ops import OpDef, register
from aotc.ops.common import axis as axis_of
from aotc.ops.nn.norm import F32, _broadcasts_to, _full_index, _row_stats


def _same_type(ins: Sequence[Value | None]) -> list[TensorType]:
    assert ins[0] is not None
    return [ins[0].type]


def _check_stash(node: Node) -> None:
    if node.attrs.get("stash_type", 1) != 1:
        raise AotcError(f"stash_type={node.attrs['stash_type']} is not supported (only 1: "
                        f"float32 statistics)", node.name, node.op)


# ------------------------------------------------------------------------------ RMSNormalization
@register
class RMSNormalization(OpDef):
    """Y = X / sqrt(mean(X^2 over axis..) + epsilon) * scale."""

    name = "RMSNormalization"
    since = 23
    kind = "anchor"
    onnx_tests = ("test_rms_normalization_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x, scale = ins[0], ins[1]
        assert x is not None and scale is not None
        axis = axis_of(node, node.attrs["axis"], len(x.type.shape))
        _check_stash(node)
        norm_shape = x.type.shape[axis:]
        if not _broadcasts_to(scale.type.shape, norm_shape):
            raise AotcError(f"scale {scale.type.shape} does not broadcast to the normalised "
                            f"shape {norm_shape}", node.name, node.op)

    def reference(self, X: np.ndarray, scale: np.ndarray, *, axis: int = -1,
                  epsilon: float = 1e-5, stash_type: int = 1) -> np.ndarray:
        a = axis + X.ndim if axis < 0 else axis
        x = X.astype(np.float64)
        ms = (x * x).mean(axis=tuple(range(a, X.ndim)), keepdims=True)
        return (x / np.sqrt(ms + epsilon) * scale).astype(X.dtype)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        return _same_type(ins)

    def lower(self, node: Node, kb: Any) -> None:
        X, scale = kb.inputs[0], kb.inputs[1]
        rank = len(X.shape)
        axis = axis_of(node, node.attrs["axis"], rank)
        inner = X.shape[axis:]
        count = float(math.prod(inner))
        with kb.loops(X.shape[:axis], [f"o{k}" for k in range(axis)]) as o:
            sq = kb.local(Const(0.0, F32), "sq", F32)
            with kb.loops(inner, [f"r{k}" for k in range(len(inner))]) as r:
                x = kb.local(X[[*o, *r]], "x", F32)
                kb.assign(sq, sq + x * x)
            ms = sq / Const(count, F32) + Const(float(node.attrs["epsilon"]), F32)
            inv = kb.local(Const(1.0, F32) / call("sqrt", ms), "inv_rms", F32)
            with kb.loops(inner, [f"j{k}" for k in range(len(inner))]) as j:
                kb.store_output([*o, *j], X[[*o, *j]] * inv * scale.bcast(j))


# ---------------------------------------------------------------------------- GroupNormalization
class _GroupNorm(OpDef):
    name = "GroupNormalization"
    kind = "anchor"
    onnx_tests = ("test_group_normalization_*",)
    per_channel: ClassVar[bool] = True  # scale/bias of shape (C,) (opset 21) or (G,) (18)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x = ins[0]
        assert x is not None
        if len(x.type.shape) < 2:
            raise AotcError(f"X must have rank >= 2 (N, C, ...), got {x.type.shape}",
                            node.name, node.op)
        _check_stash(node)
        c, g = x.type.shape[1], int(node.attrs["num_groups"])
        if g < 1 or c % g:
            raise AotcError(f"num_groups={g} must divide the {c} channels", node.name, node.op)
        want = (c,) if self.per_channel else (g,)
        for k, v in enumerate(ins[1:3], start=1):
            if v is None or v.type.shape != want:
                got = None if v is None else v.type.shape
                raise AotcError(f"input {k} must have shape {want}, got {got}",
                                node.name, node.op)

    def _reference(self, X: np.ndarray, scale: np.ndarray, bias: np.ndarray, num_groups: int,
                   epsilon: float) -> np.ndarray:
        n, c = X.shape[:2]
        x = X.astype(np.float64).reshape(n, num_groups, -1)
        mean = x.mean(axis=2, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=2, keepdims=True)
        y = ((x - mean) / np.sqrt(var + epsilon)).reshape(X.shape)
        if not self.per_channel:
            scale, bias = (np.repeat(p, c // num_groups) for p in (scale, bias))
        shape = (1, -1) + (1,) * (X.ndim - 2)
        return (y * scale.reshape(shape) + bias.reshape(shape)).astype(X.dtype)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        return _same_type(ins)

    def lower(self, node: Node, kb: Any) -> None:
        X, scale, B = kb.inputs[:3]
        n_, c_ = X.shape[:2]
        g_ = int(node.attrs["num_groups"])
        cpg = c_ // g_
        spatial = X.shape[2:]
        # The group's channels and spatial positions are contiguous: a (N, G, rest) view.
        grouped = BufRef(X.buf, (n_, g_, cpg * math.prod(spatial)))
        with kb.loops((n_, g_), ["n", "g"]) as (n, g):
            mean, inv = _row_stats(kb, grouped, [n, g], [2], node.attrs["epsilon"])
            with kb.loop(cpg, "cl") as cl:
                ch = kb.local(g * cpg + cl, "ch")
                p = ch if self.per_channel else g
                s = kb.local(inv * scale[p], "s", F32)
                t = kb.local(B[p] - mean * s, "t", F32)
                with kb.loops(spatial, [f"i{k}" for k in range(len(spatial))]) as sp:
                    kb.store_output([n, ch, *sp], X[[n, ch, *sp]] * s + t)


@register
class GroupNormalization18(_GroupNorm):
    """Opset 18 (deprecated by 21): scale and bias are per group."""

    since = 18
    per_channel = False

    def reference(self, X: np.ndarray, scale: np.ndarray, bias: np.ndarray, *,
                  epsilon: float = 1e-5, num_groups: int) -> np.ndarray:
        return self._reference(X, scale, bias, num_groups, epsilon)


@register
class GroupNormalization21(_GroupNorm):
    since = 21

    def reference(self, X: np.ndarray, scale: np.ndarray, bias: np.ndarray, *,
                  epsilon: float = 1e-5, num_groups: int, stash_type: int = 1) -> np.ndarray:
        return self._reference(X, scale, bias, num_groups, epsilon)


# --------------------------------------------------------------------- MeanVarianceNormalization
MVN_EPS = 1e-9  # the ONNX function body's: Y = (X - mean) / (sqrt(var) + 1e-9)


@register
class MeanVarianceNormalization(OpDef):
    name = "MeanVarianceNormalization"
    since = 9
    kind = "anchor"
    onnx_tests = ("test_mvn*",)

    def _axes(self, node: Node, rank: int) -> list[int]:
        axes = sorted({axis_of(node, int(a), rank) for a in node.attrs["axes"]})
        if len(axes) != len(node.attrs["axes"]):
            raise AotcError(f"axes {list(node.attrs['axes'])} repeat an axis", node.name, node.op)
        return axes

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        assert ins[0] is not None
        self._axes(node, len(ins[0].type.shape))

    def reference(self, X: np.ndarray, *, axes: Sequence[int] = (0, 2, 3)) -> np.ndarray:
        ax = tuple(int(a) for a in axes)
        x = X.astype(np.float64)
        mean = x.mean(axis=ax, keepdims=True)
        std = np.sqrt(((x - mean) ** 2).mean(axis=ax, keepdims=True))
        return ((x - mean) / (std + MVN_EPS)).astype(X.dtype)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        return _same_type(ins)

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        rank = len(X.shape)
        axes = self._axes(node, rank)
        kept = [d for d in range(rank) if d not in axes]
        with kb.loops([X.shape[d] for d in kept], [f"o{k}" for k in range(len(kept))]) as o:
            # _row_stats' 1/sqrt(var + eps) with eps = 0 gives 1/std; MVN adds eps to std.
            mean, inv = _row_stats(kb, X, o, axes, 0.0)
            s = kb.local(Const(1.0, F32) / (Const(1.0, F32) / inv + Const(MVN_EPS, F32)),
                         "s", F32)
            red = [X.shape[a] for a in axes]
            with kb.loops(red, [f"j{k}" for k in range(len(axes))]) as j:
                idx = _full_index(o, j, axes, rank)
                kb.store_output(idx, (X[idx] - mean) * s)


# ------------------------------------------------------------------------------------------ LRN
@register
class LRN(OpDef):
    """y = x / (bias + alpha / size * sum of x^2 over the channel window) ^ beta."""

    name = "LRN"
    since = 1
    kind = "anchor"
    onnx_tests = ("test_lrn*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        assert ins[0] is not None
        if len(ins[0].type.shape) < 2:
            raise AotcError(f"X must have rank >= 2 (N, C, ...), got {ins[0].type.shape}",
                            node.name, node.op)
        if int(node.attrs["size"]) < 1:
            raise AotcError(f"size={node.attrs['size']} must be >= 1", node.name, node.op)

    def reference(self, X: np.ndarray, *, alpha: float = 1e-4, beta: float = 0.75,
                  bias: float = 1.0, size: int) -> np.ndarray:
        c = X.shape[1]
        lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
        x = X.astype(np.float64)
        sq = np.zeros_like(x)
        for k in range(c):
            sq[:, k] = (x[:, max(0, k - lo):min(c, k + hi + 1)] ** 2).sum(axis=1)
        return (x / (bias + alpha / size * sq) ** beta).astype(X.dtype)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        return _same_type(ins)

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        c_ = X.shape[1]
        size = int(node.attrs["size"])
        lo = (size - 1) // 2
        a = Const(float(node.attrs["alpha"]) / size, F32)
        rest = X.shape[2:]
        with kb.loops(X.shape, ["n", "c"] + [f"i{k}" for k in range(len(rest))]) as (n, c, *sp):
            sq = kb.local(Const(0.0, F32), "sq", F32)
            with kb.loop(size, "k") as k:
                ch = kb.local(c + (k - lo), "ch")
                with kb.if_(land(cmp("ge", ch, 0), cmp("lt", ch, c_))):
                    x = kb.local(X[[n, ch, *sp]], "x", F32)
                    kb.assign(sq, sq + x * x)
            base = Const(float(node.attrs["bias"]), F32) + a * sq
            beta = float(node.attrs["beta"])
            den: Expr = Bin("pow", base, Const(beta, F32), F32) if beta != 1.0 else base
            kb.store_output([n, c, *sp], X[[n, c, *sp]] / den)
