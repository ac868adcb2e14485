"""Conv and ConvTranspose (NCHW, any spatial rank, groups incl. depthwise, pads, auto_pad,
strides, dilations). Anchors: a fused epilogue (bias, activation, residual) runs per output
element before the store."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.dtypes import DType
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Const, Expr, cmp, land, select
from aotc.ops import OpDef, register
from aotc.schedules.conv.choose import run_schedule


def conv_pads(node: Node, in_sp: Sequence[int], k_sp: Sequence[int]) -> tuple[list[int], list[int]]:
    """(pads_begin, pads_end) per spatial dim, resolving auto_pad."""
    nd = len(in_sp)
    strides = list(node.attrs.get("strides") or [1] * nd)
    dil = list(node.attrs.get("dilations") or [1] * nd)
    auto = node.attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pb, pe = [], []
        for i, k, s, d in zip(in_sp, k_sp, strides, dil):
            out = -(-i // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - i)
            small = total // 2
            pb.append(small if auto == "SAME_UPPER" else total - small)
            pe.append(total - pb[-1])
        return pb, pe
    if auto == "VALID":
        return [0] * nd, [0] * nd
    if auto != "NOTSET":
        raise AotcError(f"auto_pad={auto!r} is not valid", node.name, node.op)
    pads = list(node.attrs.get("pads") or [0] * (2 * nd))
    return pads[:nd], pads[nd:]


def _spatial_attrs(node: Node, nd: int) -> tuple[list[int], list[int]]:
    return (list(node.attrs.get("strides") or [1] * nd),
            list(node.attrs.get("dilations") or [1] * nd))


def _check_rank(node: Node, x: Value, w: Value) -> None:
    if len(x.type.shape) < 3 or len(w.type.shape) != len(x.type.shape):
        raise AotcError(f"expects X and W of the same rank >= 3, got {x.type.shape} and "
                        f"{w.type.shape}", node.name, node.op)
    # The window attributes, checked once here for Conv and ConvTranspose: one value per
    # spatial dim (pads two); an empty list means the default.
    nd = len(x.type.shape) - 2
    for key, n in (("kernel_shape", nd), ("strides", nd), ("dilations", nd), ("pads", 2 * nd),
                   ("output_padding", nd), ("output_shape", nd)):
        v = node.attrs.get(key)
        if v is not None and len(v) not in (0, n):
            raise AotcError(f"attribute {key} has {len(v)} values; the input has {nd} spatial "
                            f"dims (expected {n})", node.name, node.op)


def check_bias(node: Node, b: Value | None, m: int) -> None:
    """A convolution's bias B is 1-D with one value per output channel."""
    if b is not None and b.type.shape != (m,):
        raise AotcError(f"B has shape {list(b.type.shape)}; expected [{m}] (one value per "
                        f"output channel)", node.name, node.op)


def _in_bounds(idx: Expr, size: int, lo_pad: int, hi_pad: int) -> Expr | None:
    conds = []
    if lo_pad > 0:
        conds.append(cmp("ge", idx, 0))
    if hi_pad > 0 or lo_pad < 0:
        conds.append(cmp("lt", idx, size))
    return land(*conds) if conds else None


def padded_nan_mask(w: np.ndarray | None, group: int, in_sp: Sequence[int],
                    out_sp: Sequence[int], pb: Sequence[int], s: Sequence[int],
                    d: Sequence[int]) -> np.ndarray | None:
    """The outputs (m, o...) that the definition makes NaN although aotc's kernels skip the
    padding: a tap in the zero padding contributes 0 * w, which is NaN when w is inf or NaN
    (onnxruntime's im2col does compute it). None when no output is affected (finite weights,
    the usual case). Compile time only: the weights are constants."""
    if w is None or w.dtype.kind != "f" or np.isfinite(w).all():
        return None
    bad = ~np.isfinite(w).all(axis=1)  # (M, k...): some channel's weight at the tap
    mask = np.zeros((w.shape[0], *out_sp), bool)
    for kidx in np.ndindex(*w.shape[2:]):
        hits = bad[(slice(None), *kidx)]
        if not hits.any():
            continue
        padded = np.zeros(tuple(out_sp), bool)
        for dim, (o_n, i_n) in enumerate(zip(out_sp, in_sp)):
            pos = np.arange(o_n) * s[dim] + kidx[dim] * d[dim] - pb[dim]
            out = (pos < 0) | (pos >= i_n)
            padded |= out.reshape([-1 if k == dim else 1 for k in range(len(out_sp))])
        mask |= hits.reshape((-1,) + (1,) * len(out_sp)) & padded
    return mask if mask.any() else None


