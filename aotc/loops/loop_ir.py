"""The loop IR: expressions and statements over named flat buffers.

Every node is a frozen dataclass, so transformations build new trees and kernels can be compared
structurally. Index expressions have dtype ``INDEX`` (printed as int32_t). Buffers are flat:
a multi-dimensional access is a Load/Store with a flat index expression.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Union

from aotc.dtypes import BY_NAME, DType

INDEX = BY_NAME["int32"]
BOOL = BY_NAME["bool"]


# --------------------------------------------------------------------------- expressions
class Expr:
    """Base of all expressions; arithmetic operators build Bin nodes."""

    dtype: DType

    def _bin(self, op: str, other: object, swap: bool = False) -> Expr:
        o = as_expr(other, self.dtype)
        a, b = (o, self) if swap else (self, o)
        return Bin(op, a, b, self.dtype)

    def __add__(self, o: object) -> Expr:
        return self._bin("add", o)

    def __radd__(self, o: object) -> Expr:
        return self._bin("add", o, swap=True)

    def __sub__(self, o: object) -> Expr:
        return self._bin("sub", o)

    def __rsub__(self, o: object) -> Expr:
        return self._bin("sub", o, swap=True)

    def __mul__(self, o: object) -> Expr:
        return self._bin("mul", o)

    def __rmul__(self, o: object) -> Expr:
        return self._bin("mul", o, swap=True)

    def __truediv__(self, o: object) -> Expr:
        return self._bin("div", o)

    def __rtruediv__(self, o: object) -> Expr:
        return self._bin("div", o, swap=True)

    def __floordiv__(self, o: object) -> Expr:
        # Only used on non-negative index expressions, where C's truncation is floor.
        return self._bin("div", o)

    def __mod__(self, o: object) -> Expr:
        return self._bin("mod", o)

    def __neg__(self) -> Expr:
        return Un("neg", self, self.dtype)


@dataclass(frozen=True, eq=True)
class Const(Expr):
    value: Union[int, float, bool]
    dtype: DType = INDEX


@dataclass(frozen=True, eq=True)
class Var(Expr):
    name: str
    dtype: DType = INDEX


@dataclass(frozen=True, eq=True)
class Buffer:
    """A flat array parameter of a kernel (or a local array)."""

    name: str
    dtype: DType
    size: int  # elements
    role: str  # "in", "out", "const", "scratch"


@dataclass(frozen=True, eq=True)
class Load(Expr):
    buf: Buffer
    index: Expr

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.buf.dtype


@dataclass(frozen=True, eq=True)
class Bin(Expr):
    op: str  # see codegen.c.BINARY
    a: Expr
    b: Expr
    dtype: DType


@dataclass(frozen=True, eq=True)
class Un(Expr):
    op: str  # see codegen.c.UNARY
    a: Expr
    dtype: DType


@dataclass(frozen=True, eq=True)
class Call(Expr):
    """A call of a math function (expf, erff, ...), a runtime helper or an ACLE intrinsic
    (loops/dsp.py); fn names the C function family, resolved by the printer from the argument
    dtype."""

    fn: str
    args: tuple[Expr, ...]
    dtype: DType


@dataclass(frozen=True, eq=True)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.a.dtype


@dataclass(frozen=True, eq=True)
class Cast(Expr):
    a: Expr
    dtype: DType


def as_expr(x: object, dtype: DType = INDEX) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, bool):
        return Const(x, dtype)
    if isinstance(x, int):
        return Const(float(x) if dtype.is_float else x, dtype)
    if isinstance(x, float):
        return Const(x, dtype)
    raise TypeError(f"cannot make an expression of {x!r}")


def cmp(op: str, a: Expr, b: object) -> Expr:
    """Comparison (lt, le, gt, ge, eq, ne) giving a bool expression."""
    return Bin(op, a, as_expr(b, a.dtype), BOOL)


def land(*conds: Expr) -> Expr:
    out = conds[0]
    for c in conds[1:]:
        out = Bin("land", out, c, BOOL)
    return out


def lor(*conds: Expr) -> Expr:
    out = conds[0]
    for c in conds[1:]:
        out = Bin("lor", out, c, BOOL)
    return out


def flat(idx: Sequence[Expr], strides: Sequence[int]) -> Expr:
    """The flat element offset sum(idx[k] * strides[k]), from 0."""
    out: Expr = Const(0)
    for i, st in zip(idx, strides):
        out = out + i * st
    return out


def select(cond: Expr, a: object, b: object, dtype: DType) -> Expr:
    return Select(cond, as_expr(a, dtype), as_expr(b, dtype))


def call(fn: str, *args: Expr, dtype: DType | None = None) -> Expr:
    return Call(fn, tuple(args), dtype or args[0].dtype)


def vldm(load: Load, reg: int, n: int, i: int) -> Expr:
    """Element ``i`` of a run of ``n`` consecutive float loads (``load`` is element i's, its
    index the run's first + i) that the C printer prints as one multi-register load (VLDM into
    s<reg>.. s<reg + n - 1>) when the run's elements initialise consecutive Decls in order,
    and as the plain load otherwise: the value is ``load``'s either way."""
    return Call("vldm", (load, Const(reg), Const(n), Const(i)), load.dtype)


