"""Small TFLite models built in the tests with the flatbuffers builder and TensorFlow Lite's
schema (ai_edge_litert.schema_py_generated, object API), run with the LiteRT interpreter.

A test writes its graph once as ``spec(net)``; ``float_and_int8(spec)`` builds it in float32,
runs it (every tensor preserved) to find each activation's range, then builds the int8 model
with those ranges: per-tensor int8 activations, per-channel symmetric int8 weights, int32 bias
with scale input x weight scale, as TFLite's converter writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as S
from ai_edge_litert.interpreter import Interpreter, OpResolverType

_TYPES = {np.dtype(np.float32): S.TensorType.FLOAT32, np.dtype(np.int8): S.TensorType.INT8,
          np.dtype(np.int32): S.TensorType.INT32, np.dtype(np.int64): S.TensorType.INT64}
# Output parameters TFLite requires for int8 outputs of these ops.
FIXED_OUT = {"LOGISTIC": (1 / 256, -128), "SOFTMAX": (1 / 256, -128), "TANH": (1 / 128, 0)}
# Ops whose int8 output has the input's parameters.
# (the int8 AVERAGE_POOL_2D, CONCATENATION and, in TFLM, RELU6 kernels assume it.)
SAME_OUT = {"RESHAPE", "SQUEEZE", "MAX_POOL_2D", "PAD", "TRANSPOSE", "STRIDED_SLICE", "SPLIT",
            "AVERAGE_POOL_2D", "CONCATENATION", "RELU6", "REDUCE_MAX", "REDUCE_MIN"}


class Net:
    def __init__(self, quant: bool, ranges: dict[str, tuple[float, float]] | None = None,
                 seed: int = 0) -> None:
        self.quant = quant
        self.ranges = ranges or {}
        self.rng = np.random.default_rng(seed)
        self.tensors: list[Any] = []
        self.buffers: list[Any] = [S.BufferT()]
        self.ops: list[Any] = []
        self.codes: list[int] = []
        self.inputs: list[int] = []

    # ------------------------------------------------------------------ tensors
    def _tensor(self, shape: Sequence[int], dtype: Any, name: str, data: np.ndarray | None = None,
                scale: Any = None, zp: Any = None, axis: int = 0) -> int:
        t = S.TensorT()
        t.shape = np.array(shape, np.int32)
        t.type = _TYPES[np.dtype(dtype)]
        t.name = name
        t.buffer = 0
        if data is not None:
            b = S.BufferT()
            b.data = np.frombuffer(np.ascontiguousarray(data, dtype).tobytes(), np.uint8)
            self.buffers.append(b)
            t.buffer = len(self.buffers) - 1
        if scale is not None:
            q = S.QuantizationParametersT()
            q.scale = np.atleast_1d(np.asarray(scale, np.float32))
            q.zeroPoint = np.atleast_1d(np.asarray(zp, np.int64))
            q.quantizedDimension = axis
            t.quantization = q
        self.tensors.append(t)
        return len(self.tensors) - 1

    def qparams(self, name: str) -> tuple[float, int]:
        lo, hi = self.ranges.get(name, (-1.0, 1.0))
        lo, hi = min(lo, 0.0), max(hi, 0.0)
        scale = max(hi - lo, 1e-3) / 255
        zp = int(np.clip(round(-128 - lo / scale), -128, 127))
        return scale, zp

    def scale(self, t: int) -> np.ndarray:
        return self.tensors[t].quantization.scale

    def input(self, shape: Sequence[int]) -> int:
        name = f"input{len(self.inputs)}"
        if self.quant:
            t = self._tensor(shape, np.int8, name, None, *self.qparams(name))
        else:
            t = self._tensor(shape, np.float32, name)
        self.inputs.append(t)
        return t

    def weight(self, arr: np.ndarray, axis: int | None = 0) -> int:
        """A float weight, in int8 symmetric per-channel along ``axis`` (None: per tensor)."""
        name = f"w{len(self.tensors)}"
        if not self.quant:
            return self._tensor(arr.shape, np.float32, name, arr.astype(np.float32))
        red = tuple(k for k in range(arr.ndim) if k != axis) if axis is not None else None
        amax = np.maximum(np.abs(arr).max(axis=red), 1e-6)
        scale = (amax / 127).astype(np.float32)
        shape = [1] * arr.ndim
        if axis is not None:
            shape[axis] = -1
        q = np.clip(np.round(arr / scale.reshape(shape)), -127, 127).astype(np.int8)
        zp = np.zeros(np.size(scale), np.int64)
        return self._tensor(arr.shape, np.int8, name, q, scale, zp, axis or 0)

    def bias(self, arr: np.ndarray, x: int, w: int) -> int:
        name = f"b{len(self.tensors)}"
        if not self.quant:
            return self._tensor(arr.shape, np.float32, name, arr.astype(np.float32))
        scale = (self.scale(x)[0] * self.scale(w)).astype(np.float32)
        scale = np.broadcast_to(scale, arr.shape).astype(np.float32) if scale.size == 1 \
            and arr.size > 1 else scale
        q = np.round(arr / scale).astype(np.int32)
        return self._tensor(arr.shape, np.int32, name, q, scale, np.zeros(scale.size, np.int64))

    def const(self, arr: np.ndarray) -> int:
        """A constant operand of an elementwise op (int8 per-tensor when quantised)."""
        name = f"c{len(self.tensors)}"
        if not self.quant:
            return self._tensor(arr.shape, np.float32, name, arr.astype(np.float32))
        self.ranges[name] = (float(arr.min()), float(arr.max()))
        s, z = self.qparams(name)
        q = np.clip(np.round(arr / s) + z, -128, 127).astype(np.int8)
        return self._tensor(arr.shape, np.int8, name, q, s, z)

    def ints(self, values: Any, dtype: Any = np.int32) -> int:
        arr = np.array(values, dtype)
        return self._tensor(arr.shape, dtype, f"i{len(self.tensors)}", arr)

    # ------------------------------------------------------------------ operators
    def op(self, code: str, inputs: Sequence[int], out_shape: Sequence[int] | Sequence[
            Sequence[int]], options: Any = None, n_out: int = 1) -> Any:
        c = getattr(S.BuiltinOperator, code)
        if c not in self.codes:
            self.codes.append(c)
        shapes = [out_shape] * n_out if n_out > 1 else [out_shape]
        outs = []
        for k, shape in enumerate(shapes):
            name = f"{code.lower()}_{len(self.ops)}_{k}"
            if not self.quant:
                outs.append(self._tensor(shape, np.float32, name))
                continue
            if code in SAME_OUT:
                src = self.tensors[inputs[0] if code != "SPLIT" else inputs[1]].quantization
                s, z = float(src.scale[0]), int(src.zeroPoint[0])
            else:
                s, z = FIXED_OUT.get(code) or self.qparams(name)
            outs.append(self._tensor(shape, np.int8, name, None, s, z))
        o = S.OperatorT()
        o.opcodeIndex = self.codes.index(c)
        o.inputs = np.array(inputs, np.int32)
        o.outputs = np.array(outs, np.int32)
        if options is not None:
            o.builtinOptionsType = getattr(S.BuiltinOptions, type(options).__name__[:-1])
            o.builtinOptions = options
        self.ops.append(o)
        return outs if n_out > 1 else outs[0]

    def op_into(self, code: str, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        """An operator writing tensors the test made itself."""
        c = getattr(S.BuiltinOperator, code)
        if c not in self.codes:
            self.codes.append(c)
        o = S.OperatorT()
        o.opcodeIndex = self.codes.index(c)
        o.inputs = np.array(inputs, np.int32)
        o.outputs = np.array(outputs, np.int32)
        self.ops.append(o)

    def build(self, outputs: Sequence[int]) -> bytes:
        sg = S.SubGraphT()
        sg.tensors, sg.operators = self.tensors, self.ops
        sg.inputs = np.array(self.inputs, np.int32)
        sg.outputs = np.array(outputs, np.int32)
        m = S.ModelT()
        m.version = 3
        m.subgraphs = [sg]
        m.buffers = self.buffers
        m.operatorCodes = []
        for c in self.codes:
            oc = S.OperatorCodeT()
            oc.builtinCode = c
            oc.deprecatedBuiltinCode = min(c, 127)
            oc.version = 1
            m.operatorCodes.append(oc)
        b = flatbuffers.Builder(1024)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())


def options(cls: str, **kw: Any) -> Any:
    o = getattr(S, cls + "T")()
    for k, v in kw.items():
        if not hasattr(o, k):
            raise AttributeError(f"{cls} has no field {k}")
        setattr(o, k, v)
    return o


def interpret(model: bytes, inputs: Sequence[np.ndarray], all_tensors: bool = False
              ) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    """Outputs (and, with ``all_tensors``, every tensor by name) from LiteRT's reference
    kernels."""
    it = Interpreter(model_content=model, experimental_preserve_all_tensors=all_tensors,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    outs = [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]
    named = {}
    if all_tensors:
        for d in it.get_tensor_details():
            try:
                named[d["name"]] = it.get_tensor(d["index"]).copy()
            except ValueError:
                pass
    return outs, named


def interpret_tflm(model: bytes, inputs: Sequence[np.ndarray], n_outputs: int = 1
                   ) -> list[np.ndarray]:
    """Outputs from TensorFlow Lite Micro's Python interpreter (the int8 arithmetic aotc's
    ``--requant tflite`` follows)."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(model, arena_size=1 << 20)
    for k, x in enumerate(inputs):
        it.set_input(x, k)
    it.invoke()
    return [it.get_output(k).copy() for k in range(n_outputs)]


def float_and_int8(spec: Callable[[Net], Sequence[int]], shapes: Sequence[Sequence[int]],
                   seed: int = 0) -> dict[str, Any]:
    """Both models and their inputs: float inputs ~ N(0, 1); int8 inputs quantised from them."""
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=s).astype(np.float32) for s in shapes]
    fnet = Net(False, seed=seed)
    fmodel = fnet.build(spec(fnet))
    _, named = interpret(fmodel, xs, all_tensors=True)
    ranges = {k: (float(v.min()), float(v.max())) for k, v in named.items()
              if v.dtype == np.float32 and v.size}
    qnet = Net(True, ranges, seed=seed)
    qmodel = qnet.build(spec(qnet))
    qxs = []
    for t, x in zip(qnet.inputs, xs):
        q = qnet.tensors[t].quantization
        qxs.append(np.clip(np.round(x / q.scale[0]) + q.zeroPoint[0], -128, 127).astype(np.int8))
    return {"float": (fmodel, xs), "int8": (qmodel, qxs)}
