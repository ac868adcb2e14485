"""The fixed-point requantisation primitives: the C inline functions of the runtime header against
their Python twins in aotc.ops.quant.arith (which build tables at compile time), and both against
values that follow from TFLite's published definitions."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import cffi
import numpy as np
import pytest

from aotc.ops.quant import arith as qmath
from aotc.paths import runtime_dir
from aotc.targets.runner import BoardRunner

FUNCS = """
int32_t t_srdhm(int32_t a, int32_t b);
int32_t t_rdbpot(int32_t x, int32_t e);
int32_t t_mbqm(int32_t x, int32_t m, int32_t s);
int32_t t_sat_shl(int32_t x, int32_t e);
int32_t t_recip(int32_t a);
int32_t t_softmax_scale(int32_t s, int32_t which);
int32_t t_dhm(int32_t a, int32_t b);
int32_t t_requant(int32_t x, int32_t m, int32_t l, int32_t r);
int32_t t_requant_r(int32_t x, int32_t m, int64_t rnd, int32_t rsh);
int32_t t_requant_h(int32_t x, int32_t m, int32_t c, int32_t r);
int32_t t_requant_hd(int32_t x, int32_t m, int32_t c, int32_t r);
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("fp")
    src = d / "fp.c"
    src.write_text('#include "aotc_runtime.h"\n' + "\n".join(
        f"{line[:-1]} {{ return aotc_q_{name}({args}); }}"
        for line, name, args in [
            (FUNCS.splitlines()[1], "srdhm", "a, b"), (FUNCS.splitlines()[2], "rdbpot", "x, e"),
            (FUNCS.splitlines()[3], "mbqm", "x, m, s"),
            (FUNCS.splitlines()[4], "sat_shl", "x, e"),
            (FUNCS.splitlines()[5], "one_over_one_plus_x", "a"),
            (FUNCS.splitlines()[6], "softmax_scale", "s, which"),
            (FUNCS.splitlines()[7], "dhm", "a, b"),
            (FUNCS.splitlines()[8], "requant", "x, m, l, r"),
            (FUNCS.splitlines()[9], "requant_r", "x, m, rnd, rsh"),
            (FUNCS.splitlines()[10], "requant_h", "x, m, c, r"),
            (FUNCS.splitlines()[11], "requant_hd", "x, m, c, r")]) + "\n")
    so = d / "fp.so"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O2",
                    "-shared", "-fPIC", "-I", str(runtime_dir()), str(src), "-o", str(so)],
                   check=True)
    ffi = cffi.FFI()
    ffi.cdef(FUNCS)
    return ffi.dlopen(str(so))


EDGE = [0, 1, -1, 2, -2, 3, 1 << 30, -(1 << 30), qmath.INT32_MAX, qmath.INT32_MIN,
        qmath.INT32_MAX - 1, qmath.INT32_MIN + 1, 12345, -12345]
RNG = np.random.default_rng(0)
RAND = [int(v) for v in RNG.integers(qmath.INT32_MIN, qmath.INT32_MAX, 300)]


def test_quantize_multiplier_follows_tflite():
    # real = q * 2^shift with q in [0.5, 1): significand round(q * 2^31).
    assert qmath.quantize_multiplier(0.5) == (1 << 30, 0)
    assert qmath.quantize_multiplier(1.0) == (1 << 30, 1)
    assert qmath.quantize_multiplier(0.0) == (0, 0)
    assert qmath.quantize_multiplier(2.0 ** -40) == (0, 0)  # shift < -31: flushed to zero
    # 0.75 = 0.75 * 2^0 -> round(0.75 * 2^31)
    assert qmath.quantize_multiplier(0.75) == (round(0.75 * 2 ** 31), 0)
    # A significand that rounds up to 2^31 is halved and the shift grows.
    assert qmath.quantize_multiplier(1 - 2.0 ** -40) == (1 << 30, 1)


def test_srdhm_and_rdbpot_definitions():
    assert qmath.srdhm(qmath.INT32_MIN, qmath.INT32_MIN) == qmath.INT32_MAX
    assert qmath.srdhm(1 << 30, 1 << 30) == 1 << 29  # 0.5 * 0.5 in Q0.31
    # Rounding to nearest, ties away from zero.
    assert [qmath.rdbpot(v, 1) for v in (3, 5, -3, -5, 2, -2)] == [2, 3, -2, -3, 1, -1]
    assert qmath.rdbpot(-7, 2) == -2 and qmath.rdbpot(6, 2) == 2 and qmath.rdbpot(-6, 2) == -2


