"""--tuning-log through the CLI with a hand-written log: the record for the compilation's target
applies (bundle.json, inspect --json, the report's schedule column), records of another board,
another aotc release or marked invalid do not, and each kind of skip is one note on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aotc.cli import main
from aotc.tune.records import make_record


def _workloads(bundle: Path) -> dict:
    return json.loads((bundle / "bundle.json").read_text())["workloads"]


@pytest.fixture
def conv(tiny_float: Path, tmp_path: Path) -> dict:
    """The tiny model's first conv on the host target: its workload key and default schedule."""
    assert main(["compile", str(tiny_float), "--target", "host", "-o", str(tmp_path / "d"),
                 "-q"]) == 0
    w = next(w for w in _workloads(tmp_path / "d").values() if "conv.tile" in w["schedule"])
    return {"key": w["key"], "default": w["schedule"]}


def _log(path: Path, conv: dict, *rows: tuple[str, dict, int, bool, str | None]) -> Path:
    with path.open("w") as f:
        for board, sched, cost, valid, version in rows:
            r = make_record(board=board, workload=conv["key"], schedule=sched,
                            default=sched == conv["default"], cost=cost, valid=valid,
                            error=None if valid else "differs", kernels=["k0_conv"],
                            model="tiny_float.onnx", trial=1, requant="tflite")
            f.write(json.dumps({**r, "aotc": version or r["aotc"]}) + "\n")
    return path


def test_the_log_applies_to_its_board_only(tiny_float: Path, tmp_path: Path, conv: dict,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    d = conv["default"]
    tile2 = {**d, "conv.tile": 2}
    best = 8 if d["conv.tile"] == 4 else 4  # any tile but the default
    tuned = {**d, "conv.tile": best}
    unroll = {**d, "conv.unroll": not d["conv.unroll"]}
    log = _log(tmp_path / "t.jsonl", conv,
               ("host", d, 1000, True, None),
               ("host", tile2, 10, False, None),      # cheapest, but invalid
               ("host", tuned, 900, True, None),      # the best valid: applied
               ("cortex-m4f", unroll, 1, True, None),  # another board
               ("host", unroll, 1, True, "0.0.1"))     # another release
    out = tmp_path / "b"
    assert main(["compile", str(tiny_float), "--target", "host", "--tuning-log", str(log),
                 "-o", str(out), "-q"]) == 0
    err = capsys.readouterr().err
    assert "1 workload schedule(s) applied" in err
    assert "1 schedule(s) recorded invalid, never applied" in err
    assert "ignored 1 record(s) measured on cortex-m4f" in err
    assert "ignored 1 record(s) written by aotc 0.0.1" in err
    schedules = {w["key"]: w["schedule"] for w in _workloads(out).values()}
    assert schedules[conv["key"]] == tuned

    assert main(["inspect", str(tiny_float), "--target", "host", "--tuning-log", str(log),
                 "--json", "-q"]) == 0
    rows = json.loads(capsys.readouterr().out)["schedule"]
    assert [r["tuned"] for r in rows if r["workload"] == conv["key"]] == [{"conv.tile": best}]

    html = tmp_path / "r.html"
    assert main(["report", str(tiny_float), "--target", "host", "--tuning-log", str(log),
                 "-o", str(html), "-q"]) == 0
    text = html.read_text()
    assert "schedule (tuned knobs)" in text and f"conv.tile={best}" in text

    # another target: nothing applies, and the note says why
    other = tmp_path / "m0"
    assert main(["compile", str(tiny_float), "--target", "cortex-m0plus", "--tuning-log",
                 str(log), "-o", str(other), "-q"]) == 0
    err = capsys.readouterr().err
    assert "0 workload schedule(s) applied" in err and "measured on host" in err
    assert main(["compile", str(tiny_float), "--target", "cortex-m0plus", "-o",
                 str(tmp_path / "m0d"), "-q"]) == 0
    assert _workloads(other) == _workloads(tmp_path / "m0d")
