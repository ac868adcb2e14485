"""`aotc tune`'s command line: its options and the table it prints."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from aotc.errors import AotcError


def add_parser(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    from aotc.tune.executors import EXECUTORS
    from aotc.tune.tuner import DEFAULT_TRIALS

    t = sub.add_parser("tune", help="search each kernel workload's schedules on a board and "
                       "log every measurement (use the log with --tuning-log)")
    common(t)
    t.add_argument("--board", required=True,
                   help="a QEMU board (cost: estimated cycles or instructions per kernel) or "
                        "'host' (wall time)")
    t.add_argument("--cost", choices=("cycles", "instructions"), default=None,
                   help="what to minimise on a QEMU board (default: cycles where the board has "
                        "a cycle model, docs/cycles.md, else instructions)")
    t.add_argument("-o", "--output", required=True, metavar="LOG.jsonl",
                   help="the tuning log (records are appended)")
    t.add_argument("--trials", type=int, default=DEFAULT_TRIALS,
                   help=f"measurement runs, the default schedules' included (default "
                        f"{DEFAULT_TRIALS}); each gives every workload a candidate")
    t.add_argument("--jobs", "-j", type=int, default=None,
                   help="measurement runs at a time (default: the CPU count on a board, 1 on "
                        "the host, where concurrent runs disturb the timing)")
    t.add_argument("--executor", default="local", choices=EXECUTORS,
                   help="local processes, or Ray (RAY_ADDRESS, else a local instance; "
                        "pip install 'aotc[farm]')")
    t.add_argument("--seed", type=int, default=0,
                   help="seed of the random inputs and of the guided search")
    t.add_argument("--timeout", type=float, default=60.0,
                   help="seconds per QEMU run before a candidate counts as failed")


def cmd_tune(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from aotc.cli.options import compile_options
    from aotc.progress import Progress
    from aotc.tune.tuner import tune

    if args.target:
        raise AotcError("aotc tune: --target is the --board the schedules are measured on")
    if args.tuning_log:
        raise AotcError("aotc tune: --tuning-log applies a log; the log tune writes is -o")
    if args.jobs is not None and args.jobs < 1:
        raise AotcError(f"--jobs must be at least 1, got {args.jobs}")
    jobs = args.jobs or (1 if args.board == "host" else os.cpu_count() or 1)
    options = {k: v for k, v in compile_options(args, argv).items()
               if k not in ("target", "schedules", "command_line")}
    start = time.monotonic()
    with Progress("tune", args.trials, quiet=args.quiet) as progress:
        s = tune(args.model, args.board, args.output, trials=args.trials, jobs=jobs,
                 executor=args.executor, seed=args.seed, timeout=args.timeout,
                 progress=progress, cost=args.cost, **options)
    print("\n".join(format_summary(s)))
    print(f"aotc: tuned in {time.monotonic() - start:.0f} s ({s['runs']} measurement runs, "
          f"{args.executor} executor, {jobs} at a time); log: {args.output}", file=sys.stderr)
    return 0


def _cost(v: float | None, unit: str) -> str:
    return "-" if v is None else f"{v:,.0f}"


def format_summary(s: dict[str, Any]) -> list[str]:
    unit = s["unit"]
    rows = s["workloads"]
    wk = max([len(r["workload"]) for r in rows] + [8])
    lines = [f"{'workload':<{wk}} {'kernels':>7} {'measured':>9} {'default':>13} "
             f"{'tuned':>13} {'change':>7}  schedule"]
    for r in rows:
        d, b = r["default_cost"], r["best_cost"]
        change = f"{100 * (b / d - 1):+.1f}%" if d and b is not None else "-"
        sched = ", ".join(f"{k}={v}" for k, v in sorted(r["best_schedule"].items()))
        lines.append(f"{r['workload']:<{wk}} {len(r['kernels']):>7} "
                     f"{r['measured']:>4}/{r['candidates']:<4} {_cost(d, unit):>13} "
                     f"{_cost(b, unit):>13} {change:>7}  {sched}"
                     + (f" ({r['invalid']} invalid)" if r["invalid"] else ""))
    d, t = s["default_cost"], s["tuned_cost"]
    if d and t is not None:
        what = {"instructions": "instructions", "cycles": "estimated cycles"}.get(
            unit, "ns (median wall time)")
        lines.append(f"{s['board']}: the tuned kernels {d:,.0f} -> {t:,.0f} {what} per "
                     f"inference ({100 * (t / d - 1):+.1f}%) after {s['trials']} trials")
    return lines


__all__: Sequence[str] = ["add_parser", "cmd_tune", "format_summary"]
