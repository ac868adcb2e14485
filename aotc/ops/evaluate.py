"""Compile-time evaluation with the ops' numpy references: every node whose inputs are all
known is replaced by its constant result. The fold pass (aotc/passes/fold_constants.py) runs it
on the graph, the ONNX importer on each subgraph body.

Inputs an op reads only for their type (OpDef.type_only_inputs: Shape, Size, CastLike's
target) need not be constant. A zero-size tensor has no data, so it is a constant too: a node
whose outputs are all empty needs no kernel, and an empty run-time input folds like a constant
(a reduction over it yields the reduction's identity).

An If whose condition is a constant is replaced by its taken branch (``inline``, beside the
control ops), so conditions that only folding makes known still select one branch.

Post: no node has only constant inputs, except those whose result would be much larger than
their inputs (Expand/Tile of a constant): folding those would bloat flash, so they stay kernels.
"""

from __future__ import annotations

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Graph, Node, TensorType, Value
from aotc.ops.control.if_loop_scan import inline
from aotc.ops.opdef import OpDef, resolve, values_known

_MAX_GROWTH = 4  # fold only if output bytes <= 4x input bytes (or tiny)
_SMALL = 4096
# Ops whose result depends only on the (static) shapes of their inputs, never on the data:
# they fold even when their input is computed at run time.


def _fold_arg(v: Value) -> np.ndarray:
    if v.const is not None:
        return v.const
    # A zero-strided stand-in of the right shape and dtype: no memory for large activations.
    return np.broadcast_to(np.zeros((), v.type.dtype.np), v.type.shape)


def _empty(v: Value) -> bool:
    return v.type.numel == 0


def fold_constants(g: Graph) -> Graph:
    values = dict(g.values)
    nodes: list[Node] = []
    todo = list(reversed(g.nodes))
    while todo:
        n = todo.pop()
        if n.op in ("If", "Loop", "Scan") and not n.domain:
            # Control flow is never evaluated here; an If whose condition has become a
            # constant is replaced by its taken branch, whose nodes are folded in turn.
            cond = values[n.inputs[0]].const if n.op == "If" else None
            if cond is None:
                nodes.append(n)
            else:
                taken = n.attrs["then_branch" if bool(cond.reshape(-1)[0]) else "else_branch"]
                todo += reversed(inline(n, taken, values, g.opset))
            continue
        ins = [values[i] if i else None for i in n.inputs]
        outs_ = [values[o] for o in n.outputs if o]
        if not n.epilogue and outs_ and all(_empty(v) for v in outs_):
            for v in outs_:
                arr = np.zeros(v.type.shape, v.type.dtype.np)
                arr.setflags(write=False)
                values[v.name] = Value(v.name, v.type, arr)
            continue
        opdef = resolve(n.op, g.opset, n.domain)
        assert opdef is not None
        # An empty tensor has no data to read: it counts as known.
        if n.epilogue or not values_known(opdef, [None if v is not None and _empty(v) else v
                                                  for v in ins]):
            nodes.append(n)
            continue
        out_bytes = sum(values[o].type.nbytes for o in n.outputs if o)
        in_bytes = sum(v.type.nbytes for v in ins if v is not None)
        if out_bytes > max(_MAX_GROWTH * in_bytes, _SMALL) and _has_lowering(opdef):
            nodes.append(n)
            continue
        try:
            with np.errstate(all="ignore"):  # IEEE results (log(0) = -inf) are what C gives
                outs = opdef.run_reference(n, [None if v is None else _fold_arg(v) for v in ins])
        except Exception as e:
            raise AotcError(f"constant folding failed: {type(e).__name__}: {e}",
                            n.name, n.op) from None
        for o, arr in zip(n.outputs, outs):
            if not o:
                continue
            want = values[o].type
            # np.asarray, not ascontiguousarray: the latter turns a scalar into shape [1].
            arr = np.asarray(arr, dtype=want.dtype.np, order="C")
            if tuple(arr.shape) != want.shape:
                raise AotcError(f"folded shape {arr.shape} differs from inferred {want.shape}",
                                n.name, n.op)
            arr.setflags(write=False)
            values[o] = Value(o, TensorType(want.shape, dtypes.from_numpy(arr.dtype)), arr)
    return g.replace(values=values, nodes=nodes)


def _has_lowering(opdef: object) -> bool:
    return type(opdef).lower is not OpDef.lower
