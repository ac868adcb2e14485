"""Interval reasoning over loop ranges: fold integer comparisons that hold for every iteration.

Bounds checks for padded windows (``i = o*s + k*d - p; if (i >= 0 && i < H)``) are decided per
tap once the kernel window is unrolled: interior taps lose their guards. Values are intervals
[lo, hi] of integers; a variable that is ever re-assigned gets no interval (conservative).
"""

from __future__ import annotations

from dataclasses import replace

from aotc.loops.loop_ir import (
    BOOL,
    INDEX,
    Assign,
    Bin,
    Block,
    Const,
    Decl,
    Expr,
    If,
    Kernel,
    Loop,
    Stmt,
    Store,
    Var,
    children,
    map_expr,
)
from aotc.loops.simplify import simplify_body

Interval = tuple[int, int]


def interval(e: Expr, env: dict[str, Interval],
             memo: dict[int, Interval | None] | None = None) -> Interval | None:
    """The range of the integer expression ``e`` over ``env``'s variable ranges, or None.
    ``memo``: id -> range of the sub-expressions already seen under this same env (the caller
    keeps them alive), for walks that ask about every sub-expression of a tree."""
    if memo is not None:
        key = id(e)
        if key not in memo:
            memo[key] = _interval(e, env, memo)
        return memo[key]
    return _interval(e, env, None)


def _interval(e: Expr, env: dict[str, Interval],
              memo: dict[int, Interval | None] | None) -> Interval | None:
    if isinstance(e, Const):
        if e.dtype.is_float or e.dtype.name == "bool":
            return None
        return int(e.value), int(e.value)
    if isinstance(e, Var):
        return env.get(e.name)
    if not isinstance(e, Bin) or e.dtype.is_float or e.dtype.name == "bool":
        return None
    a, b = interval(e.a, env, memo), interval(e.b, env, memo)
    if a is None or b is None:
        return None
    if e.op == "add":
        return a[0] + b[0], a[1] + b[1]
    if e.op == "sub":
        return a[0] - b[1], a[1] - b[0]
    if e.op == "mul":
        prods = [x * y for x in a for y in b]
        return min(prods), max(prods)
    if e.op == "min":
        return min(a[0], b[0]), min(a[1], b[1])
    if e.op == "max":
        return max(a[0], b[0]), max(a[1], b[1])
    if e.op == "div" and b[0] == b[1] and b[0] > 0 and a[0] >= 0:  # C truncation == floor
        return a[0] // b[0], a[1] // b[0]
    if e.op == "mod" and b[0] == b[1] and b[0] > 0 and a[0] >= 0:
        return (a[0], a[1]) if a[1] < b[0] else (0, b[0] - 1)
    return None


def _decide(op: str, a: Interval, b: Interval) -> bool | None:
    if op == "lt":
        return True if a[1] < b[0] else False if a[0] >= b[1] else None
    if op == "le":
        return True if a[1] <= b[0] else False if a[0] > b[1] else None
    if op == "gt":
        return _decide("lt", b, a)
    if op == "ge":
        return _decide("le", b, a)
    return None


def _fold(e: Expr, env: dict[str, Interval]) -> Expr:
    def rule(x: Expr) -> Expr:
        if isinstance(x, Bin) and x.op in ("lt", "le", "gt", "ge"):
            ia, ib = interval(x.a, env), interval(x.b, env)
            if ia is not None and ib is not None:
                d = _decide(x.op, ia, ib)
                if d is not None:
                    return Const(d, BOOL)
        return x

    return map_expr(e, rule)


def _assigned(body: tuple[Stmt, ...], out: set[str]) -> set[str]:
    for s in body:
        if isinstance(s, Assign):
            out.add(s.var)
        elif isinstance(s, Loop):
            _assigned(s.body, out)
        elif isinstance(s, If):
            _assigned(s.then, out)
            _assigned(s.orelse, out)
        elif isinstance(s, Block):
            _assigned(s.body, out)
    return out


def _loop_scope(s: Loop, env: dict[str, Interval]) -> dict[str, Interval]:
    """The intervals in force inside loop ``s``: its variable's range when the bounds decide it."""
    inner = dict(env)
    lo, hi = interval(s.start, env), interval(s.stop, env)
    if lo is not None and hi is not None and s.step == 1:
        inner[s.var] = (lo[0], hi[1] - 1)
    else:
        inner.pop(s.var, None)
    return inner


