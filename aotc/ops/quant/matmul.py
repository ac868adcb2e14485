"""Integer matmul kernels QLinearMatMul and MatMulInteger (N-D, broadcast), on the
requantisation and integer arithmetic of conv_matmul.py (Requant, IntArith) that the integer
convolutions use too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.ops import register
from aotc.ops.nn.gemm import MatMul
from aotc.ops.quant import arith as qmath
from aotc.ops.quant.conv_matmul import (
    I32,
    I64,
    QT,
    IntArith,
    QuantOp,
    Requant,
    _check_int_inputs,
    _multipliers,
    _per_channel,
    act_range,
    const_of,
    late_bias_ok,
    minus_zp,
    mode_of,
    wide_acc,
)


class _MatMulQ(QuantOp):
    def _shape(self, node: Node, a: Value, b: Value) -> tuple[int, ...]:
        return MatMul().infer(node, [a, b])[0].shape


@register
class QLinearMatMul(_MatMulQ):
    """Integer matmul (N-D, broadcast); b per-tensor or per-column. aotc's QDQ pass appends an
    int32 bias as a 9th input (MatMul + Add of a quantised bias, TFLite's FULLY_CONNECTED)."""

    name = "QLinearMatMul"
    since = 10
    dtypes = QT
    const_inputs = (1, 2, 4, 5, 6, 7)
    onnx_tests = ("test_qlinearmatmul*",)
    defined = ("a constant int32 bias is clamped to [INT32_MIN + b, INT32_MAX - b], b the "
               "largest sum the products can reach, so the int32 accumulator never wraps: "
               "the output saturates as in exact arithmetic (onnxruntime) unless the "
               "requantisation multiplier is below about 1e-7")

    def reference(self, a: np.ndarray, a_scale: np.ndarray, a_zero_point: np.ndarray,
                  b: np.ndarray, b_scale: np.ndarray, b_zero_point: np.ndarray,
                  y_scale: np.ndarray, y_zero_point: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        a, as_, az, b, bs, bz, ys, yz = args[:8]
        bias = args[8] if len(args) > 8 else None
        assert a is not None and b is not None and yz is not None
        n = b.shape[-1]
        acc = np.matmul(minus_zp(a, az, -1), minus_zp(b, bz, b.ndim - 1))
        if bias is not None:
            acc = acc + bias.astype(np.int64)
        real = _multipliers(as_, bs, ys, n, node)
        lo, hi = act_range(node, dtypes.from_numpy(yz.dtype))
        return qmath.requantize_np(acc, real, int(np.asarray(yz).reshape(-1)[0]), lo, hi,
                                   mode_of(node), channel_axis=acc.ndim - 1,
                                   wide=wide_acc(a, bias)).astype(yz.dtype)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None and ins[3] is not None and ins[7] is not None
        return [TensorType(self._shape(node, ins[0], ins[3]), ins[7].type.dtype)]

    def macs(self, node: Node, g: Any) -> int:
        return g.type(node.outputs[0]).numel * g.type(node.inputs[0]).shape[-1]

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        _check_int_inputs(node, ins, (0, 3), (1, 2, 4, 5, 6, 7), x16=True, w16=True)
        b = ins[3]
        assert b is not None
        if len(b.type.shape) < 2:
            raise AotcError("1-D b is not supported", node.name, node.op)

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        b = ins[3]
        assert b is not None
        n = b.type.shape[-1]
        az = const_of(node, ins[2], "a_zero_point")
        bz = const_of(node, ins[5], "b_zero_point")
        yz = const_of(node, ins[7], "y_zero_point")
        real = _multipliers(const_of(node, ins[1], "a_scale"), const_of(node, ins[4], "b_scale"),
                            const_of(node, ins[6], "y_scale"), n, node)
        keep = [node.inputs[0], node.inputs[3]] + ([node.inputs[8]] if len(node.inputs) > 8
                                                    and node.inputs[8] else [])
        assert yz is not None and ins[0] is not None
        return node.with_(inputs=tuple(keep), attrs={
            **node.attrs, "_xz": int(az.reshape(-1)[0]) if az is not None else 0,
            "_wz": _per_channel(bz, n, node, "b_zero_point").astype(np.int64),
            "_real": real, "_yz": int(yz.reshape(-1)[0]), "_out": yz.dtype.name,
            "_wide": wide_acc(ins[0], ins[8] if len(ins) > 8 else None)})

    def lower(self, node: Node, kb: Any) -> None:
        if node.attrs.get("_int4"):  # TFLite int4 weights: kept packed (int4.py)
            from aotc.ops.quant.int4 import lower_packed

            attrs = {k: v for k, v in node.attrs.items() if k != "_int4"}
            lower_packed(node, kb, lambda: self.lower(node.with_(attrs=attrs), kb))
            return
        out = dtypes.BY_NAME[node.attrs["_out"]]
        lo, hi = act_range(node, out)
        wide = bool(node.attrs.get("_wide"))
        rq = Requant(node.attrs["_real"], node.attrs["_yz"], lo, hi, mode_of(node), out, wide)
        bias = kb.inputs[2] if len(kb.inputs) > 2 else None
        x16 = kb.inputs[0].dtype.itemsize > 1
        w = kb.input_const(1)
        late = wide and late_bias_ok(w, 1) and not node.attrs["_xz"] and w is not None \
            and w.ndim == 2
        arith = IntArith(node.attrs["_xz"], node.attrs["_wz"], rq,
                         I64 if wide and not late else I32, x16)
        arith.late_bias = late
        if w is not None and w.ndim == 2 and (bias is None or kb.input_const(2) is not None) \
                and not x16:
            arith.fold_bias(kb, w, kb.input_const(2) if bias is not None else None, 1,
                            kb.inputs[0].dtype, fold_zp=True)
        MatMul().lower(node, kb, arith, bias)


register(type("QLinearMatMul", (QLinearMatMul,), {"since": 21}))


@register
class MatMulInteger(_MatMulQ):
    """Integer matmul with an int32 output."""

    name = "MatMulInteger"
    since = 10
    dtypes = QT
    const_inputs = (2, 3)
    onnx_tests = ("test_matmulinteger*",)

    def reference(self, A: np.ndarray, B: np.ndarray, a_zero_point: np.ndarray | None = None,
                  b_zero_point: np.ndarray | None = None) -> np.ndarray:
        return np.matmul(minus_zp(A, a_zero_point, -1),
                         minus_zp(B, b_zero_point, B.ndim - 1)).astype(np.int32)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        _check_int_inputs(node, ins, (0, 1), (2, 3))

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None and ins[1] is not None
        return [TensorType(self._shape(node, ins[0], ins[1]), I32)]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        b = ins[1]
        assert b is not None
        az = const_of(node, ins[2] if len(ins) > 2 else None, "a_zero_point")
        bz = const_of(node, ins[3] if len(ins) > 3 else None, "b_zero_point")
        return node.with_(inputs=node.inputs[:2], attrs={
            **node.attrs, "_xz": int(az.reshape(-1)[0]) if az is not None else 0,
            "_wz": _per_channel(bz, b.type.shape[-1], node, "b_zero_point").astype(np.int64)})

    def lower(self, node: Node, kb: Any) -> None:
        MatMul().lower(node, kb, IntArith(node.attrs["_xz"], node.attrs["_wz"], None))
