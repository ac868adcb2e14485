"""aotc tune end to end on a tiny model (two convs and a fully connected layer): on a QEMU board
(instruction counts, exact) and on the host (wall time); the log's best schedules applied by
--tuning-log; candidates whose outputs differ from the default schedule's recorded invalid and
never applied; the CLI's errors on one line."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import statistics
import struct
import subprocess
import sys
import termios
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import aotc
from aotc.cli import main
from aotc.errors import AotcError
from aotc.tune import executors, records
from aotc.tune.measure import run_job
from aotc.tune.tuner import cost_unit


def best_of(log: list[dict], board: str) -> dict[str, dict]:
    """Per workload, the valid schedule of least (median) cost when it beats the default's;
    written here from the records, apart from aotc.tune.records.select."""
    costs: dict[str, dict[str, list[float]]] = {}
    banned: set[tuple[str, str]] = set()
    default: dict[str, str] = {}
    for r in log:
        if r["board"] != board:
            continue
        s = json.dumps(r["schedule"], sort_keys=True)
        if r["default"]:
            default[r["workload"]] = s
        if not r["valid"]:
            banned.add((r["workload"], s))
        elif r["cost"] is not None:
            costs.setdefault(r["workload"], {}).setdefault(s, []).append(r["cost"])
    out = {}
    for w, by in costs.items():
        ok = {s: statistics.median(c) for s, c in by.items() if (w, s) not in banned}
        s = min(ok, key=lambda s: (ok[s], s != default.get(w)))
        if s != default.get(w):
            out[w] = json.loads(s)
    return out


def onnxruntime_outputs(model: Path, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def test_tune_on_a_board_applies_the_best_schedules(tiny_int8: Path, tmp_path: Path) -> None:
    log = tmp_path / "tune.jsonl"
    assert main(["tune", str(tiny_int8), "--board", "cortex-m4f", "--trials", "8",
                 "--jobs", "1", "--cost", "instructions", "-o", str(log), "-q"]) == 0
    recs = records.read(log)
    assert {r["board"] for r in recs} == {"cortex-m4f"}
    assert all(r["valid"] and r["unit"] == "instructions" and isinstance(r["cost"], int)
               and r["aotc"] == aotc.__version__ for r in recs)
    assert sum(r["default"] for r in recs) == len({r["workload"] for r in recs})
    best = best_of(recs, "cortex-m4f")
    assert best, "the search found no schedule cheaper than the default on this model"

    tuned = tmp_path / "tuned"
    assert main(["compile", str(tiny_int8), "--target", "cortex-m4f", "--tuning-log", str(log),
                 "-o", str(tuned), "-q"]) == 0
    workloads = json.loads((tuned / "bundle.json").read_text())["workloads"]
    defaults = {r["workload"]: r["schedule"] for r in recs if r["default"]}
    for kernel, w in workloads.items():
        assert w["schedule"] == best.get(w["key"], defaults[w["key"]]), kernel
    assert {w["key"] for w in workloads.values()} >= set(best)

    # The tuned firmware: the same outputs as the default one, near onnxruntime's (int8 tflite
    # requantisation vs onnxruntime's: within a few output LSB), and fewer instructions.
    x = np.random.default_rng(5).standard_normal((1, 2, 8, 8)).astype(np.float32)
    default = aotc.compile(tiny_int8, tmp_path / "default", target="cortex-m4f")
    runners = [default.load("cortex-m4f"), aotc.Bundle(tuned, "tiny_int8", None).load(
        "cortex-m4f")]
    y0, y1 = (r.run({"x": x})["y"] for r in runners)
    np.testing.assert_array_equal(y0, y1)
    np.testing.assert_allclose(y1, onnxruntime_outputs(tiny_int8, x), atol=0.15, rtol=0.05)
    n0, n1 = (r.count_instructions({"x": x})["inference"] for r in runners)
    assert n1 < n0


def test_tune_cost_defaults_to_estimated_cycles(tiny_int8: Path, tmp_path: Path) -> None:
    """On a board with a cycle model the cost is the estimate (docs/cycles.md): whole cycles,
    never fewer than a kernel's instructions divided by the widest issue (2 on the M7)."""
    log = tmp_path / "cycles.jsonl"
    assert main(["tune", str(tiny_int8), "--board", "cortex-m7", "--trials", "2",
                 "--jobs", "1", "-o", str(log), "-q"]) == 0
    recs = records.read(log)
    assert recs and all(r["unit"] == "cycles" and r["valid"] and isinstance(r["cost"], int)
                        and r["cost"] > 0 for r in recs)
    x = np.random.default_rng(5).standard_normal((1, 2, 8, 8)).astype(np.float32)
    runner = aotc.compile(tiny_int8, tmp_path / "b", target="cortex-m7").load("cortex-m7")
    bench = runner.bench({"x": x})
    for kernel, n in bench["kernels"].items():
        assert bench["cycles"]["kernels"][kernel] >= n / 2, kernel


def test_cost_unit() -> None:
    assert cost_unit("cortex-m4f", None) == "cycles"
    assert cost_unit("cortex-m4f", "instructions") == "instructions"
    assert cost_unit("rv32imc", None) == "instructions"  # no RISC-V timing model
    assert cost_unit("host", None) == "ns"
    for board, cost in (("rv32imc", "cycles"), ("host", "cycles"), ("cortex-m4f", "time"),
                        ("no-such-board", None)):
        with pytest.raises(AotcError):
            cost_unit(board, cost)


