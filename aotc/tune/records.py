"""Tuning records: one JSON object per line, one line per measurement of a workload's schedule;
and the choice, per workload, of the best valid schedule a log holds for a target.

A record: {"format", "aotc" (version), "board", "workload" (key), "schedule" ({knob: value},
the knobs the kernel used), "default" (the schedule is the workload's default), "cost"
(instructions per inference of the workload's kernels on a QEMU board, nanoseconds on the
host; null when it could not be attributed), "unit", "valid" (the model's outputs matched the
default schedule's), "error" (why not, else null), "kernels", "model", "trial", "requant"}.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aotc.errors import AotcError
from aotc.schedules import checked
from aotc.version import __version__

FORMAT = 1


def release(version: str) -> str:
    """The part of a version that must match for records to apply: "major.minor". Another
    release may lower a knob's value differently, so its costs say nothing about ours."""
    return ".".join(version.split(".")[:2])


def make_record(*, board: str, workload: str, schedule: Mapping[str, Any], default: bool,
                cost: float | None, valid: bool, error: str | None, kernels: list[str],
                model: str, trial: int, requant: str, unit: str | None = None
                ) -> dict[str, Any]:
    unit = unit or ("ns" if board == "host" else "instructions")
    if cost is not None and board != "host":
        cost = int(cost)  # instruction counts are whole; cycle estimates rounded
    return {"format": FORMAT, "aotc": __version__, "board": board, "workload": workload,
            "schedule": dict(sorted(schedule.items())), "default": default, "cost": cost,
            "unit": unit, "valid": valid,
            "error": error, "kernels": kernels, "model": model, "trial": trial,
            "requant": requant}


def append(path: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> None:
    """Append records to a log (a new file when there is none), one line each, flushed."""
    try:
        with open(path, "a", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, sort_keys=True) + "\n")
    except OSError as e:
        raise AotcError(f"cannot write the tuning log {path}: {e.strerror or e}") from None


def read(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every record of a log; a line that is not a JSON object is an error naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise AotcError(f"cannot read the tuning log {path}: {e.strerror or e}") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            raise AotcError(f"tuning log {path}, line {n}: not JSON ({e.msg})") from None
        if not isinstance(r, dict) or not {"workload", "board", "schedule"} <= set(r):
            raise AotcError(f"tuning log {path}, line {n}: not a tuning record (no workload, "
                            f"board or schedule)")
        out.append(r)
    return out


@dataclass
class Selection:
    """What a log gives one compilation: {workload: schedule} and notes on what it ignored."""

    schedules: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _key(schedule: Mapping[str, Any]) -> str:
    return json.dumps(dict(schedule), sort_keys=True)


def select(records: list[dict[str, Any]], target: str | None, requant: str = "tflite",
           source: str = "tuning log") -> Selection:
    """Per workload, the valid schedule of least cost among the records measured on ``target``
    by this aotc release with this requantisation; None when that is the default (nothing to
    apply). A schedule with any invalid record is never chosen. Host costs (wall time) are the
    median of a schedule's records; instruction counts are exact."""
    sel = Selection()
    skipped: dict[str, int] = {}
    by_workload: dict[str, dict[str, list[dict[str, Any]]]] = {}
    boards = sorted({str(r["board"]) for r in records})
    for r in records:
        if r["board"] != target:
            why = f"measured on {r['board']}"
        elif r.get("format") != FORMAT or release(str(r.get("aotc"))) != release(__version__):
            why = f"written by aotc {r.get('aotc')} (format {r.get('format')})"
        elif r.get("requant", "tflite") != requant:
            why = f"--requant {r.get('requant')}"
        else:
            try:
                checked(r["schedule"])
            except AotcError as e:
                why = f"unknown schedule ({e})"
            else:
                sched = by_workload.setdefault(r["workload"], {})
                sched.setdefault(_key(r["schedule"]), []).append(r)
                continue
        skipped[why] = skipped.get(why, 0) + 1
    invalid = 0
    for workload, by_schedule in sorted(by_workload.items()):
        best: tuple[float, int, str] | None = None
        # Costs in one unit only: estimated cycles when the log has them, else instructions.
        units = {r.get("unit") for rs in by_schedule.values() for r in rs}
        unit = "cycles" if "cycles" in units else None
        for k, rs in by_schedule.items():
            rs = [r for r in rs if unit is None or r.get("unit") == unit] or rs
            if not all(r.get("valid") for r in rs):
                invalid += 1
                continue
            costs = [float(r["cost"]) for r in rs if r.get("cost") is not None]
            if not costs:
                continue
            cand = (statistics.median(costs), 0 if rs[0].get("default") else 1, k)
            best = cand if best is None or cand[:2] < best[:2] else best
        if best is not None and best[1] == 1:  # a schedule that is not the default
            sel.schedules[workload] = json.loads(best[2])
    what = f"{source}: {len(sel.schedules)} workload schedule(s) applied"
    if target is None:
        what += (f" (this compilation has no --target: the log's records are for "
                 f"{', '.join(boards) or 'no board'})")
    if invalid:
        what += f"; {invalid} schedule(s) recorded invalid, never applied"
    sel.notes.append(what)
    sel.notes += [f"{source}: ignored {n} record(s) {why}" for why, n in sorted(skipped.items())]
    return sel


def from_log(path: str | os.PathLike[str], target: str | None, requant: str = "tflite"
             ) -> Selection:
    return select(read(path), target, requant, source=f"tuning log {Path(path).name}")
