"""TFLite shape, movement and index builtins -> ONNX nodes.

These only move values: every type (float32, int8, int16, int32, int64, bool) runs on the values
as stored, and a quantised output must keep its input's scale and zero point (TFLM's kernels
copy the integers). SHAPE always folds at compile time (aotc's shapes are static); the others
fold when every input is a constant (``fold`` in builtins.py), else become the ONNX op. They run
in TFLite's NHWC order (the layout pass of aotc.frontend.tflite inserts any transpose), except
DEPTH_TO_SPACE / SPACE_TO_DEPTH / RESIZE_*, which are NCHW ops in ONNX.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.frontend.tflite.builder import Builder
from aotc.frontend.tflite.helpers import _ins, _need_const, _outs, _same_q, plain
from aotc.frontend.tflite.options import _opts


def _check_q(b: Builder, x: int, ys: list[int]) -> None:
    for y in ys:
        if not _same_q(b, x, y) and not (plain(b, [x, y]) and b.dtype(x) == b.dtype(y)):
            raise AotcError("input and output quantisation parameters (or types) differ; "
                            "TFLM's kernel copies the stored values")


def _emit(b: Builder, y: int, op_type: str, inputs: list[str], layout: str = "nhwc",
          **attrs: Any) -> None:
    b.define(y, b.add(op_type, inputs, op_type.lower(), outputs=[b.out_name(y)], **attrs)[0],
             layout)


def _i64(b: Builder, values: Any, what: str = "values") -> str:
    return b.init(np.array(values, np.int64).reshape(-1), what)


def _reshape(b: Builder, op: Any) -> None:
    (x, *_), (y,) = _ins(op), _outs(op)
    _check_q(b, x, [y])
    _emit(b, y, "Reshape", [b.get(x), _i64(b, b.shape(y), "shape")])


def shape(b: Builder, op: Any) -> None:
    (x, *_), (y,) = _ins(op), _outs(op)
    b.fold(y, np.array(b.shape(x), np.int64))


def broadcast_args(b: Builder, op: Any) -> None:
    (s0, s1), (y,) = _ins(op)[:2], _outs(op)
    a, c = _need_const(b, s0, "shape"), _need_const(b, s1, "shape")
    b.fold(y, np.array(np.broadcast_shapes(tuple(int(v) for v in a),
                                           tuple(int(v) for v in c))))


def pack(b: Builder, op: Any) -> None:
    o = _opts(op, "PackOptions")
    ins, (y,) = _ins(op), _outs(op)
    axis = int(o.Axis()) if o is not None else 0
    r = b.rank(y)
    if not -r <= axis < r:
        raise AotcError(f"axis {axis} is outside rank {r}")
    _check_q(b, ins[0], [y] + ins[1:])
    ax = _i64(b, [axis % r], "axes")
    parts = [b.add("Unsqueeze", [b.get(t), ax], "unsqueeze")[0] for t in ins]
    _emit(b, y, "Concat", parts, axis=axis % r)


def unpack(b: Builder, op: Any) -> None:
    o = _opts(op, "UnpackOptions")
    (x, *_), ys = _ins(op), _outs(op)
    r = b.rank(x)
    axis = int(o.Axis()) if o is not None else 0
    if not -r <= axis < r:
        raise AotcError(f"axis {axis} is outside rank {r}")
    axis %= r
    if b.shape(x)[axis] != len(ys):
        raise AotcError(f"{len(ys)} outputs for axis {axis} of size {b.shape(x)[axis]}")
    _check_q(b, x, ys)
    parts = b.add("Split", [b.get(x)], "split", n_out=len(ys), axis=axis)
    for y, p in zip(ys, parts):
        _emit(b, y, "Squeeze", [p, _i64(b, [axis], "axes")])


def expand_dims(b: Builder, op: Any) -> None:
    _reshape(b, op)


def zeros_like(b: Builder, op: Any) -> None:
    (y,) = _outs(op)
    b.fold(y, np.zeros(b.shape(y), b.dtype(y)))


def fill(b: Builder, op: Any) -> None:
    (d, v), (y,) = _ins(op)[:2], _outs(op)
    dims = [int(k) for k in _need_const(b, d, "dims").reshape(-1)]
    if dims != list(b.shape(y)):
        raise AotcError(f"dims {dims} differ from the output shape {list(b.shape(y))}")
    _check_q(b, v, [y])
    c = b.const(v)
    if c is not None:
        b.fold(y, np.broadcast_to(np.asarray(c).reshape(()), dims))
        return
    _emit(b, y, "Expand", [b.get(v), _i64(b, dims, "shape")])


def broadcast_to(b: Builder, op: Any) -> None:
    (x, s), (y,) = _ins(op)[:2], _outs(op)
    _need_const(b, s, "shape")
    _check_q(b, x, [y])
    _emit(b, y, "Expand", [b.get(x), _i64(b, b.shape(y), "shape")])


def tile(b: Builder, op: Any) -> None:
    (x, m), (y,) = _ins(op)[:2], _outs(op)
    reps = _need_const(b, m, "multiples").reshape(-1)
    _check_q(b, x, [y])
    _emit(b, y, "Tile", [b.get(x), _i64(b, reps, "repeats")])


def slice_(b: Builder, op: Any) -> None:
    (x, bt, st), (y,) = _ins(op)[:3], _outs(op)
    begin = [int(v) for v in _need_const(b, bt, "begin").reshape(-1)]
    size = [int(v) for v in _need_const(b, st, "size").reshape(-1)]
    xs = b.shape(x)
    if len(begin) != len(xs) or len(size) != len(xs):
        raise AotcError(f"begin {begin} and size {size} do not match rank {len(xs)}")
    ends = [d if s == -1 else bb + s for bb, s, d in zip(begin, size, xs)]
    if any(not 0 <= bb <= e <= d for bb, e, d in zip(begin, ends, xs)):
        raise AotcError(f"begin {begin} size {size} is outside the input shape {list(xs)}")
    _check_q(b, x, [y])
    _emit(b, y, "Slice", [b.get(x), _i64(b, begin, "starts"), _i64(b, ends, "ends"),
                          _i64(b, range(len(xs)), "axes")])


def split_v(b: Builder, op: Any) -> None:
    (x, st, a), ys = _ins(op)[:3], _outs(op)
    r = b.rank(x)
    axis = int(np.asarray(_need_const(b, a, "axis")).reshape(-1)[0])
    if not -r <= axis < r:
        raise AotcError(f"axis {axis} is outside rank {r}")
    axis %= r
    sizes = [int(v) for v in _need_const(b, st, "size_splits").reshape(-1)]
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = b.shape(x)[axis] - (sum(sizes) + 1)
    if len(sizes) != len(ys) or sum(sizes) != b.shape(x)[axis] or min(sizes) < 0:
        raise AotcError(f"size_splits {sizes} do not split axis {axis} "
                        f"({b.shape(x)[axis]}) into {len(ys)}")
    _check_q(b, x, ys)
    outs = b.add("Split", [b.get(x), _i64(b, sizes, "split")], "split",
                 outputs=[b.out_name(y) for y in ys], axis=axis)
    for y, name in zip(ys, outs):
        b.define(y, name)


def padv2(b: Builder, op: Any) -> None:
    ins, (y,) = _ins(op), _outs(op)
    x, p = ins[0], ins[1]
    pads = _need_const(b, p, "paddings").astype(np.int64).reshape(-1, 2)
    _check_q(b, x, [y])
    if len(ins) > 2 and ins[2] >= 0:
        v = _need_const(b, ins[2], "constant value")
        if b.quant(ins[2]) is not None and b.quant(x) is not None and not _same_q(b, ins[2], x):
            raise AotcError("the pad value's quantisation differs from the input's")
        fill = np.array(np.asarray(v).reshape(-1)[0], b.dtype(x))
    else:
        q = b.quant(x)
        fill = np.array(q[1][0] if q is not None else 0, b.dtype(x))
    _emit(b, y, "Pad", [b.get(x), _i64(b, np.concatenate([pads[:, 0], pads[:, 1]]), "pads"),
                        b.init(fill, "value")], mode="constant")


def mirror_pad(b: Builder, op: Any) -> None:
    """REFLECT (edge not repeated) or SYMMETRIC (edge repeated), as slices reversed and
    concatenated per axis."""
    o = _opts(op, "MirrorPadOptions")
    (x, p), (y,) = _ins(op)[:2], _outs(op)
    pads = _need_const(b, p, "paddings").astype(np.int64).reshape(-1, 2)
    symmetric = bool(o is not None and o.Mode() == 1)
    _check_q(b, x, [y])
    cur, shp = b.get(x), list(b.shape(x))
    off = 0 if symmetric else 1
    for axis, (lo, hi) in enumerate(pads):
        lo, hi, n = int(lo), int(hi), shp[axis]
        if lo > n - off or hi > n - off or lo < 0 or hi < 0:
            raise AotcError(f"padding {[lo, hi]} on axis {axis} of size {n} is too large")
        parts = []
        if lo:  # x[off + lo - 1 : off - 1 : -1]
            parts.append(b.add("Slice", [cur, _i64(b, [off + lo - 1], "starts"),
                                         _i64(b, [off - 1 if off else -n - 1], "ends"),
                                         _i64(b, [axis], "axes"), _i64(b, [-1], "steps")],
                               "mirror_lo")[0])
        parts.append(cur)
        if hi:  # x[n - 1 - off : n - 1 - off - hi : -1]
            end = n - 1 - off - hi
            parts.append(b.add("Slice", [cur, _i64(b, [n - 1 - off], "starts"),
                                         _i64(b, [end if end >= 0 else -n - 1], "ends"),
                                         _i64(b, [axis], "axes"), _i64(b, [-1], "steps")],
                               "mirror_hi")[0])
        if len(parts) > 1:
            cur = b.add("Concat", parts, "mirror", axis=axis)[0]
        shp[axis] = n + lo + hi
    b.define(y, b.add("Identity", [cur], "out", outputs=[b.out_name(y)])[0])


def reverse_v2(b: Builder, op: Any) -> None:
    (x, a), (y,) = _ins(op)[:2], _outs(op)
    r = b.rank(x)
    axes = sorted({int(v) % r for v in _need_const(b, a, "axis").reshape(-1)})
    _check_q(b, x, [y])
    n = len(axes)
    _emit(b, y, "Slice", [b.get(x), _i64(b, [-1] * n, "starts"),
                          _i64(b, [np.iinfo(np.int64).min] * n, "ends"),
                          _i64(b, axes, "axes"), _i64(b, [-1] * n, "steps")])


def gather(b: Builder, op: Any) -> None:
    o = _opts(op, "GatherOptions")
    (x, i), (y,) = _ins(op)[:2], _outs(op)
    r = b.rank(x)
    axis = int(o.Axis()) if o is not None else 0
    if o is not None and o.BatchDims():
        raise AotcError("batch_dims != 0 is not supported")
    if not -r <= axis < r:
        raise AotcError(f"axis {axis} is outside rank {r}")
    _check_q(b, x, [y])
    _emit(b, y, "Gather", [b.get(x), b.get(i)], axis=axis % r)


def gather_nd(b: Builder, op: Any) -> None:
    (x, i), (y,) = _ins(op)[:2], _outs(op)
    _check_q(b, x, [y])
    idx = b.add("Cast", [b.get(i)], "indices", to=7)[0]
    _emit(b, y, "GatherND", [b.get(x), idx])


def embedding_lookup(b: Builder, op: Any) -> None:
    (i, v), (y,) = _ins(op)[:2], _outs(op)
    if b.dtype(v) != b.dtype(y):
        raise AotcError(f"{b.dtype(v).name} weights with a {b.dtype(y).name} output (hybrid "
                        f"lookup) are not supported")
    _check_q(b, v, [y])
    _emit(b, y, "Gather", [b.get(v), b.get(i)], axis=0)


def cast(b: Builder, op: Any) -> None:
    (x, *_), (y,) = _ins(op), _outs(op)
    to = {np.float32: 1, np.int8: 3, np.int16: 5, np.int32: 6, np.int64: 7, np.bool_: 9,
          np.uint8: 2, np.uint32: 12}
    dt = b.dtype(y).type
    if dt not in to:
        raise AotcError(f"cast to {b.dtype(y).name} is not supported")
    # TFLM's cast.cc casts the stored integers of a quantised int8 / int16 tensor, its
    # parameters (and the output's) ignored; aotc holds uint8 ones shifted by 128: refused.
    if b.uint8(x) or b.uint8(y):
        raise AotcError("CAST of a quantised uint8 tensor is not supported (TFLM has no "
                        "uint8 CAST)")
    _emit(b, y, "Cast", [b.get(x)], to=to[dt])


def _depth_space(onnx_op: str, options: str) -> Callable[[Builder, Any], None]:
    def convert(b: Builder, op: Any) -> None:
        o = _opts(op, options)
        (x, *_), (y,) = _ins(op), _outs(op)
        if b.rank(x) != 4:
            raise AotcError("a 4-D input is expected")
        _check_q(b, x, [y])
        attrs: dict[str, Any] = {"blocksize": int(o.BlockSize())}
        if onnx_op == "DepthToSpace":
            attrs["mode"] = "DCR"
        _emit(b, y, onnx_op, [b.get(x, "nchw")], "nchw", **attrs)
    return convert


def space_to_batch_nd(b: Builder, op: Any) -> None:
    """[N, H, W, C] -> pad -> [N, H/bh, bh, W/bw, bw, C] -> [bh, bw, N, H/bh, W/bw, C]."""
    (x, bs, p), (y,) = _ins(op)[:3], _outs(op)
    block = [int(v) for v in _need_const(b, bs, "block_shape").reshape(-1)]
    pads = _need_const(b, p, "paddings").astype(np.int64).reshape(-1, 2)
    xs = b.shape(x)
    if b.rank(x) != 4 or len(block) != 2:
        raise AotcError("a 4-D input with a 2-D block is supported")
    _check_q(b, x, [y])
    n, h, w, c = xs
    ph, pw = h + int(pads[0].sum()), w + int(pads[1].sum())
    if ph % block[0] or pw % block[1]:
        raise AotcError("the padded spatial size is not a multiple of the block")
    q = b.quant(x)
    zp = int(q[1][0]) if q is not None else 0
    if zp and pads.any():
        # TFLM pads with SpaceToBatchParams.output_offset, which it never initialises (the
        # arena's bytes; usually 0); LiteRT pads with the zero point. No answer to match.
        raise AotcError(f"int8 SPACE_TO_BATCH_ND with padding and zero point {zp} is not "
                        f"supported: TFLM pads with an uninitialised value, LiteRT with the "
                        f"zero point")
    fill = np.array(zp, b.dtype(x))
    full = [0, int(pads[0, 0]), int(pads[1, 0]), 0, 0, int(pads[0, 1]), int(pads[1, 1]), 0]
    v = b.add("Pad", [b.get(x), _i64(b, full, "pads"), b.init(fill, "value")], "pad",
              mode="constant")[0]
    v = b.add("Reshape", [v, _i64(b, [n, ph // block[0], block[0], pw // block[1], block[1],
                                      c], "shape")], "split_blocks")[0]
    v = b.add("Transpose", [v], "blocks_first", perm=[2, 4, 0, 1, 3, 5])[0]
    _emit(b, y, "Reshape", [v, _i64(b, b.shape(y), "shape")])


def batch_to_space_nd(b: Builder, op: Any) -> None:
    """[bh*bw*N, H, W, C] -> [bh, bw, N, H, W, C] -> [N, H, bh, W, bw, C] -> crop."""
    (x, bs, cr), (y,) = _ins(op)[:3], _outs(op)
    block = [int(v) for v in _need_const(b, bs, "block_shape").reshape(-1)]
    crops = _need_const(b, cr, "crops").astype(np.int64).reshape(-1, 2)
    if b.rank(x) != 4 or len(block) != 2:
        raise AotcError("a 4-D input with a 2-D block is supported")
    _check_q(b, x, [y])
    nb, h, w, c = b.shape(x)
    n = nb // (block[0] * block[1])
    v = b.add("Reshape", [b.get(x), _i64(b, [block[0], block[1], n, h, w, c], "shape")],
              "split_batch")[0]
    v = b.add("Transpose", [v], "interleave", perm=[2, 3, 0, 4, 1, 5])[0]
    v = b.add("Reshape", [v, _i64(b, [n, h * block[0], w * block[1], c], "shape")],
              "merge")[0]
    hh, ww = h * block[0], w * block[1]
    _emit(b, y, "Slice", [v, _i64(b, [crops[0, 0], crops[1, 0]], "starts"),
                          _i64(b, [hh - crops[0, 1], ww - crops[1, 1]], "ends"),
                          _i64(b, [1, 2], "axes")])


def _resize(mode: str, options: str) -> Callable[[Builder, Any], None]:
    def convert(b: Builder, op: Any) -> None:
        o = _opts(op, options)
        (x, s), (y,) = _ins(op)[:2], _outs(op)
        size = [int(v) for v in _need_const(b, s, "size").reshape(-1)]
        if b.rank(x) != 4 or size != list(b.shape(y)[1:3]):
            raise AotcError(f"size {size} does not match the 4-D output {list(b.shape(y))}")
        align = bool(o is not None and o.AlignCorners())
        half = bool(o is not None and o.HalfPixelCenters())
        n, _, _, c = b.shape(y)
        sizes = _i64(b, [n, c, size[0], size[1]], "sizes")
        if align and half:
            raise AotcError("align_corners with half_pixel_centers is not supported")
        if mode == "nearest":
            # TFLite: align_corners round(y * (in-1)/(out-1)); half-pixel floor((y + .5) *
            # in/out) = ONNX half_pixel rounded half up; else floor(y * in/out).
            ctm = "align_corners" if align else "half_pixel" if half else "asymmetric"
            attrs = dict(mode="nearest", coordinate_transformation_mode=ctm,
                         nearest_mode="round_prefer_ceil" if align or half else "floor")
            _check_q(b, x, [y])
            _emit(b, y, "Resize", [b.get(x, "nchw"), "", "", sizes], "nchw", **attrs)
            return
        if b.uint8(x):  # LiteRT's uint8 kernel: float weights
            _resize_bilinear_uint8(b, x, y, size, align, half)
            return
        if b.quant(x) is not None and b.dtype(x) == np.int8:
            _resize_bilinear_int8(b, x, y, size, align, half)
            return
        ctm = "align_corners" if align else "half_pixel" if half else "asymmetric"
        out = b.add("Resize", [b.fin(x, "nchw"), "", "", sizes], "resize", mode="linear",
                    coordinate_transformation_mode=ctm)[0]
        b.fout(y, out, "nchw")
    return convert


def _ctrunc(a: int, d: int) -> int:
    """C integer division (toward zero)."""
    q = abs(a) // abs(d)
    return q if (a >= 0) == (d >= 0) else -q


def _bilinear_taps(n_in: int, n_out: int, align: bool, half: bool
                   ) -> tuple[list[int], list[int], list[int], list[int]]:
    """TFLite's ResizeBilinearInteger along one axis: (lower, upper, lower weight, upper
    weight) per output index, weights in units of 2^-10."""
    scale = _ctrunc((1 << 10) * n_in + n_out // 2, n_out)
    if align and n_out > 1:
        scale = _ctrunc((1 << 10) * (n_in - 1) + (n_out - 1) // 2, n_out - 1)
    lo, hi, wlo, whi = [], [], [], []
    for v in range(n_out):
        sv = v * scale + scale // 2 - (1 << 9) if half else v * scale
        i0 = max(_ctrunc(sv, 1 << 10), 0)
        i1 = min(_ctrunc(sv + (1 << 10) - 1, 1 << 10), n_in - 1)
        lo.append(i0)
        hi.append(i1)
        wlo.append((1 << 10) - (sv - (1 << 10) * i0))
        whi.append(sv - (1 << 10) * i0)
    return lo, hi, wlo, whi


def _float_taps(n_in: int, n_out: int, align: bool, half: bool
                ) -> tuple[list[int], list[int], np.ndarray, np.ndarray]:
    """TFLite's float ResizeBilinear along one axis (reference_ops::ResizeBilinear's
    ComputeInterpolationValues, in float32 as it computes them): lower and upper index, and
    the weights 1 - (v - lower) and v - lower per output index."""
    f = np.float32
    scale = f(n_in) / f(n_out)
    if align and n_out > 1:
        scale = f(n_in - 1) / f(n_out - 1)
    lo, hi, wlo, whi = [], [], [], []
    for v in range(n_out):
        sv = (f(v) + f(0.5)) * scale - f(0.5) if half else f(v) * scale
        i0 = max(int(np.floor(sv)), 0)
        lo.append(i0)
        hi.append(min(int(np.ceil(sv)), n_in - 1))
        d = f(sv - f(i0))
        wlo.append(f(1) - d)
        whi.append(d)
    return lo, hi, np.array(wlo, np.float32), np.array(whi, np.float32)


def _resize_bilinear_uint8(b: Builder, x: int, y: int, size: list[int], align: bool,
                           half: bool) -> None:
    """LiteRT's uint8 RESIZE_BILINEAR (reference_ops::ResizeBilinear<uint8_t>; TFLM has no
    uint8 kernel): in float32, v00 * wy0 * wx0 + v10 * wy1 * wx0 + v01 * wy0 * wx1 + v11 *
    wy1 * wx1 + 0.5, summed in that order and truncated, on the uint8 values (the graph holds
    them as value - 128); the output keeps the input's parameters."""
    _check_q(b, x, [y])
    _, h, w, _ = b.shape(x)
    v = b.add("Cast", [b.get(x)], "as_float", to=1)[0]
    v = b.add("Add", [v, b.init(np.float32(128), "offset")], "as_uint8")[0]
    ylo, yhi, wy0, wy1 = _float_taps(h, size[0], align, half)
    xlo, xhi, wx0, wx1 = _float_taps(w, size[1], align, half)

    def rows(idx: list[int], wt: np.ndarray) -> str:
        g = b.add("Gather", [v, b.init(np.array(idx, np.int64), "rows")], "row", axis=1)[0]
        return b.add("Mul", [g, b.init(wt.reshape(1, -1, 1, 1), "wy")], "row_w")[0]

    def cols(r: str, idx: list[int], wt: np.ndarray) -> str:
        g = b.add("Gather", [r, b.init(np.array(idx, np.int64), "cols")], "col", axis=2)[0]
        return b.add("Mul", [g, b.init(wt.reshape(1, 1, -1, 1), "wx")], "col_w")[0]

    top, bottom = rows(ylo, wy0), rows(yhi, wy1)
    acc = cols(top, xlo, wx0)
    for r, idx, wt in ((bottom, xlo, wx0), (top, xhi, wx1), (bottom, xhi, wx1)):
        acc = b.add("Add", [acc, cols(r, idx, wt)], "sum")[0]
    acc = b.add("Add", [acc, b.init(np.float32(0.5), "half")], "rounded")[0]
    out = b.add("Cast", [acc], "truncated", to=6)[0]  # non-negative: truncation
    out = b.add("Sub", [out, b.init(np.int32(128), "offset")], "as_int8")[0]
    _emit(b, y, "Cast", [out], to=3)


