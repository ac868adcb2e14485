"""Quantised element, pooling and softmax kernels: onnxruntime's com.microsoft QLinearAdd,
QLinearMul, QLinearAveragePool, QLinearGlobalAveragePool, QLinearSoftmax, QLinearSigmoid,
QLinearLeakyRelu, QLinearConcat, and aotc's own QLut (any int8 -> int8 unary function as a
256-entry table built at compile time). The QDQ pass produces the same kernels from
DequantizeLinear -> op -> QuantizeLinear. aotc's QSquaredDifference, QPRelu, QAddN, QCumSum,
QL2Norm and QLogSoftmax (TFLM's SQUARED_DIFFERENCE, PRELU, ADD_N, CUMSUM, L2_NORMALIZATION and
LOG_SOFTMAX) only the TFLite frontend writes.

``tflite`` mode follows TFLM's reference int8 kernels bit for bit (ADD with a 20-bit left
shift and three multipliers, AVERAGE_POOL's rounded division, SOFTMAX's fixed-point exp and
reciprocal); ``onnx`` mode dequantises, computes in float32 and quantises (round half to even).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.dtypes import DType
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops import mve
from aotc.loops.loop_ir import Cast, Const, Expr, bmax, bmin, call, cmp, land
from aotc.ops import register
from aotc.ops.quant import arith as qmath
from aotc.ops.quant.conv_matmul import F32, I32, QT, QuantOp, act_range, const_of, mode_of, qrange

MS = "com.microsoft"


def _scalar(node: Node, v: Value | None, what: str, default: float | int = 0) -> Any:
    a = const_of(node, v, what)
    if a is None:
        return default
    if a.size != 1:
        raise AotcError(f"{what} must be per-tensor (one value), got shape {a.shape}",
                        node.name, node.op)
    return a.reshape(-1)[0].item()


def qparam(ins: Sequence[Any], i: int, default: float | int) -> Any:
    """The scalar scale or zero point at input ``i`` (a constant Value, or an array when the
    reference runs); ``default`` when the input is absent."""
    v = ins[i] if i < len(ins) else None
    if v is None:
        return default
    return np.asarray(v.const if isinstance(v, Value) else v).reshape(-1)[0].item()


def unary_params(ins: Sequence[Any]) -> dict[str, Any]:
    """(X, x_scale, x_zero_point, y_scale, y_zero_point) -> sx, zx, sy, zy."""
    return dict(sx=float(np.float32(qparam(ins, 1, 1.0))), zx=int(qparam(ins, 2, 0)),
                sy=float(np.float32(qparam(ins, 3, 1.0))), zy=int(qparam(ins, 4, 0)))


def _clamp_i32(v: Expr, lo: int, hi: int) -> Expr:
    return bmin(bmax(v, Const(lo, I32)), Const(hi, I32))


def _quantize_f32(f: Expr, scale: float, zp: int, lo: int, hi: int, out: DType) -> Expr:
    """saturate(rint(f / scale) + zp) computed in float32."""
    q = call("rint", f / Const(scale, F32))
    if zp:
        q = q + Const(float(zp), F32)
    return Cast(bmin(bmax(q, Const(float(lo), F32)), Const(float(hi), F32)), out)


def _deq(x: Expr, scale: float, zp: int) -> Expr:
    v = Cast(x, I32)
    if zp:
        v = v - Const(zp, I32)
    return Cast(v, F32) * Const(scale, F32)


def _mult(real: float) -> tuple[Expr, Expr]:
    m, s = qmath.quantize_multiplier(real)
    return Const(m, I32), Const(s, I32)


class _Binary(QuantOp):
    """A (A_scale, A_zp), B (B_scale, B_zp) -> C (C_scale, C_zp), numpy broadcasting."""

    domain = MS
    dtypes = QT
    layout_free = True  # same-shape operands: the layout pass may run it NHWC
    # Fuses into an anchor's epilogue (a residual QLinearAdd after a QLinearConv): the conv's
    # int8 output is the operand, exactly the value the standalone kernel would read.
    kind = "elementwise"

    def reference(self, A: np.ndarray, A_scale: np.ndarray, A_zero_point: np.ndarray,
                  B: np.ndarray, B_scale: np.ndarray, B_zero_point: np.ndarray,
                  C_scale: np.ndarray, C_zero_point: np.ndarray | None = None) -> np.ndarray:
        raise NotImplementedError

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        for i in (0, 3):
            v = ins[i]
            if v is None or v.type.dtype.name not in QT + ("int16",):
                raise AotcError(f"input {i} must be int8, uint8 or int16", node.name, node.op)
        a, b = ins[0], ins[3]
        assert a is not None and b is not None
        if "int16" in (a.type.dtype.name, b.type.dtype.name) and a.type.dtype != b.type.dtype:
            raise AotcError(f"inputs are {a.type.dtype.name} and {b.type.dtype.name}; int16 "
                            f"takes int16 on both sides", node.name, node.op)
        for i in (1, 2, 4, 5, 6, 7):
            if i < len(ins):
                _scalar(node, ins[i], "scales and zero points")

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        a, b = ins[0], ins[3]
        assert a is not None and b is not None
        shape = np.broadcast_shapes(a.type.shape, b.type.shape)
        return [TensorType(tuple(shape), a.type.dtype)]

    def params(self, node: Node, ins: Sequence[Any]) -> dict[str, Any]:
        def scale(i: int) -> float:
            return float(np.float32(qparam(ins, i, 1.0)))

        def dt(v: Any) -> str:
            return v.type.dtype.name if isinstance(v, Value) else np.asarray(v).dtype.name

        # The operands or their zero points (an operand is None as a fused epilogue's chain).
        wide = any(dt(ins[i]) == "int16" for i in (0, 2, 3, 5, 7)
                   if i < len(ins) and ins[i] is not None)
        # TFLM's ADD/SUB scale the inputs up by 2^20 (int8) or 2^15 (int16) before rescaling.
        return dict(sa=scale(1), za=int(qparam(ins, 2, 0)), sb=scale(4),
                    zb=int(qparam(ins, 5, 0)), sy=scale(6), zy=int(qparam(ins, 7, 0)),
                    ls=15 if wide else 20)

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        return node.with_(inputs=(node.inputs[0], node.inputs[3]),
                          attrs={**node.attrs, "_p": self.params(node, ins)})

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        a, b = args[0], args[3]
        assert a is not None and b is not None
        p = self.params(node, args)
        lo, hi = act_range(node, dtypes.from_numpy(a.dtype))
        ai, bi = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
        flat = [self.scalar_ref(int(x), int(y), p, mode_of(node)) for x, y in
                zip(ai.ravel(), bi.ravel())]
        return np.clip(np.array(flat, np.int64).reshape(ai.shape), lo, hi).astype(a.dtype)

    def lower(self, node: Node, kb: Any) -> None:
        A, B = kb.inputs[0], kb.inputs[1]
        Y = kb.outputs[0]
        p = node.attrs["_p"]
        lo, hi = act_range(node, Y.dtype)
        with kb.loops(Y.shape) as idx:
            a = A.bcast(idx) if A.shape != Y.shape else A[idx]
            b = B.bcast(idx) if B.shape != Y.shape else B[idx]
            kb.store_output(idx, self.scalar_expr(a, b, p, lo, hi, Y.dtype, mode_of(node)))

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        """As an epilogue: ``args`` are (A, B) in prepare()'s order, one of them the chain."""
        out = args[0].dtype
        lo, hi = act_range(node, out)
        return self.scalar_expr(args[0], args[1], node.attrs["_p"], lo, hi, out, mode_of(node))

    scalar_ref: Callable[..., int]
    scalar_expr: Callable[..., Expr]


