"""Ops that walk along one axis in order: TopK (select the k best, sorted), CumSum and CumProd
(running scans), plus Trilu (a triangle mask over the last two dims).

Their parameters (k, the axis, Trilu's diagonal) must be compile-time constants; they are
folded into '_' attributes in prepare. The kernels need no scratch: TopK selects its j-th
output as the best element strictly after the (j-1)-th in the (value, index) order, which
costs k passes over the axis but no working copy of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Const, Expr, cmp, land, lor, select
from aotc.ops import OpDef, register
from aotc.ops.common import ANY, ints, nest
from aotc.ops.common import axis as axis_of

NUMERIC = tuple(d for d in ANY if d != "bool")


def _need(cond: bool, node: Node, reason: str) -> None:
    if not cond:
        raise AotcError(reason, node.name, node.op)


def _scalar_const(node: Node, ins: Sequence[Value | None], i: int, what: str) -> int | None:
    """The value of an optional constant one-element int input (k, axis), or None if absent."""
    v = ins[i] if i < len(ins) else None
    if v is None:
        return None
    _need(v.type.dtype.name in ("int32", "int64"), node,
          f"{what} has dtype {v.type.dtype.name}; supported: int32, int64")
    vals = ints(v)
    _need(vals is not None and len(vals) == 1, node, f"{what} must hold exactly one value")
    assert vals is not None
    return vals[0]


# ------------------------------------------------------------------------------------- TopK
def _topk(x: np.ndarray, k: int, axis: int, largest: int) -> tuple[np.ndarray, np.ndarray]:
    """numpy TopK: sorted by value (descending if largest), equal values by ascending index."""
    xm = np.moveaxis(x, axis, -1)
    pos = np.broadcast_to(np.arange(xm.shape[-1]), xm.shape)
    if largest:
        order = np.lexsort((-pos, xm), axis=-1)[..., ::-1]
    else:
        order = np.lexsort((pos, xm), axis=-1)
    order = order[..., :k]
    vals = np.take_along_axis(xm, order, axis=-1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(order.astype(np.int64), -1, axis)


class _TopK(OpDef):
    """Outputs (values, int64 indices), always sorted (``sorted=0`` allows any order, so the
    sorted one is valid too); equal values come out lower index first. NaN order is
    unspecified."""

    dtypes = NUMERIC
    onnx_tests = ("test_top_k*",)

    def k_of(self, node: Node, ins: Sequence[Value | None]) -> int:
        if "_k" in node.attrs:
            return int(node.attrs["_k"])
        k = _scalar_const(node, ins, 1, "k")
        assert k is not None
        return k

    def _plan(self, node: Node, ins: Sequence[Value | None]) -> tuple[int, int]:
        x = ins[0]
        assert x is not None
        shape = x.type.shape
        axis = axis_of(node, node.attrs.get("axis", -1), len(shape))
        k = self.k_of(node, ins)
        _need(0 <= k <= shape[axis], node, f"k={k} is out of range for dim {shape[axis]} "
              f"(axis {axis})")
        return axis, k

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        self._plan(node, ins)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        axis, k = self._plan(node, ins)
        shape = tuple(k if d == axis else s for d, s in enumerate(x.type.shape))
        return [TensorType(shape, x.type.dtype), TensorType(shape, dtypes.int64)]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        return node.with_(inputs=node.inputs[:1],
                          attrs={**node.attrs, "_k": self.k_of(node, ins)})

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        axis = axis_of(node, node.attrs.get("axis", -1), len(X.shape))
        k, n = int(node.attrs["_k"]), X.shape[axis]
        outer, inner = math.prod(X.shape[:axis]), math.prod(X.shape[axis + 1:])
        if 0 in (outer, inner, k):
            return
        largest = bool(node.attrs.get("largest", 1))
        better, worse = ("gt", "lt") if largest else ("lt", "gt")
        dt = X.dtype
        with nest(kb, [outer, inner], "t") as (o, r):
            # (pv, pi): the previous output; the next one is the best strictly after it.
            pv = kb.local(Const(0, dt), "pv", dt)
            pi = kb.local(Const(-1), "pi")
            with kb.loop(k, "j") as j:
                bv = kb.local(Const(0, dt), "bv", dt)
                bi = kb.local(Const(-1), "bi")
                with kb.loop(n, "i") as i:
                    x = kb.local(X.flat((o * n + i) * inner + r), "x", dt)
                    after = lor(cmp("lt", pi, 0), cmp(worse, x, pv),
                                 land(cmp("eq", x, pv), cmp("gt", i, pi)))
                    # Scanning upwards with a strict comparison: the lowest index wins ties.
                    with kb.if_(land(after, lor(cmp("lt", bi, 0), cmp(better, x, bv)))):
                        kb.assign(bv, x)
                        kb.assign(bi, i)
                at = (o * k + j) * inner + r
                kb.store_output([], bv, out=0, flat=at)
                kb.store_output([], bi, out=1, flat=at)
                kb.assign(pv, bv)
                kb.assign(pi, bi)


@register
class TopK(_TopK):
    name = "TopK"
    since = 1

    def k_of(self, node: Node, ins: Sequence[Value | None]) -> int:
        return int(node.attrs.get("_k", node.attrs["k"]))

    def reference(self, X: np.ndarray, *, k: int, axis: int = -1  # noqa: N803
                  ) -> tuple[np.ndarray, np.ndarray]:
        return _topk(X, k, axis % X.ndim, 1)


@register
class TopK10(_TopK):
    name = "TopK"
    since = 10
    const_inputs = (1,)

    def reference(self, X: np.ndarray, K: np.ndarray, *, axis: int = -1  # noqa: N803
                  ) -> tuple[np.ndarray, np.ndarray]:
        return _topk(X, int(np.asarray(K).reshape(-1)[0]), axis % X.ndim, 1)


@register
class TopK11(_TopK):
    name = "TopK"
    since = 11
    const_inputs = (1,)

    def reference(self, X: np.ndarray, K: np.ndarray, *, axis: int = -1,  # noqa: N803
                  largest: int = 1, sorted: int = 1  # noqa: A002
                  ) -> tuple[np.ndarray, np.ndarray]:
        return _topk(X, int(np.asarray(K).reshape(-1)[0]), axis % X.ndim, largest)


@register
class TopK24(TopK11):
    since = 24


# ------------------------------------------------------------------------------------ Trilu
@register
class Trilu(OpDef):
    """Keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims and
    zeroes the rest; k is an optional constant (default 0)."""

    name = "Trilu"
    since = 14
    dtypes = ANY
    const_inputs = (1,)
    onnx_tests = ("test_tril*", "test_triu*")

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x = ins[0]
        assert x is not None
        _need(len(x.type.shape) >= 2, node, f"input has rank {len(x.type.shape)}; needs >= 2")
        _scalar_const(node, ins, 1, "k")

    def reference(self, input: np.ndarray, k: np.ndarray | None = None, *,  # noqa: A002
                  upper: int = 1) -> np.ndarray:
        kk = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
        return np.triu(input, kk) if upper else np.tril(input, kk)

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        return node.with_(inputs=node.inputs[:1],
                          attrs={**node.attrs, "_k": _scalar_const(node, ins, 1, "k") or 0})

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        if X.numel == 0:
            return
        k = int(node.attrs["_k"])
        op = "ge" if node.attrs.get("upper", 1) else "le"
        with kb.loops(X.shape) as o:
            keep = cmp(op, o[-1] - o[-2], k)
            kb.store_output(o, select(keep, X[o], 0, X.dtype))


# ------------------------------------------------------------------------- CumSum, CumProd
class _Cumulative(OpDef):
    """y[i] = x[0] op ... op x[i] along a constant axis; ``exclusive`` leaves x[i] out and
    ``reverse`` runs from the end."""

    dtypes = ("float32", "int32", "int64", "uint32", "uint64")
    const_inputs = (1,)
    init: ClassVar[float] = 0.0
    np_fn: ClassVar[str] = "cumsum"  # the numpy scan of the reference

    def _axis_of(self, node: Node, ins: Sequence[Value | None]) -> int:
        x = ins[0]
        assert x is not None
        a = _scalar_const(node, ins, 1, "axis")
        _need(a is not None, node, "the axis input is required")
        assert a is not None
        return axis_of(node, a, len(x.type.shape))

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        self._axis_of(node, ins)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        return [x.type]

    def reference(self, x: np.ndarray, axis: np.ndarray, *, exclusive: int = 0,
                  reverse: int = 0) -> np.ndarray:
        a = int(np.asarray(axis).reshape(-1)[0]) % x.ndim
        y = np.flip(x, a) if reverse else x
        if exclusive and x.shape[a]:  # shift by one, the identity first
            head = np.full_like(np.take(y, [0], axis=a), self.init)
            y = np.concatenate([head, np.delete(y, -1, axis=a)], axis=a)
        out = getattr(np, self.np_fn)(y, axis=a, dtype=x.dtype)
        return np.flip(out, a) if reverse else out

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        return node.with_(inputs=node.inputs[:1],
                          attrs={**node.attrs, "axis_of": self._axis_of(node, ins)})

    def combine(self, acc: Expr, x: Expr) -> Expr:
        raise NotImplementedError

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        axis = int(node.attrs["axis_of"])
        n = X.shape[axis]
        outer, inner = math.prod(X.shape[:axis]), math.prod(X.shape[axis + 1:])
        if 0 in (outer, inner, n):
            return
        exclusive = bool(node.attrs.get("exclusive", 0))
        reverse = bool(node.attrs.get("reverse", 0))
        with nest(kb, [outer, inner], "c") as (o, r):
            acc = kb.local(Const(self.init if X.dtype.is_float else int(self.init), X.dtype),
                           "acc", X.dtype)
            with kb.loop(n, "t") as t:
                at = (o * n + ((n - 1) - t if reverse else t)) * inner + r
                if exclusive:
                    kb.store_output([], acc, flat=at)
                kb.assign(acc, self.combine(acc, X.flat(at)))
                if not exclusive:
                    kb.store_output([], acc, flat=at)


class _CumSum(_Cumulative):
    name = "CumSum"
    onnx_tests = ("test_cumsum_*",)

    def combine(self, acc: Expr, x: Expr) -> Expr:
        return acc + x


@register
class CumSum(_CumSum):
    since = 11


@register
class CumSum14(_CumSum):
    since = 14


@register
class CumProd(_Cumulative):
    name = "CumProd"
    since = 26
    init = 1.0
    np_fn = "cumprod"
    onnx_tests = ("test_cumprod_*",)

    def combine(self, acc: Expr, x: Expr) -> Expr:
        return acc * x
