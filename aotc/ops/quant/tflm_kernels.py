"""TFLM's int8 (and int16) kernels that have no ONNX QLinear form: SQUARED_DIFFERENCE
(QSquaredDifference), PRELU (QPRelu), ADD_N (QAddN), CUMSUM (QCumSum), L2_NORMALIZATION (QL2Norm)
and LOG_SOFTMAX (QLogSoftmax), each with its numpy reference and loop-IR lowering, computed as
TFLM's reference integer kernels do. qlinear.py keeps the ONNX-contrib QLinear ops (Add, Sub,
Mul, the pools, Concat) and the _Binary base the first two share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.dtypes import DType
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Cast, Const, Expr, bmax, bmin, call, cmp, select
from aotc.ops import register
from aotc.ops.quant import arith as qmath
from aotc.ops.quant.conv_matmul import I32, QuantOp, act_range
from aotc.ops.quant.qlinear import _Binary, _clamp_i32, _scalar, qparam, unary_params


@register
class QSquaredDifference(_Binary):
    """(A - B)^2 on int8 or int16: TFLM's SQUARED_DIFFERENCE (squared_difference.cc), aotc's.
    Each input offset, shifted left (int8: 7 bits, int16: 0) and scaled by
    MultiplyByQuantizedMultiplierSmallerThanOneExp (x_scale / (2 * max scale), in double); the
    int32 difference squared, then MultiplyByQuantizedMultiplier with
    (2 * max scale)^2 / (2^(2 * left shift) * y_scale), offset and clamped to the type. No onnx
    mode: only the TFLite frontend makes it, always with TFLM's arithmetic."""

    name = "QSquaredDifference"
    domain = "aotc"
    kind = "kernel"  # not an epilogue: its own loop

    def params(self, node: Node, ins: Sequence[Any]) -> dict[str, Any]:
        p = super().params(node, ins)
        p["ls"] = 0 if p["ls"] == 15 else 7
        if p["ls"] == 0 and (p["za"], p["zb"], p["zy"]) != (0, 0, 0):
            raise AotcError("int16 zero points must be 0 (TFLM's SQUARED_DIFFERENCE)",
                            node.name, node.op)
        return p

    @staticmethod
    def _tfl(p: dict[str, Any]) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
        """TFLM's PrepareQuantized: the scales are float32, the ratios double; 2^(2 ls) times
        the output scale is a float32 product (exact: a power of two)."""
        twice_max = 2.0 * max(p["sa"], p["sb"])
        out_den = float(np.float32(1 << (2 * p["ls"])) * np.float32(p["sy"]))
        return (qmath.quantize_multiplier(p["sa"] / twice_max),
                qmath.quantize_multiplier(p["sb"] / twice_max),
                qmath.quantize_multiplier(twice_max * twice_max / out_den))

    def scalar_ref(self, a: int, b: int, p: dict[str, Any], mode: str) -> int:
        (m1, s1), (m2, s2), (mo, so) = self._tfl(p)
        ls = 1 << p["ls"]
        d = qmath.mbqm((a - p["za"]) * ls, m1, s1) - qmath.mbqm((b - p["zb"]) * ls, m2, s2)
        return qmath.mbqm(d * d, mo, so) + p["zy"]

    def lower(self, node: Node, kb: Any) -> None:
        A, B = kb.inputs[0], kb.inputs[1]
        Y = kb.outputs[0]
        p = node.attrs["_p"]
        lo, hi = act_range(node, Y.dtype)
        (m1, s1), (m2, s2), (mo, so) = self._tfl(p)

        def scaled(x: Expr, z: int, m: int, s: int) -> Expr:
            v = Cast(x, I32) - Const(z, I32) if z else Cast(x, I32)
            if p["ls"]:
                v = v * Const(1 << p["ls"], I32)
            return call("q_mbqm", v, Const(m, I32), Const(s, I32), dtype=I32)

        with kb.loops(Y.shape) as idx:
            a = A.bcast(idx) if A.shape != Y.shape else A[idx]
            b = B.bcast(idx) if B.shape != Y.shape else B[idx]
            # |d| <= 2^15 (the scaled inputs are at most half the shifted range): d * d fits
            d = kb.local(scaled(a, p["za"], m1, s1) - scaled(b, p["zb"], m2, s2), "diff", I32)
            v = call("q_mbqm", d * d, Const(mo, I32), Const(so, I32), dtype=I32)
            kb.store_output(idx, Cast(_clamp_i32(v + Const(p["zy"], I32), lo, hi), Y.dtype))

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        raise AotcError("not an epilogue", node.name, node.op)