@register
class QLinearAdd(_Binary):
    name = "QLinearAdd"
    since = 1

    LEFT_SHIFT = 20  # TFLM's int8 ADD (int16: 15, the params' "ls")
    SIGN = 1  # QLinearSub: -1

    @staticmethod
    def _tfl(p: dict[str, Any]) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
        """TFLM's ADD Prepare: the three multipliers, in double."""
        twice_max = 2 * max(p["sa"], p["sb"])
        return (qmath.quantize_multiplier(p["sa"] / twice_max),
                qmath.quantize_multiplier(p["sb"] / twice_max),
                qmath.quantize_multiplier(twice_max / ((1 << p.get("ls", 20)) * p["sy"])))

    def scalar_ref(self, a: int, b: int, p: dict[str, Any], mode: str) -> int:
        if mode == "tflite":
            (m1, s1), (m2, s2), (mo, so) = self._tfl(p)
            ls = 1 << p.get("ls", 20)
            raw = qmath.mbqm((a - p["za"]) * ls, m1, s1) + self.SIGN * qmath.mbqm(
                (b - p["zb"]) * ls, m2, s2)
            return qmath.mbqm(raw, mo, so) + p["zy"]
        f = np.float32(np.float32(a - p["za"]) * np.float32(p["sa"])
                       + np.float32(b - p["zb"]) * np.float32(p["sb"]))
        return int(np.rint(f / np.float32(p["sy"]))) + p["zy"]

    def scalar_expr(self, a: Expr, b: Expr, p: dict[str, Any], lo: int, hi: int, out: DType,
                    mode: str) -> Expr:
        if mode == "tflite":
            (m1, s1), (m2, s2), (mo, so) = self._tfl(p)
            ls = Const(1 << p.get("ls", 20), I32)

            def scaled(x: Expr, z: int, m: int, s: int) -> Expr:
                v = Cast(x, I32) - Const(z, I32) if z else Cast(x, I32)
                if (m, s) == (1 << 30, 0) and p.get("ls", 20) == 20:
                    # The input of the larger scale (multiplier 0.5): mbqm(x, 2^30, 0) is
                    # x / 2 exactly for even x, and v * 2^20 of an 8-bit v does not wrap.
                    return v * Const(1 << 19, I32)
                return call("q_mbqm", v * ls, Const(m, I32), Const(s, I32), dtype=I32)

            if self.SIGN < 0:
                raw = scaled(a, p["za"], m1, s1) - scaled(b, p["zb"], m2, s2)
            else:
                raw = scaled(a, p["za"], m1, s1) + scaled(b, p["zb"], m2, s2)
            v = call("q_mbqm", raw, Const(mo, I32), Const(so, I32), dtype=I32)
            return Cast(_clamp_i32(v + Const(p["zy"], I32), lo, hi), out)
        f = _deq(a, p["sa"], p["za"]) + _deq(b, p["sb"], p["zb"])
        return _quantize_f32(f, p["sy"], p["zy"], lo, hi, out)

    def vector_expr(self, kb: Any, a: Expr, b: Expr, node: Node) -> Expr:
        """scalar_expr's tflite arithmetic on 4 int32 lanes of int8 values (Helium's fused
        residual add, loops/mve.py): the same bytes."""
        assert mode_of(node) == "tflite" and self.SIGN > 0
        p = node.attrs["_p"]
        lo, hi = act_range(node, dtypes.int8)
        (m1, s1), (m2, s2), (mo, so) = self._tfl(p)

        def scaled(x: Expr, z: int, m: int, s: int) -> Expr:
            v = mve.vec("vaddq_n_s32", x, Const(-z, I32)) if z else x
            v = mve.vec("vshlq_r_s32", v, Const(self.LEFT_SHIFT, I32))
            return mve.mbqm4_const(kb, v, m, s)

        raw = mve.vec("vaddq_s32", scaled(a, p["za"], m1, s1), scaled(b, p["zb"], m2, s2))
        v = mve.mbqm4_const(kb, kb.local(raw, "v", mve.INT32X4), mo, so)
        return mve.clamp4(mve.vec("vaddq_n_s32", v, Const(p["zy"], I32)), lo, hi)


