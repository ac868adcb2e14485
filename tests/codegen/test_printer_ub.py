"""The printer's undefined-behaviour rules (aotc/codegen/c.py) pick the right expressions:
arithmetic on tensor data wraps, index arithmetic on loop counters and clamped run-time
indices stays plain C, and float-to-integer casts saturate unless a clamp proves the range.
The values these spellings compute are checked against onnxruntime in
tests/ops/test_undefined.py; this pins where they are (not) used."""

from __future__ import annotations

from aotc import dtypes
from aotc.codegen.c import CPrinter
from aotc.loops.loop_ir import (
    INDEX,
    Assign,
    Buffer,
    Cast,
    Const,
    Decl,
    Kernel,
    Load,
    Loop,
    Store,
    Var,
    bmax,
    bmin,
    call,
)

I32, I64, F32 = dtypes.int32, dtypes.int64, dtypes.float32


def _print(body: tuple, *bufs: Buffer) -> str:
    return CPrinter().kernel(Kernel("k", tuple(bufs), body))


def test_accumulator_wraps_index_arithmetic_stays_plain():
    x = Buffer("x", I32, 12, "in")
    y = Buffer("y", I32, 3, "out")
    i, j = Var("i"), Var("j")
    body = (Loop("i", Const(0), Const(3), (
        Decl("acc", I32, Const(0, I32)),
        Loop("j", Const(0), Const(4), (
            Assign("acc", Var("acc", I32) + Load(x, i * 4 + j)),)),
        Store(y, i, Var("acc", I32))),),)
    c = _print(body, x, y)
    assert "acc = (int32_t)((uint32_t)acc + (uint32_t)x[(i * 4) + j]);" in c, c
    assert "x[(i * 4) + j]" in c


def test_clamped_runtime_index_is_index_arithmetic():
    x = Buffer("x", F32, 8, "in")
    ind = Buffer("ind", I64, 2, "in")
    y = Buffer("y", F32, 2, "out")
    pos = Cast(bmin(bmax(Load(ind, Var("i")), Const(0, I64)), Const(7, I64)), INDEX)
    body = (Loop("i", Const(0), Const(2), (
        Decl("p", INDEX, pos),
        Store(y, Var("i"), Load(x, Var("p") * 1 + Var("i") * 0))),),)
    c = _print(body, x, ind, y)
    assert "uint32_t" not in c, c


def test_division_guarded_unless_the_divisor_is_a_safe_constant():
    a = Buffer("a", I32, 4, "in")
    y = Buffer("y", I32, 4, "out")
    i = Var("i")
    body = (Loop("i", Const(0), Const(4), (
        Store(y, i, Load(a, i) / Load(a, 3 - i) + Load(a, i) / Const(3, I32)),)),)
    c = _print(body, a, y)
    assert "aotc_div_i32(a[i], a[3 - i])" in c, c
    assert "(a[i] / 3)" in c, c


def test_float_to_int_cast_saturates_unless_clamped_and_nan_free():
    """A clamp keeps a NaN (aotc_minfk/aotc_maxfk pass it through), so a clamped float read
    from memory still converts through aotc_sat_* (NaN -> 0; a C cast of NaN is undefined,
    UBSan's float-cast-overflow); a clamped value that cannot be NaN (an integer converted to
    float, scaled by a constant) is a plain cast."""
    x = Buffer("x", F32, 4, "in")
    a = Buffer("a", I32, 4, "in")
    y = Buffer("y", dtypes.int8, 4, "out")
    z = Buffer("z", dtypes.int8, 4, "out")
    w = Buffer("w", dtypes.int8, 4, "out")
    i = Var("i")
    clamped = bmin(bmax(call("rint", Load(x, i)), Const(-128.0, F32)), Const(127.0, F32))
    scaled = call("rint", Cast(Load(a, i), F32) * Const(0.25, F32) + Const(3.0, F32))
    nan_free = bmin(bmax(scaled, Const(-128.0, F32)), Const(127.0, F32))
    body = (Loop("i", Const(0), Const(4), (
        Store(y, i, Cast(Load(x, i), dtypes.int8)),
        Store(z, i, Cast(clamped, dtypes.int8)),
        Store(w, i, Cast(nan_free, dtypes.int8)))),)
    c = _print(body, x, a, y, z, w)
    assert "y[i] = aotc_sat_i8(x[i]);" in c, c
    assert "z[i] = aotc_sat_i8(aotc_minfk(" in c, c
    assert "w[i] = (int8_t)aotc_minfk(" in c, c
