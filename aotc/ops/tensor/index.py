"""Indexing ops whose indices may be run-time tensors: GatherElements, GatherND, Scatter,
ScatterElements, ScatterND and TensorScatter (Gather itself lives in movement.py).

Indices (int32 or int64) are loaded per element and turned into an INDEX by
``movement.runtime_index``: a negative index counts from the end of its dim, and one still
outside the dim is CLAMPED to the nearest valid index, so a bad run-time index never reads or
writes outside a tensor (ONNX leaves it undefined; onnxruntime raises). Constant indices take
the same kernels and are checked against the spec's range at compile time instead.

The scatters first copy ``data`` to the output, then apply the updates in index order, so a
repeated index sees every earlier update (the last write wins without a reduction).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.builder import strides_of
from aotc.loops.loop_ir import INDEX, Cast, Const, Expr, Store, bmax, bmin
from aotc.ops import OpDef, register
from aotc.ops.common import ANY, nest
from aotc.ops.common import axis as axis_of
from aotc.ops.tensor.movement import check_indices, clamp_indices, runtime_index
from aotc.ops.tensor.shape import copy_flat

COMBINE: dict[str, Callable[[Expr, Expr], Expr]] = {
    "none": lambda y, u: u,
    "add": lambda y, u: y + u,
    "mul": lambda y, u: y * u,
    "max": bmax,
    "min": bmin,
}
NP_COMBINE: dict[str, Callable[[Any, Any], Any]] = {
    "none": lambda y, u: u, "add": lambda y, u: y + u, "mul": lambda y, u: y * u,
    "max": max, "min": min,
}


def _val(ins: Sequence[Value | None], i: int) -> Value:
    v = ins[i] if i < len(ins) else None
    assert v is not None
    return v


def _need(cond: bool, node: Node, reason: str) -> None:
    if not cond:
        raise AotcError(reason, node.name, node.op)


def _check_reduction(node: Node, ins: Sequence[Value | None], allowed: Sequence[str]) -> str:
    red = str(node.attrs.get("reduction", "none"))
    _need(red in allowed, node, f"reduction={red!r} is not supported at opset "
          f"{node.version or '?'}; supported: {', '.join(allowed)}")
    _need(red == "none" or _val(ins, 0).type.dtype.name != "bool", node,
          f"reduction={red!r} on bool data")
    return red


def _check_nd_indices(node: Node, v: Value, dims: Sequence[int], first: int) -> None:
    """GatherND/ScatterND: the last index dim addresses data dims ``first..``; constant
    indices are range-checked per column."""
    check_indices(node, v, max(dims, default=1), first)  # dtype (and the empty-dim case)
    if v.is_const:
        cols = np.asarray(v.const).astype(np.int64).reshape(-1, len(dims))
        for t, n in enumerate(dims):
            bad = cols[:, t][(cols[:, t] < -n) | (cols[:, t] >= n)]
            _need(not bad.size, node, f"index {int(bad[0]) if bad.size else 0} is out of range "
                  f"for dim {n} (axis {first + t})")


# ---------------------------------------------------------------------------- GatherElements
def _elements_index(indices: np.ndarray, data_shape: Sequence[int], axis: int) -> tuple:
    """numpy index tuple of data for each element of ``indices`` (clamped like the C)."""
    grid = list(np.indices(indices.shape, sparse=True))
    grid[axis] = clamp_indices(indices, data_shape[axis])
    return tuple(grid)


class _ElementsShape:
    """GatherElements/ScatterElements: indices (and updates) have the data's rank and no larger
    dims; the axis is checked against the data's rank."""

    def elements_check(self, node: Node, data: Value, indices: Value) -> int:
        shape, ishape = data.type.shape, indices.type.shape
        axis = axis_of(node, node.attrs.get("axis", 0), len(shape))
        _need(len(ishape) == len(shape), node,
              f"indices have rank {len(ishape)}, data rank {len(shape)}")
        _need(all(i <= d or k == axis for k, (i, d) in enumerate(zip(ishape, shape))), node,
              f"indices shape {list(ishape)} exceeds data shape {list(shape)}")
        check_indices(node, indices, shape[axis], axis)
        return axis


