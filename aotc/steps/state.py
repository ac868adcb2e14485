"""State that lives between calls: the slots of the caller's state buffer and who writes them.

A stateful graph carries ``meta["state"]``: per slot the graph input that reads the state, the
graph output (by public name) that holds the next state, or None when nothing writes it, and
the slot's initial bytes (what ``<name>_reset`` writes). The frontends put it there (TFLite
resource variables, ONNX ``--state IN=OUT``).

Both ends of a slot live in the state buffer, never in the arena (storage kind "state"). The
kernel producing the next state writes straight into the slot when no kernel reads the old
state after it (the producing kernel itself may, at the element it writes: an elementwise op);
otherwise it writes an arena buffer and a Copy step at the end of the schedule moves it into
the slot. No loop may run between the two (a graph with control-flow loops always copies).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aotc.ir.graph import Node, Value

# The schedule (aotc/steps/schedule.py, which calls place_state) is typed Any here: this module
# sits below it.
Schedule = Any

STATE_ALIGN = 16  # each slot starts at a multiple of this in the state buffer


@dataclass(frozen=True)
class StateSlot:
    input: str  # the graph input that reads the state
    output: str | None  # the value written into the slot (None: never written)
    graph_output: str | None  # the graph output holding the next state (output, or its copy's
    # source)
    offset: int  # bytes from the start of the state buffer
    nbytes: int
    init: bytes  # the slot's bytes after <name>_reset
    direct: bool  # the producing kernel writes into the slot (else a Copy step at the end)


def state_meta(g: Any) -> list[dict[str, Any]]:
    return list(g.meta.get("state", ()))


def place_state(s: Schedule, step_cls: Any) -> None:
    """Marks the state inputs and outputs of a just made schedule as kind "state", adds the
    Copy steps of the slots whose producer cannot write in place, and sets ``s.state``. The
    graph keeps its nodes and outputs (the driver may reorder and schedule it again); only the
    copies' destination values are added to it."""
    g = s.graph
    meta = state_meta(g)
    if not meta:
        return
    public = g.meta.get("output_names", {})
    by_public = {public.get(o, o): o for o in g.outputs}
    used = {o for n in g.nodes for o in n.outputs} | set(g.inputs) | set(g.outputs)
    slots: list[StateSlot] = []
    offset = 0
    values = dict(g.values)
    for m in meta:
        x = m["input"]
        s.kind[s.root[x]] = "state"
        out = by_public.get(m["output"]) if m["output"] is not None else None
        graph_output, direct = out, False
        if out is not None:
            r = s.root[out]
            direct = _direct(s, s.root[x], r)
            del s.output_of[r]
            if direct:
                s.kind[r] = "state"
            else:
                s.kind[r] = "arena"
                fresh = f"{out}__state"
                while fresh in used:
                    fresh += "_"
                values[fresh] = Value(fresh, values[out].type)
                s.root[fresh], s.kind[fresh] = fresh, "state"
                s.steps.append(step_cls(len(s.steps), Node("Copy", fresh, (out,), (fresh,), {},
                                                           1, "aotc")))
                s.graph = g = g.replace(values=values)
                s.derived.clear()  # reads() now has one more step
                out = fresh
        nbytes = g.type(x).nbytes
        init = bytes(m["init"])
        assert len(init) == nbytes, "a state slot's initial bytes must fill it"
        slots.append(StateSlot(x, out, graph_output, offset, nbytes, init, direct))
        offset += -(-max(nbytes, 1) // STATE_ALIGN) * STATE_ALIGN
    s.state = slots


def _direct(s: Schedule, x_root: str, out_root: str) -> bool:
    """The one kernel writing ``out_root`` may write into the slot ``x_root`` reads: no later
    kernel reads the old state, and the writer reads it, if at all, at the element it writes."""
    if s.loops or out_root == x_root:
        return False
    writers = [st.index for st in s.steps if not st.ctrl
               and any(o and s.root.get(o) == out_root for o in st.node.outputs)]
    if len(writers) != 1:
        return False
    p = writers[0]
    for st in s.steps:
        for r, same_index in s.reads(st.index):
            if r != x_root:
                continue
            if st.index > p or (st.index == p and not same_index
                                and not _writes_over(s, st, x_root, out_root)):
                return False
    return True


def _writes_over(s: Schedule, st: Any, x_root: str, out_root: str) -> bool:
    """The step's op writes the output holding ``out_root`` over its one input holding
    ``x_root`` by design (``OpDef.writes_over``, e.g. SVDF's state)."""
    from aotc.ops import resolve

    n = st.node
    opdef = resolve(n.op, s.graph.opset, n.domain)
    for k_out, k_in in getattr(opdef, "writes_over", {}).items():
        if k_out >= len(n.outputs) or k_in >= len(n.inputs) or not n.outputs[k_out] \
                or not n.inputs[k_in]:
            continue
        if s.root[n.outputs[k_out]] != out_root or s.root[n.inputs[k_in]] != x_root:
            continue
        others = [i for k, i in enumerate(n.inputs) if k != k_in and i] + \
            [i for e in n.epilogue for i in e.inputs if i and i != "@"]
        return all(s.root.get(i) != x_root for i in others)
    return False


def state_bytes(slots: list[StateSlot]) -> int:
    if not slots:
        return 0
    last = slots[-1]
    return last.offset + last.nbytes


def slot_of_root(s: Schedule) -> dict[str, StateSlot]:
    """Storage root -> its slot (both the state input's root and a direct writer's)."""
    out: dict[str, StateSlot] = {}
    for slot in s.state:
        out[s.root[slot.input]] = slot
        if slot.output is not None:
            out[s.root[slot.output]] = slot
    return out