def _affine(e: Expr) -> dict[str, int] | None:
    """An index expression as {variable: coefficient, "": constant}, or None if it is not
    affine in the loop variables."""
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return {"": e.value}
    if isinstance(e, Var):
        return {e.name: 1}
    if isinstance(e, Bin) and e.op in ("add", "sub", "mul"):
        a, b = _affine(e.a), _affine(e.b)
        if a is None or b is None:
            return None
        if e.op == "mul":
            if set(b) <= {""}:
                a, b = b, a
            if not set(a) <= {""}:
                return None
            k = a.get("", 0)
            return {v: k * c for v, c in b.items()}
        sign = 1 if e.op == "add" else -1
        out = dict(a)
        for v, c in b.items():
            out[v] = out.get(v, 0) + sign * c
        return out
    return None


def consecutive(loads: list[Expr]) -> bool:
    """Whether ``loads`` are Loads of one buffer at consecutive indices (load i at the first's
    index + i), for every value of the loop variables."""
    if not all(isinstance(x, Load) for x in loads) or len({x.buf for x in loads}) != 1:
        return False
    forms = [_affine(x.index) for x in loads]  # type: ignore[attr-defined]
    if any(f is None for f in forms):
        return False
    first = forms[0]
    assert first is not None
    for i, f in enumerate(forms):
        assert f is not None
        diff = {v: f.get(v, 0) - first.get(v, 0) for v in set(f) | set(first)}
        if any(c for v, c in diff.items() if v) or diff.get("", 0) != i:
            return False
    return True


def bmin(a: Expr, b: object) -> Expr:
    return Bin("min", a, as_expr(b, a.dtype), a.dtype)


def bmax(a: Expr, b: object) -> Expr:
    return Bin("max", a, as_expr(b, a.dtype), a.dtype)


# --------------------------------------------------------------------------- statements
class Stmt:
    pass


@dataclass(frozen=True, eq=True)
class Loop(Stmt):
    var: str
    start: Expr
    stop: Expr
    body: tuple[Stmt, ...]
    step: int = 1
    unroll_hint: bool = False


@dataclass(frozen=True, eq=True)
class Store(Stmt):
    buf: Buffer
    index: Expr
    value: Expr


@dataclass(frozen=True, eq=True)
class Decl(Stmt):
    """Declare a scalar local ``var`` of ``dtype`` initialised to ``init``."""

    var: str
    dtype: DType
    init: Expr


@dataclass(frozen=True, eq=True)
class DeclArray(Stmt):
    """Declare a small local array (role "local"), e.g. a tile of accumulators."""

    buf: Buffer


@dataclass(frozen=True, eq=True)
class Assign(Stmt):
    var: str
    value: Expr


@dataclass(frozen=True, eq=True)
class If(Stmt):
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()


@dataclass(frozen=True, eq=True)
class Block(Stmt):
    """A scope (printed as braces) so unrolled copies may redeclare their locals."""

    body: tuple[Stmt, ...]


@dataclass(frozen=True, eq=True)
class Outline(Block):
    """A block the C printer emits as a function of its own (static, noinline) and a call:
    a small function's few live values get registers even where a register allocator that
    optimises for size (gcc -Os weighs every use alike, not by loop depth) would spill a hot
    inner loop's accumulators in a large kernel. The body reads outer variables (passed by
    value) and buffers (passed as the same pointers); it must not assign outer variables.
    ``opaque``: not cloned by gcc's interprocedural constant propagation either (AOTC_NOCLONE),
    whose clone for the only caller's weight array takes its address as a constant that gcc
    -Os then rebuilds from the literal pool at every load instead of keeping a pointer."""

    opaque: bool = False


@dataclass(frozen=True, eq=True)
class Kernel:
    name: str
    params: tuple[Buffer, ...]
    body: tuple[Stmt, ...]
    comment: str = ""
    noalias: frozenset[str] = field(default_factory=frozenset)  # params safe to mark restrict


