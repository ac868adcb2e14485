"""What compiling takes and gives: CompileOptions in, Compilation out (the passed graph, the
kernel schedule, the lowered kernels, the memory plan and its bounds, the weights). The driver
(aotc/compiler.py) fills it stage by stage; codegen renders it; the tools read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aotc.byoc.backend import Library
from aotc.byoc.partition import Row
from aotc.ir.graph import Graph
from aotc.lower.lowering import LoweredStep
from aotc.memory.buffers import Plan
from aotc.memory.liveness import Bounds, Liveness
from aotc.memory.pools import Pool
from aotc.memory.report import ascii_timeline, plan_to_json
from aotc.passes.patches import DEFAULT_MAC_BUDGET
from aotc.steps.schedule import Schedule
from aotc.steps.state import state_bytes


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
    # Keep float16 weights (a .tflite model's behind DEQUANTIZE/DENSIFY, an ONNX model's
    # float16 initializers cast to float32) float16 in flash, converted where the kernels load
    # them: every float32 constant a kernel reads whose values all are float16 numbers
    # (aotc/lower/half.py); the outputs are bit-identical. Without it they are float32.
    keep_float16_weights: bool = False
    # Every Loop without a trip count (a TFLite WHILE, an ONNX Loop without M) stops after
    # this many iterations at most (aotc/passes/bodies.py bound_loops); None: it runs while
    # its condition holds.
    max_loop_iterations: int | None = None
    # Memory pools, fastest first: Pool objects or "NAME:BYTES[:SECTION]" strings (--pool).
    # None: the --target board's pools (board.toml [[pools]]) if it lists any, else one arena;
    # (): one arena.
    pools: tuple[Any, ...] | None = None
    # Patch-based execution of the first stage (aotc/passes/patches.py): None (off), "auto",
    # N for an N x N grid, "RxC", or (depth, rows, cols); patch_macs: auto's budget of extra
    # MACs (a fraction).
    patches: str | int | tuple[int, int, int] | None = None
    patch_macs: float = DEFAULT_MAC_BUDGET
    # "INPUT=OUTPUT" pairs (--state): a graph input and the graph output holding its next
    # value become a slot of the caller's state buffer (aotc/steps/state.py), zero after reset.
    # A TFLite model's resource variables become slots without this.
    state: tuple[str, ...] = ()


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
    def state_bytes(self) -> int:
        """Bytes of the caller's state buffer (0: the model keeps no state between calls)."""
        return state_bytes(self.schedule.state)

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
    if c.schedule.state:
        rep["state_bytes"] = c.state_bytes
    for entry, pool in zip(rep.get("pools", []), c.pools):
        entry.update(capacity=pool.size, section=pool.section)
    return rep
