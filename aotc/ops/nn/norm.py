"""Normalisation ops: BatchNormalization, LayerNormalization, InstanceNormalization,
LpNormalization. All are anchors (a following Relu/Add fuses into their store); statistics are
computed per row in the kernel, inference BatchNormalization's scale and shift at compile time
(training_mode=1 computes the batch statistics and the running ones in the kernel)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Const, Expr, Var, call, cmp, select
from aotc.ops import OpDef, register
from aotc.ops.common import axis as axis_of

F32 = dtypes.float32


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def _full_index(kept: Sequence[Expr], reduced: Sequence[Expr], axes: Sequence[int],
                rank: int) -> list[Expr]:
    """Interleave the indices of the kept and the reduced dims back into dim order."""
    it_k, it_r = iter(kept), iter(reduced)
    return [next(it_r) if d in axes else next(it_k) for d in range(rank)]


def _row_stats(kb: Any, X: Any, kept: Sequence[Expr], axes: Sequence[int],
               eps: float) -> tuple[Var, Var]:
    """Mean and 1/sqrt(var + eps) over ``axes`` at the kept index."""
    mean, var = _row_moments(kb, X, kept, axes)
    inv = kb.local(Const(1.0, F32) / call("sqrt", var + Const(float(eps), F32)), "inv_std", F32)
    return mean, inv


def _row_moments(kb: Any, X: Any, kept: Sequence[Expr], axes: Sequence[int]) -> tuple[Var, Expr]:
    """Mean and (population) variance over ``axes`` at the kept index, in two passes: the second
    sums squared deviations, which stays accurate when the mean is large against the spread."""
    rank = len(X.shape)
    red_shape = [X.shape[a] for a in axes]
    count = float(np.prod(red_shape, dtype=np.int64))
    total = kb.local(Const(0.0, F32), "sum", F32)
    with kb.loops(red_shape, [f"r{k}" for k in range(len(axes))]) as r:
        kb.assign(total, total + X[_full_index(kept, r, axes, rank)])
    mean = kb.local(total / Const(count, F32), "mean", F32)
    sq = kb.local(Const(0.0, F32), "sq", F32)
    with kb.loops(red_shape, [f"q{k}" for k in range(len(axes))]) as q:
        d = kb.local(X[_full_index(kept, q, axes, rank)] - mean, "d", F32)
        kb.assign(sq, sq + d * d)
    return mean, sq / Const(count, F32)


# ---------------------------------------------------------------------------- BatchNormalization
class _BatchNorm(OpDef):
    name = "BatchNormalization"
    kind = "anchor"
    onnx_tests = ("test_batchnorm_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        if not node.attrs.get("training_mode", 0) and len([o for o in node.outputs if o]) != 1:
            raise AotcError("outputs beyond Y are training-mode outputs; only Y is supported "
                            "without training_mode=1", node.name, node.op)
        x = ins[0]
        assert x is not None
        if len(x.type.shape) < 2:
            raise AotcError(f"X must have rank >= 2 (N, C, ...), got {x.type.shape}",
                            node.name, node.op)
        c = x.type.shape[1]
        for k, v in enumerate(ins[1:5], start=1):
            if v is None or v.type.shape != (c,):
                got = None if v is None else v.type.shape
                raise AotcError(f"input {k} must have shape ({c},), got {got}",
                                node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None
        stat = TensorType((ins[0].type.shape[1],), F32)
        return [ins[0].type, stat, stat][:max(1, len(node.outputs))]

    @staticmethod
    def _scale_shift(scale: np.ndarray, B: np.ndarray, mean: np.ndarray, var: np.ndarray,
                     epsilon: float) -> tuple[np.ndarray, np.ndarray]:
        s = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + epsilon)
        return s, B.astype(np.float64) - mean.astype(np.float64) * s

    @staticmethod
    def scale_shift_f32(scale: np.ndarray, B: np.ndarray, mean: np.ndarray, var: np.ndarray,
                        epsilon: float) -> tuple[np.ndarray, np.ndarray]:
        """s = scale / sqrt(var + eps), t = B - mean * s, each step in IEEE float32, as the
        kernel computes them from run-time statistics and as onnxruntime does: when s
        overflows to inf, mean * s is inf or NaN (0 * inf) and so are the outputs."""
        f = np.float32
        with np.errstate(all="ignore"):
            s = scale.astype(f) / np.sqrt(var.astype(f) + f(epsilon))
            return s, B.astype(f) - mean.astype(f) * s

    def _reference(self, X: np.ndarray, scale: np.ndarray, B: np.ndarray, mean: np.ndarray,
                   var: np.ndarray, epsilon: float) -> np.ndarray:
        s, t = self._scale_shift(scale, B, mean, var, epsilon)
        shape = (1, -1) + (1,) * (X.ndim - 2)
        return (X * s.reshape(shape) + t.reshape(shape)).astype(X.dtype)

    @staticmethod
    def _training(X: np.ndarray, scale: np.ndarray, B: np.ndarray, mean: np.ndarray,
                  var: np.ndarray, epsilon: float, momentum: float
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Batch statistics (population variance) normalise X; the running ones are updated."""
        axes = (0, *range(2, X.ndim))
        x = X.astype(np.float64)
        bmean, bvar = x.mean(axis=axes), x.var(axis=axes)
        s, t = _BatchNorm._scale_shift(scale, B, bmean, bvar, epsilon)
        shape = (1, -1) + (1,) * (X.ndim - 2)
        y = (x * s.reshape(shape) + t.reshape(shape)).astype(X.dtype)
        return (y, (mean * momentum + bmean * (1 - momentum)).astype(np.float32),
                (var * momentum + bvar * (1 - momentum)).astype(np.float32))

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        if node.attrs.get("training_mode", 0):
            return node
        # Constant statistics: y = x * s[c] + t[c] with s, t computed here, not on the device.
        params = [v.const if v is not None else None for v in ins[1:5]]
        if any(p is None for p in params):
            return node
        s, t = self.scale_shift_f32(*params, float(node.attrs["epsilon"]))  # type: ignore[arg-type]
        return node.with_(inputs=node.inputs[:1],
                          attrs={**node.attrs, "_scale": s.astype(np.float32),
                                 "_shift": t.astype(np.float32)})

    def lower(self, node: Node, kb: Any) -> None:
        if node.attrs.get("training_mode", 0):
            self._lower_training(node, kb)
            return
        X = kb.inputs[0]
        spatial = X.shape[2:]
        folded = "_scale" in node.attrs
        if folded:
            S = kb.const("scale", node.attrs["_scale"], F32)
            T = kb.const("shift", node.attrs["_shift"], F32)
        else:
            scale, B, mean, var = kb.inputs[1:5]
        eps = Const(float(node.attrs["epsilon"]), F32)
        with kb.loops(X.shape[:2], ["n", "c"]) as (n, c):
            if folded:
                s = kb.local(S[c], "s", F32)
                t = kb.local(T[c], "t", F32)
            else:
                s = kb.local(scale[c] / call("sqrt", var[c] + eps), "s", F32)
                t = kb.local(B[c] - mean[c] * s, "t", F32)
            with kb.loops(spatial, [f"i{k}" for k in range(len(spatial))]) as sp:
                kb.store_output([n, c, *sp], X[[n, c, *sp]] * s + t)

    def _lower_training(self, node: Node, kb: Any) -> None:
        X, scale, B, mean_in, var_in = kb.inputs[:5]
        rank = len(X.shape)
        axes = [0, *range(2, rank)]
        eps = Const(float(node.attrs["epsilon"]), F32)
        mom = float(node.attrs["momentum"])
        wants = [k < len(node.outputs) and bool(node.outputs[k]) for k in range(3)]
        with kb.loop(X.shape[1], "c") as c:
            mean, var_e = _row_moments(kb, X, [c], axes)
            var = kb.local(var_e, "var", F32)
            s = kb.local(scale[c] / call("sqrt", var + eps), "s", F32)
            t = kb.local(B[c] - mean * s, "t", F32)
            rest = [X.shape[0], *X.shape[2:]]
            with kb.loops(rest, ["n"] + [f"i{k}" for k in range(rank - 2)]) as (n, *sp):
                kb.store_output([n, c, *sp], X[[n, c, *sp]] * s + t)
            for k, (run, cur) in ((1, (mean_in, mean)), (2, (var_in, var))):
                if wants[k]:
                    kb.store_output([c], run[c] * Const(mom, F32)
                                    + cur * Const(1.0 - mom, F32), out=k)


