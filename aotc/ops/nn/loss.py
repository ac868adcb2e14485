"""Loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Both see the scores as [N, C, D] (D the product of the trailing dims d1..dk) and the labels as
[N, D], given at run time. Each position (n, d) picks the score of its label class c:
loss = -logp[n, c, d] * weight[c], 0 where the label equals ignore_index. SoftmaxCrossEntropy
first takes a stable log-softmax over C (optionally written out as log_prob). Reductions: none
keeps the labels' shape; sum and mean give a scalar, mean dividing by the summed weights of the
non-ignored positions (their count without weights).

A label outside [0, C) that is not ignore_index is invalid input; the kernel clamps its class
index (like the onnx reference's ``take(mode="clip")``) so it never reads out of bounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.builder import BufRef
from aotc.loops.loop_ir import INDEX, Cast, Const, Expr, bmax, bmin, call, cmp, select
from aotc.ops import OpDef, register
from aotc.ops.common import loop_unless_one

REDUCTIONS = ("none", "sum", "mean")
LABEL_DTYPES = ("int32", "int64")


def _ncd(shape: Sequence[int]) -> tuple[int, int, int]:
    """(N, C, D): the scores as [N, C, D]."""
    return shape[0], shape[1], math.prod(shape[2:])


def _np_loss(logp: np.ndarray, labels: np.ndarray, weight: np.ndarray | None, reduction: str,
             ignore_index: int | None) -> np.ndarray:
    """The (reduced) loss from log-probabilities [N, C, d...] and labels [N, d...]."""
    n, c, _ = _ncd(logp.shape)
    lp = logp.reshape(n, c, -1)
    t = labels.reshape(n, -1).astype(np.int64)
    keep = np.ones(t.shape, bool) if ignore_index is None else t != ignore_index
    cls = np.clip(t, 0, c - 1)
    picked = np.take_along_axis(lp, cls[:, None, :], axis=1)[:, 0, :]
    w = np.ones(t.shape, logp.dtype) if weight is None else weight[cls]
    w = np.where(keep, w, 0).astype(logp.dtype)
    loss = (-picked * w).astype(logp.dtype)
    if reduction == "none":
        return loss.reshape(labels.shape)
    total = loss.astype(np.float64).sum()
    if reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):  # all ignored: 0/0 = NaN
            total = total / w.astype(np.float64).sum()
    return np.asarray(total, logp.dtype)


def _np_log_softmax(x: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    v = v - v.max(axis=1, keepdims=True)
    return (v - np.log(np.exp(v).sum(axis=1, keepdims=True))).astype(x.dtype)


class _Loss(OpDef):
    kind = "kernel"
    dtypes = ("float32",)
    softmax: ClassVar[bool] = False

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x, t = ins[0], ins[1]
        w = ins[2] if len(ins) > 2 else None
        assert x is not None and t is not None
        if x.type.dtype.name not in self.dtypes:
            raise AotcError(f"input 0 has dtype {x.type.dtype.name}; supported: float32",
                            node.name, node.op)
        if t.type.dtype.name not in LABEL_DTYPES:
            raise AotcError(f"labels have dtype {t.type.dtype.name}; supported: int32, int64",
                            node.name, node.op)
        xs, ts = x.type.shape, t.type.shape
        if len(xs) < 2:
            raise AotcError(f"scores need shape (N, C, d1...), got {xs}", node.name, node.op)
        if xs[1] == 0:
            raise AotcError(f"scores {xs} have no classes (C = 0)", node.name, node.op)
        if ts != (xs[0], *xs[2:]):
            raise AotcError(f"labels shape {ts} must be (N, d1...) = {(xs[0], *xs[2:])} for "
                            f"scores {xs}", node.name, node.op)
        if w is not None:
            if w.type.dtype != x.type.dtype:
                raise AotcError(f"weight has dtype {w.type.dtype.name}; it must match the "
                                f"scores ({x.type.dtype.name})", node.name, node.op)
            if w.type.shape != (xs[1],):
                raise AotcError(f"weight shape {w.type.shape} must be (C,) = ({xs[1]},)",
                                node.name, node.op)
        if node.attrs["reduction"] not in REDUCTIONS:
            raise AotcError(f"reduction={node.attrs['reduction']!r} is not one of "
                            f"{', '.join(REDUCTIONS)}", node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x, t = ins[0], ins[1]
        assert x is not None and t is not None
        shape = t.type.shape if node.attrs["reduction"] == "none" else ()
        out = [TensorType(shape, x.type.dtype)]
        if self.softmax:
            out.append(TensorType(x.type.shape, x.type.dtype))
        return out

    def lower(self, node: Node, kb: Any) -> None:
        X: BufRef = kb.inputs[0]
        T: BufRef = kb.inputs[1]
        W: BufRef | None = kb.inputs[2] if len(kb.inputs) > 2 else None
        reduction = node.attrs["reduction"]
        ii = node.attrs.get("ignore_index")
        f32 = X.dtype
        i64 = dtypes.int64
        n_, c_, d_ = _ncd(X.shape)
        log_prob = self.softmax and len(kb.outputs) > 1 and kb.outputs[1] is not None
        reduce = reduction != "none"
        # Without weights and ignore_index the mean divides by the constant count N*D.
        count_const = W is None and ii is None
        acc = kb.local(Const(0.0, f32), "acc", f32) if reduce else None
        wsum = (kb.local(Const(0.0, f32), "wsum", f32)
                if reduction == "mean" and not count_const else None)
        with loop_unless_one(kb, n_, "n") as n, loop_unless_one(kb, d_, "d") as d:
            pos = n * d_ + d  # the position in labels and the unreduced loss
            base = n * (c_ * d_) + d  # scores[n, 0, d]; class k is at base + k * D
            raw: Expr = T.flat(pos)
            t = kb.local(raw if raw.dtype == i64 else Cast(raw, i64), "t", i64)
            cls = kb.local(Cast(bmax(bmin(t, Const(c_ - 1, i64)), Const(0, i64)), INDEX),
                           "c", INDEX)
            picked: Expr = X.flat(base + cls * d_)
            if self.softmax:
                picked = self._log_softmax(kb, X, base, c_, d_, picked, log_prob)
            w = None if W is None else kb.local(W.flat(cls), "w", f32)
            loss: Expr = -picked if w is None else w * -picked
            keep = None if ii is None else cmp("ne", t, Const(int(ii), i64))
            if not reduce:
                kb.store_output([], loss if keep is None else select(keep, loss, 0.0, f32),
                                flat=pos)
            else:
                assert acc is not None
                with kb.if_(keep) if keep is not None else kb.block():
                    kb.assign(acc, acc + loss)
                    if wsum is not None:
                        kb.assign(wsum, wsum + (Const(1.0, f32) if w is None else w))
        if reduce:
            assert acc is not None
            value: Expr = acc
            if reduction == "mean":
                value = acc / (Const(float(n_ * d_), f32) if wsum is None else wsum)
            kb.store_output([], value, flat=Const(0))

    @staticmethod
    def _log_softmax(kb: Any, X: BufRef, base: Expr, c_: int, d_: int, picked: Expr,
                     write: bool) -> Expr:
        """Stable log-softmax over the C scores of one position: writes all of them to output
        1 when ``write``, and returns the one of the label class."""
        f32 = X.dtype
        m = kb.local(Const(-math.inf, f32), "m", f32)
        with kb.loop(c_, "k") as k:
            kb.assign(m, bmax(m, X.flat(base + k * d_)))
        s = kb.local(Const(0.0, f32), "s", f32)
        with kb.loop(c_, "k") as k:
            kb.assign(s, s + call("exp", X.flat(base + k * d_) - m))
        # (x - m) - log(s), as in LogSoftmax: m + log(s) would round away a small log(s).
        log_s = kb.local(call("log", s), "log_s", f32)
        if write:
            with kb.loop(c_, "k") as k:
                at = base + k * d_
                kb.store_output([], (X.flat(at) - m) - log_s, out=1, flat=at)
        return (picked - m) - log_s


class _NLL(_Loss):
    softmax = False
    onnx_tests = ("test_nllloss_*",)

    def reference(self, input: np.ndarray, target: np.ndarray,  # noqa: A002
                  weight: np.ndarray | None = None, *, ignore_index: int | None = None,
                  reduction: str = "mean") -> np.ndarray:
        return _np_loss(input, target, weight, reduction, ignore_index)


class _SCE(_Loss):
    softmax = True
    onnx_tests = ("test_sce_*",)

    def reference(self, scores: np.ndarray, labels: np.ndarray,
                  weights: np.ndarray | None = None, *, ignore_index: int | None = None,
                  reduction: str = "mean") -> tuple[np.ndarray, np.ndarray]:
        logp = _np_log_softmax(scores)
        return _np_loss(logp, labels, weights, reduction, ignore_index), logp


# The later versions only add element types (float16, bfloat16, double) aotc does not handle.
@register
class NegativeLogLikelihoodLoss(_NLL):
    name = "NegativeLogLikelihoodLoss"
    since = 12


@register
class NegativeLogLikelihoodLoss13(_NLL):
    name = "NegativeLogLikelihoodLoss"
    since = 13


@register
class NegativeLogLikelihoodLoss22(_NLL):
    name = "NegativeLogLikelihoodLoss"
    since = 22


@register
class SoftmaxCrossEntropyLoss(_SCE):
    name = "SoftmaxCrossEntropyLoss"
    since = 12


@register
class SoftmaxCrossEntropyLoss13(_SCE):
    name = "SoftmaxCrossEntropyLoss"
    since = 13
