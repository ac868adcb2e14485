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
from aotc.loops.loop_ir import (
    Bin,
    Cast,
    Expr,
    Select,
    as_expr,
    bmax,
    bmin,
    call,
    cmp,
    land,
)
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
           types: tuple[str, ...] = FLOAT, tests: tuple[str, ...] = (), since_: int = 1) -> None:
    class _U(Elementwise):
        since = since_
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
_unary("Abs", np.abs, lambda x: call("abs", x) if x.dtype.is_signed else x, NUMERIC,
       ("test_abs*",))
_unary("Neg", np.negative, lambda x: -x, SIGNED, ("test_neg*",))
_unary("Relu", lambda x: np.maximum(x, 0), lambda x: bmax(x, c(0, x)), SIGNED, ("test_relu*",))
_unary("Sigmoid", lambda x: 1 / (1 + np.exp(-x)),
       lambda x: c(1, x) / (c(1, x) + call("exp", -x)), tests=("test_sigmoid*",))
_unary("Reciprocal", lambda x: 1 / x, lambda x: c(1, x) / x, tests=("test_reciprocal*",))
_unary("Floor", np.floor, lambda x: call("floor", x), tests=("test_floor*",))
_unary("Ceil", np.ceil, lambda x: call("ceil", x), tests=("test_ceil*",))
# Round half to even: nearbyint in the default rounding mode (and np.round agrees).
_unary("Round", np.round, lambda x: call("rint", x), tests=("test_round",), since_=11)
for _fn, _since in (("sin", 7), ("cos", 7), ("tan", 7), ("asin", 7), ("acos", 7), ("atan", 7),
                    ("sinh", 9), ("cosh", 9), ("asinh", 9), ("acosh", 9), ("atanh", 9)):
    _np_name = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
                "acosh": "arccosh", "atanh": "arctanh"}.get(_fn, _fn)
    _unary(_fn.capitalize(), getattr(np, _np_name), lambda x, f=_fn: call(f, x),
           tests=(f"test_{_fn}", f"test_{_fn}_example"), since_=_since)


def _sign(x: Expr) -> Expr:
    # Float: x itself for 0 and NaN (sign(-0) = -0, sign(NaN) = NaN, as numpy).
    zero = x if x.dtype.is_float else c(0, x)
    if not x.dtype.is_signed:
        return Select(cmp("gt", x, c(0, x)), c(1, x), zero)  # no "x < 0" on unsigned (-Wextra)
    return Select(cmp("gt", x, c(0, x)), c(1, x), Select(cmp("lt", x, c(0, x)), c(-1, x), zero))


_unary("Sign", np.sign, _sign, NUMERIC, ("test_sign",), since_=9)


def _softplus(x: Expr) -> Expr:
    """log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|))."""
    return bmax(x, c(0, x)) + call("log1p", call("exp", -call("abs", x)))


def _np_softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(np.zeros_like(x), x)


_unary("Softplus", _np_softplus, _softplus, tests=("test_softplus*",))
_unary("Softsign", lambda x: x / (1 + np.abs(x)), lambda x: x / (c(1, x) + call("abs", x)),
       tests=("test_softsign*",))
_unary("Mish", lambda x: x * np.tanh(_np_softplus(x)),
       lambda x: x * call("tanh", _softplus(x)), tests=("test_mish*",), since_=18)


# ------------------------------------------------------------------------------ binary
def _binary(name: str, np_fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
            expr: Callable[[Expr, Expr], Expr], types: tuple[str, ...] = NUMERIC,
            tests: tuple[str, ...] = (), defined_: str = "") -> None:
    class _B(Elementwise):
        dtypes = types
        onnx_tests = tests
        defined = defined_

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
    """C's truncating division, with the runtime's defined cases (aotc_div_*): x / 0 is 0,
    INT_MIN / -1 wraps to INT_MIN."""
    if a.dtype.kind == "f":
        return a / b
    a, b = np.broadcast_arrays(a, b)
    safe = np.where(b == 0, 1, b)
    with np.errstate(all="ignore"):
        q = np.abs(a.astype(object)) // np.abs(safe.astype(object))  # exact for int64 too
        q = np.where((a < 0) != (safe < 0), -q, q)
    q = np.where(b == 0, 0, q)
    bits = 8 * a.dtype.itemsize
    return np.array([int(v) % (1 << bits) for v in q.reshape(-1)], dtype=f"u{a.dtype.itemsize}"
                    ).view(a.dtype).reshape(a.shape)


_binary("Add", np.add, lambda a, b: a + b, tests=("test_add*",))
_binary("Sub", np.subtract, lambda a, b: a - b, tests=("test_sub*",))
_binary("Mul", np.multiply, lambda a, b: a * b, tests=("test_mul*",))
_binary("Div", _int_div, lambda a, b: a / b, tests=("test_div*",),
        defined_="integers: x / 0 = 0 (numpy; onnxruntime refuses the run), INT_MIN / -1 = "
        "INT_MIN (numpy; onnxruntime: SIGFPE)")


