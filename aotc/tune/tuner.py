"""`aotc tune`: find, per workload of a model, the schedule that costs least on a board.

1. spaces: compile the model with each knob's values; each workload's candidates are the
   schedules its lowering can use (aotc/tune/space.py).
2. trial 0 measures the default schedules: their costs, and the outputs every candidate must
   reproduce (integer outputs bit-exact, float within 1e-5 absolute + 1e-5 relative).
3. trial t gives every workload its next candidate at once: one compile, one firmware, one
   QEMU run (or host timing) measures them all, since costs come back per kernel. ``jobs``
   trials run at a time on the executor (aotc/tune/executors.py).
4. a trial whose outputs differ from the default's (or that fails to compile, build or run) is
   measured again one workload at a time, to find the candidate at fault: it is recorded
   invalid, with the error, and never applied; the others get their costs from those runs.
Every measurement is a record in the log (aotc/tune/records.py), written as each batch ends.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.progress import QUIET, Progress
from aotc.tune import records, space
from aotc.tune.executors import make
from aotc.tune.measure import measure
from aotc.tune.search import Search, candidates, key

DEFAULT_TRIALS = 100
FLOAT_TOL = 1e-5  # absolute and relative, as documented for float outputs


@dataclass
class Workload:
    key: str
    kernels: list[str]
    default: dict[str, Any]
    spaces: list[dict[str, tuple[list[Any], Any]]] = field(default_factory=list)
    default_cost: float | None = None
    best: tuple[float, dict[str, Any]] | None = None
    measured: int = 0
    invalid: int = 0


def compare(got: list[dict[str, np.ndarray]], want: list[dict[str, np.ndarray]]) -> str | None:
    """None when ``got`` reproduces ``want``, else why not (one line)."""
    for n, (g, w) in enumerate(zip(got, want)):
        for name, ref in w.items():
            a, b = np.asarray(g.get(name)), np.asarray(ref)
            if a.shape != b.shape or a.dtype != b.dtype:
                return f"output {name!r} is {a.dtype}{list(a.shape)}, not {b.dtype}{list(b.shape)}"
            if b.dtype.kind == "f":
                bad = ~(np.isclose(a, b, rtol=FLOAT_TOL, atol=FLOAT_TOL, equal_nan=True))
                rule = f"float: atol {FLOAT_TOL:g} + rtol {FLOAT_TOL:g}"
            else:
                bad = a != b
                rule = "integer: bit-exact"
            if bad.any():
                diff = np.abs(a.astype(np.float64) - b.astype(np.float64))[bad]
                return (f"output {name!r} (vector {n}) differs from the default schedule's in "
                        f"{int(bad.sum())} of {b.size} values, max abs diff {diff.max():.6g} "
                        f"({rule})")
    return None


def _costs(result: Mapping[str, Any], found: Mapping[str, Workload]) -> dict[str, float | None]:
    """Workload -> the sum of its kernels' costs; None when a kernel was inlined or folded (one
    body, gcc -fipa-icf) with a kernel of another workload, so its cost cannot be told apart."""
    kernels = result["kernels"]
    out: dict[str, float | None] = {}
    for group, cost in result["costs"].items():
        owners = {kernels[k]["workload"] for k in group.split("=") if k in kernels}
        for w in owners & set(found):
            if len(owners) > 1:
                out[w] = None
            elif (so_far := out.get(w, 0.0)) is not None:
                out[w] = so_far + cost
    for k in result.get("inlined", []):
        if k in kernels and kernels[k]["workload"] in found:
            out[kernels[k]["workload"]] = None
    return out


def tune(model: str | os.PathLike[str], board: str, log: str | os.PathLike[str], *,
         trials: int = DEFAULT_TRIALS, jobs: int = 1, executor: str = "local", seed: int = 0,
         timeout: float = 60.0, repeats: int = 15, progress: Progress = QUIET,
         cost: str | None = None, **options: Any) -> dict[str, Any]:
    """Tune ``model`` for ``board`` (a QEMU board, or "host": wall time), appending records to
    ``log``. ``options``: CompileOptions fields (target is the board). Returns a summary:
    {"workloads": [...], "trials", "runs", "default_cost", "tuned_cost", "unit"}. ``cost`` on a
    QEMU board: "cycles" (the timing model's estimate; the default where the board has a
    model) or "instructions"."""
    unit = cost_unit(board, cost)
    model = Path(model)
    if not model.is_file():
        raise AotcError(f"no such model file: {model}")
    if trials < 1:
        raise AotcError(f"--trials must be at least 1, got {trials}")
    options = {**options, "target": board}
    from aotc.verification.run import random_inputs

    progress.detail("compiling")
    first = measure({"model": str(model), "options": options, "schedules": {}, "board": None})
    found: dict[str, Workload] = {}
    for name, k in first["kernels"].items():
        w = found.setdefault(k["workload"], Workload(k["workload"], [], dict(k["schedule"])))
        w.kernels.append(name)
    if not found:
        raise AotcError("nothing to tune: the model has no kernels aotc lowers itself")
    ex = make(executor, jobs)
    try:
        payload = ex.model_payload(model)
        progress.detail("compiling each knob's values (the schedule spaces)")
        spaces = space.discover(first, lambda scheds: ex.map([
            {"model": payload, "options": options, "board": None,
             "schedules": {w: s for w in found}} for s in scheds]))
        for w in found.values():
            w.spaces = spaces[w.key]
        specs = first["inputs"]
        run = _Run(model, board, Path(log), found, ex, options, seed, trials,
                   job_extra={"inputs": [random_inputs(specs, seed + k) for k in range(2)],
                              "timeout": timeout, "repeats": repeats, "cost": unit})
        with progress.stage("default schedules"):
            run.baseline()
            progress.detail(_best_text(found))
        trial = 1
        while trial < trials:
            batch = run.propose(min(max(1, jobs), trials - trial))
            if not batch:
                break  # every workload's candidates measured
            for n, res in enumerate(ex.map([run.job(p) for p in batch])):
                with progress.stage(f"trial {trial + n}"):
                    progress.detail(_best_text(found))
                    run.judge(trial + n, batch[n], res)
                    progress.detail(_best_text(found))
            trial += len(batch)
    finally:
        ex.close()
    return _summary(found, trial if trials > 1 else 1, run.runs, board, unit)


def cost_unit(board: str, cost: str | None) -> str:
    """What tune minimises: "ns" on the host; on a QEMU board `cost`, by default "cycles" where
    aotc has a timing model for the board's core, else "instructions"."""
    if cost not in (None, "cycles", "instructions"):
        raise AotcError(f"--cost must be cycles or instructions, got {cost!r}")
    if board == "host":
        if cost is not None:
            raise AotcError("--cost applies to QEMU boards; the host is timed (ns)")
        return "ns"
    from aotc.targets import boards

    try:
        has_model = boards.cycle_model(board) is not None
    except ValueError as e:  # an unknown board
        raise AotcError(str(e)) from None
    if cost == "cycles" and not has_model:
        raise AotcError(f"board {board} has no cycle model (docs/cycles.md): use --cost "
                        f"instructions")
    return cost or ("cycles" if has_model else "instructions")