# --------------------------------------------------------------------------- generic walkers
def _map_load(e: Load, fn, deep: bool = True) -> Expr:  # type: ignore[no-untyped-def]
    index = map_expr(e.index, fn) if deep else fn(e.index)
    return e if index is e.index else Load(e.buf, index)


def _map_bin(e: Bin, fn, deep: bool = True) -> Expr:  # type: ignore[no-untyped-def]
    if deep:
        a, b = map_expr(e.a, fn), map_expr(e.b, fn)
    else:
        a, b = fn(e.a), fn(e.b)
    return e if a is e.a and b is e.b else Bin(e.op, a, b, e.dtype)


def _map_un(e: Un, fn, deep: bool = True) -> Expr:  # type: ignore[no-untyped-def]
    a = map_expr(e.a, fn) if deep else fn(e.a)
    return e if a is e.a else Un(e.op, a, e.dtype)


def _map_call(e: Call, fn, deep: bool = True) -> Expr:  # type: ignore[no-untyped-def]
    args = tuple(map_expr(a, fn) if deep else fn(a) for a in e.args)
    if all(x is y for x, y in zip(args, e.args)):
        return e
    return Call(e.fn, args, e.dtype)


def _map_select(e: Select, fn, deep: bool = True) -> Expr:  # type: ignore[no-untyped-def]
    if deep:
        c, a, b = map_expr(e.cond, fn), map_expr(e.a, fn), map_expr(e.b, fn)
    else:
        c, a, b = fn(e.cond), fn(e.a), fn(e.b)
    return e if c is e.cond and a is e.a and b is e.b else Select(c, a, b)


def _map_cast(e: Cast, fn, deep: bool = True) -> Expr:  # type: ignore[no-untyped-def]
    a = map_expr(e.a, fn) if deep else fn(e.a)
    return e if a is e.a else Cast(a, e.dtype)


# Dispatch on the exact node type (one dict look-up instead of an isinstance chain); leaves
# (Const, Var) have no entry. ``deep``: map the children with map_expr(child, fn) (fn applied
# to every node below); else fn(child) (fn recurses itself, as substitute's does).
_MAP_CHILDREN = {Load: _map_load, Bin: _map_bin, Un: _map_un, Call: _map_call,
                 Select: _map_select, Cast: _map_cast}


def map_expr(e: Expr, fn) -> Expr:  # type: ignore[no-untyped-def]
    """Rebuild ``e`` bottom-up, applying ``fn`` to every rebuilt node. A node whose children
    come back unchanged (the same objects) is kept rather than rebuilt: nodes are immutable, so
    the result is equal either way, and unchanged subtrees cost no allocation."""
    rebuild = _MAP_CHILDREN.get(type(e))
    if rebuild is not None:
        e = rebuild(e, fn)
    return fn(e)


def _map_exprs(body: tuple[Stmt, ...], fx) -> tuple[Stmt, ...]:  # type: ignore[no-untyped-def]
    """``body`` with ``fx`` applied to each statement's own expressions (whole, not per
    node); statements whose expressions come back unchanged are kept."""
    out = tuple(_map_stmt(s, fx) for s in body)
    return body if all(x is y for x, y in zip(out, body)) else out


def _map_stmt(s: Stmt, fx) -> Stmt:  # type: ignore[no-untyped-def]
    t = type(s)
    if t is Store:
        index, value = fx(s.index), fx(s.value)
        return s if index is s.index and value is s.value else Store(s.buf, index, value)
    if t is Decl:
        init = fx(s.init)
        return s if init is s.init else Decl(s.var, s.dtype, init)
    if t is Assign:
        value = fx(s.value)
        return s if value is s.value else Assign(s.var, value)
    if t is Loop:
        start, stop = fx(s.start), fx(s.stop)
        body = _map_exprs(s.body, fx)
        if start is s.start and stop is s.stop and body is s.body:
            return s
        return Loop(s.var, start, stop, body, s.step, s.unroll_hint)
    if t is If:
        cond, then, orelse = fx(s.cond), _map_exprs(s.then, fx), \
            _map_exprs(s.orelse, fx)
        if cond is s.cond and then is s.then and orelse is s.orelse:
            return s
        return If(cond, then, orelse)
    if isinstance(s, Block):
        body = _map_exprs(s.body, fx)
        return s if body is s.body else replace(s, body=body)
    if isinstance(s, DeclArray):
        return s
    raise TypeError(s)


def map_stmts(body: tuple[Stmt, ...], fe) -> tuple[Stmt, ...]:  # type: ignore[no-untyped-def]
    """Apply the expression rewrite ``fe`` to every expression inside ``body`` (statements
    whose expressions come back unchanged are kept, as in map_expr)."""
    return _map_exprs(body, lambda e: map_expr(e, fe))


