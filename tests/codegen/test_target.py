"""--target steers lowering (rolled SIMD-friendly tiles for 'host', unrolled register tiles for
MCUs) without changing results: both builds give bit-identical outputs."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import aotc

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import make_example  # noqa: E402


def test_host_and_mcu_forms_agree_bit_for_bit(tmp_path):
    model = make_example.build()
    generic = aotc.compile(model, tmp_path / "generic", name="kws")
    host = aotc.compile(model, tmp_path / "host", name="kws", target="host")
    c_generic = (tmp_path / "generic" / "kws.c").read_text()
    c_host = (tmp_path / "host" / "kws.c").read_text()
    assert "for (int32_t j = 0; j < 8; ++j)" in c_host
    # MCU form: the tile is unrolled into scalar accumulators (registers at -Os).
    assert "for (int32_t j = 0; j < 8; ++j)" not in c_generic and "acc_7" in c_generic
    x = np.random.default_rng(0).standard_normal((1, 1, 49, 10)).astype(np.float32)
    a = generic.load().run({"mfcc": x})["probs"]
    b = host.load().run({"mfcc": x})["probs"]
    np.testing.assert_array_equal(a, b)


def test_unknown_target_is_a_user_error(tmp_path):
    with pytest.raises(aotc.AotcError, match="unknown target"):
        aotc.compile(make_example.build(), tmp_path, name="kws", target="pdp11")