class ConvArith:
    """Float arithmetic of a convolution: loads as they are, the accumulator starts at 0 and the
    bias is added after the sum of products, in the order of the ONNX definition (and of
    onnxruntime): with huge weights a partial sum can overflow to inf in one order and not in the
    other (docs/floating-point.md). Integer kernels subclass it (aotc/ops/quant/conv_matmul.py) and
    start the int32 accumulator with the bias (exact either way, as TFLM does)."""

    rolled_finish = False  # requantise a tile in a rolled loop after the sum (calls inside)

    def __init__(self, acc: DType) -> None:
        self.acc = acc

    def x(self, e: Expr) -> Expr:
        return e

    def w(self, kb: Any, e: Expr, m: Expr) -> Expr:
        return e

    def wide(self, e: Expr) -> Expr:
        return e

    def packed_weights(self, w: np.ndarray) -> np.ndarray:
        return w

    def wdtype(self, dt: DType, w: np.ndarray) -> DType:
        return dt

    def dsp_ok(self, w: np.ndarray) -> bool:
        """Whether the DSP extension's dual MAC can compute the sum (loops/dsp.py): int8
        weights without a zero point; float kernels never."""
        return False

    def init(self, B: Any, m: Expr) -> Expr:
        return Const(0.0, self.acc)

    def finish(self, kb: Any, acc: Expr, m: Expr, B: Any = None) -> Expr:
        return acc + B[[m]] if B is not None else acc


