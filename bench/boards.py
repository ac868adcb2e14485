"""The MLPerf Tiny float models on an emulated board (default cortex-m4f): executed instructions
per inference (QEMU TCG plugin, exact; from entering <name>_run to its return, libm included)
and per MAC, flash (.text + .rodata + .data) and RAM (.data + .bss, of which the arena, plus the
stack and heap link.ld reserves) from the ELF, the deepest kernel frame and recursion.

    python bench/boards.py [--board cortex-m4f] [--models DIR] [--verbose] [--int8] [--only kws]
                           [--generic]
    python bench/boards.py --byoc cmsis-nn [--boards cortex-m4f,cortex-m7,cortex-m55]
    python bench/boards.py --int8 --tuning-log tune.jsonl [--board cortex-m4f] [--only kws]

Models are compiled --target BOARD (the board's features steer lowering, e.g. the DSP
extension's dual MAC on cortex-m4f/m7/m33); --generic compiles them for a generic MCU instead.
--verbose adds a per-kernel instruction table for each model: each kernel's calls from entry to
return (requantisation helpers, libm, soft-float helpers included) and its own (self) count.
Every table also gives estimated cycles (per inference or per MAC, and per kernel with
--verbose) from the board's cycle model (docs/cycles.md), beside the instructions.
--byoc NAME compares, for the int8 models on each board, aotc's own kernels with the backend's
(both compiled --target BOARD): instructions per inference and per MAC, flash and RAM. CMSIS-NN
comes from --cmsis-nn-path, else $CMSIS_NN_PATH, else ../shared/third_party/cmsis-nn.
--tuning-log LOG compares each model's default schedules with the best valid ones `aotc tune`
logged for the board (docs/tuning.md). Needs the board's toolchain and QEMU (see
boards/README.md).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

import aotc
from aotc.api import macs_of
from aotc.errors import AotcError
from aotc.progress import Progress
from aotc.targets import boards
from aotc.targets.runner import OTHER_ROW

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = ROOT.parent / "shared" / "models" / "mlperf_tiny"
FLOAT_MODELS = ["kws_ref_model_float", "vww_96_float", "pretrainedResnet_float", "ad01_float"]
INT8_MODELS = ["kws_ref_model_int8_qdq", "vww_96_int8_qdq", "pretrainedResnet_int8_qdq",
               "ad01_int8_qdq", "str_ww_ref_model_int8_qdq"]


def measure(model_dir: Path, stem: str, board: str, out: Path, **options) -> dict:
    bundle = aotc.compile(model_dir / f"{stem}.onnx", out, name="m", **options)
    runner = bundle.load(board)
    vectors = np.load(model_dir / "vectors" / f"{stem}.npz")
    feeds = {runner.meta["inputs"][0]["name"]: vectors["input"][0]}
    counts = boards.count_instructions(runner.elf, runner.board, runner._inputs(feeds),
                                       cycles=True)
    return {
        "model": stem, "macs": sum(macs_of(bundle.compilation).values()), "counts": counts,
        "sizes": runner.sizes(), "stack": runner.stack(), "board": boards.load_board(board),
        "bundle": bundle,
    }


def _cycles(r: dict) -> tuple[int, float]:
    """(estimated cycles per inference, per MAC); (0, 0.0) on a board without a model."""
    est = r["counts"].get("cycles")
    n = est["inference"] if est else 0
    return n, n / max(r["macs"], 1)


def cycle_note(rows: list[dict]) -> str:
    models = sorted({r["counts"]["cycles"]["model"] for r in rows if r["counts"].get("cycles")})
    return ("cycles: an estimate from the executed instructions (docs/cycles.md), cycle model "
            + "; ".join(models)) if models else "cycles: no timing model for this board"


def table(rows: list[dict]) -> str:
    head = (f"{'model':<24} {'MACs':>11} {'instr/inference':>16} {'instr/MAC':>9} "
            f"{'est. cycles':>13} {'cyc/MAC':>7} "
            f"{'flash B':>9} {'(text':>7} {'rodata':>8} {'data)':>6} {'RAM B':>8} "
            f"{'(arena)':>8} {'+stack+heap':>11} {'frame B':>7} {'recursion':>9}")
    lines = [head, "-" * len(head)]
    for r in rows:
        s, b, n = r["sizes"], r["board"], r["counts"]["inference"]
        cycles, per_mac = _cycles(r)
        lines.append(
            f"{r['model']:<24} {r['macs']:>11,} {n:>16,} {n / max(r['macs'], 1):>9.2f} "
            f"{cycles:>13,} {per_mac:>7.2f} "
            f"{s['flash']:>9,} {s['text']:>7,} {s['rodata']:>8,} {s['data']:>6,} "
            f"{s['ram']:>8,} {s['arena']:>8,} {s['ram'] + b.stack_bytes + b.heap_bytes:>11,} "
            f"{r['stack']['max_bytes']:>7} {'yes' if r['stack']['recursion'] else 'none':>9}")
    lines.append(cycle_note(rows))
    return "\n".join(lines)


def kernel_table(r: dict) -> str:
    """Per kernel, sorted by cost: instructions from entering it until it returns (what it
    calls included), share, and its own instructions; then the run function (its own
    instructions and its calls outside kernels): the rows add up to the inference."""
    c = r["counts"]
    n, inclusive = c["inference"], c["inclusive"]
    rows = [(k, inclusive[k], c["kernels"][k])
            for k in sorted(inclusive, key=lambda k: (-inclusive[k], k))]
    rows.append((OTHER_ROW, n - sum(inclusive.values()), c["run"]))
    est = c.get("cycles") or {"inference": 0, "kernels": {}}
    cyc = {**est["kernels"], OTHER_ROW: est["inference"] - sum(est["kernels"].values())}
    w = max(len(k) for k, _, _ in rows)  # "a=b=c": kernels gcc folded into one body
    lines = [f"\n{r['model']}: {n:,} instructions, {est['inference']:,} estimated cycles per "
             f"inference",
             f"  {'kernel':<{w}} {'instructions':>14} {'share':>7} {'self':>14} "
             f"{'est. cycles':>14} {'cyc/instr':>9}"]
    lines += [f"  {k:<{w}} {t:>14,} {100.0 * t / n:>6.1f}% {own or 0:>14,} "
              f"{round(cyc.get(k, 0)):>14,} {cyc.get(k, 0) / max(t, 1):>9.2f}"
              for k, t, own in rows]
    if c["inlined"]:
        lines.append(f"  inlined into the run function: {', '.join(c['inlined'])}")
    st = r["stack"]
    lines.append(f"  deepest kernel frame {st['max_bytes']} B ({st['function']}), deepest call "
                 f"chain {st['path_bytes']} B + {', '.join(st['library_calls']) or 'nothing'}")
    return "\n".join(lines)


def byoc_table(rows: list[tuple[dict, dict]], backend: str) -> str:
    head = (f"{'board':<14} {'model':<26} {'MACs':>10} {'instr native':>13} "
            f"{'instr ' + backend:>14} {'ratio':>6} {'instr/MAC':>10} {'(' + backend + ')':>11} "
            f"{'cyc/MAC':>8} {'(' + backend + ')':>11} "
            f"{'flash native':>12} {'flash ' + backend:>14} {'RAM native':>10} "
            f"{'RAM ' + backend:>12} {'offloaded':>9}")
    lines = [head, "-" * len(head)]
    for nat, byo in rows:
        n0, n1 = nat["counts"]["inference"], byo["counts"]["inference"]
        macs = max(nat["macs"], 1)
        lines.append(
            f"{nat['board'].name:<14} {nat['model']:<26} {nat['macs']:>10,} {n0:>13,} "
            f"{n1:>14,} {n1 / n0:>6.2f} {n0 / macs:>10.2f} {n1 / macs:>11.2f} "
            f"{_cycles(nat)[1]:>8.2f} {_cycles(byo)[1]:>11.2f} "
            f"{nat['sizes']['flash']:>12,} {byo['sizes']['flash']:>14,} "
            f"{nat['sizes']['ram']:>10,} {byo['sizes']['ram']:>12,} {byo['offloaded']:>9}")
    return "\n".join(lines)


def main_byoc(args: argparse.Namespace) -> int:
    import os

    path = (args.cmsis_nn_path or os.environ.get("CMSIS_NN_PATH")
            or str(ROOT.parent / "shared" / "third_party" / "cmsis-nn"))
    stems = INT8_MODELS
    if args.only:
        stems = [m for m in stems if any(o in m for o in args.only.split(","))]
    rows = []
    cases = [(b, s) for b in args.boards.split(",") for s in stems]
    with (tempfile.TemporaryDirectory(prefix="aotc_bench_byoc_") as tmp,
          Progress("bench", len(cases), quiet=args.quiet) as progress):
        for board, stem in cases:
            with progress.stage(f"{stem} on {board}"):
                d = Path(tmp) / board / stem
                nat = measure(args.models, stem, board, d / "native", target=board)
                byo = measure(args.models, stem, board, d / "byoc", target=board,
                              byoc=(args.byoc,), cmsis_nn_path=path)
            lowered = byo["bundle"].compilation.lowered
            byo["offloaded"] = f"{sum(1 for ls in lowered if ls.backend)}/{len(lowered)}"
            rows.append((nat, byo))
    print(f"int8 MLPerf Tiny models, aotc native vs --byoc {args.byoc} (both --target BOARD); "
          f"instructions per inference from QEMU, flash = text + rodata + data, RAM = data + "
          f"bss (arena included, stack and heap not)\n")
    print(byoc_table(rows, args.byoc))
    print(cycle_note([r for pair in rows for r in pair]))
    return 0


def tuned_table(rows: list[tuple[dict, dict, int]]) -> str:
    head = (f"{'model':<24} {'MACs':>11} {'instr default':>14} {'instr tuned':>12} "
            f"{'change':>7} {'/MAC default':>12} {'/MAC tuned':>10} {'cyc/MAC default':>15} "
            f"{'cyc/MAC tuned':>13} {'flash default':>13} "
            f"{'flash tuned':>11} {'RAM default':>11} {'RAM tuned':>9} {'tuned':>5}")
    lines = [head, "-" * len(head)]
    for d, t, applied in rows:
        n0, n1, macs = d["counts"]["inference"], t["counts"]["inference"], max(d["macs"], 1)
        lines.append(
            f"{d['model']:<24} {d['macs']:>11,} {n0:>14,} {n1:>12,} "
            f"{100 * (n1 / n0 - 1):>+6.1f}% {n0 / macs:>12.2f} {n1 / macs:>10.2f} "
            f"{_cycles(d)[1]:>15.2f} {_cycles(t)[1]:>13.2f} "
            f"{d['sizes']['flash']:>13,} {t['sizes']['flash']:>11,} {d['sizes']['ram']:>11,} "
            f"{t['sizes']['ram']:>9,} {applied:>5}")
    lines.append("tuned: workloads whose schedule the log changed; RAM = data + bss (arena "
                 "included)")
    lines.append(cycle_note([r for d, t, _ in rows for r in (d, t)]))
    return "\n".join(lines)


def main_tuned(args: argparse.Namespace, stems: list[str]) -> int:
    from aotc.tune import schedules_from_log

    sel = schedules_from_log(args.tuning_log, args.board)
    for note in sel.notes:
        print(f"note: {note}", file=sys.stderr)
    rows = []
    with (tempfile.TemporaryDirectory(prefix="aotc_bench_tuned_") as tmp,
          Progress("bench", len(stems), quiet=args.quiet) as progress):
        for stem in stems:
            with progress.stage(stem):
                d = measure(args.models, stem, args.board, Path(tmp) / stem / "default",
                            target=args.board)
                t = measure(args.models, stem, args.board, Path(tmp) / stem / "tuned",
                            target=args.board, schedules=sel.schedules)
            keys = {ls.workload for ls in t["bundle"].compilation.lowered}
            rows.append((d, t, len(keys & set(sel.schedules))))
    print(f"board {args.board}: default schedules vs the tuning log {args.tuning_log} "
          f"(--target {args.board}); instructions per inference from QEMU\n")
    print(tuned_table(rows))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--board", default="cortex-m4f")
    p.add_argument("--models", type=Path, default=DEFAULT_MODELS)
    p.add_argument("--verbose", action="store_true", help="per-kernel instruction tables")
    p.add_argument("--int8", action="store_true", help="the int8 QDQ models (tflite requant)")
    p.add_argument("--only", default=None, help="comma-separated model stems")
    p.add_argument("--generic", action="store_true",
                   help="compile without --target BOARD (generic MCU lowering)")
    p.add_argument("--byoc", default=None, help="compare native kernels with this backend's")
    p.add_argument("--boards", default="cortex-m4f,cortex-m7,cortex-m55",
                   help="boards for --byoc (comma-separated)")
    p.add_argument("--cmsis-nn-path", default=None)
    p.add_argument("--tuning-log", default=None,
                   help="compare the default schedules with this aotc tune log's best")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    args = p.parse_args()
    if args.byoc:
        return main_byoc(args)
    if not args.models.is_dir():
        sys.exit(f"no models at {args.models}")
    b = boards.load_board(args.board)
    rows = []
    stems = INT8_MODELS if args.int8 else FLOAT_MODELS
    if args.only:
        stems = [m for m in stems if any(o in m for o in args.only.split(","))]
    if args.tuning_log:
        return main_tuned(args, stems)
    with (tempfile.TemporaryDirectory(prefix="aotc_bench_boards_") as tmp,
          Progress("bench", len(stems), quiet=args.quiet) as progress):
        for stem in stems:
            with progress.stage(stem):
                rows.append(measure(args.models, stem, args.board, Path(tmp) / stem,
                                    target=None if args.generic else args.board))
    print(f"board {b.name} ({b.description}; QEMU {b.machine}; part {b.part}: "
          f"{b.flash_bytes:,} B flash, {b.ram_bytes:,} B RAM, link.ld reserves stack "
          f"{b.stack_bytes:,} B + heap {b.heap_bytes:,} B); compiled "
          f"{'for a generic MCU (no --target)' if args.generic else '--target ' + b.name}\n")
    print(table(rows))
    if args.verbose:
        for r in rows:
            print(kernel_table(r))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AotcError as e:  # a missing log or model, a bad option: one line, not a traceback
        sys.exit(f"bench/boards.py: error: {e}")
