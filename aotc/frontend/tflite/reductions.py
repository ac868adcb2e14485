"""TFLite's reductions (MEAN, SUM, REDUCE_MAX/MIN/PROD/ANY/ALL), ARG_MAX/ARG_MIN and CUMSUM ->
ONNX nodes: float as the float ONNX op; int8 on the stored integers where the op only orders
values, as TFLM's integer kernels where it computes (aotc.QReduce, aotc.QCumSum); the converter
table lives in math_ops.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.frontend.tflite.builder import Builder
from aotc.frontend.tflite.helpers import (
    _ins,
    _need_const,
    _outs,
    _same_q,
    plain,
)
from aotc.frontend.tflite.options import _opts

Emit = Callable[[Builder, list[str]], str]

def _axes(b: Builder, a: int, rank: int) -> list[int]:
    vals = np.atleast_1d(_need_const(b, a, "axes")).reshape(-1)
    if any(not -rank <= int(v) < rank for v in vals):
        raise AotcError(f"an axis of {[int(v) for v in vals]} is outside rank {rank}")
    return sorted({int(v) % rank for v in vals})


def reducer(onnx_op: str, raw_int8: bool) -> Callable[[Builder, Any], None]:
    def convert(b: Builder, op: Any) -> None:
        o = _opts(op, "ReducerOptions")
        (x, a), (y,) = _ins(op)[:2], _outs(op)
        rank = b.rank(x)
        axes = _axes(b, a, rank)
        keep = bool(o.KeepDims()) if o is not None else False
        # ONNX opset 17: ReduceSum takes its axes as an input, the others as an attribute.
        ax_in = [b.init(np.array(axes, np.int64), "axes")] if onnx_op == "ReduceSum" else []
        ax_at = {} if onnx_op == "ReduceSum" else {"axes": axes}
        if not axes:  # nothing reduced: the values, as the output's shape
            src = b.get(x) if plain(b, [x, y]) or _same_q(b, x, y) else b.fin(x)
            shape = b.init(np.array(b.shape(y), np.int64), "shape")
            out = b.add("Reshape", [src, shape], "reshape")[0]
            if plain(b, [x, y]) or _same_q(b, x, y):
                b.define(y, b.add("Identity", [out], "out", outputs=[b.out_name(y)])[0])
            else:
                b.fout(y, out)
            return
        if plain(b, [x, y]) and b.dtype(x) == np.bool_:
            xi = b.add("Cast", [b.get(x)], "as_int", to=6)[0]
            r = b.add(onnx_op, [xi, *ax_in], "reduce", keepdims=int(keep), **ax_at)[0]
            b.define(y, b.add("Cast", [r], "as_bool", outputs=[b.out_name(y)], to=9)[0])
            return
        if plain(b, [x, y]) and b.dtype(x) != np.float32:
            b.define(y, b.add(onnx_op, [b.get(x), *ax_in], "reduce", outputs=[b.out_name(y)],
                              keepdims=int(keep), **ax_at)[0])
            return
        if raw_int8 and b.quant(x) is not None:
            if not _same_q(b, x, y):
                raise AotcError(f"int8 {b.op_name} needs the input's scale and zero point on "
                                f"its output (TFLM's kernel keeps the stored integers)")
            b.define(y, b.add(onnx_op, [b.get(x), *ax_in], "reduce", outputs=[b.out_name(y)],
                              keepdims=int(keep), **ax_at)[0])
            return
        b.fout(y, b.add(onnx_op, [b.fin(x), *ax_in], "reduce", keepdims=int(keep), **ax_at)[0])
    return convert


def arg_min_max(onnx_op: str, options: str) -> Callable[[Builder, Any], None]:
    def convert(b: Builder, op: Any) -> None:
        (x, a), (y,) = _ins(op)[:2], _outs(op)
        rank = b.rank(x)
        axis = int(np.asarray(_need_const(b, a, "axis")).reshape(-1)[0])
        if not -rank <= axis < rank:
            raise AotcError(f"axis {axis} is outside rank {rank}")
        if b.dtype(y) not in (np.int32, np.int64):
            raise AotcError(f"output type {b.dtype(y).name}: int32 or int64 expected")
        # int8: the dequantised values, in the same order as the stored integers (exact).
        src = b.fin(x)
        out = b.add(onnx_op, [src], "arg", axis=axis % rank, keepdims=0)[0]
        if b.dtype(y) == np.int32:
            out = b.add("Cast", [out], "cast", outputs=[b.out_name(y)], to=6)[0]
        else:
            out = b.add("Identity", [out], "out", outputs=[b.out_name(y)])[0]
        b.define(y, out)
    return convert


def cumsum(b: Builder, op: Any) -> None:
    o = _opts(op, "CumsumOptions")
    (x, a), (y,) = _ins(op)[:2], _outs(op)
    rank = b.rank(x)
    axis = int(np.asarray(_need_const(b, a, "axis")).reshape(-1)[0])
    if not -rank <= axis < rank:
        raise AotcError(f"axis {axis} is outside rank {rank}")
    attrs = dict(exclusive=int(bool(o and o.Exclusive())), reverse=int(bool(o and o.Reverse())))
    ax = b.init(np.array(axis % rank, np.int64), "axis")
    if plain(b, [x, y]) and b.dtype(x) != np.float32:
        b.define(y, b.add("CumSum", [b.get(x), ax], "cumsum", outputs=[b.out_name(y)],
                          **attrs)[0])
        return
    if b.dtype(x) == np.int8:  # TFLM's integer kernel (aotc's QCumSum)
        qs = [b.quant(t) for t in (x, y)]
        if any(q is None or len(q[0]) != 1 for q in qs) or b.dtype(y) != np.int8:
            raise AotcError("int8 CUMSUM needs an int8 output and per-tensor parameters")
        (sx, zx, _), (sy, zy, _) = qs  # type: ignore[misc]
        b.define(y, b.add("QCumSum", [
            b.get(x), b.init(np.float32(sx[0]), "x_scale"), b.init(np.int8(zx[0]), "x_zero_point"),
            b.init(np.float32(sy[0]), "y_scale"), b.init(np.int8(zy[0]), "y_zero_point")],
            "cumsum", outputs=[b.out_name(y)], domain="aotc", axis=axis % rank, **attrs)[0])
        return
    b.fout(y, b.add("CumSum", [b.fin(x), ax], "cumsum", **attrs)[0])
