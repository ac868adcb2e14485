"""Liveness over the schedule: one BufferReq per arena storage root and per kernel scratch
(and, with io_in_arena, per graph input and output), and the liveness bounds of a schedule.

In-place aliasing: a step may write its output over an input that dies at that step when the
kernel reads that input only at the output element's own index (a standalone elementwise op, or
an epilogue operand such as a residual). The output then shares the input's buffer.

In-place kernels (convolutions, aotc/steps/inplace.py offers them with their temporaries) go
further: the steps the driver chose write output 0 over input 0 whatever the index; the buffer
then has the size of the larger of the two tensors. This module sees only which steps do, and
the bytes of their temporaries: no op geometry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aotc.memory.buffers import BufferReq, Plan, expand_plan, lower_bound, merged_req
from aotc.steps.schedule import Schedule, Step


@dataclass
class Liveness:
    reqs: list[BufferReq]
    alias: dict[str, str] = field(default_factory=dict)  # arena root -> buffer it lives in
    inplace: dict[int, tuple[str, str]] = field(default_factory=dict)  # step -> (in, out root)
    # step -> "channel" | "element" | "pixel" | "line" for the in-place convs
    # (conv_inplace_modes)
    modes: dict[int, str] = field(default_factory=dict)
    # One request per arena root and scratch, with its own size and lifetime (not merged).
    roots: list[BufferReq] = field(default_factory=list)

    def buffer_of(self, root: str) -> str:
        return self.alias.get(root, root)

    def root_view(self, plan: Plan) -> tuple[list[BufferReq], Plan, list[tuple[str, str]]]:
        """Arguments for check_no_overlap on the roots as the kernels see them: each at its
        buffer's offset, the in-place (input, output) pairs the allowed overlaps."""
        placed = expand_plan(plan, {r.name: self.buffer_of(r.name) for r in self.roots})
        return self.roots, placed, list(self.inplace.values())


@dataclass(frozen=True)
class Bounds:
    """Liveness lower bounds with kernels taken as they are (no in-place, no alignment): the
    most bytes live at any step. Each counts one more kind of buffer than the one before, so
    activations <= scratch <= io always holds."""

    activations: int  # arena activations alone
    scratch: int  # activations + kernel scratch: the arena's bound when the caller owns the I/O
    io: int  # + graph inputs (step 0 to last read) and outputs (producer to the end)


def choose_inplace(s: Schedule, scratch: dict[int, list[tuple[str, int]]],
                   modes: Mapping[int, str], temps: Mapping[int, int],
                   io_in_arena: bool = False) -> dict[int, str]:
    """The in-place convs worth having, among ``modes`` (step -> mode, each needing
    ``temps[step]`` bytes of arena temporary; aotc/steps/inplace.py offers them). Writing over
    the input merges two buffers into one of the larger size over both lifetimes, which can
    raise the peak elsewhere (a 1x1 conv that widens its input). Greedy, widest step first:
    keep a step when the liveness bound of the merged buffers, temporaries included, does not
    grow."""

    def bound(chosen: Mapping[int, str]) -> int:
        extra = dict(scratch)
        for i in chosen:
            if temp := temps.get(i, 0):
                extra[i] = [*extra.get(i, []), (f"{i}_inplace_temp", temp)]
        return lower_bound(analyse(s, extra, 1, True, io_in_arena, chosen).reqs)

    live_at = {st.index: 0 for st in s.steps}
    for r in analyse(s, scratch, 1, False, io_in_arena).reqs:
        for i in range(r.first, r.last + 1):
            live_at[i] += r.size
    chosen: dict[int, str] = {}
    best = bound(chosen)
    for i in sorted(modes, key=lambda i: (-live_at[i], i)):
        trial = {**chosen, i: modes[i]}
        b = bound(trial)
        if b <= best:
            chosen, best = trial, b
    return dict(sorted(chosen.items()))


def analyse(s: Schedule, scratch: dict[int, list[tuple[str, int]]], align: int = 16,
            inplace: bool = True, io_in_arena: bool = False,
            kernel_inplace: Mapping[int, str] = {}) -> Liveness:  # noqa: B006 (read only)
    """Buffer requests for the arena. With io_in_arena the graph inputs (live from step 0 to
    their last read) and outputs (from their producer to the last step) are arena buffers too,
    and may take part in in-place aliasing like any activation. kernel_inplace: the steps
    lowered to write output 0 over input 0 (conv_inplace_modes), aliased unconditionally."""
    first, last_, _, size, order = _lifetimes(s, io_in_arena)
    last = dict(last_)  # in-place aliasing below extends some
    alias: dict[str, str] = {}
    inplace_steps: dict[int, tuple[str, str]] = {}
    key = ("own", io_in_arena, align)
    if key not in s.derived:  # the roots' own requests, before aliasing: the same every time
        s.derived[key] = [BufferReq(r, size[r], align, first[r], last[r]) for r in order]
    own = list(s.derived[key])
    if inplace:
        by_index, steps = _inplace_candidates(s, io_in_arena)
        if kernel_inplace:  # those steps too, in step order (their own rule comes first)
            steps = sorted({*steps, *kernel_inplace})
        for index in steps:
            if index in kernel_inplace:
                st = by_index[index][0]
                xr, yr = s.root[st.node.inputs[0]], s.root[st.node.outputs[0]]
                buf = alias.get(xr, xr)
                assert last[buf] == index, "an in-place kernel's input must die at its step"
                alias[yr] = buf
                last[buf] = max(last[buf], last[yr])
                inplace_steps[index] = (xr, yr)
                continue
            _, out_root, candidates, roots = by_index[index]
            for r in candidates:
                buf = alias.get(r, r)
                if last[buf] != index:
                    continue
                if any(alias.get(x, x) == buf for x in roots if x != r):
                    continue
                alias[out_root] = buf
                last[buf] = max(last[buf], last[out_root])
                inplace_steps[index] = (r, out_root)
                break
    # One request per buffer: its members (the roots written over each other in place) with
    # their own sizes and lifetimes, so the bytes above the live ones stay free for others.
    # An empty tensor (e.g. a Slice that selects nothing) still gets one placeholder byte.
    # Every alias points at a root that is not aliased itself (the buffer's first member).
    own_by_name = {r.name: r for r in own}
    members: dict[str, list[BufferReq]] = {}
    for y, b in alias.items():
        members.setdefault(b, [own_by_name[b]]).append(own_by_name[y])
    # Merging is pure and the members are the schedule's cached requests (kept alive there,
    # so their ids are stable): choose_inplace's many trials merge the same groups again.
    merged = s.derived.setdefault(("merged", io_in_arena, align), {})
    reqs = []
    for r in own:
        b = r.name
        if b in alias:
            continue
        group = members.get(b)
        if group is None:  # a buffer of one root: its own request
            reqs.append(r)
            continue
        mkey = (b, *map(id, group))
        if mkey not in merged:
            merged[mkey] = merged_req(b, group)
        reqs.append(merged[mkey])
    for idx in sorted(scratch):
        for name, nbytes in scratch[idx]:
            reqs.append(BufferReq(name, nbytes, align, idx, idx))
            own.append(reqs[-1])
    modes = {i: m for i, m in kernel_inplace.items() if i in inplace_steps}
    return Liveness(reqs, alias, inplace_steps, modes, own)