def test_tune_on_the_host_times_each_kernel(tiny_float: Path, tmp_path: Path) -> None:
    log = tmp_path / "host.jsonl"
    assert main(["tune", str(tiny_float), "--board", "host", "--trials", "4", "-o", str(log),
                 "-q"]) == 0
    recs = records.read(log)
    assert len({r["workload"] for r in recs}) == 3  # conv, 1x1 conv, fully connected
    assert all(r["unit"] == "ns" and r["valid"] and r["cost"] > 0 for r in recs)
    out = tmp_path / "b"
    assert main(["compile", str(tiny_float), "--target", "host", "--tuning-log", str(log),
                 "-o", str(out), "-q"]) == 0
    best = best_of(recs, "host")
    defaults = {r["workload"]: r["schedule"] for r in recs if r["default"]}
    for w in json.loads((out / "bundle.json").read_text())["workloads"].values():
        assert w["schedule"] == best.get(w["key"], defaults[w["key"]])
    # whatever it picked computes the model: float within 1e-4 of onnxruntime
    assert main(["verify", str(tiny_float), "--target", "host", "--tuning-log", str(log),
                 "-q"]) == 0


def test_a_candidate_that_changes_the_outputs_is_invalid_and_never_applied(
        tiny_int8: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lowering bugs simulated at the measurement: a conv tile other than the default 4 adds
    one to an output, and every Gemm schedule but the default fails to build."""
    def faulty(job: dict) -> dict:
        res = run_job(job)
        sched = job["schedules"]
        if any(w.startswith("Gemm") for w in sched):
            return {"error": "RuntimeError: gcc: internal compiler error (simulated)"}
        if any(s.get("conv.tile", 4) != 4 for s in sched.values()):
            for outs in res["outputs"]:
                outs["y"] = outs["y"] + np.float32(1)
        return res

    monkeypatch.setattr(executors, "run_job", faulty)
    log = tmp_path / "t.jsonl"
    aotc.tune.tune(tiny_int8, "cortex-m0plus", log, trials=4, jobs=1)  # no SIMD path
    recs = records.read(log)
    bad = [r for r in recs if not r["valid"]]
    assert {r["workload"].split("-")[0] for r in bad} == {"Gemm", "QLinearConv"}
    for r in bad:
        assert r["cost"] is None and r["error"].startswith(f"kernel {r['kernels'][0]} with ")
        if r["workload"].startswith("Gemm"):
            assert "simulated" in r["error"]
        else:
            tile = r["schedule"]["conv.tile"]
            assert tile != 4 and f"conv.tile={tile}" in r["error"]
            assert "differs from the default schedule's" in r["error"]
    # the other workloads of those trials were measured alone and kept
    trials = {r["trial"] for r in bad}
    assert any(r["valid"] and r["trial"] in trials and not r["default"] for r in recs)
    sel = records.from_log(log, "cortex-m0plus")
    bad_keys = {(r["workload"], json.dumps(r["schedule"], sort_keys=True)) for r in bad}
    assert not {(w, json.dumps(s, sort_keys=True)) for w, s in sel.schedules.items()} & bad_keys
    assert not any(w.startswith("Gemm") for w in sel.schedules)


def test_the_progress_bar_shows_trials_and_the_best_cost(tiny_int8: Path, tmp_path: Path
                                                        ) -> None:
    """On a terminal: trials done and the best total against the default's; in a pipe (or
    with --quiet, or under CI) no bar, and stdout is the same."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "AOTC_PROGRESS")}
    env["AOTC_PROGRESS_DELAY"] = "0"
    cmd = [sys.executable, "-m", "aotc", "tune", str(tiny_int8), "--board", "cortex-m4f",
           "--trials", "3", "--jobs", "1"]
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))
    proc = subprocess.Popen([*cmd, "-o", str(tmp_path / "a.jsonl")], stdout=subprocess.PIPE,
                            stderr=slave, env=env)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        err += chunk
    out = proc.communicate(timeout=300)[0].decode()
    os.close(master)
    text = err.decode(errors="replace")
    assert proc.returncode == 0, text[-500:]
    assert "aotc tune:" in text and "3/3" in text and "(default " in text, text[-500:]
    piped = subprocess.run([*cmd, "-o", str(tmp_path / "b.jsonl")], capture_output=True,
                           text=True, env=env, timeout=300)
    assert piped.returncode == 0 and "aotc tune:" not in piped.stderr
    assert piped.stdout == out


@pytest.mark.parametrize("argv, message", [
    (["tune", "missing.onnx", "--board", "host", "-o", "t.jsonl"], "no such model file"),
    (["tune", "{m}", "--board", "host", "--trials", "0", "-o", "t.jsonl"],
     "--trials must be at least 1"),
    (["tune", "{m}", "--board", "host", "--target", "host", "-o", "t.jsonl"],
     "--target is the --board"),
    (["tune", "{m}", "--board", "host", "--executor", "slurm", "-o", "t.jsonl"],
     "invalid choice: 'slurm'"),
    (["tune", "{m}", "--board", "no-such-board", "-o", "t.jsonl"], "no-such-board"),
    (["compile", "{m}", "--tuning-log", "missing.jsonl", "-o", "out"],
     "cannot read the tuning log"),
])
def test_cli_errors_are_one_line(tiny_float: Path, tmp_path: Path, argv: list[str],
                                 message: str, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) if "slurm" in argv else _nothing() as exit_:
        rc = main([a.replace("{m}", str(tiny_float)) for a in argv])
    rc = exit_.value.code if exit_ else rc
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("aotc: error: ") and err.count("\n") == 1 and message in err, err


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
