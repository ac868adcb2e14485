"""TFLM's int16 (16x8) LOGISTIC and TANH: QLogistic16 and QTanh16, aotc-domain ops the QDQ
pass makes from an int16 DequantizeLinear -> Sigmoid / Tanh -> QuantizeLinear. Both are TFLM's
reference_integer_ops::Logistic / Tanh for int16: the input rescaled by a 15-bit multiplier
(TFLM's Prepare: logistic_common.cc, tanh.cc), then the 256-entry ``sigmoid_table_uint16``
(tensorflow/lite/kernels/internal/common.h) read at the top bits of |x| and interpolated with
the low ones. The kernel is that arithmetic in int32 (every intermediate stays below 2^26), the
table a 512-byte constant; no 65536-entry table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Bin, Cast, Const, bmin, call, cmp, select
from aotc.ops import register
from aotc.ops.quant.conv_matmul import I32, QuantOp
from aotc.ops.quant.qlinear import _scalar, unary_params

I16 = dtypes.BY_NAME["int16"]
U16 = dtypes.BY_NAME["uint16"]

# sigmoid(i / 24) in 0.16 fixed point, i = 0..255 (TFLite's sigmoid_table_uint16).
SIGMOID_TABLE = np.array([
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498,
    40149, 40794, 41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255,
    46817, 47369, 47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409, 51865,
    52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174,
    56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544, 58800, 59048, 59288,
    59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279, 61441,
    61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886,
    62990, 63090, 63186, 63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835,
    63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308, 64357, 64405, 64450,
    64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845,
    64873, 64900, 64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097,
    65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234, 65246, 65258,
    65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360,
    65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425,
    65429, 65433, 65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465,
    65468, 65471, 65474, 65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491,
    65493, 65495, 65497, 65498, 65500, 65501, 65503, 65504, 65505, 65507, 65508,
    65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516, 65517, 65517, 65518,
    65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524, 65525,
    65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529,
    65529, 65529, 65530, 65530, 65530, 65530, 65531, 65531, 65531, 65531, 65531,
    65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533, 65533, 65533,
    65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534,
    65534, 65534, 65535], np.uint16)


def checked_log2(x: float) -> tuple[bool, int]:
    """TFLite's CheckedLog2 (quantization_util.cc), in float32: (x is within 1e-3 of a power
    of two in log2, the rounded log2)."""
    f = np.float32
    lg = f(np.log(f(x))) * (f(1.0) / f(np.log(f(2.0))))
    r = f(np.sign(lg) * np.floor(abs(float(lg)) + 0.5))
    return bool(abs(f(lg - r)) < f(1e-3)), int(r)


def input_rescale(scale: float, tanh: bool) -> tuple[int, int]:
    """TFLM's Prepare for the int16 LOGISTIC / TANH, with its Eval's power-of-two case
    folded in: (multiplier, right shift) taking x to the table's 1/(3 * 4096) units."""
    pot, log2 = checked_log2(scale)
    shift = 12 + log2  # (15 - kInputIntegerBits) + log2(scale)
    pot = pot and shift in ((0, 1) if tanh else (0,))
    if pot:  # Eval: input_multiplier = 3 << input_left_shift, input_left_shift = 0
        return 3 << shift, 0
    m, shift = float(np.float32(scale)) * 4096.0 * 3.0, 0
    while m <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        m *= 2.0
    return int(m), shift


