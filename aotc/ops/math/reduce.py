"""Reductions: Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,SumSquare}, ArgMax, ArgMin.

The Reduce ops differ only in a row of REDUCTIONS (init, per-element map, combine, finalise).
Axes are an attribute before ReduceSum-13 / the others' opset 18 and a constant input after it
(folded into ``_axes`` in Prepare). Each output element loops over the reduced dims; over an
empty set it is the reduction's identity (0, 1, -inf / the type's minimum for Max, ...), which
constant folding computes at compile time when the input is zero-size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.builder import BufRef
from aotc.loops.loop_ir import Cast, Const, Expr, bmax, bmin, call, cmp
from aotc.ops import OpDef, register


def _same(x: Expr) -> Expr:
    return x


def _square(x: Expr) -> Expr:
    return x * x


def _abs(x: Expr) -> Expr:
    return call("abs", x) if x.dtype.is_signed else x


def _add(acc: Expr, x: Expr) -> Expr:
    return acc + x


def _as_is(acc: Expr, n: int) -> Expr:
    return acc


def identity(kind: str, dt: np.dtype) -> Any:
    """The value of a reduction over the empty set: "zero", "one", "lowest" (Max's: -inf, or the
    type's minimum) or "highest" (Min's)."""
    if kind in ("zero", "one"):
        return dt.type(kind == "one")
    if dt.kind == "b":
        return np.bool_(kind == "highest")
    if dt.kind == "f":
        return dt.type(-np.inf if kind == "lowest" else np.inf)
    info = np.iinfo(dt)
    return dt.type(info.min if kind == "lowest" else info.max)


def _np_max(x: np.ndarray, **kw: Any) -> np.ndarray:
    return np.max(x, initial=identity("lowest", x.dtype), **kw)


def _np_min(x: np.ndarray, **kw: Any) -> np.ndarray:
    return np.min(x, initial=identity("highest", x.dtype), **kw)


def _np_mean(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    n = math.prod(x.shape[a] for a in axis)
    s = np.sum(x, axis=axis, keepdims=keepdims)
    if x.dtype.kind == "f":
        return s / n if n else s * np.nan
    return np.sign(s) * (np.abs(s) // n) if n else s  # C integer division truncates


def _np_logsumexp(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    m = _np_max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


@dataclass(frozen=True)
class Reduction:
    """acc = identity; acc = combine(acc, pre(x)) over the reduced elements;
    out = finalise(acc, n). With ``shift_by_max`` the elements are first shifted by their
    maximum m, which is added back to the result (a stable log-sum-exp)."""

    init: str  # the identity: see identity()
    combine: Callable[[Expr, Expr], Expr]
    numpy: Callable[..., np.ndarray]  # numpy(x, axis=, keepdims=), for the reference
    pre: Callable[[Expr], Expr] = _same
    finalise: Callable[[Expr, int], Expr] = _as_is
    shift_by_max: bool = False
    dtypes: tuple[str, ...] = ("float32",)


# Integer reductions wrap like C integer arithmetic: 32- and 64-bit ones accumulate in their own
# type, 8- and 16-bit ones in int32 (narrowed when stored).
NUMERIC = ("float32", "int32", "int64", "int8", "uint8", "int16", "uint16", "uint32", "uint64")
REDUCTIONS: dict[str, Reduction] = {
    "ReduceSum": Reduction("zero", _add, np.sum, dtypes=NUMERIC),
    "ReduceMean": Reduction("zero", _add, _np_mean, dtypes=NUMERIC,
                            finalise=lambda acc, n: acc / (float(n) if acc.dtype.is_float
                                                           else max(n, 1))),
    "ReduceMax": Reduction("lowest", bmax, _np_max, dtypes=NUMERIC),
    "ReduceMin": Reduction("highest", bmin, _np_min, dtypes=NUMERIC),
    "ReduceProd": Reduction("one", lambda acc, x: acc * x, np.prod, dtypes=NUMERIC),
    "ReduceL1": Reduction("zero", _add, lambda x, **kw: np.sum(np.abs(x), **kw), pre=_abs,
                          dtypes=NUMERIC),
    "ReduceL2": Reduction("zero", _add, lambda x, **kw: np.sqrt(np.sum(x * x, **kw)),
                          pre=_square, finalise=lambda acc, n: call("sqrt", acc)),
    "ReduceSumSquare": Reduction("zero", _add, lambda x, **kw: np.sum(x * x, **kw),
                                 pre=_square, dtypes=NUMERIC),
    "ReduceLogSum": Reduction("zero", _add, lambda x, **kw: np.log(np.sum(x, **kw)),
                              finalise=lambda acc, n: call("log", acc)),
    "ReduceLogSumExp": Reduction("zero", _add, _np_logsumexp, pre=lambda x: call("exp", x),
                                 finalise=lambda acc, n: call("log", acc), shift_by_max=True),
}
# The opset where the axes attribute became an input.
AXES_INPUT_SINCE = {name: 13 if name == "ReduceSum" else 18 for name in REDUCTIONS}
# ReduceMax and ReduceMin accept bool from opset 20 (False < True).
BOOL_SINCE = {"ReduceMax": 20, "ReduceMin": 20}


def resolve_axes(node: Node, raw: Sequence[int] | np.ndarray | None, rank: int,
                 noop_with_empty_axes: bool) -> tuple[int, ...]:
    """Sorted, non-negative reduced axes. No axes: all of them, or none with noop."""
    vals = [] if raw is None else [int(a) for a in np.asarray(raw).reshape(-1)]
    if not vals:
        return () if noop_with_empty_axes else tuple(range(rank))
    out = []
    for a in vals:
        if not -rank <= a < rank:
            raise AotcError(f"axis {a} is out of range for rank {rank}", node.name, node.op)
        out.append(a + rank if a < 0 else a)
    if len(set(out)) != len(out):
        raise AotcError(f"axes {vals} name a dimension twice", node.name, node.op)
    return tuple(sorted(out))


def reduced_shape(shape: Sequence[int], axes: Sequence[int], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if d in axes else s for d, s in enumerate(shape))
    return tuple(s for d, s in enumerate(shape) if d not in axes)


class _Reduce(OpDef):
    kind = "anchor"
    reduction: ClassVar[Reduction]

    def raw_axes(self, node: Node, ins: Sequence[Value | None]) -> Any:
        raise NotImplementedError

    def axes(self, node: Node, ins: Sequence[Value | None], rank: int) -> tuple[int, ...]:
        noop = bool(node.attrs.get("noop_with_empty_axes", 0))
        return resolve_axes(node, self.raw_axes(node, ins), rank, noop)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x = ins[0]
        assert x is not None
        self.axes(node, ins, len(x.type.shape))

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        axes = self.axes(node, ins, len(x.type.shape))
        shape = reduced_shape(x.type.shape, axes, bool(node.attrs["keepdims"]))
        return [TensorType(shape, x.type.dtype)]

    def _reference(self, data: np.ndarray, raw: Any, keepdims: int, noop: int) -> np.ndarray:
        node = Node(self.name, "reference", (), ())
        axes = resolve_axes(node, raw, data.ndim, bool(noop))
        # Floats in double; integers exactly (64-bit, wrapping back into the input type).
        x = data.astype(np.float64 if data.dtype.kind == "f" else
                        data.dtype if data.dtype.kind == "b" or data.dtype.itemsize == 8 else
                        np.int64)
        with np.errstate(all="ignore"):  # log(0) and 0/0 of empty sets are the right answer
            out = self.reduction.numpy(x, axis=axes, keepdims=bool(keepdims))
        return np.asarray(out).astype(data.dtype)

    def lower(self, node: Node, kb: Any) -> None:
        X: BufRef = kb.inputs[0]
        rank = len(X.shape)
        axes = self.axes(node, [None], rank)
        kept = [d for d in range(rank) if d not in axes]
        r = self.reduction
        # 8- and 16-bit integers accumulate in int32 (a mean of int8 needs the exact sum).
        dt = X.dtype
        if not dt.is_float and dt.name != "bool" and dt.itemsize < 4:
            dt = dtypes.int32
        n = math.prod(X.shape[d] for d in axes)
        with kb.loops([X.shape[d] for d in kept], [f"i{d}" for d in kept]) as ovars:
            idx: dict[int, Expr] = dict(zip(kept, ovars))
            m = None
            if r.shift_by_max:
                m = kb.local(Const(-math.inf, dt), "m", dt)
                with _reduced_loops(kb, X, axes, idx) as x:
                    kb.assign(m, bmax(m, x))
            init = identity(r.init, X.dtype.np).item()
            acc = kb.local(Const(init, dt), "acc", dt)
            with _reduced_loops(kb, X, axes, idx) as x:
                x = x if x.dtype == dt else Cast(x, dt)
                kb.assign(acc, r.combine(acc, r.pre(x if m is None else x - m)))
            value = r.finalise(acc, n)
            if m is not None:
                value = value + m
            keep = bool(node.attrs["keepdims"])
            out_idx = [idx.get(d, Const(0)) for d in range(rank) if d in idx or keep]
            kb.store_output(out_idx, value)


@contextmanager
def _reduced_loops(kb: Any, X: BufRef, axes: Sequence[int], idx: dict[int, Expr]
                   ) -> Iterator[Expr]:
    """Open nested loops over ``axes``; yields the element of X they address (the ``with``
    body is the innermost loop body)."""
    full = dict(idx)
    with ExitStack() as stack:
        for a in axes:
            full[a] = stack.enter_context(kb.loop(X.shape[a], f"r{a}"))
        yield X[[full[d] for d in range(len(X.shape))]]


class _AttrAxes(_Reduce):
    """Axes as an attribute (ReduceSum < 13, the others < 18)."""

    def raw_axes(self, node: Node, ins: Sequence[Value | None]) -> Any:
        return node.attrs.get("axes")

    def reference(self, data: np.ndarray, *, axes: Sequence[int] | None = None,
                  keepdims: int = 1) -> np.ndarray:
        return self._reference(data, axes, keepdims, 0)


class _InputAxes(_Reduce):
    """Axes as an optional constant input, plus noop_with_empty_axes."""

    const_inputs = (1,)

    def raw_axes(self, node: Node, ins: Sequence[Value | None]) -> Any:
        if "_axes" in node.attrs:  # after prepare
            return node.attrs["_axes"]
        v = ins[1] if len(ins) > 1 else None
        return None if v is None else v.const

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        v = ins[1] if len(ins) > 1 else None
        if v is not None and v.type.dtype.name != "int64":
            raise AotcError(f"axes must be int64, got {v.type.dtype.name}", node.name, node.op)

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        raw = self.raw_axes(node, ins)
        axes = None if raw is None else tuple(int(a) for a in np.asarray(raw).reshape(-1))
        return node.with_(inputs=node.inputs[:1], attrs={**node.attrs, "_axes": axes})

    def reference(self, data: np.ndarray, axes: np.ndarray | None = None, *, keepdims: int = 1,
                  noop_with_empty_axes: int = 0) -> np.ndarray:
        return self._reference(data, axes, keepdims, noop_with_empty_axes)


def _register_reduction(name: str, tests: tuple[str, ...]) -> None:
    r = REDUCTIONS[name]
    versions = [(_AttrAxes, 1, r.dtypes), (_InputAxes, AXES_INPUT_SINCE[name], r.dtypes)]
    if name in BOOL_SINCE:
        versions.append((_InputAxes, BOOL_SINCE[name], (*r.dtypes, "bool")))
    for base, since, dts in versions:
        cls_name = name if since == 1 else f"{name}{since}"
        cls = type(cls_name, (base,), {"name": name, "since": since, "onnx_tests": tests,
                                        "reduction": r, "dtypes": dts, "__module__": __name__})
        register(cls)


# Globs name the node tests per op; "sum_*" alone would also claim the sum_square tests.
_register_reduction("ReduceSum", ("test_reduce_sum_default*", "test_reduce_sum_do_not*",
                                  "test_reduce_sum_keepdims*", "test_reduce_sum_negative*",
                                  "test_reduce_sum_empty_axes*"))
_register_reduction("ReduceMean", ("test_reduce_mean_*",))
_register_reduction("ReduceMax", ("test_reduce_max_*",))
_register_reduction("ReduceMin", ("test_reduce_min_*",))
_register_reduction("ReduceProd", ("test_reduce_prod_*",))
_register_reduction("ReduceL1", ("test_reduce_l1_*",))
_register_reduction("ReduceL2", ("test_reduce_l2_*",))
_register_reduction("ReduceSumSquare", ("test_reduce_sum_square_*",))
_register_reduction("ReduceLogSum", ("test_reduce_log_sum_asc*", "test_reduce_log_sum_default*",
                                     "test_reduce_log_sum_desc*",
                                     "test_reduce_log_sum_negative*"))
_register_reduction("ReduceLogSumExp", ("test_reduce_log_sum_exp_*",))


# ------------------------------------------------------------------------------ ArgMax, ArgMin
class _Arg(OpDef):
    kind = "kernel"
    largest: ClassVar[bool] = True

    def _axis(self, node: Node, rank: int) -> int:
        return resolve_axes(node, [node.attrs["axis"]], rank, False)[0]

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x = ins[0]
        assert x is not None
        self._axis(node, len(x.type.shape))

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        axis = self._axis(node, len(x.type.shape))
        shape = reduced_shape(x.type.shape, [axis], bool(node.attrs["keepdims"]))
        return [TensorType(shape, dtypes.int64)]

    def _reference(self, data: np.ndarray, axis: int, keepdims: int, last: int) -> np.ndarray:
        fn = np.argmax if self.largest else np.argmin
        if last:
            n = data.shape[axis]
            out = n - 1 - fn(np.flip(data, axis=axis), axis=axis, keepdims=bool(keepdims))
        else:
            out = fn(data, axis=axis, keepdims=bool(keepdims))
        return np.asarray(out, np.int64)

    def lower(self, node: Node, kb: Any) -> None:
        X: BufRef = kb.inputs[0]
        rank = len(X.shape)
        axis = self._axis(node, rank)
        kept = [d for d in range(rank) if d != axis]
        # Ties: the first index wins with a strict comparison, the last with a non-strict one.
        last = bool(node.attrs.get("select_last_index", 0))
        op = ("ge" if last else "gt") if self.largest else ("le" if last else "lt")
        with kb.loops([X.shape[d] for d in kept], [f"i{d}" for d in kept]) as ovars:
            idx: dict[int, Expr] = dict(zip(kept, ovars))

            def at(k: Expr) -> Expr:
                return X[[k if d == axis else idx[d] for d in range(rank)]]

            best_i = kb.local(Const(0), "best_i")
            if X.shape[axis] > 1:
                best = kb.local(at(Const(0)), "best", X.dtype)
                with kb.loop(X.shape[axis], "k", start=1) as k:
                    v = kb.local(at(k), "v", X.dtype)
                    with kb.if_(cmp(op, v, best)):
                        kb.assign(best, v)
                        kb.assign(best_i, k)
            keep = bool(node.attrs["keepdims"])
            out_idx = [idx.get(d, Const(0)) for d in range(rank) if d in idx or keep]
            kb.store_output(out_idx, best_i)


class _Arg1(_Arg):
    def reference(self, data: np.ndarray, *, axis: int = 0, keepdims: int = 1) -> np.ndarray:
        return self._reference(data, axis, keepdims, 0)


class _Arg12(_Arg):
    """Opset 12 adds select_last_index."""

    def reference(self, data: np.ndarray, *, axis: int = 0, keepdims: int = 1,
                  select_last_index: int = 0) -> np.ndarray:
        return self._reference(data, axis, keepdims, select_last_index)


@register
class ArgMax(_Arg1):
    name = "ArgMax"
    since = 1
    onnx_tests = ("test_argmax_*",)


@register
class ArgMax12(_Arg12):
    name = "ArgMax"
    since = 12
    onnx_tests = ("test_argmax_*",)


@register
class ArgMin(_Arg1):
    name = "ArgMin"
    since = 1
    largest = False
    onnx_tests = ("test_argmin_*",)


@register
class ArgMin12(_Arg12):
    name = "ArgMin"
    since = 12
    largest = False
    onnx_tests = ("test_argmin_*",)
