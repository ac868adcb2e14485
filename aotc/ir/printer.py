"""Stable text form of a Graph (for --dump-after and pass tests).

One line per node: ``%out0, %out1 = Op[attr=value, ...](%in0, %in1)  # name  -> types``,
then one ``|> Op(@, %b)  # name`` line per fused epilogue step (``@`` is the running value).
Constants the nodes use print as ``const %w: float32[8,3,3,3]``, small ones (at most
8 elements) with their values: ``const %shape: int64[2] = [2, -1]``.
"""

from __future__ import annotations

import numpy as np

from aotc.ir.graph import CHAIN, Graph, Node


def _attr(v: object) -> str:
    if isinstance(v, np.ndarray):
        return f"tensor<{v.dtype}{list(v.shape)}>"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_attr(x) for x in v) + "]"
    return repr(v) if isinstance(v, str) else str(v)


_SHOW_VALUES = 8  # constants with at most this many elements print their values


def _const_value(a: np.ndarray | None) -> str:
    if a is None or a.size > _SHOW_VALUES:
        return ""
    # numpy scalars print as the shortest round-tripping text (0.1, not 0.10000000149).
    items = [str(x) for x in a.reshape(-1)]
    return " = " + (items[0] if a.ndim == 0 else "[" + ", ".join(items) + "]")


def _operand(name: str) -> str:
    if not name:
        return "_"  # an omitted optional input
    return "@" if name == CHAIN else f"%{name}"


def node_line(n: Node) -> str:
    """One node without its epilogue: ``%y = Op[attrs](%a, %b)  # name``; an epilogue step
    defines nothing and reads the running value as ``@``: ``Relu(@)  # name``."""
    attrs = ", ".join(f"{k}={_attr(v)}" for k, v in sorted(n.attrs.items()))
    ins = ", ".join(_operand(i) for i in n.inputs)
    call = f"{n.op}{'[' + attrs + ']' if attrs else ''}({ins})  # {n.name}"
    if not n.outputs:
        return call
    return ", ".join(f"%{o}" if o else "_" for o in n.outputs) + " = " + call


def print_graph(g: Graph) -> str:
    lines = [f"graph {g.name} (opset {g.opset}) {{"]
    for name in g.inputs:
        lines.append(f"  input %{name}: {g.type(name)}")
    used = {i for n in g.nodes for node in (n, *n.epilogue) for i in node.inputs}
    for v in sorted(g.constants(), key=lambda v: v.name):
        if v.name in used:
            lines.append(f"  const %{v.name}: {v.type}{_const_value(v.const)}")
    for n in g.nodes:
        types = ", ".join(str(g.type(o)) for o in n.outputs if o in g.values)
        lines.append(f"  {node_line(n)}  -> {types}")
        lines += [f"      |> {node_line(e)}" for e in n.epilogue]
    for name in g.outputs:
        lines.append(f"  output %{name}: {g.type(name)}")
    lines.append("}")
    return "\n".join(lines)
