"""loop_ir.Outline: a block the printer emits as a static noinline function of its own and a
call (conv_dsp.py's SMLAD tiles), with the outer variables it reads passed by value and the
buffers it uses by the same pointers. The outlined kernel computes what the inlined one does;
the passes (simplify, unrolling, scalarisation) keep the block outlined."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from aotc import dtypes
from aotc.codegen.c import CPrinter
from aotc.loops.builder import BufRef, KernelBuilder
from aotc.loops.loop_ir import Buffer, Outline, Store
from aotc.loops.transforms import scalarize_locals, unroll_hinted

sys.path.insert(0, str(Path(__file__).parents[1] / "lower"))
from kernel_harness import build  # noqa: E402

I32 = dtypes.int32


def _kernel(outline: bool, opaque: bool = False):
    x = BufRef(Buffer("x", I32, 24, "in"), (4, 6))
    y = BufRef(Buffer("y", I32, 4, "out"), (4,))
    kb = KernelBuilder("k", "", [x], [y])
    with kb.loop(4, "i") as i:
        base = kb.local(i * 6, "base")
        with (kb.outline(opaque) if outline else kb.block()):
            acc = kb.local_array(2, "acc", I32)
            with kb.loop(2, "j", unroll=True) as j:
                kb.store(acc, [j], x[[i, j]])
            with kb.loop(2, "t") as t:  # acc[j] += x[i, 2 + 2t + j]
                with kb.loop(2, "j", unroll=True) as j:
                    kb.store(acc, [j], acc[[j]] + x.flat(base + 2 + 2 * t + j))
            kb.store(y, [i], acc[[0]] * 3 + acc[[1]])
    return scalarize_locals(unroll_hinted(kb.build(), 8))


def test_outline_survives_the_passes_and_prints_as_a_call():
    k = _kernel(True)
    assert any(isinstance(s, Outline) for s in k.body[0].body)
    c = CPrinter().kernel(k)
    helper, main = c.index("static AOTC_NOINLINE void k_part0("), c.index("void k(")
    assert helper < main, c
    assert "static AOTC_NOINLINE void k_part0(const int32_t *x, int32_t *y, int32_t base, " \
           "int32_t i)" in c, c
    assert "k_part0(x, y, base, i);" in c, c


def test_an_opaque_outline_is_not_cloned_and_survives_the_passes():
    """opaque: AOTC_NOCLONE (gcc's noclone), so IPA-CP cannot specialise it for a constant
    array its only caller passes (conv_dsp.py's tiles)."""
    c = CPrinter().kernel(_kernel(True, opaque=True))
    assert "static AOTC_NOINLINE AOTC_NOCLONE void k_part0(const int32_t *x" in c, c
    assert "AOTC_NOCLONE" not in CPrinter().kernel(_kernel(True)), "only where asked"


def test_outlined_kernel_computes_the_same(tmp_path):
    lib = build({"inl": _kernel(False), "outl": _kernel(True)}, tmp_path)
    x = np.arange(24, dtype=np.int32) * 7 - 50
    want = np.zeros(4, np.int32)
    lib.run("inl", {"x": x, "y": want})
    got = np.zeros(4, np.int32)
    lib.run("outl", {"x": x, "y": got})
    np.testing.assert_array_equal(got, want)
    assert want.tolist() == [3 * int(r[0::2].sum()) + int(r[1::2].sum())
                             for r in x.reshape(4, 6)]


def test_outline_must_not_assign_outer_variables():
    x = BufRef(Buffer("x", I32, 4, "in"), (4,))
    y = BufRef(Buffer("y", I32, 1, "out"), (1,))
    kb = KernelBuilder("k", "", [x], [y])
    acc = kb.local(x[[0]], "acc", I32)
    with kb.outline():
        kb.assign(acc, acc + x[[1]])
    kb.emit(Store(y.buf, x[[0]].index, acc))
    with pytest.raises(AssertionError, match="assigns outer"):
        CPrinter().kernel(kb.build())
