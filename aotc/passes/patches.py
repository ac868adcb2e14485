"""Patch-based execution of a CNN's memory-heavy first stage (``--patches``, docs/memory.md).

The stage is a chain of convolutions from a value X to a value Y, each read only by the
next. Its output Y is produced in a grid of spatial patches: each patch computes, layer by
layer backwards from its box of Y, the box of each layer's output its next layer reads (the
receptive field, halo included), so the stage runs once per patch over small maps instead of
once over the large ones. A patch's copy of a layer is an ordinary convolution with its own
pads: the layer's real padding on the sides at the image border, none inside. The first
layer reads its box of X in place through a SliceView (no copy, no arena bytes); the patch
outputs are joined into Y by Concat nodes (per patch row along W, then the rows along H).
Neighbouring patches recompute their overlap: the extra MACs are the price, reported.

This module is the rewrite (split_stage) and what it needs to know of the graph; which grid
and depth to use is chosen from memory estimates in aotc/memory/patch_choice.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aotc.ir.graph import CHAIN, Graph, Node, TensorType, Value
from aotc.ops import resolve

# Stage ops and the input index of their weights.
STAGE_OPS = {"Conv": 1, "QLinearConv": 3}
MAX_GRID = 8
DEFAULT_MAC_BUDGET = 0.25


@dataclass(frozen=True)
class PatchPlan:
    """What the rewrite did: the stage's nodes, the grid, the MACs before and after."""

    stage: tuple[str, ...]
    grid: tuple[int, int]  # rows, columns
    macs: int  # the whole graph's MACs without patches
    patched_macs: int
    peak: int = 0  # the estimated arena when choosing (estimate())
    plain_peak: int = 0  # the same without patches

    @property
    def extra_macs(self) -> int:
        return self.patched_macs - self.macs

    @property
    def extra_pct(self) -> float:
        return 100.0 * self.extra_macs / self.macs if self.macs else 0.0

    def as_json(self) -> dict[str, Any]:
        return {"grid": list(self.grid), "stage": list(self.stage), "depth": len(self.stage),
                "macs": self.macs, "patched_macs": self.patched_macs,
                "extra_macs": self.extra_macs, "extra_macs_pct": round(self.extra_pct, 2)}


# ------------------------------------------------------------------------------- the stage
def _eligible(g: Graph, n: Node) -> bool:
    if n.op not in STAGE_OPS or n.domain not in ("", "ai.onnx"):
        return False
    if "_byoc" in n.attrs or "_inplace" in n.attrs or not n.outputs or not n.outputs[0]:
        return False
    if len([o for o in n.outputs if o]) != 1:
        return False
    x, y = g.type(n.inputs[0]), g.type(n.outputs[0])
    if len(x.shape) != 4 or len(y.shape) != 4 or x.shape[0] != 1:
        return False
    opdef = resolve(n.op, g.opset, n.domain)
    if opdef is None or not getattr(opdef, "reads_permuted", False):
        return False
    # Epilogue operands must not vary over space: per-channel constants or scalars.
    for e in n.epilogue:
        for i in e.inputs:
            if not i or i == CHAIN:
                continue
            v = g.values[i]
            # right-aligned against [N, C, H, W]: its last two dims must be 1
            if not v.is_const or any(d != 1 for d in v.type.shape[-2:]):
                return False
    return True


def stage_chain(g: Graph) -> list[Node]:
    """The longest chain of eligible convolutions from the first one in the graph's order,
    each node's output read only by the next (as its data input) and not a graph output."""
    consumers = g.consumers()
    first = next((n for n in g.nodes if _eligible(g, n)), None)
    if first is None:
        return []
    chain = [first]
    while True:
        y = chain[-1].outputs[0]
        readers = consumers.get(y, [])
        if y in g.outputs or len(readers) != 1:
            break
        nxt = readers[0]
        uses = [i for node in (nxt, *nxt.epilogue) for i in node.inputs].count(y)
        if uses != 1 or nxt.inputs[0] != y or not _eligible(g, nxt):
            break
        chain.append(nxt)
    return chain


# ------------------------------------------------------------------------------- geometry
@dataclass(frozen=True)
class _Geo:
    k: tuple[int, int]
    s: tuple[int, int]
    d: tuple[int, int]
    pb: tuple[int, int]
    in_sp: tuple[int, int]


def _geometry(g: Graph, n: Node) -> _Geo:
    from aotc.ops.nn.conv import conv_pads

    in_sp = g.type(n.inputs[0]).shape[2:]
    k = tuple(g.type(n.inputs[STAGE_OPS[n.op]]).shape[2:])
    pb, _ = conv_pads(n, in_sp, k)
    s = tuple(n.attrs.get("strides") or (1, 1))
    d = tuple(n.attrs.get("dilations") or (1, 1))
    return _Geo(k, s, d, tuple(pb), tuple(in_sp))  # type: ignore[arg-type]


def _input_box(geo: _Geo, box: tuple[tuple[int, int], ...]
               ) -> tuple[tuple[tuple[int, int], ...], list[int], list[int]]:
    """The input box an output box [a, b) per spatial dim reads, and the pads (begin, end)
    that make a conv over exactly that input box give exactly that output box."""
    ins, pb, pe = [], [], []
    for dim, (a, b) in enumerate(box):
        lo = a * geo.s[dim] - geo.pb[dim]
        hi = (b - 1) * geo.s[dim] - geo.pb[dim] + (geo.k[dim] - 1) * geo.d[dim] + 1
        ia, ib = max(lo, 0), min(hi, geo.in_sp[dim])
        if ib <= ia:
            raise ValueError("a patch reads only padding")
        ins.append((ia, ib))
        pb.append(ia - lo)
        pe.append(hi - ib)
    return tuple(ins), pb, pe


