"""The compiler driver: import -> passes -> schedule -> lower -> plan -> emit.

``compile_model`` does everything in memory and returns a Compilation; ``emit`` writes the
bundle. Each stage lives in its own module; this file only wires them in order.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from aotc.byoc import load_backends
from aotc.byoc.backend import Library
from aotc.byoc.lowering import lower_external
from aotc.byoc.partition import Row, partition
from aotc.codegen.bundle import write_bundle
from aotc.codegen.render import render_context
from aotc.errors import AotcError
from aotc.frontend.onnx.file import load_model
from aotc.frontend.onnx.importer import import_model
from aotc.frontend.tflite import is_tflite, load_tflite
from aotc.frontend.torch import (
    is_torch_model,
    param_bytes_of,
    source_hash_of,
    to_onnx,
    weight_check,
)
from aotc.ir.graph import Graph
from aotc.loops.builder import STACK_TEMP_MAX
from aotc.lower.lowering import LoweredStep, lower_step
from aotc.memory.buffers import Plan, check_no_overlap
from aotc.memory.liveness import (
    Bounds,
    Liveness,
    analyse,
    bounds,
    choose_inplace,
    conv_inplace_modes,
)
from aotc.memory.planner import plan
from aotc.memory.pools import Pool, PoolsDoNotFit, plan_pools, resolve_pools
from aotc.memory.report import ascii_timeline, plan_to_json
from aotc.names import Namer, c_ident
from aotc.ops.quant.arith import REQUANT_MODES
from aotc.passes import PASS_NAMES, Pass, default_pipeline, run_pipeline
from aotc.passes.layout import permuted_views, to_layout
from aotc.passes.patches import (
    DEFAULT_MAC_BUDGET,
    Memory,
    auto_candidates,
    patches,
    stage_chain,
)
from aotc.progress import QUIET, Progress
from aotc.steps.reorder import reorder
from aotc.steps.schedule import Schedule, Step, make_schedule


@dataclass(frozen=True)
class CompileOptions:
    name: str = "model"
    input_shapes: Mapping[str, Sequence[int]] = field(default_factory=dict)
    passes: tuple[str, ...] | None = None  # None: the default pipeline
    planner: str = "best"
    align: int = 16
    inplace: bool = True
    # Graph inputs and outputs live in the arena (reused once dead); <name>_run then takes only
    # the arena, and the header says where each input and output is.
    io_in_arena: bool = False
    # Convolutions that can write over their dying input do so (depthwise channel by channel,
    # 2-D convs by line through a ring of output rows, 1x1 pixel by pixel) with a temporary,
    # on the C stack when at most 64 B and that shrinks the arena (docs/memory.md); needs
    # inplace.
    inplace_conv: bool = False
    unroll_max: int = 8
    # Board whose features steer lowering choices (boards/<name>/board.toml); None: a generic
    # MCU (scalar code that keeps accumulators in registers at -Os).
    target: str | None = None
    weights_section: str | None = None
    # Integer requantisation: "tflite" (fixed point, bit-exact with TFLM) or "onnx" (float,
    # round half to even, as onnxruntime).
    requant: str = "tflite"
    verify_ir: bool = False
    command_line: str = ""
    # BYOC backends, in priority order: names (--byoc), paths to .py files, or backend objects
    # (aotc/byoc). cmsis_nn_path: where CMSIS-NN is (else $CMSIS_NN_PATH).
    byoc: tuple[Any, ...] = ()
    cmsis_nn_path: str | None = None
    # Run the kernels in the model's order instead of the order of smallest liveness bound
    # (aotc/steps/reorder.py).
    keep_order: bool = False
    # Workload key -> schedule ({knob: value}, aotc/schedules) for the kernels that have one,
    # e.g. the best a tuning log recorded (aotc/tune); the others get the knobs' defaults.
    schedules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # A model exported from PyTorch (aotc/frontend/torch.py) may carry more weight bytes than
    # the module's parameters and buffers (> 1.05x + 1 KB) only when this is set.
    allow_weight_growth: bool = False
    # Memory pools, fastest first: Pool objects or "NAME:BYTES[:SECTION]" strings (--pool).
    # None: the --target board's pools (board.toml [[pools]]) if it lists any, else one arena;
    # (): one arena.
    pools: tuple[Any, ...] | None = None
    # Patch-based execution of the first stage (aotc/passes/patches.py): None (off), "auto",
    # N for an N x N grid, "RxC", or (depth, rows, cols); patch_macs: auto's budget of extra
    # MACs (a fraction).
    patches: str | int | tuple[int, int, int] | None = None
    patch_macs: float = DEFAULT_MAC_BUDGET


@dataclass
class Compilation:
    options: CompileOptions
    model_name: str
    model_hash: str
    graph: Graph  # after the passes
    schedule: Schedule
    lowered: list[LoweredStep]
    liveness: Liveness
    plan: Plan
    bounds: Bounds
    model_const_bytes: int
    weights: dict[str, tuple[str, np.ndarray]]  # key -> (C symbol, data)
    backends: list[Any] = field(default_factory=list)  # enabled BYOC backends
    # A model from PyTorch: the weight-size guard's line (bundle vs module weight bytes).
    weight_check: str | None = None
    pools: list[Pool] = field(default_factory=list)  # memory pools; empty: one arena
    # --patches: the grid and stage chosen, the MACs they add (PatchPlan.as_json); with auto
    # also the candidates tried, or why the plain graph was kept. None without --patches.
    patches: dict[str, Any] | None = None

    @property
    def stack_temporaries(self) -> list[dict[str, Any]]:
        """The temporaries kernels keep on the C stack instead of the arena (an in-place
        conv's, KernelBuilder.temporary): in neither the arena nor its bounds. The kernels
        run one at a time: the stack needs the largest kernel's, not the sum."""
        return [{"kernel": ls.kernel.name, "name": name, "bytes": nbytes}
                for ls in self.lowered for name, nbytes in ls.stack]

    @property
    def lower_bound(self) -> int:
        """The liveness bound of what the arena holds: activations + scratch (+ graph I/O when
        it is in the arena)."""
        return self.bounds.io if self.options.io_in_arena else self.bounds.scratch

    @property
    def arena_holds(self) -> str:
        return "activations + scratch" + (" + graph I/O" if self.options.io_in_arena else "")

    def io_offset(self, value: str) -> int:
        """Arena (or pool) offset of a graph input or output (io_in_arena only)."""
        return self.plan.offsets[self.liveness.buffer_of(self.schedule.root[value])]

    def io_pool(self, value: str) -> str | None:
        """The pool of a graph input or output (io_in_arena with pools only)."""
        return self.plan.pool_of.get(self.liveness.buffer_of(self.schedule.root[value]))

    def base(self, buffer: str) -> str:
        """The C pointer (uint8_t *) of the arena or pool a planned buffer is in."""
        return f"a_{self.plan.pool_of[buffer]}" if self.plan.pool_of else "a"

    @property
    def io_lower_bound(self) -> int:
        """Activations + scratch + graph inputs and outputs: the bound on total RAM."""
        return self.bounds.io

    @property
    def partition(self) -> list[Row]:
        return list(self.graph.meta.get("partition", []))

    @property
    def libraries(self) -> list[Library]:
        """What the claimed kernels need at build time, once per library name."""
        used = {ls.backend for ls in self.lowered if ls.backend}
        out: dict[str, Library] = {}
        for b in self.backends:
            if b.name in used:
                for lib in getattr(b, "libraries", lambda: ())():
                    out.setdefault(lib.name, lib)
        return list(out.values())

    @property
    def weights_bytes(self) -> int:
        return sum(int(a.nbytes) for a in {sym: a for sym, a in self.weights.values()}.values())


def _validate_name(name: str) -> str:
    if not name or c_ident(name, "m") != name or len(name) > 32:
        raise AotcError(f"--name {name!r} must be a C identifier (letters, digits, _; not a "
                        f"keyword; at most 32 characters)")
    return name


def _target_features(target: str | None) -> frozenset[str]:
    if target is None:
        return frozenset()
    from aotc.targets import boards

    try:
        return boards.load_board(target).features
    except Exception:
        raise AotcError(f"unknown target {target!r} (boards: "
                        f"{', '.join(boards.list_boards())})") from None


def _pipeline(names: tuple[str, ...] | None, requant: str = "tflite") -> list[Pass]:
    if requant not in REQUANT_MODES:
        raise AotcError(f"unknown requant mode {requant!r} (use {' or '.join(REQUANT_MODES)})")
    passes = default_pipeline(requant)
    if names is None:
        return passes
    unknown = [n for n in names if n not in PASS_NAMES]
    if unknown:
        raise AotcError(f"unknown pass(es) {', '.join(unknown)}; known: {', '.join(PASS_NAMES)}")
    return [p for p in passes if p.name in names]


def read_model(path: str | os.PathLike[str]) -> onnx.ModelProto:
    """An ONNX file, or a TFLite file converted to an ONNX-semantics model (NHWC kept)."""
    return load_tflite(path) if is_tflite(path) else load_model(path)


def compile_model(model: str | os.PathLike[str] | onnx.ModelProto, options: CompileOptions,
                  on_pass: Callable[[str, Graph], None] | None = None,
                  progress: Progress = QUIET) -> Compilation:
    name = _validate_name(options.name)
    progress.detail("import")
    if is_torch_model(model):  # a .pt2 file, an ExportedProgram (an nn.Module: api.compile)
        progress.detail("torch.onnx.export")
        model = to_onnx(model, bound=options.input_shapes)
    if isinstance(model, onnx.ModelProto):
        proto, model_name = model, model.graph.name or "model"
        model_hash = (source_hash_of(model)
                      or hashlib.sha256(model.SerializeToString()).hexdigest())
    else:
        proto, model_name = read_model(model), Path(model).name
        model_hash = hashlib.sha256(Path(model).read_bytes()).hexdigest()
    shapes = {k: tuple(int(d) for d in v) for k, v in options.input_shapes.items()}
    graph = import_model(proto, shapes, name)
    model_const_bytes = graph.const_bytes()
    progress.detail("graph passes")
    graph = run_pipeline(graph, _pipeline(options.passes, options.requant),
                         verify=options.verify_ir,
                         on_pass=on_pass)
    features = _target_features(options.target)
    backends = _backends(options, features)
    if backends:
        graph = partition(graph, backends, options.requant)
        layout_of = {b.name: getattr(b, "layout", "NCHW") for b in backends}
        if "NHWC" in layout_of.values():
            graph = to_layout(graph, lambda n: layout_of[n.attrs["_byoc"]] == "NHWC")
        if on_pass is not None:
            on_pass("byoc", graph)
    graph = permuted_views(graph)
    patch_report: dict[str, Any] | None = None
    if not 0 <= options.patch_macs < 1e6:
        raise AotcError(f"--patch-macs {100 * options.patch_macs:g}: the budget of extra MACs "
                        f"must be a percentage >= 0")
    if options.patches is not None and str(options.patches) == "auto":
        comp = _auto_patches(proto, graph, options, progress)
        comp.model_name, comp.model_hash = model_name, model_hash
        return comp
    if options.patches is not None:
        progress.detail("patches")
        graph, patch_plan = patches(graph, options.patches, _memory(options))
        patch_report = patch_plan.as_json()
        if on_pass is not None:
            on_pass("patches", graph)
    by_name = {b.name: b for b in backends}
    sched = make_schedule(graph)
    lowered = _lower(sched, by_name, options, features, progress)
    scratch = _scratch(lowered)
    if not options.keep_order:
        sched, lowered, scratch = _reorder(sched, lowered, scratch, by_name, options, features,
                                           progress)
    progress.detail("memory plan")
    try:
        pools = resolve_pools(options.pools, options.target, options.name)
    except ValueError as e:
        raise AotcError(str(e)) from None
    labels = {ls.step.index: f"{ls.kernel.name}: {ls.step.node.op} {ls.step.node.name!r}"
              for ls in lowered}
    label = lambda k: labels.get(k, f"step {k}")  # noqa: E731
    misfit: PoolsDoNotFit | None = None
    try:
        live, the_plan = _plan(sched, scratch, options, {}, pools, label)
    except PoolsDoNotFit as e:  # in-place convolutions below may still make it fit
        misfit = e
    modes = (conv_inplace_modes(sched, options.io_in_arena)
             if options.inplace and options.inplace_conv else {})
    modes = choose_inplace(sched, scratch, modes, options.io_in_arena) if modes else {}
    if modes:
        # The in-place kernels trade their output buffer for a small temporary; with a
        # heuristic planner that is not always a smaller arena, so the smaller plan wins.
        alt = [lower_step(sched, _with_mode(ls.step, modes[ls.step.index]), options.unroll_max,
                          features, options.schedules) if ls.step.index in modes else ls
               for ls in lowered]
        try:
            alt_live, alt_plan = _plan(sched, _scratch(alt), options, modes, pools, label)
            if misfit is not None or alt_plan.size < the_plan.size:
                lowered, live, the_plan, misfit = alt, alt_live, alt_plan, None
                stack = _stack_temporaries(sched, lowered, options, modes, pools, the_plan.size)
                if stack:
                    lowered = [lower_step(sched, _with_attr(ls.step, "_stack_temp", True),
                                          options.unroll_max, features, options.schedules)
                               if ls.step.index in stack else ls for ls in lowered]
                    live, the_plan = _plan(sched, _scratch(lowered), options, modes, pools,
                                           label)
        except PoolsDoNotFit:
            pass
    if misfit is not None:
        raise AotcError(str(misfit)) from None
    weights = _collect_weights(sched, lowered, name)
    comp = Compilation(options, model_name, model_hash, sched.graph, sched, lowered, live,
                       the_plan, bounds(sched, scratch), model_const_bytes, weights, backends,
                       pools=pools, patches=patch_report)
    param_bytes = param_bytes_of(proto)
    if param_bytes is not None:
        comp.weight_check = weight_check(comp.weights_bytes, param_bytes,
                                         options.allow_weight_growth)
    return comp


def _memory(options: CompileOptions) -> Memory:
    return Memory(options.inplace, options.inplace_conv, options.io_in_arena)


def _auto_key(c: Compilation) -> tuple[int, int]:
    """auto's order: the smaller arena, then the fewer MACs (the plain graph's are fewest)."""
    return c.plan.size, c.patches["patched_macs"] if c.patches else -1


def _auto_patches(proto: onnx.ModelProto, graph: Graph, options: CompileOptions,
                  progress: Progress) -> Compilation:
    """--patches auto: the plain compilation and one per candidate (aotc/passes/patches.py:
    per grid size, the stage depth of smallest estimated peak within the MAC budget), each
    planned in full; the smallest arena wins, then the fewest MACs (the plain one on a tie)."""
    from dataclasses import replace

    budget = options.patch_macs
    tried: list[dict[str, Any]] = []
    best: Compilation | None = None
    error: AotcError | None = None
    found = auto_candidates(graph, budget, _memory(options))
    for spec in [None, *((len(p.stage), *p.grid) for _, p in found)]:
        try:
            c = compile_model(proto, replace(options, patches=spec), progress=progress)
        except AotcError as e:  # e.g. pools too small for this candidate
            error = error or e
            continue
        if spec is not None:
            assert c.patches is not None
            tried.append({**c.patches, "arena_bytes": c.plan.size})
        if best is None or _auto_key(c) < _auto_key(best):
            best = c
    if best is None:
        assert error is not None
        raise error
    report: dict[str, Any] = {"auto": True, "budget_pct": round(100 * budget, 2),
                              "candidates": tried}
    if best.patches is None:
        report["kept_plain"] = (
            "no stage of convolutions to split" if not stage_chain(graph) else
            "no grid within the MAC budget lowers the estimated arena" if not found else
            "no candidate within the MAC budget has a smaller arena")
        report["plain_arena_bytes"] = best.plan.size
    best.patches = {**(best.patches or {}), **report}
    best.options = options
    return best


def _lower(sched: Schedule, by_name: dict[str, Any], options: CompileOptions,
           features: frozenset[str], progress: Progress) -> list[LoweredStep]:
    lowered = []
    for st in sched.steps:
        if st.ctrl:  # control flow around kernels: printed by render_context
            continue
        progress.detail(f"lowering kernel {st.index + 1}/{len(sched.steps)}")
        lowered.append(lower_external(sched, st, by_name, options.requant)
                       if "_byoc" in st.node.attrs
                       else lower_step(sched, st, options.unroll_max, features,
                                       options.schedules))
    return lowered


def _reorder(sched: Schedule, lowered: list[LoweredStep],
             scratch: dict[int, list[tuple[str, int]]], by_name: dict[str, Any],
             options: CompileOptions, features: frozenset[str], progress: Progress
             ) -> tuple[Schedule, list[LoweredStep], dict[int, list[tuple[str, int]]]]:
    """The schedule in the kernel order of smallest liveness bound (aotc/steps/reorder.py), lowered
    again (kernel names carry the step index), when its bound is smaller; else as it was."""
    progress.detail("operator order")
    per_node = {ls.step.node.name: sum(b for _, b in ls.scratch) for ls in lowered}
    graph = reorder(sched.graph, per_node)
    if graph is sched.graph:
        return sched, lowered, scratch
    new = make_schedule(graph)
    new_lowered = _lower(new, by_name, options, features, progress)
    new_scratch = _scratch(new_lowered)
    if bounds(new, new_scratch).scratch >= bounds(sched, scratch).scratch:
        return sched, lowered, scratch
    return new, new_lowered, new_scratch


def _scratch(lowered: list[LoweredStep]) -> dict[int, list[tuple[str, int]]]:
    return {ls.step.index: ls.scratch for ls in lowered if ls.scratch}


def _with_mode(step: Step, mode: str) -> Step:
    return _with_attr(step, "_inplace", mode)


def _with_attr(step: Step, key: str, value: Any) -> Step:
    return Step(step.index, step.node.with_(attrs={**step.node.attrs, key: value}))


def _stack_temporaries(sched: Schedule, lowered: list[LoweredStep], options: CompileOptions,
                       modes: dict[int, str], pools: Sequence[Pool], arena: int) -> set[int]:
    """The in-place steps whose temporary (their one scratch buffer, at most STACK_TEMP_MAX
    bytes) goes on the C stack instead (KernelBuilder.temporary): only where that makes the
    arena smaller, since the stack then grows by it. All of them on the stack gives the
    smallest arena; then, largest first, each goes back to the arena if it stays that small."""
    small = {ls.step.index: ls.scratch[0][1] for ls in lowered if ls.step.index in modes
             and len(ls.scratch) == 1 and ls.scratch[0][1] <= STACK_TEMP_MAX}
    scratch = _scratch(lowered)

    def size(on_stack: set[int]) -> int | None:
        rest = {i: e for i, e in scratch.items() if i not in on_stack}
        reqs = analyse(sched, rest, options.align, options.inplace, options.io_in_arena,
                       modes).reqs
        try:
            return (plan_pools(reqs, pools, options.planner) if pools
                    else plan(reqs, options.planner)).size
        except (PoolsDoNotFit, ValueError):
            return None

    stack = set(small)
    best = size(stack)
    if not small or best is None or best >= arena:
        return set()
    for i in sorted(small, key=lambda i: (-small[i], i)):
        smaller = size(stack - {i})
        if smaller is not None and smaller <= best:
            stack.discard(i)
    return stack


def _plan(sched: Schedule, scratch: dict[int, list[tuple[str, int]]], options: CompileOptions,
          modes: dict[int, str], pools: Sequence[Pool] = (),
          label: Callable[[int], str] = str) -> tuple[Liveness, Plan]:
    """Liveness and the checked plan: one arena, or the pools (PoolsDoNotFit if they are too
    small)."""
    live = analyse(sched, scratch, options.align, options.inplace, options.io_in_arena, modes)
    try:
        the_plan = (plan_pools(live.reqs, pools, options.planner, label) if pools
                    else plan(live.reqs, options.planner))
    except PoolsDoNotFit:
        raise
    except ValueError as e:
        raise AotcError(str(e)) from None
    check_no_overlap(live.reqs, the_plan)
    # Again as the kernels see it: every root at its offset, overlapping only in place.
    check_no_overlap(*live.root_view(the_plan))
    return live, the_plan


def _backends(options: CompileOptions, features: frozenset[str]) -> list[Any]:
    backends = load_backends(options.byoc, cmsis_nn_path=options.cmsis_nn_path)
    for b in backends:
        configure = getattr(b, "configure", None)
        if configure is None:
            continue
        try:
            configure(options.target, features)
        except AotcError:
            raise
        except Exception as e:
            raise AotcError(f"BYOC backend {b.name!r}: configure raised {type(e).__name__}: "
                            f"{e}") from None
    return backends


def _collect_weights(s: Schedule, lowered: list[LoweredStep], prefix: str
                     ) -> dict[str, tuple[str, np.ndarray]]:
    """key -> (C symbol, data). Arrays with the same dtype, shape and bytes share one symbol
    (e.g. the re-laid-out weights and requantisation tables of the patch copies of a layer,
    --patches): the bundle defines each symbol once."""
    namer = Namer()
    out: dict[str, tuple[str, np.ndarray]] = {}
    seen: dict[tuple[str, tuple[int, ...], bytes], str] = {}

    def add(key: str, arr: np.ndarray) -> None:
        sig = (arr.dtype.str, tuple(arr.shape), np.ascontiguousarray(arr).tobytes())
        if sig not in seen:
            seen[sig] = namer(key, f"{prefix}_w_{key}")
        out[key] = (seen[sig], arr)

    for ls in lowered:
        for kind, key in ls.args:
            if kind == "const" and key not in out:
                arr = ls.consts[key] if key in ls.consts else s.graph.values[key].const
                assert arr is not None
                add(key, arr)
            elif kind == "value" and s.kind[s.root[key]] == "const" and s.root[key] not in out:
                r = s.root[key]
                arr = s.graph.values[r].const
                assert arr is not None
                add(r, arr)
    return out


# ---------------------------------------------------------------------------------- emission
def memory_report(c: Compilation) -> dict[str, Any]:
    rep = plan_to_json(c.liveness.reqs, c.plan)
    rep["lower_bound"] = c.lower_bound
    rep["over_bound_pct"] = (100.0 * (c.plan.size - c.lower_bound) / c.lower_bound
                             if c.lower_bound else 0.0)
    rep["io_lower_bound"] = c.io_lower_bound
    rep["bounds"] = {"activations": c.bounds.activations, "activations_scratch": c.bounds.scratch,
                     "activations_scratch_io": c.bounds.io}
    rep["arena_holds"] = c.arena_holds
    rep["inplace"] = [{"step": k, "input": a, "output": b,
                       "by": c.liveness.modes.get(k, "element")}
                      for k, (a, b) in sorted(c.liveness.inplace.items())]
    rep["stack_temporaries"] = c.stack_temporaries
    rep["timeline"] = ascii_timeline(c.liveness.reqs, c.plan)
    for entry, pool in zip(rep.get("pools", []), c.pools):
        entry.update(capacity=pool.size, section=pool.section)
    return rep


def emit(c: Compilation, out_dir: str | os.PathLike[str]) -> dict[str, str]:
    return write_bundle(Path(out_dir), render_context(c))
