"""QDQ recurrent ops -> int8-weight kernels: an ONNX RNN / GRU / LSTM whose W and R are both
DequantizeLinear of constant int8 / uint8 tensors becomes QdqRNN / QdqGRU / QdqLSTM
(aotc/ops/sequence/qrecurrent.py), which keep the weights 8-bit; when X is the
DequantizeLinear of a per-tensor 8-bit activation, the kernel reads the integers too (x.W
summed in int32).

What matches: per-tensor weight scales, or per-axis along axis 0 (one per direction) or axis 1
(one per gate row), with zero points of the same shape; everything else (a float W or R, only
one of them quantised, another axis, a W or R also used elsewhere as float is fine: the
DequantizeLinear stays for that user) keeps the float op, its weights dequantised at compile
time by constant folding, as before this pass. Runs after qdq, before fold.
"""

from __future__ import annotations

import numpy as np

from aotc.ir.graph import Graph, Node, TensorType, Value

OPS = {"RNN": "QdqRNN", "GRU": "QdqGRU", "LSTM": "QdqLSTM"}
Q8 = ("int8", "uint8")


def qrecurrent(g: Graph) -> Graph:
    prod = g.producers()
    values = dict(g.values)
    nodes: list[Node] = []
    for n in g.nodes:
        new = _rewrite(g, prod, values, n) if n.op in OPS and not n.domain else None
        nodes.append(new or n)
    return g.replace(nodes=nodes, values=values)


def _const(g: Graph, name: str) -> np.ndarray | None:
    v = g.values.get(name) if name else None
    return None if v is None or not v.is_const else np.asarray(v.const)


def _dq(g: Graph, prod: dict[str, Node], name: str, const_data: bool) -> Node | None:
    p = prod.get(name) if name else None
    if p is None or p.op != "DequantizeLinear" or p.domain:
        return None
    data = g.values.get(p.inputs[0])
    if data is None or data.type.dtype.name not in Q8 or data.is_const != const_data:
        return None
    if _const(g, p.inputs[1]) is None or (len(p.inputs) > 2 and p.inputs[2]
                                          and _const(g, p.inputs[2]) is None):
        return None
    return p


def _weight_params(g: Graph, values: dict[str, Value], d: Node, nd: int, rows: int,
                   tag: str) -> tuple[str, str] | None:
    """The scale and zero point of a weight DequantizeLinear as [nd, rows] constants (or the
    per-tensor ones as they are); None for a layout the kernel does not take."""
    s = _const(g, d.inputs[1])
    z = _const(g, d.inputs[2]) if len(d.inputs) > 2 and d.inputs[2] else None
    assert s is not None
    if s.size == 1 and (z is None or z.size == 1):
        return d.inputs[1], d.inputs[2] if len(d.inputs) > 2 else ""
    axis = int(d.attrs.get("axis", 1))
    axis = axis + 3 if axis < 0 else axis
    if int(d.attrs.get("block_size", 0) or 0) or axis not in (0, 1) or s.ndim != 1 or (
            z is not None and z.shape != s.shape):
        return None
    if not ((axis == 0 and s.shape == (nd,)) or (axis == 1 and s.shape == (rows,))):
        return None

    def reps(a: np.ndarray) -> np.ndarray:  # per direction or per row -> [nd, rows]
        if axis == 0:
            return np.repeat(a.reshape(nd, 1), rows, axis=1)
        return np.broadcast_to(a.reshape(1, rows), (nd, rows)).copy()
    names = []
    for what, a in (("scale", s), ("zero_point", z)):
        if a is None:
            names.append("")
            continue
        name = f"{d.inputs[0]}__{what}_rows_{tag}"
        full = reps(a)
        values[name] = Value(name, TensorType(full.shape, values[d.inputs[1 if what == "scale"
                                                                      else 2]].type.dtype), full)
        names.append(name)
    return names[0], names[1]


def _rewrite(g: Graph, prod: dict[str, Node], values: dict[str, Value], n: Node
             ) -> Node | None:
    ins = list(n.inputs) + [""] * (8 - len(n.inputs))
    wd = _dq(g, prod, ins[1], const_data=True)
    rd = _dq(g, prod, ins[2], const_data=True)
    if wd is None or rd is None:
        return None
    w, r = g.values[wd.inputs[0]], g.values[rd.inputs[0]]
    if len(w.type.shape) != 3 or len(r.type.shape) != 3:
        return None
    nd, rows = int(w.type.shape[0]), int(w.type.shape[1])
    wp = _weight_params(g, values, wd, nd, rows, n.name)
    rp = _weight_params(g, values, rd, nd, rows, n.name)
    if wp is None or rp is None:
        return None
    x, extra = ins[0], ["", ""]
    xd = _dq(g, prod, ins[0], const_data=False)
    if xd is not None:
        s = _const(g, xd.inputs[1])
        z = _const(g, xd.inputs[2]) if len(xd.inputs) > 2 and xd.inputs[2] else None
        if s is not None and s.size == 1 and (z is None or z.size == 1):
            x, extra = xd.inputs[0], [xd.inputs[1], xd.inputs[2] if len(xd.inputs) > 2 else ""]
    inputs = [x, wd.inputs[0], rd.inputs[0], *ins[3:8], *wp, *rp, *extra]
    while inputs and not inputs[-1]:
        inputs.pop()
    return Node(OPS[n.op], n.name, tuple(inputs), n.outputs, dict(n.attrs), 1, "aotc")
