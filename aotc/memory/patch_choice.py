"""Which patch grid and stage depth (--patches, aotc/passes/patches.py does the rewrite): each
candidate's arena is estimated as the liveness bound of its graph in node order, kernel scratch
not counted, with the in-place convolutions the options allow. ``auto`` tries every stage
depth and grid size within the budget of extra MACs (``--patch-macs``, default 25%) and hands
the few best to the driver, which plans them in full and keeps the smallest arena (the plain
graph on a tie)."""

from __future__ import annotations

from dataclasses import dataclass

from aotc.errors import AotcError
from aotc.ir.graph import Graph
from aotc.memory.buffers import lower_bound
from aotc.memory.liveness import analyse, choose_inplace
from aotc.passes.patches import MAX_GRID, PatchPlan, graph_macs, split_stage, stage_chain
from aotc.steps.inplace import conv_inplace_modes, inplace_temps
from aotc.steps.schedule import make_schedule


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
    s = make_schedule(g)
    modes: dict[int, str] = {}
    offered_temps: dict[int, int] = {}
    if mem.inplace and mem.inplace_conv:
        offered = conv_inplace_modes(s, mem.io_in_arena)
        offered_temps = inplace_temps(s, offered)
        modes = choose_inplace(s, {}, offered, offered_temps, mem.io_in_arena)
    temps = {i: [(f"{i}_temp", offered_temps[i])] for i in modes if offered_temps[i]}
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


