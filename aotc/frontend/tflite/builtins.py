"""TFLite builtin operators -> ONNX nodes (see aotc.frontend.tflite for layouts and QDQ).

Each converter reads one TFLite operator (inputs, outputs, builtin options) and emits its ONNX
equivalent through the Builder. ``CONVERTERS`` is the list of supported builtins; `aotc ops`
prints it as the TFLite column.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.frontend.tflite.builder import TO_NCHW, TO_NHWC, Builder
from aotc.frontend.tflite.helpers import (
    _ins,
    _layout_for,
    _nchw_axis,
    _need_const,
    _operand,
    _outs,
    _pads,
    _same_q,
    strided_slice_params,
)
from aotc.frontend.tflite.options import _opts
from aotc.frontend.tflite.recurrent import unidirectional_sequence_lstm
from aotc.frontend.tflite.variables import CONVERTERS as VARIABLE_CONVERTERS


# ---------------------------------------------------------------------- convolutions, pools
def conv_2d(b: Builder, op: Any) -> None:
    o = _opts(op, "Conv2DOptions")
    ins = _ins(op)
    b.allow_int4(ins[0], ins[1])
    wc = _need_const(b, ins[1], "filter")
    ci, c = wc.shape[3], b.shape(ins[0])[3]
    if ci == 0 or c % ci:
        raise AotcError(f"input channels {c} are not a multiple of the filter's {ci}")
    _conv(b, op, o, wc, (0, 3, 1, 2), c // ci, "conv")


def depthwise_conv_2d(b: Builder, op: Any) -> None:
    o = _opts(op, "DepthwiseConv2DOptions")
    ins = _ins(op)
    b.allow_int4(ins[0], ins[1])
    wc = _need_const(b, ins[1], "filter")
    cm, c = wc.shape[3], b.shape(ins[0])[3]
    if cm % c:
        raise AotcError(f"filter channels {cm} are not a multiple of the input's {c}")
    _conv(b, op, o, wc, (3, 0, 1, 2), c, "depthwise")


def _conv(b: Builder, op: Any, o: Any, wc: Any, perm: tuple[int, ...], group: int,
          name: str) -> None:
    """An ONNX Conv of the TFLite conv ``op`` (options ``o``, constant filter ``wc``, whose
    axes ``perm`` takes to ONNX's [M, C/group, kH, kW])."""
    ins, (y,) = _ins(op), _outs(op)
    x, w = ins[0], ins[1]
    kh, kw = wc.shape[1:3]
    s, d = (o.StrideH(), o.StrideW()), (o.DilationHFactor(), o.DilationWFactor())
    inputs = [b.fin(x, "nchw"), b.fin(w, arr=wc.transpose(perm), perm=perm)]
    if len(ins) > 2 and ins[2] >= 0:
        inputs.append(b.fin(ins[2]))
    out = b.add("Conv", inputs, name, kernel_shape=[kh, kw], strides=list(s),
                dilations=list(d), group=group,
                pads=_pads(b.shape(x)[1:3], (kh, kw), s, d, o.Padding()))[0]
    b.fout(y, out, "nchw", o.FusedActivationFunction())


def transpose_conv(b: Builder, op: Any) -> None:
    o = _opts(op, "TransposeConvOptions")
    ins, (y,) = _ins(op), _outs(op)
    w, x = ins[1], ins[2]
    wc = _need_const(b, w, "filter")
    _, kh, kw, _ = wc.shape
    s = (o.StrideH(), o.StrideW())
    in_hw, out_hw = b.shape(x)[1:3], b.shape(y)[1:3]
    pads, extra = [0, 0, 0, 0], [0, 0]
    for k, (i, n, kk, st) in enumerate(zip(in_hw, out_hw, (kh, kw), s)):
        total = (i - 1) * st + kk - n
        if total >= 0:
            before = total // 2 if o.Padding() == 0 else 0
            pads[k], pads[k + 2] = before, total - before
        else:
            extra[k] = -total
    perm = (3, 0, 1, 2)  # OHWI -> IOHW
    inputs = [b.fin(x, "nchw"), b.fin(w, arr=wc.transpose(perm), perm=perm)]
    if len(ins) > 3 and ins[3] >= 0:
        inputs.append(b.fin(ins[3]))
    attrs: dict[str, Any] = {"output_padding": extra} if any(extra) else {}
    out = b.add("ConvTranspose", inputs, "conv_transpose", kernel_shape=[kh, kw],
                strides=list(s), pads=pads, **attrs)[0]
    b.fout(y, out, "nchw", o.FusedActivationFunction())


def _pool(onnx_op: str) -> Callable[[Builder, Any], None]:
    def convert(b: Builder, op: Any) -> None:
        o = _opts(op, "Pool2DOptions")
        (x, *_), (y,) = _ins(op), _outs(op)
        k, s = (o.FilterHeight(), o.FilterWidth()), (o.StrideH(), o.StrideW())
        attrs = dict(kernel_shape=list(k), strides=list(s),
                     pads=_pads(b.shape(x)[1:3], k, s, (1, 1), o.Padding()))
        fused = o.FusedActivationFunction()
        # On the integers (ONNX's MaxPool has no int16: a 16x8 max pool dequantises, takes
        # the max and quantises again with the same parameters, which gives the same values).
        if onnx_op == "MaxPool" and fused == 0 and _same_q(b, x, y) and b.dtype(x) != np.int16:
            b.define(y, b.add("MaxPool", [b.get(x, "nchw")], "max_pool",
                              outputs=[b.out_name(y)], **attrs)[0], "nchw")
            return
        if onnx_op == "AveragePool" and fused == 0 and b.uint8(x) and b.uint8(y):
            b.as_uint8(x, y, "nchw", onnx_op, **attrs)  # uint8's rounding
            return
        out = b.add(onnx_op, [b.fin(x, "nchw")], "pool", **attrs)[0]
        b.fout(y, out, "nchw", fused)
    return convert


def fully_connected(b: Builder, op: Any) -> None:
    o = _opts(op, "FullyConnectedOptions")
    ins, (y,) = _ins(op), _outs(op)
    x, w = ins[0], ins[1]
    if o is not None and o.WeightsFormat() != 0:
        raise AotcError("only the DEFAULT weights format is supported")
    b.allow_int4(x, w)
    wc = _need_const(b, w, "weights")
    n_out, n_in = wc.shape
    xs = b.shape(x)
    rows = int(np.prod(xs, dtype=np.int64)) // n_in
    nhwc = None  # the NHWC shape of an input read in NCHW order
    if b.layout_of(x) == "flat" and rows == xs[0]:
        src, nhwc = b.get(x, "flat"), b.flat_src[x]
    elif b.rank(x) == 4 and b.layout_of(x) == "nchw" and rows == xs[0]:
        src, nhwc = b.get(x, "nchw"), xs
    else:
        src = b.get(x, "nhwc")
    if nhwc is not None:  # the weights' columns follow the input's (c, h, w) order
        n, h, w_, c = nhwc
        wc = wc.reshape(n_out, h, w_, c).transpose(0, 3, 1, 2).reshape(n_out, n_in)
    if tuple(xs) != (rows, n_in):
        shape = b.init(np.array([rows, n_in], np.int64), "shape")
        src = b.add("Reshape", [src, shape], "flatten")[0]
    xf = b.dq(src, x)
    wf = b.fin(w, arr=wc.T, perm=(1, 0))
    out = b.add("MatMul", [xf, wf], "matmul")[0]
    if len(ins) > 2 and ins[2] >= 0:
        out = b.add("Add", [out, b.fin(ins[2])], "bias")[0]
    fused = o.FusedActivationFunction() if o is not None else 0
    if tuple(b.shape(y)) == (rows, n_out):
        b.fout(y, out, "nhwc", fused)
        return
    b.fout(y, out, "nhwc", fused)
    flat = b.names[(y, "nhwc")]
    shape = b.init(np.array(b.shape(y), np.int64), "shape")
    b.define(y, b.add("Reshape", [flat, shape], "reshape", outputs=[b.out_name(y)])[0])


# ---------------------------------------------------------------------- elementwise
def _binary(onnx_op: str, options: str) -> Callable[[Builder, Any], None]:
    def convert(b: Builder, op: Any) -> None:
        o = _opts(op, options)
        ins, (y,) = _ins(op), _outs(op)
        layout = _layout_for(b, ins, y)
        args = [_operand(b, t, layout, b.rank(y)) for t in ins]
        out = b.add(onnx_op, args, onnx_op.lower())[0]
        b.fout(y, out, layout, o.FusedActivationFunction() if o is not None else 0)
    return convert


def _unary(onnx_op: str, **attrs: Any) -> Callable[[Builder, Any], None]:
    def convert(b: Builder, op: Any) -> None:
        (x, *_), (y,) = _ins(op), _outs(op)
        layout = b.layout_of(x) if b.rank(x) in (2, 4) else "nhwc"
        if layout == "flat":
            b.flat_src[y] = b.flat_src[x]
        extra = dict(attrs)
        if onnx_op == "LeakyRelu":
            extra["alpha"] = float(_opts(op, "LeakyReluOptions").Alpha())
        args = [b.fin(x, layout)]
        if onnx_op == "Clip":
            args += [b.init(np.float32(0), "min"), b.init(np.float32(6), "max")]
        b.fout(y, b.add(onnx_op, args, onnx_op.lower(), **extra)[0], layout)
    return convert


def softmax(b: Builder, op: Any) -> None:
    o = _opts(op, "SoftmaxOptions")
    (x, *_), (y,) = _ins(op), _outs(op)
    # int16 in or out: TFLM's kernels (aotc.ops.quant.act16.QSoftmax16,
    # aotc.ops.quant.tables.QSoftmaxToInt16) take rows on the last axis.
    layout = b.layout_of(x) if b.rank(x) == 4 and np.int16 not in (b.dtype(x), b.dtype(y)) \
        else "nhwc"
    xf = b.fin(x, layout)
    beta = float(o.Beta()) if o is not None else 1.0
    if beta != 1.0:
        xf = b.add("Mul", [xf, b.init(np.float32(beta), "beta")], "beta")[0]
    axis = 1 if layout == "nchw" else -1
    b.fout(y, b.add("Softmax", [xf], "softmax", axis=axis)[0], layout)


def quantize(b: Builder, op: Any) -> None:
    (x, *_), (y,) = _ins(op), _outs(op)
    layout = b.layout_of(x) if b.rank(x) == 4 else "nhwc"
    b.fout(y, b.fin(x, layout), layout)


def dequantize(b: Builder, op: Any) -> None:
    (x, *_), (y,) = _ins(op), _outs(op)
    if b.quant(x) is None and b.declared(x) == np.float16 and b.const(x) is not None:
        # float16 weights computed at compile time (DENSIFY of a sparse float16 constant):
        # folded to float32 like a float16 constant behind DEQUANTIZE (Builder.folded_f16).
        b.fold(y, b.const(x).astype(np.float32))
        return
    layout = b.layout_of(x) if b.rank(x) == 4 else "nhwc"
    b.define(y, b.fin(x, layout), layout)


# ---------------------------------------------------------------------- shape and movement
def _reshape_to(b: Builder, x: int, y: int, src: str) -> None:
    if not _same_q(b, x, y):
        raise AotcError("input and output quantisation parameters differ")
    shape = b.init(np.array(b.shape(y), np.int64), "shape")
    b.define(y, b.add("Reshape", [src, shape], "reshape", outputs=[b.out_name(y)])[0])


def reshape(b: Builder, op: Any) -> None:
    (x, *_), (y,) = _ins(op), _outs(op)
    xs, ys = b.shape(x), b.shape(y)
    if (b.rank(x) == 4 and b.layout_of(x) == "nchw" and (x, "nhwc") not in b.names
            and len(ys) == 2 and ys[0] == xs[0]):
        # A flatten of an NCHW tensor: kept in (c, h, w) order ("flat"); a FULLY_CONNECTED
        # reading it permutes its weights instead, so no transpose runs.
        _reshape_to(b, x, y, b.get(x, "nchw"))
        b.define(y, b.names[(y, "nhwc")], "flat")
        b.flat_src[y] = (xs[0], xs[1], xs[2], xs[3])
        return
    _reshape_to(b, x, y, b.get(x, "nhwc"))


def transpose(b: Builder, op: Any) -> None:
    (x, p), (y,) = _ins(op)[:2], _outs(op)
    perm = tuple(int(v) for v in _need_const(b, p, "permutation"))
    if not _same_q(b, x, y):
        raise AotcError("input and output quantisation parameters differ")
    if sorted(perm) != list(range(b.rank(x))):
        raise AotcError(f"perm {list(perm)} is not a permutation of {b.rank(x)} axes")
    src_layout = b.layout_of(x) if b.rank(x) == 4 else "nhwc"
    if src_layout == "nchw":  # x_nhwc = x_nchw.transpose(TO_NHWC): compose the two
        perm = tuple(TO_NHWC[q] for q in perm)
    src = b.get(x, src_layout)
    shape = b.shape(x) if src_layout == "nhwc" else tuple(b.shape(x)[q] for q in TO_NCHW)
    out = b.out_name(y)
    b._permute(src, shape, perm, out)
    b.define(y, out)


def concatenation(b: Builder, op: Any) -> None:
    o = _opts(op, "ConcatenationOptions")
    ins, (y,) = _ins(op), _outs(op)
    rank = b.rank(y)
    axis = o.Axis() % rank
    layout = _layout_for(b, ins, y)
    onnx_axis = _nchw_axis(axis) if layout == "nchw" else axis
    fused = o.FusedActivationFunction()
    if fused == 0 and all(_same_q(b, t, y) for t in ins):
        b.define(y, b.add("Concat", [b.get(t, layout) for t in ins], "concat",
                          outputs=[b.out_name(y)], axis=onnx_axis)[0], layout)
        return
    out = b.add("Concat", [b.fin(t, layout) for t in ins], "concat", axis=onnx_axis)[0]
    b.fout(y, out, layout, fused)


def pad(b: Builder, op: Any) -> None:
    (x, p, *_), (y,) = _ins(op), _outs(op)
    pads = _need_const(b, p, "paddings").astype(np.int64).reshape(-1, 2)
    if not _same_q(b, x, y):
        raise AotcError("input and output quantisation parameters differ")
    layout = b.layout_of(x) if b.rank(x) == 4 else "nhwc"
    if layout == "nchw":
        pads = pads[list(TO_NCHW)]
    q = b.quant(x)
    fill = np.array(q[1][0] if q is not None else 0, b.dtype(x))
    out = b.add("Pad", [b.get(x, layout), b.init(np.concatenate([pads[:, 0], pads[:, 1]]),
                                                  "pads"), b.init(fill, "value")],
                "pad", outputs=[b.out_name(y)], mode="constant")[0]
    b.define(y, out, layout)


def mean(b: Builder, op: Any) -> None:
    _reduce(b, op, "ReduceMean")


def _reduce(b: Builder, op: Any, onnx_op: str) -> None:
    """MEAN (SUM, REDUCE_MAX/MIN: math_ops.reducer). A quantised MEAN stays ReduceMean
    between DQ and Q, which the QDQ pass computes with TFLM's integer arithmetic
    (aotc.ops.quant.reduce), as it does the ReduceSum of an int8 SUM."""
    o = _opts(op, "ReducerOptions")
    (x, a), (y,) = _ins(op)[:2], _outs(op)
    rank = b.rank(x)
    axes = sorted({int(v) % rank for v in np.atleast_1d(_need_const(b, a, "axes"))})
    keep = bool(o.KeepDims()) if o is not None else False
    layout = b.layout_of(x) if rank == 4 else "nhwc"
    if layout == "nchw":
        axes = sorted(_nchw_axis(v) for v in axes)
        kept = [TO_NCHW[v] for v in range(4) if v not in axes]
        if not keep and kept != sorted(kept):
            layout, axes = "nhwc", sorted({int(v) % rank for v in np.atleast_1d(b.const(a))})
    xf = b.fin(x, layout)
    if onnx_op == "ReduceMean" and layout == "nchw" and axes == [2, 3] and keep \
            and b.quant(x) is None:
        out = b.add("GlobalAveragePool", [xf], "mean")[0]
    elif onnx_op == "ReduceSum":  # axes are an input from opset 13
        out = b.add(onnx_op, [xf, b.init(np.array(axes, np.int64), "axes")], "sum",
                    keepdims=int(keep))[0]
    else:
        out = b.add(onnx_op, [xf], "reduce", axes=axes, keepdims=int(keep))[0]
    b.fout(y, out, layout if keep else "nhwc")


def squeeze(b: Builder, op: Any) -> None:
    reshape(b, op)


def strided_slice(b: Builder, op: Any) -> None:
    (x, *_), (y,) = _ins(op), _outs(op)
    starts, ends, step, sm = strided_slice_params(b, op)
    if not _same_q(b, x, y):
        raise AotcError("input and output quantisation parameters differ")
    n = len(starts)
    axes = list(range(n))
    layout = b.layout_of(x) if b.rank(x) == 4 and n == 4 and not sm else "nhwc"
    if layout == "nchw":
        axes = [_nchw_axis(v) for v in axes]
    out = b.add("Slice", [b.get(x, layout), b.init(np.array(starts, np.int64), "starts"),
                          b.init(np.array(ends, np.int64), "ends"),
                          b.init(np.array(axes, np.int64), "axes"),
                          b.init(np.array(step, np.int64), "steps")], "slice")[0]
    if sm:
        # the shrunk shape, as TFLite computes it (the Reshape goes to the declared one)
        probe = np.empty(b.shape(x), np.bool_)[tuple(slice(*v) for v in zip(starts, ends, step))]
        want = [d for k, d in enumerate(probe.shape) if not (k < n and sm >> k & 1)]
        if list(b.shape(y)) != want:
            raise AotcError(f"output declared {list(b.shape(y))}; the slice with "
                            f"shrink_axis_mask {sm} gives {want}")
        _reshape_to(b, x, y, out)
    else:
        b.define(y, out, layout)


def split(b: Builder, op: Any) -> None:
    (a, x), ys = _ins(op)[:2], _outs(op)
    rank = b.rank(x)
    axis = int(np.asarray(_need_const(b, a, "axis")).reshape(-1)[0]) % rank
    if b.shape(x)[axis] % len(ys):
        raise AotcError(f"axis {axis} ({b.shape(x)[axis]}) does not split into {len(ys)}")
    if not all(_same_q(b, x, y) for y in ys):
        raise AotcError("input and output quantisation parameters differ")
    layout = b.layout_of(x) if rank == 4 else "nhwc"
    onnx_axis = _nchw_axis(axis) if layout == "nchw" else axis
    outs = b.add("Split", [b.get(x, layout)], "split",
                 outputs=[b.out_name(y) for y in ys], axis=onnx_axis)
    for y, name in zip(ys, outs):
        b.define(y, name, layout)


CONVERTERS: dict[str, Callable[[Builder, Any], None]] = {
    "ADD": _binary("Add", "AddOptions"),
    "AVERAGE_POOL_2D": _pool("AveragePool"),
    "CONCATENATION": concatenation,
    "CONV_2D": conv_2d,
    "DEPTHWISE_CONV_2D": depthwise_conv_2d,
    "DEQUANTIZE": dequantize,
    "FULLY_CONNECTED": fully_connected,
    "HARD_SWISH": _unary("HardSwish"),
    "LEAKY_RELU": _unary("LeakyRelu"),
    "LOGISTIC": _unary("Sigmoid"),
    "MAX_POOL_2D": _pool("MaxPool"),
    "MEAN": mean,
    "MUL": _binary("Mul", "MulOptions"),
    "PAD": pad,
    "QUANTIZE": quantize,
    "RELU": _unary("Relu"),
    "RELU6": _unary("Clip"),
    "RESHAPE": reshape,
    "SOFTMAX": softmax,
    "SPLIT": split,
    "SQUEEZE": squeeze,
    "STRIDED_SLICE": strided_slice,
    "SUB": _binary("Sub", "SubOptions"),
    "TANH": _unary("Tanh"),
    "TRANSPOSE": transpose,
    "TRANSPOSE_CONV": transpose_conv,
    "UNIDIRECTIONAL_SEQUENCE_LSTM": unidirectional_sequence_lstm,
    **VARIABLE_CONVERTERS,  # resource variables: state between calls (variables.py)
}

# The ONNX ops (float, and the integer kernels aotc.passes.qdq makes of the int8 form) each
# builtin becomes: the TFLite column of `aotc ops` and docs/operators.md.
ONNX_OPS: dict[str, tuple[str, ...]] = {
    "ADD": ("Add", "com.microsoft.QLinearAdd"),
    "AVERAGE_POOL_2D": ("AveragePool", "com.microsoft.QLinearAveragePool"),
    "CONCATENATION": ("Concat", "com.microsoft.QLinearConcat"),
    "CONV_2D": ("Conv", "QLinearConv"),
    "DEPTHWISE_CONV_2D": ("Conv", "QLinearConv"),
    "DEQUANTIZE": ("DequantizeLinear",),
    "FULLY_CONNECTED": ("MatMul", "QLinearMatMul"),
    "HARD_SWISH": ("HardSwish",),
    "LEAKY_RELU": ("LeakyRelu",),
    "LOGISTIC": ("Sigmoid", "aotc.QLogistic16"),
    "MAX_POOL_2D": ("MaxPool",),
    "MEAN": ("ReduceMean", "GlobalAveragePool", "aotc.QReduce"),
    "MUL": ("Mul", "com.microsoft.QLinearMul"),
    "PAD": ("Pad",),
    "QUANTIZE": ("QuantizeLinear",),
    "RELU": ("Relu", "aotc.QRelu"),
    "RELU6": ("Clip", "aotc.QRelu"),
    "RESHAPE": ("Reshape",),
    "SOFTMAX": ("Softmax", "com.microsoft.QLinearSoftmax", "aotc.QSoftmax16",
                "aotc.QSoftmaxToInt16"),
    "SPLIT": ("Split",),
    "SQUEEZE": ("Reshape",),
    "STRIDED_SLICE": ("Slice",),
    "SUB": ("Sub",),
    "TANH": ("Tanh", "aotc.QTanh16"),
    "TRANSPOSE": ("Transpose",),
    "TRANSPOSE_CONV": ("ConvTranspose",),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": ("LSTM", "Scan", "aotc.QLstm"),
    **{k: () for k in VARIABLE_CONVERTERS if k != "SVDF"},  # no op: the caller's state buffer
    "SVDF": ("aotc.Svdf",),
}


# The other families (their modules import the helpers above).
from aotc.frontend.tflite import control, detection, math_ops, signal, tensor_ops  # noqa: E402
from aotc.frontend.tflite.math_ops import elementwise as _elementwise  # noqa: E402
from aotc.frontend.tflite.math_ops import op2 as _op2  # noqa: E402

for _k in ("ADD", "SUB", "MUL"):
    CONVERTERS[_k] = _elementwise(_op2(_k.title()), _k.title() + "Options")
CONVERTERS.update(math_ops.CONVERTERS)
CONVERTERS.update(tensor_ops.CONVERTERS)
CONVERTERS.update(control.CONVERTERS)
ONNX_OPS.update(math_ops.ONNX_OPS)
ONNX_OPS.update(tensor_ops.ONNX_OPS)
ONNX_OPS.update(control.ONNX_OPS)
CONVERTERS.update(signal.CONVERTERS)  # TFLM's Signal library custom operators
ONNX_OPS.update(signal.ONNX_OPS)
CONVERTERS.update(detection.CONVERTERS)  # TFLite's SSD post-processing custom operator
ONNX_OPS.update(detection.ONNX_OPS)
CONVERTERS = dict(sorted(CONVERTERS.items()))
ONNX_OPS = dict(sorted(ONNX_OPS.items()))

# The tensor types each builtin converts (the type of its data operand: ``kind_of`` in
# importer.py; "int8" is int8 with quantisation parameters). The importer checks every
# operator of a model against this before converting anything. int8 is listed only where the
# result is bit-exact with TFLM's kernel (tests/frontend/test_tflite_ops.py).
_FI = ("float32", "int8", "uint8")
_VALUES = ("float32", "int8", "int32", "int64", "bool")  # ops that only move values
TYPES: dict[str, tuple[str, ...]] = {
    **{k: _FI for k in ("AVERAGE_POOL_2D", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED",
                        "HARD_SWISH", "LEAKY_RELU", "LOGISTIC", "MAX_POOL_2D", "MEAN", "RELU",
                        "RELU6", "SOFTMAX", "TANH", "TRANSPOSE_CONV")},
    **{k: ("float32", "int8", "uint8", "int32") for k in ("ADD", "SUB", "MUL")},
    **{k: _VALUES + ("uint8",) for k in ("CONCATENATION", "PAD", "RESHAPE", "SPLIT", "SQUEEZE",
                                         "STRIDED_SLICE", "TRANSPOSE")},
    "QUANTIZE": ("int8", "uint8", "int32"),  # int32: the requantisation of an int16 tensor
    "DEQUANTIZE": ("int8", "uint8", "float16"),
    **{k: ("float32",) for k in ("EXP", "LOG", "SQRT", "SQUARE", "SIN", "COS", "FLOOR", "CEIL",
                                 "ROUND", "RELU_N1_TO_1", "RELU_0_TO_1", "SIGN", "GELU",
                                 "POW", "REDUCE_PROD",
)},
    "ADD_N": ("float32", "int8"),  # int8: TFLM's kernel (QAddN)
    "CUMSUM": ("float32", "int8"),  # int8: TFLM's kernel (QCumSum)
    "L2_NORMALIZATION": ("float32", "int8"),  # int8: TFLM's kernel (QL2Norm)
    "LOG_SOFTMAX": ("float32", "int8"),  # int8: TFLM's kernel (QLogSoftmax)
    # int8 (int16 with an int8 alpha): TFLM's kernel (QPRelu).
    "PRELU": ("float32", "int8", "int16"),
    # int8 / int16: TFLM's quantised kernel (QSquaredDifference); int32 wraps as TFLM's.
    "SQUARED_DIFFERENCE": ("float32", "int8", "int16", "int32"),
    # int32 FLOOR_DIV / FLOOR_MOD: LiteRT's kernels (TFLM has float32 only), e.g. MoveNet's.
    **{k: ("float32", "int32") for k in ("FLOOR_DIV", "FLOOR_MOD")},
    "RESIZE_BILINEAR": ("float32", "int8", "uint8"),
    "ABS": ("float32", "int8"),
    "ELU": ("float32", "int8"),
    "RSQRT": ("float32", "int8"),
    "BATCH_MATMUL": ("float32", "int8"),
    "NEG": ("float32",),
    **{k: ("float32", "int8", "int32") for k in ("DIV",)},
    **{k: ("float32", "int8", "int32", "int64") for k in ("MAXIMUM", "MINIMUM")},
    **{k: ("float32", "int8", "int32", "int64") for k in (
        "EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL")},
    **{k: ("bool",) for k in ("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT", "REDUCE_ANY",
                              "REDUCE_ALL")},
    **{k: ("float32", "int8", "int32") for k in ("SELECT_V2",)},
    **{k: ("float32", "int8", "int32") for k in ("REDUCE_MAX", "REDUCE_MIN")},
    "SUM": ("float32", "int8"),  # int8: TFLM's integer sum (aotc.ops.quant.reduce)
    **{k: ("float32", "int8", "uint8") for k in ("ARG_MAX", "ARG_MIN")},
    **{k: _VALUES for k in ("PACK", "UNPACK", "EXPAND_DIMS", "ZEROS_LIKE", "FILL",
                            "BROADCAST_TO", "TILE", "SLICE", "SPLIT_V", "REVERSE_V2",
                            "GATHER", "GATHER_ND", "EMBEDDING_LOOKUP", "SHAPE")},
    **{k: ("float32", "int8") for k in ("PADV2", "MIRROR_PAD", "DEPTH_TO_SPACE",
                                        "SPACE_TO_DEPTH", "SPACE_TO_BATCH_ND",
                                        "BATCH_TO_SPACE_ND")},
    # uint8: a movement of the stored values (the graph's int8, shifted by 128), exact
    "RESIZE_NEAREST_NEIGHBOR": ("float32", "int8", "uint8"),
    "BROADCAST_ARGS": ("int32", "int64"),
    "DENSIFY": ("float32", "int8", "float16"),
    "L2_POOL_2D": ("float32",),
    "DYNAMIC_UPDATE_SLICE": _VALUES,
    # CAST: TFLM's cast.cc takes int8, int16, int32, uint32, float32 and bool (and aotc int64).
    "CAST": ("float32", "uint8", "int8", "int16", "int32", "uint32", "int64", "bool"),
    # Recurrent and state (recurrent.py, variables.py): the LSTM in float32, and TFLM's
    # integer LSTM, int8 and int16 (16x8) (tests/frontend/test_tflite_qlstm.py); a variable's
    # value in any type the state buffer holds.
    "UNIDIRECTIONAL_SEQUENCE_LSTM": ("float32", "int8", "int16"),
    "SVDF": ("float32", "int8"),
    "VAR_HANDLE": ("resource",),
    **{k: ("float32", "int8", "int16", "int32", "int64", "bool")
       for k in ("READ_VARIABLE", "ASSIGN_VARIABLE")},
    "CALL_ONCE": ("none",),
    # Control flow (control.py): the type of the first value carried (WHILE) or given (IF).
    **{k: ("float32", "int8", "int32") for k in ("IF", "WHILE")},
    **signal.TYPES,
    **detection.TYPES,
}
# int16x8 (int16 activations, int8 weights, int64 bias): the builtins whose 16x8 form is
# bit-exact with TFLM (tests/frontend/test_tflite_int16.py, test_tflm_integration.py). The
# others would run through float and are refused (HARD_SWISH, REDUCE_MAX, ...: TFLM has no
# int16 kernel for them either).
for _k in ("ADD", "SUB", "MUL", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "LEAKY_RELU",
           "QUANTIZE", "DEQUANTIZE", "TRANSPOSE_CONV", "PAD", "STRIDED_SLICE", "RESHAPE",
           "TRANSPOSE", "AVERAGE_POOL_2D", "MAX_POOL_2D", "CONCATENATION", "SPLIT", "RELU",
           "RELU6", "LOGISTIC", "TANH", "MEAN", "SUM", "SOFTMAX"):
    TYPES[_k] = (*TYPES[_k], "int16")
# int16 data movement (the values copied, parameters equal): bit-exact with TFLM in the
# conformance suite (tests/frontend/test_tflite_conformance.py).
for _k in ("EXPAND_DIMS", "SQUEEZE", "PACK", "UNPACK", "SPLIT_V", "SLICE", "PADV2", "REVERSE_V2",
           "BROADCAST_TO", "DYNAMIC_UPDATE_SLICE"):
    TYPES[_k] = (*TYPES[_k], "int16")
# int16 MAXIMUM / MINIMUM: TFLM's maximum_minimum.cc orders the stored integers (input and
# output parameters equal, as for int8).
for _k in ("MAXIMUM", "MINIMUM"):
    TYPES[_k] = (*TYPES[_k], "int16")
# int16 SELECT_V2: TFLM's select.cc copies the values (parameters equal).
TYPES["SELECT_V2"] = (*TYPES["SELECT_V2"], "int16")
# int32 PADV2: TFLM's pad.cc pads int32 values with the given constant.
TYPES["PADV2"] = (*TYPES["PADV2"], "int32")
# int16 BATCH_MATMUL: TFLM's 16x16 (int16 operands, int64 sums, zero points 0) with a
# constant right-hand side, as the int8 one (aotc.ops.quant.matmul QLinearMatMul).
TYPES["BATCH_MATMUL"] = (*TYPES["BATCH_MATMUL"], "int16")
# int16 RESIZE_NEAREST_NEIGHBOR: TFLM's copies the values (parameters equal).
TYPES["RESIZE_NEAREST_NEIGHBOR"] = (*TYPES["RESIZE_NEAREST_NEIGHBOR"], "int16")
# int16 ABS: TFLM's elementwise.cc (|x| requantised to the output's scale: aotc.ops.quant.rescale
# QRelu "abs"; zero points 0).
TYPES["ABS"] = (*TYPES["ABS"], "int16")
# Why a type TFLM has a kernel for stays refused (appended to the importer's refusal).
TYPE_WHY: dict[tuple[str, str], str] = {
    ("GREATER", "int16"): "TFLM's int16 GREATER compares with scaling parameters that its "
    "Prepare sets for int8 only (comparisons.cc), so its result is not the comparison (all "
    "false on a zeroed arena)",
    ("RSQRT", "int16"): "TFLM's int16 RSQRT computes a fixed-point inverse square root of each "
    "element (GetInvSqrtQuantizedMultiplierExp), which aotc has as a 256-entry int8 table only",
}