def substitute(body: tuple[Stmt, ...], var: str, value: Expr) -> tuple[Stmt, ...]:
    """``body`` with every ``Var(var)`` replaced by ``value``. Each distinct sub-expression
    object is rewritten once: unrolled copies share the subtrees that do not depend on their
    variable (map_expr keeps unchanged nodes), so a body unrolled before holds many."""
    memo: dict[int, tuple[Expr, Expr]] = {}  # id -> (the node, kept alive; its rewrite)

    def sub(e: Expr) -> Expr:
        t = type(e)
        if t is Var:
            return value if e.name == var else e  # type: ignore[attr-defined]
        if t is Const:
            return e
        hit = memo.get(id(e))
        if hit is not None:
            return hit[1]
        rebuild = _MAP_CHILDREN.get(t)
        out = e if rebuild is None else rebuild(e, sub, False)
        memo[id(e)] = (e, out)
        return out

    return _map_exprs(body, sub)


def used_buffers(body: tuple[Stmt, ...]) -> set[str]:
    """Names of the buffers a body loads from or stores to."""
    used: set[str] = set()

    def fe(e: Expr) -> Expr:
        if isinstance(e, Load):
            used.add(e.buf.name)
        return e

    def walk(stmts: tuple[Stmt, ...]) -> None:
        for s in stmts:
            if isinstance(s, Store):
                used.add(s.buf.name)
            if isinstance(s, Loop):
                walk(s.body)
            elif isinstance(s, If):
                walk(s.then)
                walk(s.orelse)
            elif isinstance(s, Block):
                walk(s.body)

    map_stmts(body, fe)
    walk(body)
    return used


_CHILDREN = {
    Load: lambda x: (x.index,),
    Bin: lambda x: (x.a, x.b),
    Select: lambda x: (x.cond, x.a, x.b),
    Un: lambda x: (x.a,),
    Cast: lambda x: (x.a,),
    Call: lambda x: x.args,
    Loop: lambda x: (x.start, x.stop, *x.body),
    Store: lambda x: (x.index, x.value),
    Decl: lambda x: (x.init,),
    Assign: lambda x: (x.value,),
    If: lambda x: (x.cond, *x.then, *x.orelse),
}


def children(x: object) -> tuple[object, ...]:
    """The sub-expressions and sub-statements of an IR node, for iterative walks."""
    get = _CHILDREN.get(type(x))
    if get is not None:
        return get(x)  # type: ignore[no-any-return]
    if isinstance(x, Block):
        return x.body
    return ()


def referenced_names(nodes: tuple[object, ...]) -> set[str]:
    """Every scalar variable and buffer name that ``nodes`` (statements or expressions) read,
    assign or store to. Iterative, so arbitrarily deep expressions do not hit the recursion
    limit."""
    names: set[str] = set()
    stack = list(nodes)
    pop, extend, add, get = stack.pop, stack.extend, names.add, _CHILDREN.get
    while stack:
        x = pop()
        t = type(x)
        if t is Var:
            add(x.name)  # type: ignore[attr-defined]
            continue
        if t is Const:
            continue
        if t is Load or t is Store:
            add(x.buf.name)  # type: ignore[attr-defined]
        elif t is Assign:
            add(x.var)  # type: ignore[attr-defined]
        kids = get(t)
        if kids is not None:
            extend(kids(x))
        elif isinstance(x, Block):
            extend(x.body)
    return names


def drop_dead_bindings(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """Remove the local declarations (Decl, DeclArray) of one scope that nothing after them in
    the scope refers to. Expressions have no side effects, so a binding whose uses were all
    folded away (a guard decided by ranges, a loop run zero times) goes with them; one backward
    pass also removes bindings that only dead bindings used. Nested scopes are the caller's:
    simplify_body cleans each scope as it rebuilds it."""
    bound = {s.var if isinstance(s, Decl) else s.buf.name
             for s in body if isinstance(s, (Decl, DeclArray))}
    used: set[str] = set()
    out: list[Stmt] = []
    for k in range(len(body) - 1, -1, -1):
        s = body[k]
        if bound <= used:  # every binding is used: the rest stays as it is
            return body[:k + 1] + tuple(reversed(out))
        if isinstance(s, Decl) and s.var not in used:
            continue
        if isinstance(s, DeclArray) and s.buf.name not in used:
            continue
        used |= referenced_names((s,)) & bound
        out.append(s)
    return tuple(reversed(out))
