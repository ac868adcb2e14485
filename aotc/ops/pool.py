"""Pooling: MaxPool, AveragePool, GlobalMaxPool, GlobalAveragePool over NC + 1-D/2-D/3-D spatial.
Anchors: a fused epilogue runs per output element before the store. Window geometry, including
ceil_mode and auto_pad, is resolved at compile time the way onnxruntime resolves it."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.lower.loop_ir import INDEX, Cast, Const, Expr, bmax, cmp, land
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


Combine = Callable[[Expr, Expr], Expr]


class _Pool(OpDef):
    kind = "anchor"
    mode: ClassVar[str] = "max"  # "max" or "avg"
    is_global: ClassVar[bool] = False

    def geometry(self, node: Node, in_sp: Sequence[int]) -> PoolGeometry:
        return global_geometry(in_sp) if self.is_global else pool_geometry(node, in_sp)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        if len([o for o in node.outputs if o]) > 1:
            raise AotcError("the Indices output is not supported", node.name, node.op)
        if node.attrs.get("storage_order", 0) != 0:
            raise AotcError(f"storage_order={node.attrs['storage_order']} is not supported "
                            f"(only 0, row-major)", node.name, node.op)
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
        return [TensorType((*x.type.shape[:2], *geo.out), x.type.dtype)]

    def _reference(self, X: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
        geo = self.geometry(Node(self.name, "reference", (), (), attrs), X.shape[2:])
        return pool_reference(X, geo, self.mode, bool(attrs.get("count_include_pad", 0)))

    def lower(self, node: Node, kb: Any) -> None:
        X, Y = kb.inputs[0], kb.outputs[0]
        geo = self.geometry(node, X.shape[2:])
        dt = X.dtype
        if self.mode == "avg":
            init = Const(0.0, dt)
        elif dt.is_float:
            init = Const(-math.inf, dt)
        else:
            init = Const(int(np.iinfo(dt.np).min), dt)
        combine: Combine = bmax if self.mode == "max" else (lambda acc, x: acc + x)
        if self.is_global:
            self._lower_global(kb, init, combine)
            return
        nd = len(geo.kernel)
        with kb.loops(Y.shape, ["n", "c"] + [f"o{i}" for i in range(nd)]) as (n, c, *o):
            acc = kb.local(init, "acc", dt)
            self._window(kb, geo, X, [n, c], o, 0, [], acc, combine)
            value: Expr = acc
            if self.mode == "avg":
                include = bool(node.attrs.get("count_include_pad", 0))
                value = acc / self._divisor(kb, geo, o, include, dt)
            kb.store_output([n, c, *o], value)

    def _window(self, kb: Any, geo: PoolGeometry, X: Any, nc: list[Expr], o: list[Expr],
                dim: int, pos: list[Expr], acc: Any, combine: Combine) -> None:
        if dim == len(geo.kernel):
            kb.assign(acc, combine(acc, X[[*nc, *pos]]))
            return
        with kb.loop(geo.kernel[dim], f"k{dim}", unroll=True) as j:
            # Constant part grouped so an unrolled tap folds to one offset.
            p = o[dim] * geo.strides[dim] + (j * geo.dilations[dim] - geo.pads_begin[dim])
            conds = []
            if geo.needs_low_check(dim):
                conds.append(("ge", 0))
            if geo.needs_high_check(dim):
                conds.append(("lt", geo.in_size[dim]))
            if conds:
                iv = kb.local(p, f"i{dim}")
                with kb.if_(land(*(cmp(op, iv, bound) for op, bound in conds))):
                    self._window(kb, geo, X, nc, o, dim + 1, pos + [iv], acc, combine)
            else:
                self._window(kb, geo, X, nc, o, dim + 1, pos + [p], acc, combine)

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

    def _lower_global(self, kb: Any, init: Expr, combine: Combine) -> None:
        # Each (n, c) plane is contiguous: one flat loop over it.
        X = kb.inputs[0]
        size = math.prod(X.shape[2:])
        with kb.loops(X.shape[:2], ["n", "c"]) as (n, c):
            acc = kb.local(init, "acc", X.dtype)
            base = (n * X.shape[1] + c) * size
            with kb.loop(size, "i") as i:
                kb.assign(acc, combine(acc, X.flat(base + i)))
            value: Expr = acc
            if self.mode == "avg":
                value = acc / Const(float(size), X.dtype)
            kb.store_output([n, c, *([Const(0)] * (len(X.shape) - 2))], value)


@register
class MaxPool(_Pool):
    # ONNX versions 1/8/10/11/12 only add attributes (storage_order, dilations, ceil_mode) and
    # dtypes; aotc starts at opset 11, so one class covers them.
    name = "MaxPool"
    since = 1
    mode = "max"
    dtypes = ("float32", "int8", "uint8")  # the 8-bit types since opset 12
    onnx_tests = ("test_maxpool_1d_*", "test_maxpool_2d_*", "test_maxpool_3d_*")

    def reference(self, X: np.ndarray, *, auto_pad: str = "NOTSET", ceil_mode: int = 0,
                  dilations: Sequence[int] = (), kernel_shape: Sequence[int],
                  pads: Sequence[int] = (), storage_order: int = 0,
                  strides: Sequence[int] = ()) -> np.ndarray:
        return self._reference(X, dict(auto_pad=auto_pad, ceil_mode=ceil_mode,
                                       dilations=dilations, kernel_shape=kernel_shape,
                                       pads=pads, strides=strides))


@register
class AveragePool(_Pool):
    name = "AveragePool"
    since = 1
    mode = "avg"
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
