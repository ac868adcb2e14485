"""Softmax, LogSoftmax and Hardmax. Softmax is numerically stable (the row maximum is subtracted
before exp).

Opset < 13 coerces the input to 2-D at ``axis`` (default 1) and normalises each row of the
flattened tail; opset >= 13 normalises along the single dimension ``axis`` (default -1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from aotc.errors import AotcError
from aotc.ir.graph import Node, Value
from aotc.loops.builder import BufRef
from aotc.loops.loop_ir import Const, Expr, Select, bmax, call, cmp
from aotc.ops import OpDef, register
from aotc.ops.common import loop_unless_one


def _softmax_axis(node: Node, rank: int) -> int:
    axis = int(node.attrs["axis"])
    if not -max(rank, 1) <= axis < max(rank, 1):
        raise AotcError(f"axis={axis} is out of range for rank {rank}", node.name, node.op)
    return axis + rank if axis < 0 else axis


def softmax_split(shape: Sequence[int], axis: int, coerce_2d: bool) -> tuple[int, int, int]:
    """(outer, n, inner): the input as [outer, n, inner], normalised along n."""
    outer = math.prod(shape[:axis])
    if coerce_2d:
        return outer, math.prod(shape[axis:]), 1
    return outer, shape[axis], math.prod(shape[axis + 1:])


def _np_softmax(x: np.ndarray, axis: int, coerce_2d: bool, log: bool) -> np.ndarray:
    outer, n, inner = softmax_split(x.shape, axis, coerce_2d)
    v = x.astype(np.float64).reshape(outer, n, inner)
    v = v - v.max(axis=1, keepdims=True)
    s = np.exp(v).sum(axis=1, keepdims=True)
    out = v - np.log(s) if log else np.exp(v) / s
    return out.reshape(x.shape).astype(x.dtype)


class _Softmax(OpDef):
    kind = "kernel"
    log: ClassVar[bool] = False
    coerce_2d: ClassVar[bool] = False

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x = ins[0]
        assert x is not None
        _softmax_axis(node, len(x.type.shape))

    def _reference(self, x: np.ndarray, axis: int) -> np.ndarray:
        rank = x.ndim
        ax = axis + rank if axis < 0 else axis
        return _np_softmax(x, ax, self.coerce_2d, self.log)

    def lower(self, node: Node, kb: Any) -> None:
        X: BufRef = kb.inputs[0]
        Y: BufRef = kb.outputs[0]
        f32 = X.dtype
        outer, n, inner = softmax_split(X.shape, _softmax_axis(node, len(X.shape)), self.coerce_2d)
        with loop_unless_one(kb, outer, "o") as o, loop_unless_one(kb, inner, "j") as j:
            base = o * (n * inner) + j

            def at(k: Expr) -> Expr:
                return base + k * inner

            m = kb.local(Const(-math.inf, f32), "m", f32)
            with kb.loop(n, "k") as k:
                kb.assign(m, bmax(m, X.flat(at(k))))
            s = kb.local(Const(0.0, f32), "s", f32)
            with kb.loop(n, "k") as k:
                e = kb.local(call("exp", X.flat(at(k)) - m), "e", f32)
                if not self.log:
                    # Y holds exp(x - m) until the row sum is known (no scratch needed; safe
                    # even if Y shares X's storage, since X[k] is read before Y[k] is written).
                    kb.store(BufRef(Y.buf, (Y.numel,)), [at(k)], e)
                kb.assign(s, s + e)
            if self.log:
                # (x - m) - log(s), not x - (m + log(s)): m + log(s) would round away the
                # small log(s) when |m| is large.
                log_s = kb.local(call("log", s), "log_s", f32)
                with kb.loop(n, "k") as k:
                    kb.store_output([], (X.flat(at(k)) - m) - log_s, flat=at(k))
            else:
                r = kb.local(Const(1.0, f32) / s, "r", f32)
                with kb.loop(n, "k") as k:
                    kb.store_output([], Y.flat(at(k)) * r, flat=at(k))


class _Legacy(_Softmax):
    coerce_2d = True

    def reference(self, input: np.ndarray, *, axis: int = 1) -> np.ndarray:  # noqa: A002
        return self._reference(input, axis)


class _Single(_Softmax):
    coerce_2d = False

    def reference(self, input: np.ndarray, *, axis: int = -1) -> np.ndarray:  # noqa: A002
        return self._reference(input, axis)


@register
class Softmax(_Legacy):
    name = "Softmax"
    since = 1
    onnx_tests = ("test_softmax_*",)


@register
class Softmax13(_Single):
    name = "Softmax"
    since = 13
    onnx_tests = ("test_softmax_*",)


@register
class LogSoftmax(_Legacy):
    name = "LogSoftmax"
    since = 1
    log = True
    onnx_tests = ("test_logsoftmax_*",)


@register
class LogSoftmax13(_Single):
    name = "LogSoftmax"
    since = 13
    log = True
    onnx_tests = ("test_logsoftmax_*",)


# ------------------------------------------------------------------------------ Hardmax
class _Hardmax(_Softmax):
    """1 at the first maximum of each row, 0 elsewhere (rows as in Softmax of the same opset)."""

    def _reference(self, x: np.ndarray, axis: int) -> np.ndarray:
        ax = axis + x.ndim if axis < 0 else axis
        outer, n, inner = softmax_split(x.shape, ax, self.coerce_2d)
        v = x.reshape(outer, n, inner)
        hot = np.arange(n).reshape(1, n, 1) == v.argmax(axis=1)[:, None, :]
        return hot.astype(x.dtype).reshape(x.shape)

    def lower(self, node: Node, kb: Any) -> None:
        X: BufRef = kb.inputs[0]
        f32 = X.dtype
        outer, n, inner = softmax_split(X.shape, _softmax_axis(node, len(X.shape)), self.coerce_2d)
        with loop_unless_one(kb, outer, "o") as o, loop_unless_one(kb, inner, "j") as j:
            base = o * (n * inner) + j
            m = kb.local(X.flat(base), "m", f32)
            arg = kb.local(Const(0), "arg")
            with kb.loop(n, "k", start=1) as k:
                x = X.flat(base + k * inner)
                kb.assign(arg, Select(cmp("gt", x, m), k, arg))
                kb.assign(m, bmax(m, x))
            with kb.loop(n, "k") as k:
                one = Select(cmp("eq", k, arg), Const(1.0, f32), Const(0.0, f32))
                kb.store_output([], one, flat=base + k * inner)


@register
class Hardmax(_Hardmax):
    name = "Hardmax"
    since = 1
    coerce_2d = True
    onnx_tests = ("test_hardmax_*",)

    def reference(self, input: np.ndarray, *, axis: int = 1) -> np.ndarray:  # noqa: A002
        return self._reference(input, axis)


@register
class Hardmax13(_Hardmax):
    name = "Hardmax"
    since = 13
    onnx_tests = ("test_hardmax_*",)

    def reference(self, input: np.ndarray, *, axis: int = -1) -> np.ndarray:  # noqa: A002
        return self._reference(input, axis)
