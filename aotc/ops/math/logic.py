"""Comparison, logic and bitwise ops, Where, CastLike and the variadic Min/Max/Sum/Mean.

All are elementwise with numpy broadcasting (``lower_elementwise``), so they fuse like the
arithmetic ops. Comparisons and logic produce bool (one byte, 0 or 1).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node
from aotc.loops.loop_ir import BOOL, Bin, Call, Cast, Expr, Select, Un, bmax, bmin, cmp
from aotc.ops import OpDef, register
from aotc.ops.math.elementwise import NUMERIC, Elementwise, c

INTS = tuple(t for t in NUMERIC if t != "float32")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
ALL = NUMERIC + ("bool",)


def _same_dtype(node: Node, ins: Any, first: int = 0) -> None:
    types = {v.type.dtype.name for v in ins[first:] if v is not None}
    if len(types) > 1:
        raise AotcError(f"inputs have different dtypes ({', '.join(sorted(types))})",
                        node.name, node.op)


def _define(name: str, since_: int, types: tuple[str, ...], np_fn: Callable[..., np.ndarray],
            expr: Callable[..., Expr], tests: tuple[str, ...], arity: int = 2) -> None:
    """Register a fixed-arity elementwise op whose inputs share one dtype."""

    class _Op(Elementwise):
        since = since_
        dtypes = types
        onnx_tests = tests

        def check(self, node: Node, ins: Any) -> None:
            super().check(node, ins)
            _same_dtype(node, ins)

        def scalar(self, args: list[Expr], node: Node) -> Expr:
            return expr(*args)

    if arity == 1:
        def reference(self: OpDef, X: np.ndarray) -> np.ndarray:
            return np.asarray(np_fn(X))
    else:
        def reference(self: OpDef, A: np.ndarray, B: np.ndarray) -> np.ndarray:  # type: ignore[misc]
            return np.asarray(np_fn(A, B))

    _Op.reference = reference  # type: ignore[method-assign]
    _Op.name = name
    _Op.__name__ = _Op.__qualname__ = f"{name}{since_}"
    register(_Op)


# ------------------------------------------------------------------------------ comparison
for _name, _since, _np, _op, _types in (
        ("Equal", 7, np.equal, "eq", ALL),
        ("Less", 7, np.less, "lt", NUMERIC),
        ("Greater", 7, np.greater, "gt", NUMERIC),
        ("LessOrEqual", 12, np.less_equal, "le", NUMERIC),
        ("GreaterOrEqual", 12, np.greater_equal, "ge", NUMERIC)):
    _test = {"LessOrEqual": "test_less_equal*", "GreaterOrEqual": "test_greater_equal*"}.get(
        _name, f"test_{_name.lower()}*")
    _define(_name, _since, _types, _np, lambda a, b, op=_op: cmp(op, a, b), (_test,))

# ------------------------------------------------------------------------------ logic (bool)
_define("And", 7, ("bool",), np.logical_and, lambda a, b: Bin("land", a, b, BOOL),
        ("test_and*",))
_define("Or", 7, ("bool",), np.logical_or, lambda a, b: Bin("lor", a, b, BOOL), ("test_or*",))
_define("Xor", 7, ("bool",), np.logical_xor, lambda a, b: Bin("ne", a, b, BOOL),
        ("test_xor*",))
_define("Not", 1, ("bool",), np.logical_not, lambda a: Un("lnot", a, BOOL), ("test_not*",),
        arity=1)


# ------------------------------------------------------------------------------ bitwise
def _bitwise(op: str) -> Callable[[Expr, Expr], Expr]:
    return lambda a, b: Bin(op, a, b, a.dtype)


_define("BitwiseAnd", 18, INTS, np.bitwise_and, _bitwise("band"), ("test_bitwise_and*",))
_define("BitwiseOr", 18, INTS, np.bitwise_or, _bitwise("bor"), ("test_bitwise_or*",))
_define("BitwiseXor", 18, INTS, np.bitwise_xor, _bitwise("bxor"), ("test_bitwise_xor*",))
_define("BitwiseNot", 18, INTS, np.invert, lambda a: Un("bnot", a, a.dtype),
        ("test_bitwise_not*",), arity=1)


@register
class BitShift(Elementwise):
    name = "BitShift"
    since = 11
    dtypes = UNSIGNED
    defined = "a shift by the bit width or more gives 0 (onnxruntime)"
    onnx_tests = ("test_bitshift*",)

    def check(self, node: Node, ins: Any) -> None:
        super().check(node, ins)
        _same_dtype(node, ins)
        if node.attrs["direction"] not in ("LEFT", "RIGHT"):
            raise AotcError(f"direction={node.attrs['direction']!r} must be LEFT or RIGHT",
                            node.name, node.op)

    def reference(self, X: np.ndarray, Y: np.ndarray, *, direction: str = "") -> np.ndarray:
        fn = np.left_shift if direction == "LEFT" else np.right_shift
        X, Y = np.broadcast_arrays(X, Y)
        wide = Y >= 8 * X.dtype.itemsize  # shifted out entirely: 0 (onnxruntime)
        return np.where(wide, 0, fn(X, np.where(wide, 0, Y).astype(X.dtype))).astype(X.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x, y = args
        op = "shl" if node.attrs["direction"] == "LEFT" else "shr"
        if x.dtype.itemsize < 4:
            # uint8/uint16 promote to (signed) int: shift as uint32 so no bit reaches the sign.
            u32 = dtypes.BY_NAME["uint32"]
            return Cast(Bin(op, Cast(x, u32), Cast(y, u32), u32), x.dtype)
        return Bin(op, x, y, x.dtype)


# ------------------------------------------------------------------------------ Where, IsNaN/Inf
@register
class Where(Elementwise):
    name = "Where"
    since = 9
    dtypes = ALL
    onnx_tests = ("test_where*",)

    def check(self, node: Node, ins: Any) -> None:
        super().check(node, ins)
        if ins[0].type.dtype.name != "bool":
            raise AotcError(f"condition has dtype {ins[0].type.dtype}; expected bool",
                            node.name, node.op)
        _same_dtype(node, ins, first=1)

    def reference(self, condition: np.ndarray, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        return np.where(condition, X, Y).astype(X.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        return Select(args[0], args[1], args[2])


@register
class IsNaN(Elementwise):
    name = "IsNaN"
    since = 9
    onnx_tests = ("test_isnan*",)

    def reference(self, X: np.ndarray) -> np.ndarray:
        return np.isnan(X)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        return Call("isnan", (args[0],), BOOL)  # the C99 <math.h> macro


@register
class IsInf(Elementwise):
    name = "IsInf"
    since = 10
    onnx_tests = ("test_isinf*",)

    def reference(self, X: np.ndarray, *, detect_negative: int = 1,
                  detect_positive: int = 1) -> np.ndarray:
        return ((np.isposinf(X) & bool(detect_positive))
                | (np.isneginf(X) & bool(detect_negative)))

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x = args[0]
        pos, neg = bool(node.attrs["detect_positive"]), bool(node.attrs["detect_negative"])
        if pos and neg:
            return Call("isinf", (x,), BOOL)
        if pos or neg:
            return cmp("eq", x, c(float("inf") if pos else float("-inf"), x))
        return Cast(c(0, x), BOOL)


# ------------------------------------------------------------------------------ CastLike
@register
class CastLike(Elementwise):
    """Cast to the dtype of ``target_type``; only that input's dtype matters, so prepare drops
    it (no buffer is read)."""

    name = "CastLike"
    since = 15
    dtypes = ALL
    type_only_inputs = (1,)
    onnx_tests = ("test_castlike_*",)

    def check(self, node: Node, ins: Any) -> None:
        super().check(node, ins)
        if node.attrs.get("saturate", 1) != 1:
            raise AotcError("saturate=0 (float8 targets) is not supported", node.name, node.op)

    def reference(self, input: np.ndarray, target_type: np.ndarray,  # noqa: A002
                  *, saturate: int = 1) -> np.ndarray:
        if target_type.dtype == np.bool_:
            return input != 0
        return input.astype(target_type.dtype)

    def prepare(self, node: Node, ins: Any) -> Node:
        return node.with_(inputs=node.inputs[:1],
                          attrs={**node.attrs, "_to": ins[1].type.dtype.name})

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x = args[0]
        dt = dtypes.BY_NAME[node.attrs["_to"]]
        if dt.name == "bool":
            return Cast(cmp("ne", x, c(0, x)), dt)
        return Cast(x, dt)


# ------------------------------------------------------------------------------ variadic
class _Variadic(Elementwise):
    """Min/Max/Sum/Mean over any number of inputs, broadcast together (opset 8; opset 6-7 asks
    for equal shapes, a special case)."""

    since = 6
    dtypes = ("float32",)
    np_fn: Callable[[np.ndarray, np.ndarray], np.ndarray] = staticmethod(np.add)

    def check(self, node: Node, ins: Any) -> None:
        super().check(node, ins)
        _same_dtype(node, ins)
        if not any(v is not None for v in ins):
            raise AotcError("needs at least one input", node.name, node.op)

    def reference(self, *data: np.ndarray) -> np.ndarray:
        return np.asarray(reduce(self.np_fn, data)).astype(data[0].dtype)

    def combine(self, a: Expr, b: Expr) -> Expr:
        return a + b

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        return reduce(self.combine, args)


@register
class Sum(_Variadic):
    name = "Sum"
    onnx_tests = ("test_sum_*",)


@register
class Mean(_Variadic):
    name = "Mean"
    onnx_tests = ("test_mean_*",)

    def reference(self, *data: np.ndarray) -> np.ndarray:
        return (reduce(np.add, data) / np.float32(len(data))).astype(data[0].dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        s = reduce(self.combine, args)
        return s / c(len(args), s) if len(args) > 1 else s


def _nan_first(a: Expr, m: Expr) -> Expr:
    """Min/Max propagate NaN (as onnxruntime and numpy): aotc_minf(a, b) returns b when either
    is NaN, which is right for a NaN b only."""
    return Select(Call("isnan", (a,), BOOL), a, m) if a.dtype.is_float else m


@register
class Min(_Variadic):
    name = "Min"
    dtypes = NUMERIC
    np_fn = staticmethod(np.minimum)
    onnx_tests = ("test_min_*",)

    def combine(self, a: Expr, b: Expr) -> Expr:
        return _nan_first(a, bmin(a, b))


@register
class Max(_Variadic):
    name = "Max"
    dtypes = NUMERIC
    np_fn = staticmethod(np.maximum)
    onnx_tests = ("test_max_*",)

    def combine(self, a: Expr, b: Expr) -> Expr:
        return _nan_first(a, bmax(a, b))
