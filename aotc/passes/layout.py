"""Layout: give kernels claimed by an NHWC backend NHWC activations, with run-time transposes
only where a region boundary really needs one.

1. Each claimed node whose backend wants NHWC reads every 4-D activation (non-constant input)
   through a Transpose to NHWC and writes every 4-D output in NHWC, followed by a Transpose
   back to NCHW. Constants keep ONNX's layout: the backend re-lays its weights out at compile
   time. The node gets ``_layout`` = "NHWC".
2. Transpose pairs that compose to the identity cancel (between two NHWC kernels, and against
   a model's own NHWC -> NCHW input transpose, as tf2onnx writes them): their consumers read
   the original value.
3. A Transpose that moves only size-1 dimensions (NHWC <-> NCHW of a [1, 1, H, W] map or a
   [N, C, 1, 1] vector) reorders no bytes: it becomes a view (no kernel, no copy).
A native elementwise kernel (no broadcasting, scalar constants) that reads an NHWC region's
output runs NHWC as well, so a residual Add between offloaded convolutions costs no transposes.
Unused transposes are then removed. What remains is a real boundary: a native kernel between
two offloaded ones, or a graph input/output in the other layout.
"""

from __future__ import annotations

from collections.abc import Callable

from aotc.ir.graph import CHAIN, Graph, Node, TensorType, Value

TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)


def _perm_type(t: TensorType, perm: tuple[int, ...]) -> TensorType:
    return TensorType(tuple(t.shape[p] for p in perm), t.dtype)


def _fresh(values: dict[str, Value], base: str) -> str:
    name, k = base, 1
    while name in values:
        name, k = f"{base}{k}", k + 1
    return name


def _layout_free(g: Graph, n: Node) -> bool:
    """A native elementwise kernel computes the same in any layout when every operand it reads
    at run time has the output's 4-D shape (no broadcasting) and its constants are scalars."""
    from aotc.ops import resolve

    opdef = resolve(n.op, g.opset, n.domain)
    if opdef is None or not (opdef.kind == "elementwise" or getattr(opdef, "layout_free", False)):
        return False
    outs = [o for o in n.outputs if o]
    if len(outs) != 1 or len(g.type(outs[0]).shape) != 4:
        return False
    shape = g.type(outs[0]).shape
    for node in (n, *n.epilogue):
        for i in node.inputs:
            if not i or i == CHAIN:
                continue
            v = g.values[i]
            if (v.is_const and v.type.numel != 1) or (not v.is_const and v.type.shape != shape):
                return False
    return True


def to_layout(g: Graph, wants_nhwc: Callable[[Node], bool]) -> Graph:
    values = dict(g.values)
    nodes: list[Node] = []
    opset_tr = 13 if g.opset >= 13 else 1  # Transpose's since-version in force
    from_nhwc: set[str] = set()  # NCHW values that are a transpose of an NHWC one
    for n in g.nodes:
        claimed = "_byoc" in n.attrs and wants_nhwc(n)
        # A native elementwise kernel fed from an NHWC region runs NHWC too (no transposes).
        follows = (not claimed and "_byoc" not in n.attrs and _layout_free(g, n)
                   and any(i in from_nhwc for node in (n, *n.epilogue) for i in node.inputs))
        if not (claimed or follows):
            nodes.append(n)
            continue
        renamed: dict[str, str] = {}
        for node in (n, *n.epilogue):
            for i in node.inputs:
                if not i or i == CHAIN or i in renamed or values[i].is_const:
                    continue
                t = values[i].type
                if len(t.shape) != 4:
                    continue
                x = _fresh(values, f"{i}__nhwc")
                values[x] = Value(x, _perm_type(t, TO_NHWC))
                nodes.append(Node("Transpose", f"{n.name}__to_nhwc_{len(renamed)}", (i,), (x,),
                                  {"perm": list(TO_NHWC)}, opset_tr, ""))
                renamed[i] = x
        outs, after = [], []
        for k, o in enumerate(n.outputs):
            t = values[o].type if o else None
            if t is None or len(t.shape) != 4:
                outs.append(o)
                continue
            y = _fresh(values, f"{o}__nhwc")
            values[y] = Value(y, _perm_type(t, TO_NHWC))
            after.append(Node("Transpose", f"{n.name}__to_nchw_{k}", (y,), (o,),
                              {"perm": list(TO_NCHW)}, opset_tr, ""))
            from_nhwc.add(o)
            outs.append(y)

        def ren(node: Node) -> Node:
            return node.with_(inputs=tuple(renamed.get(i, i) for i in node.inputs))

        nodes.append(ren(n).with_(outputs=tuple(outs),
                                  epilogue=tuple(ren(e) for e in n.epilogue),
                                  attrs={**n.attrs, "_layout": "NHWC"} if claimed
                                  else n.attrs))
        nodes += after
    g = g.replace(values=values, nodes=nodes)
    return _drop_unused(_views_of_unit_transposes(_cancel_transposes(g)))