@register
class QLinearSub(QLinearAdd):
    """A - B: TFLM's SUB (int8, int16), aotc's (com.microsoft has none); tflite mode: ADD's
    multipliers (in double, as the tflite-micro package and TFLM's SEANet goldens compute them;
    the source at 90b983c divides in float32, which differs in the last bits of a multiplier)
    and the difference of the two rescaled inputs; onnx mode in float32."""

    name = "QLinearSub"
    domain = "aotc"
    SIGN = -1
    vector_expr = None  # no Helium epilogue form

    def scalar_ref(self, a: int, b: int, p: dict[str, Any], mode: str) -> int:
        if mode == "tflite":
            return super().scalar_ref(a, b, p, mode)
        f = np.float32(np.float32(a - p["za"]) * np.float32(p["sa"])
                       - np.float32(b - p["zb"]) * np.float32(p["sb"]))
        return int(np.rint(f / np.float32(p["sy"]))) + p["zy"]

    def scalar_expr(self, a: Expr, b: Expr, p: dict[str, Any], lo: int, hi: int, out: DType,
                    mode: str) -> Expr:
        if mode == "tflite":
            return super().scalar_expr(a, b, p, lo, hi, out, mode)
        f = _deq(a, p["sa"], p["za"]) - _deq(b, p["sb"], p["zb"])
        return _quantize_f32(f, p["sy"], p["zy"], lo, hi, out)


