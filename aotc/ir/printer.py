"""Stable text form of a Graph (for --dump-after and pass tests).

One line per node: ``%out0, %out1 = Op[attr=value, ...](%in0, %in1)  # name``.
Constants print as ``%w: float32[8,3,3,3] = const``; large ones show only their type.
"""

from __future__ import annotations

import numpy as np

from aotc.ir.graph import Graph, Node


def _attr(v: object) -> str:
    if isinstance(v, np.ndarray):
        return f"tensor<{v.dtype}{list(v.shape)}>"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_attr(x) for x in v) + "]"
    return repr(v) if isinstance(v, str) else str(v)


def node_line(n: Node) -> str:
    attrs = ", ".join(f"{k}={_attr(v)}" for k, v in sorted(n.attrs.items()))
    ins = ", ".join(f"%{i}" if i else "_" for i in n.inputs)
    outs = ", ".join(f"%{o}" for o in n.outputs)
    line = f"{outs} = {n.op}{'[' + attrs + ']' if attrs else ''}({ins})  # {n.name}"
    for e in n.epilogue:
        line += "\n      |> " + node_line(e)
    return line


def print_graph(g: Graph) -> str:
    lines = [f"graph {g.name} (opset {g.opset}) {{"]
    for name in g.inputs:
        lines.append(f"  input %{name}: {g.type(name)}")
    used = {i for n in g.nodes for node in (n, *n.epilogue) for i in node.inputs}
    for v in sorted(g.constants(), key=lambda v: v.name):
        if v.name in used:
            lines.append(f"  const %{v.name}: {v.type}")
    for n in g.nodes:
        types = ", ".join(str(g.type(o)) for o in n.outputs if o in g.values)
        lines.append(f"  {node_line(n)}  -> {types}")
    for name in g.outputs:
        lines.append(f"  output %{name}: {g.type(name)}")
    lines.append("}")
    return "\n".join(lines)
