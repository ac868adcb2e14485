"""The .tflite fuzzer in CI: every seed compiles and matches TFLM (LiteRT for TILE, which TFLM
lacks) unmutated, cases are deterministic and cover every mutation class, the oracle's rules
hold, and a seeded run of CI_CASES mutated models has no findings.

The full run is ``python scripts/fuzz.py --format tflite --cases 5000 --seed 1``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from fuzz_driver import execute, run, write_case
from fuzz_oracle import FINDINGS
from tflite_mutate import MUTATIONS, TfliteCase, make_case
from tflite_oracle import compare_tflite, in_child, listing
from tflite_seeds import SEEDS, seed_bytes

CI_SEED = 20261127
CI_CASES = 60
CI_TIMEOUT = 30.0


@pytest.fixture(scope="module")
def worker_slot():
    slot: list = [None]
    yield slot
    if slot[0] is not None:
        slot[0].kill()


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_matches_its_reference(name, tmp_path, worker_slot):
    write_case(TfliteCase.from_bytes(seed_bytes(name)), tmp_path / "case")
    outcome, message, _, _, worker_slot[0] = execute(worker_slot[0], tmp_path / "case", 0, 60.0,
                                                     tmp_path / "worker.log")
    want = "ok-litert" if name == "op_tile_float" else "ok-tflm"
    assert outcome == want, f"{name}: {outcome}: {message}"


def test_cases_are_deterministic_and_cover_every_class():
    tags = set()
    for i in range(300):
        a, b = make_case(5, i), make_case(5, i)
        assert a[:3] == b[:3] and a[3].serialise() == b[3].serialise(), i
        tags.add(a[0])
    assert tags == set(MUTATIONS) | {"multi"}


def test_oracle_rules():
    f = np.array([1.0, np.nan, 3.4028235e38, -3.4028235e38], np.float32)
    assert compare_tflite([f], [f.copy()], 0, "TFLM") == ""
    inf = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
    assert compare_tflite([inf], [f], 0, "TFLM") == ""  # FLT_MAX_RULE
    assert compare_tflite([-inf], [f], 0, "TFLM") != ""
    q = np.array([5, -7], np.int8)
    assert compare_tflite([q + np.int8(1)], [q], 0, "TFLM") != ""  # TFLM: bit-exact
    assert compare_tflite([q + np.int8(1)], [q], 1, "LiteRT") == ""  # LiteRT: 1 LSB
    assert compare_tflite([q], [q, q], 0, "TFLM") != ""
    assert compare_tflite([q.astype(np.int16)], [q], 1, "LiteRT") != ""
    header = "aotc: error: m.tflite: 2 operator(s) cannot be converted (see `aotc ops`):"
    assert listing([header, "aotc: error:   operator 0 A: x", "aotc: error:   operator 3 B: y"])
    assert not listing([header, "aotc: error:   operator 0 A: x"])
    assert not listing(["aotc: error: something", "Traceback (most recent call last):"])


def test_references_run_in_a_child():
    import os
    import signal

    assert in_child(lambda: 41 + 1) == (True, 42)
    ok, why = in_child(lambda: os.kill(os.getpid(), signal.SIGSEGV))
    assert not ok and "SIGSEGV" in why
    ok, why = in_child(lambda: 1 / 0)
    assert not ok and "ZeroDivisionError" in why
    ok, why = in_child(lambda: __import__("time").sleep(5), timeout=0.5)
    assert not ok and "timed out" in why


def test_seeded_tflite_fuzz_run_has_no_findings():
    """CI_CASES mutated .tflite models: fails listing every finding with its reproducer."""
    with tempfile.TemporaryDirectory(prefix="aotc_fuzz_tflite_ci_") as tmp:
        results = run(CI_SEED, CI_CASES, 1, Path(tmp), CI_TIMEOUT, progress=False, fmt="tflite")
        table = (Path(tmp) / "table.txt").read_text()
    findings = [r for r in results if r.outcome in FINDINGS]
    listing_ = "\n".join(f"case {r.index} [{r.tag}] {r.outcome}: {r.message[:160]} | "
                         f"{r.seed_model}; {'; '.join(r.mutations)[:200]}" for r in findings)
    assert not findings, (f"{len(findings)} findings in {len(results)} cases (reproduce: "
                          f"python scripts/fuzz.py --format tflite --seed {CI_SEED} --cases "
                          f"{CI_CASES}):\n{listing_}\n{table}")
    assert sum(r.outcome == "ok-tflm" for r in results) >= CI_CASES // 10, table
