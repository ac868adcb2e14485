"""The board hook of tests/opcheck.py: check() runs the bundle on AOTC_TEST_BOARDS, compares
with the host build (exact, or rtol 1e-5/atol 1e-6 with inexact libm calls), and skips and
counts a board the bundle does not fit."""

from __future__ import annotations

import numpy as np
import opcheck
import pytest
from opcheck import check_node, rand

from aotc.targets.runner import BoardRunner


def _runs(board: str, outcome: str) -> int:
    return opcheck.BOARD_RUNS[board, outcome]


def test_hook_runs_on_the_listed_boards(monkeypatch) -> None:
    monkeypatch.setenv("AOTC_TEST_BOARDS", "cortex-m4f, rv32imc")
    before = {b: _runs(b, "ran") for b in ("cortex-m4f", "rv32imc", "cortex-m0plus")}
    check_node("Add", {"a": rand(3, 4), "b": rand(3, 4, seed=1)})
    assert _runs("cortex-m4f", "ran") == before["cortex-m4f"] + 1
    assert _runs("rv32imc", "ran") == before["rv32imc"] + 1
    assert _runs("cortex-m0plus", "ran") == before["cortex-m0plus"]


def test_default_boards_and_disabling(monkeypatch) -> None:
    monkeypatch.delenv("AOTC_TEST_BOARDS", raising=False)
    assert opcheck.hook_boards() == ["cortex-m4f", "cortex-m0plus"]
    monkeypatch.setenv("AOTC_TEST_BOARDS", "")
    assert opcheck.hook_boards() == []
    before = sum(opcheck.BOARD_RUNS.values())
    check_node("Relu", {"x": rand(2, 3)})
    assert sum(opcheck.BOARD_RUNS.values()) == before


def _perturb_by_one_ulp(monkeypatch) -> None:
    real_run = BoardRunner.run

    def run(self, inputs):
        out = real_run(self, inputs)
        return {k: np.nextafter(v, np.float32(np.inf)) if v.dtype.kind == "f" else v
                for k, v in out.items()}

    monkeypatch.setattr(BoardRunner, "run", run)


def test_exact_float_mismatch_fails(monkeypatch) -> None:
    """Add uses no libm: a board result one ulp off the host's is a failure."""
    monkeypatch.setenv("AOTC_TEST_BOARDS", "cortex-m4f")
    _perturb_by_one_ulp(monkeypatch)
    with pytest.raises(AssertionError, match="on cortex-m4f vs host"):
        check_node("Add", {"a": rand(3, 4), "b": rand(3, 4, seed=1)})


def test_libm_float_gets_tolerance(monkeypatch) -> None:
    """Tanh calls tanhf, which newlib and glibc may round differently: 1 ulp is accepted, a
    real error is not."""
    monkeypatch.setenv("AOTC_TEST_BOARDS", "cortex-m4f")
    _perturb_by_one_ulp(monkeypatch)
    check_node("Tanh", {"x": rand(3, 4, lo=0.5, hi=2)})
    monkeypatch.setattr(BoardRunner, "run", lambda self, inputs: {"out0": np.zeros((3, 4),
                                                                                  np.float32)})
    with pytest.raises(AssertionError, match="on cortex-m4f vs host"):
        check_node("Tanh", {"x": rand(3, 4, lo=0.5, hi=2)})


def test_inexact_libm_pattern() -> None:
    for call in ("expf(x)", "tanhf (x)", "erff(v)", "logf(a)", "powf(a, b)", "sinf(t)"):
        assert opcheck.INEXACT_LIBM.search(call), call
    for call in ("sqrtf(x)", "fabsf(x)", "floorf(x)", "fmodf(a, b)", "fmaxf(a, b)", "k0_exp_("):
        assert not opcheck.INEXACT_LIBM.search(call), call


def test_does_not_fit_is_skipped_and_counted(monkeypatch) -> None:
    """80 KB of input buffer cannot fit the micro:bit's 16 KB of RAM: that board is skipped for
    this test (counted), the others still run."""
    monkeypatch.setenv("AOTC_TEST_BOARDS", "cortex-m0plus,cortex-m4f")
    skipped, ran = _runs("cortex-m0plus", "does-not-fit"), _runs("cortex-m4f", "ran")
    check_node("Relu", {"x": rand(1, 20000)})
    assert _runs("cortex-m0plus", "does-not-fit") == skipped + 1
    assert _runs("cortex-m4f", "ran") == ran + 1


def test_bit_exact_compare() -> None:
    """-0.0 is not +0.0; a NaN is a NaN whatever its sign bit (x86 and ARM default NaNs)."""
    want = np.array([0.0, 1.5, np.nan], np.float32)
    opcheck._assert_bit_exact(np.array([0.0, 1.5, -np.nan], np.float32), want, "ok")
    with pytest.raises(AssertionError, match="differ in their bits"):
        opcheck._assert_bit_exact(np.array([-0.0, 1.5, np.nan], np.float32), want, "zero")
    with pytest.raises(AssertionError, match="NaN positions"):
        opcheck._assert_bit_exact(np.array([0.0, np.nan, np.nan], np.float32), want, "nan")
