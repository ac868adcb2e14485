"""Print loop-IR kernels as C99.

The whole C vocabulary is the tables below (tinygrad's ``code_for_op`` idea): a new dialect is
a subclass overriding entries. Nothing else in aotc spells C expressions.
"""

from __future__ import annotations

import math

import numpy as np

from aotc.dtypes import DType
from aotc.lower.loop_ir import (
    Assign,
    Bin,
    Block,
    Buffer,
    Call,
    Cast,
    Const,
    Decl,
    DeclArray,
    Expr,
    If,
    Kernel,
    Load,
    Loop,
    Select,
    Stmt,
    Store,
    Un,
    Var,
    used_buffers,
)

BINARY = {
    "add": "({a} + {b})",
    "sub": "({a} - {b})",
    "mul": "({a} * {b})",
    "div": "({a} / {b})",
    "mod": "({a} % {b})",
    "lt": "({a} < {b})",
    "le": "({a} <= {b})",
    "gt": "({a} > {b})",
    "ge": "({a} >= {b})",
    "eq": "({a} == {b})",
    "ne": "({a} != {b})",
    "land": "({a} && {b})",
    "lor": "({a} || {b})",
    "band": "({a} & {b})",
    "bor": "({a} | {b})",
    "bxor": "({a} ^ {b})",
    "shl": "({a} << {b})",
    "shr": "({a} >> {b})",
}
# min/max differ by type: fminf/fmaxf on float (no double evaluation), a macro on integers.
FLOAT_BINARY = {"min": "aotc_minf({a}, {b})", "max": "aotc_maxf({a}, {b})",
                "pow": "powf({a}, {b})",
                "fmod": "fmodf({a}, {b})"}
INT_BINARY = {"min": "AOTC_MIN({a}, {b})", "max": "AOTC_MAX({a}, {b})"}

UNARY = {"neg": "(-{a})", "lnot": "(!{a})", "bnot": "(~{a})"}

# Math functions by family; the float32 spelling is the C99 <math.h> float variant.
FLOAT_CALLS = {
    "exp": "expf", "log": "logf", "sqrt": "sqrtf", "tanh": "tanhf", "abs": "fabsf",
    "erf": "erff", "floor": "floorf", "ceil": "ceilf", "sin": "sinf", "cos": "cosf",
    "tan": "tanf", "asin": "asinf", "acos": "acosf", "atan": "atanf", "sinh": "sinhf",
    "cosh": "coshf", "asinh": "asinhf", "acosh": "acoshf", "atanh": "atanhf",
    "rint": "nearbyintf", "log1p": "log1pf", "expm1": "expm1f",
    "bits": "aotc_f32_bits",  # BitCast (runtime_c/aotc_runtime.h)
    "isnan": "isnan", "isinf": "isinf",  # C99 <math.h> classification macros
}
INT_CALLS = {"abs": "AOTC_ABS", "float_from_bits": "aotc_bits_f32",  # BitCast
             "ipow": "aotc_ipow",  # Pow on integers (runtime_c/aotc_runtime.h)
             # fixed-point requantisation primitives (runtime_c/aotc_runtime.h)
             "q_srdhm": "aotc_q_srdhm", "q_rdbpot": "aotc_q_rdbpot", "q_mbqm": "aotc_q_mbqm",
             "q_sat_shl": "aotc_q_sat_shl", "q_softmax_scale": "aotc_q_softmax_scale"}


def c_type(dt: DType) -> str:
    return dt.ctype


def c_literal(value: object, dt: DType) -> str:
    """An exact C literal for a scalar of dtype ``dt``."""
    if dt.is_float:
        v = float(np.float32(value))  # type: ignore[arg-type]
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "HUGE_VALF" if v > 0 else "(-HUGE_VALF)"
        s = str(np.float32(v))  # shortest string that round-trips in float32
        if "." not in s and "e" not in s:
            s += ".0"
        return s + "f"
    if dt.name == "bool":
        return "1" if value else "0"
    iv = int(value)  # type: ignore[call-overload]
    if dt.itemsize == 8:
        if dt.is_signed:
            if iv == -(2**63):
                return "(-INT64_C(9223372036854775807) - 1)"
            return f"INT64_C({iv})"
        return f"UINT64_C({iv})"
    if dt.name == "uint32":
        return f"{iv}u"
    if iv == -(2**31):
        return "(-2147483647 - 1)"
    return str(iv)


