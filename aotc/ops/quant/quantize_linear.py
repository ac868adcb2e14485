"""QuantizeLinear, DequantizeLinear (per-tensor, per-axis, blocked; scales and zero points
constant or run-time) and DynamicQuantizeLinear as kernels. Inside a QDQ model the qdq pass
absorbs them into integer kernels; these are the ones left standing (model I/O, float islands).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.dtypes import DType
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Cast, Const, Expr, bmax, bmin, call
from aotc.ops import register
from aotc.ops.quant.conv_matmul import F32, I32, I64, ONNX_DTYPES, QuantOp, qrange


# ------------------------------------------------------------------------------ Q / DQ
def _axis_index(idx: Sequence[Expr], x_shape: Sequence[int], p_shape: Sequence[int],
                axis: int, block: int) -> Expr:
    """Flat index into a per-axis / blocked parameter for the element at ``idx``."""
    flat: Expr = Const(0)
    stride = 1
    for k in reversed(range(len(x_shape))):
        if p_shape[k] == 1:
            continue
        i = idx[k] // block if (k == axis and block) else idx[k]
        flat = flat + i * stride if stride != 1 else flat + i
        stride *= p_shape[k]
    return flat


def _param_shape(node: Node, x_shape: Sequence[int], scale: np.ndarray, axis: int,
                 block: int) -> tuple[int, ...]:
    r = len(x_shape)
    if scale.size == 1 and scale.ndim <= 1 and not block:
        return (1,) * r
    if block:
        if scale.ndim != r:
            raise AotcError(f"blocked scale must have rank {r}, got {scale.shape}",
                            node.name, node.op)
        return tuple(scale.shape)
    if scale.ndim != 1 or scale.size != x_shape[axis]:
        raise AotcError(f"per-axis scale {scale.shape} does not match axis {axis} of "
                        f"{tuple(x_shape)}", node.name, node.op)
    shape = [1] * r
    shape[axis] = scale.size
    return tuple(shape)


def _expand(p: np.ndarray, x_shape: Sequence[int], p_shape: Sequence[int], axis: int,
            block: int) -> np.ndarray:
    p = np.asarray(p).reshape(p_shape)
    if block:
        p = np.repeat(p, block, axis=axis)
        p = p[tuple(slice(0, d) for d in x_shape)]
    return np.broadcast_to(p, x_shape)


def _elementwise_params(node: Node, x: np.ndarray, scale: np.ndarray, zp: np.ndarray,
                        attrs: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Scale and zero point broadcast to each element of ``x`` (per-tensor, per-axis or
    blocked), for the references."""
    axis, block = int(attrs.get("axis", 1)), int(attrs.get("block_size", 0) or 0)
    if x.ndim == 0 or (scale.size == 1 and not block):
        return scale.reshape(()), np.asarray(zp).reshape(-1)[0]
    axis = axis + x.ndim if axis < 0 else axis
    pshape = _param_shape(node, x.shape, scale, axis, block)
    z = np.broadcast_to(zp, scale.shape) if zp.size == 1 else zp
    return (_expand(scale, x.shape, pshape, axis, block),
            _expand(z, x.shape, pshape, axis, block))


