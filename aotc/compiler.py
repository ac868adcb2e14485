"""The compiler driver: read -> import -> graph passes -> BYOC claims -> patches -> kernel order
-> lowering -> memory plan (in place, stack temporaries) -> emit.

``compile_model`` runs each stage once, top to bottom, in memory, and returns a Compilation;
``emit`` writes the bundle. Choices that need a memory plan (patch candidates, in-place
kernels, stack temporaries) are evaluated from the already-passed graph. Each stage lives in
its own package; this file only wires them in order.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from aotc.byoc import load_backends
from aotc.byoc.lowering import lower_external
from aotc.byoc.partition import partition
from aotc.codegen.bundle import write_bundle
from aotc.codegen.render import render_context
from aotc.compilation import Compilation, CompileOptions
from aotc.errors import AotcError
from aotc.frontend.onnx.file import load_model
from aotc.frontend.onnx.importer import import_model
from aotc.frontend.state import attach_state
from aotc.frontend.tflite import is_tflite, load_tflite
from aotc.frontend.torch import (
    is_torch_model,
    param_bytes_of,
    source_hash_of,
    to_onnx,
    weight_check,
)
from aotc.ir.graph import Graph
from aotc.lower.half import keep_float16
from aotc.lower.lowering import LoweredStep, lower_step
from aotc.memory.arena import ArenaRules, plan_arena, stack_temporaries
from aotc.memory.buffers import Plan
from aotc.memory.liveness import Liveness, bounds, choose_inplace
from aotc.memory.patch_choice import Memory, auto_candidates, patches
from aotc.memory.pools import Pool, PoolsDoNotFit, resolve_pools
from aotc.names import Namer, c_ident
from aotc.ops.opdef import resolve
from aotc.ops.quant.arith import REQUANT_MODES
from aotc.passes import PASS_NAMES, Pass, default_pipeline, run_pipeline
from aotc.passes.bodies import bound_loops
from aotc.passes.layout import permuted_views, to_layout
from aotc.passes.patches import stage_chain
from aotc.progress import QUIET, Progress
from aotc.schedules.flash import WIDE_KNOBS, Candidate, choose_wide, flash_limit
from aotc.steps.inplace import conv_inplace_modes, inplace_temps
from aotc.steps.reorder import reorder
from aotc.steps.schedule import Schedule, Step, make_schedule


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


def _target_cpu(target: str | None) -> str:
    """The target's core (board.toml cpu), which some knobs' defaults key on; "" without one."""
    if target is None:
        return ""
    from aotc.targets import boards

    return boards.load_board(target).cpu


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


@dataclass(frozen=True)
class _Source:
    """The model as the frontend read it, and what the bundle's provenance says of it."""

    proto: onnx.ModelProto
    name: str
    sha256: str


@dataclass(frozen=True)
class _Context:
    """What every stage after the graph passes needs: the options, the target's features,
    the enabled BYOC backends (by name) and the memory pools."""

    options: CompileOptions
    features: frozenset[str]
    backends: list[Any]
    pools: list[Pool]
    progress: Progress
    # node name -> {knob: value}: defaults the driver chose for that step's kernel
    # (_fit_flash: the layers whose int16-widened weights do not fit the part's flash).
    knob_defaults: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def by_name(self) -> dict[str, Any]:
        return {b.name: b for b in self.backends}

    @property
    def rules(self) -> ArenaRules:
        o = self.options
        return ArenaRules(o.align, o.inplace, o.io_in_arena, o.planner, self.pools)