def _resize_bilinear_int8(b: Builder, x: int, y: int, size: list[int], align: bool,
                          half: bool) -> None:
    """TFLM's int8 RESIZE_BILINEAR (ResizeBilinearInteger): the stored integers interpolated
    with 10-bit weights per axis, the 2^20-scaled sum rounded half away from zero; the output
    keeps the input's parameters. As int64 Gather / Mul / Add and the rounding."""
    _check_q(b, x, [y])
    _, h, w, _ = b.shape(x)
    v = b.add("Cast", [b.get(x)], "as_int64", to=7)[0]
    for axis, (n_in, n_out) in ((1, (h, size[0])), (2, (w, size[1]))):
        lo, hi, wlo, whi = _bilinear_taps(n_in, n_out, align, half)
        shape = [1, 1, 1, 1]
        shape[axis] = n_out
        parts = []
        for idx, wt in ((lo, wlo), (hi, whi)):
            g = b.add("Gather", [v, b.init(np.array(idx, np.int64), "taps")], "tap",
                      axis=axis)[0]
            parts.append(b.add("Mul", [g, b.init(np.array(wt, np.int64).reshape(shape),
                                                  "weights")], "weighted")[0])
        v = b.add("Add", parts, "interpolated")[0]
    sign = b.add("Sign", [v], "sign")[0]
    mag = b.add("Add", [b.add("Abs", [v], "abs")[0], b.init(np.int64(1 << 19), "half")],
                "rounded")[0]
    mag = b.add("Div", [mag, b.init(np.int64(1 << 20), "unit")], "scaled")[0]
    out = b.add("Mul", [sign, mag], "signed")[0]
    _emit(b, y, "Cast", [out], to=3)


