"""A pass applied inside the bodies of If, Loop and Scan too (aotc/ops/control): each body is
a closed graph (its formal inputs and captures are its inputs), passed innermost first, then
the graph around it. Used for qdq and dce, so the int8 operators of a TFLite IF or WHILE
subgraph run on the same integer kernels as those of the main graph (bit-exact with TFLM)."""

from __future__ import annotations

from collections.abc import Callable

from aotc.ir.graph import Graph, Node
from aotc.ops.control.if_loop_scan import Body


def in_bodies(fn: Callable[[Graph], Graph]) -> Callable[[Graph], Graph]:
    def run(g: Graph) -> Graph:
        if not any(isinstance(v, Body) for n in g.nodes for v in n.attrs.values()):
            return fn(g)
        return fn(g.replace(nodes=[_node(n, run, g) for n in g.nodes]))

    return run


def _node(n: Node, run: Callable[[Graph], Graph], g: Graph) -> Node:
    bodies = {k: v for k, v in n.attrs.items() if isinstance(v, Body)}
    if not bodies:
        return n
    attrs = dict(n.attrs)
    for k, body in bodies.items():
        inner = Graph(f"{n.name}.{k}", [*body.inputs, *(c for c, _ in body.captures)],
                      list(body.outputs), dict(body.values), list(body.nodes), g.opset)
        out = run(inner)
        attrs[k] = Body(body.inputs, body.captures, tuple(out.outputs), tuple(out.nodes),
                        out.values)
    return n.with_(attrs=attrs)


def bound_loops(g: Graph, limit: int) -> Graph:
    """--max-loop-iterations: every Loop without a trip count (a TFLite WHILE, an ONNX Loop
    without M), in the graph and in bodies, stops after ``limit`` iterations at most (its C
    loop reads ``i < limit && cond``); the loop-carried outputs are then the values after
    ``limit`` iterations. Loops with a trip count keep theirs."""
    def node(n: Node) -> Node:
        bodies = {k: v for k, v in n.attrs.items() if isinstance(v, Body)}
        attrs = dict(n.attrs)
        for k, body in bodies.items():
            attrs[k] = Body(body.inputs, body.captures, body.outputs,
                            tuple(node(m) for m in body.nodes), body.values)
        if n.op == "Loop" and not n.inputs[0] and attrs.get("_trip") is None:
            attrs["_trip"] = limit
        return n.with_(attrs=attrs) if bodies or attrs != dict(n.attrs) else n

    return g.replace(nodes=[node(n) for n in g.nodes])
