"""Identity-like nodes (Identity, inference Dropout) are removed by renaming their consumers'
inputs; chains of view ops (Reshape of Reshape, ...) are left to the memory planner, which maps
every view onto its source's storage, so they cost neither a kernel nor bytes.

Post: no Identity/Dropout node remains unless its output is a graph output (its name is
part of the C API; the schedule maps it onto its source's storage or inserts a Copy).
"""

from __future__ import annotations

from aotc.ir.graph import Graph, Node

_NOOPS = ("Identity", "Dropout")


def views(g: Graph) -> Graph:
    rename: dict[str, str] = {}
    nodes: list[Node] = []
    for n in g.nodes:
        n = n.with_(inputs=tuple(rename.get(i, i) for i in n.inputs))
        if n.op in _NOOPS and n.outputs[0] not in g.outputs:
            rename[n.outputs[0]] = n.inputs[0]
            continue
        nodes.append(n)
    return g.replace(nodes=nodes)