def densify(b: Builder, op: Any) -> None:
    """A sparse constant (densified as it is read: Builder.const) as the dense output."""
    (x, *_), (y,) = _ins(op), _outs(op)
    _check_q(b, x, [y])
    b.fold(y, _need_const(b, x, "sparse input"))


def dynamic_update_slice(b: Builder, op: Any) -> None:
    """``update`` written into ``operand`` at constant start indices (clamped so that it fits,
    as TFLite does): ScatterND with the indices of every updated element."""
    (x, u, st), (y,) = _ins(op)[:3], _outs(op)
    start = [int(v) for v in _need_const(b, st, "start indices").reshape(-1)]
    xs, us = b.shape(x), b.shape(u)
    if len(start) != len(xs) or len(us) != len(xs) or any(a > c for a, c in zip(us, xs)):
        raise AotcError(f"update {list(us)} at {start} does not fit operand {list(xs)}")
    _check_q(b, x, [y])
    if not (_same_q(b, u, x) or (plain(b, [u, x]) and b.dtype(u) == b.dtype(x))):
        raise AotcError("the update's quantisation parameters differ from the operand's")
    start = [min(max(s0, 0), d - e) for s0, d, e in zip(start, xs, us)]
    grid = np.stack(np.meshgrid(*[np.arange(s0, s0 + e) for s0, e in zip(start, us)],
                                indexing="ij"), axis=-1).astype(np.int64)
    _emit(b, y, "ScatterND", [b.get(x), b.init(grid, "indices"), b.get(u)])


