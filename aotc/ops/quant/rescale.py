"""TFLite's per-element fixed-point rescaling kernels that have no ONNX QOperator form:
QRequantize (TFLM's QUANTIZE between integer types, ``Requantize``), QLeakyRelu (TFLM's
LEAKY_RELU: one multiplier for x >= 0, one for x < 0) and QRelu (TFLM's int16 RELU, RELU6
and ABS), all aotc-domain ops made by the QDQ pass from DequantizeLinear -> [LeakyRelu |
Relu | Clip | Abs] -> QuantizeLinear. Multipliers and shifts are compile-time constants
(TFLM's Prepare); the kernel is one loop over the elements.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Cast, Const, Expr, bmax, bmin, call, cmp, select
from aotc.ops import register
from aotc.ops.quant import arith as qmath
from aotc.ops.quant.conv_matmul import I32, QuantOp, qrange
from aotc.ops.quant.qlinear import _scalar, unary_params

INTS = ("int8", "int16", "int32")


class _Rescale(QuantOp):
    """(X, X_scale, X_zero_point, Y_scale, Y_zero_point) -> Y of Y_zero_point's type."""

    domain = "aotc"
    since = 1
    dtypes = INTS

    def reference(self, X: np.ndarray, X_scale: np.ndarray, X_zero_point: np.ndarray,
                  Y_scale: np.ndarray, Y_zero_point: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # compute(): the parameters come from the node

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x, yz = ins[0], ins[4] if len(ins) > 4 else None
        if x is None or x.type.dtype.name not in INTS:
            raise AotcError(f"X must be one of {', '.join(INTS)}", node.name, node.op)
        if yz is None or yz.type.dtype.name not in INTS:
            raise AotcError("Y_zero_point (its type is the output's) is required, one of "
                            f"{', '.join(INTS)}", node.name, node.op)
        for i in (1, 2, 3, 4):
            _scalar(node, ins[i], "scales and zero points")

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None and ins[4] is not None
        return [TensorType(ins[0].type.shape, ins[4].type.dtype)]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        assert ins[4] is not None
        return node.with_(inputs=node.inputs[:1], attrs={
            **node.attrs, "_p": unary_params(ins), "_out": ins[4].type.dtype.name})

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        x, yz = args[0], args[4]
        assert x is not None and yz is not None
        p = unary_params(args)
        lo, hi = self.bounds(p, attrs, *qrange(dtypes.from_numpy(yz.dtype)))
        flat = [self.scalar_ref(int(v), p, attrs) for v in x.ravel()]
        return np.clip(np.array(flat, np.int64), lo, hi).astype(yz.dtype).reshape(x.shape)

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        out = dtypes.BY_NAME[node.attrs["_out"]]
        p = node.attrs["_p"]
        lo, hi = self.bounds(p, node.attrs, *qrange(out))
        with kb.loop(X.numel, "i") as i:
            v = Cast(X.flat(i), I32)
            if p["zx"]:
                v = v - Const(p["zx"], I32)
            y = self.scalar_expr(kb.local(v, "v", I32), p, node.attrs) + Const(p["zy"], I32)
            kb.store_output([], Cast(bmin(bmax(y, Const(lo, I32)), Const(hi, I32)), out),
                            flat=i)

    def bounds(self, p: dict[str, Any], attrs: dict[str, Any], lo: int, hi: int
               ) -> tuple[int, int]:
        """The output's clamp (the output type's range unless an activation narrows it)."""
        return lo, hi

    def scalar_ref(self, x: int, p: dict[str, Any], attrs: dict[str, Any]) -> int:
        raise NotImplementedError

    def scalar_expr(self, v: Expr, p: dict[str, Any], attrs: dict[str, Any]) -> Expr:
        raise NotImplementedError


def _mbqm(v: Expr, m: int, s: int) -> Expr:
    return call("q_mbqm", v, Const(m, I32), Const(s, I32), dtype=I32)


@register
class QRequantize(_Rescale):
    """TFLM's QUANTIZE from an integer tensor: y = clamp(mbqm(x - zx, M, S) + zy), M and S
    from the double x_scale / y_scale (tflite mode only: the QDQ pass makes it then)."""

    name = "QRequantize"

    @staticmethod
    def _mult(p: dict[str, Any]) -> tuple[int, int]:
        return qmath.quantize_multiplier(float(np.float64(p["sx"]) / np.float64(p["sy"])))

    def scalar_ref(self, x: int, p: dict[str, Any], attrs: dict[str, Any]) -> int:
        m, s = self._mult(p)
        return qmath.mbqm(qmath._wrap32(x - p["zx"]), m, s) + p["zy"]

    def scalar_expr(self, v: Expr, p: dict[str, Any], attrs: dict[str, Any]) -> Expr:
        return _mbqm(v, *self._mult(p))


@register
class QLeakyRelu(_Rescale):
    """TFLM's int8 / int16 LEAKY_RELU: x - zx >= 0 scaled by x_scale / y_scale, below 0 by
    x_scale * alpha / y_scale (both computed in float32, as TFLM's Prepare does; a negative
    alpha's multiplier is applied as |M| and negated)."""

    name = "QLeakyRelu"
    dtypes = ("int8", "int16")

    def reference(self, X: np.ndarray, X_scale: np.ndarray, X_zero_point: np.ndarray,
                  Y_scale: np.ndarray, Y_zero_point: np.ndarray, *,
                  alpha: float = 0.01) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def _mults(p: dict[str, Any], alpha: float) -> tuple[int, int, int, int, bool]:
        f = np.float32
        mi, si = qmath.quantize_multiplier(float(f(p["sx"]) / f(p["sy"])))
        ma, sa = qmath.quantize_multiplier(float(f(p["sx"]) * f(alpha) / f(p["sy"])))
        return mi, si, abs(ma), sa, ma < 0

    def scalar_ref(self, x: int, p: dict[str, Any], attrs: dict[str, Any]) -> int:
        mi, si, ma, sa, neg = self._mults(p, float(attrs.get("alpha", 0.01)))
        v = x - p["zx"]
        if v >= 0:
            return p["zy"] + qmath.mbqm(v, mi, si)
        r = qmath.mbqm(v, ma, sa)
        return p["zy"] + (-r if neg else r)

    def scalar_expr(self, v: Expr, p: dict[str, Any], attrs: dict[str, Any]) -> Expr:
        mi, si, ma, sa, neg = self._mults(p, float(attrs.get("alpha", 0.01)))
        below = _mbqm(v, ma, sa)
        return select(cmp("ge", v, Const(0, I32)), _mbqm(v, mi, si),
                      -below if neg else below, I32)


@register
class QRelu(_Rescale):
    """TFLM's int16 RELU and RELU6 (activations.cc; zero points 0, as its Prepare requires
    for RELU and TFLite's 16x8 writes) and ABS (elementwise.cc AbsEvalQuantized; zero points
    0, as its Prepare requires). ``kind`` "relu": ReluQuantized, y = mbqm(x, M, S) clamped to
    [0, 32767], M and S from the double of float32(x_scale / y_scale); "relu6":
    Relu6Quantized, the input's codes clamped to [0, round(6 / x_scale)] (TFLM reads the
    input's parameters only: the output's are taken to be the same); "abs": |x| in int32,
    as is when the float32 scales are equal, else mbqm(|x|, M, S) (the same M and S), clamped
    to [-32768, 32767]."""

    name = "QRelu"
    dtypes = ("int16",)

    def reference(self, X: np.ndarray, X_scale: np.ndarray, X_zero_point: np.ndarray,
                  Y_scale: np.ndarray, Y_zero_point: np.ndarray, *,
                  kind: str = "relu") -> np.ndarray:
        raise NotImplementedError

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x, yz = ins[0], ins[4]
        assert x is not None and yz is not None
        if x.type.dtype.name != "int16" or yz.type.dtype.name != "int16":
            raise AotcError("X and Y must be int16", node.name, node.op)
        p = unary_params(ins)
        if p["zx"] or p["zy"]:
            raise AotcError("int16 RELU/RELU6/ABS needs zero points 0 (TFLite's 16x8; TFLM's "
                            "Prepare requires it)", node.name, node.op)
        if node.attrs.get("kind", "relu") not in ("relu", "relu6", "abs"):
            raise AotcError("kind must be relu, relu6 or abs", node.name, node.op)

    @staticmethod
    def _mult(p: dict[str, Any]) -> tuple[int, int]:
        return qmath.quantize_multiplier(float(np.float32(p["sx"]) / np.float32(p["sy"])))

    def bounds(self, p: dict[str, Any], attrs: dict[str, Any], lo: int, hi: int
               ) -> tuple[int, int]:
        if attrs.get("kind", "relu") == "relu6":  # FloatToQuantizedType<int16_t>(6, sx, 0)
            six = float(np.float32(6.0) / np.float32(p["sx"]))
            return max(lo, 0), min(hi, int(np.sign(six) * np.floor(abs(six) + 0.5)))
        if attrs.get("kind", "relu") == "abs":
            return lo, hi
        return max(lo, 0), hi

    def scalar_ref(self, x: int, p: dict[str, Any], attrs: dict[str, Any]) -> int:
        kind = attrs.get("kind", "relu")
        if kind == "relu6":
            return x
        if kind == "abs":
            x = abs(x)
            if np.float32(p["sx"]) == np.float32(p["sy"]):
                return x
        return qmath.mbqm(x, *self._mult(p))

    def scalar_expr(self, v: Expr, p: dict[str, Any], attrs: dict[str, Any]) -> Expr:
        kind = attrs.get("kind", "relu")
        if kind == "relu6":
            return v
        if kind == "abs":
            v = select(cmp("lt", v, Const(0, I32)), -v, v, I32)
            if np.float32(p["sx"]) == np.float32(p["sy"]):
                return v
        return _mbqm(v, *self._mult(p))
