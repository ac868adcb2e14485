"""loop_ir.vldm: a run of consecutive float loads declared in order prints as one AOTC_VLDM<n>
(model.c.j2: one VLDM on cores with a single-precision FPU, plain loads elsewhere); anything
else prints the plain loads. loop_ir.consecutive decides which loads form a run. The whole
kernels are checked against onnxruntime with and without the runs in tests/lower/test_knobs.py
(conv.vldm, gemm.vldm) on the host and in QEMU."""

from __future__ import annotations

from aotc import dtypes
from aotc.codegen.c import CPrinter
from aotc.loops.loop_ir import Buffer, Const, Decl, Load, Var, consecutive, vldm

F32 = dtypes.float32
X = Buffer("x", F32, 64, "in")
Y = Buffer("y", F32, 64, "in")


def _decls(loads, reg=0):
    return tuple(Decl(f"v{i}", F32, vldm(ld, reg, len(loads), i)) for i, ld in enumerate(loads))


def test_a_run_prints_as_one_multi_register_load():
    k = Var("k")
    body = _decls([Load(X, k * 8 + i) for i in range(4)], reg=4)
    lines = CPrinter().stmts(body, 0)
    assert lines[0] == "float v0, v1, v2, v3;"
    assert lines[1].startswith("AOTC_VLDM4(&x[")
    assert '"s4", "s5", "s6", "s7", v0, v1, v2, v3);' in lines[1]
    assert len(lines) == 2


def test_a_broken_run_prints_plain_loads():
    k = Var("k")
    body = _decls([Load(X, k * 8 + i) for i in range(4)])
    out_of_order = (body[1], body[0], body[2], body[3])
    lines = CPrinter().stmts(out_of_order, 0)
    assert not any("AOTC_VLDM" in line for line in lines)
    assert lines[0].startswith("float v1 = x[")
    assert len(lines) == 4


def test_consecutive_loads():
    k, n = Var("k"), Var("n")
    assert consecutive([Load(X, (k * 4 + 1) * 128 + n * 8 + i) for i in range(8)])
    assert not consecutive([Load(X, (k * 4 + i) * 128 + n * 8) for i in range(4)])  # strided
    assert not consecutive([Load(X, k + i) for i in (0, 2)])  # a gap
    assert not consecutive([Load(X, k), Load(Y, k + 1)])  # two buffers
    assert not consecutive([Load(X, k * n + i) for i in range(2)])  # not affine
    assert not consecutive([Load(X, k // 2 + i) for i in range(2)])  # not affine
    assert consecutive([Load(X, Const(3) + i) for i in range(3)])
