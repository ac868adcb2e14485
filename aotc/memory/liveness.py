"""Liveness over the schedule: one BufferReq per arena storage root and per kernel scratch
(and, with io_in_arena, per graph input and output), and the liveness bounds of a schedule.

In-place aliasing: a step may write its output over an input that dies at that step when the
kernel reads that input only at the output element's own index (a standalone elementwise op, or
an epilogue operand such as a residual). The output then shares the input's buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aotc.ir.graph import CHAIN
from aotc.memory.buffers import BufferReq, lower_bound
from aotc.ops import resolve
from aotc.schedule import Schedule


@dataclass
class Liveness:
    reqs: list[BufferReq]
    alias: dict[str, str] = field(default_factory=dict)  # arena root -> buffer it lives in
    inplace: dict[int, tuple[str, str]] = field(default_factory=dict)  # step -> (in, out root)

    def buffer_of(self, root: str) -> str:
        return self.alias.get(root, root)


@dataclass(frozen=True)
class Bounds:
    """Liveness lower bounds with kernels taken as they are (no in-place, no alignment): the
    most bytes live at any step. Each counts one more kind of buffer than the one before, so
    activations <= scratch <= io always holds."""

    activations: int  # arena activations alone
    scratch: int  # activations + kernel scratch: the arena's bound when the caller owns the I/O
    io: int  # + graph inputs (step 0 to last read) and outputs (producer to the end)


def _step_reads(s: Schedule, step_index: int) -> list[tuple[str, bool]]:
    """(root, same_index) per input read of a step; same_index: read only at the output index."""
    st = s.steps[step_index]
    n, g = st.node, s.graph
    opdef = resolve(n.op, g.opset, n.domain)
    out_shape = g.type(n.outputs[0]).shape if n.outputs and n.outputs[0] else None
    elementwise = bool(opdef and opdef.kind == "elementwise")
    reads = []
    for i in n.inputs:
        if i:
            reads.append((s.root[i], elementwise and g.type(i).shape == out_shape))
    for e in n.epilogue:
        for i in e.inputs:
            if i and i != CHAIN:
                reads.append((s.root[i], g.type(i).shape == out_shape))
    return reads


def analyse(s: Schedule, scratch: dict[int, list[tuple[str, int]]], align: int = 16,
            inplace: bool = True, io_in_arena: bool = False) -> Liveness:
    """Buffer requests for the arena. With io_in_arena the graph inputs (live from step 0 to
    their last read) and outputs (from their producer to the last step) are arena buffers too,
    and may take part in in-place aliasing like any activation."""
    g = s.graph
    planned = ("arena", "input", "output") if io_in_arena else ("arena",)
    step_reads = [_step_reads(s, st.index) for st in s.steps]
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    if io_in_arena:
        for name in g.inputs:
            first[name] = last[name] = 0
    for st in s.steps:
        for o in st.node.outputs:
            if o and o not in s.dead and s.kind[s.root[o]] in planned:
                first[s.root[o]] = st.index
                last[s.root[o]] = st.index
    for st in s.steps:
        for r, _ in step_reads[st.index]:
            if r in last:
                last[r] = max(last[r], st.index)
    end = max(len(s.steps) - 1, 0)
    for r in s.output_of:
        if r in last:
            last[r] = end
    alias: dict[str, str] = {}
    inplace_steps: dict[int, tuple[str, str]] = {}
    if inplace:
        for st in s.steps:
            outs = [o for o in st.node.outputs if o]
            if len(outs) != 1 or s.kind[s.root[outs[0]]] not in planned:
                continue
            out_root = s.root[outs[0]]
            out_bytes = g.type(outs[0]).nbytes
            reads = step_reads[st.index]
            roots = [r for r, _ in reads]
            for r, same in reads:
                buf = alias.get(r, r)
                if not same or roots.count(r) != 1 or r not in last:
                    continue
                if last[buf] != st.index or g.type(r).nbytes != out_bytes:
                    continue
                if any(alias.get(x, x) == buf for x in roots if x != r):
                    continue
                alias[out_root] = buf
                last[buf] = max(last[buf], last[out_root])
                inplace_steps[st.index] = (r, out_root)
                break
    reqs = []
    for r in sorted(first, key=lambda r: (first[r], r)):
        if r in alias:
            continue
        # An empty tensor (e.g. a Slice that selects nothing) still gets one placeholder byte.
        reqs.append(BufferReq(r, max(g.type(r).nbytes, 1), align, first[r], last[r]))
    for idx in sorted(scratch):
        for name, nbytes in scratch[idx]:
            reqs.append(BufferReq(name, nbytes, align, idx, idx))
    return Liveness(reqs, alias, inplace_steps)


def bounds(s: Schedule, scratch: dict[int, list[tuple[str, int]]]) -> Bounds:
    """The three liveness bounds of a schedule (see Bounds), all from the same lifetimes."""
    acts = analyse(s, {}, align=1, inplace=False).reqs
    with_scratch = analyse(s, scratch, align=1, inplace=False).reqs
    with_io = analyse(s, scratch, align=1, inplace=False, io_in_arena=True).reqs
    return Bounds(lower_bound(acts), lower_bound(with_scratch), lower_bound(with_io))
