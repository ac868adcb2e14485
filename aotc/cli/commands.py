"""aotc command line: compile | verify | inspect | ops | run | bench | report | quantize | tune
| package | validate.

Every user error is an AotcError, printed as one line on stderr with exit status 2. Set
AOTC_DEBUG=1 to see Python tracebacks.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from aotc.cli.options import (
    add_budget_options,
    add_compile_options,
    compile_options,
    quiet_option,
)
from aotc.cli.tune import add_parser as add_tune_parser
from aotc.cli.tune import cmd_tune
from aotc.errors import AotcError
from aotc.package.cli import add_compile_options as add_package_options
from aotc.package.cli import add_parser as add_package_parser
from aotc.package.cli import after_compile as write_packages
from aotc.package.cli import cmd_package
from aotc.progress import Progress

EXIT_USER = 2
EXIT_INTERNAL = 3


class _Parser(argparse.ArgumentParser):
    """argparse with aotc's error contract: one line on stderr, exit status 2."""

    def error(self, message: str) -> NoReturn:
        text = " ".join(f"{message} (see '{self.prog} --help')".split())
        self.exit(EXIT_USER, f"aotc: error: {text}\n")


def cmd_compile(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from aotc.compiler import CompileOptions, compile_model, emit
    from aotc.ir.printer import print_graph

    opts = CompileOptions(**compile_options(args, argv))
    dump = set(args.dump_after or [])

    def on_pass(name: str, g: Any) -> None:
        if name in dump or "all" in dump:
            print(f"// after {name}\n{print_graph(g)}")

    if dump - {"all", "fold", "fold-bn", "views", "dce", "fuse"}:
        raise AotcError(f"--dump-after: unknown pass {sorted(dump)}")
    with Progress("compile", 1, quiet=args.quiet) as progress, progress.stage("compile"):
        comp = compile_model(args.model, opts, on_pass, progress)
        from aotc.targets.budget import check as check_budget

        check_budget(comp, args.max_ram, args.max_flash, args.budget_board)  # before writing
        if comp.weight_check:
            progress.write(f"aotc: {comp.weight_check}")
        progress.detail("write")
        try:
            emit(comp, args.output)
        except OSError as e:
            raise AotcError(f"cannot write the bundle to {args.output}: {e.strerror or e}"
                            ) from None
    write_packages(args)
    pools = "".join(f" {p} {n} B," for p, n in comp.plan.pool_sizes.items())
    print(f"aotc: wrote {args.output} ({len(comp.lowered)} kernels, arena {comp.plan.size} B,"
          f"{pools} "
          f"bound {comp.lower_bound} B, weights {comp.weights_bytes} B)", file=sys.stderr)
    if comp.patches is not None:
        from aotc.passes.patches import describe

        print(f"aotc: {describe(comp.patches)}", file=sys.stderr)
    return 0


def _load_vectors(path: str, meta_inputs: list[dict[str, Any]], expected_key: str | None
                  ) -> tuple[list[dict[str, np.ndarray]], list[dict[str, np.ndarray]] | None]:
    try:
        data = np.load(path)
    except Exception as e:
        raise AotcError(f"cannot read vectors {path}: {e}") from None
    names = [s["name"] for s in meta_inputs]
    if all(n in data for n in names):
        return [{n: data[n] for n in names}], None
    if "input" in data and len(names) == 1:
        batch = data["input"]
        inputs = [{names[0]: batch[k]} for k in range(batch.shape[0])]
        key = expected_key or ("output_ort" if "output_ort" in data else None)
        expected = None
        if key:
            if key not in data:
                raise AotcError(f"{path} has no key {key!r}")
            expected = [{"__single__": data[key][k]} for k in range(batch.shape[0])]
        return inputs, expected
    raise AotcError(f"{path}: expected keys {names} (or 'input' for a one-input model)")


def cmd_verify(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import tempfile

    from aotc.api import compile as compile_bundle
    from aotc.api import torch_reference
    from aotc.frontend.torch import is_torch_model, to_onnx
    from aotc.verification.run import run_verification

    opts = compile_options(args, argv)
    # a .pt2 file is exported once; its reference is torch itself (unless --reference/--vectors)
    from_torch = is_torch_model(args.model)
    model = to_onnx(args.model, bound=opts["input_shapes"]) if from_torch else args.model
    reference = args.reference or model
    # stages: compile, build, 2 vectors (or as many as --vectors holds), the per-node bundle
    with (tempfile.TemporaryDirectory(prefix="aotc_verify_") as tmp,
          Progress("verify", 4 + args.per_node, quiet=args.quiet) as progress):
        out = args.output or tmp
        bundle = compile_bundle(model, out, progress=progress, **opts)
        inputs = expected = None
        if args.vectors:
            meta = json.loads((Path(out) / "bundle.json").read_text())
            inputs, expected = _load_vectors(args.vectors, meta["inputs"], args.expected_key)
            progress.set_total(2 + len(inputs) + args.per_node)
            if expected is not None:
                outs = [o["name"] for o in meta["outputs"]]
                if len(outs) != 1:
                    raise AotcError("batched vectors need a one-output model")
                expected = [{outs[0]: e["__single__"]} for e in expected]
        vs_torch = from_torch and expected is None and not args.reference
        if vs_torch:
            inputs, expected = torch_reference(args.model, model, bundle, inputs, args.seed)
        if args.per_node:
            with progress.stage("per-node: every kernel output"):
                _print_per_node(args, model, bundle, inputs)
        rep = run_verification(reference, bundle, inputs, expected, args.atol, args.rtol,
                               args.seed, args.board, progress=progress)
    errs = ", ".join(f"{k}: {v:.3g}" for k, v in rep["max_abs_error"].items())
    from aotc.frontend.tflite import is_tflite

    ref = ("expected vectors" if expected is not None else
           (rep.get("reference") or "the TFLite interpreter") if is_tflite(reference)
           else "onnxruntime")
    if vs_torch:
        ref = "torch"
    if args.reference and expected is None:
        ref += f" on {Path(args.reference).name}"
    print(f"aotc: verify OK on {rep['board']}: {rep['vectors']} vectors vs {ref}, max abs error "
          f"{errs} (atol {args.atol:g}, rtol {args.rtol:g}); arena {rep['arena_bytes']} B")
    return 0


def _print_per_node(args: argparse.Namespace, model: Any, bundle: Any,
                    inputs: list[dict[str, np.ndarray]] | None) -> None:
    """The per-node table, printed before the final check so a failure still shows it."""
    from aotc.verification.per_node import format_table, run_per_node

    rows = run_per_node(model, bundle.compilation, inputs, args.atol, args.rtol, args.seed,
                        args.board, args.reference)
    vectors = len(inputs) if inputs is not None else 2
    ref = Path(args.reference).name if args.reference else "the model"
    print(f"aotc: per-node on {args.board or 'host'}: {len(rows)} kernel outputs vs onnxruntime "
          f"(graph optimisations off) on {ref}, {vectors} vectors; tolerance atol "
          f"{args.atol:g}, rtol {args.rtol:g} (integer tensors: LSB <= atol)")
    print("\n".join(format_table(rows)))


def _fmt_inspect(rep: dict[str, Any]) -> str:
    lines = [f"model {rep['model']} (opset {rep['opset']}): {len(rep['nodes'])} nodes, "
             f"{len(rep['kernels'])} kernels, "
             f"{rep['total_macs']:,} MACs, weights {rep['weights_bytes']:,} B "
             f"(model constants {rep['model_const_bytes']:,} B)", ""]
    if rep.get("weight_check"):  # a PyTorch model: the weight-size guard's line
        lines[1:1] = [rep["weight_check"]]
    w = max([len(n["op"]) for n in rep["nodes"]] + [2])
    lines.append(f"{'kernel':<22} {'op':<{w}}  {'outputs':<24} {'params':>8} {'MACs':>12}  node")
    for n in rep["nodes"]:
        lines.append(f"{n['kernel'][:22]:<22} {n['op']:<{w}}  {', '.join(n['outputs']):<24} "
                     f"{n['params']:>8} {n['macs']:>12,}  {n['name']}")
    m = rep["memory"]
    b = m["bounds"]
    lines += ["", f"arena {m['arena_bytes']:,} B ({m['algorithm']}; holds {m['arena_holds']}), "
              f"{m['over_bound_pct']:+.1f}% against its liveness bound {m['lower_bound']:,} B",
              f"liveness bounds: activations {b['activations']:,} B, + scratch "
              f"{b['activations_scratch']:,} B, + graph inputs and outputs "
              f"{b['activations_scratch_io']:,} B", ""]
    if m.get("state_bytes"):
        lines[-1:-1] = [f"state {m['state_bytes']:,} B: the caller's buffer, kept between calls "
                        f"(not in the arena; docs/streaming.md)"]
    if m.get("pools"):
        lines[-1:-1] = ["pools (fastest first): " + ", ".join(
            f"{p['name']} {p['bytes']:,} of {p['capacity']:,} B"
            + (f" ({p['section']})" if p["section"] else "") for p in m["pools"])]
    pooled = bool(m.get("pools"))
    lines.append(f"{'buffer':<32} " + (f"{'pool':<8} " if pooled else "")
                 + f"{'offset':>8} {'size':>8}  life")
    for b in m["buffers"]:
        where = f"{b['pool']:<8} " if pooled else ""
        lines.append(f"{b['name'][:32]:<32} {where}{b['offset']:>8} {b['size']:>8}  "
                     f"[{b['first']}, {b['last']}]")
    if rep.get("patches"):
        from aotc.passes.patches import describe

        lines += ["", describe(rep["patches"])]
    if m["inplace"]:
        lines.append("")
        lines += [f"in place (by {i['by']}): step {i['step']} writes {i['output']} over "
                  f"{i['input']}" for i in m["inplace"]]
    if m.get("stack_temporaries"):
        lines.append("")
        lines += [f"on the C stack, not in the arena: {t['kernel']} {t['name']} {t['bytes']} B"
                  for t in m["stack_temporaries"]]
    if rep.get("budget"):
        from aotc.targets.budget import Estimate

        b = rep["budget"]
        lines += ["", *Estimate(**{k: b[k] for k in Estimate.__dataclass_fields__}).lines()]
    lines += ["", m["timeline"]]
    if rep.get("partition"):
        lines += ["", *format_partition(rep["partition"])]
    return "\n".join(lines)


def format_partition(rows: list[dict[str, Any]]) -> list[str]:
    """The BYOC partition table: each kernel, who runs it, and why the backends refused it."""
    offloaded = sum(r["backend"] != "native" for r in rows)
    wk = max([len(r["kernel"]) for r in rows] + [6])
    wo = max([len(r["ops"]) for r in rows] + [2])
    wb = max([len(r["backend"]) for r in rows] + [7])
    out = [f"partition: {offloaded} of {len(rows)} kernels offloaded",
           f"{'kernel':<{wk}}  {'ops':<{wo}}  {'backend':<{wb}}  reason"]
    for r in rows:
        why = r["pattern"] if r["backend"] != "native" else r["reason"]
        out.append(f"{r['kernel']:<{wk}}  {r['ops']:<{wo}}  {r['backend']:<{wb}}  {why}")
    return out


def cmd_inspect(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from aotc.api import inspect

    opts = compile_options(args, argv)
    with Progress("inspect", 1, quiet=args.quiet) as progress:
        rep = inspect(args.model, progress=progress, **opts)
    if args.json:
        print(json.dumps(rep, indent=2, default=str))
    else:
        print(_fmt_inspect(rep))
    return 0


def cmd_ops(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from aotc.verification.coverage import render_text

    print(render_text())
    return 0


def _npz_inputs(path: str | None, specs: list[dict[str, Any]], seed: int
                ) -> dict[str, np.ndarray]:
    from aotc.verification.run import random_inputs

    if path is None:
        return random_inputs(specs, seed)
    inputs, _ = _load_vectors(path, specs, None)
    return inputs[0]


def cmd_run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from aotc.api import compile as compile_bundle

    out = Path(args.output)
    with Progress("run", 3, quiet=args.quiet) as progress:
        bundle = compile_bundle(args.model, out, progress=progress, **compile_options(args, argv))
        with progress.stage(f"build for {args.board}"):
            runner = bundle.load(args.board)
        with progress.stage(f"run on {args.board}"):
            outs = runner.run(_npz_inputs(args.inputs, runner.meta["inputs"], args.seed))
    if args.save:
        np.savez(args.save, **outs)
    for k, v in outs.items():
        flat = np.asarray(v).reshape(-1)
        print(f"{k}: {v.dtype}{list(v.shape)} {np.array2string(flat[:8], precision=6)}"
              f"{' ...' if flat.size > 8 else ''}")
    return 0


def cmd_bench(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from aotc.api import compile as compile_bundle
    from aotc.api import macs_of
    from aotc.targets.runner import bench_table

    out = Path(args.output)
    with Progress("bench", 3, quiet=args.quiet) as progress:
        bundle = compile_bundle(args.model, out, progress=progress, **compile_options(args, argv))
        with progress.stage(f"build for {args.board}"):
            runner = bundle.load(args.board)
            msg = runner.fits()
            if msg:
                raise AotcError(msg)
        with progress.stage("count instructions in QEMU, sizes, stack"):
            bench = runner.bench(_npz_inputs(args.inputs, runner.meta["inputs"], args.seed))
    sizes, stack, run_total = bench["sizes"], bench["stack"], bench["instructions"]
    macs = sum(macs_of(bundle.compilation).values())
    print(f"board {args.board}: {run_total:,} instructions per inference"
          + (f" ({run_total / macs:.2f} per MAC, {macs:,} MACs)" if macs else ""))
    est = bench.get("cycles")
    if est:
        print(f"board {args.board}: {est['inference']:,} estimated cycles per inference"
              + (f" ({est['inference'] / macs:.2f} per MAC)" if macs else "")
              + f"; cycle model: {est['model']}")
    if args.json:
        Path(args.json).write_text(json.dumps({**bench, "macs": macs}, indent=1, default=str))
    print(f"flash {sizes['flash']:,} B (text {sizes['text']:,}, rodata {sizes['rodata']:,}, "
          f"data {sizes['data']:,}); RAM {sizes['ram']:,} B (data+bss, "
          + (", ".join(f"pool {p} {n:,} B" for p, n in sizes["pools"].items()) + " apart"
             if sizes.get("pools") else f"arena {sizes['arena']:,}") + ") + stack")
    library = ", ".join(stack.get("library_calls") or [])
    cycles = "; ".join(" -> ".join(c) for c in stack.get("recursion") or []) or "none"
    print(f"stack: deepest kernel frame {stack.get('max_bytes')} B ({stack.get('function')}); "
          f"deepest call chain {stack.get('path_bytes')} B" + (f" + {library}" if library else "")
          + f"; recursion: {cycles}")
    print(bench_table(bench))
    return 0


def cmd_validate(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Compile, build the validation firmware, print how to flash it (or flash it), then drive
    the board over --port (or QEMU with --qemu): 0 PASS, 1 mismatch, 2 user errors."""
    from aotc.api import compile as compile_bundle
    from aotc.frontend.tflite import is_tflite
    from aotc.frontend.torch import is_torch_model, to_onnx
    from aotc.targets.serial_link import Link, Port
    from aotc.verification import on_board
    from aotc.verification.run import tflite_reference_is_tflm

    if args.port and args.qemu:
        raise AotcError("--port and --qemu exclude each other (--qemu starts QEMU and talks to "
                        "its UART itself)")
    if args.vectors < 1:
        raise AotcError(f"--vectors {args.vectors}: at least one")
    board = on_board.check_board(args.board)
    if board.is_host:
        raise AotcError("aotc validate drives a microcontroller board over a serial port; "
                        "for the host use aotc verify")
    opts = compile_options(args, argv)
    model = to_onnx(args.model, bound=opts["input_shapes"]) if is_torch_model(args.model) \
        else args.model
    out = Path(args.output)
    with Progress("validate", 3 + args.vectors, quiet=args.quiet) as progress:
        bundle = compile_bundle(model, out / "bundle", progress=progress, **opts)
        with progress.stage(f"build the validation firmware for {board.name}"):
            elf, binary = on_board.build(bundle.directory, board, out / "firmware")
    for line in on_board.flash_instructions(board, elf, binary):
        print(line)
    if args.flash:
        print(f"flashed: {on_board.flash(elf, args.flash_target)}")
    if not args.port and not args.qemu:
        print("no --port (or --qemu): built only")
        return 0
    meta = json.loads((bundle.directory / "bundle.json").read_text())
    with contextlib.ExitStack() as stack:
        if args.qemu:
            port = stack.enter_context(on_board.qemu_port(board, elf, args.timeout))
        else:
            port = Port(args.port, baud=args.baud, timeout=args.timeout)
            stack.callback(port.close)
        link = Link(port, timeout=args.timeout)
        hello, outputs, profile = on_board.drive(link, meta, model, args.vectors, args.seed,
                                                 args.atol, args.rtol, args.lsb)
    result = on_board.Result(board=board.name, port=port.spec, hello=hello, vectors=args.vectors,
                             outputs=outputs, profile=profile, crc_errors=link.crc_errors,
                             qemu=args.qemu, clock_hz=board.qemu_clock_hz)
    reference = "onnxruntime"
    if is_tflite(model):  # as verification.run.tflite_outputs picks it
        reference = "TFLM" if tflite_reference_is_tflm(model) else "LiteRT"
    print(on_board.format_result(result, reference))
    return 0 if result.passed else 1


def cmd_report(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from aotc.report import write_report

    inputs = None
    if args.inputs:
        try:
            inputs = dict(np.load(args.inputs))
        except Exception as e:
            raise AotcError(f"cannot read inputs {args.inputs}: {e}") from None
    with Progress("report", 3 if args.board else 1, quiet=args.quiet) as progress:
        data = write_report(args.model, args.output, board=args.board, inputs=inputs,
                            seed=args.seed, progress=progress, **compile_options(args, argv))
    m = data["memory"]
    print(f"aotc: wrote {args.output} ({len(data['kernels'])} kernels, arena "
          f"{m['arena_bytes']} B, bound {m['lower_bound']} B"
          + (f", {data['bench']['instructions']:,} instructions on {args.board}"
             if data["bench"] else "") + ")", file=sys.stderr)
    return 0


def cmd_quantize(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from aotc.quantize import quantize

    with (Progress("quantize", 1, quiet=args.quiet) as progress,
          progress.stage("calibrate, quantise, compile")):
        res = quantize(args.model, args.calibration, args.output,
                       per_channel=not args.per_tensor,
                       symmetric_activations=args.symmetric_activations)
    floats = ", ".join(res.float_ops) or "none"
    weights = "per-channel" if res.per_channel else "per-tensor"
    acts = "symmetric" if res.symmetric_activations else "asymmetric"
    print(f"aotc: wrote {res.output} (int8 QDQ, {weights} weights, {acts} activations, "
          f"{res.samples} calibration samples); compiles to {res.kernels} kernels, integer ops "
          f"{', '.join(res.integer_ops) or 'none'}, float ops {floats}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="aotc", description="ONNX -> dependency-free C for MCUs")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="write the C bundle")
    add_compile_options(c)
    c.add_argument("-o", "--output", required=True, help="bundle directory")
    c.add_argument("--dump-after", action="append", metavar="PASS",
                   help="print the graph after PASS (or 'all')")
    add_budget_options(c)
    add_package_options(c)
    v = sub.add_parser("verify", help="compile, build, run and compare with onnxruntime")
    add_compile_options(v)
    v.add_argument("-o", "--output", default=None, help="keep the bundle here")
    v.add_argument("--vectors", default=None, help=".npz with inputs (and expected outputs)")
    v.add_argument("--expected-key", default=None, help="npz key of expected outputs")
    v.add_argument("--atol", type=float, default=1e-4)
    v.add_argument("--rtol", type=float, default=1e-4)
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--board", default=None, help="run on a QEMU board instead of the host")
    v.add_argument("--per-node", action="store_true",
                   help="also compare every kernel's output with the reference's value of the "
                        "same ONNX tensor and print the table in schedule order (the first row "
                        "beyond the tolerance is marked >>)")
    v.add_argument("--reference", default=None, metavar="MODEL.onnx",
                   help="take the reference values from this model (same tensor names, e.g. "
                        "the original of a model whose weights were edited)")
    i = sub.add_parser("inspect", help="ops, shapes, MACs and the memory plan")
    add_compile_options(i)
    i.add_argument("--json", action="store_true")
    sub.add_parser("ops", help="list supported operators")
    r = sub.add_parser("run", help="compile and run on a board (QEMU) or the host")
    add_compile_options(r)
    r.add_argument("--board", default="host", help="board name (see boards/)")
    r.add_argument("--inputs", default=None, help=".npz with the inputs (default: random)")
    r.add_argument("--save", default=None, help="write the outputs to this .npz")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("-o", "--output", default="build/aotc_run", help="bundle directory")
    b = sub.add_parser("bench", help="instructions per inference, flash and RAM on a board")
    add_compile_options(b)
    b.add_argument("--board", required=True)
    b.add_argument("--inputs", default=None)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("-o", "--output", default="build/aotc_bench", help="bundle directory")
    b.add_argument("--json", default=None, metavar="FILE",
                   help="also write the numbers (instructions, estimated cycles, sizes) as JSON")
    rp = sub.add_parser("report", help="one self-contained HTML page: summary, kernels, memory "
                        "timeline, graph after fusion, BYOC partition")
    add_compile_options(rp)
    rp.add_argument("-o", "--output", required=True, help="the .html file to write")
    rp.add_argument("--board", default=None,
                    help="also build for this QEMU board and show instructions and code size "
                         "per kernel, as aotc bench counts them")
    rp.add_argument("--inputs", default=None,
                    help="with --board: .npz with one array per graph input, by name "
                         "(default: random)")
    rp.add_argument("--seed", type=int, default=0)
    va = sub.add_parser("validate", help="build a firmware with a serial protocol, then run it "
                        "on a board (or QEMU): outputs vs the reference, cycles per kernel")
    add_compile_options(va)
    va.add_argument("--board", required=True, help="a board with a [serial] UART (boards/)")
    va.add_argument("--port", default=None, help="tcp:HOST:PORT (QEMU -serial tcp:...) or a "
                    "serial device / pty path; without --port (and --qemu) only build")
    va.add_argument("--qemu", action="store_true",
                    help="start QEMU for the board with its UART on a TCP port and validate "
                         "there (-icount shift=0: deterministic SysTick counts)")
    va.add_argument("--baud", type=int, default=115200, help="for a serial device")
    va.add_argument("--timeout", type=float, default=30.0,
                    help="seconds to wait for each answer (and to connect)")
    va.add_argument("--vectors", type=int, default=8, help="input vectors to run (default 8)")
    va.add_argument("--seed", type=int, default=0)
    va.add_argument("--lsb", type=int, default=0,
                    help="integer outputs: largest difference allowed, in LSB (default 0: "
                         "bit-exact)")
    va.add_argument("--atol", type=float, default=1e-4, help="float outputs")
    va.add_argument("--rtol", type=float, default=1e-4, help="float outputs")
    va.add_argument("--flash", action="store_true",
                    help="flash the firmware with pyOCD (or OpenOCD) from PATH first")
    va.add_argument("--flash-target", default=None, metavar="TARGET",
                    help="pyOCD's --target name of the part (OpenOCD: a board .cfg)")
    va.add_argument("-o", "--output", default="build/aotc_validate",
                    help="directory for the bundle and the firmware")
    q = sub.add_parser("quantize", help="int8 QDQ post-training quantisation (onnxruntime "
                       "quantize_static) calibrated on an .npz")
    q.add_argument("model", help="the float .onnx file")
    q.add_argument("--calibration", required=True, metavar="NPZ",
                   help=".npz of calibration inputs: keys = graph input names, first axis = "
                        "samples (one array for a one-input model may have any key)")
    q.add_argument("-o", "--output", required=True, help="the quantised .onnx to write")
    q.add_argument("--per-tensor", action="store_true",
                   help="one weight scale per tensor (default: per output channel)")
    q.add_argument("--symmetric-activations", action="store_true",
                   help="activation zero point 0 (default: asymmetric, calibrated min/max)")
    quiet_option(q)
    add_tune_parser(sub, add_compile_options)
    add_package_parser(sub)
    return p


COMMANDS = {"compile": cmd_compile, "verify": cmd_verify, "inspect": cmd_inspect, "ops": cmd_ops,
            "run": cmd_run, "bench": cmd_bench, "report": cmd_report, "quantize": cmd_quantize,
            "tune": cmd_tune, "package": cmd_package, "validate": cmd_validate}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        # Library warnings (onnx's "Ignoring unknown external data key(s)", numpy overflow
        # notes) would be a second stderr line before the one-line error; aotc's own
        # diagnostics are AotcErrors, so warnings are dropped, never turned into errors.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return COMMANDS[args.cmd](args, argv)
    except AotcError as e:
        for line in e.lines():
            print(f"aotc: error: {line}", file=sys.stderr)
        return EXIT_USER
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `aotc inspect model.onnx | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit must not fail again
        return 0
    except Exception as e:  # a bug in aotc, not the user's fault: still one line
        if os.environ.get("AOTC_DEBUG"):
            raise
        msg = " ".join(f"{type(e).__name__}: {e}".split())[:300]
        print(f"aotc: internal error: {msg} (set AOTC_DEBUG=1 for a traceback; please report)",
              file=sys.stderr)
        return EXIT_INTERNAL