class _Act16(QuantOp):
    """(X, X_scale, X_zero_point, Y_scale, Y_zero_point) -> int16 Y: TFLM's int16 kernel."""

    domain = "aotc"
    since = 1
    dtypes = ("int16",)
    tanh = False

    def reference(self, X: np.ndarray, X_scale: np.ndarray, X_zero_point: np.ndarray,
                  Y_scale: np.ndarray, Y_zero_point: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # compute(): the parameters come from the node

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x, yz = ins[0], ins[4] if len(ins) > 4 else None
        if x is None or yz is None or x.type.dtype.name != "int16" \
                or yz.type.dtype.name != "int16":
            raise AotcError("X and Y (Y_zero_point's type) must be int16", node.name, node.op)
        for i in (1, 2, 3, 4):
            _scalar(node, ins[i], "scales and zero points")
        self.params(node, unary_params(ins))

    def params(self, node: Node, p: dict[str, Any]) -> tuple[int, int]:
        """TFLM's Prepare checks (one-line errors), then the input multiplier and shift."""
        what = "TANH" if self.tanh else "LOGISTIC"
        if p["zx"] or p["zy"]:
            raise AotcError(f"int16 {what} needs zero points 0 (TFLM's kernel)", node.name,
                            node.op)
        pot, log2 = checked_log2(p["sy"])
        if not pot or log2 != -15:
            raise AotcError(f"int16 {what} needs the output scale 2^-15 (TFLM's kernel), got "
                            f"{p['sy']:g}", node.name, node.op)
        m, s = input_rescale(p["sx"], self.tanh)
        if m > 32767:
            raise AotcError(f"int16 {what}: input scale {p['sx']:g} is too large for TFLM's "
                            f"15-bit input multiplier", node.name, node.op)
        return m, s

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None
        return [TensorType(ins[0].type.shape, I16)]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        m, s = self.params(node, unary_params(ins))
        return node.with_(inputs=node.inputs[:1], attrs={**node.attrs, "_m": m, "_s": s})

    def evaluate(self, x: np.ndarray, m: int, s: int) -> np.ndarray:
        """TFLM's reference_integer_ops::Logistic / Tanh (int16), elementwise in int64."""
        t = SIGMOID_TABLE.astype(np.int64)
        v = (x.astype(np.int64) * m + ((1 << (s - 1)) if s > 0 else 0)) >> s
        a = np.abs(v)
        frac = 8 if self.tanh else 9
        uh = np.minimum(a >> frac, 254)
        r = (t[uh] << frac) + (a & ((1 << frac) - 1)) * (t[uh + 1] - t[uh])
        r = np.where(a >= 255 << frac, (0xFFFF << 8) if self.tanh else (0x7FFF << 10), r)
        if self.tanh:
            y = np.where(v >= 0, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1) >> 8
        else:
            y = np.where(v >= 0, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1) >> 10
        return y.astype(np.int16)

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        x = args[0]
        assert x is not None
        return self.evaluate(x, *self.params(node, unary_params(args)))

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        m, s = int(node.attrs["_m"]), int(node.attrs["_s"])
        frac = 8 if self.tanh else 9
        table = kb.const("sigmoid_u16", SIGMOID_TABLE, U16)
        with kb.loop(X.numel, "i") as i:
            v = Cast(X.flat(i), I32) * Const(m, I32)
            if s:
                v = Bin("shr", v + Const(1 << (s - 1), I32), Const(s, I32), I32)
            v = kb.local(v, "v", I32)
            a = kb.local(call("abs", v, dtype=I32), "a", I32)
            uh = kb.local(bmin(Bin("shr", a, Const(frac, I32), I32), Const(254, I32)), "uh",
                          I32)
            ua = Cast(table[[uh]], I32)
            ub = Cast(table[[uh + Const(1, I32)]], I32)
            lerp = Bin("shl", ua, Const(frac, I32), I32) \
                + Bin("band", a, Const((1 << frac) - 1, I32), I32) * (ub - ua)
            sat = Const((0xFFFF << 8) if self.tanh else (0x7FFF << 10), I32)
            r = kb.local(select(cmp("ge", a, Const(255 << frac, I32)), sat, lerp, I32), "r",
                         I32)
            pos = cmp("ge", v, Const(0, I32))
            if self.tanh:
                y = select(pos, r - Const((1 << 23) - (1 << 7), I32),
                           Const((1 << 23) + (1 << 7) - 1, I32) - r, I32)
                y = Bin("shr", y, Const(8, I32), I32)
            else:
                y = select(pos, r + Const(1 << 9, I32), Const((1 << 25) + (1 << 9) - 1, I32) - r,
                           I32)
                y = Bin("shr", y, Const(10, I32), I32)
            kb.store_output([], Cast(y, I16), flat=i)


@register
class QLogistic16(_Act16):
    """TFLM's int16 LOGISTIC (reference_integer_ops::Logistic): zero points 0, output scale
    2^-15; the input multiplier from x_scale * 3 * 4096 (a power-of-two scale: 3)."""

    name = "QLogistic16"


@register
class QTanh16(_Act16):
    """TFLM's int16 TANH (reference_integer_ops::Tanh), tanh(x) = 2 sigmoid(2x) - 1 on the
    same table: zero points 0, output scale 2^-15."""

    name = "QTanh16"
    tanh = True