def test_c_primitives_match_python(lib):
    for a in EDGE + RAND[:100]:
        for b in EDGE + RAND[100:120]:
            assert lib.t_srdhm(a, b) == qmath.srdhm(a, b), (a, b)
        for e in (0, 1, 5, 12, 31):
            assert lib.t_rdbpot(a, e) == qmath.rdbpot(a, e), (a, e)
        for e in (1, 2, 5):
            assert lib.t_sat_shl(a, e) == qmath.sat_shl(a, e), (a, e)
    for real in (0.0003, 0.0123, 0.37, 0.9999, 1.5, 7.25):
        m, s = qmath.quantize_multiplier(real)
        for x in [v >> 8 for v in RAND[:200]] + [0, 1, -1, 1000, -1000]:
            assert lib.t_mbqm(x, m, s) == qmath.mbqm(x, m, s), (x, real)
            # ... and the fixed-point product is the real product within one unit.
            assert abs(qmath.mbqm(x, m, s) - x * real) <= 1.0 + 1e-6 * abs(x * real)


def test_reciprocal_and_softmax_scale(lib):
    for a in [0, 1, 1 << 20, 1 << 30, qmath.INT32_MAX] + [abs(v) for v in RAND[:100]]:
        got = lib.t_recip(a)
        assert got == qmath.one_over_one_plus_x(a)
        # 1 / (1 + a) in Q0.31, to within a few units of the last place.
        assert abs(got / 2 ** 31 - 1 / (1 + a / 2 ** 31)) < 1e-8
    for total in (1 << 19, 3 << 19, 12345678, 255 << 19):
        bits = lib.t_softmax_scale(total, 1)
        scale = lib.t_softmax_scale(total, 0)
        # scale * 2^-31 * 2^-bits approximates 1 / (total * 2^-19) with 12 integer bits.
        assert abs(scale / 2 ** 31 / 2 ** bits - 2 ** 19 / total) < 1e-6 * 2 ** 19 / total + 1e-9


def test_exp_table_tracks_exp():
    # exp_on_negative_values in Q5.26 -> Q0.31: gemmlowp's polynomial is good to ~2e-7.
    for x in (0.0, -0.1, -0.25, -1.0, -3.3, -10.0, -31.0):
        raw = int(round(x * 2 ** 26))
        assert abs(qmath.exp_on_negative_values(raw) / 2 ** 31 - np.exp(raw / 2 ** 26)) < 5e-7


@pytest.mark.parametrize("kind", ["sigmoid", "tanh"])
@pytest.mark.parametrize("scale,zp", [(0.05, 3), (0.1, -128), (0.0078125, 0), (0.37, 17)])
def test_int8_activation_tables_track_the_function(kind, scale, zp):
    """TFLM's LOGISTIC/TANH fixed point, tabulated: within 1 LSB of the exact function."""
    x = (np.arange(-128, 128) - zp) * np.float64(np.float32(scale))
    if kind == "sigmoid":
        ideal = np.clip(np.rint(256 / (1 + np.exp(-x))) - 128, -128, 127)
    else:
        ideal = np.clip(np.rint(128 * np.tanh(x)), -128, 127)
    table = qmath.int8_activation_table(kind, scale, zp)
    assert np.abs(table.astype(int) - ideal).max() <= 1
    assert np.all(np.diff(table.astype(int)) >= 0)  # monotonic


# Requantisation edge values: accumulators at both ends of int32 and around 0 and powers of two,
# multipliers at both ends of quantize_multiplier's range ([2^30, 2^31) and 0), every shift it
# produces (-31 .. 30).
REQ_X = sorted({0, 1, -1, 2, -2, 127, -128, 1 << 15, -(1 << 15), (1 << 30) - 1, 1 << 30,
                -(1 << 30), -(1 << 30) - 1, qmath.INT32_MAX, qmath.INT32_MIN,
                qmath.INT32_MAX - 1, qmath.INT32_MIN + 1, 12345, -12345} |
               {s * ((1 << e) + d) for e in (3, 9, 17, 24) for d in (-1, 0, 1) for s in (1, -1)})
REQ_M = [0, 1 << 30, (1 << 30) + 1, 1518500250, qmath.INT32_MAX - 1, qmath.INT32_MAX]
REQ_SHIFTS = list(range(-31, 31))


