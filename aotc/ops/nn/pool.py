"""Pooling: MaxPool, AveragePool, GlobalMaxPool, GlobalAveragePool over NC + 1-D/2-D/3-D spatial.
Anchors: a fused epilogue runs per output element before the store. Window geometry, including
ceil_mode and auto_pad, is resolved at compile time the way onnxruntime resolves it. MaxPool's
optional Indices output (row- or column-major per storage_order) is tracked alongside the max;
LpPool (lp_pool_unpool.py) reuses the window code."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import INDEX, Bin, Cast, Const, Expr, bmax, call, cmp, land
from aotc.ops import OpDef, register


@dataclass(frozen=True)
class PoolGeometry:
    """Per spatial dim: input size, kernel, stride, dilation, pads and output size. Window ``o``
    of dim ``i`` reads input positions ``o*strides[i] - pads_begin[i] + j*dilations[i]``."""

    in_size: tuple[int, ...]
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    out: tuple[int, ...]

    def taps(self, dim: int, o: int) -> list[int]:
        start = o * self.strides[dim] - self.pads_begin[dim]
        return [start + j * self.dilations[dim] for j in range(self.kernel[dim])]

    def valid_counts(self, dim: int) -> list[int]:
        """Per output position: taps inside the input."""
        n = self.in_size[dim]
        return [sum(0 <= t < n for t in self.taps(dim, o)) for o in range(self.out[dim])]

    def padded_counts(self, dim: int) -> list[int]:
        """Per output position: taps inside the padded input (count_include_pad=1). A ceil_mode
        window may run past the end padding; those taps count for neither ONNX nor onnxruntime."""
        end = self.in_size[dim] + self.pads_end[dim]
        return [sum(t < end for t in self.taps(dim, o)) for o in range(self.out[dim])]

    def needs_low_check(self, dim: int) -> bool:
        return self.pads_begin[dim] > 0

    def needs_high_check(self, dim: int) -> bool:
        return self.taps(dim, self.out[dim] - 1)[-1] >= self.in_size[dim]


# Output positions per spatial dim: the compile-time window tables are built per position.
MAX_POOL_OUT = 1 << 24


def _out_size(n: int, k: int, s: int, d: int, pb: int, pe: int, ceil_mode: bool) -> int:
    num = n + pb + pe - d * (k - 1) - 1
    if num < 0:
        return 0
    out = (-(-num // s) if ceil_mode else num // s) + 1
    # ceil_mode: a window that would start in the end padding is dropped (ONNX spec since 1.16,
    # onnxruntime; PyTorch's rule).
    if ceil_mode and (out - 1) * s >= n + pb:
        out -= 1
    return out


def pool_geometry(node: Node, in_sp: Sequence[int]) -> PoolGeometry:
    """Resolve kernel_shape/strides/dilations/pads/auto_pad/ceil_mode; AotcError if invalid."""
    nd = len(in_sp)

    def ints(key: str, default: list[int], n: int) -> list[int]:
        v = [int(x) for x in (node.attrs.get(key) or default)]
        if len(v) != n:
            raise AotcError(f"{key} has {len(v)} values; the input has {nd} spatial dims "
                            f"(expected {n})", node.name, node.op)
        return v

    k = ints("kernel_shape", [], nd)
    s = ints("strides", [1] * nd, nd)
    d = ints("dilations", [1] * nd, nd)
    if min(k) < 1 or min(s) < 1 or min(d) < 1:
        raise AotcError(f"kernel_shape {k}, strides {s} and dilations {d} must be >= 1",
                        node.name, node.op)
    auto = node.attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        if any(x != 1 for x in d):
            # onnxruntime sizes SAME padding without the dilation, the ONNX spec with it: the
            # two disagree on the output shape, so there is no answer to match.
            raise AotcError(f"auto_pad={auto} with dilations {d} is not supported (ONNX and "
                            f"onnxruntime disagree on its output shape); use explicit pads",
                            node.name, node.op)
        pb, pe = [], []
        for n, kk, ss in zip(in_sp, k, s):
            total = max(0, (-(-n // ss) - 1) * ss + kk - n)
            pb.append(total // 2 if auto == "SAME_UPPER" else total - total // 2)
            pe.append(total - pb[-1])
    elif auto == "VALID":
        pb, pe = [0] * nd, [0] * nd
    elif auto == "NOTSET":
        pads = ints("pads", [0] * (2 * nd), 2 * nd)
        if min(pads) < 0:
            raise AotcError(f"pads {pads} must be >= 0", node.name, node.op)
        pb, pe = pads[:nd], pads[nd:]
    else:
        raise AotcError(f"auto_pad={auto!r} is not valid", node.name, node.op)
    ceil_mode = bool(node.attrs.get("ceil_mode", 0))
    out = [_out_size(*args, ceil_mode) for args in zip(in_sp, k, s, d, pb, pe)]
    if min(out) < 1:
        raise AotcError(f"output would be empty (spatial {list(in_sp)}, kernel {k}, dilations "
                        f"{d}, pads {pb + pe})", node.name, node.op)
    if max(out) > MAX_POOL_OUT:
        raise AotcError(f"output would have {max(out)} positions along a spatial dim (pads "
                        f"{pb + pe}); aotc supports up to {MAX_POOL_OUT}", node.name, node.op)
    geo = PoolGeometry(*(tuple(x) for x in (in_sp, k, s, d, pb, pe, out)))
    for dim in range(nd):
        if 0 in geo.valid_counts(dim):
            raise AotcError(f"a pooling window along spatial dim {dim} lies entirely in the "
                            f"padding (pads {pb + pe}, kernel {k}, dilations {d})",
                            node.name, node.op)
    return geo


def global_geometry(in_sp: Sequence[int]) -> PoolGeometry:
    nd = len(in_sp)
    one, zero = (1,) * nd, (0,) * nd
    return PoolGeometry(tuple(in_sp), tuple(in_sp), one, one, zero, zero, one)


def pool_reference(X: np.ndarray, geo: PoolGeometry, mode: str, include_pad: bool) -> np.ndarray:
    """numpy semantics (constant folding only): pad, then combine one kernel tap at a time."""
    nd = X.ndim - 2
    hi = [max(0, geo.taps(i, geo.out[i] - 1)[-1] + 1 - geo.in_size[i]) for i in range(nd)]
    fill = -np.inf if mode == "max" else 0.0
    xp = np.pad(X.astype(np.float64), [(0, 0), (0, 0)] + list(zip(geo.pads_begin, hi)),
                constant_values=fill)
    acc = np.full(X.shape[:2] + geo.out, fill)
    for kidx in np.ndindex(*geo.kernel):
        sl = tuple(slice(j * d, j * d + (o - 1) * s + 1, s)
                   for j, d, o, s in zip(kidx, geo.dilations, geo.out, geo.strides))
        patch = xp[(slice(None), slice(None)) + sl]
        acc = np.maximum(acc, patch) if mode == "max" else acc + patch
    if mode == "avg":
        count = np.ones(geo.out)
        for i in range(nd):
            c = geo.padded_counts(i) if include_pad else geo.valid_counts(i)
            count = count * np.asarray(c, np.float64).reshape([-1 if j == i else 1
                                                               for j in range(nd)])
        acc = acc / count
    return acc.astype(X.dtype)


Tap = Callable[[list[Expr]], None]  # called per window tap with its input spatial index


class _Pool(OpDef):
    kind = "anchor"
    mode: ClassVar[str] = "max"  # "max", "avg" or "lp"
    is_global: ClassVar[bool] = False

    def geometry(self, node: Node, in_sp: Sequence[int]) -> PoolGeometry:
        return global_geometry(in_sp) if self.is_global else pool_geometry(node, in_sp)

    @staticmethod
    def wants_indices(node: Node) -> bool:
        return len(node.outputs) > 1 and bool(node.outputs[1])

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        if len([o for o in node.outputs if o]) > 1 and self.mode != "max":
            raise AotcError("has only one output (Y); only MaxPool has Indices",
                            node.name, node.op)
        if node.attrs.get("storage_order", 0) not in (0, 1):
            raise AotcError(f"storage_order={node.attrs['storage_order']} is not valid "
                            f"(0: row-major, 1: column-major)", node.name, node.op)
        x = ins[0]
        assert x is not None
        if len(x.type.shape) < 3:
            raise AotcError(f"expects X of rank >= 3 (N, C, spatial...), got {x.type.shape}",
                            node.name, node.op)
        self.geometry(node, x.type.shape[2:])

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        geo = self.geometry(node, x.type.shape[2:])
        shape = (*x.type.shape[:2], *geo.out)
        return [TensorType(shape, x.type.dtype), TensorType(shape, dtypes.int64)
                ][:max(1, len(node.outputs))]

    def _reference(self, X: np.ndarray, attrs: dict[str, Any]) -> Any:
        node = Node(self.name, "reference", (), (), attrs)
        geo = self.geometry(node, X.shape[2:])
        if self.mode == "lp":
            p = float(attrs.get("p", 2))
            return (pool_reference(np.abs(X) ** p, geo, "sum", False) ** (1.0 / p)
                    ).astype(X.dtype)
        return pool_reference(X, geo, self.mode, bool(attrs.get("count_include_pad", 0)))

    def _argmax(self, X: np.ndarray, attrs: dict[str, Any], storage_order: int) -> np.ndarray:
        """Indices of the window maxima (first in scan order), flat in the whole tensor."""
        geo = self.geometry(Node(self.name, "reference", (), (), attrs), X.shape[2:])
        nd = len(geo.kernel)
        lowest = -np.inf if X.dtype.kind == "f" else np.iinfo(X.dtype).min
        strides = [math.prod(geo.in_size[d + 1:]) for d in range(nd)]
        if storage_order:
            strides = [math.prod(geo.in_size[:d]) for d in range(nd)]
        out = np.zeros(X.shape[:2] + geo.out, np.int64)
        for n, c in np.ndindex(*X.shape[:2]):
            for o in np.ndindex(*geo.out):
                best, at = lowest, -1
                for pos in itertools.product(*(geo.taps(d, o[d]) for d in range(nd))):
                    if all(0 <= t < size for t, size in zip(pos, geo.in_size)):
                        v = X[(n, c, *pos)]
                        if v > best:
                            best, at = v, sum(t * s for t, s in zip(pos, strides))
                out[(n, c, *o)] = (n * X.shape[1] + c) * math.prod(geo.in_size) + at
        return out

    # ------------------------------------------------------------------ lowering
    def _init(self, dt: Any) -> Expr:
        if self.mode != "max":
            return Const(0.0, dt)
        if dt.is_float:
            return Const(-math.inf, dt)
        return Const(int(np.iinfo(dt.np).min), dt)

    def _combine(self, node: Node, acc: Expr, x: Expr) -> Expr:
        if self.mode == "max":
            return bmax(acc, x)
        if self.mode == "avg":
            return acc + x
        p = int(node.attrs.get("p", 2))
        if p == 1:
            return acc + call("abs", x)
        if p == 2:
            return acc + x * x
        return acc + Bin("pow", call("abs", x), Const(float(p), x.dtype), x.dtype)

    def _finish(self, node: Node, acc: Expr, count: Callable[[], Expr]) -> Expr:
        if self.mode == "avg":
            return acc / count()
        if self.mode == "lp":
            p = int(node.attrs.get("p", 2))
            if p == 2:
                return call("sqrt", acc)
            if p != 1:
                return Bin("pow", acc, Const(1.0 / p, acc.dtype), acc.dtype)
        return acc

    def lower(self, node: Node, kb: Any) -> None:
        X, Y = kb.inputs[0], kb.outputs[0]
        geo = self.geometry(node, X.shape[2:])
        dt = X.dtype
        if self.is_global:
            self._lower_global(node, kb)
            return
        nd = len(geo.kernel)
        with kb.loops(Y.shape, ["n", "c"] + [f"o{i}" for i in range(nd)]) as (n, c, *o):
            acc = kb.local(self._init(dt), "acc", dt)
            indices = self.wants_indices(node) and 1 not in kb.dead_outputs
            best = kb.local(Const(-1), "best") if indices else None

            def tap(pos: list[Expr]) -> None:
                x = X[[n, c, *pos]]
                if best is None:
                    kb.assign(acc, self._combine(node, acc, x))
                    return
                # Indices: the first maximum in scan order wins (strict >, onnxruntime's).
                xv = kb.local(x, "x", dt)
                with kb.if_(cmp("gt", xv, acc)):
                    kb.assign(acc, xv)
                    kb.assign(best, self._spatial_flat(node, geo, pos))

            self._window(kb, geo, o, 0, [], tap)
            include = bool(node.attrs.get("count_include_pad", 0))
            kb.store_output([n, c, *o], self._finish(
                node, acc, lambda: self._divisor(kb, geo, o, include, dt)))
            if best is not None:
                plane = (n * X.shape[1] + c) * math.prod(geo.in_size)
                kb.store_output([n, c, *o], Cast(plane + best, dtypes.int64), out=1)

    @staticmethod
    def _spatial_flat(node: Node, geo: PoolGeometry, pos: list[Expr]) -> Expr:
        """Flat index of a tap in its (n, c) plane: row-major, or column-major with
        storage_order=1."""
        dims = range(len(pos))
        order = reversed(dims) if node.attrs.get("storage_order", 0) else dims
        flat: Expr = Const(0)
        for d in order:
            flat = flat * geo.in_size[d] + pos[d]
        return flat

    def _window(self, kb: Any, geo: PoolGeometry, o: list[Expr], dim: int, pos: list[Expr],
                tap: Tap) -> None:
        if dim == len(geo.kernel):
            tap(pos)
            return
        with kb.loop(geo.kernel[dim], f"k{dim}", unroll=True) as j:
            # Constant part grouped so an unrolled tap folds to one offset. No local for the
            # position: once unrolled, a guard that is always false is dropped with its body and
            # would leave the local unused (-Werror).
            p = o[dim] * geo.strides[dim] + (j * geo.dilations[dim] - geo.pads_begin[dim])
            conds = []
            if geo.needs_low_check(dim):
                conds.append(cmp("ge", p, 0))
            if geo.needs_high_check(dim):
                conds.append(cmp("lt", p, geo.in_size[dim]))
            if conds:
                with kb.if_(land(*conds)):
                    self._window(kb, geo, o, dim + 1, pos + [p], tap)
            else:
                self._window(kb, geo, o, dim + 1, pos + [p], tap)

    @staticmethod
    def _divisor(kb: Any, geo: PoolGeometry, o: list[Expr], include_pad: bool, dt: Any) -> Expr:
        """Elements per window: a product of per-dim counts, folded to a constant where it does
        not vary, else read from a small compile-time table per dim."""
        fixed = 1
        varying: list[Expr] = []
        for dim in range(len(geo.kernel)):
            counts = geo.padded_counts(dim) if include_pad else geo.valid_counts(dim)
            if len(set(counts)) == 1:
                fixed *= counts[0]
            else:
                table = kb.const(f"count{dim}", np.asarray(counts, np.int32), INDEX)
                varying.append(table[[o[dim]]])
        if not varying:
            return Const(float(fixed), dt)
        total = varying[0]
        for t in varying[1:]:
            total = total * t
        if fixed != 1:
            total = total * fixed
        return Cast(total, dt)

    def _lower_global(self, node: Node, kb: Any) -> None:
        # Each (n, c) plane is contiguous: one flat loop over it.
        X = kb.inputs[0]
        size = math.prod(X.shape[2:])
        with kb.loops(X.shape[:2], ["n", "c"]) as (n, c):
            acc = kb.local(self._init(X.dtype), "acc", X.dtype)
            base = (n * X.shape[1] + c) * size
            with kb.loop(size, "i") as i:
                kb.assign(acc, self._combine(node, acc, X.flat(base + i)))
            value = self._finish(node, acc, lambda: Const(float(size), X.dtype))
            kb.store_output([n, c, *([Const(0)] * (len(X.shape) - 2))], value)


@register
class MaxPool(_Pool):
    # ONNX versions 1/8/10/11/12 only add attributes (storage_order, dilations, ceil_mode) and
    # dtypes; aotc starts at opset 11, so one class covers them.
    name = "MaxPool"
    since = 1
    reads_permuted = True  # _Pool.lower reads X[[n, c, *pos]]
    mode = "max"
    dtypes = ("float32", "int8", "uint8")  # the 8-bit types since opset 12
    onnx_tests = ("test_maxpool_*",)

    def reference(self, X: np.ndarray, *, auto_pad: str = "NOTSET", ceil_mode: int = 0,
                  dilations: Sequence[int] = (), kernel_shape: Sequence[int],
                  pads: Sequence[int] = (), storage_order: int = 0,
                  strides: Sequence[int] = ()) -> Any:
        attrs = dict(auto_pad=auto_pad, ceil_mode=ceil_mode, dilations=dilations,
                     kernel_shape=kernel_shape, pads=pads, strides=strides)
        y = self._reference(X, attrs)
        return (y, self._argmax(X, attrs, storage_order))

    def run_reference(self, node: Node, args: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        if self.wants_indices(node):
            return super().run_reference(node, args)
        # Folding Y alone: skip the (slow, per-window) argmax.
        attrs = {k: v for k, v in node.attrs.items() if not k.startswith("_")}
        return [np.asarray(self._reference(args[0], attrs))]  # type: ignore[arg-type]


@register
class AveragePool(_Pool):
    name = "AveragePool"
    since = 1
    mode = "avg"
    reads_permuted = True  # _Pool.lower reads X[[n, c, *pos]]
    onnx_tests = ("test_averagepool_*",)

    def reference(self, X: np.ndarray, *, auto_pad: str = "NOTSET", ceil_mode: int = 0,
                  count_include_pad: int = 0, kernel_shape: Sequence[int],
                  pads: Sequence[int] = (), strides: Sequence[int] = ()) -> np.ndarray:
        return self._reference(X, dict(auto_pad=auto_pad, ceil_mode=ceil_mode,
                                       count_include_pad=count_include_pad,
                                       kernel_shape=kernel_shape, pads=pads, strides=strides))


@register
class AveragePool19(AveragePool):
    """Opset 19 adds dilations."""

    since = 19

    def reference(self, X: np.ndarray, *, auto_pad: str = "NOTSET", ceil_mode: int = 0,
                  count_include_pad: int = 0, dilations: Sequence[int] = (),
                  kernel_shape: Sequence[int], pads: Sequence[int] = (),
                  strides: Sequence[int] = ()) -> np.ndarray:
        return self._reference(X, dict(auto_pad=auto_pad, ceil_mode=ceil_mode,
                                       count_include_pad=count_include_pad,
                                       dilations=dilations, kernel_shape=kernel_shape,
                                       pads=pads, strides=strides))


@register
class GlobalMaxPool(_Pool):
    name = "GlobalMaxPool"
    since = 1
    mode = "max"
    is_global = True
    onnx_tests = ("test_globalmaxpool*",)

    def reference(self, X: np.ndarray) -> np.ndarray:
        return self._reference(X, {})


@register
class GlobalAveragePool(_Pool):
    name = "GlobalAveragePool"
    since = 1
    mode = "avg"
    is_global = True
    onnx_tests = ("test_globalaveragepool*",)

    def reference(self, X: np.ndarray) -> np.ndarray:
        return self._reference(X, {})