def _splits(size: int, n: int) -> list[tuple[int, int]]:
    cuts = [k * size // n for k in range(n + 1)]
    return [(a, b) for a, b in zip(cuts, cuts[1:])]


def graph_macs(g: Graph) -> int:
    total = 0
    for n in g.nodes:
        opdef = resolve(n.op, g.opset, n.domain)
        f = getattr(opdef, "macs", None)
        total += int(f(n, g)) if f else 0
    return total


# ------------------------------------------------------------------------------- rewrite
def _fresh(values: dict[str, Value], base: str) -> str:
    name, k = base, 1
    while name in values:
        name, k = f"{base}_{k}", k + 1
    return name


def split_stage(g: Graph, stage: list[Node], grid: tuple[int, int]) -> Graph:
    """``g`` with ``stage`` (a chain from stage_chain) computed in a rows x cols grid of
    patches of its output. ValueError if a patch would be empty or read only padding."""
    rows, cols = grid
    y = stage[-1].outputs[0]
    yt = g.type(y)
    if rows > yt.shape[2] or cols > yt.shape[3] or rows < 1 or cols < 1:
        raise ValueError(f"a {rows}x{cols} grid does not fit a {yt.shape[2]}x{yt.shape[3]} map")
    geos = [_geometry(g, n) for n in stage]
    values = dict(g.values)
    for n in stage[:-1]:
        del values[n.outputs[0]]
    x = stage[0].inputs[0]
    concat = resolve("Concat", g.opset, "")
    assert concat is not None
    new: list[Node] = []
    row_outs: list[str] = []
    for r, hbox in enumerate(_splits(yt.shape[2], rows)):
        pieces: list[str] = []
        for c, wbox in enumerate(_splits(yt.shape[3], cols)):
            box: tuple[tuple[int, int], ...] = (hbox, wbox)
            layers: list[tuple[Node, tuple[tuple[int, int], ...], list[int]]] = []
            for n, geo in zip(reversed(stage), reversed(geos)):
                in_box, pb, pe = _input_box(geo, box)
                layers.append((n, box, pb + pe))
                box = in_box
            tag = f"patch{r}_{c}"
            xt = g.type(x)
            sv = _fresh(values, f"{x}__{tag}")
            values[sv] = Value(sv, TensorType(
                (1, xt.shape[1], box[0][1] - box[0][0], box[1][1] - box[1][0]), xt.dtype))
            new.append(Node("SliceView", f"{stage[0].name}__{tag}_in", (x,), (sv,),
                            {"starts": [0, 0, box[0][0], box[1][0]],
                             "sizes": list(values[sv].type.shape)}, 1, "aotc"))
            prev = sv
            for n, obox, pads in reversed(layers):
                ot = g.type(n.outputs[0])
                out = _fresh(values, f"{n.outputs[0]}__{tag}")
                values[out] = Value(out, TensorType(
                    (1, ot.shape[1], obox[0][1] - obox[0][0], obox[1][1] - obox[1][0]),
                    ot.dtype))
                attrs = {**n.attrs, "pads": pads, "auto_pad": "NOTSET"}
                new.append(n.with_(name=f"{n.name}__{tag}", inputs=(prev, *n.inputs[1:]),
                                   outputs=(out,), attrs=attrs))
                prev = out
            pieces.append(prev)
        if cols == 1:
            row_outs.append(pieces[0])
            continue
        out = y if rows == 1 else _fresh(values, f"{y}__row{r}")
        if out != y:
            values[out] = Value(out, TensorType(
                (1, yt.shape[1], hbox[1] - hbox[0], yt.shape[3]), yt.dtype))
        new.append(Node("Concat", f"{stage[-1].name}__row{r}", tuple(pieces), (out,),
                        {"axis": 3}, concat.since, ""))
        row_outs.append(out)
    if rows > 1:
        new.append(Node("Concat", f"{stage[-1].name}__rows", tuple(row_outs), (y,),
                        {"axis": 2}, concat.since, ""))
    elif cols == 1:  # a 1x1 grid: the one patch is Y
        raise ValueError("a 1x1 grid is the plain stage")
    names = {n.name for n in stage}
    nodes: list[Node] = []
    for n in g.nodes:
        if n.name == stage[-1].name:
            nodes += new
        elif n.name not in names:
            nodes.append(n)
    return g.replace(values=values, nodes=nodes)


# ------------------------------------------------------------------------------- choice
def describe(report: dict[str, Any]) -> str:
    """One line for a Compilation.patches report (compile's summary, ``aotc inspect``)."""
    head = f"patches auto (extra MACs <= {report['budget_pct']:g}%): " if report.get("auto") \
        else "patches: "
    if report.get("kept_plain"):
        return head + f"kept the plain plan ({report['kept_plain']})"
    line = head + (f"{report['grid'][0]}x{report['grid'][1]} over the first {report['depth']} "
                   f"layers, {report['extra_macs']:+,} MACs ({report['extra_macs_pct']:+.1f}%)")
    tried = report.get("candidates")
    if tried:
        line += "; tried " + ", ".join(f"{t['grid'][0]}x{t['grid'][1]}/{t['depth']} "
                                       f"{t['arena_bytes']:,} B ({t['extra_macs_pct']:+.1f}%)"
                                       for t in tried)
    return line
