"""QConvTranspose: TFLite's int8 and 16x8 TRANSPOSE_CONV as an integer kernel (aotc domain;
the QDQ pass makes it from DequantizeLinear -> ConvTranspose -> QuantizeLinear with int16
activations, int8 weights and an int64 or int32 bias, and, with ``--requant tflite``, with int8
activations, int8 weights of zero point 0 and an int32 bias). TFLM scatters the products
(int8: (x - x_zp) * w into int32; 16x8: x * w into int64) into a scratch buffer and
requantises each output (int8: MultiplyByQuantizedMultiplier and the output zero point; 16x8:
its rounding, arith.mbqm64); integer sums do not depend on their order, so the kernel gathers
each output's taps into one accumulator (ConvTranspose's loop nest) and gives the same bytes
without the scratch buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Cast, Const, Expr
from aotc.ops import register
from aotc.ops.nn.conv import ConvTranspose, transpose_taps
from aotc.ops.quant import arith as qmath
from aotc.ops.quant.conv_matmul import (
    I32,
    I64,
    QuantOp,
    Requant,
    _multipliers,
    act_range,
    const_of,
    minus_zp,
    mode_of,
    wide_acc,
)


@register
class QConvTranspose(QuantOp):
    """(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp[, B]) with ConvTranspose's
    attributes; w is [C, M, kH, kW] with per-tensor or per-output-channel (axis 1) scales;
    group 1; int16 x (TFLite's 16x8: zero points 0) or int8 x (TFLite's int8: any x zero
    point, w zero point 0); int8 w."""

    name = "QConvTranspose"
    domain = "aotc"
    since = 1
    dtypes = ("int8", "int16")
    const_inputs = (1, 2, 3, 4, 5, 6, 7)

    def reference(self, x: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray,
                  w: np.ndarray, w_scale: np.ndarray, w_zero_point: np.ndarray,
                  y_scale: np.ndarray, y_zero_point: np.ndarray, B: np.ndarray | None = None,
                  *, auto_pad: str = "NOTSET", dilations: Sequence[int] = (), group: int = 1,
                  kernel_shape: Sequence[int] = (), output_padding: Sequence[int] = (),
                  output_shape: Sequence[int] = (), pads: Sequence[int] = (),
                  strides: Sequence[int] = ()) -> np.ndarray:
        raise NotImplementedError  # compute(): needs the node's requant mode

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x, w = ins[0], ins[3]
        if x is None or w is None or x.type.dtype.name not in ("int8", "int16") \
                or w.type.dtype.name != "int8":
            raise AotcError("takes int8 or int16 x and int8 w", node.name, node.op)
        if int(node.attrs.get("group", 1)) != 1:
            raise AotcError("group must be 1", node.name, node.op)
        x16 = x.type.dtype.name == "int16"
        for i, what in ((2, "x_zero_point"), (5, "w_zero_point")):
            z = const_of(node, ins[i], what)
            if z is not None and z.any() and (x16 or i == 5):
                raise AotcError(f"{what} must be 0 ({'16x8' if x16 else 'int8 w'})",
                                node.name, node.op)
        ConvTranspose().check(node.with_(inputs=(node.inputs[0], node.inputs[3])),
                              [x, w])

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[7] is not None
        t = ConvTranspose().infer(node, [ins[0], ins[3]])[0]
        return [TensorType(t.shape, ins[7].type.dtype)]

    def macs(self, node: Node, g: Any) -> int:
        w = g.type(node.inputs[3]).shape
        return g.type(node.inputs[0]).numel * int(np.prod(w[1:], dtype=np.int64))

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        x, xs, xz, w, ws, wz, ys, yz = args[:8]
        b = args[8] if len(args) > 8 else None
        assert x is not None and w is not None and yz is not None
        # Exact in float64: |sum| < 2^15 * 2^7 * taps * channels, far below 2^53.
        acc = ConvTranspose().reference(minus_zp(x, xz, 1).astype(np.float64),
                                        minus_zp(w, wz, 1).astype(np.float64), **attrs)
        acc = np.rint(acc).astype(np.int64)
        if b is not None:
            acc = acc + b.astype(np.int64).reshape((1, -1) + (1,) * (acc.ndim - 2))
        real = _multipliers(xs, ws, ys, w.shape[1], node)
        lo, hi = act_range(node, dtypes.from_numpy(yz.dtype))
        return qmath.requantize_np(acc, real, int(np.asarray(yz).reshape(-1)[0]), lo, hi,
                                   mode_of(node), channel_axis=1,
                                   wide=wide_acc(x, b)).astype(yz.dtype)

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        x, w, yz = ins[0], ins[3], ins[7]
        assert x is not None and w is not None and yz is not None
        real = _multipliers(const_of(node, ins[1], "x_scale"), const_of(node, ins[4], "w_scale"),
                            const_of(node, ins[6], "y_scale"), w.type.shape[1], node)
        zy = const_of(node, yz, "y_zero_point")
        assert zy is not None
        zx = const_of(node, ins[2], "x_zero_point")
        bias = ins[8] if len(ins) > 8 else None
        keep = [node.inputs[0], node.inputs[3]] + ([node.inputs[8]] if bias is not None else [])
        return node.with_(inputs=tuple(keep), attrs={
            **node.attrs, "_real": real, "_yz": int(zy.reshape(-1)[0]),
            "_xz": int(zx.reshape(-1)[0]) if zx is not None else 0,
            "_out": yz.type.dtype.name, "_wide": wide_acc(x, bias)})

    def lower(self, node: Node, kb: Any) -> None:
        X, W = kb.inputs[0], kb.inputs[1]
        B = kb.inputs[2] if len(kb.inputs) > 2 else None
        Y = kb.outputs[0]
        out = dtypes.BY_NAME[node.attrs["_out"]]
        lo, hi = act_range(node, out)
        wide = bool(node.attrs["_wide"])
        acc_t = I64 if wide else I32
        rq = Requant(node.attrs["_real"], node.attrs["_yz"], lo, hi, mode_of(node), out, wide)
        nd = len(X.shape) - 2
        xz = int(node.attrs.get("_xz", 0))
        _, pb, s, d = ConvTranspose()._geometry(node, X.shape, W.shape)
        with kb.loops(Y.shape, ["n", "m"] + [f"o{k}" for k in range(nd)]) as (n, m, *o):
            init = Cast(B[[m]], acc_t) if B is not None else Const(0, acc_t)
            acc = kb.local(init, "acc", acc_t)

            def tap(ii: list[Expr], kk: list[Expr]) -> None:  # each tap adds (x - xz) * w
                with kb.loop(X.shape[1], "c") as c:
                    xv = Cast(X[[n, c, *ii]], I32)
                    if xz:
                        xv = xv - Const(xz, I32)
                    kb.assign(acc, acc + xv * Cast(W[[c, m, *kk]], I32))

            transpose_taps(kb, X, W, o, pb, s, d, tap)
            kb.store_output([n, m, *o], rq(kb, acc, m))