def requant_cases() -> list[tuple[int, int, int]]:
    cases = [(x, m, s) for x in REQ_X for m in REQ_M for s in REQ_SHIFTS]
    rng = np.random.default_rng(7)
    for _ in range(3000):  # and random ones, from quantize_multiplier like the compiler's
        m, s = qmath.quantize_multiplier(float(2.0 ** rng.uniform(-32, 30)))
        cases.append((int(rng.integers(qmath.INT32_MIN, qmath.INT32_MAX, endpoint=True)), m, s))
    return cases


def test_dhm_equals_srdhm_outside_its_saturating_case(lib):
    """(a*b + 2^30) >> 31 is SRDHM's nudge-and-truncate except for INT32_MIN * INT32_MIN."""
    for a in EDGE + RAND[:150]:
        for b in EDGE + RAND[150:200]:
            if a == b == qmath.INT32_MIN:
                continue
            want = qmath.srdhm(a, b)
            assert (a * b + (1 << 30)) >> 31 == want, (a, b)
            assert lib.t_dhm(a, b) == want, (a, b)


def test_requant_equals_mbqm_on_edge_values(lib):
    """aotc_q_requant (the shift split at compile time, branch-free) is TFLite's
    MultiplyByQuantizedMultiplier (qmath.mbqm) bit for bit; so is aotc_q_mbqm."""
    for x, m, s in requant_cases():
        want = qmath.mbqm(x, m, s)
        assert lib.t_requant(x, m, max(s, 0), max(-s, 0)) == want, (x, m, s)
        assert lib.t_mbqm(x, m, s) == want, (x, m, s)
        if s < 0 or m == 0:  # the right-shift form (a zero multiplier takes any shift)
            r = -s if s < 0 else 1
            assert lib.t_requant_r(x, m, (1 << 30) + (1 << (30 + r)), r - 1) == want, (x, m, s)


def _doubled_cases() -> list[tuple[int, int, int, int]]:
    """(x, m, shift, zp) with |x| < 2^30, right shifts, |c| < 2^30: aotc_q_requant_h's
    domain (quant.Requant._doubled)."""
    out = []
    for x, m, s in requant_cases():
        for zp in (0, -128, 127, 255):
            if abs(x) < 1 << 30 and s < 0 and abs((1 << (-s - 1)) + (zp << -s)) < 1 << 30:
                out.append((x, m, s, zp))
    return out


def test_doubled_requant_equals_mbqm(lib):
    """aotc_q_requant_h (SMMLAR of the doubled accumulator, the zero point in the added
    constant) is TFLite's MultiplyByQuantizedMultiplier plus the zero point, where the
    accumulator is below 2^30 in magnitude (the host twin here; the board test runs SMMLAR)."""
    cases = _doubled_cases()
    assert len(cases) > 1000
    for x, m, s, zp in cases:
        want = qmath.mbqm(x, m, s) + zp
        assert lib.t_requant_h(x, m, (1 << (-s - 1)) + (zp << -s), -s) == want, (x, m, s, zp)


def test_predoubled_requant_equals_mbqm(lib):
    """aotc_q_requant_hd of 2x (the depthwise sums and the DSP conv tiles made doubled) is
    aotc_q_requant_h of x in its domain; a channel of multiplier 0 and constant 1 + 2K
    (Requant._h_params' constant output) gives K for any int32, doubled or wrapped."""
    for x, m, s, zp in _doubled_cases():
        want = qmath.mbqm(x, m, s) + zp
        assert lib.t_requant_hd(2 * x, m, (1 << (-s - 1)) + (zp << -s), -s) == want
    for x2 in EDGE + [int(v) for v in RNG.integers(-(1 << 31), 1 << 31, 500)]:
        for k in (-128, -1, 0, 5, 127):
            assert lib.t_requant_hd(x2, 0, 1 + 2 * k, 1) == k, (x2, k)


