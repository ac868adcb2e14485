"""Schedule transformations on the loop IR: tile, unroll, reorder (Kernel -> Kernel).

Each transformation preserves the kernel's results (tests check this by running both versions
of kernels as C). They address loops by their variable name, which KernelBuilder keeps unique.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from aotc.loops.loop_ir import (
    INDEX,
    Assign,
    Block,
    Const,
    Decl,
    DeclArray,
    Expr,
    If,
    Kernel,
    Load,
    Loop,
    Stmt,
    Store,
    Var,
    bmin,
    children,
    map_expr,
    map_stmts,
    substitute,
)
from aotc.loops.simplify import simplify_body


class ScheduleError(ValueError):
    pass


def _rewrite_loop(body: tuple[Stmt, ...], var: str,
                  fn: Callable[[Loop], tuple[Stmt, ...]]) -> tuple[tuple[Stmt, ...], bool]:
    out: list[Stmt] = []
    found = False
    for s in body:
        if isinstance(s, Loop) and s.var == var:
            out.extend(fn(s))
            found = True
            continue
        if isinstance(s, Loop):
            nb, f = _rewrite_loop(s.body, var, fn)
            s = replace(s, body=nb)
        elif isinstance(s, If):
            t, f1 = _rewrite_loop(s.then, var, fn)
            e, f2 = _rewrite_loop(s.orelse, var, fn)
            s, f = If(s.cond, t, e), f1 or f2
        elif isinstance(s, Block):
            nb, f = _rewrite_loop(s.body, var, fn)
            s = replace(s, body=nb)
        else:
            f = False
        found = found or f
        out.append(s)
    return tuple(out), found


def _apply(k: Kernel, var: str, fn: Callable[[Loop], tuple[Stmt, ...]]) -> Kernel:
    body, found = _rewrite_loop(k.body, var, fn)
    if not found:
        raise ScheduleError(f"kernel {k.name} has no loop {var!r}")
    return replace(k, body=simplify_body(body))


def _const_extent(lp: Loop) -> int:
    if not (isinstance(lp.start, Const) and isinstance(lp.stop, Const)) or lp.step != 1:
        raise ScheduleError(f"loop {lp.var!r} has no constant extent")
    return int(lp.stop.value) - int(lp.start.value)


def tile(k: Kernel, var: str, factor: int) -> Kernel:
    """Split loop ``var`` into ``var_o`` (steps of factor) and ``var_i`` (0..factor)."""
    if factor < 1:
        raise ScheduleError("tile factor must be >= 1")

    def fn(lp: Loop) -> tuple[Stmt, ...]:
        n = _const_extent(lp)
        start = int(lp.start.value)  # type: ignore[attr-defined]
        vo, vi = Var(lp.var + "_o"), Var(lp.var + "_i")
        n_outer = -(-n // factor)
        base = vo * factor + start
        if n % factor == 0:
            inner_stop: Expr = Const(factor)
        else:
            inner_stop = bmin(Const(factor), Const(n + start) - base)
        inner_body = substitute(lp.body, lp.var, base + vi)
        inner = Loop(vi.name, Const(0), inner_stop, inner_body, 1, lp.unroll_hint)
        return (Loop(vo.name, Const(0), Const(n_outer), (inner,)),)

    return _apply(k, var, fn)


def unroll(k: Kernel, var: str, factor: int | None = None) -> Kernel:
    """Unroll loop ``var`` fully (factor None), or by ``factor``: a loop ``var_o`` whose body is
    ``factor`` copies, followed by the ``extent % factor`` remaining copies. Iterations keep
    their order; each copy is a Block, so copies may redeclare their locals."""
    if factor is not None and factor < 1:
        raise ScheduleError("unroll factor must be >= 1")

    def copy(lp: Loop, index: Expr) -> Stmt:
        return Block(substitute(lp.body, lp.var, index))

    def fn(lp: Loop) -> tuple[Stmt, ...]:
        n = _const_extent(lp)
        start = int(lp.start.value)  # type: ignore[attr-defined]
        f = n if factor is None else min(factor, n)
        if f == n:
            return tuple(copy(lp, Const(start + i, INDEX)) for i in range(n))
        vo = Var(lp.var + "_o")
        main = Loop(vo.name, Const(0), Const(n // f),
                    tuple(copy(lp, vo * f + (start + i)) for i in range(f)))
        rest = [copy(lp, Const(start + (n // f) * f + i, INDEX)) for i in range(n % f)]
        return (main, *rest)

    return _apply(k, var, fn)


def _nest(lp: Loop, depth: int) -> list[Loop]:
    loops = [lp]
    while len(loops) < depth:
        body = loops[-1].body
        if len(body) != 1 or not isinstance(body[0], Loop):
            raise ScheduleError(f"loops under {lp.var!r} are not perfectly nested")
        loops.append(body[0])
    return loops


def reorder(k: Kernel, order: list[str]) -> Kernel:
    """Permute a perfectly nested band of loops whose variables are ``order`` (any order)."""
    wanted = set(order)

    def find_outer(body: tuple[Stmt, ...]) -> str | None:
        for s in body:
            if isinstance(s, Loop):
                if s.var in wanted:
                    return s.var
                r = find_outer(s.body)
                if r:
                    return r
            elif isinstance(s, (If, Block)):
                r = find_outer(s.then + s.orelse if isinstance(s, If) else s.body)
                if r:
                    return r
        return None

    outer = find_outer(k.body)
    if outer is None:
        raise ScheduleError(f"kernel {k.name} has none of the loops {order}")

    def fn(lp: Loop) -> tuple[Stmt, ...]:
        band = _nest(lp, len(order))
        if {b.var for b in band} != wanted:
            raise ScheduleError(f"loops {order} are not one perfect nest")
        for b in band:
            # A loop's bounds may read only loops that stay outside it in the new order (a
            # remainder tile's bound reads its outer tile loop, which may move but not inward).
            for other in set(order[order.index(b.var) + 1:]):
                if _mentions(b.start, other) or _mentions(b.stop, other):
                    raise ScheduleError(f"bounds of {b.var!r} depend on {other!r}, which the "
                                        f"new order puts inside it")
        by_var = {b.var: b for b in band}
        body = band[-1].body
        for v in reversed(order):
            b = by_var[v]
            body = (Loop(v, b.start, b.stop, body, b.step, b.unroll_hint),)
        return body

    return _apply(k, outer, fn)


def _mentions(e: Expr, var: str) -> bool:
    found = False

    def fe(x: Expr) -> Expr:
        nonlocal found
        if isinstance(x, Var) and x.name == var:
            found = True
        return x

    from aotc.loops.loop_ir import map_expr

    map_expr(e, fe)
    return found


def unroll_hinted(k: Kernel, max_extent: int = 8) -> Kernel:
    """Fully unroll every loop the builder marked as an unroll candidate with a small extent,
    outermost first. Each loop's copies are simplified as they are made (so an inner loop
    whose bounds depended on the outer variable shows its constant extent), the whole kernel
    once at the end."""
    def copies(lp: Loop) -> tuple[Stmt, ...]:
        start = int(lp.start.value)  # type: ignore[attr-defined]
        return simplify_body(tuple(Block(substitute(lp.body, lp.var, Const(start + i, INDEX)))
                                   for i in range(_const_extent(lp))))

    changed = False
    while hinted := _hinted(k.body, max_extent):
        body, _ = _rewrite_loop(k.body, hinted[0], copies)
        k = replace(k, body=body)
        changed = True
    return replace(k, body=simplify_body(k.body)) if changed else k


def _hinted(body: tuple[Stmt, ...], max_extent: int) -> list[str]:
    out: list[str] = []
    for s in body:
        if isinstance(s, Loop):
            if s.unroll_hint and isinstance(s.start, Const) and isinstance(s.stop, Const):
                if 0 < int(s.stop.value) - int(s.start.value) <= max_extent:
                    out.append(s.var)
            out.extend(_hinted(s.body, max_extent))
        elif isinstance(s, If):
            out.extend(_hinted(s.then, max_extent) + _hinted(s.orelse, max_extent))
        elif isinstance(s, Block):
            out.extend(_hinted(s.body, max_extent))
    return out


# ----------------------------------------------------------------------------- scalar replacement
def scalarize_locals(k: Kernel) -> Kernel:
    """Replace a local array whose every access has a constant index (an unrolled accumulator
    tile) by one scalar local per element: compilers keep scalars in registers, while a local
    array may live on the stack (gcc -Os spills an int32 ``acc[4]`` on Cortex-M)."""
    return replace(k, body=_scalarize(k.body))


def _scalarize(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    body = tuple(_scalarize_children(s) for s in body)
    for s in body:
        if isinstance(s, DeclArray) and _const_accesses(body, s.buf.name):
            body = _replace_array(body, s)
    return body


def _scalarize_children(s: Stmt) -> Stmt:
    if isinstance(s, Loop):
        return replace(s, body=_scalarize(s.body))
    if isinstance(s, Block):
        return replace(s, body=_scalarize(s.body))
    if isinstance(s, If):
        return If(s.cond, _scalarize(s.then), _scalarize(s.orelse))
    return s


def _const_accesses(body: tuple[Stmt, ...], name: str) -> bool:
    """Whether every Load and Store of buffer ``name`` in ``body`` has a constant index."""
    stack: list[object] = list(body)
    while stack:
        x = stack.pop()
        t = type(x)
        if (t is Load or t is Store) and x.buf.name == name \
                and not isinstance(x.index, Const):  # type: ignore[attr-defined]
            return False
        stack.extend(children(x))
    return True


def _replace_array(body: tuple[Stmt, ...], decl: DeclArray) -> tuple[Stmt, ...]:
    buf = decl.buf

    def var(i: Expr) -> str:
        assert isinstance(i, Const)
        return f"{buf.name}_{int(i.value)}"

    def fe(e: Expr) -> Expr:
        if isinstance(e, Load) and e.buf.name == buf.name:
            return Var(var(e.index), buf.dtype)
        return e

    def rw(b: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in b:
            if s is decl:
                zero = Const(0.0 if buf.dtype.is_float else 0, buf.dtype)
                out += [Decl(f"{buf.name}_{i}", buf.dtype, zero) for i in range(buf.size)]
            elif isinstance(s, Store) and s.buf.name == buf.name:
                out.append(Assign(var(s.index), map_expr(s.value, fe)))
            elif isinstance(s, Loop):
                out.append(replace(s, start=map_expr(s.start, fe), stop=map_expr(s.stop, fe),
                                   body=rw(s.body)))
            elif isinstance(s, Block):
                out.append(replace(s, body=rw(s.body)))
            elif isinstance(s, If):
                out.append(If(map_expr(s.cond, fe), rw(s.then), rw(s.orelse)))
            else:
                out.extend(map_stmts((s,), fe))
        return tuple(out)

    return rw(body)