@register
class QLinearMul(_Binary):
    name = "QLinearMul"
    since = 1

    def scalar_ref(self, a: int, b: int, p: dict[str, Any], mode: str) -> int:
        if mode == "tflite":
            m, s = qmath.quantize_multiplier(p["sa"] * p["sb"] / p["sy"])
            return qmath.mbqm((a - p["za"]) * (b - p["zb"]), m, s) + p["zy"]
        f = np.float32(np.float32(a - p["za"]) * np.float32(p["sa"])) * np.float32(
            np.float32(b - p["zb"]) * np.float32(p["sb"]))
        return int(np.rint(np.float32(f) / np.float32(p["sy"]))) + p["zy"]

    def scalar_expr(self, a: Expr, b: Expr, p: dict[str, Any], lo: int, hi: int, out: DType,
                    mode: str) -> Expr:
        if mode == "tflite":
            m, s = _mult(p["sa"] * p["sb"] / p["sy"])
            va = Cast(a, I32) - Const(p["za"], I32)
            vb = Cast(b, I32) - Const(p["zb"], I32)
            v = call("q_mbqm", va * vb, m, s, dtype=I32) + Const(p["zy"], I32)
            return Cast(_clamp_i32(v, lo, hi), out)
        f = _deq(a, p["sa"], p["za"]) * _deq(b, p["sb"], p["zb"])
        return _quantize_f32(f, p["sy"], p["zy"], lo, hi, out)


