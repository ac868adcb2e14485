"""The TFLite conformance suite (tflite_conformance.py): every case through TFLM and through
aotc's generated C on the host, each with the outcome aotc/data/tflite_conformance_expected.txt
gives it (pass unless listed): a new failure, a new refusal or an unexpected pass fails the test.
Cases run in batches of 8 merged into one model (one aotc compile, one host build: 3-4x faster
than one bundle per case); a batch aotc refuses is rerun case by case.
Integer outputs bit-exact with TFLM; float32 within tflite_conformance.TOL (rtol = atol, 1e-5
unless listed). The host builds skip the clang syntax check (AOTC_CLANG_CHECK=0): gcc still
builds every bundle with -std=c99 -Wall -Wextra -Werror -pedantic, and the op tests clang-check
the same kernels.

A rotating sample of the passing cases (8 per board) also runs on cortex-m4f and cortex-m0plus in
QEMU against TFLM: the seed is AOTC_CONF_SEED, else today's date (UTC, YYYYMMDD); it is printed,
so a failure reproduces with AOTC_CONF_SEED=<seed>.

docs/tflite-conformance.md is scripts/tflite_conformance.py's output (checked here).
"""

from __future__ import annotations

import datetime
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import tflite_conformance as tc

CASES = tc.cases()
BY_ID = {c.id: c for c in CASES}
EXPECTED = tc.expected()
SAMPLE = 8


@pytest.fixture
def no_clang(monkeypatch):
    monkeypatch.setenv("AOTC_CLANG_CHECK", "0")


BATCHES = tc.batches(CASES)


@pytest.mark.parametrize("first", list(BATCHES))
def test_conformance(first, tmp_path, no_clang):
    """A batch of cases (tc.batches: up to 8, compiled as one model), each with its expected
    outcome; the message lists every case that differs."""
    got = tc.run_batch(BATCHES[first], tmp_path)
    wrong = []
    for cid, res in got.items():
        want, reason = EXPECTED.get(cid, ("pass", ""))
        if res.outcome != want or (want == "refused" and res.detail != reason):
            wrong.append(f"{cid}: {res.outcome} {res.detail} (expected {want} {reason})")
    assert not wrong, "\n".join(wrong)


def test_expectations_name_cases():
    unknown = sorted(set(EXPECTED) - set(BY_ID))
    assert not unknown, f"{tc.EXPECTED.name} lists cases that do not exist: {unknown[:5]}"
    assert {o for o, _ in EXPECTED.values()} <= set(tc.OUTCOMES) - {"pass"}


def test_every_builtin_has_cases():
    from aotc.frontend.tflite.builtins import CONVERTERS

    covered = {c.builtin for c in CASES}
    # Not single-op cases: the LSTM, SVDF and the resource variables (test_tflite_lstm.py,
    # test_tflite_qlstm.py, test_tflite_state.py), IF and WHILE (further subgraphs:
    # test_tflite_control.py), TFLM's Signal operators (test_tflite_signal.py, each one
    # alone and the whole front end against TFLM) and the SSD post-processing custom operator
    # (flexbuffer options, anchors: test_tflite_detection.py).
    signal = {k for k in CONVERTERS if k.startswith("CUSTOM:Signal")}
    assert len(signal) == 14
    assert set(CONVERTERS) - covered == {"UNIDIRECTIONAL_SEQUENCE_LSTM", "VAR_HANDLE",
                                         "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE", "SVDF",
                                         "IF", "WHILE", "CUSTOM:TFLite_Detection_PostProcess"} \
        | signal


def test_doc_is_current():
    root = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, str(root / "scripts" / "tflite_conformance.py"),
                          "--check"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def _seed() -> int:
    env = os.environ.get("AOTC_CONF_SEED")
    return int(env) if env else int(datetime.datetime.now(datetime.UTC)
                                    .strftime("%Y%m%d"))


@pytest.mark.parametrize("board", ["cortex-m4f", "cortex-m0plus"])
def test_qemu_sample(board, tmp_path, no_clang, capsys):
    """SAMPLE passing cases, chosen by the seed, compiled and run on the board in QEMU: the
    same comparison with TFLM as on the host."""
    from aotc.targets.runner import BoardRunner, DoesNotFit

    seed = _seed()
    passing = sorted(c.id for c in CASES if c.id not in EXPECTED)
    picked = random.Random(f"{seed}-{board}").sample(passing, SAMPLE)
    with capsys.disabled():
        print(f"\nAOTC_CONF_SEED={seed} {board}: {' '.join(picked)}")
    ran = 0
    for k, cid in enumerate(picked):
        case = BY_ID[cid]
        model, xs = case.build()
        want = tc.reference(model, xs)
        assert not isinstance(want, str), (cid, want)
        bundle = tc.compile_case(model, tmp_path / str(k))
        try:
            runner = BoardRunner(bundle.directory, board, build_dir=tmp_path / f"fw{k}")
        except DoesNotFit:
            continue
        got = tc.run_bundle(bundle, xs, runner)
        diff = tc.compare(case, got, want)
        assert not diff, f"{cid} on {board} (AOTC_CONF_SEED={seed}): {diff}"
        ran += 1
    assert ran >= SAMPLE // 2, f"only {ran} of {SAMPLE} sampled cases fit {board}"