def _perm(n: Node, rank: int) -> tuple[int, ...]:
    p = n.attrs.get("perm")
    return tuple(int(v) for v in p) if p is not None else tuple(range(rank))[::-1]


def _cancel_transposes(g: Graph) -> Graph:
    producer = {o: n for n in g.nodes for o in n.outputs if o}
    rename: dict[str, str] = {}
    nodes: list[Node] = []
    for n in g.nodes:
        n = n.with_(inputs=tuple(rename.get(i, i) for i in n.inputs),
                    epilogue=tuple(e.with_(inputs=tuple(rename.get(i, i) for i in e.inputs))
                                   for e in n.epilogue))
        if n.op == "Transpose" and n.domain == "" and not n.epilogue:
            src = producer.get(n.inputs[0])
            if (src is not None and src.op == "Transpose" and src.domain == ""
                    and not src.epilogue and n.outputs[0] not in g.outputs):
                rank = len(g.type(n.inputs[0]).shape)
                p1, p2 = _perm(src, rank), _perm(n, rank)
                if tuple(p1[p] for p in p2) == tuple(range(rank)):
                    rename[n.outputs[0]] = rename.get(src.inputs[0], src.inputs[0])
                    continue
        nodes.append(n)
    return g.replace(nodes=nodes)


def _views_of_unit_transposes(g: Graph) -> Graph:
    nodes = []
    for n in g.nodes:
        if n.op == "Transpose" and n.domain == "" and not n.epilogue:
            shape = g.type(n.inputs[0]).shape
            order = [p for p in _perm(n, len(shape)) if shape[p] != 1]
            if order == sorted(order):
                n = Node("Reinterpret", n.name, n.inputs, n.outputs, {}, 1, "aotc")
        nodes.append(n)
    return g.replace(nodes=nodes)


def _drop_unused(g: Graph) -> Graph:
    from aotc.passes.dce import dce

    return dce(g)


def permuted_views(g: Graph) -> Graph:
    """A Transpose whose every reader is a native kernel that reads it as input 0 through
    indexing (``reads_permuted``: Conv, QLinearConv, MaxPool, AveragePool, QLinearAveragePool)
    becomes a PermuteView: no kernel, no copy; the readers index the source's storage with
    permuted strides. So an NHWC graph input (a TFLite model's, or tf2onnx's leading
    Transpose) feeds the first NCHW convolution or pool directly."""
    from aotc.ops import resolve

    readers: dict[str, list[tuple[Node, int]]] = {}
    for n in g.nodes:
        for node in (n, *n.epilogue):
            for k, i in enumerate(node.inputs):
                if i and i != CHAIN:
                    readers.setdefault(i, []).append((n if node is n else node, k
                                                      if node is n else -1))
    views = {n.outputs[0] for n in g.nodes if n.op == "PermuteView" and n.domain == "aotc"}

    def reads_permuted(n: Node, k: int) -> bool:
        opdef = resolve(n.op, g.opset, n.domain)
        return (k == 0 and opdef is not None and getattr(opdef, "reads_permuted", False)
                and "_byoc" not in n.attrs and "_inplace" not in n.attrs)

    nodes = []
    for n in g.nodes:
        if (n.op == "Transpose" and n.domain == "" and not n.epilogue
                and n.outputs[0] not in g.outputs and n.inputs[0] not in views
                and not g.values[n.inputs[0]].is_const
                and readers.get(n.outputs[0])
                and all(reads_permuted(r, k) for r, k in readers[n.outputs[0]])):
            perm = list(_perm(n, len(g.type(n.inputs[0]).shape)))
            n = Node("PermuteView", n.name, n.inputs, n.outputs, {"perm": perm}, 1, "aotc")
        nodes.append(n)
    return g.replace(nodes=nodes)
