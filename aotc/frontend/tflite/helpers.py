"""Helpers the TFLite builtin converters share: an operator's inputs and outputs,
constant operands, quantisation comparisons and the layout an elementwise op runs in."""

from __future__ import annotations

from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.frontend.tflite.builder import TO_NCHW, Builder
from aotc.frontend.tflite.options import _opts

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def _ins(op: Any) -> list[int]:
    return [int(op.Inputs(i)) for i in range(op.InputsLength())]


def _outs(op: Any) -> list[int]:
    return [int(op.Outputs(i)) for i in range(op.OutputsLength())]


def _need_const(b: Builder, t: int, what: str) -> np.ndarray:
    c = b.const(t)
    if c is None:
        raise AotcError(f"the {what} ({b.tname(t)!r}) must be a constant")
    return c


def _nchw_axis(axis: int) -> int:
    return TO_NCHW.index(axis)


def _same_q(b: Builder, x: int, y: int) -> bool:
    """Both float, or both quantised with equal per-tensor parameters (shape ops run on the
    integers)."""
    qx, qy = b.quant(x), b.quant(y)
    if b.dtype(x) != b.dtype(y):
        return False
    if qx is None or qy is None:
        return qx is None and qy is None
    return (len(qx[0]) == len(qy[0]) == 1 and np.float32(qx[0][0]) == np.float32(qy[0][0])
            and int(qx[1][0]) == int(qy[1][0]))


def _operand(b: Builder, t: int, layout: str, rank: int) -> str:
    """Float operand ``t`` of an elementwise op computed in ``layout`` on rank-``rank``
    tensors; a lower-rank constant broadcasts in NHWC, so in NCHW it is re-laid out."""
    c = b.const(t)
    if layout == "nchw" and c is not None and c.ndim < 4:
        arr = c.reshape((1,) * (4 - c.ndim) + c.shape).transpose(TO_NCHW)
        return b.dq(b.init(arr, "constant"), t)
    return b.fin(t, layout)


def _layout_for(b: Builder, ts: list[int], y: int) -> str:
    """NCHW when the output is 4-D, every activation operand is 4-D and the first one is
    available in NCHW; otherwise NHWC."""
    acts = [t for t in ts if b.const(t) is None]
    if b.rank(y) != 4 or not acts or any(b.rank(t) != 4 for t in acts):
        return "nhwc"
    return b.layout_of(acts[0])


def strided_slice_params(b: Builder, op: Any) -> tuple[list[int], list[int], list[int], int]:
    """(starts, ends, steps, shrink mask) of a STRIDED_SLICE, as ONNX Slice (and Python
    slicing) take them."""
    o = _opts(op, "StridedSliceOptions")
    (x, bt, et, st) = _ins(op)[:4]
    if o is not None and (o.EllipsisMask() or o.NewAxisMask()):
        raise AotcError("ellipsis_mask and new_axis_mask are not supported")
    begin = [int(v) for v in _need_const(b, bt, "begin")]
    end = [int(v) for v in _need_const(b, et, "end")]
    step = [int(v) for v in _need_const(b, st, "strides")]
    bm, em, sm = (o.BeginMask(), o.EndMask(), o.ShrinkAxisMask()) if o else (0, 0, 0)
    if any(m >> len(begin) for m in (bm, em, sm)):
        raise AotcError(f"begin_mask, end_mask or shrink_axis_mask has bits beyond the "
                        f"{len(begin)} sliced dimensions")
    rel = bool(o.Offset()) if o is not None else False
    if 0 in step:
        raise AotcError("a stride is 0")
    if not len(begin) == len(end) == len(step) <= b.rank(x):
        raise AotcError(f"begin, end and strides of lengths {len(begin)}, {len(end)}, "
                        f"{len(step)} for a rank-{b.rank(x)} input")
    starts, ends = [], []
    for i, (s0, e0, k) in enumerate(zip(begin, end, step)):
        if rel:
            e0 = s0 + e0
        if bm >> i & 1:
            s0 = 0 if k > 0 else INT64_MAX
        if sm >> i & 1:
            e0 = s0 + 1 if s0 != -1 else INT64_MAX
            k = 1
        elif em >> i & 1:
            e0 = INT64_MAX if k > 0 else INT64_MIN
        starts.append(s0)
        ends.append(e0)
        step[i] = k
    return starts, ends, step, sm


def _pads(in_hw: tuple[int, ...], k_hw: tuple[int, ...], strides: tuple[int, ...],
          dil: tuple[int, ...], padding: int) -> list[int]:
    """TFLite's padding (SAME: the extra pixel at the end; VALID: none) as ONNX pads."""
    if padding == 1:  # VALID
        return [0] * (2 * len(in_hw))
    begin, end = [], []
    for i, k, s, d in zip(in_hw, k_hw, strides, dil):
        out = -(-i // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - i, 0)
        begin.append(total // 2)
        end.append(total - total // 2)
    return begin + end


def plain(b: Builder, ts: list[int]) -> bool:
    """No tensor of ``ts`` is quantised (float32, or int32/int64/bool values)."""
    return all(b.quant(t) is None or b.dtype(t) == np.int32 for t in ts)
