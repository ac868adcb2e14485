"""Liveness over the schedule: one BufferReq per arena storage root and per kernel scratch
(and, with io_in_arena, per graph input and output), and the liveness bounds of a schedule.

In-place aliasing: a step may write its output over an input that dies at that step when the
kernel reads that input only at the output element's own index (a standalone elementwise op, or
an epilogue operand such as a residual). The output then shares the input's buffer.

In-place convolutions (conv_inplace_modes) go further, with a stated temporary (the kernel's
scratch, or a local array on the C stack when small and that saves arena): a depthwise conv
writes each output channel over its dead input channel, a 2-D conv its output rows through a
ring of rows (aotc/schedules/conv/line.py), a 1x1 stride-1 conv each output pixel over its dead
input pixel. The buffer then has the size of the larger of the two tensors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aotc.ir.graph import CHAIN
from aotc.memory.buffers import BufferReq, Plan, expand_plan, lower_bound, merged_req
from aotc.ops import resolve
from aotc.steps.schedule import Schedule


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


def _last_reads(s: Schedule) -> dict[str, int]:
    last: dict[str, int] = {}
    for st in s.steps:
        for r, _ in _step_reads(s, st.index):
            last[r] = st.index
    return last


# Convolutions whose data input is input 0 and weights input `w`.
_CONV_WEIGHTS = {"Conv": 1, "QLinearConv": 3}


def conv_inplace_modes(s: Schedule, io_in_arena: bool = False) -> dict[int, str]:
    """Conv steps that can write their output over their input X, which dies there:
    "channel" for a depthwise conv (group = input = output channels, an output channel no
    larger than an input channel): output channel c needs input channel c only, and lands on
    input channels <= c; "element" for such a depthwise conv whose outputs can be stored one
    by one at their own index with no temporary (_writes_behind_reads); "line" instead of
    "channel" where its ring of output rows (conv_line.line_delay) is smaller, and for a 2-D
    conv (group 1, batch 1) that "pixel" does not take; "pixel" for a 1x1 stride-1 unpadded
    conv with batch 1 and constant weights: output pixel p needs input pixel p only, and in
    NCHW lands on input pixel p (or past the input when there are more output channels). All
    need equal element sizes."""
    from aotc.ops.nn.conv import conv_pads

    g = s.graph
    planned = ("arena", "input", "output") if io_in_arena else ("arena",)
    last = _last_reads(s)
    # A conv reading a permuted or slice view indexes its input in another layout than it
    # writes.
    permuted = {n.outputs[0] for n in g.nodes if n.op in ("PermuteView", "SliceView")}
    modes: dict[int, str] = {}
    for st in s.steps:
        n = st.node
        if n.op not in _CONV_WEIGHTS or n.domain not in ("", "ai.onnx") or "_byoc" in n.attrs:
            continue
        if n.inputs[0] in permuted:
            continue
        x, y, w = n.inputs[0], n.outputs[0], n.inputs[_CONV_WEIGHTS[n.op]]
        xr, yr = s.root[x], s.root[y]
        if s.kind[xr] not in planned or s.kind[yr] not in planned or last.get(xr) != st.index:
            continue
        if [r for r, _ in _step_reads(s, st.index)].count(xr) != 1:
            continue  # also read by the epilogue
        xt, yt, wt = g.type(x), g.type(y), g.type(w)
        if xt.dtype.itemsize != yt.dtype.itemsize or len(xt.shape) < 3:
            continue
        c_in, m, group = xt.shape[1], yt.shape[1], n.attrs.get("group", 1)
        in_sp, out_sp, k_sp = xt.shape[2:], yt.shape[2:], wt.shape[2:]
        pb, pe = conv_pads(n, in_sp, k_sp)
        strides = n.attrs.get("strides") or [1] * len(k_sp)
        dil = n.attrs.get("dilations") or [1] * len(k_sp)
        line = _line_bytes(xt, yt, wt, group, pb, strides, dil) if xt.shape[0] == 1 else None
        if group == c_in == m and _prod(out_sp) <= _prod(in_sp):
            direct = xt.shape[0] == 1 and _writes_behind_reads(
                m, in_sp, out_sp, k_sp, pb, strides, dil)
            channel = _prod(out_sp) * yt.dtype.itemsize
            modes[st.index] = ("element" if direct else "line" if line is not None
                               and line < channel else "channel")
            continue
        if (group == 1 and xt.shape[0] == 1 and all(k == 1 for k in k_sp)
                and all(v == 1 for v in strides) and not any(pb) and not any(pe)
                and in_sp == out_sp and g.values[w].is_const):
            modes[st.index] = "pixel"
        elif (group == 1 or group == c_in == m) and line is not None:
            modes[st.index] = "line"
    return modes


def _line_bytes(xt: Any, yt: Any, wt: Any, group: int, pb: Sequence[int],
                strides: Sequence[int], dil: Sequence[int]) -> int | None:
    """The ring an in-place conv by line needs (aotc/schedules/conv/line.py), or None."""
    from aotc.schedules.conv.line import line_delay, line_temp_elems

    depthwise = group == xt.shape[1] == yt.shape[1] and group > 1
    if not depthwise and group != 1:
        return None
    delay = line_delay(depthwise, xt.shape[1], yt.shape[1], xt.shape[2:], yt.shape[2:],
                       wt.shape[2:], pb, strides, dil)
    if delay is None:
        return None
    return line_temp_elems(depthwise, yt.shape[1], yt.shape[2:], delay) * yt.dtype.itemsize


def _writes_behind_reads(channels: int, in_sp: Sequence[int], out_sp: Sequence[int],
                         k_sp: Sequence[int], pb: Sequence[int], strides: Sequence[int],
                         dil: Sequence[int]) -> bool:
    """True if a depthwise conv (batch 1, NCHW) computing its outputs in order, each stored
    at its own index right after it is computed, never overwrites an input element a later
    output reads: output index p lies below every input index read by the outputs after p.
    A strided depthwise (VWW's 2x2 downsampling) qualifies and needs no temporary at all."""
    nd = len(in_sp)
    # Per spatial dim and output coordinate: the lowest input coordinate read (a tap in
    # bounds), or None when every tap there is padding.
    lows: list[np.ndarray] = []
    for d in range(nd):
        o = np.arange(out_sp[d])[:, None]
        idx = o * strides[d] + np.arange(k_sp[d])[None, :] * dil[d] - pb[d]
        ok = (idx >= 0) & (idx < in_sp[d])
        lows.append(np.where(ok, idx, np.iinfo(np.int64).max).min(axis=1))
    never = np.iinfo(np.int64).max
    base = np.zeros((), np.int64)
    empty = np.zeros((), bool)
    for d in range(nd):
        stride = _prod(tuple(in_sp[d + 1:]))
        low = lows[d]
        base = base[..., None] + np.where(low == never, 0, low * stride)
        empty = empty[..., None] | (low == never)
    base = np.where(empty, never // 2, base).reshape(-1)
    in_ch, out_ch = _prod(tuple(in_sp)), base.size
    reads = (np.arange(channels, dtype=np.int64)[:, None] * in_ch + base[None, :]).reshape(-1)
    # later[p]: the lowest input index read by any output after p.
    later = np.append(np.minimum.accumulate(reads[::-1])[::-1][1:], never)
    return bool(np.all(np.arange(channels * out_ch) < later))


def inplace_temp_bytes(s: Schedule, step: int, mode: str) -> int:
    """The arena temporary an in-place conv needs: one output channel, one output pixel, a
    ring of output rows ("line"), or none ("element": each output stored at once). One of at
    most STACK_TEMP_MAX bytes counts 0: the compiler puts it on the C stack where it would
    make the arena larger (aotc/compiler.py _stack_temporaries)."""
    from aotc.loops.builder import STACK_TEMP_MAX

    if mode == "element":
        return 0
    n, g = s.steps[step].node, s.graph
    t = g.type(n.outputs[0])
    if mode == "line":
        from aotc.ops.nn.conv import conv_pads

        xt, wt = g.type(n.inputs[0]), g.type(n.inputs[_CONV_WEIGHTS[n.op]])
        pb, _ = conv_pads(n, xt.shape[2:], wt.shape[2:])
        nd = len(wt.shape) - 2
        line = _line_bytes(xt, t, wt, n.attrs.get("group", 1), pb,
                           n.attrs.get("strides") or [1] * nd,
                           n.attrs.get("dilations") or [1] * nd)
        assert line is not None
        nbytes = line
    else:
        nbytes = (_prod(t.shape[2:]) if mode == "channel" else t.shape[1]) * t.dtype.itemsize
    return 0 if nbytes <= STACK_TEMP_MAX else nbytes


def choose_inplace(s: Schedule, scratch: dict[int, list[tuple[str, int]]],
                   modes: Mapping[int, str], io_in_arena: bool = False) -> dict[int, str]:
    """The in-place convs worth having. Writing over the input merges two buffers into one
    of the larger size over both lifetimes, which can raise the peak elsewhere (a 1x1 conv
    that widens its input). Greedy, widest step first: keep a step when the liveness bound of
    the merged buffers, temporaries included, does not grow."""

    def bound(chosen: Mapping[int, str]) -> int:
        extra = dict(scratch)
        for i, mode in chosen.items():
            if temp := inplace_temp_bytes(s, i, mode):
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


def _prod(xs: tuple[int, ...]) -> int:
    out = 1
    for v in xs:
        out *= v
    return out


def analyse(s: Schedule, scratch: dict[int, list[tuple[str, int]]], align: int = 16,
            inplace: bool = True, io_in_arena: bool = False,
            kernel_inplace: Mapping[int, str] = {}) -> Liveness:  # noqa: B006 (read only)
    """Buffer requests for the arena. With io_in_arena the graph inputs (live from step 0 to
    their last read) and outputs (from their producer to the last step) are arena buffers too,
    and may take part in in-place aliasing like any activation. kernel_inplace: the steps
    lowered to write output 0 over input 0 (conv_inplace_modes), aliased unconditionally."""
    g = s.graph
    planned = ("arena", "input", "output") if io_in_arena else ("arena",)
    step_reads = [_step_reads(s, st.index) for st in s.steps]
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    writers: dict[str, int] = {}
    if io_in_arena:
        for name in g.inputs:
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
    alias: dict[str, str] = {}
    inplace_steps: dict[int, tuple[str, str]] = {}
    size = {r: max(g.type(r).nbytes, 1) for r in first}
    own = [BufferReq(r, size[r], align, first[r], last[r])
           for r in sorted(first, key=lambda r: (first[r], r))]
    if inplace:
        for st in s.steps:
            if st.index in kernel_inplace:
                xr, yr = s.root[st.node.inputs[0]], s.root[st.node.outputs[0]]
                buf = alias.get(xr, xr)
                assert last[buf] == st.index, "an in-place kernel's input must die at its step"
                alias[yr] = buf
                last[buf] = max(last[buf], last[yr])
                inplace_steps[st.index] = (xr, yr)
                continue
            outs = [o for o in st.node.outputs if o]
            if len(outs) != 1 or s.kind[s.root[outs[0]]] not in planned:
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
    # One request per buffer: its members (the roots written over each other in place) with
    # their own sizes and lifetimes, so the bytes above the live ones stay free for others.
    # An empty tensor (e.g. a Slice that selects nothing) still gets one placeholder byte.
    members: dict[str, list[BufferReq]] = {}
    for r in own:
        members.setdefault(alias.get(r.name, r.name), []).append(r)
    reqs = [merged_req(b, members[b]) for b in sorted(first, key=lambda r: (first[r], r))
            if b not in alias]
    for idx in sorted(scratch):
        for name, nbytes in scratch[idx]:
            reqs.append(BufferReq(name, nbytes, align, idx, idx))
            own.append(reqs[-1])
    modes = {i: m for i, m in kernel_inplace.items() if i in inplace_steps}
    return Liveness(reqs, alias, inplace_steps, modes, own)


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
