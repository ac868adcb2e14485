"""Choosing a log's schedules: the best valid record per workload for the compilation's target;
other boards, other releases and invalid schedules are never applied, and the notes say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aotc import AotcError, __version__
from aotc.tune import records
from aotc.tune.records import make_record, select

W = "QLinearConv-0123456789ab"
DEFAULT = {"conv.path": "simd", "conv.pixels": 2, "conv.simd_tile": 2, "unroll_max": 8}


def rec(schedule: dict, cost: float | None, *, board: str = "cortex-m4f", valid: bool = True,
        workload: str = W) -> dict:
    return make_record(board=board, workload=workload, schedule=schedule,
                       default=schedule == DEFAULT, cost=cost, valid=valid,
                       error=None if valid else "differs", kernels=["k0"], model="m.onnx",
                       trial=0, requant="tflite")


def test_the_cheapest_valid_schedule_applies() -> None:
    a = {**DEFAULT, "conv.pixels": 4}
    b = {**DEFAULT, "conv.simd_tile": 4}
    sel = select([rec(DEFAULT, 100), rec(a, 90), rec(b, 95)], "cortex-m4f")
    assert sel.schedules == {W: a}
    assert "1 workload schedule(s) applied" in sel.notes[0]


def test_an_invalid_schedule_is_never_applied_even_when_cheapest() -> None:
    bad = {**DEFAULT, "conv.pixels": 1}
    ok = {**DEFAULT, "conv.pixels": 4}
    # a schedule measured valid once and invalid once is not trusted either
    log = [rec(DEFAULT, 100), rec(bad, 10, valid=False), rec(bad, 10), rec(ok, 99)]
    sel = select(log, "cortex-m4f")
    assert sel.schedules == {W: ok}
    assert "1 schedule(s) recorded invalid, never applied" in sel.notes[0]
    assert select([rec(DEFAULT, 100), rec(bad, None, valid=False)], "cortex-m4f").schedules == {}


def test_the_default_wins_ties_and_is_not_applied() -> None:
    same = {**DEFAULT, "unroll_max": 16}
    assert select([rec(same, 100), rec(DEFAULT, 100)], "cortex-m4f").schedules == {}


def test_other_boards_and_versions_are_ignored_with_a_note() -> None:
    cheap = {**DEFAULT, "conv.pixels": 4}
    old = {**rec(cheap, 1), "aotc": "0.0.9"}
    other = rec(cheap, 1, board="cortex-m55")
    sel = select([rec(DEFAULT, 100), old, other], "cortex-m4f")
    assert sel.schedules == {}
    assert any("ignored 1 record(s) measured on cortex-m55" in n for n in sel.notes)
    assert any("ignored 1 record(s) written by aotc 0.0.9" in n for n in sel.notes)
    # with no target, nothing applies and the note names the log's boards
    none = select([rec(cheap, 1), rec(DEFAULT, 100)], None)
    assert none.schedules == {} and "records are for cortex-m4f" in none.notes[0]


def test_host_costs_are_the_median_of_a_schedules_records() -> None:
    a = {**DEFAULT, "conv.pixels": 4}
    log = [rec(DEFAULT, 100, board="host"), rec(DEFAULT, 100, board="host")]
    log += [rec(a, c, board="host") for c in (10, 150, 160)]  # one lucky sample
    assert select(log, "host").schedules == {}
    assert __version__  # the records carry it


def test_a_bad_log_is_one_line_error(tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    log.write_text(json.dumps(rec(DEFAULT, 1)) + "\n{not json\n")
    with pytest.raises(AotcError, match=r"t.jsonl, line 2: not JSON"):
        records.read(log)
    log.write_text('{"cost": 3}\n')
    with pytest.raises(AotcError, match="line 1: not a tuning record"):
        records.read(log)
    with pytest.raises(AotcError, match="cannot read the tuning log"):
        records.read(tmp_path / "missing.jsonl")


def test_an_unknown_knob_is_ignored_with_a_note() -> None:
    r = rec({"conv.warp": 3}, 1)
    sel = select([r, rec(DEFAULT, 100)], "cortex-m4f")
    assert sel.schedules == {} and any("unknown schedule" in n for n in sel.notes)
