"""The options every compiling command shares (compile, verify, inspect, run, bench, report,
tune): their arguments, and the CompileOptions fields they give."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _shape_arg(text: str) -> tuple[str, tuple[int, ...]]:
    name, sep, dims = text.rpartition("=")
    try:
        if not sep or not name:
            raise ValueError
        shape = tuple(int(d) for d in dims.split(","))
        if any(d < 0 for d in shape):
            raise ValueError
        return name, shape
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--input-shape expects NAME=D0,D1,... (e.g. input=1,49,10,1), got {text!r}") from None


def add_compile_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="the .onnx or .tflite file, or a .pt2 file (torch.export.save; "
                   "needs the torch extra)")
    p.add_argument("--name", default=None, help="C prefix of the bundle (default: file stem)")
    p.add_argument("--input-shape", action="append", type=_shape_arg, default=[],
                   metavar="NAME=D0,D1,...", help="bind the shape of a graph input")
    p.add_argument("-p", "--passes", default=None,
                   help="comma-separated passes to run (default: all: qdq,qrecurrent,fold,"
                        "fold-bn,views,dce,fuse)")
    p.add_argument("--planner", default="best", help="memory planner algorithm (default best)")
    p.add_argument("--no-inplace", action="store_true", help="disable in-place buffer reuse")
    p.add_argument("--io-in-arena", action="store_true",
                   help="place the graph inputs and outputs in the arena, reused once dead; the "
                        "run function then takes only the arena (total RAM is one number)")
    p.add_argument("--state", action="append", default=[], metavar="INPUT=OUTPUT",
                   help="a graph input and the graph output holding its next value are state "
                        "kept between calls (repeatable): both leave the API and live in the "
                        "caller's state buffer (<NAME>_STATE_BYTES, <name>_reset sets it to "
                        "zero; docs/streaming.md). TFLite resource variables need no option")
    p.add_argument("--inplace-conv", action="store_true",
                   help="let depthwise convs write over their dead input channel by channel "
                        "(strided ones element by element), 2-D convs row by row through a "
                        "ring of output rows, and 1x1 convs pixel by pixel, when that makes the "
                        "arena smaller (a temporary of at most 64 B goes on the C stack if "
                        "that saves arena bytes)")
    p.add_argument("--patches", default=None, metavar="auto|N|RxC",
                   help="run the first stage of convolutions in N x N (or R x C) spatial "
                        "patches (each "
                        "computing its receptive field, halo included; the rest layer by "
                        "layer): less memory for extra MACs; auto picks the grid and stage "
                        "depth of smallest arena within --patch-macs (docs/memory.md)")
    p.add_argument("--patch-macs", type=float, default=25.0, metavar="PCT",
                   help="--patches auto: the most extra MACs allowed, in percent (default 25)")
    p.add_argument("--keep-order", action="store_true",
                   help="run the kernels in the model's order (default: the order with the "
                        "smallest liveness bound, where the graph branches)")
    p.add_argument("--pool", action="append", default=[], metavar="NAME:BYTES[:SECTION]",
                   help="a memory pool for the arena (repeatable, fastest first, e.g. --pool "
                        "dtcm:64K:.dtcm --pool sram:512K:.sram): buffers go to the first pool "
                        "while they fit; <name>_run takes one pointer per pool (default: the "
                        "--target board's pools, else one arena; --pool none: one arena)")
    p.add_argument("--weights-section", default=None, help="linker section for the weights")
    p.add_argument("--target", default=None, metavar="BOARD",
                   help="tune the generated C for this board's features (default: the --board "
                        "the command runs on, else a generic MCU; 'host' for a vectorising host "
                        "compiler)")
    p.add_argument("--requant", default="tflite", choices=("tflite", "onnx"),
                   help="integer requantisation: tflite (fixed point, bit-exact with TensorFlow "
                        "Lite Micro, no FPU needed; default) or onnx (float scale, round half to "
                        "even, as onnxruntime)")
    p.add_argument("--byoc", default=None, metavar="NAME[,NAME]",
                   help="hand the kernels these BYOC backends accept to them, in this priority "
                        "order: cmsis-nn (int8 --requant tflite kernels to Arm CMSIS-NN), an "
                        "installed backend, or a .py file defining BACKEND (docs/byoc.md)")
    p.add_argument("--allow-weight-growth", action="store_true",
                   help="a .pt2 model: allow the bundle more weight bytes than 1.05x + 1 KB of "
                        "the module's parameters and buffers (docs/pytorch.md)")
    p.add_argument("--keep-float16-weights", action="store_true",
                   help="store float16 weights (a .tflite model's float16 weights, an ONNX "
                        "model's float16 initializers cast to float) as float16 in flash, half "
                        "the bytes, converted to float32 as the kernels load them; applies to "
                        "every float32 constant whose values all are float16 numbers; outputs "
                        "are bit-identical (default: float32 in flash)")
    p.add_argument("--max-loop-iterations", type=int, default=None, metavar="N",
                   help="bound every loop without a trip count (a TFLite WHILE, an ONNX Loop "
                        "without M): at most N iterations, then the loop's outputs are the "
                        "values after N (default: it runs while its condition holds, as in "
                        "TFLM and onnxruntime; docs/control-flow.md)")
    p.add_argument("--cmsis-nn-path", default=None, metavar="DIR",
                   help="the CMSIS-NN tree for --byoc cmsis-nn (default: $CMSIS_NN_PATH)")
    p.add_argument("--tuning-log", default=None, metavar="LOG.jsonl",
                   help="apply the best valid schedule `aotc tune` logged for each workload "
                        "on this target; the other kernels keep the defaults (docs/tuning.md)")
    quiet_option(p)


def add_budget_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-ram", default=None, metavar="BYTES",
                   help="fail when the estimated RAM (arena, I/O, stack, heap) exceeds BYTES "
                        "(K/M suffixes; docs/firmware.md)")
    p.add_argument("--max-flash", default=None, metavar="BYTES",
                   help="fail when the estimated flash (weights + code) exceeds BYTES")
    p.add_argument("--budget-board", default=None, metavar="BOARD",
                   help="the limits not given: this board's part's RAM and flash")


def quiet_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress bar (one is drawn only when stderr is a terminal, and "
                        "never when the CI variable is set)")


def compile_options(args: argparse.Namespace, argv: Sequence[str]) -> dict[str, Any]:
    name = args.name or _default_name(args.model)
    # Running on a board (run, verify, bench, report --board B) compiles for it unless --target
    # says otherwise: the code measured and checked is the code the board would get.
    board = getattr(args, "board", None)
    target = args.target or (board if board not in (None, "host", "host-cffi") else None)
    return dict(name=name, input_shapes=dict(args.input_shape),
                passes=tuple(p for p in args.passes.split(",") if p) if args.passes else None,
                planner=args.planner, inplace=not args.no_inplace,
                io_in_arena=args.io_in_arena, inplace_conv=args.inplace_conv,
                keep_order=args.keep_order, patches=args.patches,
                patch_macs=args.patch_macs / 100.0,
                pools=None if not args.pool else tuple(p for p in args.pool if p != "none"),
                weights_section=args.weights_section, target=target,
                requant=args.requant, command_line=_recorded_command(argv, args.model),
                byoc=tuple(b for b in (args.byoc or "").split(",") if b.strip()),
                cmsis_nn_path=args.cmsis_nn_path,
                allow_weight_growth=args.allow_weight_growth,
                state=tuple(args.state),
                keep_float16_weights=args.keep_float16_weights,
                max_loop_iterations=args.max_loop_iterations,
                schedules=tuning_schedules(args.tuning_log, target, args.requant))


def _recorded_command(argv: Sequence[str], model: str | None = None) -> str:
    """The provenance header's command line: no output directory, paths cut to file names
    (aotc/codegen/reproducible.py), so a bundle's bytes do not depend on where it is written."""
    from aotc.codegen.reproducible import recorded_command

    return recorded_command(argv, model)


def _default_name(model: str) -> str:
    from aotc.names import c_ident

    return c_ident(Path(model).stem.lower(), "m")[:32]




def tuning_schedules(log: str | None, target: str | None, requant: str
                     ) -> dict[str, dict[str, Any]]:
    """--tuning-log: the log's schedules for this compilation; its notes go to stderr."""
    if not log:
        return {}
    from aotc.tune import schedules_from_log

    sel = schedules_from_log(log, target, requant)
    for note in sel.notes:
        print(f"aotc: note: {note}", file=sys.stderr)
    return sel.schedules