# ------------------------------------------------------------------------------ pooling
class _QPool(QuantOp):
    domain = MS
    dtypes = QT
    is_global = False

    def _geo(self, node: Node, shape: Sequence[int]) -> Any:
        from aotc.ops.nn.pool import global_geometry, pool_geometry

        if node.attrs.get("channels_last", 0):
            raise AotcError("channels_last=1 is not supported (use NCHW)", node.name, node.op)
        return global_geometry(shape[2:]) if self.is_global else pool_geometry(node, shape[2:])

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x = ins[0]
        ok = QT + (("int16",) if not self.is_global else ())  # TFLM's int16 AVERAGE_POOL_2D
        if x is None or x.type.dtype.name not in ok or len(x.type.shape) < 3:
            raise AotcError(f"X must be an {'/'.join(ok)} NC... tensor", node.name, node.op)
        for i in (1, 2, 3, 4):
            if i < len(ins):
                _scalar(node, ins[i], "scales and zero points")

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        geo = self._geo(node, x.type.shape)
        return [TensorType((*x.type.shape[:2], *geo.out), x.type.dtype)]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        return node.with_(inputs=node.inputs[:1], attrs={**node.attrs, "_p": unary_params(ins)})

    def _counts(self, node: Node, geo: Any, include: bool | None = None) -> np.ndarray:
        """Per output position: the divisor (taps in the padded input with count_include_pad,
        else taps inside the input)."""
        if include is None:
            include = bool(node.attrs.get("count_include_pad", 0))
        per_dim = [geo.padded_counts(d) if include else geo.valid_counts(d)
                   for d in range(len(geo.out))]
        return np.array([math.prod(c) for c in itertools.product(*per_dim)],
                        np.int32).reshape(geo.out)

    def _pad_sum(self, node: Node, geo: Any, zx: int) -> np.ndarray:
        """What the padded taps add to a window's sum: the zero point (real 0) each."""
        return (self._counts(node, geo) - self._counts(node, geo, False)).astype(np.int64) * zx

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        from aotc.ops.nn.pool import pool_reference

        x = args[0]
        assert x is not None
        p = unary_params(args)
        geo = self._geo(node, x.shape)
        lo, hi = act_range(node, dtypes.from_numpy(x.dtype))
        cnt = self._counts(node, geo).astype(np.int64)
        total = np.rint(pool_reference(x.astype(np.float64), geo, "avg", bool(
            node.attrs.get("count_include_pad", 0))) * cnt).astype(np.int64)
        total = total + self._pad_sum(node, geo, p["zx"])
        if mode_of(node) == "tflite" and (p["sx"], p["zx"]) == (p["sy"], p["zy"]):
            half = cnt // 2
            num = np.where(total > 0, total + half, total - half)
            avg = np.trunc(num / cnt).astype(np.int64)
        else:
            f = (total - cnt * p["zx"]).astype(np.float32) * np.float32(p["sx"]) / cnt.astype(
                np.float32)
            avg = np.rint(f / np.float32(p["sy"])).astype(np.int64) + p["zy"]
        return np.clip(avg, lo, hi).astype(x.dtype)

    def lower(self, node: Node, kb: Any) -> None:
        X, Y = kb.inputs[0], kb.outputs[0]
        geo = self._geo(node, X.shape)
        p = node.attrs["_p"]
        lo, hi = act_range(node, Y.dtype)
        cnts = self._counts(node, geo)
        uniform = bool((cnts == cnts.ravel()[0]).all())
        ctab = None if uniform else kb.const("cnt", cnts.ravel(), I32)
        pad = self._pad_sum(node, geo, p["zx"])
        ptab = None if not pad.any() or (pad == pad.ravel()[0]).all() else kb.const(
            "padsum", pad.ravel().astype(np.int32), I32)
        nd = len(geo.out)
        with kb.loops(Y.shape, ["n", "c"] + [f"o{k}" for k in range(nd)]) as (n, c, *o):
            flat: Expr = Const(0)
            for k in range(nd):
                flat = flat * geo.out[k] + o[k]
            init: Expr = ptab[[flat]] if ptab is not None else Const(int(pad.ravel()[0]), I32)
            acc = kb.local(init, "acc", I32)
            self._window(kb, X, geo, n, c, o, 0, [], acc)
            cnt: Expr = Const(int(cnts.ravel()[0]), I32) if uniform else ctab[[flat]]  # type: ignore[index]
            if mode_of(node) == "tflite" and (p["sx"], p["zx"]) == (p["sy"], p["zy"]):
                half = cnt // 2
                from aotc.loops.loop_ir import Select

                avg = Select(cmp("gt", acc, Const(0, I32)), (acc + half) / cnt,
                             (acc - half) / cnt)
                kb.store_output([n, c, *o], Cast(_clamp_i32(avg, lo, hi), Y.dtype))
            else:
                v = acc - cnt * Const(p["zx"], I32) if p["zx"] else acc
                f = Cast(v, F32) * Const(p["sx"], F32) / Cast(cnt, F32)
                kb.store_output([n, c, *o], _quantize_f32(f, p["sy"], p["zy"], lo, hi, Y.dtype))

    def _window(self, kb: Any, X: Any, geo: Any, n: Expr, c: Expr, o: list[Expr], dim: int,
                pos: list[Expr], acc: Any) -> None:
        if dim == len(geo.out):
            kb.assign(acc, acc + Cast(X[[n, c, *pos]], I32))
            return
        with kb.loop(geo.kernel[dim], f"k{dim}") as k:
            idx = kb.local(o[dim] * geo.strides[dim] - geo.pads_begin[dim]
                           + k * geo.dilations[dim], f"i{dim}")
            conds = []
            if geo.needs_low_check(dim):
                conds.append(cmp("ge", idx, 0))
            if geo.needs_high_check(dim):
                conds.append(cmp("lt", idx, geo.in_size[dim]))
            if conds:
                with kb.if_(land(*conds)):
                    self._window(kb, X, geo, n, c, o, dim + 1, pos + [idx], acc)
            else:
                self._window(kb, X, geo, n, c, o, dim + 1, pos + [idx], acc)


@register
class QLinearAveragePool(_QPool):
    name = "QLinearAveragePool"
    since = 1
    reads_permuted = True  # _QPool.lower reads X[[n, c, *pos]]

    def reference(self, X: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray,
                  y_scale: np.ndarray, y_zero_point: np.ndarray | None = None, *,
                  auto_pad: str = "NOTSET", ceil_mode: int = 0, channels_last: int = 0,
                  count_include_pad: int = 0, kernel_shape: Sequence[int] = (),
                  pads: Sequence[int] = (), strides: Sequence[int] = ()) -> np.ndarray:
        raise NotImplementedError