def _inplace_candidates(s: Schedule, io_in_arena: bool
                        ) -> tuple[dict[int, tuple[Step, str, list[str], list[str]]], list[int]]:
    """Per step, what analyse's in-place aliasing needs that does not depend on the aliasing
    so far: index -> (step, its one planned output's root, the roots it reads that could hold
    that output (read once, same layout, planned, of the output's bytes), every root it
    reads); and the indices of the steps with such candidates, in order. The same for every
    analyse of a schedule, so computed once per schedule."""
    key = ("inplace_candidates", io_in_arena)
    if key in s.derived:
        return s.derived[key]  # type: ignore[no-any-return]
    g = s.graph
    planned = ("arena", "input", "output") if io_in_arena else ("arena",)
    _, last, writers, _, _ = _lifetimes(s, io_in_arena)
    by_index: dict[int, tuple[Step, str, list[str], list[str]]] = {}
    with_candidates: list[int] = []
    for st in s.steps:
        by_index[st.index] = (st, "", [], [])
        outs = [o for o in st.node.outputs if o]
        if len(outs) != 1 or s.kind[s.root[outs[0]]] not in planned:
            continue
        out_root = s.root[outs[0]]
        if writers.get(out_root, 0) > 1:  # an If result or a loop state: several writers
            continue
        out_bytes = g.type(outs[0]).nbytes
        reads = s.reads(st.index)
        roots = [r for r, _ in reads]
        candidates = [r for r, same in reads
                      if same and roots.count(r) == 1 and r in last
                      and g.type(r).nbytes == out_bytes]
        by_index[st.index] = (st, out_root, candidates, roots)
        if candidates:
            with_candidates.append(st.index)
    s.derived[key] = (by_index, with_candidates)
    return by_index, with_candidates


def _lifetimes(s: Schedule, io_in_arena: bool
               ) -> tuple[dict[str, int], dict[str, int], dict[str, int], dict[str, int],
                          list[str]]:
    """(first, last, writers, bytes, roots by first use) of the planned roots, before in-place
    aliasing: the same for every analyse of a schedule, so computed once per schedule."""
    key = ("lifetimes", io_in_arena)
    if key in s.derived:
        return s.derived[key]  # type: ignore[no-any-return]
    g = s.graph
    planned = ("arena", "input", "output") if io_in_arena else ("arena",)
    step_reads = [s.reads(st.index) for st in s.steps]
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    writers: dict[str, int] = {}
    if io_in_arena:
        for name in g.inputs:
            if s.kind[name] in planned:  # not a state input (the caller's state buffer)
                first[name] = last[name] = 0
    for st in s.steps:
        for o in st.node.outputs:
            if o and o not in s.dead and s.kind[s.root[o]] in planned:
                r = s.root[o]
                first.setdefault(r, st.index)
                last[r] = st.index
                writers[r] = writers.get(r, 0) + 1
    for st in s.steps:
        for r, _ in step_reads[st.index]:
            if r in last:
                last[r] = max(last[r], st.index)
    end = max(len(s.steps) - 1, 0)
    for r in s.output_of:
        if r in last:
            last[r] = end
    _extend_over_loops(s, step_reads, first, last)
    size = {r: max(g.type(r).nbytes, 1) for r in first}
    order = sorted(first, key=lambda r: (first[r], r))
    s.derived[key] = (first, last, writers, size, order)
    return first, last, writers, size, order


def bounds(s: Schedule, scratch: dict[int, list[tuple[str, int]]]) -> Bounds:
    """The three liveness bounds of a schedule (see Bounds), all from the same lifetimes."""
    acts = analyse(s, {}, align=1, inplace=False).reqs
    with_scratch = analyse(s, scratch, align=1, inplace=False).reqs
    with_io = analyse(s, scratch, align=1, inplace=False, io_in_arena=True).reqs
    return Bounds(lower_bound(acts), lower_bound(with_scratch), lower_bound(with_io))


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
