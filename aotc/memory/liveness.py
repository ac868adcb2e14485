"""Liveness over the schedule: one BufferReq per arena storage root and per kernel scratch.

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
            inplace: bool = True) -> Liveness:
    g = s.graph
    step_reads = [_step_reads(s, st.index) for st in s.steps]
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    writers: dict[str, int] = {}
    for st in s.steps:
        for o in st.node.outputs:
            if o and o not in s.dead and s.kind[s.root[o]] == "arena":
                r = s.root[o]
                first.setdefault(r, st.index)
                last[r] = st.index
                writers[r] = writers.get(r, 0) + 1
    for st in s.steps:
        for r, _ in step_reads[st.index]:
            if r in last:
                last[r] = max(last[r], st.index)
    _extend_over_loops(s, step_reads, first, last)
    alias: dict[str, str] = {}
    inplace_steps: dict[int, tuple[str, str]] = {}
    if inplace:
        for st in s.steps:
            outs = [o for o in st.node.outputs if o]
            if len(outs) != 1 or s.kind[s.root[outs[0]]] != "arena":
                continue
            out_root = s.root[outs[0]]
            if writers.get(out_root, 0) > 1:  # an If result or a loop state: several writers
                continue
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


def _extend_over_loops(s: Schedule, step_reads: list[list[tuple[str, bool]]],
                       first: dict[str, int], last: dict[str, int]) -> None:
    """A buffer used inside a loop and defined outside it is read again by the next iteration:
    it lives to the loop's end. One written inside and used after it (a scan output, a state)
    holds earlier iterations' results: it lives from the loop's start. Inner loops first."""
    for begin, end in sorted(s.loops, key=lambda r: r[1] - r[0]):
        for st in s.steps[begin:end + 1]:
            for r, _ in step_reads[st.index]:
                if r in first and first[r] < begin:
                    last[r] = max(last[r], end)
            for o in st.node.outputs:
                r = s.root.get(o, "")
                if r in first and last[r] > end:
                    first[r] = min(first[r], begin)


def io_inclusive_bound(s: Schedule) -> int:
    """The research definition of the bound (targets.md 3.1): graph inputs live from step 0 to
    their last use, outputs from their producer to the end; no in-place, no alignment."""
    g = s.graph
    reqs = list(analyse(s, {}, align=1, inplace=False).reqs)
    last_step = max(len(s.steps) - 1, 0)
    last_read: dict[str, int] = {}
    for st in s.steps:
        for r, _ in _step_reads(s, st.index):
            last_read[r] = st.index
    for name in g.inputs:
        reqs.append(BufferReq(name, g.type(name).nbytes, 1, 0, last_read.get(name, 0)))
    for r, o in s.output_of.items():
        f = next((st.index for st in s.steps if r in st.node.outputs), 0)
        reqs.append(BufferReq(o, g.type(o).nbytes, 1, f, last_step))
    return lower_bound(reqs)
