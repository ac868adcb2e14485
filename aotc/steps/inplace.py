"""Which kernels may write their output over their dying input beyond elementwise aliasing
(--inplace-conv): the in-place modes of convolutions, from their geometry, and the temporary
each needs. A depthwise conv writes each output channel over its dead input channel, a 2-D
conv its output rows through a ring of rows (aotc/schedules/conv/line.py), a 1x1 stride-1 conv
each output pixel over its dead input pixel. The memory planner sees only the result: the
steps and the temporaries' bytes (aotc/memory/liveness.py choose_inplace)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from aotc.steps.schedule import Schedule


def _last_reads(s: Schedule) -> dict[str, int]:
    last: dict[str, int] = {}
    for st in s.steps:
        for r, _ in s.reads(st.index):
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
    "channel" where its ring of output rows (line.line_delay) is smaller, and for a 2-D
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
        if [r for r, _ in s.reads(st.index)].count(xr) != 1:
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


@functools.lru_cache(maxsize=4096)
def _line_delay(*geometry: Any) -> int | None:
    """line_delay, remembered: --patches auto asks about the same conv geometries for every
    candidate graph it estimates."""
    from aotc.schedules.conv.line import line_delay

    return line_delay(*geometry)


def _line_bytes(xt: Any, yt: Any, wt: Any, group: int, pb: Sequence[int],
                strides: Sequence[int], dil: Sequence[int]) -> int | None:
    """The ring an in-place conv by line needs (aotc/schedules/conv/line.py), or None."""
    from aotc.schedules.conv.line import line_temp_elems

    depthwise = group == xt.shape[1] == yt.shape[1] and group > 1
    if not depthwise and group != 1:
        return None
    delay = _line_delay(depthwise, xt.shape[1], yt.shape[1], tuple(xt.shape[2:]),
                        tuple(yt.shape[2:]), tuple(wt.shape[2:]), tuple(pb), tuple(strides),
                        tuple(dil))
    if delay is None:
        return None
    return line_temp_elems(depthwise, yt.shape[1], yt.shape[2:], delay) * yt.dtype.itemsize


def _writes_behind_reads(channels: int, in_sp: Sequence[int], out_sp: Sequence[int],
                         k_sp: Sequence[int], pb: Sequence[int], strides: Sequence[int],
                         dil: Sequence[int]) -> bool:
    """See _writes_behind_reads_of (remembered per geometry, like _line_delay)."""
    return _writes_behind_reads_of(channels, tuple(in_sp), tuple(out_sp), tuple(k_sp),
                                   tuple(pb), tuple(strides), tuple(dil))


@functools.lru_cache(maxsize=4096)
def _writes_behind_reads_of(channels: int, in_sp: Sequence[int], out_sp: Sequence[int],
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


def inplace_temps(s: Schedule, modes: Mapping[int, str]) -> dict[int, int]:
    """Step -> the arena temporary (inplace_temp_bytes) of each offered in-place mode."""
    return {i: inplace_temp_bytes(s, i, m) for i, m in modes.items()}


def _prod(xs: tuple[int, ...]) -> int:
    out = 1
    for v in xs:
        out *= v
    return out