@register
class QPRelu(_Binary):
    """PReLU on int8 (or int16 with int8 alpha): TFLM's PRELU (prelu_common.cc,
    reference_ops::BroadcastPrelu4DSlow), aotc's. x - x_zp >= 0: MultiplyByQuantizedMultiplier
    by x_scale / y_scale; else (x - x_zp) * (alpha - alpha_zp) by x_scale * alpha_scale /
    y_scale (both in double); plus y_zp, clamped to the type. Inputs as QLinearAdd's (A = x,
    B = alpha). No onnx mode: only the TFLite frontend makes it."""

    name = "QPRelu"
    domain = "aotc"
    kind = "kernel"

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x, alpha = ins[0], ins[3]
        if x is None or x.type.dtype.name not in ("int8", "int16"):
            raise AotcError("input must be int8 or int16", node.name, node.op)
        if alpha is None or alpha.type.dtype.name != "int8":
            raise AotcError("alpha must be int8 (TFLM's PRELU)", node.name, node.op)
        for i in (1, 2, 4, 5, 6, 7):
            if i < len(ins):
                _scalar(node, ins[i], "scales and zero points")

    def params(self, node: Node, ins: Sequence[Any]) -> dict[str, Any]:
        p = super().params(node, ins)
        p["m1"] = qmath.quantize_multiplier(p["sa"] / p["sy"])
        p["m2"] = qmath.quantize_multiplier(p["sa"] * p["sb"] / p["sy"])
        return p

    def scalar_ref(self, a: int, b: int, p: dict[str, Any], mode: str) -> int:
        v = a - p["za"]
        if v >= 0:
            return qmath.mbqm(v, *p["m1"]) + p["zy"]
        return qmath.mbqm(v * (b - p["zb"]), *p["m2"]) + p["zy"]

    def scalar_expr(self, a: Expr, b: Expr, p: dict[str, Any], lo: int, hi: int, out: DType,
                    mode: str) -> Expr:
        v = Cast(a, I32) - Const(p["za"], I32) if p["za"] else Cast(a, I32)
        w = Cast(b, I32) - Const(p["zb"], I32) if p["zb"] else Cast(b, I32)
        (m1, s1), (m2, s2) = p["m1"], p["m2"]
        pos = call("q_mbqm", v, Const(m1, I32), Const(s1, I32), dtype=I32)
        neg = call("q_mbqm", v * w, Const(m2, I32), Const(s2, I32), dtype=I32)
        r = select(cmp("ge", v, Const(0, I32)), pos, neg, I32) + Const(p["zy"], I32)
        return Cast(_clamp_i32(r, lo, hi), out)

    def scalar(self, args: list[Expr], node: Node) -> Expr:
        raise AotcError("not an epilogue", node.name, node.op)


