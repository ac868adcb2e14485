"""The int32 (int64) bias of a quantised CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED or
TRANSPOSE_CONV (validate.py calls ``check_bias``): its scale is input scale x weight scale (TFLM
assumes it and never reads the bias's own), and its values with the products of their channel
fit TFLM's int32 accumulator; and its type is the one TFLM's kernel reads (BIAS_TYPES)."""

from __future__ import annotations

from typing import Any

import numpy as np

from aotc.frontend.tflite.validate_tables import BIASED, TYPE_NAMES, WEIGHT_AXIS, _err


def _check_weight(i: int, name: str, w: Any, x: Any) -> None:
    """An int8 or int16 data input takes int8 (or int4) weights, quantised per tensor or per
    output channel (TFLM's and LiteRT's kernels refuse other weights or read one scale)."""
    if x.Type() in (9, 7) and w.Type() not in (9, 17):
        raise _err(i, name, f"{TYPE_NAMES.get(w.Type(), w.Type())} weights for an "
                            f"{TYPE_NAMES[x.Type()]} input (int8 or int4 weights)")
    if x.Type() == 3 and w.Type() != 3:
        raise _err(i, name, f"{TYPE_NAMES.get(w.Type(), w.Type())} weights for a uint8 input "
                            f"(uint8 weights)")
    q = w.Quantization()
    if q is not None and q.ScaleLength() > 1 and q.QuantizedDimension() != WEIGHT_AXIS[name] \
            and 0 <= q.QuantizedDimension() < w.ShapeLength():  # others: Builder.quant
        raise _err(i, name, f"per-channel weight scales along dimension "
                            f"{q.QuantizedDimension()}; {name} takes them along dimension "
                            f"{WEIGHT_AXIS[name]} (its output channels)")


# The bias types TFLM's kernels read, by builtin and data type (conv.cc, depthwise_conv.cc,
# fully_connected.cc, transpose_conv.cc): an int8 input's bias is read as int32; a 16x8 one's
# as int32 or int64 by CONV_2D and FULLY_CONNECTED, but as int64 by DEPTHWISE_CONV_2D and
# TRANSPOSE_CONV (which also widens an int16 bias). A bias of another type is read past its
# buffer's end (an int32 bias read as int64) or misread: TFLM's answer is then undefined.
BIAS_TYPES = {("CONV_2D", 7): (2, 4), ("FULLY_CONNECTED", 7): (2, 4),
              ("DEPTHWISE_CONV_2D", 7): (4,), ("TRANSPOSE_CONV", 7): (4, 7)}


def _check_bias_type(i: int, name: str, b: Any, x: Any) -> None:
    if x.Type() not in (9, 3, 7):
        return
    ok = BIAS_TYPES.get((name, x.Type()), (2,))
    if b.Type() not in ok:
        want = " or ".join(TYPE_NAMES[t] for t in ok)
        raise _err(i, name, f"a bias of type {TYPE_NAMES.get(b.Type(), b.Type())} for an input "
                            f"of type {TYPE_NAMES[x.Type()]}: TFLM reads it as {want}, past or "
                            f"short of its data (quantise the bias as {want})")


def _const(model: Any, t: Any, dt: Any) -> np.ndarray | None:
    """The constant data of tensor ``t`` as ``dt`` (None: no data, or not a whole number of
    elements)."""
    if not 0 <= t.Buffer() < model.BuffersLength():
        return None
    buf = model.Buffers(t.Buffer())
    if buf is None or not buf.DataLength():
        return None
    raw = buf.DataAsNumpy()
    return None if raw.size % np.dtype(dt).itemsize else raw.view(dt)


def _check_accumulator(i: int, name: str, model: Any, b: Any, w: Any, x: Any) -> None:
    """An int32 bias plus the largest product sum of its output channel must fit in int32:
    TFLM's int8 kernels add them in an int32 that wraps; aotc's accumulator does not."""
    if b.Type() != 2 or w.Type() != 9 or x.Type() not in (9, 3):
        return
    bias, wts = _const(model, b, np.int32), _const(model, w, np.int8)
    if bias is None or wts is None or not bias.size or wts.size % bias.size:
        return
    ax = WEIGHT_AXIS[name] if name in WEIGHT_AXIS else 0
    shape = [int(d) for d in w.ShapeAsNumpy()] if w.ShapeLength() else []
    if int(np.prod(shape)) != wts.size or not 0 <= ax < len(shape) or \
            shape[ax] != bias.size:
        return
    per = np.abs(np.moveaxis(wts.reshape(shape).astype(np.int64), ax, 0)).reshape(
        bias.size, -1).sum(axis=1)
    worst = np.abs(bias.astype(np.int64)) + 255 * per  # |x - zero point| <= 255
    if (worst > 2**31 - 1).any():
        c = int(np.argmax(worst))
        raise _err(i, name, f"bias {int(bias[c])} of output channel {c} with its products can "
                            f"overflow TFLM's int32 accumulator")


def check_bias(sub: Any, used: list[str], model: Any = None) -> None:
    """TFLM's int8 kernels requantise with input scale x weight scale and never read the bias
    scale: a bias of another scale would give a third answer."""
    for i in range(sub.OperatorsLength()):
        if used[i] not in BIASED:
            continue
        op = sub.Operators(i)
        bi, wi, xi = BIASED[used[i]]
        if op.InputsLength() <= max(wi, xi) or min(op.Inputs(wi), op.Inputs(xi)) < 0:
            continue
        _check_weight(i, used[i], sub.Tensors(op.Inputs(wi)), sub.Tensors(op.Inputs(xi)))
        if op.InputsLength() <= bi:
            continue
        tb, tw, tx = (op.Inputs(bi), op.Inputs(wi), op.Inputs(xi))
        if min(tb, tw, tx) < 0:
            continue
        b, w, x = (sub.Tensors(tb), sub.Tensors(tw), sub.Tensors(tx))
        _check_bias_type(i, used[i], b, x)
        if model is not None and used[i] != "TRANSPOSE_CONV":
            _check_accumulator(i, used[i], model, b, w, x)
        qs = [t.Quantization() for t in (b, w, x)]
        if any(q is None or q.ScaleLength() == 0 for q in qs) or b.Type() not in (2, 4):
            continue
        sb, sw, sx = (q.ScaleAsNumpy().astype(np.float64) for q in qs)
        if len(sx) != 1 or (len(sb) not in (1, len(sw)) and len(sw) != 1):
            continue  # counts that disagree with the channels: Builder.quant names them
        sb, want = np.broadcast_arrays(sb, sx[0] * sw)
        if not np.allclose(sb, want, rtol=1e-3, atol=0):
            raise _err(i, used[i], "the bias scale is not input scale x weight scale (TFLM "
                                   "assumes it is)")