class _QDQBase(QuantOp):
    """Scale and zero point: compile-time constants (any layout), or run-time scalars (as in
    DynamicQuantizeLinear's expansion)."""

    def reference(self, x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None,
                  *, axis: int = 1, block_size: int = 0, output_dtype: int = 0,
                  saturate: int = 1, precision: int = 0) -> np.ndarray:
        raise NotImplementedError  # compute(): the attrs above are the schema

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins[:1])

    def _prep(self, node: Node, ins: Sequence[Value | None]
              ) -> tuple[np.ndarray, np.ndarray | None, int, int, tuple[int, ...]]:
        x = ins[0]
        assert x is not None
        r = len(x.type.shape)
        axis = int(node.attrs.get("axis", 1))
        axis = axis + r if axis < 0 else axis
        block = int(node.attrs.get("block_size", 0) or 0)
        sv = ins[1]
        assert sv is not None
        scale = sv.const if sv.is_const else np.ones(sv.type.shape, np.float32)
        zv = ins[2] if len(ins) > 2 else None
        zp = (None if zv is None else zv.const if zv.is_const else
              np.ones(zv.type.shape, zv.type.dtype.np))
        if r and not 0 <= axis < r and (scale.size > 1 or block):
            raise AotcError(f"axis {axis} out of range for rank {r}", node.name, node.op)
        pshape = _param_shape(node, x.type.shape, scale, axis, block) if r else ()
        return scale, zp, axis, block, pshape

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        scale, zp, axis, block, pshape = self._prep(node, ins)
        runtime = tuple(i for i in (1, 2) if i < len(ins) and ins[i] is not None
                        and not ins[i].is_const)  # type: ignore[union-attr]
        return node.with_(inputs=(node.inputs[0], *(node.inputs[i] for i in runtime)), attrs={
            "_runtime": {i: k for k, i in enumerate(runtime, 1)},
            **node.attrs, "_scale": scale.astype(np.float32).reshape(-1), "_zp": (
                None if zp is None else zp.astype(np.int64).reshape(-1)),
            "_axis": axis, "_block": block, "_pshape": pshape})

    def _param(self, kb: Any, node: Node, key: str, idx: Sequence[Expr], dt: DType) -> Expr:
        pos = node.attrs["_runtime"].get(1 if key == "_scale" else 2)
        if pos is not None:
            ref = kb.inputs[pos]
            v = ref.flat(0) if ref.numel == 1 else ref.flat(_axis_index(
                idx, kb.inputs[0].shape, node.attrs["_pshape"], node.attrs["_axis"],
                node.attrs["_block"]))
            return v if v.dtype == dt else Cast(v, dt)
        vals = node.attrs[key]
        if vals.size == 1:
            return Const(vals[0].item(), dt)
        tab = kb.const(key.strip("_"), vals, dt)
        return tab[[_axis_index(idx, kb.inputs[0].shape, node.attrs["_pshape"],
                                node.attrs["_axis"], node.attrs["_block"])]]


    @staticmethod
    def _has_zp(node: Node) -> bool:
        return 2 in node.attrs["_runtime"] or (node.attrs["_zp"] is not None
                                                and bool(node.attrs["_zp"].any()))


@register
class DequantizeLinear(_QDQBase):
    """y = (x - zero_point) * scale in float32; per-tensor, per-axis or blocked."""

    name = "DequantizeLinear"
    since = 10
    dtypes = ("int8", "uint8", "int16", "uint16", "int32")
    onnx_tests = ("test_dequantizelinear*",)

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        x, scale = args[0], args[1]
        assert x is not None and scale is not None
        zp = args[2] if len(args) > 2 and args[2] is not None else np.zeros(1, np.int64)
        s, z = _elementwise_params(node, x, scale, zp, attrs)
        return ((x.astype(np.int64) - np.asarray(z, np.int64)).astype(np.float32)
                * s.astype(np.float32)).astype(np.float32)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None
        return [TensorType(ins[0].type.shape, F32)]

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        with kb.loops(X.shape) as idx:
            v = Cast(X[idx] if idx else X[[0]], I64 if X.dtype.itemsize == 8 else I32)
            if self._has_zp(node):
                v = v - self._param(kb, node, "_zp", idx, v.dtype)
            kb.store_output(idx, Cast(v, F32) * self._param(kb, node, "_scale", idx, F32))


@register
class QuantizeLinear(_QDQBase):
    """y = saturate(round_half_even(x / scale) + zero_point); output dtype from the zero point
    (or output_dtype), uint8 by default."""

    name = "QuantizeLinear"
    since = 10
    dtypes = ("float32",)
    onnx_tests = ("test_quantizelinear*",)
    defined = ("a NaN input gives the integer 0 (not the zero point: the saturating float -> "
               "integer conversion), +-inf the type's ends (onnxruntime: the CPU instruction's "
               "result; TFLite's QUANTIZE casts NaN to an int32 in C, undefined)")

    @staticmethod
    def out_dtype(node: Node, zp: Value | None) -> DType:
        od = int(node.attrs.get("output_dtype", 0) or 0)
        if zp is not None:
            return zp.type.dtype
        if od:
            if od not in ONNX_DTYPES:
                raise AotcError(f"output_dtype {od} is not supported (int8, uint8, int16, "
                                f"uint16, int32)", node.name, node.op)
            return dtypes.BY_NAME[ONNX_DTYPES[od]]
        return dtypes.uint8

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        dt = self.out_dtype(node, ins[2] if len(ins) > 2 else None)
        if dt.name not in ONNX_DTYPES.values():
            raise AotcError(f"output type {dt.name} is not supported", node.name, node.op)
        if int(node.attrs.get("precision", 0) or 0) not in (0, 1):
            raise AotcError("precision other than float32 is not supported", node.name, node.op)

    def compute(self, args: list[np.ndarray | None], attrs: dict[str, Any], node: Node) -> Any:
        x, scale = args[0], args[1]
        assert x is not None and scale is not None
        zpa = args[2] if len(args) > 2 else None
        od = int(attrs.get("output_dtype", 0) or 0)
        dt = (zpa.dtype if zpa is not None else
              np.dtype(ONNX_DTYPES[od]) if od else np.dtype(np.uint8))
        zp = zpa if zpa is not None else np.zeros(1, dt)
        s, z = _elementwise_params(node, x, scale, zp, attrs)
        info = np.iinfo(dt)
        y = np.rint(x.astype(np.float32) / s.astype(np.float32)) + np.asarray(z, np.float32)
        return np.clip(y, info.min, info.max).astype(dt)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None
        return [TensorType(ins[0].type.shape, self.out_dtype(node, ins[2] if len(ins) > 2
                                                             else None))]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        out = super().prepare(node, ins)
        return out.with_(attrs={**out.attrs, "_out": self.out_dtype(node, ins[2] if len(ins) > 2
                                                                    else None).name})

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        out = dtypes.BY_NAME[node.attrs["_out"]]
        lo, hi = qrange(out)
        with kb.loops(X.shape) as idx:
            x = X[idx] if idx else X[[0]]
            f = call("rint", x / self._param(kb, node, "_scale", idx, F32))
            if self._has_zp(node):
                f = f + Cast(self._param(kb, node, "_zp", idx, I32), F32)
            f = bmin(bmax(f, Const(float(lo), F32)), Const(float(hi), F32))
            kb.store_output(idx, Cast(f, out))


