"""Graph -> Schedule: the ordered kernel steps (the AOT "main") and where each value lives.

View ops (Reshape, Flatten, Squeeze, Unsqueeze, ...) get no step: their output shares the
storage root of their input. Storage kinds: "input" / "output" (user buffers), "const" (flash),
"arena" (planned). A graph output whose producer is a view of another value takes that value's
storage; when that is impossible (a graph input, a constant, another output) a Copy is inserted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aotc.ir.graph import Graph, Node, Value
from aotc.ops import resolve


@dataclass(frozen=True)
class Step:
    index: int
    node: Node


@dataclass
class Schedule:
    graph: Graph
    steps: list[Step]
    root: dict[str, str]  # value -> storage root value
    kind: dict[str, str]  # root -> "input" | "output" | "const" | "arena"
    output_of: dict[str, str] = field(default_factory=dict)  # root -> graph output name
    # Outputs of multi-output steps that nothing reads (an unused Split piece): not stored.
    dead: set[str] = field(default_factory=set)

    def storage_kind(self, value: str) -> str:
        return self.kind[self.root[value]]


def is_view(g: Graph, n: Node) -> bool:
    opdef = resolve(n.op, g.opset, n.domain)
    return bool(opdef and opdef.kind == "view" and not n.epilogue)


def make_schedule(g: Graph) -> Schedule:
    g = _insert_output_copies(g)
    root: dict[str, str] = {}
    kind: dict[str, str] = {}
    for name in g.inputs:
        root[name], kind[name] = name, "input"
    for v in g.constants():
        root[v.name], kind[v.name] = v.name, "const"
    steps: list[Step] = []
    for n in g.nodes:
        if is_view(g, n):
            root[n.outputs[0]] = root[n.inputs[0]]
            continue
        for o in n.outputs:
            if o:
                root[o], kind[o] = o, "arena"
        steps.append(Step(len(steps), n))
    output_of: dict[str, str] = {}
    for o in g.outputs:
        r = root[o]
        assert kind[r] == "arena" and r not in output_of, "copy insertion missed an output"
        kind[r] = "output"
        output_of[r] = o
    used = set(g.consumers()) | set(g.outputs)
    dead = {o for st in steps if len(st.node.outputs) > 1 for o in st.node.outputs
            if o and o not in used}
    return Schedule(g, steps, root, kind, output_of, dead)


def _insert_output_copies(g: Graph) -> Graph:
    """Give every graph output its own kernel-written root (insert Copy where needed)."""
    root: dict[str, str] = {}
    src_kind: dict[str, str] = {name: "input" for name in g.inputs}
    src_kind.update({v.name: "const" for v in g.constants()})
    for n in g.nodes:
        for o in n.outputs:
            if o:
                root[o] = root.get(n.inputs[0], n.inputs[0]) if is_view(g, n) else o
    for name in src_kind:
        root[name] = name
    claimed: set[str] = set()
    values = dict(g.values)
    nodes = list(g.nodes)
    outputs = list(g.outputs)
    public = dict(g.meta.get("output_names", {}))
    for k, o in enumerate(g.outputs):
        r = root[o]
        if src_kind.get(r) is None and r not in claimed:
            claimed.add(r)
            continue
        # The output is a constant, a graph input, a view of one, or shares its root with an
        # earlier output: copy it into a fresh value, which keeps the model's name in the C API.
        # Nothing else is renamed, so no consumer (fused or not) can end up reading the
        # output buffer before the copy writes it.
        fresh, n = f"{o}__out", 1
        while fresh in values:
            fresh, n = f"{o}__out{n}", n + 1
        values[fresh] = Value(fresh, values[o].type)
        nodes.append(Node("Copy", f"copy_{k}", (o,), (fresh,), {}, 1, "aotc"))
        outputs[k] = fresh
        public[fresh] = public.get(o, o)
    return g.replace(values=values, nodes=nodes, outputs=outputs,
                     meta={**g.meta, "output_names": public})