CONVERTERS: dict[str, Callable[[Builder, Any], None]] = {
    "DYNAMIC_UPDATE_SLICE": dynamic_update_slice,
    "DENSIFY": densify,
    "SHAPE": shape,
    "BROADCAST_ARGS": broadcast_args,
    "PACK": pack,
    "UNPACK": unpack,
    "EXPAND_DIMS": expand_dims,
    "ZEROS_LIKE": zeros_like,
    "FILL": fill,
    "BROADCAST_TO": broadcast_to,
    "TILE": tile,
    "SLICE": slice_,
    "SPLIT_V": split_v,
    "PADV2": padv2,
    "MIRROR_PAD": mirror_pad,
    "REVERSE_V2": reverse_v2,
    "GATHER": gather,
    "GATHER_ND": gather_nd,
    "EMBEDDING_LOOKUP": embedding_lookup,
    "CAST": cast,
    "DEPTH_TO_SPACE": _depth_space("DepthToSpace", "DepthToSpaceOptions"),
    "SPACE_TO_DEPTH": _depth_space("SpaceToDepth", "SpaceToDepthOptions"),
    "SPACE_TO_BATCH_ND": space_to_batch_nd,
    "BATCH_TO_SPACE_ND": batch_to_space_nd,
    "RESIZE_BILINEAR": _resize("linear", "ResizeBilinearOptions"),
    "RESIZE_NEAREST_NEIGHBOR": _resize("nearest", "ResizeNearestNeighborOptions"),
}

