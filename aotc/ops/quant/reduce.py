"""QReduce: int8/uint8/int16 MEAN and SUM over any axes as TFLM computes them (reduce_common.cc,
reference_ops::QuantizedMeanOrSum): an int32 sum of the raw integers, minus the input zero
point times the element count, requantised by one fixed-point multiplier to the output's scale
(for MEAN the multiplier of in_scale / out_scale with 1/count folded into it, the shift clamped
as TFLM clamps it), plus the output zero point, saturated. No float at run time.

The QDQ pass makes it of DequantizeLinear -> ReduceMean/ReduceSum -> QuantizeLinear in
``--requant tflite`` mode (TFLite's MEAN and SUM import as that pattern); ``onnx`` mode keeps
the float reduction between DQ and Q, as onnxruntime computes it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Cast, Const, Expr, call
from aotc.ops import register
from aotc.ops.math.reduce import reduced_shape, resolve_axes
from aotc.ops.quant import arith as qmath
from aotc.ops.quant.conv_matmul import I32, QT, QuantOp, qrange
from aotc.ops.quant.qlinear import _clamp_i32, _scalar, unary_params


def mean_multiplier(sx: float, sy: float, count: int, kind: str) -> tuple[int, int]:
    """TFLM's (multiplier, shift) of a quantised MEAN (``kind`` "mean") or SUM over ``count``
    elements: QuantizeMultiplier(double(sx) / double(sy)), and for MEAN 1/count folded in
    with the shift limited to 32 and to 31 + the output shift."""
    m, s = qmath.quantize_multiplier(float(np.float64(np.float32(sx)) / np.float64(np.float32(sy))))
    if kind == "mean" and count > 0:
        shift = min(count.bit_length() - 1, 32, 31 + s)
        m, s = (m << shift) // count, s - shift
    return m, s


def _wrap32(v: int) -> int:
    return ((v + (1 << 31)) % (1 << 32)) - (1 << 31)


@register
class QReduce(QuantOp):
    """(X, x_scale, x_zero_point, y_scale, y_zero_point) -> Y: ``kind`` "mean" or "sum" over
    ``axes`` (TFLite's MEAN/SUM on int8, uint8 or int16, bit-exact with TFLM)."""

    name = "QReduce"
    since = 1
    domain = "aotc"
    dtypes = (*QT, "int16")
    attr_choices = {"kind": ("mean", "sum")}

    def reference(self, X: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray,
                  y_scale: np.ndarray, y_zero_point: np.ndarray, *, axes: Sequence[int],
                  keepdims: int = 1, kind: str = "mean") -> np.ndarray:
        raise NotImplementedError  # compute() has the node (its parameters)

    def _axes(self, node: Node, rank: int) -> tuple[int, ...]:
        return resolve_axes(node, node.attrs["axes"], rank, False)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x = ins[0]
        if x is None or x.type.dtype.name not in self.dtypes:
            raise AotcError("X must be int8, uint8 or int16", node.name, node.op)
        for i in (1, 2, 3, 4):
            if i < len(ins):
                _scalar(node, ins[i], "scales and zero points")
        axes = self._axes(node, len(x.type.shape))
        if math.prod(x.type.shape[a] for a in axes) == 0:
            raise AotcError("a reduction over zero elements is not supported", node.name,
                            node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        axes = self._axes(node, len(x.type.shape))
        shape = reduced_shape(x.type.shape, axes, bool(node.attrs.get("keepdims", 1)))
        return [TensorType(shape, x.type.dtype)]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        return node.with_(inputs=node.inputs[:1], attrs={**node.attrs, "_p": unary_params(ins)})

    @staticmethod
    def _plan(node: Node, p: dict[str, Any], count: int) -> tuple[int, int, int]:
        """(multiplier, shift, the int32 the zero points take off the sum)."""
        m, s = mean_multiplier(p["sx"], p["sy"], count, str(node.attrs.get("kind", "mean")))
        return m, s, _wrap32(p["zx"] * count)

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        x = args[0]
        assert x is not None
        p = unary_params(args)
        axes = self._axes(node, x.ndim)
        count = math.prod(x.shape[a] for a in axes)
        m, s, off = self._plan(node, p, count)
        keep = bool(node.attrs.get("keepdims", 1))
        total = np.sum(x.astype(np.int64), axis=axes, keepdims=keep)
        acc = (total - off + (1 << 31)) % (1 << 32) - (1 << 31)
        lo, hi = qrange(dtypes.from_numpy(x.dtype))
        y = qmath.mbqm_np(acc, m, s) + p["zy"]
        return np.clip(y, lo, hi).astype(x.dtype).reshape(np.shape(total))

    def lower(self, node: Node, kb: Any) -> None:
        X, Y = kb.inputs[0], kb.outputs[0]
        rank = len(X.shape)
        axes = self._axes(node, rank)
        kept = [d for d in range(rank) if d not in axes]
        count = math.prod(X.shape[a] for a in axes)
        p = node.attrs["_p"]
        m, s, off = self._plan(node, p, count)
        lo, hi = qrange(Y.dtype)
        keep = bool(node.attrs.get("keepdims", 1))
        with kb.loops([X.shape[d] for d in kept], [f"i{d}" for d in kept]) as ovars:
            idx: dict[int, Expr] = dict(zip(kept, ovars))
            acc = kb.local(Const(-off, I32) if off != -(1 << 31) else Const(off, I32),
                           "acc", I32)
            with ExitStack() as stack:
                full = dict(idx)
                for a in axes:
                    full[a] = stack.enter_context(kb.loop(X.shape[a], f"r{a}"))
                kb.assign(acc, acc + Cast(X[[full[d] for d in range(rank)]], I32))
            v = call("q_mbqm", acc, Const(m, I32), Const(s, I32), dtype=I32)
            v = v + Const(p["zy"], I32) if p["zy"] else v
            out_idx = [idx.get(d, Const(0)) for d in range(rank) if d in idx or keep]
            kb.store_output(out_idx, Cast(_clamp_i32(v, lo, hi), Y.dtype))
