"""Algebraic simplification of index expressions (constant folding, x*1, x+0, x*0).

Only integer (index) arithmetic is folded: float expressions are left exactly as the op wrote
them so the generated C rounds the way the reference does.
"""

from __future__ import annotations

from aotc.lower.loop_ir import Bin, Const, Expr, Kernel, Loop, Stmt, map_expr, map_stmts

_FOLD = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "min": min,
    "max": max,
}


def _is(e: Expr, v: int) -> bool:
    return isinstance(e, Const) and not e.dtype.is_float and e.value == v


def _rule(e: Expr) -> Expr:
    if not isinstance(e, Bin) or e.dtype.is_float or e.dtype.name == "bool":
        return e
    a, b = e.a, e.b
    if isinstance(a, Const) and isinstance(b, Const) and e.op in _FOLD:
        return Const(int(_FOLD[e.op](a.value, b.value)), e.dtype)
    if e.op == "add":
        if _is(a, 0):
            return b
        if _is(b, 0):
            return a
        # (x + c1) + c2 -> x + (c1 + c2): keeps unrolled offsets readable
        if isinstance(b, Const) and isinstance(a, Bin) and a.op == "add" and isinstance(a.b, Const):
            return Bin("add", a.a, Const(int(a.b.value) + int(b.value), e.dtype), e.dtype)
    if e.op == "sub" and _is(b, 0):
        return a
    if e.op == "mul":
        if _is(a, 1):
            return b
        if _is(b, 1):
            return a
        if _is(a, 0) or _is(b, 0):
            return Const(0, e.dtype)
    if e.op in ("div",) and _is(b, 1):
        return a
    return e


def simplify_expr(e: Expr) -> Expr:
    return map_expr(e, _rule)


def simplify_body(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    out: list[Stmt] = []
    for s in map_stmts(body, _rule):
        # Drop loops that provably run zero times.
        if isinstance(s, Loop) and isinstance(s.start, Const) and isinstance(s.stop, Const):
            if s.stop.value <= s.start.value:
                continue
        out.append(s)
    return tuple(out)


def simplify(k: Kernel) -> Kernel:
    return Kernel(k.name, k.params, simplify_body(k.body), k.comment, k.noalias)
