"""Identity-like nodes (Identity, inference Dropout) are removed by renaming their consumers'
inputs; chains of view ops (Reshape of Reshape, ...) are left to the memory planner, which maps
every view onto its source's storage, so they cost neither a kernel nor bytes.

A Dropout's mask output becomes a constant (all true).

Post: no Identity/Dropout node remains unless its output is a graph output (its name is
part of the C API; the schedule maps it onto its source's storage or inserts a Copy).
"""

from __future__ import annotations

import numpy as np

from aotc.ir.graph import Graph, Node, Value

_NOOPS = ("Identity", "Dropout", "OptionalGetElement")


def views(g: Graph) -> Graph:
    rename: dict[str, str] = {}
    nodes: list[Node] = []
    values = dict(g.values)
    for n in g.nodes:
        n = n.with_(inputs=tuple(rename.get(i, i) for i in n.inputs))
        if n.op == "Dropout" and len(n.outputs) > 1:
            # Inference Dropout keeps every element: its mask is a constant all-true tensor.
            if n.outputs[1]:
                mask = np.ones(values[n.outputs[1]].type.shape, np.bool_)
                mask.setflags(write=False)
                values[n.outputs[1]] = Value(n.outputs[1], values[n.outputs[1]].type, mask)
            n = n.with_(outputs=n.outputs[:1])
        if n.op in _NOOPS and n.outputs[0] not in g.outputs:
            rename[n.outputs[0]] = n.inputs[0]
            continue
        nodes.append(n)
    return g.replace(values=values, nodes=nodes)
