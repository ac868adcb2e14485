"""SVDF (TFLite's singular value decomposition filter, a streaming layer): TFLite Micro's
arithmetic, float32 and integer (int8 input, weights and output; int16 or int8 time weights and
state), as one aotc-domain op with two outputs: the result and the next activation state.

Per call: the state [batch, num_filters * memory] shifts one element left (the whole buffer,
as TFLM does), each filter's newest slot gets the feature dot product of the input (integer:
requantised by (m1, s1), clamped to the state type, plus the state zero point), then each
filter's time dot product with the state, summed over the rank into each unit, plus bias,
activation (float) or requantised by (m2, s2) to int8 (integer: no activation, as TFLM).

The kernel may write the next state over the old one (``writes_over``): it reads old element
i + 1 before it writes element i, and the time products read the next state from the output.
The TFLite importer (aotc/frontend/tflite/variables.py) makes the state a slot of the caller's
state buffer, so the state costs no copy per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Cast, Const, Expr, Load, Store, as_expr, bmax, bmin, call
from aotc.ops import OpDef, register
from aotc.ops.quant import arith as qmath

I32 = dtypes.BY_NAME["int32"]
F32 = dtypes.BY_NAME["float32"]
ACTIVATIONS = ("none", "relu", "relu_n1_to_1", "relu6", "tanh")


def _act_np(x: np.ndarray, act: str) -> np.ndarray:
    lo, hi = {"relu": (0, None), "relu_n1_to_1": (-1, 1), "relu6": (0, 6)}.get(act, (None, None))
    if act == "tanh":
        return np.tanh(x).astype(np.float32)
    if lo is None:
        return x
    return np.clip(x, lo, hi if hi is not None else np.inf).astype(np.float32)


def _act_expr(e: Expr, act: str) -> Expr:
    if act == "tanh":
        return call("tanh", e)
    if act == "relu":
        return bmax(e, Const(0.0, F32))
    if act == "relu_n1_to_1":
        return bmin(bmax(e, Const(-1.0, F32)), Const(1.0, F32))
    if act == "relu6":
        return bmin(bmax(e, Const(0.0, F32)), Const(6.0, F32))
    return e


@register
class Svdf(OpDef):
    name = "Svdf"
    domain = "aotc"
    dtypes = ("float32", "int8", "int16", "int32")
    const_inputs = (1, 2, 3)
    attr_choices: ClassVar[dict[str, Any]] = {"activation": ACTIVATIONS}
    # Output 1 (the next state) may be written over input 4 (the state) by the kernel itself.
    writes_over: ClassVar[dict[int, int]] = {1: 4}

    def reference(self, x: np.ndarray, weights_feature: np.ndarray, weights_time: np.ndarray,
                  bias: np.ndarray | None, state: np.ndarray, *, rank: int = 1,
                  activation: str = "none", x_zero_point: int = 0, state_zero_point: int = 0,
                  y_zero_point: int = 0, m1: int = 0, s1: int = 0, m2: int = 0, s2: int = 0
                  ) -> tuple[np.ndarray, np.ndarray]:
        batch = x.shape[0]
        n_filter, n_memory = weights_time.shape
        n_unit = n_filter // rank
        new = np.empty(state.size, state.dtype)
        new[:-1] = state.reshape(-1)[1:]
        new = new.reshape(batch, n_filter, n_memory)
        if x.dtype == np.float32:
            feat = x.astype(np.float32) @ weights_feature.astype(np.float32).T
            new[:, :, -1] = feat
            t = (new * weights_time[None]).sum(axis=2, dtype=np.float32)
            y = t.reshape(batch, n_unit, rank).sum(axis=2, dtype=np.float32)
            if bias is not None:
                y = y + bias.astype(np.float32)
            return _act_np(y.astype(np.float32), activation), new.reshape(state.shape)
        info = np.iinfo(state.dtype)
        acc = (x.astype(np.int64) - x_zero_point) @ weights_feature.astype(np.int64).T
        feat = np.array([[qmath.mbqm(int(v), m1, s1) for v in row] for row in acc], np.int64)
        feat = np.clip(feat, info.min, info.max) + state_zero_point
        new[:, :, -1] = feat.astype(state.dtype)  # wraps as TFLM's cast does
        t = ((new.astype(np.int64) - state_zero_point) * weights_time[None].astype(np.int64)
             ).sum(axis=2)
        y = t.reshape(batch, n_unit, rank).sum(axis=2)
        if bias is not None:
            y = y + bias.astype(np.int64)
        y = np.array([[qmath.mbqm(int(v), m2, s2) for v in row] for row in y], np.int64)
        return (np.clip(y + y_zero_point, -128, 127).astype(np.int8),
                new.reshape(state.shape))

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x, wf, wt, _, st = (list(ins) + [None] * 5)[:5]
        if x is None or wf is None or wt is None or st is None:
            raise AotcError("needs the input, both weights and the state", node.name, node.op)
        rank = int(node.attrs.get("rank", 1))
        if len(x.type.shape) != 2 or len(wf.type.shape) != 2 or len(wt.type.shape) != 2 or \
                wf.type.shape[0] % rank or wt.type.shape[0] != wf.type.shape[0] or \
                wf.type.shape[1] != x.type.shape[1] or \
                st.type.numel != x.type.shape[0] * wt.type.numel:
            raise AotcError("the input, weights and state shapes do not agree", node.name,
                            node.op)
        floats = [v.type.dtype.name == "float32" for v in (x, wf, wt, st)]
        if any(floats) and not all(floats):
            raise AotcError("float32 SVDF needs float32 weights and state", node.name, node.op)
        if x.type.dtype.name == "int8" and st.type.dtype.name not in ("int8", "int16"):
            raise AotcError("an int8 SVDF needs an int8 or int16 state", node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x, wf, st = ins[0], ins[1], ins[4]
        assert x is not None and wf is not None and st is not None
        units = wf.type.shape[0] // int(node.attrs.get("rank", 1))
        return [TensorType((x.type.shape[0], units), x.type.dtype), st.type]

    def macs(self, node: Node, g: Any) -> int:
        x, wf, wt = (g.type(i) for i in node.inputs[:3])
        return int(x.shape[0] * (wf.numel + wt.numel))

    def lower(self, node: Node, kb: Any) -> None:
        a = node.attrs
        x, wf, wt, bias, st = kb.inputs[:5]
        y, new = kb.outputs[0], kb.outputs[1]
        batch, n_in = x.shape
        n_filter, n_memory = wt.shape
        rank = int(a.get("rank", 1))
        n_unit = n_filter // rank
        integer = x.dtype.name != "float32"
        n = new.numel
        flat_new = new.buf
        # 1. Shift left by one element, ascending: safe when the next state is the old one.
        with kb.loop(n - 1, "k") as k:
            kb.emit(Store(flat_new, k, st.flat(k + 1)))
        # 2. The newest slot of each filter: the feature dot product.
        with kb.loops((batch, n_filter), ("b", "f")) as (b, f):
            acc = kb.local(0 if integer else 0.0, "acc", I32 if integer else F32)
            with kb.loop(n_in, "c") as c:
                if integer:
                    xv = Cast(x[b, c], I32) - Const(int(a.get("x_zero_point", 0)), I32)
                    kb.assign(acc, acc + Cast(wf[f, c], I32) * xv)
                else:
                    kb.assign(acc, acc + wf[f, c] * x[b, c])
            slot = b * (n_filter * n_memory) + f * n_memory + (n_memory - 1)
            if integer:
                info = np.iinfo(new.dtype.np)
                v = call("q_mbqm", acc, Const(int(a["m1"]), I32), Const(int(a["s1"]), I32),
                         dtype=I32)
                v = bmin(bmax(v, Const(int(info.min), I32)), Const(int(info.max), I32))
                v = v + Const(int(a.get("state_zero_point", 0)), I32)
                kb.emit(Store(flat_new, as_expr(slot), Cast(v, new.dtype)))
            else:
                kb.emit(Store(flat_new, as_expr(slot), acc))
        # 3. Time dot products (from the next state), summed over the rank, bias, output.
        zs = int(a.get("state_zero_point", 0))
        with kb.loops((batch, n_unit), ("b", "u")) as (b, u):
            out = kb.local(0 if integer else 0.0, "out", I32 if integer else F32)
            if bias is not None:
                kb.assign(out, Cast(bias[u], I32) if integer else bias[u])
            with kb.loop(rank, "r") as r:
                t = kb.local(0 if integer else 0.0, "t", I32 if integer else F32)
                f = u * rank + r
                with kb.loop(n_memory, "m") as m:
                    sv: Expr = Load(flat_new, as_expr(b * (n_filter * n_memory) + f * n_memory
                                                      + m))
                    if integer:
                        sv = Cast(sv, I32) - Const(zs, I32) if zs else Cast(sv, I32)
                        kb.assign(t, t + Cast(wt[f, m], I32) * sv)
                    else:
                        kb.assign(t, t + wt[f, m] * sv)
                kb.assign(out, out + t)
            if integer:
                v = call("q_mbqm", out, Const(int(a["m2"]), I32), Const(int(a["s2"]), I32),
                         dtype=I32) + Const(int(a.get("y_zero_point", 0)), I32)
                v = bmin(bmax(v, Const(-128, I32)), Const(127, I32))
                kb.store(y, [b, u], Cast(v, y.dtype))
            else:
                kb.store(y, [b, u], _act_expr(out, str(a.get("activation", "none"))))