@register
class Conv(OpDef):
    name = "Conv"
    since = 1
    kind = "anchor"
    onnx_tests = ("test_conv_*", "test_basic_conv_*")
    reads_permuted = True  # every schedule reads X[[n, c, *spatial]]

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x, w = ins[0], ins[1]
        assert x is not None and w is not None
        _check_rank(node, x, w)
        g = node.attrs["group"]
        if x.type.shape[1] % g or w.type.shape[0] % g or w.type.shape[1] * g != x.type.shape[1]:
            raise AotcError(f"channels do not match group={g}: X {x.type.shape}, W "
                            f"{w.type.shape}", node.name, node.op)
        check_bias(node, ins[2] if len(ins) > 2 else None, w.type.shape[0])

    def reference(self, X: np.ndarray, W: np.ndarray, B: np.ndarray | None = None, *,
                  auto_pad: str = "NOTSET", dilations: Sequence[int] = (), group: int = 1,
                  kernel_shape: Sequence[int] = (), pads: Sequence[int] = (),
                  strides: Sequence[int] = ()) -> np.ndarray:
        node = Node("Conv", "ref", (), (), dict(auto_pad=auto_pad, dilations=dilations,
                                                 pads=pads, strides=strides))
        nd = X.ndim - 2
        pb, pe = conv_pads(node, X.shape[2:], W.shape[2:])
        s, d = _spatial_attrs(node, nd)
        xp = np.pad(X, [(0, 0), (0, 0)] + list(zip(pb, pe)))
        out_sp = self._out_spatial(X.shape[2:], W.shape[2:], pb, pe, s, d)
        n, m = X.shape[0], W.shape[0]
        cg, mg = W.shape[1], m // group
        y = np.zeros((n, m, *out_sp), np.float64)
        for kidx in np.ndindex(*W.shape[2:]):
            sl = tuple(slice(k * dd, k * dd + (o - 1) * ss + 1, ss)
                       for k, dd, o, ss in zip(kidx, d, out_sp, s))
            patch = xp[(slice(None), slice(None)) + sl]
            for gi in range(group):
                wk = W[gi * mg:(gi + 1) * mg, :, *kidx].astype(np.float64)
                pg = patch[:, gi * cg:(gi + 1) * cg].astype(np.float64)
                y[:, gi * mg:(gi + 1) * mg] += np.einsum("nc...,mc->nm...", pg, wk)
        if B is not None:
            y += B.reshape((1, m) + (1,) * nd)
        return y.astype(X.dtype)

    @staticmethod
    def _out_spatial(in_sp: Sequence[int], k_sp: Sequence[int], pb: Sequence[int],
                     pe: Sequence[int], s: Sequence[int], d: Sequence[int]) -> list[int]:
        return [(i + b + e - dd * (k - 1) - 1) // ss + 1
                for i, k, b, e, ss, dd in zip(in_sp, k_sp, pb, pe, s, d)]

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x, w = ins[0], ins[1]
        assert x is not None and w is not None
        nd = len(x.type.shape) - 2
        pb, pe = conv_pads(node, x.type.shape[2:], w.type.shape[2:])
        s, d = _spatial_attrs(node, nd)
        out_sp = self._out_spatial(x.type.shape[2:], w.type.shape[2:], pb, pe, s, d)
        if any(o <= 0 for o in out_sp):
            raise AotcError(f"output would be empty ({out_sp})", node.name, node.op)
        return [TensorType((x.type.shape[0], w.type.shape[0], *out_sp), x.type.dtype)]

    def macs(self, node: Node, g: Any) -> int:
        w = g.type(node.inputs[1]).shape
        return g.type(node.outputs[0]).numel * int(np.prod(w[1:], dtype=np.int64))

    def lower(self, node: Node, kb: Any, arith: ConvArith | None = None) -> None:
        """``arith`` (integer kernels: QLinearConv, ConvInteger) says how inputs and weights
        are widened and how the accumulator becomes the output; None is plain float."""
        X, W, B = (kb.inputs + [None])[:3]
        arith = arith or ConvArith(X.dtype)
        inplace = node.attrs.get("_inplace")  # aotc/steps/inplace.py conv_inplace_modes
        pads = conv_pads(node, X.shape[2:], W.shape[2:])
        s, d = _spatial_attrs(node, len(X.shape) - 2)
        if run_schedule(self, node, kb, X, W, B, arith, pads, s, d):
            return
        # No schedule applies (run-time weights, one output channel per group without pixel
        # tiles): the plain loop nest of the definition.
        Y = kb.outputs[0]
        nd = len(X.shape) - 2
        in_sp, k_sp = X.shape[2:], W.shape[2:]
        pb, pe = pads
        m_per_g = Y.shape[1] // node.attrs["group"]
        cg = W.shape[1]
        acc_t = arith.acc
        nan_at = self._padded_nan(node, kb, Y.shape[2:], pb, s, d)
        out_sp = list(Y.shape[2:])
        # In place by channel (depthwise): output channel m depends only on input channel m, so
        # it is computed into a one-channel temporary and copied over the dead input channel.
        # By element: each output is stored at once; no later output reads what it overwrites.
        slab = (kb.temporary("channel", Y.dtype, out_sp) if inplace == "channel"
                else None)
        with kb.loops(Y.shape[:2], ["n", "m"]) as (n, m):
            with kb.loops(out_sp, [f"o{k}" for k in range(nd)]) as o:
                acc = kb.local(arith.init(B, m), "acc", acc_t)
                with kb.loop(cg, "c") as c:
                    ic = (m // m_per_g) * cg + c if node.attrs["group"] > 1 else c
                    self._window(kb, 0, nd, X,
                                 lambda kk, c=c, m=m: arith.w(kb, W[[m, c, *kk]], m),
                                 n, ic, o, [], [], pb, pe, s, d, [acc], in_sp, k_sp, arith)
                kb.store_output([n, m, *o], arith.finish(kb, nan_at(acc, m, o), m, B),
                                into=(slab, o) if slab is not None else None)
            if slab is not None:
                with kb.loops(out_sp, [f"t{k}" for k in range(nd)]) as t:
                    kb.store(Y, [n, m, *t], slab[t])
    reads_permuted = True  # every schedule reads X[[n, c, *spatial]]

    def _padded_nan(self, node: Node, kb: Any, out_sp: Sequence[int], pb: Sequence[int],
                    s: Sequence[int], d: Sequence[int]) -> Any:
        """``nan_at(acc, m, o)``: the sum, or NaN where padded_nan_mask says the definition
        gives NaN (a compile-time table, emitted only for weights with inf/NaN and padding)."""
        X = kb.inputs[0]
        mask = padded_nan_mask(kb.input_const(1), node.attrs["group"], X.shape[2:], out_sp,
                               pb, s, d)
        if mask is None:
            return lambda acc, m, o: acc
        table = kb.const("padnan", mask.astype(np.uint8), dtypes.uint8)
        strides = [int(np.prod(mask.shape[k + 1:], dtype=np.int64)) for k in range(mask.ndim)]

        def nan_at(acc: Expr, m: Expr, o: Sequence[Expr]) -> Expr:
            flat: Expr = m * strides[0]
            for ov, st in zip(o, strides[1:]):
                flat = flat + ov * st
            return select(cmp("ne", table.flat(flat), 0), Const(float("nan"), X.dtype), acc,
                          X.dtype)

        return nan_at

    def _window(self, kb: Any, dim: int, nd: int, X: Any, wget: Any, n: Expr, ic: Expr,
                o: list[Expr], ii: list[Expr], kk: list[Expr], pb: list[int], pe: list[int],
                s: list[int], d: list[int], accs: list[Any] | None, in_sp: Sequence[int],
                k_sp: Sequence[int], arith: ConvArith | None = None,
                inside: int = -1) -> None:
        """The kernel-window loops; taps that fall into the padding are skipped (for integer
        kernels a padded tap is the zero point, which contributes nothing either).
        ``inside``: a spatial dim whose every tap the caller knows is inside the input (no
        check there)."""
        if dim == nd:
            if accs is None:  # a tap callback does the accumulation (tiled path)
                wget(X[[n, ic, *ii]], kk, ii)
                return
            xload = arith.x(X[[n, ic, *ii]]) if arith is not None else X[[n, ic, *ii]]
            kb.assign(accs[0], accs[0] + xload * wget(kk))
            return
        with kb.loop(k_sp[dim], f"k{dim}", unroll=True) as k:
            idx = o[dim] * s[dim] + k * d[dim] - pb[dim]
            cond = _in_bounds(idx, in_sp[dim], pb[dim], pe[dim])
            if cond is None or dim == inside:
                self._window(kb, dim + 1, nd, X, wget, n, ic, o, ii + [idx], kk + [k],
                             pb, pe, s, d, accs, in_sp, k_sp, arith, inside)
            else:
                iv = kb.local(idx, f"i{dim}")
                with kb.if_(land(cmp("ge", iv, 0), cmp("lt", iv, in_sp[dim]))):
                    self._window(kb, dim + 1, nd, X, wget, n, ic, o, ii + [iv], kk + [k],
                                 pb, pe, s, d, accs, in_sp, k_sp, arith, inside)


@register
class ConvTranspose(OpDef):
    name = "ConvTranspose"
    since = 1
    kind = "anchor"
    onnx_tests = ("test_convtranspose*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        assert ins[0] is not None and ins[1] is not None
        _check_rank(node, ins[0], ins[1])
        check_bias(node, ins[2] if len(ins) > 2 else None,
                   ins[1].type.shape[1] * node.attrs["group"])
        if node.attrs["auto_pad"] not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
            raise AotcError(f"auto_pad={node.attrs['auto_pad']!r} is not valid",
                            node.name, node.op)

    def reference(self, X: np.ndarray, W: np.ndarray, B: np.ndarray | None = None, *,
                  auto_pad: str = "NOTSET", dilations: Sequence[int] = (), group: int = 1,
                  kernel_shape: Sequence[int] = (), output_padding: Sequence[int] = (),
                  output_shape: Sequence[int] = (), pads: Sequence[int] = (),
                  strides: Sequence[int] = ()) -> np.ndarray:
        node = Node("ConvTranspose", "ref", (), (), dict(
            auto_pad=auto_pad, dilations=dilations, group=group, output_padding=output_padding,
            output_shape=output_shape, pads=pads, strides=strides))
        out_sp, pb, s, d = self._geometry(node, X.shape, W.shape)
        n, c = X.shape[:2]
        mg = W.shape[1]
        cg = c // group
        y = np.zeros((n, mg * group, *out_sp), np.float64)
        for idx in np.ndindex(*X.shape[2:]):
            for kidx in np.ndindex(*W.shape[2:]):
                oi = [i * ss + k * dd - p for i, k, ss, dd, p in zip(idx, kidx, s, d, pb)]
                if all(0 <= v < lim for v, lim in zip(oi, out_sp)):
                    for gi in range(group):
                        xv = X[(slice(None), slice(gi * cg, (gi + 1) * cg)) + idx]
                        wv = W[(slice(gi * cg, (gi + 1) * cg), slice(None)) + kidx]
                        y[(slice(None), slice(gi * mg, (gi + 1) * mg)) + tuple(oi)] += xv @ wv
        if B is not None:
            y += B.reshape((1, -1) + (1,) * len(out_sp))
        return y.astype(X.dtype)

    def _geometry(self, node: Node, xs: Sequence[int], ws: Sequence[int]
                  ) -> tuple[list[int], list[int], list[int], list[int]]:
        nd = len(xs) - 2
        s, d = _spatial_attrs(node, nd)
        op = list(node.attrs.get("output_padding") or [0] * nd)
        in_sp, k_sp = xs[2:], ws[2:]
        full = [ss * (i - 1) + o + (k - 1) * dd + 1
                for i, k, ss, dd, o in zip(in_sp, k_sp, s, d, op)]
        out_shape = list(node.attrs.get("output_shape") or [])
        if out_shape:
            out_shape = out_shape[-nd:]
        auto = node.attrs.get("auto_pad", "NOTSET")
        if out_shape or auto in ("SAME_UPPER", "SAME_LOWER"):
            target = out_shape or [i * ss for i, ss in zip(in_sp, s)]
            # An output_shape beyond the full size pads nothing: the extra outputs see no input.
            total = [max(0, f - t) for f, t in zip(full, target)]
            # ONNX rule (onnxruntime agrees): only SAME_UPPER puts the odd pixel at the end.
            if auto == "SAME_UPPER":
                pb = [t // 2 for t in total]
            else:
                pb = [t - t // 2 for t in total]
            return list(target), pb, s, d
        pads = list(node.attrs.get("pads") or [0] * (2 * nd))
        if auto == "VALID":
            pads = [0] * (2 * nd)
        out = [f - a - b for f, a, b in zip(full, pads[:nd], pads[nd:])]
        return out, pads[:nd], s, d

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x, w = ins[0], ins[1]
        assert x is not None and w is not None
        out_sp, _, _, _ = self._geometry(node, x.type.shape, w.type.shape)
        m = w.type.shape[1] * node.attrs["group"]
        return [TensorType((x.type.shape[0], m, *out_sp), x.type.dtype)]

    def macs(self, node: Node, g: Any) -> int:
        w = g.type(node.inputs[1]).shape
        return g.type(node.inputs[0]).numel * int(np.prod(w[1:], dtype=np.int64))

    def lower(self, node: Node, kb: Any) -> None:
        # Gather form: each output element sums the inputs whose scattered window covers it.
        X, W, B = (kb.inputs + [None])[:3]
        Y = kb.outputs[0]
        nd = len(X.shape) - 2
        _, pb, s, d = self._geometry(node, X.shape, W.shape)
        group = node.attrs["group"]
        mg, cg = W.shape[1], X.shape[1] // group
        f32 = X.dtype
        with kb.loops(Y.shape, ["n", "m"] + [f"o{k}" for k in range(nd)]) as (n, m, *o):
            # The bias is added after the sum, as the definition writes it. The sum runs in
            # onnxruntime's order (GEMM, then col2im): per kernel tap, the sum over input
            # channels, and the taps added in order; a different order differs where float
            # overflow makes the result depend on it (inf - inf).
            acc = kb.local(Const(0.0, f32), "acc", f32)
            gi = m // mg
            mw, ic0 = m - gi * mg, gi * cg

            def tap(ii: list[Expr], kk: list[Expr]) -> None:
                part = kb.local(Const(0.0, f32), "part", f32)
                with kb.loop(cg, "c") as c:
                    kb.assign(part, part + X[[n, ic0 + c, *ii]] * W[[ic0 + c, mw, *kk]])
                kb.assign(acc, acc + part)

            transpose_taps(kb, X, W, o, pb, s, d, tap)
            kb.store_output([n, m, *o], acc + B[m] if B is not None else acc)


def transpose_taps(kb: Any, X: Any, W: Any, o: list[Expr], pb: list[int], s: list[int],
                   d: list[int], tap: Callable[[list[Expr], list[Expr]], None],
                   ii: tuple[Expr, ...] = (), kk: tuple[Expr, ...] = ()) -> None:
    """The taps of ConvTranspose output position ``o`` in gather form (the float and the
    quantised lowering share it): per spatial dimension, unrolled over the kernel, the input
    index i with i * s + k * d - pb == o when it exists; ``tap(ii, kk)`` writes the sum over
    input channels of one tap (input indices ``ii``, kernel indices ``kk``)."""
    dim = len(ii)
    if dim == len(X.shape) - 2:
        tap(list(ii), list(kk))
        return
    with kb.loop(W.shape[2 + dim], f"k{dim}", unroll=True) as k:
        num = kb.local(o[dim] + pb[dim] - k * d[dim], f"t{dim}")
        conds = [cmp("ge", num, 0)]
        if s[dim] > 1:
            conds.append(cmp("eq", num % s[dim], 0))
        iv = num // s[dim] if s[dim] > 1 else num
        conds.append(cmp("lt", iv, X.shape[2 + dim]))
        with kb.if_(land(*conds)):
            transpose_taps(kb, X, W, o, pb, s, d, tap, (*ii, iv), (*kk, k))
