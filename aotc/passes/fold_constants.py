"""Constant folding: every node whose inputs are all constants is evaluated at compile time with
its numpy reference (weight transposes, reshapes, Dequantize of constants, shape arithmetic).

Post: no node has only constant inputs, except those whose result would be much larger than
their inputs (Expand/Tile of a constant): folding those would bloat flash, so they stay kernels.
"""

from __future__ import annotations

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Graph, Node, TensorType, Value
from aotc.ops import resolve

_MAX_GROWTH = 4  # fold only if output bytes <= 4x input bytes (or tiny)
_SMALL = 4096


def fold_constants(g: Graph) -> Graph:
    values = dict(g.values)
    nodes: list[Node] = []
    for n in g.nodes:
        ins = [values[i] if i else None for i in n.inputs]
        if n.epilogue or not all(v is None or v.is_const for v in ins) or not n.inputs:
            nodes.append(n)
            continue
        opdef = resolve(n.op, g.opset, n.domain)
        assert opdef is not None
        out_bytes = sum(values[o].type.nbytes for o in n.outputs if o)
        in_bytes = sum(v.type.nbytes for v in ins if v is not None)
        if out_bytes > max(_MAX_GROWTH * in_bytes, _SMALL) and _has_lowering(opdef):
            nodes.append(n)
            continue
        try:
            outs = opdef.run_reference(n, [None if v is None else v.const for v in ins])
        except Exception as e:
            raise AotcError(f"constant folding failed: {type(e).__name__}: {e}",
                            n.name, n.op) from None
        for o, arr in zip(n.outputs, outs):
            if not o:
                continue
            want = values[o].type
            arr = np.ascontiguousarray(arr).astype(want.dtype.np)
            if tuple(arr.shape) != want.shape:
                raise AotcError(f"folded shape {arr.shape} differs from inferred {want.shape}",
                                n.name, n.op)
            arr.setflags(write=False)
            values[o] = Value(o, TensorType(want.shape, dtypes.from_numpy(arr.dtype)), arr)
    return g.replace(values=values, nodes=nodes)


def _has_lowering(opdef: object) -> bool:
    from aotc.ops import OpDef

    return type(opdef).lower is not OpDef.lower