def _prune(body: tuple[Stmt, ...], env: dict[str, Interval], mutable: set[str]
           ) -> tuple[Stmt, ...]:
    env = dict(env)  # a scope: declarations do not leak out
    out: list[Stmt] = []
    for s in body:
        if isinstance(s, Loop):
            out.append(replace(s, body=_prune(s.body, _loop_scope(s, env), mutable)))
        elif isinstance(s, Decl):
            init = _fold(s.init, env)
            r = interval(init, env)
            if r is not None and s.var not in mutable:
                env[s.var] = r
            else:
                env.pop(s.var, None)
            out.append(Decl(s.var, s.dtype, init))
        elif isinstance(s, If):
            out.append(If(_fold(s.cond, env), _prune(s.then, env, mutable),
                          _prune(s.orelse, env, mutable)))
        elif isinstance(s, Block):
            out.append(replace(s, body=_prune(s.body, env, mutable)))
        elif isinstance(s, Store):
            out.append(Store(s.buf, s.index, _fold(s.value, env)))
        elif isinstance(s, Assign):
            out.append(Assign(s.var, _fold(s.value, env)))
        else:
            out.append(s)
    return tuple(out)


def prune_guards(k: Kernel) -> Kernel:
    """Fold comparisons decided by loop ranges, then simplify (dropping decided Ifs)."""
    body = _prune(k.body, {}, _assigned(k.body, set()))
    return replace(k, body=simplify_body(body))


INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def index_overflow(k: Kernel) -> str | None:
    """The first index computation of ``k`` whose value range leaves int32 (the C type of
    INDEX), described for an error message, or None. Checks buffer sizes, loop bounds and every
    integer sub-expression whose range the loop bounds decide (``o * stride - pad`` with a huge
    stride overflows before the subtraction brings it back)."""
    for b in k.params:
        if b.size > INT32_MAX:
            return f"buffer {b.name} has {b.size} elements"
    mutable = _assigned(k.body, set())
    # (statements of one scope, the intervals in force there), walked without recursion
    work: list[tuple[tuple[Stmt, ...], dict[str, Interval]]] = [(k.body, {})]
    while work:
        body, env = work.pop()
        env = dict(env)
        memo: dict[int, Interval | None] = {}  # ranges under env as it is (reset as it changes)
        for s in body:
            exprs: list[Expr] = []
            if isinstance(s, Loop):
                exprs = [s.start, s.stop]
            elif isinstance(s, (Store, Decl, Assign, If)):
                exprs = [x for x in children(s) if isinstance(x, Expr)]
            bad = _out_of_range(exprs, env, memo)
            if bad is not None:
                return bad
            if isinstance(s, Loop):
                work.append((s.body, _loop_scope(s, env)))
            elif isinstance(s, Decl):
                r = interval(s.init, env)
                if r is not None and s.var not in mutable:
                    env[s.var] = r
                else:
                    env.pop(s.var, None)
                memo = {}
            elif isinstance(s, If):
                work += [(s.then, _narrow(s.cond, env)), (s.orelse, env)]
            elif isinstance(s, Block):
                work.append((s.body, env))
    return None


def _narrow(cond: Expr, env: dict[str, Interval]) -> dict[str, Interval]:
    """The intervals inside ``if (cond)``: each conjunct ``v < e``, ``v <= e``, ``v >= e`` or
    ``v > e`` (a padded window's bounds check) bounds the variable ``v``."""
    env = dict(env)
    conjuncts = [cond]
    while conjuncts:
        c = conjuncts.pop()
        if not isinstance(c, Bin):
            continue
        if c.op == "land":
            conjuncts += [c.a, c.b]
            continue
        if not isinstance(c.a, Var) or c.a.name not in env:
            continue
        r = interval(c.b, env)
        if r is None:
            continue
        lo, hi = env[c.a.name]
        if c.op == "lt":
            hi = min(hi, r[1] - 1)
        elif c.op == "le":
            hi = min(hi, r[1])
        elif c.op == "gt":
            lo = max(lo, r[0] + 1)
        elif c.op == "ge":
            lo = max(lo, r[0])
        env[c.a.name] = (lo, hi)
    return env


def _out_of_range(exprs: list[Expr], env: dict[str, Interval],
                  memo: dict[int, Interval | None]) -> str | None:
    """The first index sub-expression of ``exprs`` whose range leaves int32, described, or
    None. ``memo``: the ranges already computed under ``env`` (shared subtrees, e.g. of
    unrolled copies, are visited once)."""
    stack: list[object] = list(exprs)
    while stack:
        e = stack.pop()
        if isinstance(e, Expr) and e.dtype == INDEX:
            r = interval(e, env, memo)
            if r is not None and (r[0] < INT32_MIN or r[1] > INT32_MAX):
                return f"an index reaches {r[1] if r[1] > INT32_MAX else r[0]}"
        stack.extend(children(e))
    return None