def _strip(s: str) -> str:
    """Drop one pair of redundant outer parentheses."""
    if s.startswith("(") and s.endswith(")"):
        depth = 0
        for i, ch in enumerate(s):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i != len(s) - 1:
                return s
        return s[1:-1]
    return s


class CPrinter:
    binary = BINARY
    float_binary = FLOAT_BINARY
    int_binary = INT_BINARY
    unary = UNARY
    float_calls = FLOAT_CALLS
    int_calls = INT_CALLS

    def expr(self, e: Expr) -> str:
        if isinstance(e, Const):
            return c_literal(e.value, e.dtype)
        if isinstance(e, Var):
            return e.name
        if isinstance(e, Load):
            return f"{e.buf.name}[{_strip(self.expr(e.index))}]"
        if isinstance(e, Bin):
            a, b = self.expr(e.a), self.expr(e.b)
            if e.op in self.binary:
                return self.binary[e.op].format(a=a, b=b)
            table = self.float_binary if e.a.dtype.is_float else self.int_binary
            if e.op not in table:
                raise KeyError(f"no C spelling for {e.op} on {e.a.dtype}")
            return table[e.op].format(a=_strip(a), b=_strip(b))
        if isinstance(e, Un):
            return self.unary[e.op].format(a=self.expr(e.a))
        if isinstance(e, Call):
            table = self.float_calls if e.args[0].dtype.is_float else self.int_calls
            fn = table.get(e.fn, e.fn)
            return f"{fn}({', '.join(_strip(self.expr(a)) for a in e.args)})"
        if isinstance(e, Select):
            return f"({self.expr(e.cond)} ? {self.expr(e.a)} : {self.expr(e.b)})"
        if isinstance(e, Cast):
            return f"(({c_type(e.dtype)}){self.expr(e.a)})"
        raise TypeError(e)

    def stmts(self, body: tuple[Stmt, ...], ind: int) -> list[str]:
        pad = "    " * ind
        out: list[str] = []
        for s in body:
            if isinstance(s, Loop):
                v = s.var
                step = "++" + v if s.step == 1 else f"{v} += {s.step}"
                out.append(f"{pad}for (int32_t {v} = {_strip(self.expr(s.start))}; "
                           f"{v} < {_strip(self.expr(s.stop))}; {step}) {{")
                out += self.stmts(s.body, ind + 1)
                out.append(pad + "}")
            elif isinstance(s, Store):
                out.append(f"{pad}{s.buf.name}[{_strip(self.expr(s.index))}] = "
                           f"{_strip(self.expr(s.value))};")
            elif isinstance(s, Decl):
                out.append(f"{pad}{c_type(s.dtype)} {s.var} = {_strip(self.expr(s.init))};")
            elif isinstance(s, Assign):
                out.append(f"{pad}{s.var} = {_strip(self.expr(s.value))};")
            elif isinstance(s, If):
                out.append(f"{pad}if ({_strip(self.expr(s.cond))}) {{")
                out += self.stmts(s.then, ind + 1)
                if s.orelse:
                    out.append(pad + "} else {")
                    out += self.stmts(s.orelse, ind + 1)
                out.append(pad + "}")
            elif isinstance(s, DeclArray):
                out.append(f"{pad}{c_type(s.buf.dtype)} {s.buf.name}[{s.buf.size}];")
            elif isinstance(s, Block):
                out.append(pad + "{")
                out += self.stmts(s.body, ind + 1)
                out.append(pad + "}")
            else:
                raise TypeError(s)
        return out

    def param(self, b: Buffer, noalias: bool) -> str:
        const = "const " if b.role in ("in", "const") else ""
        restrict = "AOTC_RESTRICT " if noalias else ""
        return f"{const}{c_type(b.dtype)} *{restrict}{b.name}"

    def signature(self, k: Kernel) -> str:
        params = ", ".join(self.param(b, b.name in k.noalias) for b in k.params) or "void"
        return f"static AOTC_NOINLINE void {k.name}({params})"

    def kernel(self, k: Kernel) -> str:
        lines = []
        if k.comment:
            lines.append(f"/* {k.comment} */")
        lines.append(self.signature(k))
        lines.append("{")
        used = used_buffers(k.body)
        for b in k.params:
            if b.name not in used:
                lines.append(f"    (void){b.name};")
        lines += self.stmts(k.body, 1)
        lines.append("}")
        return "\n".join(lines)