def _requant_bundle(d: Path, cases: list[tuple[int, int, int]]) -> None:
    """A hand-written bundle whose run function requantises a table of cases held in flash
    with aotc_q_requant, aotc_q_mbqm and (right shifts) aotc_q_requant_r (outputs y, y2, y3),
    for the board harness."""
    def table(ctype: str, name: str, vals: list[int]) -> str:
        body = ", ".join(f"{v}" if v != qmath.INT32_MIN else "INT32_MIN" for v in vals)
        return f"static const {ctype} {name}[{len(vals)}] = {{ {body} }};"

    n = len(cases)
    xs, ms, ss = ([c[k] for c in cases] for k in range(3))
    d.mkdir(parents=True)
    (d / "rq.h").write_text(
        '#include <stddef.h>\n#include <stdint.h>\n#include "aotc_runtime.h"\n'
        "#define RQ_ARENA_SIZE 4\n"
        "int rq_run(const int8_t *u, int32_t *y, int32_t *y2, int32_t *y3, int32_t *y4,\n"
        "           void *arena, size_t size);\n")
    (d / "rq.c").write_text("\n".join([
        '#include "rq.h"', table("int32_t", "xs", xs), table("int32_t", "ms", ms),
        table("int8_t", "ss", ss),
        "int rq_run(const int8_t *u, int32_t *y, int32_t *y2, int32_t *y3, int32_t *y4,",
        "           void *arena, size_t size)", "{",
        "    int32_t i;", "    (void)arena;", "    (void)size;",
        f"    for (i = 0; i < {n}; ++i) {{",
        "        int32_t s = ss[i] + u[0];",
        "        y[i] = aotc_q_requant(xs[i], ms[i], s > 0 ? s : 0, s > 0 ? 0 : -s);",
        "        y2[i] = aotc_q_mbqm(xs[i], ms[i], s);",
        "        if (s < 0) {",
        "            y3[i] = aotc_q_requant_r(xs[i], ms[i], ((int64_t)1 << 30) + "
        "((int64_t)1 << (30 - s)), -s - 1);",
        "        } else {", "            y3[i] = y2[i];", "        }",
        "        if (s < 0 && s >= -22 && xs[i] < (1 << 30) && xs[i] > -(1 << 30)) {",
        "            y4[i] = aotc_q_requant_h(xs[i], ms[i], (1 << (-s - 1)) - (128 << -s), -s)"
        " + 128;",
        "            if (aotc_q_requant_hd((int32_t)((uint32_t)xs[i] << 1), ms[i], "
        "(1 << (-s - 1)) - (128 << -s), -s) + 128 != y4[i]) {",
        "                y4[i] = INT32_MIN;  /* never TFLite's: the test fails */",
        "            }",
        "        } else {", "            y4[i] = y2[i];", "        }",
        "    }", "    return 0;", "}", ""]))
    meta = {"name": "rq", "arena_bytes": 4, "arena_align": 4,
            "inputs": [{"name": "u", "c_name": "u", "shape": [1], "dtype": "int8",
                        "ctype": "int8_t", "bytes": 1}],
            "outputs": [{"name": k, "c_name": k, "shape": [n], "dtype": "int32",
                         "ctype": "int32_t", "bytes": 4 * n} for k in ("y", "y2", "y3", "y4")],
            "kernels": []}
    (d / "bundle.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("board", ["cortex-m4f", "cortex-m0plus"])
def test_requant_on_boards_equals_mbqm(board, tmp_path):
    """The same edge values on the cores (SMLAL on Armv7E-M, a 64-bit multiply helper on
    Armv6-M; aotc_q_requant_h's SMMLAR on Armv7E-M, its C twin on Armv6-M): bit for bit
    TFLite's MultiplyByQuantizedMultiplier."""
    grid = [(x, m, s) for x in REQ_X for m in REQ_M
            for s in (-31, -30, -17, -8, -2, -1, 0, 1, 2, 15, 29, 30)]
    rng = np.random.default_rng(3)
    picks = rng.choice(len(requant_cases()), 400, replace=False)
    cases = grid + [requant_cases()[int(i)] for i in picks]
    chunk = 600  # the outputs fit the micro:bit's 16 KB of RAM
    for k in range(0, len(cases), chunk):
        part = cases[k:k + chunk]
        _requant_bundle(tmp_path / f"b{k}", part)
        out = BoardRunner(tmp_path / f"b{k}", board, build_dir=tmp_path / f"build{k}",
                          check_fit=False).run({"u": np.zeros(1, np.int8)})
        want = np.array([qmath.mbqm(*c) for c in part], np.int64)
        np.testing.assert_array_equal(out["y"].astype(np.int64), want)
        np.testing.assert_array_equal(out["y2"].astype(np.int64), want)
        np.testing.assert_array_equal(out["y3"].astype(np.int64), want)
        np.testing.assert_array_equal(out["y4"].astype(np.int64), want)
