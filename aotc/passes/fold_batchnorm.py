"""Fold inference BatchNormalization into the preceding Conv / Gemm; turn any other BN with
constant statistics into a per-channel Mul + Add, which then fuses as an epilogue.

Pre: for folding, the anchor's weights and the BN parameters are constants and the anchor's
output feeds only the BN. Post: the folded BN is gone (the anchor has new weights and a bias);
every other BN with constant parameters is ``Mul(x, s) -> Add(., t)`` with (C, 1, ..., 1)
constants computed in float32 step by step, as onnxruntime computes them. A BN whose
float32 scale or shift is not finite is not folded into the anchor.
"""

from __future__ import annotations

import numpy as np

from aotc import dtypes
from aotc.ir.graph import Graph, Node, TensorType, Value
from aotc.ops.nn.norm import _BatchNorm


def fold_batchnorm(g: Graph) -> Graph:
    values = dict(g.values)
    producers = g.producers()
    consumers = g.consumers()
    removed: set[str] = set()
    replaced: dict[str, Node] = {}
    for bn in g.nodes:
        if (bn.op != "BatchNormalization" or len([o for o in bn.outputs if o]) != 1
                or bn.attrs.get("training_mode", 0)):
            continue
        x = bn.inputs[0]
        anchor = producers.get(x)
        if anchor is None or anchor.op not in ("Conv", "Gemm") or anchor.name in replaced:
            continue
        if len(consumers.get(x, [])) != 1 or x in g.outputs:
            continue
        params = [values[i] for i in bn.inputs[1:5]]
        w = values[anchor.inputs[1]]
        b = values[anchor.inputs[2]] if len(anchor.inputs) > 2 and anchor.inputs[2] else None
        if not all(p.is_const for p in params) or not w.is_const:
            continue
        if b is not None and not b.is_const:
            continue
        if anchor.op == "Gemm" and (anchor.attrs["alpha"] != 1.0 or anchor.attrs["beta"] != 1.0):
            continue
        s32, t32 = _BatchNorm.scale_shift_f32(*(p.const for p in params),  # type: ignore[misc]
                                               float(bn.attrs["epsilon"]))
        if not (np.isfinite(s32).all() and np.isfinite(t32).all()):
            continue  # stays a BN: x * s + t in float32, inf/NaN as onnxruntime gives them
        scale, bias, mean, var = (p.const.astype(np.float64) for p in params)  # type: ignore[union-attr]
        s = scale / np.sqrt(var + float(bn.attrs["epsilon"]))
        wc = w.const.astype(np.float64)  # type: ignore[union-attr]
        if anchor.op == "Conv":
            new_w = wc * s.reshape((-1,) + (1,) * (wc.ndim - 1))
        elif anchor.attrs["transB"]:
            new_w = wc * s[:, None]
        else:
            new_w = wc * s[None, :]
        old_b = b.const.astype(np.float64).reshape(-1) if b is not None else 0.0  # type: ignore[union-attr]
        if anchor.op == "Gemm" and b is not None and b.const.size not in (1, s.size):  # type: ignore[union-attr]
            continue
        if anchor.op == "Gemm" and b is not None and b.const.ndim == 2 and b.const.shape[0] != 1:  # type: ignore[union-attr]
            continue  # C of shape (M, 1) varies per row even when M == N: not a per-column bias
        new_b = (old_b - mean) * s + bias
        wname, bname = _fresh(values, f"{anchor.name}_W_bn"), _fresh(values, f"{anchor.name}_B_bn")
        for nm, arr in ((wname, new_w), (bname, new_b)):
            a = np.ascontiguousarray(arr.astype(np.float32))
            a.setflags(write=False)
            values[nm] = Value(nm, TensorType(tuple(a.shape), dtypes.float32), a)
        replaced[anchor.name] = anchor.with_(
            inputs=(anchor.inputs[0], wname, bname), outputs=bn.outputs[:1])
        removed.add(bn.name)
    nodes = [replaced.get(n.name, n) for n in g.nodes if n.name not in removed]
    return _bn_to_affine(g.replace(values=values, nodes=nodes))


def _bn_to_affine(g: Graph) -> Graph:
    values = dict(g.values)
    nodes: list[Node] = []
    for bn in g.nodes:
        if bn.op != "BatchNormalization" or bn.domain:
            nodes.append(bn)
            continue
        outs = [o for o in bn.outputs if o]
        params = [values.get(i) for i in bn.inputs[1:5]]
        x = values[bn.inputs[0]]
        if (bn.op != "BatchNormalization" or len(outs) != 1 or len(bn.outputs) != 1
                or bn.attrs.get("training_mode", 0) or x.type.dtype != dtypes.float32
                or len(x.type.shape) < 2 or not all(p is not None and p.is_const for p in params)):
            nodes.append(bn)
            continue
        # float32, step by step, as onnxruntime (see _BatchNorm.scale_shift_f32)
        s, t = _BatchNorm.scale_shift_f32(*(p.const for p in params),  # type: ignore[misc]
                                          float(bn.attrs["epsilon"]))
        shape = (-1,) + (1,) * (len(x.type.shape) - 2)
        sname, tname = _fresh(values, f"{bn.name}_scale"), _fresh(values, f"{bn.name}_shift")
        for nm, arr in ((sname, s), (tname, t)):
            a = np.ascontiguousarray(arr.reshape(shape).astype(np.float32))
            a.setflags(write=False)
            values[nm] = Value(nm, TensorType(tuple(a.shape), dtypes.float32), a)
        mid = _fresh(values, f"{bn.name}_scaled")
        values[mid] = Value(mid, x.type)
        nodes.append(Node("Mul", f"{bn.name}/scale", (bn.inputs[0], sname), (mid,), {}, 14))
        nodes.append(Node("Add", f"{bn.name}/shift", (mid, tname), (outs[0],), {}, 14))
    return g.replace(values=values, nodes=nodes)


def _fresh(values: dict[str, Value], name: str) -> str:
    # The model may already use the name: never overwrite one of its values.
    while name in values:
        name += "_"
    return name
