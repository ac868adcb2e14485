"""Algebraic simplification of the loop IR.

Expressions: integer (index) constant folding, x*1, x+0, x*0, ``(x + c1) - c2`` -> ``x + c``,
integer comparisons of constants. Float expressions are left exactly as the op wrote them so the
generated C rounds the way the reference does. Statements: loops that run zero times vanish, a
loop that runs once becomes its body (with the variable substituted), an If with a constant
condition becomes the branch taken, and Blocks that declare nothing are spliced into their
parent. Locals that nothing reads any more (their uses were folded away) are dropped. Scopes
that declare locals always stay Blocks, so unrolled copies may redeclare them.
"""

from __future__ import annotations

from aotc.loops.loop_ir import (
    BOOL,
    Assign,
    Bin,
    Block,
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
    Outline,
    Select,
    Stmt,
    Store,
    Un,
    Var,
    drop_dead_bindings,
    map_expr,
    substitute,
)

_FOLD = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "min": min,
    "max": max,
}
_COMPARE = {
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
}


def _is(e: Expr, v: int) -> bool:
    return isinstance(e, Const) and not e.dtype.is_float and e.value == v


def _int_const(e: Expr) -> bool:
    return isinstance(e, Const) and not e.dtype.is_float and e.dtype.name != "bool"


def _fits(c: int, e: Expr) -> bool:
    # Signed: the type's range. Unsigned: |c| must fit (x - c is printed as a subtraction).
    bits = 8 * e.dtype.itemsize
    if e.dtype.is_signed:
        return -(1 << (bits - 1)) <= c < (1 << (bits - 1))
    return -(1 << bits) < c < (1 << bits)


def _offset(x: Expr, c: int, e: Bin) -> Expr:
    """``x + c`` spelled as the printer reads best: ``x``, ``x + c`` or ``x - |c|``."""
    if not _fits(c, e):
        return e  # a folded offset that no longer fits the type: keep the original form
    if c == 0:
        return x
    if c > 0:
        return Bin("add", x, Const(c, e.dtype), e.dtype)
    return Bin("sub", x, Const(-c, e.dtype), e.dtype)


def _bool_rule(e: Bin) -> Expr:
    a, b = e.a, e.b
    if e.op in _COMPARE and _int_const(a) and _int_const(b):
        return Const(bool(_COMPARE[e.op](a.value, b.value)), BOOL)  # type: ignore[attr-defined]
    if e.op in ("land", "lor"):
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Const) and x.dtype.name == "bool":
                if e.op == "land":
                    return y if x.value else Const(False, BOOL)
                return Const(True, BOOL) if x.value else y
    return e


def _rule(e: Expr) -> Expr:
    if not isinstance(e, Bin) or e.dtype.is_float:
        return e
    if e.dtype.name == "bool":
        return _bool_rule(e)
    a, b = e.a, e.b
    if isinstance(a, Const) and isinstance(b, Const):
        if e.op in _FOLD:
            return Const(int(_FOLD[e.op](a.value, b.value)), e.dtype)
        if e.op in ("div", "mod") and a.value >= 0 and b.value > 0:  # C truncation == floor
            q, r = divmod(int(a.value), int(b.value))
            return Const(q if e.op == "div" else r, e.dtype)
    if e.op == "add" and isinstance(a, Const) and not isinstance(b, Const):
        a, b = b, a  # c + x -> x + c, so the offset rules below see the constant on the right
    if e.op in ("add", "sub") and _int_const(b):
        c = int(b.value) if e.op == "add" else -int(b.value)  # type: ignore[attr-defined]
        # (x + c1) + c2, (x + c1) - c2, (x - c1) + c2, (x - c1) - c2 -> x + (c1' + c2')
        if isinstance(a, Bin) and a.op in ("add", "sub") and _int_const(a.b) \
                and a.dtype == e.dtype:
            c1 = int(a.b.value) if a.op == "add" else -int(a.b.value)  # type: ignore[attr-defined]
            return _offset(a.a, c1 + c, e)
        return _offset(a, c, e)
    if e.op == "add" and _is(a, 0):
        return b
    if e.op == "mul":
        if _is(a, 1):
            return b
        if _is(b, 1):
            return a
        if _is(a, 0) or _is(b, 0):
            return Const(0, e.dtype)
    if e.op == "div" and _is(b, 1):
        return a
    return e


# id(expression) -> (the expression, kept alive so its id stays its own; its simplified form)
Memo = dict[int, tuple[Expr, Expr]]


def simplify_expr(e: Expr, memo: Memo | None = None) -> Expr:
    """``e`` with the rules applied bottom-up. ``memo`` remembers the result of every
    sub-expression: unrolled copies share the subtrees that do not depend on the unrolled
    variable (map_expr keeps unchanged nodes), and each is simplified once per body."""
    if memo is None:
        return map_expr(e, _rule)
    return _simplify(e, memo)