def compile_model(model: str | os.PathLike[str] | onnx.ModelProto, options: CompileOptions,
                  on_pass: Callable[[str, Graph], None] | None = None,
                  progress: Progress = QUIET) -> Compilation:
    """The pipeline, each stage once, top to bottom: read and import the model, run the graph
    passes, let the BYOC backends claim their kernels, choose patches (their candidates start
    from this passed graph), then build the kernels and the memory plan (_build)."""
    name = _validate_name(options.name)
    if not 0 <= options.patch_macs < 1e6:
        raise AotcError(f"--patch-macs {100 * options.patch_macs:g}: the budget of extra MACs "
                        f"must be a percentage >= 0")
    limit = options.max_loop_iterations
    if limit is not None and limit < 1:
        raise AotcError(f"--max-loop-iterations {limit}: the bound must be at least 1")
    source = _read(model, options, progress)
    shapes = {k: tuple(int(d) for d in v) for k, v in options.input_shapes.items()}
    graph = attach_state(import_model(source.proto, shapes, name), source.proto, options.state)
    if any(p.key == "aotc.scale_product" and p.value == "float32"
           for p in source.proto.metadata_props):  # a uint8 .tflite (frontend/tflite)
        graph = graph.replace(meta={**graph.meta, "scale_product": "float32"})
    if limit is not None:
        graph = bound_loops(graph, limit)
    model_const_bytes = graph.const_bytes()
    progress.detail("graph passes")
    graph = run_pipeline(graph, _pipeline(options.passes, options.requant),
                         verify=options.verify_ir, on_pass=on_pass)
    features = _target_features(options.target)
    backends = _backends(options, features)
    graph = _claim(graph, backends, options, on_pass)
    graph = permuted_views(graph)
    ctx = _Context(options, features, backends, _pools(options), progress)
    if options.patches is not None and str(options.patches) == "auto":
        comp = _auto_patches(graph, ctx)
    else:
        report = None
        if options.patches is not None:
            progress.detail("patches")
            graph, patch_plan = patches(graph, options.patches, _memory(options))
            report = patch_plan.as_json()
            if on_pass is not None:
                on_pass("patches", graph)
        comp = _build(graph, ctx, report)
    comp.model_name, comp.model_hash = source.name, source.sha256
    comp.model_const_bytes = model_const_bytes
    param_bytes = param_bytes_of(source.proto)
    if param_bytes is not None:
        comp.weight_check = weight_check(comp.weights_bytes, param_bytes,
                                         options.allow_weight_growth)
    return comp


def _read(model: str | os.PathLike[str] | onnx.ModelProto, options: CompileOptions,
          progress: Progress) -> _Source:
    progress.detail("import")
    if is_torch_model(model):  # a .pt2 file, an ExportedProgram (an nn.Module: api.compile)
        progress.detail("torch.onnx.export")
        model = to_onnx(model, bound=options.input_shapes)
    if isinstance(model, onnx.ModelProto):
        digest = source_hash_of(model) or hashlib.sha256(model.SerializeToString()).hexdigest()
        return _Source(model, model.graph.name or "model", digest)
    return _Source(read_model(model), Path(model).name,
                   hashlib.sha256(Path(model).read_bytes()).hexdigest())


def _claim(graph: Graph, backends: list[Any], options: CompileOptions,
           on_pass: Callable[[str, Graph], None] | None) -> Graph:
    """The BYOC backends claim their kernels (aotc/byoc/partition.py); the regions of an NHWC
    backend get their layout."""
    if not backends:
        return graph
    graph = partition(graph, backends, options.requant)
    layout_of = {b.name: getattr(b, "layout", "NCHW") for b in backends}
    if "NHWC" in layout_of.values():
        graph = to_layout(graph, lambda n: layout_of[n.attrs["_byoc"]] == "NHWC")
    if on_pass is not None:
        on_pass("byoc", graph)
    return graph


def _pools(options: CompileOptions) -> list[Pool]:
    """The memory pools: --pool, else the --target board's (board.toml [[pools]])."""
    board_pools: Sequence[Any] = ()
    if options.pools is None and options.target:
        from aotc.targets import boards

        board_pools = boards.load_board(options.target).pools
    try:
        return resolve_pools(options.pools, board_pools, options.name)
    except ValueError as e:
        raise AotcError(str(e)) from None


