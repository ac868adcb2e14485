"""Fuse an anchor (Conv, Gemm, MatMul, pooling, or an elementwise op) with the chain of
elementwise ops that consume its result (bias Add, Relu, Clip, Sigmoid, HardSwish, LeakyRelu,
residual Add, ...) into one kernel.

Pre: nodes in schedule order. Post: each fused consumer is moved into ``anchor.epilogue`` with
the running value read through CHAIN; the anchor now produces the chain's last output. A consumer
is fused only if the anchor's result has no other use, is not a graph output, keeps its shape
and dtype, and the consumer's other operands are computed before the anchor runs.
"""

from __future__ import annotations

from aotc.ir.graph import CHAIN, Graph, Node
from aotc.ops import resolve


def fuse(g: Graph) -> Graph:
    kinds = {n.name: _kind(g, n) for n in g.nodes}
    consumers = g.consumers()
    position: dict[str, int] = {}
    for k, n in enumerate(g.nodes):
        for o in n.outputs:
            position[o] = k
    absorbed: set[str] = set()
    result: dict[str, Node] = {}
    for k, n in enumerate(g.nodes):
        if n.name in absorbed or kinds[n.name] not in ("anchor", "elementwise"):
            continue
        outs = [o for o in n.outputs if o]
        if len(outs) != 1:
            continue
        cur, chain, final = outs[0], [], outs[0]
        typ = g.type(cur)
        while True:
            users = consumers.get(cur, [])
            if cur in g.outputs or len(users) != 1:
                break
            e = users[0]
            if e.name in absorbed or kinds[e.name] != "elementwise" or e.epilogue:
                break
            if list(e.inputs).count(cur) != 1 or g.type(e.outputs[0]) != typ:
                break
            others = [i for i in e.inputs if i and i != cur]
            if any(position.get(i, -1) >= k for i in others):
                break  # the operand is computed after the anchor: cannot read it there
            chain.append(e.with_(inputs=tuple(CHAIN if i == cur else i for i in e.inputs),
                                 outputs=()))
            absorbed.add(e.name)
            cur = final = e.outputs[0]
        if chain:
            result[n.name] = n.with_(outputs=(final,), epilogue=tuple(chain))
    nodes = [result.get(n.name, n) for n in g.nodes if n.name not in absorbed]
    return g.replace(nodes=nodes)


def _kind(g: Graph, n: Node) -> str:
    opdef = resolve(n.op, g.opset, n.domain)
    return opdef.kind if opdef else "kernel"