def _simplify(e: Expr, memo: Memo) -> Expr:
    t = type(e)
    if t is Const or t is Var:
        return e
    hit = memo.get(id(e))
    if hit is not None:
        return hit[1]
    out: Expr = e
    if t is Bin:
        a, b = _simplify(e.a, memo), _simplify(e.b, memo)  # type: ignore[attr-defined]
        if a is not e.a or b is not e.b:  # type: ignore[attr-defined]
            out = Bin(e.op, a, b, e.dtype)  # type: ignore[attr-defined]
        out = _rule(out)
    elif t is Load:
        index = _simplify(e.index, memo)  # type: ignore[attr-defined]
        if index is not e.index:  # type: ignore[attr-defined]
            out = Load(e.buf, index)  # type: ignore[attr-defined]
    elif t is Cast or t is Un:
        a = _simplify(e.a, memo)  # type: ignore[attr-defined]
        if a is not e.a:  # type: ignore[attr-defined]
            out = Cast(a, e.dtype) if t is Cast else Un(e.op, a, e.dtype)  # type: ignore
    elif t is Select:
        c, a, b = (_simplify(e.cond, memo), _simplify(e.a, memo),  # type: ignore[attr-defined]
                   _simplify(e.b, memo))  # type: ignore[attr-defined]
        if c is not e.cond or a is not e.a or b is not e.b:  # type: ignore[attr-defined]
            out = Select(c, a, b)
    elif t is Call:
        args = tuple(_simplify(x, memo) for x in e.args)  # type: ignore[attr-defined]
        if any(x is not y for x, y in zip(args, e.args)):  # type: ignore[attr-defined]
            out = Call(e.fn, args, e.dtype)  # type: ignore[attr-defined]
    else:
        out = map_expr(e, _rule)  # a node kind this walker does not know: the generic one
    memo[id(e)] = (e, out)
    return out


def _declares(body: tuple[Stmt, ...]) -> bool:
    return any(isinstance(s, (Decl, DeclArray)) for s in body)


def _scope(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """Statements that replace a scoped statement (a loop run once, an If taken): spliced into
    the parent unless they declare locals, which then keep their own braces."""
    return (Block(body),) if _declares(body) else body


def _stmt(s: Stmt, memo: Memo) -> tuple[Stmt, ...]:
    if isinstance(s, Loop):
        start, stop = simplify_expr(s.start, memo), simplify_expr(s.stop, memo)
        if isinstance(start, Const) and isinstance(stop, Const) and s.step == 1:
            if stop.value <= start.value:
                return ()  # runs zero times
            if stop.value - start.value == 1:  # runs once: the body with the variable bound
                return _scope(simplify_body(substitute(s.body, s.var, start), memo))
        body = simplify_body(s.body, memo)
        return (Loop(s.var, start, stop, body, s.step, s.unroll_hint),) if body else ()
    if isinstance(s, If):
        cond = simplify_expr(s.cond, memo)
        if isinstance(cond, Const):
            return _scope(simplify_body(s.then if cond.value else s.orelse, memo))
        then, orelse = simplify_body(s.then, memo), simplify_body(s.orelse, memo)
        if not then and not orelse:
            return ()
        return (If(cond, then, orelse),)
    if isinstance(s, Outline):
        body = simplify_body(s.body, memo)
        return (Outline(body, s.opaque),) if body else ()
    if isinstance(s, Block):
        return _scope(simplify_body(s.body, memo))
    if isinstance(s, Store):
        index, value = simplify_expr(s.index, memo), simplify_expr(s.value, memo)
        return (s if index is s.index and value is s.value else Store(s.buf, index, value),)
    if isinstance(s, Decl):
        init = simplify_expr(s.init, memo)
        return (s if init is s.init else Decl(s.var, s.dtype, init),)
    if isinstance(s, Assign):
        value = simplify_expr(s.value, memo)
        return (s if value is s.value else Assign(s.var, value),)
    if isinstance(s, DeclArray):
        return (s,)
    raise TypeError(s)


def simplify_body(body: tuple[Stmt, ...], memo: Memo | None = None) -> tuple[Stmt, ...]:
    """``body`` simplified (see the module docstring); ``memo``: the simplify_expr memo of an
    enclosing call, so nested scopes share it (a new one otherwise)."""
    if memo is None:
        memo = {}
    out: list[Stmt] = []
    for s in body:
        out.extend(_stmt(s, memo))
    return drop_dead_bindings(tuple(out))


def simplify(k: Kernel) -> Kernel:
    return Kernel(k.name, k.params, simplify_body(k.body), k.comment, k.noalias)
