"""simplify: index folding, single-trip loops, constant Ifs and Block flattening."""

from __future__ import annotations

from aotc import dtypes
from aotc.codegen.c import CPrinter
from aotc.loops.loop_ir import (
    BOOL,
    INDEX,
    Assign,
    Block,
    Buffer,
    Const,
    Decl,
    Expr,
    If,
    Kernel,
    Load,
    Loop,
    Store,
    Var,
    cmp,
)
from aotc.loops.simplify import simplify, simplify_body, simplify_expr

F32 = dtypes.float32
X = Buffer("x", F32, 64, "in")
Y = Buffer("y", F32, 64, "out")
i, j = Var("i"), Var("j")
P = CPrinter()


def load_x(e: Expr) -> Expr:
    return Load(X, e)


def c(e: Expr) -> str:
    return P.expr(simplify_expr(e))


def text(*body: object) -> str:
    return "\n".join(P.stmts(simplify_body(tuple(body)), 0))  # type: ignore[arg-type]


def test_constant_offsets_fold() -> None:
    assert c((i + 3) - 5) == "(i - 2)"
    assert c((i - 3) + 5) == "(i + 2)"
    assert c((i - 3) - 5) == "(i - 8)"
    assert c((i + 3) + 5) == "(i + 8)"
    assert c((i + 1) - 1) == "i"
    assert c(2 + i) == "(i + 2)"
    assert c((Const(2) + i) + 1) == "(i + 3)"
    assert c(((i * 4) + 1) - 1) == "(i * 4)"


def test_basic_identities_and_constants() -> None:
    assert c(i * 1 + 0) == "i"
    assert c(i * 0 + j) == "j"
    assert c(Const(6) * 7 - 2) == "40"
    assert c(Const(7) // 2) == "3"
    assert c(Const(7) % 3) == "1"
    assert c(Const(-7) // 2) == "(-7 / 2)"  # C truncates, floor would not: left alone


def test_float_arithmetic_is_never_reassociated() -> None:
    v = Var("v", F32)
    assert c((v + 1.0) - 1.0) == "((v + 1.0f) - 1.0f)"
    assert c(v * 1.0) == "(v * 1.0f)"


def test_offsets_that_would_overflow_the_type_stay() -> None:
    v = Var("v", dtypes.BY_NAME["int8"])
    assert c((v + 100) + 100) == "((v + 100) + 100)"
    assert c((v + 100) - 50) == "(v + 50)"


def test_constant_comparisons_and_conditions() -> None:
    assert simplify_expr(cmp("lt", Const(1), Const(2))) == Const(True, BOOL)
    body = (If(cmp("lt", Const(3), Const(2)), (Store(Y, i, Const(1.0, F32)),),
               (Store(Y, i, Const(2.0, F32)),)),)
    assert text(*body) == "y[i] = 2.0f;"


def test_a_loop_that_runs_once_becomes_its_body() -> None:
    lp = Loop("i", Const(3), Const(4), (Store(Y, i + 1, load_x(i)),))
    assert text(lp) == "y[4] = x[3];"


def test_a_loop_that_runs_once_keeps_its_scope_when_it_declares() -> None:
    acc = Var("acc", F32)
    lp = Loop("i", Const(0), Const(1), (Decl("acc", F32, load_x(i)),
                                        Store(Y, i, acc)))
    out = simplify_body((lp, lp))
    assert out == (Block((Decl("acc", F32, load_x(Const(0))), Store(Y, Const(0), acc))),) * 2
    assert text(lp, lp) == "{\n    float acc = x[0];\n    y[0] = acc;\n}\n" \
                           "{\n    float acc = x[0];\n    y[0] = acc;\n}"


def test_loops_that_never_run_vanish_at_any_depth() -> None:
    inner = Loop("j", Const(5), Const(5), (Store(Y, j, Const(0.0, F32)),))
    outer = Loop("i", Const(0), Const(4), (inner,))
    assert simplify_body((outer,)) == ()


def test_nested_blocks_without_declarations_are_flattened() -> None:
    s1, s2 = Store(Y, Const(0), load_x(Const(0))), Store(Y, Const(1), load_x(Const(1)))
    body = (Block((Block((s1,)), Block((s2,)))),)
    assert simplify_body(body) == (s1, s2)
    keep = Block((Decl("t", F32, load_x(Const(0))), Assign("t", load_x(Const(1)))))
    assert simplify_body((Block((keep,)),)) == (keep,)


def test_kernel_level_simplify_keeps_params_and_comment() -> None:
    k = Kernel("k", (X, Y), (Loop("i", Const(0), Const(1), (Store(Y, i, load_x(i)),)),), "c")
    out = simplify(k)
    assert out.params == k.params and out.comment == "c"
    assert out.body == (Store(Y, Const(0, INDEX), load_x(Const(0, INDEX))),)
