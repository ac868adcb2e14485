"""The Ray executor: the same tuning run on a local Ray instance and on local processes gives
the same records (QEMU instruction counts are exact, and results come back in submission
order, so the search takes the same path)."""

from __future__ import annotations

from pathlib import Path

import pytest
import ray  # a test dependency (the test and farm extras): this test runs in CI, never skips

from aotc.tune import records, tune


def test_ray_and_local_processes_give_the_same_records(tiny_int8: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)  # a local instance, started and stopped
    logs = {}
    for executor in ("local", "ray"):
        logs[executor] = tmp_path / f"{executor}.jsonl"
        summary = tune(tiny_int8, "cortex-m4f", logs[executor], trials=4, jobs=2,
                       executor=executor, timeout=120)
        assert summary["runs"] >= 4
    assert not ray.is_initialized()  # the executor shut down the instance it started
    local, remote = (records.read(logs[e]) for e in ("local", "ray"))
    assert len(local) > 4 and all(r["valid"] and r["cost"] for r in local)
    assert remote == local
