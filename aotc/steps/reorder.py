"""Operator reordering: the topological order of a graph's kernels with the smallest liveness
bound (the `bounds(...).scratch` of aotc/memory/liveness.py: arena activations + kernel
scratch, no in-place, no alignment), after Liberis & Lane 2019 and Serenity (Ahn et al. 2020).

Exact for small graphs: dynamic programming over the sets of executed kernels (the state is
the set; the live bytes after it depend on the set only), as long as the number of such sets
stays at or below EXACT_STATES; beyond that, a greedy choice among the ready kernels. The
model's order is kept unless the chosen order has a strictly smaller bound, so the output does
not change where reordering gains nothing. Graphs with control flow (If/Loop/Scan) keep their
order: their bodies' steps and markers must stay contiguous (aotc/steps/schedule.py). Deterministic:
ties go to the kernel earlier in the model's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aotc.ir.graph import CHAIN, Graph, Node
from aotc.steps.schedule import CONTROL_OPS, is_view

# The exact search stops (and the greedy one runs) past this many sets of executed kernels.
EXACT_STATES = 20_000


@dataclass(frozen=True)
class _Costs:
    """The graph as the search sees it: kernels (non-view nodes) in the model's order."""

    kernels: list[Node]
    preds: list[int]  # kernel -> bit mask of the kernels it must follow
    out_bytes: list[int]  # bytes of arena buffers the kernel writes
    scratch: list[int]
    reads: list[list[int]]  # kernel -> the buffers it reads
    consumers: list[int]  # buffer -> bit mask of the kernels reading it
    size: list[int]  # buffer -> bytes (0 for graph outputs and constants: not in the arena)


def reorder(g: Graph, scratch: Mapping[str, int]) -> Graph:
    """``g`` with its nodes in the order of smallest liveness bound; ``scratch``: kernel
    scratch bytes by node name."""
    if any(n.op in CONTROL_OPS and not n.domain for n in g.nodes):
        return g
    if len({n.name for n in g.nodes}) != len(g.nodes):
        return g  # scratch is keyed by name
    c = _costs(g, scratch)
    model_order = list(range(len(c.kernels)))
    order = _exact(c)
    if order is None:
        order = _greedy(c)
    if peak(c, order) >= peak(c, model_order):
        return g
    return g.replace(nodes=_with_views(g, [c.kernels[k] for k in order]))


def _costs(g: Graph, scratch: Mapping[str, int]) -> _Costs:
    root: dict[str, str] = {}
    producer: dict[str, int] = {}
    kernels: list[Node] = []
    for n in g.nodes:
        if is_view(g, n):
            for o in n.outputs:
                if o:
                    root[o] = root.get(n.inputs[0], n.inputs[0])
            continue
        for o in n.outputs:
            if o:
                root[o] = o
                producer[o] = len(kernels)
        kernels.append(n)
    outputs = {root.get(o, o) for o in g.outputs}
    buffers = {r: b for b, r in enumerate(sorted(producer))}
    size = [0] * len(buffers)
    for r, b in buffers.items():
        size[b] = 0 if r in outputs else max(g.type(r).nbytes, 1)
    preds = [0] * len(kernels)
    reads: list[list[int]] = [[] for _ in kernels]
    consumers = [0] * len(buffers)
    for k, n in enumerate(kernels):
        ins = [i for i in n.inputs if i]
        ins += [i for e in n.epilogue for i in e.inputs if i and i != CHAIN]
        for i in ins:
            r = root.get(i, i)
            if r in buffers:
                preds[k] |= 1 << producer[r]
                consumers[buffers[r]] |= 1 << k
                if buffers[r] not in reads[k]:
                    reads[k].append(buffers[r])
    out_bytes = [0] * len(kernels)
    for r, b in buffers.items():
        k = producer[r]
        # An output nothing reads of a multi-output kernel is not stored (Schedule.dead).
        if consumers[b] or len([o for o in kernels[k].outputs if o]) == 1:
            out_bytes[k] += size[b]
            if not consumers[b]:
                reads[k].append(b)  # dies at the step that writes it
    return _Costs(kernels, preds, out_bytes, [scratch.get(n.name, 0) for n in kernels], reads,
                  consumers, size)


def _step(c: _Costs, done: int, live: int, k: int) -> tuple[int, int]:
    """Run kernel k after the set ``done`` holding ``live`` bytes: (bytes at k's step, bytes
    live after it)."""
    at = live + c.out_bytes[k] + c.scratch[k]
    after = done | 1 << k
    freed = sum(c.size[b] for b in c.reads[k] if c.consumers[b] & ~after == 0)
    return at, at - c.scratch[k] - freed


def peak(c: _Costs, order: list[int]) -> int:
    done, live, best = 0, 0, 0
    for k in order:
        at, live = _step(c, done, live, k)
        done |= 1 << k
        best = max(best, at)
    return best


def _ready(c: _Costs, done: int) -> list[int]:
    return [k for k in range(len(c.kernels))
            if not done >> k & 1 and c.preds[k] & ~done == 0]


def _exact(c: _Costs) -> list[int] | None:
    """Dynamic programming over executed sets, one layer per step: the smallest peak reaching
    each set, and the (previous set, kernel) it came from. None past EXACT_STATES sets."""
    # set -> (peak so far, live bytes, previous set, last kernel)
    layer: dict[int, tuple[int, int, int, int]] = {0: (0, 0, -1, -1)}
    back: list[dict[int, tuple[int, int, int, int]]] = [layer]
    states = 1
    for _ in c.kernels:
        nxt: dict[int, tuple[int, int, int, int]] = {}
        for done in sorted(layer):
            pk, live, _, _ = layer[done]
            for k in _ready(c, done):
                at, after = _step(c, done, live, k)
                s = done | 1 << k
                cand = (max(pk, at), after, done, k)
                if s not in nxt or cand[0] < nxt[s][0]:
                    nxt[s] = cand
        states += len(nxt)
        if states > EXACT_STATES:
            return None
        layer = nxt
        back.append(layer)
    order: list[int] = []
    s = (1 << len(c.kernels)) - 1
    for layer in reversed(back[1:]):
        _, _, prev, k = layer[s]
        order.append(k)
        s = prev
    return order[::-1]


def _greedy(c: _Costs) -> list[int]:
    """Each step runs the ready kernel with the fewest bytes at its step, then the fewest live
    after it, then the earliest in the model's order."""
    done, live, order = 0, 0, []
    for _ in c.kernels:
        best = min(_ready(c, done), key=lambda k: (*_step(c, done, live, k), k))
        _, live = _step(c, done, live, best)
        done |= 1 << best
        order.append(best)
    return order


def _with_views(g: Graph, kernels: list[Node]) -> list[Node]:
    """The node list: each view right before the first kernel that needs it, the views no
    kernel reads at the end, in the model's order."""
    view_of = {o: n for n in g.nodes if is_view(g, n) for o in n.outputs if o}
    out: list[Node] = []
    placed: set[str] = set()

    def need(value: str) -> None:
        n = view_of.get(value)
        if n is None or n.name in placed:
            return
        need(n.inputs[0])
        placed.add(n.name)
        out.append(n)

    for n in kernels:
        for i in [*n.inputs, *(i for e in n.epilogue for i in e.inputs)]:
            if i:
                need(i)
        out.append(n)
    out += [n for n in g.nodes if is_view(g, n) and n.name not in placed]
    return out
