"""The ONNX graph a TFLite model becomes, under construction: the tensors by layout (NCHW or
NHWC), nodes, initializers and the quantisation helpers the builtin converters
(builtins.py) share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from aotc.errors import AotcError

OPSET = 17
TO_NCHW = (0, 3, 1, 2)
TO_NHWC = (0, 2, 3, 1)
# TFLite TensorType -> numpy dtype (the types aotc computes with).
# uint32 and uint64: the spectra of TFLM's Signal operators (signal.py).
_DTYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_,
           7: np.int16, 9: np.int8, 12: np.uint64, 15: np.uint32}
_TYPE_NAMES = {5: "STRING", 8: "COMPLEX64", 10: "FLOAT64", 11: "COMPLEX128", 13: "RESOURCE",
               14: "VARIANT", 16: "UINT16", 17: "INT4"}
INT4 = 17  # packed two to a byte, low nibble first (TFLite's UnpackDenseInt4IntoInt8)


def unpack_int4(raw: bytes, n: int) -> np.ndarray:
    """``n`` int4 values packed two to a byte, low nibble first, sign-extended to int8."""
    b = np.frombuffer(raw, np.uint8).astype(np.int16)
    nib = np.stack([b & 0xF, b >> 4], axis=1).reshape(-1)[:n]
    return ((nib ^ 8) - 8).astype(np.int8)


class Builder:
    """The ONNX graph under construction: names of each TFLite tensor per layout, nodes,
    initializers, and the helpers the per-op converters (``builtins``) share."""

    def __init__(self, model: Any, sub: Any, data: bytes, fname: str,
                 bind: list[str] | None = None, parent: Builder | None = None) -> None:
        """``bind``, ``parent``: another subgraph of the model (an IF branch, a WHILE
        condition or body), its inputs the ONNX names ``bind`` (NHWC), its names unique
        among the ``parent``'s (control.py)."""
        self.model, self.sub, self.data, self.fname = model, sub, data, fname
        # The int4 tensors a converter reads as an int8-activation filter (allow_int4).
        self.int4_filters: set[int] = set()
        # Shapes a converter knows where the model leaves them unset (TFLite_Detection_
        # PostProcess's outputs): tensor -> shape, read by shape().
        self.shapes: dict[int, tuple[int, ...]] = {}
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        # importer.py: converts subgraph ``index`` of the model with its inputs bound to ONNX
        # names; returns its nodes, initializers and output names (IF, WHILE: control.py).
        self.subgraph: Any = parent.subgraph if parent is not None else None
        # (tensor, layout) -> ONNX name. Layouts: "nhwc" (TFLite's order; every tensor of
        # another rank), "nchw" (4-D), "flat" (a 2-D [N, H*W*C] tensor held as its NCHW
        # source flattened, [N, C*H*W]: flat_src has the NHWC source shape).
        self.names: dict[tuple[int, str], str] = {}
        self.flat_src: dict[int, tuple[int, int, int, int]] = {}
        self.taken: set[str] = parent.taken if parent is not None else set()
        # Tensors computed at compile time (SHAPE, PACK of constants, FILL, ...): the
        # converters of constant-only builtins put their values here, read back by const().
        self.folded: dict[int, np.ndarray] = {}
        self.op_index, self.op_name = 0, ""
        self.inputs = [int(t) for t in sub.InputsAsNumpy()] if sub.InputsLength() else []
        self.outputs = [int(t) for t in sub.OutputsAsNumpy()] if sub.OutputsLength() else []
        if not self.outputs:
            raise AotcError(f"{fname}: the subgraph has no outputs")
        # DEQUANTIZE of a float16 constant (float16 weights): its output is that constant,
        # folded to float32 (output tensor -> the float16 tensor).
        self.folded_f16: dict[int, int] = {}
        for i in range(sub.OperatorsLength()):
            op = sub.Operators(i)
            code = model.OperatorCodes(op.OpcodeIndex())
            if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) == 6 \
                    and op.InputsLength() == 1 and op.OutputsLength() == 1:
                src = int(op.Inputs(0))
                if self.tensor(src).Type() == 1 and self.const(src) is not None:
                    self.folded_f16[int(op.Outputs(0))] = src
        self.input_names: dict[int, str] = {}
        if bind is not None:
            if len(bind) != len(self.inputs):
                raise AotcError(f"{fname}: the subgraph has {len(self.inputs)} inputs; its "
                                f"operator passes {len(bind)}")
            self.names.update({(t, "nhwc"): name for t, name in zip(self.inputs, bind)})
            self.reserved: dict[int, str] = {}
            return
        for t in self.inputs:
            if self.const(t) is None:
                self.names[(t, "nhwc")] = self.input_names[t] = self._claim(self.tname(t))
                if self.uint8(t):  # the bundle takes uint8; the graph computes on int8
                    self.names[(t, "nhwc")] = self._shift(self.names[(t, "nhwc")], np.uint8,
                                                          np.int8, f"{self.tname(t)}/int8")
        # The graph outputs keep their TFLite names (the bundle's API names them).
        self.reserved = {t: self._claim(self.tname(t)) for t in self.outputs
                         if (t, "nhwc") not in self.names}

    # ------------------------------------------------------------------ tensors
    def tensor(self, t: int) -> Any:
        if not 0 <= t < self.sub.TensorsLength():
            raise AotcError(f"tensor index {t} is out of range")
        return self.sub.Tensors(t)

    def tname(self, t: int) -> str:
        raw = self.tensor(t).Name()
        return raw.decode("utf-8", "replace") if raw else f"tensor_{t}"

    def shape(self, t: int) -> tuple[int, ...]:
        known = getattr(self, "shapes", {})  # (CALL_ONCE's reader is built without __init__)
        if t in known:
            return known[t]
        ts = self.tensor(t)
        return tuple(int(d) for d in ts.ShapeAsNumpy()) if ts.ShapeLength() else ()

    def declared(self, t: int) -> np.dtype:
        """The tensor's type as the model declares it."""
        code = self.tensor(t).Type()
        if code == INT4:  # packed constants, computed with as int8 values
            return np.dtype(np.int8)
        if code not in _DTYPES:
            raise AotcError(f"tensor {self.tname(t)!r} has type "
                            f"{_TYPE_NAMES.get(code, code)}, which aotc does not support")
        return np.dtype(_DTYPES[code])

    def uint8(self, t: int) -> bool:
        """A quantised uint8 tensor: the graph holds it as int8, value - 128 with zero point
        - 128 (the same real numbers, exactly), so uint8 models run on the int8 kernels with
        one-byte weights; graph inputs and outputs are converted at the boundary."""
        if self.declared(t) != np.uint8:
            return False
        q = self.tensor(t).Quantization()
        return q is not None and q.ScaleLength() > 0

    def dtype(self, t: int) -> np.dtype:
        return np.dtype(np.int8) if self.uint8(t) else self.declared(t)

    def fold(self, t: int, value: np.ndarray) -> None:
        """Tensor ``t`` is ``value``, computed at compile time (no node is emitted)."""
        arr = np.asarray(value).astype(self.dtype(t))
        if tuple(arr.shape) != self.shape(t):
            if arr.size != int(np.prod(self.shape(t), dtype=np.int64)):
                raise AotcError(f"tensor {self.tname(t)!r}: the folded value has shape "
                                f"{list(arr.shape)}, the model says {list(self.shape(t))}")
            arr = arr.reshape(self.shape(t))
        self.names = {k: v for k, v in self.names.items() if k[0] != t}
        self.folded[t] = arr

    def rank(self, t: int) -> int:
        return len(self.shape(t))

    def const(self, t: int) -> np.ndarray | None:
        """The constant data of tensor ``t`` (None for an activation)."""
        if t in self.folded:
            v = self.folded[t]
            return v.astype(np.float32) if v.dtype == np.float16 else v
        if t in self.folded_f16:
            return self.const(self.folded_f16[t])
        ts = self.tensor(t)
        bi = ts.Buffer()
        if bi <= 0 or bi >= self.model.BuffersLength():
            return None
        buf = self.model.Buffers(bi)
        if buf.DataLength():
            raw = buf.DataAsNumpy().tobytes()
        elif buf.Offset() > 1:
            off, size = int(buf.Offset()), int(buf.Size())
            if off + size > len(self.data):
                raise AotcError(f"tensor {self.tname(t)!r}: buffer beyond the end of the file")
            raw = self.data[off:off + size]
        else:
            return None
        if ts.Type() == INT4:
            return self._int4(t, raw)
        dt = self.declared(t)
        shape = self.shape(t)
        if ts.Sparsity() is not None:  # pruned weights: densified now (sparse.py)
            from aotc.frontend.tflite.sparse import densify

            if len(raw) % dt.itemsize:
                raise AotcError(f"tensor {self.tname(t)!r}: {len(raw)} bytes of {dt.name}")
            arr = densify(ts.Sparsity(), np.frombuffer(raw, dt), shape, self.tname(t))
            return arr.astype(np.float32) if dt == np.float16 else arr
        if len(raw) != int(np.prod(shape, dtype=np.int64)) * dt.itemsize:
            raise AotcError(f"tensor {self.tname(t)!r}: {len(raw)} bytes of data for shape "
                            f"{list(shape)} {dt.name}")
        arr = np.frombuffer(raw, dt).reshape(shape)
        if self.uint8(t):
            return (arr.astype(np.int16) - 128).astype(np.int8)
        return arr.astype(np.float32) if dt == np.float16 else arr

    def int4(self, t: int) -> bool:
        return self.tensor(t).Type() == INT4

    def _int4(self, t: int, raw: bytes) -> np.ndarray:
        """A packed int4 constant (TFLM reads them as the filter of CONV_2D,
        DEPTHWISE_CONV_2D and FULLY_CONNECTED with int8 activations; the converters check
        that) as int8 values."""
        shape = self.shape(t)
        n = int(np.prod(shape, dtype=np.int64))
        if self.tensor(t).Sparsity() is not None or len(raw) != (n + 1) // 2:
            raise AotcError(f"tensor {self.tname(t)!r}: {len(raw)} bytes of data for {n} "
                            f"packed int4 values")
        return unpack_int4(raw, n).reshape(shape)

    def quant(self, t: int) -> tuple[np.ndarray, np.ndarray, int] | None:
        """(scale, zero point, TFLite axis) of a quantised tensor, else None."""
        q = self.tensor(t).Quantization()
        if q is None or q.ScaleLength() == 0 or self.dtype(t) not in (np.int8, np.uint8,
                                                                        np.int16, np.int32,
                                                                        np.int64):
            return None
        scale = q.ScaleAsNumpy().astype(np.float32)
        zp = q.ZeroPointAsNumpy().astype(np.int64) if q.ZeroPointLength() else np.zeros(
            len(scale), np.int64)
        if len(zp) == 1 and len(scale) > 1:
            zp = np.repeat(zp, len(scale))
        declared = self.declared(t)
        if declared != np.int32 and len(zp) and (zp.min() < np.iinfo(declared).min
                                                 or zp.max() > np.iinfo(declared).max):
            bad = int(zp.min() if zp.min() < np.iinfo(declared).min else zp.max())
            raise AotcError(f"tensor {self.tname(t)!r}: zero point {bad} is outside "
                            f"{declared.name}'s range")
        if self.uint8(t):
            zp = zp - 128
        axis, shape = int(q.QuantizedDimension()), self.shape(t)
        if len(scale) > 1:
            if len(shape) == 1:
                # TFLM reads a 1-D tensor's per-channel parameters (a bias's) along its only
                # axis whatever quantized_dimension says (converters have written 3 there).
                axis = 0
            elif not 0 <= axis < len(shape):
                raise AotcError(f"tensor {self.tname(t)!r}: quantized_dimension {axis} is not "
                                f"an axis of its shape {list(shape)}")
            if shape[axis] != len(scale):
                raise AotcError(f"tensor {self.tname(t)!r}: {len(scale)} per-channel scales "
                                f"for {shape[axis]} channels along axis {axis}")
        return scale, zp, axis

    def quantized(self, t: int) -> bool:
        return self.quant(t) is not None and self.dtype(t) not in (np.int32, np.int64)

    def qdomain(self, t: int) -> dict[str, str]:
        """Q/DQ of an int16 activation or an int64 bias (16x8 models) are aotc-domain nodes:
        opset 17 has no int16 Q/DQ and no opset an int64 one."""
        return {"domain": "aotc"} if self.dtype(t) in (np.int16, np.int64) else {}

    # ------------------------------------------------------------------ names and nodes
    def _claim(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name

    def fresh(self, suffix: str) -> str:
        return self._claim(f"{self.tname(self.cur_out)}/{suffix}")

    @property
    def cur_out(self) -> int:
        op = self.sub.Operators(self.op_index)
        return int(op.Outputs(0)) if op.OutputsLength() else 0

    def node_name(self, op: Any) -> str:
        return self.tname(int(op.Outputs(0))) if op.OutputsLength() else f"op_{self.op_index}"

    def add(self, op_type: str, inputs: list[str], suffix: str, n_out: int = 1,
            outputs: list[str] | None = None, **attrs: Any) -> list[str]:
        outs = outputs or [self.fresh(f"{suffix}{k}" if k else suffix) for k in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=outs[0], **attrs))
        return outs

    def init(self, arr: np.ndarray, suffix: str) -> str:
        name = self.fresh(suffix)
        self.inits.append(numpy_helper.from_array(np.array(arr, order="C"), name))
        return name

    # ------------------------------------------------------------------ layouts
    def layout_of(self, t: int) -> str:
        """The layout tensor ``t`` is available in (NCHW preferred when both are)."""
        if (t, "nchw") in self.names:
            return "nchw"
        if (t, "flat") in self.names and (t, "nhwc") not in self.names:
            return "flat"
        return "nhwc"

    def get(self, t: int, layout: str = "nhwc") -> str:
        """ONNX name of tensor ``t`` (an activation or a constant) in ``layout``."""
        if self.rank(t) != 4 and layout != "flat":
            layout = "nhwc"
        if (t, layout) in self.names:
            return self.names[(t, layout)]
        if (t, "flat") in self.names:  # [N, C*H*W] -> [N, H*W*C]: back to NHWC order
            n, h, w, c = self.flat_src[t]
            nchw = self.add("Reshape", [self.names[(t, "flat")], self.init(
                np.array([n, c, h, w], np.int64), "shape")], "unflatten")[0]
            nhwc = self._claim(f"{self.tname(t)}/nhwc4")
            self._permute(nchw, (n, c, h, w), TO_NHWC, nhwc)
            name = self._claim(f"{self.tname(t)}/nhwc")
            self.nodes.append(helper.make_node("Reshape", [nhwc, self.init(
                np.array(self.shape(t), np.int64), "shape")], [name], name=name))
            self.names[(t, "nhwc")] = name
            return name
        c = self.const(t)
        if c is not None:
            arr = c.transpose(TO_NCHW) if layout == "nchw" else c
            self.names[(t, layout)] = self.init(arr, f"{layout}_{t}")
            return self.names[(t, layout)]
        other = "nhwc" if layout == "nchw" else "nchw"
        if (t, other) not in self.names:
            raise AotcError(f"tensor {self.tname(t)!r} is read before it is written")
        src = self.names[(t, other)]
        perm = TO_NCHW if layout == "nchw" else TO_NHWC
        shape = self.shape(t)
        src_shape = shape if other == "nhwc" else tuple(shape[p] for p in TO_NCHW)
        name = self._claim(f"{self.tname(t)}/{layout}")
        self._permute(src, src_shape, perm, name)
        self.names[(t, layout)] = name
        return name

    def _permute(self, src: str, src_shape: tuple[int, ...], perm: tuple[int, ...],
                 out: str) -> None:
        moved = [p for p in perm if src_shape[p] != 1]
        if moved == sorted(moved):  # only size-1 dims move: the same bytes, a view
            shape = self.init(np.array([src_shape[p] for p in perm], np.int64), "shape")
            self.nodes.append(helper.make_node("Reshape", [src, shape], [out], name=out))
        else:
            self.nodes.append(helper.make_node("Transpose", [src], [out], name=out,
                                               perm=list(perm)))

    def define(self, t: int, name: str, layout: str = "nhwc") -> None:
        if self.rank(t) != 4 and layout != "flat":
            layout = "nhwc"
        self.names = {k: v for k, v in self.names.items() if k[0] != t}
        self.names[(t, layout)] = name

    def out_name(self, t: int) -> str:
        """A fresh ONNX name for the value of output tensor ``t``."""
        return self._claim(self.tname(t))

    # ------------------------------------------------------------------ quantisation
    def qparams(self, t: int) -> list[str]:
        """Scale and zero-point initializers of ``t``."""
        scale, zp, _ = self.quant(t)  # type: ignore[misc]
        dt = self.dtype(t)
        if len(scale) == 1:
            return [self.init(np.float32(scale[0]), "scale"),
                    self.init(np.array(zp[0], dt), "zero_point")]
        return [self.init(scale, "scale"), self.init(zp.astype(dt), "zero_point")]

    def qaxis(self, t: int, perm: tuple[int, ...] | None = None) -> dict[str, int]:
        q = self.quant(t)
        if q is None or len(q[0]) == 1:
            return {}
        axis = q[2]
        return {"axis": perm.index(axis) if perm else axis}

    def fin(self, t: int, layout: str = "nhwc", arr: np.ndarray | None = None,
            perm: tuple[int, ...] | None = None) -> str:
        """Tensor ``t`` as float: DequantizeLinear of a quantised tensor. ``arr``/``perm``:
        a constant re-laid out at compile time (its quantisation axis moves with it)."""
        src = self.init(arr, "weights") if arr is not None else self.get(t, layout)
        return self.dq(src, t, perm)

    def dq(self, src: str, t: int, perm: tuple[int, ...] | None = None) -> str:
        """``src`` (holding tensor ``t``'s data) as float."""
        q = self.quant(t)
        if q is None and self.dtype(t) == np.float16 and self.const(t) is not None:
            return src  # float16 weights (behind DEQUANTIZE): folded to float32 by const()
        if q is None:
            if self.dtype(t) != np.float32:
                raise AotcError(f"tensor {self.tname(t)!r} is {self.dtype(t).name} without "
                                f"quantisation parameters where a float is expected")
            return src
        dt = self.dtype(t)
        if dt in (np.int32, np.int64):  # a bias: zero point 0, scale = input x weight scales
            scale = q[0]
            params = [self.init(scale if len(scale) > 1 else np.float32(scale[0]), "scale"),
                      self.init(np.zeros(len(scale), dt) if len(scale) > 1
                                else np.array(0, dt), "zero_point")]
        else:
            params = self.qparams(t)
        domain: dict[str, Any] = self.qdomain(t)
        if self.int4(t):  # aotc.passes.qdq marks the integer kernel: its weights stay packed
            if t not in self.int4_filters:
                raise AotcError(f"tensor {self.tname(t)!r} is int4: TFLM reads int4 only as "
                                f"the filter of CONV_2D, DEPTHWISE_CONV_2D and "
                                f"FULLY_CONNECTED with int8 activations")
            domain = {"domain": "aotc", "int4": 1}
        return self.add("DequantizeLinear", [src, *params], "dequant", **self.qaxis(t, perm),
                        **domain)[0]

    def allow_int4(self, x: int, w: int) -> None:
        """``w`` may be int4: the filter of CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED
        when the activation ``x`` is int8 (TFLM has no other int4 kernel)."""
        if self.int4(w) and self.dtype(x) == np.int8 and self.quant(x) is not None \
                and not self.uint8(x):
            self.int4_filters.add(w)

    def fout(self, t: int, y: str, layout: str = "nhwc", fused: int = 0) -> None:
        """Float ``y`` becomes tensor ``t``: fused activation, QuantizeLinear if quantised."""
        y = self.activation(y, fused)
        if self.quant(t) is not None:
            if len(self.quant(t)[0]) != 1:  # type: ignore[index]
                raise AotcError(f"tensor {self.tname(t)!r}: per-channel quantisation of an "
                                f"activation is not supported")
            y = self.add("QuantizeLinear", [y, *self.qparams(t)], "quant",
                         outputs=[self.out_name(t)],
                         **({} if self.dtype(t) in (np.int8, np.uint8) else {"domain": "aotc"}))[0]
        elif self.dtype(t) != np.float32:
            raise AotcError(f"output {self.tname(t)!r} is {self.dtype(t).name} without "
                            f"quantisation parameters")
        self.define(t, y, layout)

    def activation(self, y: str, fused: int) -> str:
        if fused == 0:
            return y
        if fused == 1:
            return self.add("Relu", [y], "relu")[0]
        if fused in (2, 3):
            lo, hi = (-1.0, 1.0) if fused == 2 else (0.0, 6.0)
            return self.add("Clip", [y, self.init(np.float32(lo), "min"),
                                     self.init(np.float32(hi), "max")], "clip")[0]
        if fused == 4:
            return self.add("Tanh", [y], "tanh")[0]
        raise AotcError(f"fused activation {fused} (SIGN_BIT) is not supported")

    def _shift(self, src: str, frm: type, to: type, out: str | None = None) -> str:
        """uint8 <-> int8 of the same real values, x -+ 128: one kernel, aotc's QLut (a
        256-byte table; no wider temporary in the arena)."""
        first = np.arange(256) + int(np.iinfo(frm).min)
        table = (first + (-128 if frm == np.uint8 else 128)).astype(to)
        return self.add("QLut", [src], "shift", outputs=[self._claim(out)] if out else None,
                        domain="aotc", table=numpy_helper.from_array(table))[0]

    def as_uint8(self, t: int, y: int, layout: str, onnx_op: str, **attrs: Any) -> None:
        """``onnx_op`` between DequantizeLinear and QuantizeLinear computed on uint8, for an
        op whose rounding is not the same on value - 128 (TFLite's uint8 AVERAGE_POOL_2D
        rounds the non-negative sum's half up; on int8 a negative sum's half rounds down)."""
        def params(v: int) -> list[str]:
            scale, zp, _ = self.quant(v)  # type: ignore[misc]
            return [self.init(np.float32(scale[0]), "scale"),
                    self.init(np.array(zp[0] + 128, np.uint8), "zero_point")]

        u = self._shift(self.get(t, layout), np.int8, np.uint8)
        f = self.add("DequantizeLinear", [u, *params(t)], "dequant")[0]
        out = self.add(onnx_op, [f], onnx_op.lower(), **attrs)[0]
        q = self.add("QuantizeLinear", [out, *params(y)], "quant")[0]
        self.define(y, self._shift(q, np.uint8, np.int8), layout)

    # ------------------------------------------------------------------ the model
    def _rename(self, old: str, new: str) -> None:
        for n in self.nodes:
            for seq in (n.input, n.output):
                for k, v in enumerate(seq):
                    if v == old:
                        seq[k] = new
            if n.name == old:
                n.name = new

    def finish(self) -> onnx.ModelProto:
        outs: list[str] = []
        in_names = set(self.input_names.values())
        for t in self.outputs:
            name = self.get(t, "nhwc")
            want = self.reserved.get(t, name)
            if self.uint8(t):  # back to the uint8 the model declares
                name = self._shift(name, np.int8, np.uint8)
            if name in outs or name in in_names or name in {i.name for i in self.inits}:
                target = [want] if want not in outs and want != name else None
                name = self.add("Identity", [name], "output", outputs=target)[0]
            elif name != want:
                self._rename(name, want)
                name = want
            outs.append(name)

        def vi(name: str, t: int) -> onnx.ValueInfoProto:
            dt = helper.np_dtype_to_tensor_dtype(self.declared(t))
            return helper.make_tensor_value_info(name, dt, list(self.shape(t)))

        inputs = [vi(self.input_names[t], t) for t in self.inputs if self.const(t) is None]
        outputs = [vi(n, t) for n, t in zip(outs, self.outputs)]
        # Resource variables: one more graph input and output each (variables.py).
        from aotc.frontend.tflite.variables import finish_state, metadata

        state = metadata(finish_state(self, inputs, outputs))
        graph = helper.make_graph(self.nodes, Path(self.fname).stem, inputs, outputs,
                                  self.inits)
        domains = sorted({n.domain for n in self.nodes if n.domain})  # aotc's own ops
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), *(
            helper.make_opsetid(d, 1) for d in domains)], producer_name="aotc.frontend.tflite")
        if state is not None:
            helper.set_model_props(m, dict([state]))
        m.ir_version = min(m.ir_version, onnx.IR_VERSION)
        return m