def _ipow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The runtime's aotc_ipow: squaring in wrapping 64-bit arithmetic."""
    x64, e = np.broadcast_arrays(x.astype(np.int64), y.astype(np.int64))
    b, r, e = x64.astype(np.uint64), np.ones(x64.shape, np.uint64), e.copy()
    with np.errstate(over="ignore"):
        while np.any(e > 0):
            r = np.where(e & 1, r * b, r)
            b, e = b * b, np.where(e > 0, e >> 1, e)
    neg = np.where(x64 == 1, 1, np.where(x64 == -1, np.where(e & 1, -1, 1), 0))
    return np.where(e < 0, neg, r.astype(np.int64))


@register
class Pow(Elementwise):
    name = "Pow"
    since = 1
    dtypes = ("float32", "int32", "int64")
    defined = ("integer base, float exponent: powf, then the saturating conversion (NaN -> 0); "
               "integer exponent: exact, wrapping on overflow; a negative one truncates "
               "(0 unless the base is 1 or -1)")
    onnx_tests = ("test_pow*",)

    def check(self, node: Node, ins: Any) -> None:
        super().check(node, ins[:1])
        if ins[1].type.dtype.name not in NUMERIC:
            raise AotcError(f"exponent dtype {ins[1].type.dtype} is not supported",
                            node.name, node.op)

    def reference(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        if X.dtype.kind == "f":
            return np.power(X, Y.astype(X.dtype)).astype(X.dtype)
        if Y.dtype.kind == "f":  # powf, then the saturating conversion
            with np.errstate(all="ignore"):
                p = np.power(X.astype(np.float32), Y.astype(np.float32))
            return dtypes.saturating_cast(p, X.dtype)
        return _ipow(X, Y).astype(X.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x, y = args
        if x.dtype.is_float:
            return Bin("pow", x, y if y.dtype == x.dtype else Cast(y, x.dtype), x.dtype)
        if not y.dtype.is_float:  # exact integer power (runtime helper, by squaring)
            i64 = dtypes.int64
            return Cast(call("ipow", Cast(x, i64), Cast(y, i64)), x.dtype)
        # Integer base, float exponent: powf, truncated like a cast (exact while the result
        # fits float32's 24-bit mantissa).
        return Cast(Bin("pow", Cast(x, dtypes.float32), y, y.dtype), x.dtype)


@register
class Mod(Elementwise):
    """fmod=1: C's truncated remainder (fmodf on float); fmod=0 (integers only): the remainder
    takes the divisor's sign, as Python's %."""

    name = "Mod"
    since = 10
    dtypes = NUMERIC
    defined = ("integers: x % 0 = 0, with fmod 0 or 1 (numpy's mod and fmod; onnxruntime "
               "refuses the run); INT_MIN % -1 = 0 (numpy and onnxruntime)")
    onnx_tests = ("test_mod_*",)

    def check(self, node: Node, ins: Any) -> None:
        super().check(node, ins)
        if ins[0].type.dtype != ins[1].type.dtype:
            raise AotcError(f"inputs have different dtypes ({ins[0].type.dtype}, "
                            f"{ins[1].type.dtype})", node.name, node.op)
        if node.attrs["fmod"] not in (0, 1):
            raise AotcError(f"fmod={node.attrs['fmod']} must be 0 or 1", node.name, node.op)
        if ins[0].type.dtype.is_float and node.attrs["fmod"] != 1:
            raise AotcError("fmod=0 on a float input is invalid (ONNX requires fmod=1)",
                            node.name, node.op)

    def reference(self, A: np.ndarray, B: np.ndarray, *, fmod: int = 0) -> np.ndarray:
        with np.errstate(all="ignore"):
            if fmod:
                return np.fmod(A, B).astype(A.dtype)
            return np.mod(A, B).astype(A.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        a, b = args
        if a.dtype.is_float:
            return Bin("fmod", a, b, a.dtype)
        r = Bin("mod", a, b, a.dtype)
        if node.attrs["fmod"] or not a.dtype.is_signed:
            return r
        zero = c(0, a)
        wrong_sign = Bin("ne", cmp("lt", r, zero), cmp("lt", b, zero), dtypes.bool_)
        return Select(land(cmp("ne", r, zero), wrong_sign), r + b, r)


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
    """min/max may be constants (baked into the expression) or tensors computed at run time
    (one element each, read by the kernel)."""

    name = "Clip"
    since = 11
    dtypes = NUMERIC
    onnx_tests = ("test_clip*",)

    def check(self, node: Node, ins: Any) -> None:
        super().check(node, ins)
        for k, what in ((1, "min"), (2, "max")):
            v = ins[k] if len(ins) > k else None
            if v is None or v.is_const:
                continue
            if v.type.numel != 1 or v.type.dtype != ins[0].type.dtype:
                raise AotcError(f"{what} computed at run time must be one {ins[0].type.dtype.name}"
                                f" element, it is {v.type}", node.name, node.op)

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
        # Constant bounds are baked into the expression (attributes _min/_max) and dropped from
        # the inputs; a bound computed at run time stays an input (_min_in/_max_in) the kernel
        # loads once per element (a one-element buffer).
        bounds: dict[str, Any] = {}
        inputs = [node.inputs[0]]
        for k, key in ((1, "_min"), (2, "_max")):
            v = ins[k] if len(ins) > k else None
            if v is None:
                inputs.append("")
            elif v.is_const:
                inputs.append("")
                if v.const.size:
                    bounds[key] = v.const.reshape(-1)[0].item()
            else:
                inputs.append(node.inputs[k])
                bounds[key + "_in"] = True
        while inputs[-1] == "":
            inputs.pop()
        return node.with_(inputs=tuple(inputs), attrs={**node.attrs, **bounds})

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x, rest = args[0], list(args[1:])
        for key, f in (("_min", bmax), ("_max", bmin)):
            if node.attrs.get(key) is not None:
                x = f(x, c(node.attrs[key], x))
            elif node.attrs.get(key + "_in"):
                x = f(x, rest.pop(0))
        return x


@register
class Clip6(Elementwise):
    """Clip before opset 11: the bounds are float attributes (ReLU6 in older exports)."""

    name = "Clip"
    since = 6
    onnx_tests = ("test_clip*",)

    def reference(self, input: np.ndarray, *, min: float = -3.4028234663852886e38,  # noqa: A002
                  max: float = 3.4028234663852886e38) -> np.ndarray:  # noqa: A002
        return np.minimum(np.maximum(input, np.float32(min)), np.float32(max)).astype(input.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x = args[0]
        return bmin(bmax(x, c(node.attrs["min"], x)), c(node.attrs["max"], x))


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
class Selu(Elementwise):
    name = "Selu"
    since = 6
    onnx_tests = ("test_selu*",)

    def reference(self, X: np.ndarray, *, alpha: float = 1.67326319217681884765625,
                  gamma: float = 1.05070102214813232421875) -> np.ndarray:
        a, g = np.float32(alpha), np.float32(gamma)
        return np.where(X > 0, g * X, g * (a * np.exp(X) - a)).astype(X.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x = args[0]
        a, g = c(node.attrs["alpha"], x), c(node.attrs["gamma"], x)
        return Select(cmp("gt", x, c(0, x)), g * x, g * (a * call("exp", x) - a))


@register
class Celu(Elementwise):
    name = "Celu"
    since = 12
    onnx_tests = ("test_celu*",)

    def reference(self, X: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
        a = np.float32(alpha)
        return (np.maximum(X, 0) + np.minimum(0, a * (np.exp(X / a) - 1))).astype(X.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x = args[0]
        a = c(node.attrs["alpha"], x)
        return bmax(x, c(0, x)) + bmin(a * (call("exp", x / a) - c(1, x)), c(0, x))


@register
class ThresholdedRelu(Elementwise):
    name = "ThresholdedRelu"
    since = 10
    onnx_tests = ("test_thresholdedrelu*",)

    def reference(self, X: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
        return np.where(X > np.float32(alpha), X, 0).astype(X.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x = args[0]
        return Select(cmp("gt", x, c(node.attrs["alpha"], x)), x, c(0, x))


@register
class Shrink(Elementwise):
    name = "Shrink"
    since = 9
    onnx_tests = ("test_shrink*",)

    def reference(self, input: np.ndarray, *, bias: float = 0.0,  # noqa: A002
                  lambd: float = 0.5) -> np.ndarray:
        b, lam = np.float32(bias), np.float32(lambd)
        return np.where(input < -lam, input + b,
                        np.where(input > lam, input - b, 0)).astype(input.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x = args[0]
        b, lam = c(node.attrs["bias"], x), node.attrs["lambd"]
        return Select(cmp("lt", x, c(-lam, x)), x + b,
                      Select(cmp("gt", x, c(lam, x)), x - b, c(0, x)))


@register
class Swish(Elementwise):
    name = "Swish"
    since = 24
    onnx_tests = ("test_swish*",)

    def reference(self, X: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
        return (X / (1 + np.exp(-np.float32(alpha) * X))).astype(X.dtype)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x = args[0]
        return x / (c(1, x) + call("exp", -(c(node.attrs["alpha"], x) * x)))


@register
class CastOp(Elementwise):  # not "Cast": that name is the loop-IR Cast expression used below
    name = "Cast"
    since = 1
    dtypes = NUMERIC + ("bool",)
    defined = ("float -> integer saturates: NaN -> 0, beyond the type -> its minimum or "
               "maximum (onnxruntime: the CPU instruction's result, e.g. INT_MIN on x86)")
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
        return dtypes.saturating_cast(input, dt.np)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        x = args[0]
        dt = dtypes.BY_ONNX[node.attrs["to"]]
        if dt.name == "bool":
            return Cast(cmp("ne", x, c(0, x)), dt)
        return Cast(x, dt)
