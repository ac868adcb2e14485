"""QDQ -> integer kernels: DequantizeLinear -> op [-> Relu/Clip] -> QuantizeLinear becomes one
integer kernel (QLinearConv, QLinearMatMul with bias, QLinearAdd, QLinearMul,
QLinearAveragePool, QLinearGlobalAveragePool, QLinearSoftmax, QLinearConcat, QLut for
Sigmoid/Tanh/Relu/Clip/LeakyRelu), and quantisation-transparent ops (Reshape, Transpose, ...)
between equal parameters run on the integers. Weight and bias DequantizeLinear of constants feed
the kernels as integers, so no float weights remain; DCE drops what is left unused.

Runs before constant folding (which would otherwise dequantise the weights). Every quantised
kernel, imported or created here, gets ``_requant`` = the compile's mode. A pattern that does not
match (per-axis activation scales, a float tensor used elsewhere) stays DQ -> float op -> Q.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.ir.graph import Graph, Node, TensorType, Value
from aotc.ops.quant import arith as qmath
from aotc.ops.quant.tables import lut_table, tflm_table

QDQ_DOMAINS = ("", "aotc")  # aotc: the TFLite frontend's int16 / int64 Q and DQ
QUANT_OPS = {"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger", "QLinearAdd",
             "QLinearSub", "QRequantize", "QLeakyRelu", "QConvTranspose", "QLinearMul",
             "QLinearAveragePool", "QLinearGlobalAveragePool", "QLinearSoftmax", "QLinearSigmoid",
             "QLinearLeakyRelu", "QLinearConcat", "QLut", "QReduce", "QRelu", "QLogistic16",
             "QTanh16", "QSoftmax16", "QSoftmaxToInt16"}
TRANSPARENT = {"Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Identity",
               "MaxPool", "GlobalMaxPool", "Slice", "Gather", "Split", "DepthToSpace",
               "SpaceToDepth", "Pad", "ReduceMax", "ReduceMin"}
# Shape-only ops a DequantizeLinear is moved below (hoist).
MOVES = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose"}
# Float ops computed as a 256-entry table on int8: the float formula quantised (onnx mode), or,
# for Sigmoid/Tanh in tflite mode with TFLite's output parameters, TFLM's fixed-point LOGISTIC/TANH
# evaluated for each of the 256 inputs (aotc.ops.quant.arith.int8_activation_table).
LUT_FUNCS: dict[str, Callable[[np.ndarray, Node], np.ndarray]] = {
    "Sigmoid": lambda x, n: 1 / (1 + np.exp(-x)),
    "Tanh": lambda x, n: np.tanh(x),
    "Relu": lambda x, n: np.maximum(x, 0),
    "LeakyRelu": lambda x, n: np.where(x >= 0, x, x * np.float32(n.attrs.get("alpha", 0.01))),
    "HardSigmoid": lambda x, n: np.clip(x * np.float32(n.attrs.get("alpha", 0.2))
                                        + np.float32(n.attrs.get("beta", 0.5)), 0, 1),
    "HardSwish": lambda x, n: x * np.clip(x / 6 + 0.5, 0, 1),
    "Elu": lambda x, n: np.where(x > 0, x, np.float32(n.attrs.get("alpha", 1.0))
                                 * (np.exp(x) - 1)),
    "Exp": lambda x, n: np.exp(x),
    "Abs": lambda x, n: np.abs(x),
    "Neg": lambda x, n: -x,
}


def qdq(g: Graph, mode: str = "tflite") -> Graph:
    g = _Rewriter(g, mode).run()
    # A uint8 .tflite model: LiteRT's uint8 kernels multiply the input and weight scales in
    # float32 (graph meta "scale_product", set by the compiler from the frontend's metadata).
    f32 = {"_scale_f32": True} if g.meta.get("scale_product") == "float32" else {}
    nodes = [n.with_(attrs={**n.attrs, "_requant": mode, **f32}) if n.op in QUANT_OPS else n
             for n in g.nodes]
    return g.replace(nodes=nodes)


class _Rewriter:
    def __init__(self, g: Graph, mode: str) -> None:
        self.g = g
        self.mode = mode
        self.prod = g.producers()
        self.cons = g.consumers()

    # -------------------------------------------------------------- helpers
    def value(self, name: str) -> Value | None:
        return self.g.values.get(name) if name else None

    def const(self, name: str) -> np.ndarray | None:
        v = self.value(name)
        return None if v is None or not v.is_const else np.asarray(v.const)

    def only_user(self, name: str) -> bool:
        return len(self.cons.get(name, [])) == 1 and name not in self.g.outputs

    def dq(self, name: str, const_data: bool | None = None) -> Node | None:
        """The DequantizeLinear producing ``name`` (optionally requiring constant data)."""
        p = self.prod.get(name)
        if p is None or p.op != "DequantizeLinear" or p.domain not in QDQ_DOMAINS:
            return None
        if self.const(p.inputs[1]) is None or (
                len(p.inputs) > 2 and p.inputs[2] and self.const(p.inputs[2]) is None):
            return None
        if const_data is not None and (self.const(p.inputs[0]) is not None) != const_data:
            return None
        return p

    def per_tensor(self, n: Node) -> bool:
        s = self.const(n.inputs[1])
        z = self.const(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
        return s is not None and s.size == 1 and (z is None or z.size == 1)

    def qparams(self, n: Node) -> tuple[float, int]:
        s = self.const(n.inputs[1])
        z = self.const(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
        assert s is not None
        return float(np.float32(s.reshape(-1)[0])), int(z.reshape(-1)[0]) if z is not None else 0

    def act_dq(self, name: str, wide: bool = False) -> Node | None:
        """The per-tensor DequantizeLinear of an 8-bit activation (``wide``: or int16, for
        the kernels that take TFLite's 16x8)."""
        d = self.dq(name, const_data=False)
        if d is None or not self.per_tensor(d):
            return None
        v = self.value(d.inputs[0])
        ok = ("int8", "uint8", "int16") if wide else ("int8", "uint8")
        return d if v is not None and v.type.dtype.name in ok else None

    @staticmethod
    def zp_in(n: Node) -> str:
        return n.inputs[2] if len(n.inputs) > 2 else ""

    # -------------------------------------------------------------- the walk
    def hoist(self) -> None:
        """Move per-tensor activation DequantizeLinear below the shape-only ops that follow it
        (DQ -> Reshape becomes Reshape on the integers -> DQ), so DQ sits right before the op
        it feeds: the patterns below then see the integer tensor."""
        values = dict(self.g.values)
        nodes: list[Node] = []
        for n in self.g.nodes:
            d = (self.act_dq(n.inputs[0], wide=True) if n.inputs and n.op in MOVES
                 and not n.domain else None)
            if d is None or len(n.outputs) != 1 or not self.only_user(n.inputs[0]):
                nodes.append(n)
                continue
            iv, ov = values[d.inputs[0]], values[n.outputs[0]]
            moved = f"{n.outputs[0]}__int"
            values[moved] = Value(moved, TensorType(ov.type.shape, iv.type.dtype))
            nodes.append(n.with_(inputs=(d.inputs[0], *n.inputs[1:]), outputs=(moved,)))
            nodes.append(Node("DequantizeLinear", f"{n.name}__dq", (moved, *d.inputs[1:]),
                              n.outputs, dict(d.attrs), d.version, d.domain))
        self.g = self.g.replace(nodes=nodes, values=values)
        self.prod = self.g.producers()
        self.cons = self.g.consumers()

    def bias_input(self, b: Node, x: Node, w: Node, like: Node, q: Node) -> str | None:
        """The int32 bias as the kernel wants it: zero point 0, scaled by x_scale * w_scale.
        TFLite's biases are; a bias zero point is subtracted with int32 wrap-around (as
        DequantizeLinear computes it, docs/operators.md) and any other bias scale is
        rescaled at compile time (rounded)."""
        bs = self.const(b.inputs[1])
        ws = self.const(w.inputs[1])
        data = self.const(b.inputs[0])
        assert bs is not None and ws is not None and data is not None
        bz = self.const(b.inputs[2]) if len(b.inputs) > 2 and b.inputs[2] else None
        sx, _ = self.qparams(x)
        if data.dtype == np.int64:  # 16x8: TFLite's int64 bias is used as it is, or not at all
            have64, want64 = np.broadcast_arrays(bs.astype(np.float64).reshape(-1),
                                                 np.float64(sx) * ws.astype(np.float64).ravel())
            ok = (bz is None or not np.asarray(bz).any()) and bool(
                np.allclose(have64, want64, rtol=1e-6, atol=0))
            return b.inputs[0] if ok else None
        want = np.float64(sx) * ws.astype(np.float64).reshape(-1)
        have = np.broadcast_to(bs.astype(np.float64).reshape(-1), want.shape if want.size > 1
                               else bs.reshape(-1).shape)
        zero_zp = bz is None or not np.asarray(bz).any()
        same_scale = bool(np.allclose(have, want, rtol=1e-6, atol=0))
        if zero_zp and same_scale:
            return b.inputs[0]
        if not zero_zp:
            diff = data.astype(np.int64).reshape(-1) - np.asarray(bz, np.int64).reshape(-1)
            data = ((diff + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)
        if same_scale:
            scaled = data.astype(np.int32)
        else:
            # Rounded to units of x_scale * w_scale, the bias must stay within a quarter of an
            # output step of its value; otherwise (scales of absurd ratio: a unit larger than
            # the output step) the integer kernel would lose it, and the float ops stay.
            sy, _ = self.qparams(q)
            exact = data.astype(np.float64) * have / want
            if (np.abs(np.rint(exact) - exact) * want > 0.25 * sy).any():
                return None
            # Saturated to int32 (the kernel's accumulator clamps a bias this large further:
            # IntArith.fold_bias); a plain cast of an out-of-range float is undefined.
            scaled = np.clip(np.rint(data.astype(np.float64) * have / want),
                             -2.0 ** 31, 2.0 ** 31 - 1).astype(np.int32)
        name = f"{b.inputs[0]}__for_{like.name}"
        self.g.values[name] = Value(name, TensorType(scaled.shape, dtypes.int32), scaled)
        return name

    def run(self) -> Graph:
        self.hoist()
        out: list[Node] = []
        for n in self.g.nodes:
            if n.op == "QuantizeLinear" and n.domain in QDQ_DOMAINS and self.per_tensor(n) \
                    and len(n.inputs) > 2 and n.inputs[2]:
                new = self.rewrite(n)
                if new is not None:
                    out.append(new)
                    continue
            out.append(n)
        return self.g.replace(nodes=out)

    def rewrite(self, q: Node) -> Node | None:
        t = q.inputs[0]
        p = self.prod.get(t)
        if p is None or not self.only_user(t) or (
                p.domain and not (p.domain == "aotc" and p.op == "DequantizeLinear")):
            return None
        sy, zy = self.qparams(q)
        yv = self.value(q.inputs[2])
        assert yv is not None
        lo, hi = (int(v) for v in (np.iinfo(yv.type.dtype.np).min, np.iinfo(yv.type.dtype.np).max))
        act_attrs: dict[str, int] = {}
        if p.op in ("Relu", "Clip") and self.prod.get(p.inputs[0]) is not None \
                and self.prod[p.inputs[0]].op in ("Conv", "MatMul", "Add", "Gemm", "Mul",
                                                  "Sub", "ConvTranspose", "AveragePool") \
                and self.only_user(p.inputs[0]):
            bounds = self.clip_bounds(p)
            if bounds is None:
                return None
            a_lo, a_hi = qmath.activation_range(lo, hi, sy, zy, "clip", *bounds)
            act_attrs = {"_act_lo": a_lo, "_act_hi": a_hi}
            p = self.prod[p.inputs[0]]
        rule = getattr(self, f"r_{p.op}", None)
        if rule is None:
            return self.r_lut(p, q) or self.r_transparent(p, q)
        new = rule(p, q)
        if new is None:
            return None
        return new.with_(attrs={**new.attrs, **act_attrs})

    def clip_bounds(self, n: Node) -> tuple[float | None, float | None] | None:
        if n.op == "Relu":
            return 0.0, None
        lo = self.const(n.inputs[1]) if len(n.inputs) > 1 and n.inputs[1] else None
        hi = self.const(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
        if (len(n.inputs) > 1 and n.inputs[1] and lo is None) or (
                len(n.inputs) > 2 and n.inputs[2] and hi is None):
            return None
        return (None if lo is None else float(lo)), (None if hi is None else float(hi))

    def conv_node(self, p: Node, x: Node, w: Node, b: Node | None, q: Node, op: str,
                  domain: str = "") -> Node | None:
        """The integer conv ``op`` of ``p`` (x, w, b: its DequantizeLinear inputs; q: the
        QuantizeLinear after it): QLinearConv's eight inputs, then the int32/int64 bias."""
        ins = [x.inputs[0], x.inputs[1], self.zp_in(x), w.inputs[0], w.inputs[1],
               self.zp_in(w), q.inputs[1], q.inputs[2]]
        if b is not None:
            bias = self.bias_input(b, x, w, p, q)
            if bias is None:
                return None
            ins.append(bias)
        return self.int4(w, self.node(p, op, ins, q, domain))

    @staticmethod
    def int4(w: Node, new: Node) -> Node:
        """``new`` reading the weights of ``w``, a TFLite int4 filter's DequantizeLinear (the
        frontend's ``int4`` attribute): marked ``_int4``, its lowering keeps them packed
        (aotc.ops.quant.int4)."""
        if not w.attrs.get("int4"):
            return new
        return new.with_(attrs={**new.attrs, "_int4": 1})

    def node(self, like: Node, op: str, inputs: list[str], q: Node, domain: str = "",
             attrs: dict | None = None) -> Node:  # type: ignore[type-arg]
        return Node(op, f"{like.name}_q", tuple(inputs), (q.outputs[0],),
                    dict(attrs if attrs is not None else like.attrs), like.version, domain)

    # -------------------------------------------------------------- rules
    def x16_ok(self, x: Node, w: Node, q: Node, b: Node | None, w16: bool = False) -> bool:
        """An 8-bit conv / matmul (int32 bias), or TFLite's 16x8: int16 in and out, int8
        weights, an int64 or int32 bias; ``w16`` (a matmul, tflite mode): or TFLM's int16
        BATCH_MATMUL, int16 weights and no bias (int64 sums)."""
        xt = self.value(x.inputs[0]).type.dtype.name  # type: ignore[union-attr]
        bt = self.value(b.inputs[0]).type.dtype.name if b is not None else None  # type: ignore
        if xt != "int16":
            return bt in (None, "int32")
        yt = self.value(q.inputs[2]).type.dtype.name  # type: ignore[union-attr]
        wt = self.value(w.inputs[0]).type.dtype.name  # type: ignore[union-attr]
        if w16 and wt == "int16" and self.mode == "tflite":
            return yt == "int16" and bt is None
        return yt == "int16" and wt == "int8" and bt in (None, "int32", "int64")

    def int8_tflite(self, x: Node, w: Node, q: Node) -> bool:
        """TFLite's int8 kernels (tflite mode): int8 activations in and out, int8 weights with
        zero points 0."""
        if self.mode != "tflite":
            return False
        names = (x.inputs[0], w.inputs[0], q.inputs[2])
        if any(self.value(n).type.dtype.name != "int8" for n in names):  # type: ignore
            return False
        if not self.zp_in(w):
            return True
        wz = self.const(self.zp_in(w))
        return wz is not None and not wz.any()

    def r_Conv(self, p: Node, q: Node) -> Node | None:
        x = self.act_dq(p.inputs[0], wide=True)
        w = self.dq(p.inputs[1], const_data=True)
        b = self.dq(p.inputs[2], const_data=True) if len(p.inputs) > 2 and p.inputs[2] else None
        if x is None or w is None or (len(p.inputs) > 2 and p.inputs[2] and b is None):
            return None
        if not self.per_tensor(w) and int(w.attrs.get("axis", 1)) != 0:
            return None
        if not self.x16_ok(x, w, q, b):
            return None
        return self.conv_node(p, x, w, b, q, "QLinearConv")

    def _fc(self, mm: Node, bias: Node | None, q: Node, like: Node) -> Node | None:
        x = self.act_dq(mm.inputs[0], wide=True)
        w = self.dq(mm.inputs[1], const_data=True)
        if x is None or w is None or not self.x16_ok(x, w, q, bias, w16=True):
            return None
        wv = self.value(w.inputs[0])
        assert wv is not None
        if len(wv.type.shape) != 2 or (not self.per_tensor(w)
                                        and int(w.attrs.get("axis", 1)) != 1):
            return None
        ins = [x.inputs[0], x.inputs[1], self.zp_in(x), w.inputs[0], w.inputs[1],
               self.zp_in(w), q.inputs[1], q.inputs[2]]
        if bias is not None:
            b_in = self.bias_input(bias, x, w, like, q)
            if b_in is None:
                return None
            ins.append(b_in)
        return self.int4(w, self.node(like, "QLinearMatMul", ins, q, attrs={}))

    def r_MatMul(self, p: Node, q: Node) -> Node | None:
        return self._fc(p, None, q, p)

    def r_Add(self, p: Node, q: Node) -> Node | None:
        # MatMul + quantised int32 bias: TFLite's FULLY_CONNECTED.
        for i in (0, 1):
            mm = self.prod.get(p.inputs[i])
            b = self.dq(p.inputs[1 - i], const_data=True)
            if mm is not None and mm.op == "MatMul" and b is not None \
                    and self.only_user(p.inputs[i]):
                bv = self.value(b.inputs[0])
                if bv is not None and bv.type.dtype.name in ("int32", "int64") \
                        and len(bv.type.shape) == 1:
                    return self._fc(mm, b, q, p)
        return self._binary(p, q, "QLinearAdd")

    def r_Mul(self, p: Node, q: Node) -> Node | None:
        return self._binary(p, q, "QLinearMul")

    def r_Sub(self, p: Node, q: Node) -> Node | None:
        return self._binary(p, q, "QLinearSub", "aotc")

    def _binary(self, p: Node, q: Node, op: str, domain: str = "com.microsoft") -> Node | None:
        a = self.dq(p.inputs[0])
        b = self.dq(p.inputs[1])
        if a is None or b is None or not self.per_tensor(a) or not self.per_tensor(b):
            return None
        types = {self.value(n).type.dtype.name  # type: ignore[union-attr]
                 for n in (a.inputs[0], b.inputs[0], q.inputs[2])}
        if not (types <= {"int8", "uint8"} or types == {"int16"}):
            return None
        ins = [a.inputs[0], a.inputs[1], self.zp_in(a), b.inputs[0], b.inputs[1],
               self.zp_in(b), q.inputs[1], q.inputs[2]]
        return self.node(p, op, ins, q, domain, attrs={})

    def r_AveragePool(self, p: Node, q: Node) -> Node | None:
        x = self.act_dq(p.inputs[0], wide=True)
        if x is None:
            return None
        if self.value(x.inputs[0]).type.dtype.name == "int16" and not (  # type: ignore
                self.mode == "tflite" and self.same_params(x, q)):
            return None  # int16: TFLM's kernel (equal parameters, rounded integer division)
        attrs = {k: v for k, v in p.attrs.items() if k != "dilations"}
        if any(d != 1 for d in p.attrs.get("dilations") or []):
            return None
        ins = [x.inputs[0], x.inputs[1], self.zp_in(x), q.inputs[1], q.inputs[2]]
        return self.node(p, "QLinearAveragePool", ins, q, "com.microsoft", attrs)

    def r_GlobalAveragePool(self, p: Node, q: Node) -> Node | None:
        x = self.act_dq(p.inputs[0])
        if x is None:
            return None
        ins = [x.inputs[0], x.inputs[1], self.zp_in(x), q.inputs[1], q.inputs[2]]
        return self.node(p, "QLinearGlobalAveragePool", ins, q, "com.microsoft", {})

    def r_ReduceMean(self, p: Node, q: Node) -> Node | None:
        return self._reduce(p, q, "mean")

    def r_ReduceSum(self, p: Node, q: Node) -> Node | None:
        return self._reduce(p, q, "sum")

    def _reduce(self, p: Node, q: Node, kind: str) -> Node | None:
        """TFLite's MEAN/SUM arithmetic (QReduce) in tflite mode; onnx mode keeps the float
        reduction. Axes must be given (a constant input or the attribute)."""
        x = self.dq(p.inputs[0], const_data=False)
        xv = self.value(x.inputs[0]) if x is not None else None
        if self.mode != "tflite" or x is None or not self.per_tensor(x) or xv is None \
                or xv.type.dtype.name not in ("int8", "uint8", "int16") \
                or not self.same_type(x, q):
            return None
        raw = self.const(p.inputs[1]) if len(p.inputs) > 1 and p.inputs[1] else \
            p.attrs.get("axes")
        if raw is None or np.asarray(raw).size == 0:
            return None
        ins = [x.inputs[0], x.inputs[1], self.zp_in(x), q.inputs[1], q.inputs[2]]
        return self.node(p, "QReduce", ins, q, "aotc", {
            "axes": [int(a) for a in np.asarray(raw).reshape(-1)],
            "keepdims": int(p.attrs.get("keepdims", 1)), "kind": kind})

    def same_type(self, x: Node, q: Node) -> bool:
        xv, yv = self.value(x.inputs[0]), self.value(q.inputs[2])
        return xv is not None and yv is not None and xv.type.dtype == yv.type.dtype

    def r_Softmax(self, p: Node, q: Node) -> Node | None:
        new = self._softmax16(p, q)
        if new is not None:
            return new
        x = self.act_dq(p.inputs[0])
        xv = self.value(p.inputs[0])
        if x is None or xv is None or not self.same_type(x, q):
            return None  # (int8 -> int16 with beta 1: _softmax16)
        r = len(xv.type.shape)
        axis = int(p.attrs.get("axis", -1 if self.g.opset >= 13 else 1))
        if (axis + r if axis < 0 else axis) != r - 1:
            return None
        ins = [x.inputs[0], x.inputs[1], self.zp_in(x), q.inputs[1], q.inputs[2]]
        return self.node(p, "QLinearSoftmax", ins, q, "com.microsoft", {"axis": -1})

    def _softmax16(self, p: Node, q: Node) -> Node | None:
        """int16 SOFTMAX on the last axis: TFLM's (QSoftmax16), and, in tflite mode, TFLM's
        SOFTMAX from int8 to int16 (QSoftmaxToInt16); the beta of either the constant of a
        Mul between the DequantizeLinear and the Softmax (the TFLite frontend's beta)."""
        src, beta = p.inputs[0], 1.0
        m = self.prod.get(src)
        if m is not None and m.op == "Mul" and self.only_user(src):
            c = self.const(m.inputs[1])
            if c is None or c.size != 1:
                return None
            src, beta = m.inputs[0], float(c.reshape(-1)[0])
        xv = self.value(p.inputs[0])
        if xv is None:
            return None
        r = len(xv.type.shape)
        axis = int(p.attrs.get("axis", -1 if self.g.opset >= 13 else 1))
        if (axis + r if axis < 0 else axis) != r - 1:
            return None
        x = self.act_dq(src)
        yv = self.value(q.inputs[2])
        if self.mode == "tflite" and x is not None and yv is not None \
                and self.value(x.inputs[0]).type.dtype.name == "int8" \
                and yv.type.dtype.name == "int16":  # type: ignore[union-attr]
            ins = [x.inputs[0], x.inputs[1], self.zp_in(x), q.inputs[1], q.inputs[2]]
            return self.node(p, "QSoftmaxToInt16", ins, q, "aotc", {"beta": beta})
        return self._int16_unary(p.with_(inputs=(src,)), q, "QSoftmax16", {"beta": beta})

    def r_Concat(self, p: Node, q: Node) -> Node | None:
        ds = [self.act_dq(i) for i in p.inputs]
        if any(d is None for d in ds):
            return None
        ins = [q.inputs[1], q.inputs[2]]
        for d in ds:
            assert d is not None
            ins += [d.inputs[0], d.inputs[1], self.zp_in(d)]
        return self.node(p, "QLinearConcat", ins, q, "com.microsoft",
                         {"axis": p.attrs["axis"]})

    def same_params(self, x: Node | None, q: Node) -> bool:
        """x (a DequantizeLinear) and q quantise alike: same integer type, scale, zero point."""
        if x is None or self.qparams(x) != self.qparams(q):
            return False
        xv, yv = self.value(x.inputs[0]), self.value(q.inputs[2])
        return xv is not None and yv is not None and xv.type.dtype == yv.type.dtype

    def r_DequantizeLinear(self, p: Node, q: Node) -> Node | None:
        """Q(DQ(x)) with the same parameters is x; in tflite mode, between other parameters
        where an int16 or int32 side makes it TFLite's QUANTIZE requantising (TFLM's
        Requantize: one fixed-point multiplier)."""
        if self.same_params(self.act_dq(p.outputs[0], wide=True), q):
            return Node("Identity", f"{p.name}_q", (p.inputs[0],), (q.outputs[0],), {}, 1, "")
        d = self.dq(p.outputs[0], const_data=False)
        if d is None or self.mode != "tflite" or not self.per_tensor(d):
            return None
        xt = self.value(d.inputs[0]).type.dtype.name  # type: ignore[union-attr]
        yt = self.value(q.inputs[2]).type.dtype.name  # type: ignore[union-attr]
        kinds = {xt, yt}
        if not kinds <= {"int8", "int16", "int32"} or not kinds & {"int16", "int32"}:
            return None
        ins = [d.inputs[0], d.inputs[1], self.zp_in(d), q.inputs[1], q.inputs[2]]
        return Node("QRequantize", f"{p.name}_q", tuple(ins), (q.outputs[0],), {}, 1, "aotc")

    def r_LeakyRelu(self, p: Node, q: Node) -> Node | None:
        """int16, and int8 in tflite mode: TFLM's LEAKY_RELU (two fixed-point multipliers);
        8-bit otherwise: a table of the float function."""
        x = self.act_dq(p.inputs[0], wide=True)
        xt = self.value(x.inputs[0]).type.dtype.name if x is not None else None  # type: ignore
        if x is None or not (xt == "int16" or (xt == "int8" and self.mode == "tflite")):
            return self.r_lut(p, q)
        if self.value(q.inputs[2]).type.dtype.name != xt:  # type: ignore[union-attr]
            return None
        ins = [x.inputs[0], x.inputs[1], self.zp_in(x), q.inputs[1], q.inputs[2]]
        return self.node(p, "QLeakyRelu", ins, q, "aotc",
                         {"alpha": float(p.attrs.get("alpha", 0.01))})

    def r_Relu(self, p: Node, q: Node) -> Node | None:
        """int16: TFLM's RELU (one multiplier, QRelu); 8-bit: a table."""
        return self._int16_unary(p, q, "QRelu", {"kind": "relu"}) or self.r_lut(p, q)

    def r_Abs(self, p: Node, q: Node) -> Node | None:
        """int16: TFLM's ABS (|x| rescaled by one multiplier, QRelu); 8-bit: a table."""
        return self._int16_unary(p, q, "QRelu", {"kind": "abs"}) or self.r_lut(p, q)

    def r_Clip(self, p: Node, q: Node) -> Node | None:
        """int16 RELU6 (Clip to [0, 6]): TFLM's, the input's codes clamped (QRelu); 8-bit
        clips: a table."""
        if self.clip_bounds(p) == (0.0, 6.0):
            new = self._int16_unary(p, q, "QRelu", {"kind": "relu6"})
            if new is not None:
                return new
        return self.r_lut(p, q)

    def r_Sigmoid(self, p: Node, q: Node) -> Node | None:
        """int16: TFLM's LOGISTIC (QLogistic16: its interpolated table); 8-bit: a table."""
        return self._int16_unary(p, q, "QLogistic16", {}) or self.r_lut(p, q)

    def r_Tanh(self, p: Node, q: Node) -> Node | None:
        """int16: TFLM's TANH (QTanh16: the same table); 8-bit: a table."""
        return self._int16_unary(p, q, "QTanh16", {}) or self.r_lut(p, q)

    def _int16_unary(self, p: Node, q: Node, op: str, attrs: dict[str, Any]) -> Node | None:
        """The aotc-domain int16 kernel ``op`` of a one-input ``p`` between an int16
        DequantizeLinear and an int16 QuantizeLinear (tflite mode), else None."""
        x = self.act_dq(p.inputs[0], wide=True)
        if self.mode != "tflite" or x is None or not self.same_type(x, q) \
                or self.value(x.inputs[0]).type.dtype.name != "int16":  # type: ignore
            return None
        ins = [x.inputs[0], x.inputs[1], self.zp_in(x), q.inputs[1], q.inputs[2]]
        return self.node(p, op, ins, q, "aotc", attrs)

    def r_ConvTranspose(self, p: Node, q: Node) -> Node | None:
        """TFLite's 16x8 TRANSPOSE_CONV (int16 in and out, int8 weights, int64 or int32
        bias) and, in tflite mode, its int8 one (int8 in, out and weights, weight zero points
        0, an int32 bias) as an integer kernel; other 8-bit transpose convolutions stay
        float."""
        x = self.act_dq(p.inputs[0], wide=True)
        w = self.dq(p.inputs[1], const_data=True)
        b = self.dq(p.inputs[2], const_data=True) if len(p.inputs) > 2 and p.inputs[2] else None
        if x is None or w is None or (len(p.inputs) > 2 and p.inputs[2] and b is None):
            return None
        xt = self.value(x.inputs[0]).type.dtype.name  # type: ignore[union-attr]
        if xt != "int16" and not self.int8_tflite(x, w, q):
            return None
        if (not self.x16_ok(x, w, q, b) or int(p.attrs.get("group", 1)) != 1
                or (not self.per_tensor(w) and int(w.attrs.get("axis", 1)) != 1)):
            return None
        return self.conv_node(p, x, w, b, q, "QConvTranspose", "aotc")

    def r_lut(self, p: Node, q: Node) -> Node | None:
        fn = LUT_FUNCS.get(p.op)
        if p.op == "Clip":
            bounds = self.clip_bounds(p)
            if bounds is None:
                return None
            lo_b, hi_b = bounds
            fn = lambda x, n: np.clip(x, -np.inf if lo_b is None else lo_b,  # noqa: E731
                                      np.inf if hi_b is None else hi_b)
        x = self.act_dq(p.inputs[0])  # 8-bit only: a table of every input value
        if fn is None or x is None or len([i for i in p.inputs if i]) != (
                1 if p.op != "Clip" else len([i for i in p.inputs if i])):
            return None
        xv, yv = self.value(x.inputs[0]), self.value(q.inputs[2])
        assert xv is not None and yv is not None
        if xv.type.dtype != yv.type.dtype:
            return None
        sx, zx = self.qparams(x)
        sy, zy = self.qparams(q)
        table = tflm_table(p.op, self.mode, xv.type.dtype.np, sx, zx, sy, zy)
        if table is None:
            table = lut_table(lambda v: fn(v, p), xv.type.dtype.np, sx, zx, sy, zy)
        return Node("QLut", f"{p.name}_q", (x.inputs[0],), (q.outputs[0],), {"_table": table},
                    1, "aotc")

    def r_transparent(self, p: Node, q: Node) -> Node | None:
        """An op that only moves values, between equal quantisation parameters."""
        if p.op not in TRANSPARENT:
            return None
        x = self.act_dq(p.inputs[0], wide=True)
        if x is None or not self.same_params(x, q) or len(p.outputs) != 1:
            return None
        if p.op == "Pad" and len(p.inputs) > 2 and p.inputs[2]:
            return None  # a float pad value would need quantising
        return Node(p.op, p.name, (x.inputs[0], *p.inputs[1:]), (q.outputs[0],), dict(p.attrs),
                    p.version, p.domain)
