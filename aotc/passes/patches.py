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

``auto`` tries every stage depth and grid size within the budget of extra MACs
(``--patch-macs``, default 25%), ranks them by an estimate of the arena (the liveness bound
in node order, with the in-place convolutions the options allow), plans the few best in
full and keeps the smallest arena (the plain graph on a tie).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aotc.errors import AotcError
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
@dataclass(frozen=True)
class Memory:
    """How the estimate counts memory: as the compile options will plan it."""

    inplace: bool = True
    inplace_conv: bool = False
    io_in_arena: bool = False


def estimate(g: Graph, mem: Memory = Memory()) -> int:  # noqa: B008 (frozen)
    """The liveness bound of ``g`` in its node order, kernel scratch not counted, with the
    in-place convolutions the compiler would choose (their temporaries counted): what the
    arena of each candidate is ranked by before the few best are planned in full."""
    from aotc.memory.buffers import lower_bound
    from aotc.memory.liveness import (
        analyse,
        choose_inplace,
        conv_inplace_modes,
        inplace_temp_bytes,
    )
    from aotc.steps.schedule import make_schedule

    s = make_schedule(g)
    modes: dict[int, str] = {}
    if mem.inplace and mem.inplace_conv:
        modes = choose_inplace(s, {}, conv_inplace_modes(s, mem.io_in_arena), mem.io_in_arena)
    temps = {i: [(f"{i}_temp", t)] for i, m in modes.items()
             if (t := inplace_temp_bytes(s, i, m))}
    return lower_bound(analyse(s, temps, 1, mem.inplace, mem.io_in_arena, modes).reqs)


def candidates(g: Graph, grids: list[tuple[int, int]], budget: float | None = None,
               mem: Memory = Memory()) -> list[tuple[Graph, PatchPlan]]:  # noqa: B008
    """Per grid size, the stage depth of smallest estimated arena (PatchPlan.peak; then
    fewest MACs), within ``budget`` extra MACs (a fraction; None: any)."""
    chain = stage_chain(g)
    macs = graph_macs(g)
    plain_peak = estimate(g, mem) if chain else 0
    out = []
    for grid in grids:
        best: tuple[tuple[int, int], Graph, PatchPlan] | None = None
        for depth in range(1, len(chain) + 1):
            try:
                pg = split_stage(g, chain[:depth], grid)
            except ValueError:
                continue
            pm = graph_macs(pg)
            if budget is not None and macs and (pm - macs) / macs > budget:
                continue
            pk = estimate(pg, mem)
            if best is None or (pk, pm) < best[0]:
                best = ((pk, pm), pg, PatchPlan(tuple(x.name for x in chain[:depth]), grid,
                                                macs, pm, pk, plain_peak))
        if best is not None:
            out.append((best[1], best[2]))
    return out


# auto plans in full this many candidates of smallest estimate.
AUTO_PLANNED = 3


def auto_candidates(g: Graph, budget: float, mem: Memory = Memory()  # noqa: B008
                    ) -> list[tuple[Graph, PatchPlan]]:
    """``auto``'s candidates: per grid size 2..MAX_GRID the best depth within the budget,
    the AUTO_PLANNED of smallest estimate below the plain graph's."""
    grids = [(n, n) for n in range(2, MAX_GRID + 1)]
    found = [(pg, p) for pg, p in candidates(g, grids, budget, mem) if p.peak < p.plain_peak]
    return sorted(found, key=lambda c: (c[1].peak, c[1].patched_macs))[:AUTO_PLANNED]


def _parse(spec: str | int | tuple[int, int, int]) -> str | tuple[int, int] | tuple[int, int, int]:
    """"auto", (rows, cols) for N or RxC, or (depth, rows, cols) as given."""
    if isinstance(spec, tuple) or str(spec) == "auto":
        return spec
    try:
        dims = [int(v) for v in str(spec).lower().split("x")]
        if len(dims) not in (1, 2):
            raise ValueError
    except (TypeError, ValueError):
        raise AotcError(f"--patches {spec!r}: use auto, N (an N x N grid) or RxC") from None
    rows, cols = dims if len(dims) == 2 else (dims[0], dims[0])
    if min(rows, cols) < 1 or rows * cols < 2:
        raise AotcError(f"--patches {spec}: the grid size must be at least 2 (or auto)")
    return rows, cols


def patches(g: Graph, spec: str | int | tuple[int, int, int],
            mem: Memory = Memory()) -> tuple[Graph, PatchPlan]:  # noqa: B008
    """Apply ``--patches N`` (an N x N grid, N >= 2) or RxC at the stage depth of smallest
    estimated arena, or (depth, rows, cols). AotcError when the model has no stage or the
    grid does not fit it."""
    text = "x".join(map(str, spec[-2:])) if isinstance(spec, tuple) else str(spec)
    spec = _parse(spec)
    if spec == "auto":
        raise AotcError("--patches auto is chosen by the compiler (compile_model)")
    chain = stage_chain(g)
    if not chain:
        raise AotcError(f"--patches {text}: the model has no stage of convolutions to split "
                        f"into patches (a chain of Conv/QLinearConv over a batch-1 image)")
    if len(spec) == 3:
        depth, rows, cols = spec
        if not 1 <= depth <= len(chain):
            raise AotcError(f"--patches over {depth} layers: the stage has 1 to {len(chain)}")
        macs = graph_macs(g)
        try:
            pg = split_stage(g, chain[:depth], (rows, cols))
        except ValueError as e:
            raise AotcError(f"--patches {rows}x{cols} over {depth} layers: {e}") from None
        plan = PatchPlan(tuple(x.name for x in chain[:depth]), (rows, cols), macs,
                         graph_macs(pg))
    else:
        found = candidates(g, [spec], None, mem)
        if not found:
            shape = "x".join(map(str, g.type(chain[0].outputs[0]).shape[2:]))
            raise AotcError(f"--patches {text}: the grid does not fit the stage "
                            f"(its first layer's output is {shape})")
        pg, plan = found[0]
    return pg, plan


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
