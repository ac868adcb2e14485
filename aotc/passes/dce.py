"""Dead-code removal: drop nodes none of whose outputs is used, and unused constants."""

from __future__ import annotations

from aotc.ir.graph import CHAIN, Graph


def dce(g: Graph) -> Graph:
    live = set(g.outputs)
    keep = []
    for n in reversed(g.nodes):
        if any(o in live for o in n.outputs if o):
            keep.append(n)
            for step in (n, *n.epilogue):
                live.update(i for i in step.inputs if i and i != CHAIN)
    keep.reverse()
    values = {k: v for k, v in g.values.items()
              if not v.is_const or k in live}
    return g.replace(nodes=keep, values=values)