for _v in (13, 19, 21, 23, 25):
    for _base in (DequantizeLinear, QuantizeLinear):
        register(type(_base.__name__, (_base,), {"since": _v}))

# The TFLite frontend's Q/DQ of int16 activations and int64 biases (16x8 models): ONNX's
# opset 17 has neither (int16 arrives in opset 21, int64 never), so they are aotc-domain nodes
# with ONNX's semantics; the qdq pass treats them as the standard ones.
# The aotc DequantizeLinear also reads a TFLite int4 filter (as int8 values): ``int4=1`` tells
# the qdq pass to keep the weights of the integer kernel packed (aotc.ops.quant.int4).
@register
class AotcDequantizeLinear(DequantizeLinear):
    name = "DequantizeLinear"
    since = 1
    domain = "aotc"
    dtypes = ("int8", "int16", "int32", "int64")
    onnx_tests = ()

    def reference(self, x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None,
                  *, axis: int = 1, block_size: int = 0, output_dtype: int = 0,
                  saturate: int = 1, precision: int = 0, int4: int = 0) -> np.ndarray:
        raise NotImplementedError  # compute(): the attrs above are the schema


register(type("QuantizeLinear", (QuantizeLinear,), {"since": 1, "domain": "aotc"}))


@register
class DynamicQuantizeLinear(QuantOp):
    """uint8 quantisation with the scale and zero point computed from the data's range."""

    name = "DynamicQuantizeLinear"
    since = 11
    onnx_tests = ("test_dynamicquantizelinear*",)

    def reference(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        lo = np.float32(min(0.0, float(x.min()))) if x.size else np.float32(0)
        hi = np.float32(max(0.0, float(x.max()))) if x.size else np.float32(0)
        scale = np.float32((hi - lo) / np.float32(255))
        zp = np.clip(np.rint(np.float32(0) - lo / scale), 0, 255) if scale else np.float32(0)
        y = np.clip(np.rint(x / scale) + zp, 0, 255) if scale else np.full(x.shape, zp)
        return (y.astype(np.uint8), np.array(scale, np.float32),
                np.array(zp, np.float32).astype(np.uint8))

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None
        return [TensorType(ins[0].type.shape, dtypes.uint8), TensorType((), F32),
                TensorType((), dtypes.uint8)]

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        n = X.numel
        lo = kb.local(Const(0.0, F32), "lo", F32)
        hi = kb.local(Const(0.0, F32), "hi", F32)
        with kb.loop(n, "i") as i:
            kb.assign(lo, bmin(lo, X.flat(i)))
            kb.assign(hi, bmax(hi, X.flat(i)))
        scale = kb.local((hi - lo) / Const(255.0, F32), "scale", F32)
        zp = kb.local(Const(0.0, F32), "zp", F32)
        from aotc.loops.loop_ir import cmp

        with kb.if_(cmp("ne", scale, Const(0.0, F32))):
            kb.assign(zp, bmin(bmax(call("rint", Const(0.0, F32) - lo / scale),
                                    Const(0.0, F32)), Const(255.0, F32)))
        with kb.loop(n, "i") as i:
            from aotc.loops.loop_ir import Select

            q = Select(cmp("ne", scale, Const(0.0, F32)), call("rint", X.flat(i) / scale) + zp,
                       zp)
            q = bmin(bmax(q, Const(0.0, F32)), Const(255.0, F32))
            kb.store_output([], Cast(q, dtypes.uint8), flat=i)
        kb.store_output([], scale, out=1, flat=Const(0))
        kb.store_output([], Cast(zp, dtypes.uint8), out=2, flat=Const(0))