class _GatherElements(OpDef, _ElementsShape):
    dtypes = ANY
    defined = ("run-time indices: a negative one counts from the end once, one still outside "
               "the dim is clamped to the nearest end (onnxruntime refuses the run)")
    onnx_tests = ("test_gather_elements_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins[:1])
        self.elements_check(node, _val(ins, 0), _val(ins, 1))

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        return [TensorType(_val(ins, 1).type.shape, _val(ins, 0).type.dtype)]

    def reference(self, data: np.ndarray, indices: np.ndarray, *, axis: int = 0) -> np.ndarray:
        axis = axis + data.ndim if axis < 0 else axis
        return data[_elements_index(indices, data.shape, axis)]

    def lower(self, node: Node, kb: Any) -> None:
        X, ind = kb.inputs[0], kb.inputs[1]
        axis = axis_of(node, node.attrs["axis"], len(X.shape))
        if ind.numel == 0:
            return
        with kb.loops(ind.shape) as o:
            src = list(o)
            src[axis] = runtime_index(ind[o], X.shape[axis], kb)
            kb.store_output(o, X[src])


@register
class GatherElements(_GatherElements):
    name = "GatherElements"
    since = 11


@register
class GatherElements13(_GatherElements):
    name = "GatherElements"
    since = 13


# ---------------------------------------------------------------------------------- GatherND
def _nd_plan(node: Node, shape: Sequence[int], ishape: Sequence[int], b: int
             ) -> tuple[int, int, int, int]:
    """(batch B, index tuples per batch K, index length m, slice size T) of GatherND."""
    _need(len(ishape) >= 1 and 0 <= b < min(len(shape), len(ishape)), node,
          f"batch_dims={b} needs data and indices of higher rank")
    m = ishape[-1]
    _need(list(ishape[:b]) == list(shape[:b]), node,
          f"batch dims of indices {list(ishape[:b])} differ from data {list(shape[:b])}")
    _need(1 <= m <= len(shape) - b, node,
          f"the last indices dim ({m}) must be in 1..{len(shape) - b}")
    return (math.prod(ishape[:b]), math.prod(ishape[b:-1]), m, math.prod(shape[b + m:]))


def _gather_nd(data: np.ndarray, indices: np.ndarray, b: int) -> np.ndarray:
    node = Node("GatherND", "reference", (), ())
    B, K, m, T = _nd_plan(node, data.shape, indices.shape, b)
    d = data.reshape((B, *data.shape[b:]))
    ind = indices.reshape(B, K, m)
    out = np.empty((B, K, T), data.dtype)
    for bi in range(B):
        cols = tuple(clamp_indices(ind[bi, :, t], data.shape[b + t]) for t in range(m))
        out[bi] = d[bi][cols].reshape(K, T)
    return out.reshape((*indices.shape[:-1], *data.shape[b + m:]))


class _GatherND(OpDef):
    dtypes = ANY
    defined = ("run-time indices: a negative one counts from the end once, one still outside "
               "the dim is clamped to the nearest end (onnxruntime refuses the run)")
    onnx_tests = ("test_gathernd_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins[:1])
        shape, ind = _val(ins, 0).type.shape, _val(ins, 1)
        b = int(node.attrs.get("batch_dims", 0))
        _, _, m, _ = _nd_plan(node, shape, ind.type.shape, b)
        _check_nd_indices(node, ind, shape[b:b + m], b)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x, ind = _val(ins, 0).type, _val(ins, 1).type
        b = int(node.attrs.get("batch_dims", 0))
        shape = (*ind.shape[:-1], *x.shape[b + ind.shape[-1]:])
        return [TensorType(tuple(shape), x.dtype)]

    def lower(self, node: Node, kb: Any) -> None:
        X, ind, Y = kb.inputs[0], kb.inputs[1], kb.outputs[0]
        b = int(node.attrs.get("batch_dims", 0))
        B, K, m, T = _nd_plan(node, X.shape, ind.shape, b)
        if Y.numel == 0:
            return
        strides = strides_of(X.shape)
        batch = math.prod(X.shape[b:])
        with nest(kb, [B, K], "g") as (bi, k):
            row = bi * K + k
            pos: Expr = bi * batch
            for t in range(m):
                at = runtime_index(ind.flat(row * m + t), X.shape[b + t], kb)
                pos = pos + at * strides[b + t]
            base = kb.local(pos, "pos")
            with nest(kb, [T], "e") as (e,):
                kb.store_output([], X.flat(base + e), flat=row * T + e)


@register
class GatherND(_GatherND):
    name = "GatherND"
    since = 11

    def reference(self, data: np.ndarray, indices: np.ndarray) -> np.ndarray:
        return _gather_nd(data, indices, 0)


@register
class GatherND12(_GatherND):
    name = "GatherND"
    since = 12

    def reference(self, data: np.ndarray, indices: np.ndarray, *, batch_dims: int = 0
                  ) -> np.ndarray:
        return _gather_nd(data, indices, batch_dims)


@register
class GatherND13(GatherND12):
    since = 13


# --------------------------------------------------------------------------- ScatterElements
class _Scatter(OpDef):
    """Shared by the scatters: output = data's type; kernels copy data first."""

    dtypes = ANY
    defined = ("run-time indices: a negative one counts from the end once, one still outside "
               "the dim is clamped to the nearest end (onnxruntime refuses the run)")
    reductions: ClassVar[tuple[str, ...]] = ("none",)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        return [_val(ins, 0).type]

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, [ins[0], None, *ins[2:]])
        _need(_val(ins, 0).type.dtype == _val(ins, 2).type.dtype, node,
              "data and updates have different dtypes")
        _check_reduction(node, ins, self.reductions)


def _scatter_elements(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, axis: int,
                      reduction: str) -> np.ndarray:
    axis = axis + data.ndim if axis < 0 else axis
    out = np.copy(data)
    where = [np.broadcast_to(g, indices.shape) for g in
             _elements_index(indices, data.shape, axis)]
    f = NP_COMBINE[reduction]
    for u in np.ndindex(indices.shape):  # in order: repeated targets see earlier updates
        t = tuple(int(g[u]) for g in where)
        out[t] = f(out[t], updates[u])
    return out


class _ScatterElements(_Scatter, _ElementsShape):
    onnx_tests = ("test_scatter_elements_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        self.elements_check(node, _val(ins, 0), _val(ins, 1))
        _need(_val(ins, 1).type.shape == _val(ins, 2).type.shape, node,
              f"updates shape {list(_val(ins, 2).type.shape)} differs from indices shape "
              f"{list(_val(ins, 1).type.shape)}")

    def reference(self, data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
                  axis: int = 0) -> np.ndarray:
        return _scatter_elements(data, indices, updates, axis, "none")

    def lower(self, node: Node, kb: Any) -> None:
        X, ind, U = kb.inputs[0], kb.inputs[1], kb.inputs[2]
        Y = kb.outputs[0]
        axis = axis_of(node, node.attrs.get("axis", 0), len(X.shape))
        f = COMBINE[str(node.attrs.get("reduction", "none"))]
        copy_flat(kb)
        if ind.numel == 0:
            return
        with kb.loops(ind.shape, [f"u{d}" for d in range(len(ind.shape))]) as u:
            dst = list(u)
            dst[axis] = runtime_index(ind[u], X.shape[axis], kb)
            at = kb.local(Y.index(dst), "at")
            _update(kb, Y, at, U[u], f)


def _update(kb: Any, Y: Any, at: Expr, value: Expr, f: Callable[[Expr, Expr], Expr]) -> None:
    """Y[at] = f(Y[at], value) at the flat index ``at``."""
    kb.emit(Store(Y.buf, at, f(Y.flat(at), value)))


@register
class ScatterElements(_ScatterElements):
    name = "ScatterElements"
    since = 11


@register
class ScatterElements13(_ScatterElements):
    name = "ScatterElements"
    since = 13


class _ScatterElementsReduce(_ScatterElements):
    def reference(self, data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
                  axis: int = 0, reduction: str = "none") -> np.ndarray:
        return _scatter_elements(data, indices, updates, axis, reduction)


@register
class ScatterElements16(_ScatterElementsReduce):
    name = "ScatterElements"
    since = 16
    reductions = ("none", "add", "mul")


@register
class ScatterElements18(_ScatterElementsReduce):
    name = "ScatterElements"
    since = 18
    reductions = ("none", "add", "mul", "max", "min")


@register
class Scatter(_ScatterElements):
    """Deprecated alias of ScatterElements (opset 9-10; removed in 11's favour)."""

    name = "Scatter"
    since = 9
    onnx_tests = ("test_scatter_with_axis", "test_scatter_without_axis")


@register
class Scatter11(Scatter):
    since = 11


# -------------------------------------------------------------------------------- ScatterND
def _scatter_nd(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, reduction: str
                ) -> np.ndarray:
    node = Node("ScatterND", "reference", (), ())
    _, K, m, T = _nd_plan(node, data.shape, indices.shape, 0)
    out = np.copy(data).reshape(-1)
    strides = strides_of(data.shape)
    ind = indices.reshape(K, m)
    upd = updates.reshape(K, T)
    f = NP_COMBINE[reduction]
    for k in range(K):
        base = sum(int(clamp_indices(ind[k, t], data.shape[t])) * strides[t] for t in range(m))
        for e in range(T):
            out[base + e] = f(out[base + e], upd[k, e])
    return out.reshape(data.shape)


class _ScatterND(_Scatter):
    onnx_tests = ("test_scatternd*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        shape, ind, upd = _val(ins, 0).type.shape, _val(ins, 1), _val(ins, 2)
        _, _, m, _ = _nd_plan(node, shape, ind.type.shape, 0)
        want = (*ind.type.shape[:-1], *shape[m:])
        _need(upd.type.shape == want, node,
              f"updates shape {list(upd.type.shape)} should be {list(want)}")
        _check_nd_indices(node, ind, shape[:m], 0)

    def reference(self, data: np.ndarray, indices: np.ndarray, updates: np.ndarray
                  ) -> np.ndarray:
        return _scatter_nd(data, indices, updates, "none")

    def lower(self, node: Node, kb: Any) -> None:
        X, ind, U = kb.inputs[0], kb.inputs[1], kb.inputs[2]
        Y = kb.outputs[0]
        _, K, m, T = _nd_plan(node, X.shape, ind.shape, 0)
        f = COMBINE[str(node.attrs.get("reduction", "none"))]
        copy_flat(kb)
        if U.numel == 0:
            return
        strides = strides_of(X.shape)
        with nest(kb, [K], "u") as (k,):
            pos: Expr = Const(0)
            for t in range(m):
                pos = pos + runtime_index(ind.flat(k * m + t), X.shape[t], kb) * strides[t]
            base = kb.local(pos, "pos")
            with nest(kb, [T], "e") as (e,):
                _update(kb, Y, base + e, U.flat(k * T + e), f)


@register
class ScatterND(_ScatterND):
    name = "ScatterND"
    since = 11


@register
class ScatterND13(_ScatterND):
    name = "ScatterND"
    since = 13


class _ScatterNDReduce(_ScatterND):
    def reference(self, data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
                  reduction: str = "none") -> np.ndarray:
        return _scatter_nd(data, indices, updates, reduction)


@register
class ScatterND16(_ScatterNDReduce):
    name = "ScatterND"
    since = 16
    reductions = ("none", "add", "mul")


@register
class ScatterND18(_ScatterNDReduce):
    name = "ScatterND"
    since = 18
    reductions = ("none", "add", "mul", "max", "min")


# ----------------------------------------------------------------------------- TensorScatter
def _seq_axis(node: Node, shape: Sequence[int]) -> int:
    axis = axis_of(node, node.attrs.get("axis", -2), len(shape))
    _need(axis >= 1, node, f"axis={node.attrs.get('axis', -2)} is the batch dim")
    return axis


@register
class TensorScatter(OpDef):
    """A KV-cache update: present = past with ``update`` written along the sequence axis from
    write_indices[batch] on (modulo the cache length in "circular" mode). A linear write past
    the cache end is clamped to its last row (the spec leaves it undefined)."""

    name = "TensorScatter"
    defined = ("linear mode: a write past the cache end is clamped to its last row; circular: "
               "write indices are taken modulo the cache length")
    since = 24
    dtypes = ANY
    onnx_tests = ("test_tensorscatter*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins[:2])
        past, upd = _val(ins, 0).type, _val(ins, 1).type
        axis = _seq_axis(node, past.shape)
        mode = node.attrs.get("mode", "linear")
        _need(mode in ("linear", "circular"), node, f"mode={mode!r}; supported: linear, circular")
        _need(past.dtype == upd.dtype, node, "past_cache and update have different dtypes")
        _need(len(upd.shape) == len(past.shape)
              and all(u == p or d == axis for d, (u, p) in enumerate(zip(upd.shape, past.shape)))
              and upd.shape[axis] <= past.shape[axis], node,
              f"update shape {list(upd.shape)} does not fit past_cache {list(past.shape)}")
        w = ins[2] if len(ins) > 2 else None
        if w is not None:
            _need(w.type.dtype.name == "int64" and w.type.shape == past.shape[:1], node,
                  f"write_indices must be int64 of shape [{past.shape[0]}]")

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        return [_val(ins, 0).type]

    def reference(self, past_cache: np.ndarray, update: np.ndarray,
                  write_indices: np.ndarray | None = None, *, axis: int = -2,
                  mode: str = "linear") -> np.ndarray:
        axis = axis % past_cache.ndim
        M, S = past_cache.shape[axis], update.shape[axis]
        wi = (np.zeros(past_cache.shape[0], np.int64) if write_indices is None
              else np.asarray(write_indices, np.int64))
        out = np.copy(past_cache)
        for p in np.ndindex(past_cache.shape[:axis]):
            for s in range(S):
                c = int(wi[p[0]]) + s
                c = c % M if mode == "circular" else int(clamp_indices(np.int64(c), M))
                out[(*p, c)] = update[(*p, s)]
        return out

    def lower(self, node: Node, kb: Any) -> None:
        X, U = kb.inputs[0], kb.inputs[1]
        W = kb.inputs[2] if len(kb.inputs) > 2 else None
        axis = _seq_axis(node, X.shape)
        M, S = X.shape[axis], U.shape[axis]
        outer, inner = math.prod(X.shape[:axis]), math.prod(X.shape[axis + 1:])
        per_batch = outer // X.shape[0] if X.shape[0] else 0
        copy_flat(kb)
        if 0 in (outer, S, inner):
            return
        with nest(kb, [outer, S], "s") as (p, s):
            if W is None:
                c: Expr = s
            else:
                row = W.flat(p // per_batch) + s  # the write index in int64
                if node.attrs.get("mode", "linear") == "circular":
                    c = Cast(((row % M) + M) % M, INDEX)
                else:
                    c = runtime_index(row, M, kb)
            at = kb.local(c, "row")
            with nest(kb, [inner], "e") as (e,):
                kb.store_output([], U.flat((p * S + s) * inner + e),
                                flat=(p * M + at) * inner + e)