ONNX_OPS: dict[str, tuple[str, ...]] = {
    "SHAPE": (), "BROADCAST_ARGS": (), "DENSIFY": (), "DYNAMIC_UPDATE_SLICE": ("ScatterND",),
    "PACK": ("Unsqueeze", "Concat"),
    "UNPACK": ("Split", "Squeeze"), "EXPAND_DIMS": ("Reshape",), "ZEROS_LIKE": (),
    "FILL": ("Expand",), "BROADCAST_TO": ("Expand",), "TILE": ("Tile",), "SLICE": ("Slice",),
    "SPLIT_V": ("Split",), "PADV2": ("Pad",), "MIRROR_PAD": ("Slice", "Concat"),
    "REVERSE_V2": ("Slice",), "GATHER": ("Gather",), "GATHER_ND": ("GatherND",),
    "EMBEDDING_LOOKUP": ("Gather",), "CAST": ("Cast",), "DEPTH_TO_SPACE": ("DepthToSpace",),
    "SPACE_TO_DEPTH": ("SpaceToDepth",), "SPACE_TO_BATCH_ND": ("Pad", "Reshape", "Transpose"),
    "BATCH_TO_SPACE_ND": ("Reshape", "Transpose", "Slice"), "RESIZE_BILINEAR": ("Resize",),
    "RESIZE_NEAREST_NEIGHBOR": ("Resize",),
}