class _Run:
    """One tuning run's state: the workloads, their searches, the reference outputs, the log."""

    def __init__(self, model: Path, board: str, log: Path, found: dict[str, Workload],
                 ex: Any, options: Mapping[str, Any], seed: int, trials: int,
                 job_extra: Mapping[str, Any]) -> None:
        self.model, self.board, self.log, self.found, self.ex = model, board, log, found, ex
        self.options = dict(options)
        self.payload = ex.model_payload(model)  # a path, or the file for remote workers
        self.job_extra = dict(job_extra)
        self.searches = {w: Search(found[w].default, candidates(found[w].spaces,
                                                                found[w].default),
                                   trials - 1, seed + i) for i, w in enumerate(found)}
        self.reference: list[dict[str, np.ndarray]] = []
        self.runs = 0

    def job(self, schedules: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        self.runs += 1
        return {"model": self.payload, "options": self.options, "schedules": dict(schedules),
                "board": self.board, **self.job_extra}

    def record(self, trial: int, w: str, schedule: Mapping[str, Any], cost: float | None,
               error: str | None) -> dict[str, Any]:
        return records.make_record(
            board=self.board, workload=w, schedule=schedule,
            default=key(schedule) == key(self.found[w].default), cost=cost,
            valid=error is None, error=error, kernels=self.found[w].kernels,
            model=self.model.name, trial=trial, requant=self.options.get("requant", "tflite"),
            unit=self.job_extra.get("cost"))

    def baseline(self) -> None:
        """Trial 0: the default schedules' costs and outputs."""
        base = self.ex.map([self.job({})])[0]
        if base["error"]:
            raise AotcError(f"the default schedules fail on {self.board}: {base['error']}")
        self.reference = base["outputs"]
        out = []
        for w, cost in _costs(base, self.found).items():
            self.found[w].default_cost = cost
            self.searches[w].report(self.found[w].default, cost)
            out.append(self.record(0, w, self.found[w].default, cost, None))
        records.append(self.log, out)

    def propose(self, count: int) -> list[dict[str, dict[str, Any]]]:
        """Up to ``count`` trials, each a candidate for every workload that has one left."""
        batch = []
        while len(batch) < count:
            props = {w: c for w, s in self.searches.items() if (c := s.propose()) is not None}
            if not props:
                break
            batch.append(props)
        return batch

    def judge(self, trial: int, props: dict[str, dict[str, Any]], res: dict[str, Any]) -> None:
        """Log one trial. One that fails (error, or outputs unlike the default's) is measured
        again one workload at a time, to find the candidate at fault."""
        if not (res["error"] or compare(res["outputs"], self.reference)):
            records.append(self.log, self._accept(trial, props, res))
            return
        out = []
        alone = self.ex.map([self.job({w: c}) for w, c in props.items()])
        for (w, c), r in zip(props.items(), alone):
            err = r["error"] or compare(r["outputs"], self.reference)
            if err is None:
                out += self._accept(trial, {w: c}, r)
                continue
            knobs = ", ".join(f"{k}={v!r}" for k, v in sorted(c.items()))
            out.append(self.record(trial, w, c, None, f"kernel "
                                   f"{', '.join(self.found[w].kernels)} with {knobs}: {err}"))
            self.found[w].invalid += 1
            self.searches[w].report(c, None)
        records.append(self.log, out)

    def _accept(self, trial: int, props: dict[str, dict[str, Any]], res: dict[str, Any]
                ) -> list[dict[str, Any]]:
        costs = _costs(res, self.found)
        out = []
        for w, proposed in props.items():
            wl = self.found[w]
            used = next((res["kernels"][k]["schedule"] for k in wl.kernels
                         if k in res["kernels"]), proposed)
            cost = costs.get(w)
            self.searches[w].report(proposed, cost)
            if key(used) != key(proposed):  # a knob the lowering did not ask for
                self.searches[w].report(used, cost)
            wl.measured += 1
            if cost is not None and (wl.best is None or cost < wl.best[0]):
                wl.best = (cost, used)
            out.append(self.record(trial, w, used, cost, None))
        return out


def _total(found: Mapping[str, Workload], tuned: bool) -> float | None:
    total = 0.0
    for w in found.values():
        if w.default_cost is None:
            return None
        total += min(w.default_cost, w.best[0]) if tuned and w.best else w.default_cost
    return total


def _best_text(found: Mapping[str, Workload]) -> str:
    base, best = _total(found, False), _total(found, True)
    if base is None or best is None:
        return ""
    return f"best {best:,.0f} (default {base:,.0f}, {100 * (best / base - 1):+.1f}%)"


def _summary(found: Mapping[str, Workload], trials: int, runs: int, board: str, unit: str
             ) -> dict[str, Any]:
    rows = []
    for w in found.values():
        better = w.best is not None and w.default_cost is not None and w.best[0] < w.default_cost
        rows.append({"workload": w.key, "kernels": w.kernels,
                     "candidates": len(candidates(w.spaces, w.default)) + 1,
                     "measured": w.measured + 1, "invalid": w.invalid,
                     "default_cost": w.default_cost,
                     "best_cost": w.best[0] if better else w.default_cost,
                     "best_schedule": w.best[1] if better else w.default})
    return {"workloads": rows, "trials": trials, "runs": runs, "board": board, "unit": unit,
            "default_cost": _total(found, False), "tuned_cost": _total(found, True)}