@register
class QAddN(QuantOp):
    """(x_scale, x_zero_point, y_scale, y_zero_point, X1, ..., XN) -> Y: the sum of N int8
    tensors of one shape and one scale and zero point, TFLM's ADD_N (add_n.cc,
    reference_ops::AddN), aotc's. Each input offset, shifted left 20 bits and scaled by the
    multiplier of 1/2; the running int32 sum starts at the offset alone scaled so (TFLM's
    ``x = input1_offset``: one more -x_zp term than the inputs), then the multiplier of
    2 x_scale / (2^20 y_scale) (below 1, as TFLM requires), plus y_zp, saturated."""

    name = "QAddN"
    domain = "aotc"
    dtypes = ("int8",)
    LEFT_SHIFT = 20
    MAX_INPUTS = 14  # (N + 1) * 255 * 2^19 stays in int32

    def reference(self, x_scale: np.ndarray, x_zero_point: np.ndarray, y_scale: np.ndarray,
                  y_zero_point: np.ndarray, *inputs: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # compute() has the node

    @classmethod
    def plan(cls, sx: float, zx: int, sy: float) -> tuple[int, int, int, int, int]:
        """(input multiplier, shift, output multiplier, shift, the offset term): TFLM's
        Prepare, in double."""
        twice = 2 * sx
        mi, si = qmath.quantize_multiplier(sx / twice)
        real_out = twice / ((1 << cls.LEFT_SHIFT) * sy)
        mo, so = qmath.quantize_multiplier(real_out)
        start = qmath.mbqm(-zx * (1 << cls.LEFT_SHIFT), mi, si)
        return mi, si, mo, so, start

    def _params(self, node: Node, ins: Sequence[Any]) -> tuple[float, int, float, int]:
        return (float(np.float32(qparam(ins, 0, 1.0))), int(qparam(ins, 1, 0)),
                float(np.float32(qparam(ins, 2, 1.0))), int(qparam(ins, 3, 0)))

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        for i in range(4):
            _scalar(node, ins[i] if i < len(ins) else None, "scales and zero points")
        xs = ins[4:]
        if not xs:
            raise AotcError("no inputs to add", node.name, node.op)
        if len(xs) > self.MAX_INPUTS:
            raise AotcError(f"{len(xs)} inputs; at most {self.MAX_INPUTS} (TFLM's int32 sum "
                            f"of more could overflow)", node.name, node.op)
        for x in xs:
            if x is None or x.type.dtype.name != "int8" or x.type.shape != xs[0].type.shape:
                raise AotcError("the inputs must be int8 tensors of one shape", node.name,
                                node.op)
        sx, _, sy, _ = self._params(node, ins)
        if 2 * sx / ((1 << self.LEFT_SHIFT) * sy) >= 1:
            raise AotcError(f"output scale {sy:g} below 2^-19 of the input scale {sx:g} "
                            f"(TFLM's ADD_N requires an output multiplier below 1)",
                            node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[4]
        assert x is not None
        return [TensorType(x.type.shape, x.type.dtype)]

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        sx, zx, sy, zy = self._params(node, args)
        mi, si, mo, so, start = self.plan(sx, zx, sy)
        xs = [np.asarray(a).astype(np.int64) for a in args[4:]]
        acc = np.full(xs[0].shape, start, np.int64)
        for x in xs:
            acc = acc + qmath.mbqm_np((x - zx) * (1 << self.LEFT_SHIFT), mi, si)
        y = qmath.mbqm_np(acc, mo, so) + zy
        return np.clip(y, -128, 127).astype(np.int8)

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        return node.with_(inputs=node.inputs[4:],
                          attrs={**node.attrs, "_p": self._params(node, ins)})

    def lower(self, node: Node, kb: Any) -> None:
        sx, zx, sy, zy = node.attrs["_p"]
        mi, si, mo, so, start = self.plan(sx, zx, sy)
        Y = kb.outputs[0]
        with kb.loops(Y.shape) as idx:
            acc: Expr = Const(start, I32)
            for X in kb.inputs:
                v = Cast(X[idx], I32) - Const(zx, I32) if zx else Cast(X[idx], I32)
                acc = acc + call("q_mbqm", v * Const(1 << self.LEFT_SHIFT, I32),
                                 Const(mi, I32), Const(si, I32), dtype=I32)
            v = call("q_mbqm", acc, Const(mo, I32), Const(so, I32), dtype=I32)
            kb.store_output(idx, Cast(_clamp_i32(v + Const(zy, I32), -128, 127), Y.dtype))


def _c32(v: int) -> Expr:
    return Const(v, I32)


class _OneTensor(QuantOp):
    """A TFLM kernel of one int8 tensor and its scalar scales and zero points: the output has
    the tensor's shape and type; prepare() moves the parameters into the node (attrs "_p")."""

    def check_tensor(self, node: Node, ins: Sequence[Value | None]) -> Value:
        """The int8 tensor X (rank 1 or more) and its four scalar parameters checked; X."""
        x = ins[0]
        if x is None or x.type.dtype.name != "int8" or not x.type.shape:
            raise AotcError("X must be an int8 tensor of rank 1 or more", node.name, node.op)
        for i in (1, 2, 3, 4):
            _scalar(node, ins[i] if i < len(ins) else None, "scales and zero points")
        return x

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        return [TensorType(x.type.shape, x.type.dtype)]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        return node.with_(inputs=node.inputs[:1], attrs={**node.attrs, "_p": unary_params(ins)})


@register
class QCumSum(_OneTensor):
    """(X, x_scale, x_zero_point, y_scale, y_zero_point) -> Y: the int8 running sum along
    ``axis`` (``exclusive``, ``reverse`` as ONNX's CumSum), TFLM's CUMSUM (cumsum.cc,
    reference_ops::CumSum), aotc's: ADD_N's arithmetic (QAddN.plan) along the axis, the
    accumulator starting at TFLM's scaled offset, each partial sum rescaled, plus y_zp,
    saturated. The int32 accumulator wraps where TFLM's overflows (an axis of more than about
    15 values of extreme codes)."""

    name = "QCumSum"
    domain = "aotc"
    dtypes = ("int8",)

    def reference(self, X: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray,
                  y_scale: np.ndarray, y_zero_point: np.ndarray, *, axis: int,
                  exclusive: int = 0, reverse: int = 0) -> np.ndarray:
        raise NotImplementedError  # compute() has the node

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x = self.check_tensor(node, ins)
        if not 0 <= int(node.attrs["axis"]) < len(x.type.shape):
            raise AotcError(f"axis {node.attrs['axis']} is outside rank {len(x.type.shape)}",
                            node.name, node.op)
        p = unary_params(ins)
        if 2 * p["sx"] / ((1 << QAddN.LEFT_SHIFT) * p["sy"]) >= 1:
            raise AotcError(f"output scale {p['sy']:g} below 2^-19 of the input scale "
                            f"{p['sx']:g} (TFLM's CUMSUM requires an output multiplier below "
                            f"1)", node.name, node.op)

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        x = np.asarray(args[0])
        p = unary_params(args)
        mi, si, mo, so, start = QAddN.plan(p["sx"], p["zx"], p["sy"])
        axis = int(node.attrs["axis"])
        excl, rev = bool(node.attrs.get("exclusive", 0)), bool(node.attrs.get("reverse", 0))
        xm = np.moveaxis(x.astype(np.int64), axis, -1)
        scaled = qmath.mbqm_np((xm - p["zx"]) * (1 << QAddN.LEFT_SHIFT), mi, si)
        out = np.empty(xm.shape, np.int64)
        acc = np.full(xm.shape[:-1], start, np.int64)
        n = xm.shape[-1]
        for k in (range(n - 1, -1, -1) if rev else range(n)):
            if excl:
                out[..., k] = acc
            acc = (acc + scaled[..., k] + (1 << 31)) % (1 << 32) - (1 << 31)
            if not excl:
                out[..., k] = acc
        y = np.clip(qmath.mbqm_np(out, mo, so) + p["zy"], -128, 127).astype(np.int8)
        return np.moveaxis(y, -1, axis)

    def lower(self, node: Node, kb: Any) -> None:
        X, Y = kb.inputs[0], kb.outputs[0]
        p = node.attrs["_p"]
        mi, si, mo, so, start = QAddN.plan(p["sx"], p["zx"], p["sy"])
        axis = int(node.attrs["axis"])
        excl, rev = bool(node.attrs.get("exclusive", 0)), bool(node.attrs.get("reverse", 0))
        rank = len(X.shape)
        others = [d for d in range(rank) if d != axis]
        n = X.shape[axis]
        with kb.loops([X.shape[d] for d in others], [f"i{d}" for d in others]) as ovars:
            acc = kb.local(Const(start, I32), "acc", I32)
            with kb.loop(n, "k") as k:
                pos = Const(n - 1) - k if rev else k
                at = dict(zip(others, ovars))
                at[axis] = pos
                idx = [at[d] for d in range(rank)]
                v = Cast(X[idx], I32) - Const(p["zx"], I32) if p["zx"] else Cast(X[idx], I32)
                scaled = kb.local(call("q_mbqm", v * Const(1 << QAddN.LEFT_SHIFT, I32),
                                       Const(mi, I32), Const(si, I32), dtype=I32), "scaled", I32)
                if not excl:
                    kb.assign(acc, acc + scaled)
                r = call("q_mbqm", acc, Const(mo, I32), Const(so, I32), dtype=I32)
                kb.store_output(idx, Cast(_clamp_i32(r + Const(p["zy"], I32), -128, 127),
                                          Y.dtype))
                if excl:
                    kb.assign(acc, acc + scaled)


def inv_sqrt_multiplier(acc: int) -> tuple[int, int]:
    """TFLite's GetInvSqrtQuantizedMultiplierExp(acc, kReverseShift = -1) for 0 <= acc < 2^28
    (QL2Norm.MAX_SUM): the multiplier and shift of 1 / sqrt(acc) (5 Newton steps in Q3.28)."""
    if acc <= 1:
        return qmath.INT32_MAX, 0
    pairs = (qmath.clz32(acc) - 1) // 2 - 1
    shift = 11 - pairs
    half_input = qmath.rdbpot((acc << (2 * pairs)) >> 1, 1)
    x = 1 << 28
    for _ in range(5):
        x3 = qmath.sat_shl(qmath.srdhm(qmath.srdhm(x, x), x), 6)
        x = qmath.sat_shl(qmath._wrap32(qmath.srdhm(QL2Norm.HALF_THREE, x)
                                        - qmath.srdhm(half_input, x3)), 3)
    x = qmath.srdhm(x, QL2Norm.HALF_SQRT_2)
    if shift < 0:
        return qmath._wrap32(x << -shift), 0
    return x, -shift


@register
class QL2Norm(_OneTensor):
    """(X, x_scale, x_zero_point, y_scale, y_zero_point) -> Y: int8 L2 normalisation over the
    last axis, TFLM's L2_NORMALIZATION (reference_integer_ops::L2Normalization), aotc's: the
    int32 sum of (x - x_zp)^2 per row, GetInvSqrtQuantizedMultiplierExp of it (a multiplier
    and shift of 1 / sqrt(sum), Newton's method in fixed point), and each x - x_zp times that
    multiplier with 7 more bits of shift: codes of scale 1/128 and zero point 0 (what TFLM
    writes whatever the output's declared parameters), saturated."""

    name = "QL2Norm"
    domain = "aotc"
    dtypes = ("int8",)
    HALF_THREE = (1 << 28) + (1 << 27)  # 1.5 in Q3.28
    HALF_SQRT_2 = 1518500250  # sqrt(2) / 2 in Q0.31
    # A row's sum of squares below 2^28: TFLM's GetInvSqrtQuantizedMultiplierExp shifts by a
    # negative (wrapped unsigned) count from 2^28 on, which C leaves undefined.
    MAX_SUM = 1 << 28

    def reference(self, X: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray,
                  y_scale: np.ndarray, y_zero_point: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # compute() has the node

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x = self.check_tensor(node, ins)
        depth = x.type.shape[-1]
        if depth * 255 * 255 >= self.MAX_SUM:
            raise AotcError(f"rows of {depth} values: a sum of squares can reach 2^28, where "
                            f"TFLM's inverse square root is undefined (at most "
                            f"{(self.MAX_SUM - 1) // (255 * 255)} values a row)",
                            node.name, node.op)

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        x = np.asarray(args[0])
        zx = unary_params(args)["zx"]
        rows = x.astype(np.int64).reshape(-1, x.shape[-1]) - zx if x.size else \
            np.zeros((0, 1), np.int64)
        out = np.empty(rows.shape, np.int8)
        for r, row in enumerate(rows):
            m, s = inv_sqrt_multiplier(int(np.sum(row * row)))
            out[r] = [min(max(qmath.mbqm(int(v), m, s + 7), -128), 127) for v in row]
        return out.reshape(x.shape)

    def lower(self, node: Node, kb: Any) -> None:
        from aotc.loops.loop_ir import Bin

        X, Y = kb.inputs[0], kb.outputs[0]
        zx = node.attrs["_p"]["zx"]
        depth = X.shape[-1]
        rows = int(np.prod(X.shape[:-1], dtype=np.int64))
        U32 = dtypes.BY_NAME["uint32"]

        def at(base: Expr, c: Expr) -> Expr:
            v = Cast(X.flat(base + c), I32)
            return v - _c32(zx) if zx else v

        with kb.loop(rows, "r") as r:
            base = r * depth
            acc = kb.local(_c32(0), "acc", I32)
            with kb.loop(depth, "c") as c:
                v = kb.local(at(base, c), "v", I32)
                kb.assign(acc, acc + v * v)
            # GetInvSqrtQuantizedMultiplierExp (acc < 2^28: no division by 4)
            pairs = kb.local(Bin("shr", call("q_clz", acc, dtype=I32) - _c32(1), _c32(1), I32)
                             - _c32(1), "pairs", I32)
            norm = Bin("shl", acc, pairs * _c32(2), I32)
            half = kb.local(call("q_rdbpot", Bin("shr", norm, _c32(1), I32), _c32(1),
                                 dtype=I32), "half_input", I32)
            x = kb.local(_c32(1 << 28), "x", I32)
            for _ in range(5):
                x3 = call("q_sat_shl", call("q_srdhm", call("q_srdhm", x, x, dtype=I32), x,
                                            dtype=I32), _c32(6), dtype=I32)
                kb.assign(x, call("q_sat_shl", call("q_srdhm", _c32(self.HALF_THREE), x,
                                                    dtype=I32)
                                  - call("q_srdhm", half, x3, dtype=I32), _c32(3), dtype=I32))
            inv = call("q_srdhm", x, _c32(self.HALF_SQRT_2), dtype=I32)
            shift = _c32(11) - pairs
            neg = cmp("lt", shift, _c32(0))
            small = cmp("le", acc, _c32(1))
            wide = Cast(Bin("shl", Cast(inv, U32), Cast(_c32(0) - shift, U32), U32), I32)
            mult = kb.local(select(small, _c32(qmath.INT32_MAX), select(neg, wide, inv, I32),
                                   I32), "mult", I32)
            rshift = kb.local(select(small, _c32(7), select(neg, _c32(7), pairs - _c32(4), I32),
                                     I32), "shift", I32)
            with kb.loop(depth, "c") as c:
                y = call("q_mbqm", at(base, c), mult, rshift, dtype=I32)
                kb.store_output([], Cast(_clamp_i32(y, -128, 127), Y.dtype), flat=base + c)


# gemmlowp constants of TFLite's log_x_for_x_greater_than_or_equal_to_1 (Q0.31)
_LOG = dict(log_2=1488522236, sqrt_sqrt_half=1805811301, sqrt_half=1518500250,
            alpha_n=117049297, alpha_d=127690142, alpha_i=1057819769, alpha_f=638450708)


def _sat32(v: int) -> int:
    return min(max(v, qmath.INT32_MIN), qmath.INT32_MAX)


def log_q12_to_q5(z: int) -> int:
    """TFLite's log_x_for_x_greater_than_or_equal_to_1<5>(Q12.19 ``z``): log(z) in Q5.26."""
    c = _LOG
    w = qmath._wrap32
    ha = qmath.clz32(z)
    r_a = qmath.sat_shl(qmath.srdhm(qmath.sat_shl(z, ha - 1), c["sqrt_half"]), 1)
    quarter = 1 << 23  # Rescale<6>(1/4)
    za_pow = _sat32(qmath.sat_shl(12 - ha, 25) + quarter)
    hb = qmath.clz32(qmath.srdhm(z, c["sqrt_half"])) - 1
    r_b = qmath.sat_shl(z, hb)
    zb_pow = _sat32(qmath.sat_shl(12 - hb, 25) - quarter)
    r, zp2 = min(r_a, r_b), max(za_pow, zb_pow)
    total = r + c["sqrt_sqrt_half"]
    p = int((total + (1 if total >= 0 else -1)) / 2)  # RoundingHalfSum, toward zero
    q = w(2 * w(r - c["sqrt_sqrt_half"]))
    cs = qmath.srdhm(q, q)
    num = w(qmath.srdhm(q, r) + qmath.srdhm(qmath.srdhm(q, cs), c["alpha_n"]))
    den = w(qmath.srdhm(p, w(w(c["alpha_i"] + q) + qmath.srdhm(c["alpha_d"], cs)))
            + qmath.srdhm(c["alpha_f"], q))
    rec = qmath.one_over_one_plus_x(den)
    acc = w(qmath.srdhm(zp2, c["log_2"]) + qmath.srdhm(qmath.rdbpot(num, 6), rec))
    return qmath.sat_shl(acc, 1)


@register
class QLogSoftmax(_OneTensor):
    """(X, x_scale, x_zero_point, y_scale, y_zero_point) -> Y: int8 log-softmax over the last
    axis, TFLM's LOG_SOFTMAX (reference_ops::LogSoftmaxQuantized), aotc's: the exps of the
    differences from the row maximum (a 256-entry table, Q12.19 after Rescale<12>), their
    int32 sum, its fixed-point log (TFLite's log_x_for_x_greater_than_or_equal_to_1, Q5.26),
    the reverse-scaled diff_min, and each difference minus the log, divided by 2^22, plus
    127; output scale 16/256 and zero point 127, as TFLM requires."""

    name = "QLogSoftmax"
    domain = "aotc"
    dtypes = ("int8",)

    def reference(self, X: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray,
                  y_scale: np.ndarray, y_zero_point: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # compute() has the node

    @staticmethod
    def plan(sx: float) -> tuple[int, int, int, int, int, np.ndarray]:
        """(input multiplier, left shift, reverse scaling divisor, its shift, diff_min, the
        Q12.19 exp table by max - x): TFLM's Prepare (PreprocessLogSoftmaxScalingExp)."""
        m, ls, diff_min = qmath.softmax_params(sx)
        rm, rs = qmath.quantize_multiplier((1 << (31 - ls)) / float(m))
        table = np.array([qmath.rdbpot(int(e), 12) for e in qmath.softmax_table(sx)], np.int32)
        return m, ls, rm, rs, diff_min, table

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x = self.check_tensor(node, ins)
        p = unary_params(ins)
        if (p["sy"], p["zy"]) != (16 / 256, 127):
            raise AotcError(f"output scale {p['sy']:g} and zero point {p['zy']}; TFLM's "
                            f"LOG_SOFTMAX requires 16/256 and 127", node.name, node.op)
        if x.type.shape[-1] > 4096:
            raise AotcError("rows of more than 4096 values (TFLM's Q12.19 sum of exps could "
                            "overflow)", node.name, node.op)

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        x = np.asarray(args[0])
        m, ls, rm, rs, diff_min, table = self.plan(unary_params(args)["sx"])
        rows = x.astype(np.int64).reshape(-1, x.shape[-1])
        out = np.empty(rows.shape, np.int8)
        for k, row in enumerate(rows):
            mx = int(row.max())
            total = qmath._wrap32(int(sum(int(table[mx - int(v)]) for v in row)))
            log5 = log_q12_to_q5(total)
            adj = max(diff_min - 1, qmath.mbqm(qmath._wrap32(log5 + qmath.INT32_MIN), rm, rs))
            for j, v in enumerate(row):
                diff = int(v) - mx
                if diff > adj:
                    o = qmath.rdbpot(qmath._wrap32(qmath.mbqm(diff, m, ls) - log5), 22) + 127
                    out[k, j] = min(max(o, -128), 127)
                else:
                    out[k, j] = -128
        return out.reshape(x.shape)

    def lower(self, node: Node, kb: Any) -> None:
        from aotc.loops.loop_ir import Bin

        X, Y = kb.inputs[0], kb.outputs[0]
        m, ls, rm, rs, diff_min, table = self.plan(node.attrs["_p"]["sx"])
        depth = X.shape[-1]
        rows = int(np.prod(X.shape[:-1], dtype=np.int64))
        texp = kb.const("exp", table, I32)
        c = _LOG

        def srdhm(a: Expr, b: Expr) -> Expr:
            return call("q_srdhm", a, b, dtype=I32)

        def sat_shl(a: Expr, e: Expr) -> Expr:
            return call("q_sat_shl", a, e, dtype=I32)

        with kb.loop(rows, "r") as r:
            base = r * depth
            mx = kb.local(Cast(X.flat(base), I32), "mx", I32)
            with kb.loop(depth, "i") as i:
                kb.assign(mx, bmax(mx, Cast(X.flat(base + i), I32)))
            z = kb.local(_c32(0), "sum", I32)
            with kb.loop(depth, "i") as i:
                kb.assign(z, z + texp[[mx - Cast(X.flat(base + i), I32)]])
            # log_x_for_x_greater_than_or_equal_to_1<5>(z), as log_q12_to_q5
            ha = kb.local(call("q_clz", z, dtype=I32), "ha", I32)
            r_a = sat_shl(srdhm(sat_shl(z, ha - _c32(1)), _c32(c["sqrt_half"])), _c32(1))
            # z >= 1.0 (the row maximum's exp): 12 - ha and 12 - hb lie in [0, 12], so the
            # saturating shifts, add and subtract of the pow_2 terms never saturate
            za_pow = sat_shl(_c32(12) - ha, _c32(25)) + _c32(1 << 23)
            hb = kb.local(call("q_clz", srdhm(z, _c32(c["sqrt_half"])), dtype=I32) - _c32(1),
                          "hb", I32)
            r_b = sat_shl(z, hb)
            zb_pow = sat_shl(_c32(12) - hb, _c32(25)) - _c32(1 << 23)
            rr = kb.local(bmin(r_a, r_b), "rr", I32)
            zp2 = kb.local(bmax(za_pow, zb_pow), "zp2", I32)
            # RoundingHalfSum(r, sqrt_sqrt_half) for r >= 0 and that odd constant:
            # (r + c + 1) / 2 = (r >> 1) + (c + 1) / 2, in int32
            pp = kb.local(Bin("shr", rr, _c32(1), I32) + _c32((c["sqrt_sqrt_half"] + 1) // 2),
                          "p", I32)
            q = kb.local((rr - _c32(c["sqrt_sqrt_half"])) * _c32(2), "q", I32)
            cs = kb.local(srdhm(q, q), "cs", I32)
            num = kb.local(srdhm(q, rr) + srdhm(srdhm(q, cs), _c32(c["alpha_n"])), "num", I32)
            den = kb.local(srdhm(pp, _c32(c["alpha_i"]) + q + srdhm(_c32(c["alpha_d"]), cs))
                           + srdhm(_c32(c["alpha_f"]), q), "den", I32)
            rec = kb.local(call("q_one_over_one_plus_x", den, dtype=I32), "rec", I32)
            log5 = kb.local(sat_shl(srdhm(zp2, _c32(c["log_2"]))
                                    + srdhm(call("q_rdbpot", num, _c32(6), dtype=I32), rec),
                                    _c32(1)), "log5", I32)
            # + INT32_MIN, wrapping as TFLM's (two halves: one constant would leave int32)
            half = kb.local(_c32(1 << 30), "half", I32)
            shifted = log5 - half - half
            adj = kb.local(bmax(_c32(diff_min - 1), call("q_mbqm", shifted, _c32(rm), _c32(rs),
                                                          dtype=I32)), "adj", I32)
            with kb.loop(depth, "i") as i:
                diff = kb.local(Cast(X.flat(base + i), I32) - mx, "diff", I32)
                o = call("q_rdbpot", call("q_mbqm", diff, _c32(m), _c32(ls), dtype=I32) - log5,
                         _c32(22), dtype=I32) + _c32(127)
                v = select(cmp("gt", diff, adj), _clamp_i32(o, -128, 127), _c32(-128), I32)
                kb.store_output([], Cast(v, Y.dtype), flat=base + i)