def _build(graph: Graph, ctx: _Context, patch_report: dict[str, Any] | None = None
           ) -> Compilation:
    """A passed graph's kernels and memory plan (_build_once), built again with packed int8
    weights for the layers whose int16-widened ones do not fit the target's flash
    (_fit_flash)."""
    return _fit_flash(graph, _build_once(graph, ctx, patch_report), ctx, patch_report)


def _build_once(graph: Graph, ctx: _Context, patch_report: dict[str, Any] | None = None
                ) -> Compilation:
    """A passed graph's kernels and memory plan: the kernel schedule in the order of smallest
    liveness bound, each step lowered once, the arena planned; with --inplace-conv the chosen
    convs lowered again in place when that makes the arena smaller, and their small
    temporaries moved to the C stack where that makes it smaller still; the weights."""
    options, progress = ctx.options, ctx.progress
    sched = make_schedule(graph)
    lowered = _lower(sched, ctx)
    scratch = _scratch(lowered)
    if not options.keep_order:
        sched, lowered, scratch = _reorder(sched, lowered, scratch, ctx)
    progress.detail("memory plan")
    lowered, live, the_plan = _plan_inplace(sched, lowered, scratch, ctx, _labels(lowered))
    comp = Compilation(options, "", "", sched.graph, sched, lowered, live, the_plan,
                       bounds(sched, scratch), 0, {}, ctx.backends, pools=ctx.pools,
                       patches=patch_report)
    _stack(comp, ctx)
    comp.weights = _collect_weights(sched, comp.lowered, options.name)
    return comp


def _fit_flash(graph: Graph, comp: Compilation, ctx: _Context,
               patch_report: dict[str, Any] | None) -> Compilation:
    """The flash-aware default of the int16-widened weights (aotc/schedules/flash.py). When
    the bundle's estimated flash (targets/budget.py) exceeds the target part's flash less the
    application's margin, each candidate layer (a widened knob on by default, not set by a
    schedule) is lowered once more packed, the layers to widen chosen by MACs per extra byte,
    and the graph built again with the others packed; once more if the code's estimate moved
    the total over (a smaller room). Nothing to do without a target part or a candidate."""
    target = ctx.options.target
    if not target or not any(ls.knobs.get(k) is True for ls in comp.lowered
                             for k in WIDE_KNOBS):
        return comp
    from aotc.targets import boards, budget

    part = boards.load_board(target).flash_bytes
    if not part:  # no part (host): no limit
        return comp
    limit = flash_limit(part)
    flash = budget.estimate(comp, target).flash
    if flash <= limit:
        return comp
    ctx.progress.detail("flash: int16 weights")
    g, schedules = comp.schedule.graph, ctx.options.schedules or {}
    candidates, packed_knobs = [], {}
    for ls in comp.lowered:
        node = ls.step.node
        knobs = [k for k in WIDE_KNOBS
                 if ls.knobs.get(k) is True and k not in schedules.get(ls.workload, {})]
        if not knobs:
            continue
        packed_knobs[node.name] = {**ctx.knob_defaults.get(node.name, {}),
                                   **{k: False for k in knobs}}
        packed = _lower_step(comp.schedule, ls.step, replace(
            ctx, knob_defaults={node.name: packed_knobs[node.name]}))
        opdef = resolve(node.op, g.opset, node.domain)
        macs = int(getattr(opdef, "macs", lambda n, g: 0)(node, g))
        candidates.append(Candidate(node.name, macs, _const_bytes(ls) - _const_bytes(packed)))
    packed_flash = flash - sum(c.extra for c in candidates)
    room_cut = 0
    for _ in range(2):
        wide = choose_wide(candidates, packed_flash, limit - room_cut)
        defaults = {**ctx.knob_defaults, **{n: d for n, d in packed_knobs.items()
                                            if n not in wide}}
        fitted = _build_once(graph, replace(ctx, knob_defaults=defaults), patch_report)
        over = budget.estimate(fitted, target).flash - limit
        if over <= 0 or not wide:
            break
        room_cut += over
    return fitted


