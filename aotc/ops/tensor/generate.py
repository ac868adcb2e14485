"""Generators: ConstantOfShape, Range, EyeLike, OneHot.

Their values depend only on compile-time constants (EyeLike: on a static shape), so constant
folding turns the first three into constant data; a fill kernel writes them instead when the
data would be much larger than the inputs (a loop costs less flash than a table). A graph output
that is such a constant is copied into the user's buffer. OneHot reads its indices at run time,
with depth and values folded in Prepare.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import BOOL, INDEX, Bin, Cast, Const, Expr, cmp, select
from aotc.ops import OpDef, register
from aotc.ops.common import ANY

INDICES = ("float32", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")


def _const(v: Value | None) -> np.ndarray:
    assert v is not None and v.const is not None
    return np.asarray(v.const)


def _scalar(node: Node, v: Value | None, what: str) -> Any:
    """The one element of a scalar (or one-element) constant input."""
    arr = _const(v)
    if arr.size != 1:
        raise AotcError(f"{what} must have exactly one element, got shape {list(arr.shape)}",
                        node.name, node.op)
    return arr.reshape(-1)[0]


def _onnx_dtype(node: Node, code: int | None, default: dtypes.DType) -> dtypes.DType:
    if code is None:
        return default
    if int(code) not in dtypes.BY_ONNX:
        raise AotcError(f"dtype={code} (ONNX TensorProto enum) is not supported; supported: "
                        f"{', '.join(d.name for d in dtypes.BY_ONNX.values())}",
                        node.name, node.op)
    return dtypes.BY_ONNX[int(code)]


def _fill(kb: Any, value: Any) -> None:
    """Write ``value`` to every element of output 0."""
    Y = kb.outputs[0]
    if Y.numel:
        with kb.loop(Y.numel, "i") as i:
            kb.store_output([], Const(value, Y.dtype), flat=i)


# ------------------------------------------------------------------------------ ConstantOfShape
@register
class ConstantOfShape(OpDef):
    name = "ConstantOfShape"
    since = 9
    dtypes = ("int64",)
    const_inputs = (0,)
    onnx_tests = ("test_constantofshape_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        if ins[0] is None or ins[0].type.dtype.name != "int64":
            raise AotcError("the shape input must be int64", node.name, node.op)
        shape = _const(ins[0]).reshape(-1)
        if np.any(shape < 0):
            raise AotcError(f"shape {shape.tolist()} has a negative dim", node.name, node.op)
        value = node.attrs.get("value")
        if value is not None:
            arr = np.asarray(value)
            if arr.size != 1:
                raise AotcError(f"value must have one element, got {arr.size}", node.name,
                                node.op)
            if arr.dtype.name not in dtypes.BY_NAME:
                raise AotcError(f"value has dtype {arr.dtype}, which aotc does not support",
                                node.name, node.op)

    def reference(self, input: np.ndarray, *, value: np.ndarray | None = None  # noqa: A002
                  ) -> np.ndarray:
        v = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
        return np.full([int(d) for d in input.reshape(-1)], v[0], dtype=v.dtype)

    def lower(self, node: Node, kb: Any) -> None:
        value = node.attrs.get("value")
        _fill(kb, 0 if value is None else np.asarray(value).reshape(-1)[0].item())


# ---------------------------------------------------------------------------------------- Range
def _range_count(start: Any, limit: Any, delta: Any) -> int:
    return max(math.ceil((float(limit) - float(start)) / float(delta)), 0)


class _Range(OpDef):
    """output[i] = start + i * delta for i < max(ceil((limit - start) / delta), 0)."""

    name = "Range"
    dtypes = ("float32", "int16", "int32", "int64")
    const_inputs = (0, 1, 2)
    onnx_tests = ("test_range_float_type_positive_delta", "test_range_int32_type_negative_delta")

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        types = {v.type.dtype.name for v in ins if v is not None}
        if len(types) != 1 or not types <= set(self.dtypes):
            raise AotcError(f"start, limit and delta must share one dtype of "
                            f"{', '.join(self.dtypes)}; got {sorted(types)}", node.name, node.op)
        start, limit, delta = (_scalar(node, v, w) for v, w in
                               zip(ins, ("start", "limit", "delta")))
        if delta == 0:
            raise AotcError("delta must be non-zero", node.name, node.op)
        if not all(math.isfinite(float(x)) for x in (start, limit, delta)):
            raise AotcError("start, limit and delta must be finite", node.name, node.op)

    def _range(self, start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray:
        dt = np.asarray(start).dtype
        s, d = (np.asarray(x).reshape(-1)[0] for x in (start, delta))
        n = _range_count(s, np.asarray(limit).reshape(-1)[0], d)
        # In the output dtype, as the kernel computes it.
        return (s + np.arange(n).astype(dt) * d).astype(dt)

    def lower(self, node: Node, kb: Any) -> None:
        Y = kb.outputs[0]
        start, delta = (kb.input_const(k).reshape(-1)[0].item() for k in (0, 2))
        if Y.numel:
            with kb.loop(Y.numel, "i") as i:
                kb.store_output([], Const(start, Y.dtype) + Cast(i, Y.dtype) * delta, flat=i)


@register
class Range(_Range):
    since = 11

    def reference(self, start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray:
        return self._range(start, limit, delta)


@register
class Range27(_Range):
    """Opset 27 adds stash_type, which only matters for float16/bfloat16."""

    since = 27

    def reference(self, start: np.ndarray, limit: np.ndarray, delta: np.ndarray, *,
                  stash_type: int = 1) -> np.ndarray:
        return self._range(start, limit, delta)


# -------------------------------------------------------------------------------------- EyeLike
@register
class EyeLike(OpDef):
    """Ones on diagonal k of a matrix shaped like the input (whose data is never read)."""

    name = "EyeLike"
    since = 9
    dtypes = ANY
    onnx_tests = ("test_eyelike_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        assert ins[0] is not None
        if len(ins[0].type.shape) != 2:
            raise AotcError(f"the input must be 2-D, got shape {list(ins[0].type.shape)}",
                            node.name, node.op)
        _onnx_dtype(node, node.attrs.get("dtype"), ins[0].type.dtype)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None
        dt = _onnx_dtype(node, node.attrs.get("dtype"), ins[0].type.dtype)
        return [TensorType(ins[0].type.shape, dt)]

    def reference(self, input: np.ndarray, *, dtype: int | None = None,  # noqa: A002
                  k: int = 0) -> np.ndarray:
        dt = input.dtype if dtype is None else dtypes.BY_ONNX[int(dtype)].np
        return np.eye(input.shape[0], input.shape[1], int(k), dtype=dt)

    def lower(self, node: Node, kb: Any) -> None:
        Y = kb.outputs[0]
        rows, cols = Y.shape
        if Y.numel == 0:
            return
        with kb.loops([rows, cols], ["r", "c"]) as (r, c):
            kb.store_output([r, c], select(cmp("eq", c, r + int(node.attrs["k"])), 1, 0,
                                           Y.dtype))


# --------------------------------------------------------------------------------------- OneHot
class _OneHot(OpDef):
    """out[..., j, ...] = on if indices[...] == j (or j - depth, from opset 11) else off; depth and
    values are compile-time constants, the indices are read at run time. Indices compare as
    numbers, as ONNX's reference does (a float 1.5 matches no class)."""

    name = "OneHot"
    dtypes = INDICES
    const_inputs = (1, 2)
    onnx_tests = ("test_onehot_*",)
    negative: bool = True

    def _depth(self, node: Node, ins: Sequence[Value | None]) -> int:
        raw = _scalar(node, ins[1], "depth")
        depth = int(raw)
        if depth < 1 or depth != raw:
            raise AotcError(f"depth must be a positive integer, got {raw}", node.name, node.op)
        return depth

    def _axis(self, node: Node, rank: int) -> int:
        axis = int(node.attrs["axis"])
        if not -rank - 1 <= axis <= rank:
            raise AotcError(f"axis={axis} is out of range for output rank {rank + 1}",
                            node.name, node.op)
        return axis + rank + 1 if axis < 0 else axis

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        assert ins[0] is not None
        self._depth(node, ins)
        if _const(ins[2]).size != 2:
            raise AotcError(f"values must be [off_value, on_value], got {_const(ins[2]).size} "
                            f"elements", node.name, node.op)
        self._axis(node, len(ins[0].type.shape))

    def _onehot(self, indices: np.ndarray, depth: np.ndarray, values: np.ndarray, axis: int
                ) -> np.ndarray:
        d = int(np.asarray(depth).reshape(-1)[0])
        rank = indices.ndim
        axis = axis + rank + 1 if axis < 0 else axis
        x = indices.astype(np.float64) if indices.dtype.kind == "f" else indices.astype(np.int64)
        if self.negative:
            x = np.where(x < 0, x + d, x)
        x = np.expand_dims(x, axis)
        classes = np.arange(d).reshape([d if k == axis else 1 for k in range(rank + 1)])
        off, on = np.asarray(values).reshape(-1)
        return np.where(x == classes, on, off).astype(values.dtype)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None and ins[2] is not None
        shape = list(ins[0].type.shape)
        shape.insert(self._axis(node, len(shape)), self._depth(node, ins))
        return [TensorType(tuple(shape), ins[2].type.dtype)]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        off, on = (x.item() for x in _const(ins[2]).reshape(-1))
        return node.with_(inputs=node.inputs[:1], attrs={
            **node.attrs, "_depth": self._depth(node, ins), "_off": off, "_on": on})

    def lower(self, node: Node, kb: Any) -> None:
        X, Y = kb.inputs[0], kb.outputs[0]
        if Y.numel == 0:
            return
        axis = self._axis(node, len(X.shape))
        depth = node.attrs["_depth"]
        outer = math.prod(X.shape[:axis])
        inner = math.prod(X.shape[axis:])
        # Compare in a type that holds every index and every class exactly.
        dt = X.dtype
        if not dt.is_float:
            dt = dtypes.int64 if dt.itemsize >= 4 and dt.name != "int32" else INDEX
        with kb.loops([outer, depth, inner], ["o", "j", "k"]) as (o, j, k):
            x: Expr = X.flat(o * inner + k)
            x = x if x.dtype == dt else Cast(x, dt)
            cls = j if dt == INDEX else Cast(j, dt)
            hit = cmp("eq", x, cls)
            if self.negative and X.dtype.is_signed:
                hit = Bin("lor", hit, cmp("eq", x, cls - depth), BOOL)
            kb.store_output([], select(hit, node.attrs["_on"], node.attrs["_off"], Y.dtype),
                            flat=(o * depth + j) * inner + k)


@register
class OneHot9(_OneHot):
    """Opset 9: indices outside [0, depth) give an all-off row."""

    since = 9
    negative = False

    def reference(self, indices: np.ndarray, depth: np.ndarray, values: np.ndarray, *,
                  axis: int = -1) -> np.ndarray:
        return self._onehot(indices, depth, values, axis)


@register
class OneHot11(_OneHot):
    since = 11

    def reference(self, indices: np.ndarray, depth: np.ndarray, values: np.ndarray, *,
                  axis: int = -1) -> np.ndarray:
        return self._onehot(indices, depth, values, axis)
