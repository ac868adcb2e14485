"""Elementwise ops (unary, binary with numpy broadcasting, activations): table-driven.

Each op gives its numpy reference and ``scalar``: the output element as a loop-IR expression of
its input elements. The same ``scalar`` serves the standalone kernel and the fused epilogue.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node
from aotc.lower.loop_ir import Cast, Expr, Select, as_expr, bmax, bmin, call, cmp
from aotc.ops import OpDef, register

FLOAT = ("float32",)
NUMERIC = ("float32", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
SIGNED = ("float32", "int8", "int16", "int32", "int64")


def c(x: float, like: Expr) -> Expr:
    return as_expr(float(x) if like.dtype.is_float else int(x), like.dtype)


def lower_elementwise(op: OpDef, node: Node, kb: Any) -> None:
    """One loop nest over the output; inputs are read with numpy broadcasting."""
    out = kb.outputs[0]
    ins = [r for r in kb.inputs if r is not None]
    if all(r.shape == out.shape or r.numel == 1 for r in ins):
        # Same-shape operands: one flat loop reads better and vectorises.
        with kb.loop(out.numel, "i") as i:
            args = [r.flat(i if r.numel == out.numel else 0) for r in ins]
            value = op.scalar(args, node)
            kb.store_output(_unflatten(i, out.shape), value, flat=i)
        return
    with kb.loops(out.shape) as idx:
        kb.store_output(idx, op.scalar([r.bcast(idx) for r in ins], node))


def _unflatten(i: Expr, shape: tuple[int, ...]) -> list[Expr]:
    idx: list[Expr] = []
    rem = i
    for k, d in enumerate(shape):
        stride = int(np.prod(shape[k + 1:], dtype=np.int64))
        idx.append((rem // stride) % d if k else rem // stride)
    return idx


class Elementwise(OpDef):
    kind = "elementwise"

    def lower(self, node: Node, kb: Any) -> None:
        lower_elementwise(self, node, kb)


# ------------------------------------------------------------------------------ unary, no attrs
def _unary(name: str, np_fn: Callable[[np.ndarray], np.ndarray], expr: Callable[[Expr], Expr],
           types: tuple[str, ...] = FLOAT, tests: tuple[str, ...] = ()) -> None:
    class _U(Elementwise):
        dtypes = types
        onnx_tests = tests

        def reference(self, X: np.ndarray) -> np.ndarray:
            return np.asarray(np_fn(X)).astype(X.dtype)

        def scalar(self, args: list[Expr], node: Node) -> Expr:
            return expr(args[0])

    _U.name = name
    _U.__name__ = _U.__qualname__ = name
    register(_U)


_erf = np.vectorize(math.erf, otypes=[np.float64])

_unary("Sqrt", np.sqrt, lambda x: call("sqrt", x), tests=("test_sqrt*",))
_unary("Exp", np.exp, lambda x: call("exp", x), tests=("test_exp", "test_exp_example"))
_unary("Log", np.log, lambda x: call("log", x), tests=("test_log", "test_log_example"))
_unary("Tanh", np.tanh, lambda x: call("tanh", x), tests=("test_tanh*",))
_unary("Erf", _erf, lambda x: call("erf", x), tests=("test_erf*",))
_unary("Abs", np.abs, lambda x: call("abs", x), NUMERIC, ("test_abs*",))
_unary("Neg", np.negative, lambda x: -x, SIGNED, ("test_neg*",))
_unary("Relu", lambda x: np.maximum(x, 0), lambda x: bmax(x, c(0, x)), SIGNED, ("test_relu*",))
_unary("Sigmoid", lambda x: 1 / (1 + np.exp(-x)),
       lambda x: c(1, x) / (c(1, x) + call("exp", -x)), tests=("test_sigmoid*",))


# ------------------------------------------------------------------------------ binary
def _binary(name: str, np_fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
            expr: Callable[[Expr, Expr], Expr], types: tuple[str, ...] = NUMERIC,
            tests: tuple[str, ...] = ()) -> None:
    class _B(Elementwise):
        dtypes = types
        onnx_tests = tests

        def check(self, node: Node, ins: Any) -> None:
            super().check(node, ins)
            if ins[0].type.dtype != ins[1].type.dtype:
                raise AotcError(f"inputs have different dtypes ({ins[0].type.dtype}, "
                                f"{ins[1].type.dtype})", node.name, node.op)

        def reference(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
            return np.asarray(np_fn(A, B)).astype(A.dtype)

        def scalar(self, args: list[Expr], node: Node) -> Expr:
            return expr(args[0], args[1])

    _B.name = name
    _B.__name__ = _B.__qualname__ = name
    register(_B)


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return a / b
    return np.trunc(a.astype(np.float64) / b).astype(a.dtype)  # C semantics: toward zero


_binary("Add", np.add, lambda a, b: a + b, tests=("test_add*",))
_binary("Sub", np.subtract, lambda a, b: a - b, tests=("test_sub*",))
_binary("Mul", np.multiply, lambda a, b: a * b, tests=("test_mul*",))
_binary("Div", _int_div, lambda a, b: a / b, tests=("test_div*",))


@register
class Pow(Elementwise):
    name = "Pow"
    since = 1
    onnx_tests = ("test_pow*",)

    def reference(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        return np.power(X, Y.astype(X.dtype)).astype(X.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x, y = args
        if y.dtype != x.dtype:
            y = Cast(y, x.dtype)
        from aotc.lower.loop_ir import Bin

        return Bin("pow", x, y, x.dtype)

    def check(self, node: Node, ins: Any) -> None:
        super().check(node, ins[:1])


# ------------------------------------------------------------------------------ activations
@register
class LeakyRelu(Elementwise):
    name = "LeakyRelu"
    onnx_tests = ("test_leakyrelu*",)

    def reference(self, X: np.ndarray, *, alpha: float = 0.01) -> np.ndarray:
        return np.where(X >= 0, X, X * np.float32(alpha)).astype(X.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x = args[0]
        return Select(cmp("ge", x, c(0, x)), x, x * c(node.attrs["alpha"], x))


@register
class PRelu(Elementwise):
    name = "PRelu"
    onnx_tests = ("test_prelu*",)

    def reference(self, X: np.ndarray, slope: np.ndarray) -> np.ndarray:
        return np.where(X < 0, X * slope, X).astype(X.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x, s = args
        return Select(cmp("lt", x, c(0, x)), x * s, x)


@register
class Clip(Elementwise):
    name = "Clip"
    since = 11
    dtypes = NUMERIC
    const_inputs = (1, 2)
    onnx_tests = ("test_clip*",)

    def reference(self, X: np.ndarray, min: np.ndarray | None = None,  # noqa: A002
                  max: np.ndarray | None = None) -> np.ndarray:  # noqa: A002
        lo = min if min is not None and min.size else None
        hi = max if max is not None and max.size else None
        out = X
        if lo is not None:
            out = np.maximum(out, lo)
        if hi is not None:
            out = np.minimum(out, hi)
        return np.asarray(out).astype(X.dtype)

    def prepare(self, node: Node, ins: Any) -> Node:
        # min/max are compile-time constants baked into the expression, not loaded at run time.
        bounds = {}
        for key, v in (("_min", ins[1] if len(ins) > 1 else None),
                       ("_max", ins[2] if len(ins) > 2 else None)):
            if v is not None and v.const.size:
                bounds[key] = v.const.reshape(-1)[0].item()
        return node.with_(inputs=node.inputs[:1], attrs={**node.attrs, **bounds})

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x = args[0]
        lo, hi = node.attrs.get("_min"), node.attrs.get("_max")
        if lo is not None:
            x = bmax(x, c(lo, x))
        if hi is not None:
            x = bmin(x, c(hi, x))
        return x


@register
class HardSigmoid(Elementwise):
    name = "HardSigmoid"
    onnx_tests = ("test_hardsigmoid*",)

    def reference(self, X: np.ndarray, *, alpha: float = 0.2, beta: float = 0.5) -> np.ndarray:
        return np.clip(X * np.float32(alpha) + np.float32(beta), 0, 1).astype(X.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x = args[0]
        v = x * c(node.attrs["alpha"], x) + c(node.attrs["beta"], x)
        return bmin(bmax(v, c(0, x)), c(1, x))


@register
class HardSwish(Elementwise):
    name = "HardSwish"
    since = 14
    onnx_tests = ("test_hardswish*",)

    def reference(self, X: np.ndarray) -> np.ndarray:
        return (X * np.clip(X * np.float32(1 / 6) + np.float32(0.5), 0, 1)).astype(X.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x = args[0]
        return x * bmin(bmax(x * c(1 / 6, x) + c(0.5, x), c(0, x)), c(1, x))


@register
class Elu(Elementwise):
    name = "Elu"
    onnx_tests = ("test_elu*",)

    def reference(self, X: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
        return np.where(X >= 0, X, np.float32(alpha) * (np.exp(X) - 1)).astype(X.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x = args[0]
        neg = c(node.attrs["alpha"], x) * (call("exp", x) - c(1, x))
        return Select(cmp("ge", x, c(0, x)), x, neg)


@register
class Gelu(Elementwise):
    name = "Gelu"
    since = 20
    onnx_tests = ("test_gelu*",)

    def check(self, node: Node, ins: Any) -> None:
        super().check(node, ins)
        if node.attrs["approximate"] not in ("none", "tanh"):
            raise AotcError(f"approximate={node.attrs['approximate']!r} is not supported",
                            node.name, node.op)

    def reference(self, X: np.ndarray, *, approximate: str = "none") -> np.ndarray:
        x = X.astype(np.float64)
        if approximate == "tanh":
            y = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
        else:
            y = 0.5 * x * (1 + _erf(x / math.sqrt(2)))
        return y.astype(X.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x = args[0]
        if node.attrs["approximate"] == "tanh":
            inner = c(math.sqrt(2 / math.pi), x) * (x + c(0.044715, x) * x * x * x)
            return c(0.5, x) * x * (c(1, x) + call("tanh", inner))
        return c(0.5, x) * x * (c(1, x) + call("erf", x * c(1 / math.sqrt(2), x)))


@register
class CastOp(Elementwise):  # not "Cast": that name is the loop-IR Cast expression used below
    name = "Cast"
    since = 1
    dtypes = NUMERIC + ("bool",)
    onnx_tests = ("test_cast_*",)

    def check(self, node: Node, ins: Any) -> None:
        super().check(node, ins)
        if node.attrs["to"] not in dtypes.BY_ONNX:
            raise AotcError(f"cast to ONNX type {node.attrs['to']} is not supported",
                            node.name, node.op)

    def reference(self, input: np.ndarray, *, to: int = 0, saturate: int = 1) -> np.ndarray:  # noqa: A002
        dt = dtypes.BY_ONNX[to]
        if dt.name == "bool":
            return input != 0
        return input.astype(dt.np)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x = args[0]
        dt = dtypes.BY_ONNX[node.attrs["to"]]
        if dt.name == "bool":
            return Cast(cmp("ne", x, c(0, x)), dt)
        return Cast(x, dt)