def _const_bytes(ls: LoweredStep) -> int:
    return sum(int(a.nbytes) for a in ls.consts.values())


def _stack(comp: Compilation, ctx: _Context) -> None:
    """The in-place kernels' temporaries that go on the C stack (memory/arena.py), those
    kernels lowered again and the arena planned again; nothing without in-place kernels."""
    modes = comp.liveness.modes
    if not modes:
        return
    sched = comp.schedule
    stack = stack_temporaries(sched, _scratch(comp.lowered), ctx.rules, modes, comp.plan.size)
    if not stack:
        return
    comp.lowered = [_relower(sched, ls, ctx, "_stack_temp", True)
                    if ls.step.index in stack else ls for ls in comp.lowered]
    comp.liveness, comp.plan = plan_arena(sched, _scratch(comp.lowered), ctx.rules, modes,
                                          _labels(comp.lowered))


def _labels(lowered: list[LoweredStep]) -> Callable[[int], str]:
    """Step index -> "kernel: op 'node'", how the pools' misfit message names a buffer's
    step."""
    labels = {ls.step.index: f"{ls.kernel.name}: {ls.step.node.op} {ls.step.node.name!r}"
              for ls in lowered}
    return lambda k: labels.get(k, f"step {k}")


def _plan_inplace(sched: Schedule, lowered: list[LoweredStep],
                  scratch: dict[int, list[tuple[str, int]]], ctx: _Context,
                  label: Callable[[int], str]
                  ) -> tuple[list[LoweredStep], Liveness, Plan]:
    """The arena plan of the lowered steps; with --inplace-conv, the in-place convs worth
    having (steps/inplace.py offers them, memory/liveness.py chooses by the liveness bound)
    lowered again in place, kept when their plan is smaller (Liveness.modes then names them).
    Only the in-place steps are lowered again."""
    options = ctx.options
    misfit: PoolsDoNotFit | None = None
    try:
        live, the_plan = plan_arena(sched, scratch, ctx.rules, {}, label)
    except PoolsDoNotFit as e:  # in-place convolutions below may still make it fit
        misfit = e
    offered = (conv_inplace_modes(sched, options.io_in_arena)
               if options.inplace and options.inplace_conv else {})
    modes = (choose_inplace(sched, scratch, offered, inplace_temps(sched, offered),
                            options.io_in_arena) if offered else {})
    if modes:
        # The in-place kernels trade their output buffer for a small temporary; with a
        # heuristic planner that is not always a smaller arena, so the smaller plan wins.
        alt = [_relower(sched, ls, ctx, "_inplace", modes[ls.step.index])
               if ls.step.index in modes else ls for ls in lowered]
        try:
            alt_live, alt_plan = plan_arena(sched, _scratch(alt), ctx.rules, modes, label)
            if misfit is not None or alt_plan.size < the_plan.size:
                lowered, live, the_plan, misfit = alt, alt_live, alt_plan, None
        except PoolsDoNotFit:
            pass
    if misfit is not None:
        raise AotcError(str(misfit)) from None
    return lowered, live, the_plan


def _relower(sched: Schedule, ls: LoweredStep, ctx: _Context, key: str, value: Any
             ) -> LoweredStep:
    """The step lowered again with one more attribute (an in-place mode, its temporary on the
    stack)."""
    step = ls.step
    step = Step(step.index, step.node.with_(attrs={**step.node.attrs, key: value}))
    return _lower_step(sched, step, ctx)


def _lower_step(sched: Schedule, step: Step, ctx: _Context) -> LoweredStep:
    """One step lowered; with --keep-float16-weights its float16-valued constants kept as
    float16 (lower/half.py)."""
    options = ctx.options
    ls = lower_step(sched, step, options.unroll_max, ctx.features, options.schedules,
                    _target_cpu(options.target), ctx.knob_defaults.get(step.node.name))
    return keep_float16(ls, sched.graph) if options.keep_float16_weights else ls