@register
class QLinearGlobalAveragePool(_QPool):
    name = "QLinearGlobalAveragePool"
    since = 1
    is_global = True

    def reference(self, X: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray,
                  y_scale: np.ndarray, y_zero_point: np.ndarray | None = None, *,
                  channels_last: int = 0) -> np.ndarray:
        raise NotImplementedError


# ------------------------------------------------------------------------------ concat
@register
class QLinearConcat(QuantOp):
    """Y_scale, Y_zp, then (X, X_scale, X_zp) per input; inputs with the output's parameters are
    copied, others requantised (tflite: fixed-point multiplier; onnx: float32)."""

    name = "QLinearConcat"
    since = 1
    domain = MS
    dtypes = QT

    def reference(self, *inputs: np.ndarray, axis: int) -> np.ndarray:
        raise NotImplementedError

    def _groups(self, node: Node, ins: Sequence[Any]
                ) -> tuple[float, int, list[tuple[int, float, int]]]:
        if (len(ins) - 2) % 3:
            raise AotcError("expects Y_scale, Y_zero_point and (X, scale, zero point) triples",
                            node.name, node.op)
        groups = [(2 + 3 * k, float(np.float32(qparam(ins, 3 + 3 * k, 0))),
                   int(qparam(ins, 4 + 3 * k, 0))) for k in range((len(ins) - 2) // 3)]
        return float(np.float32(qparam(ins, 0, 0))), int(qparam(ins, 1, 0)), groups

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        _, _, groups = self._groups(node, ins)
        for i, _, _ in groups:
            v = ins[i]
            if v is None or v.type.dtype.name not in QT:
                raise AotcError(f"input {i} must be int8 or uint8", node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        _, _, groups = self._groups(node, ins)
        xs = [ins[i] for i, _, _ in groups]
        r = len(xs[0].type.shape)  # type: ignore[union-attr]
        axis = int(node.attrs["axis"])
        axis = axis + r if axis < 0 else axis
        shape = list(xs[0].type.shape)  # type: ignore[union-attr]
        shape[axis] = sum(x.type.shape[axis] for x in xs)  # type: ignore[union-attr]
        return [TensorType(tuple(shape), xs[0].type.dtype)]  # type: ignore[union-attr]

    def _requant_ref(self, x: np.ndarray, s: float, z: int, sy: float, zy: int, mode: str
                     ) -> np.ndarray:
        lo, hi = qrange(dtypes.from_numpy(x.dtype))
        if (s, z) == (sy, zy):
            return x
        if mode == "tflite":
            m, sh = qmath.quantize_multiplier(s / sy)
            v = qmath.mbqm_np(x.astype(np.int64) - z, m, sh) + zy
        else:
            v = np.rint((x.astype(np.int64) - z).astype(np.float32) * np.float32(s)
                        / np.float32(sy)) + zy
        return np.clip(v, lo, hi).astype(x.dtype)

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        sy, zy, groups = self._groups(node, args)
        parts = [self._requant_ref(args[i], s, z, sy, zy, mode_of(node))  # type: ignore[arg-type]
                 for i, s, z in groups]
        return np.concatenate(parts, axis=int(attrs["axis"]))

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        sy, zy, groups = self._groups(node, ins)
        return node.with_(inputs=tuple(node.inputs[i] for i, _, _ in groups), attrs={
            **node.attrs, "_q": (sy, zy, [(s, z) for _, s, z in groups])})

    def lower(self, node: Node, kb: Any) -> None:
        sy, zy, params = node.attrs["_q"]
        Y = kb.outputs[0]
        r = len(Y.shape)
        axis = int(node.attrs["axis"])
        axis = axis + r if axis < 0 else axis
        lo, hi = qrange(Y.dtype)
        offset = 0
        for X, (s, z) in zip(kb.inputs, params):
            with kb.loops(X.shape) as idx:
                v: Expr = X[idx]
                if (s, z) != (sy, zy):
                    if mode_of(node) == "tflite":
                        m, sh = _mult(s / sy)
                        iv = call("q_mbqm", Cast(v, I32) - Const(z, I32), m, sh, dtype=I32)
                        v = Cast(_clamp_i32(iv + Const(zy, I32), lo, hi), Y.dtype)
                    else:
                        v = _quantize_f32(_deq(v, s, z), sy, zy, lo, hi, Y.dtype)
                out_idx = list(idx)
                out_idx[axis] = idx[axis] + offset
                kb.store_output(out_idx, v)
            offset += X.shape[axis]