@register
class BatchNormalization9(_BatchNorm):
    since = 9

    def reference(self, X: np.ndarray, scale: np.ndarray, B: np.ndarray, input_mean: np.ndarray,
                  input_var: np.ndarray, *, epsilon: float = 1e-5,
                  momentum: float = 0.9) -> np.ndarray:
        return self._reference(X, scale, B, input_mean, input_var, epsilon)


@register
class BatchNormalization14(_BatchNorm):
    since = 14

    def reference(self, X: np.ndarray, scale: np.ndarray, B: np.ndarray, input_mean: np.ndarray,
                  input_var: np.ndarray, *, epsilon: float = 1e-5, momentum: float = 0.9,
                  training_mode: int = 0) -> Any:
        if training_mode:
            return self._training(X, scale, B, input_mean, input_var, epsilon, momentum)
        return self._reference(X, scale, B, input_mean, input_var, epsilon)


# ---------------------------------------------------------------------------- LayerNormalization
@register
class LayerNormalization(OpDef):
    name = "LayerNormalization"
    since = 17
    kind = "anchor"
    onnx_tests = ("test_layer_normalization_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x = ins[0]
        assert x is not None
        axis = axis_of(node, node.attrs["axis"], len(x.type.shape))
        if node.attrs["stash_type"] != 1:
            raise AotcError(f"stash_type={node.attrs['stash_type']} is not supported (only 1: "
                            f"float32 statistics)", node.name, node.op)
        norm_shape = x.type.shape[axis:]
        for k, v in enumerate(ins[1:3], start=1):
            if v is not None and not _broadcasts_to(v.type.shape, norm_shape):
                raise AotcError(f"input {k} {v.type.shape} does not broadcast to the normalised "
                                f"shape {norm_shape}", node.name, node.op)

    def reference(self, X: np.ndarray, Scale: np.ndarray, B: np.ndarray | None = None, *,
                  axis: int = -1, epsilon: float = 1e-5,
                  stash_type: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a = axis + X.ndim if axis < 0 else axis
        axes = tuple(range(a, X.ndim))
        x = X.astype(np.float64)
        mean = x.mean(axis=axes, keepdims=True)
        inv = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + epsilon)
        y = (x - mean) * inv * Scale
        if B is not None:
            y = y + B
        return y.astype(X.dtype), mean.astype(np.float32), inv.astype(np.float32)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        rank = len(x.type.shape)
        axis = axis_of(node, node.attrs["axis"], rank)
        stat = TensorType(x.type.shape[:axis] + (1,) * (rank - axis), F32)
        return [x.type, stat, stat]

    def lower(self, node: Node, kb: Any) -> None:
        X, scale = kb.inputs[0], kb.inputs[1]
        B = kb.inputs[2] if len(kb.inputs) > 2 else None
        rank = len(X.shape)
        axis = axis_of(node, node.attrs["axis"], rank)
        axes = list(range(axis, rank))
        wants = [k < len(node.outputs) and bool(node.outputs[k]) for k in range(3)]
        with kb.loops(X.shape[:axis], [f"o{k}" for k in range(axis)]) as o:
            mean, inv = _row_stats(kb, X, o, axes, node.attrs["epsilon"])
            with kb.loops(X.shape[axis:], [f"j{k}" for k in range(len(axes))]) as j:
                value = (X[[*o, *j]] - mean) * inv * scale.bcast(j)
                if B is not None:
                    value = value + B.bcast(j)
                kb.store_output([*o, *j], value)
            stat_idx = [*o, *([Const(0)] * len(axes))]
            if wants[1]:
                kb.store_output(stat_idx, mean, out=1)
            if wants[2]:
                kb.store_output(stat_idx, inv, out=2)


# ------------------------------------------------------------------------- InstanceNormalization
@register
class InstanceNormalization(OpDef):
    name = "InstanceNormalization"
    since = 6
    kind = "anchor"
    onnx_tests = ("test_instancenorm_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x = ins[0]
        assert x is not None
        if len(x.type.shape) < 3:
            raise AotcError(f"input must have rank >= 3 (N, C, D1, ...), got {x.type.shape}",
                            node.name, node.op)
        c = x.type.shape[1]
        for k, v in enumerate(ins[1:3], start=1):
            if v is None or v.type.shape != (c,):
                got = None if v is None else v.type.shape
                raise AotcError(f"input {k} must have shape ({c},), got {got}",
                                node.name, node.op)

    def reference(self, input: np.ndarray, scale: np.ndarray, B: np.ndarray, *,  # noqa: A002
                  epsilon: float = 1e-5) -> np.ndarray:
        axes = tuple(range(2, input.ndim))
        x = input.astype(np.float64)
        mean = x.mean(axis=axes, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
        shape = (1, -1) + (1,) * (input.ndim - 2)
        y = (x - mean) / np.sqrt(var + epsilon) * scale.reshape(shape) + B.reshape(shape)
        return y.astype(input.dtype)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None
        return [ins[0].type]

    def lower(self, node: Node, kb: Any) -> None:
        X, scale, B = kb.inputs[:3]
        rank = len(X.shape)
        axes = list(range(2, rank))
        with kb.loops(X.shape[:2], ["n", "c"]) as (n, c):
            mean, inv = _row_stats(kb, X, [n, c], axes, node.attrs["epsilon"])
            s = kb.local(inv * scale[c], "s", F32)
            with kb.loops(X.shape[2:], [f"i{k}" for k in range(len(axes))]) as sp:
                kb.store_output([n, c, *sp], (X[[n, c, *sp]] - mean) * s + B[c])


# ------------------------------------------------------------------------------- LpNormalization
@register
class LpNormalization(OpDef):
    name = "LpNormalization"
    since = 1
    kind = "anchor"
    onnx_tests = ("test_lpnormalization_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        assert ins[0] is not None
        axis_of(node, node.attrs["axis"], len(ins[0].type.shape))
        if node.attrs["p"] not in (1, 2):
            raise AotcError(f"p={node.attrs['p']} is not supported (only 1 and 2)",
                            node.name, node.op)

    def reference(self, input: np.ndarray, *, axis: int = -1, p: int = 2) -> np.ndarray:  # noqa: A002
        x = input.astype(np.float64)
        norm = np.linalg.norm(x, ord=p, axis=axis, keepdims=True)
        # A zero vector stays zero (onnxruntime's behaviour) instead of becoming 0/0.
        y = np.where(norm == 0, 0.0, x / np.where(norm == 0, 1.0, norm))
        return y.astype(input.dtype)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None
        return [ins[0].type]

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        rank = len(X.shape)
        axis = axis_of(node, node.attrs["axis"], rank)
        kept = [d for k, d in enumerate(X.shape) if k != axis]
        with kb.loops(kept, [f"o{k}" for k in range(rank - 1)]) as o:
            acc = kb.local(Const(0.0, F32), "acc", F32)
            with kb.loop(X.shape[axis], "r") as r:
                x = X[_full_index(o, [r], [axis], rank)]
                kb.assign(acc, acc + (call("abs", x) if node.attrs["p"] == 1 else x * x))
            norm = acc if node.attrs["p"] == 1 else call("sqrt", acc)
            # 1/norm, or 0 for a zero vector so it maps to zeros rather than NaN.
            inv = kb.local(select(cmp("gt", acc, Const(0.0, F32)),
                                  Const(1.0, F32) / norm, 0.0, F32), "inv", F32)
            with kb.loop(X.shape[axis], "j") as j:
                idx = _full_index(o, [j], [axis], rank)
                kb.store_output(idx, X[idx] * inv)