def _memory(options: CompileOptions) -> Memory:
    return Memory(options.inplace, options.inplace_conv, options.io_in_arena)


def _auto_key(c: Compilation) -> tuple[int, int]:
    """auto's order: the smaller arena, then the fewer MACs (the plain graph's are fewest)."""
    return c.plan.size, c.patches["patched_macs"] if c.patches else -1


def _auto_patches(graph: Graph, ctx: _Context) -> Compilation:
    """--patches auto: the plain graph and each candidate (aotc/memory/patch_choice.py: per
    grid size, the stage depth of smallest estimated peak within the MAC budget), all from the
    same passed graph, each built and planned in full; the smallest arena wins, then the
    fewest MACs (the plain one on a tie)."""
    options = ctx.options
    budget = options.patch_macs
    tried: list[dict[str, Any]] = []
    best: Compilation | None = None
    error: AotcError | None = None
    found = auto_candidates(graph, budget, _memory(options))
    for pg, plan_ in [(graph, None), *found]:
        try:
            c = _build(pg, ctx, None if plan_ is None else plan_.as_json())
        except AotcError as e:  # e.g. pools too small for this candidate
            error = error or e
            continue
        if plan_ is not None:
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
    return best


def _lower(sched: Schedule, ctx: _Context) -> list[LoweredStep]:
    options, by_name = ctx.options, ctx.by_name
    lowered = []
    for st in sched.steps:
        if st.ctrl:  # control flow around kernels: printed by render_context
            continue
        ctx.progress.detail(f"lowering kernel {st.index + 1}/{len(sched.steps)}")
        lowered.append(lower_external(sched, st, by_name, options.requant)
                       if "_byoc" in st.node.attrs
                       else _lower_step(sched, st, ctx))
    return lowered


def _reorder(sched: Schedule, lowered: list[LoweredStep],
             scratch: dict[int, list[tuple[str, int]]], ctx: _Context
             ) -> tuple[Schedule, list[LoweredStep], dict[int, list[tuple[str, int]]]]:
    """The schedule in the kernel order of smallest liveness bound (aotc/steps/reorder.py),
    lowered again (kernel names carry the step index), when its bound is smaller; else as it
    was."""
    ctx.progress.detail("operator order")
    per_node = {ls.step.node.name: sum(b for _, b in ls.scratch) for ls in lowered}
    graph = reorder(sched.graph, per_node)
    if graph is sched.graph:
        return sched, lowered, scratch
    new = make_schedule(graph)
    new_lowered = _lower(new, ctx)
    new_scratch = _scratch(new_lowered)
    if bounds(new, new_scratch).scratch >= bounds(sched, scratch).scratch:
        return sched, lowered, scratch
    return new, new_lowered, new_scratch


def _scratch(lowered: list[LoweredStep]) -> dict[int, list[tuple[str, int]]]:
    return {ls.step.index: ls.scratch for ls in lowered if ls.scratch}


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


@dataclass
class Bundle:
    """A compiled model on disk."""

    directory: Path
    name: str
    compilation: Compilation

    @property
    def arena_bytes(self) -> int:
        return self.compilation.plan.size

    @property
    def lower_bound(self) -> int:
        return self.compilation.lower_bound

    @property
    def weights_bytes(self) -> int:
        return self.compilation.weights_bytes

    @property
    def kernels(self) -> list[str]:
        return [ls.kernel.name for ls in self.compilation.lowered]

    def load(self, board: str | None = None) -> Any:
        """A runner with ``.run({name: array}) -> {name: array}`` (host build via cffi, or a
        QEMU-emulated board)."""
        if board is None or board == "host-cffi":
            from aotc.targets.host import Runner

            return Runner(self.directory)
        from aotc.targets.runner import BoardRunner

        return BoardRunner(self.directory, board)


# ---------------------------------------------------------------------------------- emission
def emit(c: Compilation, out_dir: str | os.PathLike[str]) -> dict[str, str]:
    return write_bundle(Path(out_dir), render_context(c))
