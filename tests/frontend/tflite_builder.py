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
          np.dtype(np.int32): S.TensorType.INT32, np.dtype(np.int64): S.TensorType.INT64,
          np.dtype(np.bool_): S.TensorType.BOOL, np.dtype(np.int16): S.TensorType.INT16,
          np.dtype(np.uint32): S.TensorType.UINT32, np.dtype(np.uint64): S.TensorType.UINT64,
          np.dtype(np.uint8): S.TensorType.UINT8}
# Output parameters TFLite requires for int8 outputs of these ops.
FIXED_OUT = {"LOGISTIC": (1 / 256, -128), "SOFTMAX": (1 / 256, -128), "TANH": (1 / 128, 0),
             "LOG_SOFTMAX": (16 / 256, 127)}
# Ops whose int8 output has the input's parameters.
# (the int8 AVERAGE_POOL_2D, CONCATENATION and, in TFLM, RELU6 kernels assume it.)
SAME_OUT = {"RESHAPE", "SQUEEZE", "MAX_POOL_2D", "PAD", "TRANSPOSE", "STRIDED_SLICE", "SPLIT",
            "AVERAGE_POOL_2D", "CONCATENATION", "RELU6", "MAXIMUM", "MINIMUM", "REDUCE_MAX",
            "REDUCE_MIN", "SELECT_V2", "PACK", "UNPACK", "EXPAND_DIMS", "TILE", "SLICE",
            "SPLIT_V", "PADV2", "MIRROR_PAD", "REVERSE_V2", "GATHER", "GATHER_ND",
            "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND",
            "RESIZE_NEAREST_NEIGHBOR", "BROADCAST_TO", "EMBEDDING_LOOKUP", "FILL",
            "RESIZE_BILINEAR"}
# Where the int8 output's parameters come from, for SAME_OUT ops: which input.
SAME_FROM = {"SPLIT": 1, "SELECT_V2": 1, "EMBEDDING_LOOKUP": 1, "FILL": 1}


# Opcode versions LiteRT needs for the operators these tests write (1 for the others).
VERSIONS = {S.BuiltinOperator.BROADCAST_TO: 2}


class Net:
    # Output parameters the int8 kernels require (Net16: the int16 ones).
    fixed_out: dict[str, tuple[float, int]] = FIXED_OUT

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
        self.outputs: list[int] = []  # a further subgraph's (subgraph())
        self.subgraphs: list[Net] = []  # the model's further subgraphs, in index order
        self.root = self

    def subgraph(self) -> Net:
        """A further subgraph of the model (an IF branch, a WHILE condition or body): its own
        tensors, operators and inputs (``input``), outputs set as ``.outputs``; the buffers
        and operator codes are the model's. Its index in the model is ``.index``."""
        s = Net(self.quant, self.ranges)
        s.rng, s.buffers, s.codes, s.root = self.rng, self.buffers, self.codes, self.root
        self.root.subgraphs.append(s)
        s.index = len(self.root.subgraphs)
        return s

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

    def input(self, shape: Sequence[int], dtype: Any = None) -> int:
        name = f"input{len(self.inputs)}"
        if dtype is not None:  # an int32/int64/bool input: the same in both models
            t = self._tensor(shape, dtype, name)
        elif self.quant:
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

    def const_like(self, arr: np.ndarray, like: int) -> int:
        """A constant with tensor ``like``'s type and quantisation parameters."""
        name = f"c{len(self.tensors)}"
        if not self.quant:
            return self._tensor(arr.shape, np.float32, name, arr.astype(np.float32))
        q = self.tensors[like].quantization
        s, z = float(q.scale[0]), int(q.zeroPoint[0])
        data = np.clip(np.round(arr / s) + z, -128, 127).astype(np.int8)
        return self._tensor(arr.shape, np.int8, name, data, s, z)

    def sparse(self, arr: np.ndarray, block: int = 0) -> int:
        """A 2-D constant stored sparse (TFLite's sparsity: rows DENSE, columns SPARSE_CSR, with
        ``block`` columns per stored block when given), in the model's type (int8 with x's
        kind of per-tensor parameters)."""
        rows, cols = arr.shape
        name = f"s{len(self.tensors)}"
        scale = zp = None
        data = arr.astype(np.float32)
        dt: Any = np.float32
        if self.quant:
            self.ranges[name] = (float(arr.min()), float(arr.max()))
            scale, zp = self.qparams(name)
            data = np.clip(np.round(arr / scale) + zp, -128, 127).astype(np.int8)
            dt = np.int8
        zero = 0 if not self.quant else zp
        bs = block or 1
        nb = cols // bs
        segs, idx, vals = [0], [], []
        for r in range(rows):
            for k in range(nb):
                blk = data[r, k * bs:(k + 1) * bs]
                if (blk != zero).any():
                    idx.append(k)
                    vals.extend(blk.tolist())
            segs.append(len(idx))
        t = self._tensor(arr.shape, dt, name, np.array(vals, dt), scale, zp)
        sp = S.SparsityParametersT()
        dims = []
        for fmt, size in ((0, rows), (1, nb)) + (((0, bs),) if block else ()):
            md = S.DimensionMetadataT()
            md.format = fmt
            md.denseSize = size
            if fmt == 1:
                seg, ind = S.Int32VectorT(), S.Int32VectorT()
                seg.values, ind.values = list(segs), list(idx)
                md.arraySegmentsType = md.arrayIndicesType = S.SparseIndexVector.Int32Vector
                md.arraySegments, md.arrayIndices = seg, ind
            dims.append(md)
        sp.traversalOrder = list(range(len(dims)))
        sp.blockMap = [1] if block else []
        sp.dimMetadata = dims
        self.tensors[t].sparsity = sp
        return t

    def ints(self, values: Any, dtype: Any = np.int32) -> int:
        arr = np.array(values, dtype)
        return self._tensor(arr.shape, dtype, f"i{len(self.tensors)}", arr)

    # ------------------------------------------------------------------ operators
    def op(self, code: str, inputs: Sequence[int], out_shape: Sequence[int] | Sequence[
            Sequence[int]], options: Any = None, n_out: int = 1, dtype: Any = None) -> Any:
        c = getattr(S.BuiltinOperator, code)
        if c not in self.codes:
            self.codes.append(c)
        if n_out > 1 and len(out_shape) and not np.isscalar(out_shape[0]):
            shapes = list(out_shape)  # one shape per output
        else:
            shapes = [out_shape] * n_out if n_out > 1 else [out_shape]
        outs = []
        for k, shape in enumerate(shapes):
            name = f"{code.lower()}_{len(self.ops)}_{k}"
            if dtype is not None:  # a typed output (bool, int32, ...): no quantisation
                outs.append(self._tensor(shape, dtype, name))
                continue
            if not self.quant:
                outs.append(self._tensor(shape, np.float32, name))
                continue
            if code in SAME_OUT:
                src = self.tensors[inputs[SAME_FROM.get(code, 0)]].quantization
                s, z = float(src.scale[0]), int(src.zeroPoint[0])
            else:
                s, z = self.fixed_out.get(code) or self.qparams(name)
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

    def custom(self, name: str, inputs: Sequence[int], out_shape: Sequence[int]) -> int:
        """A custom operator ``name`` (float or int8 output like ``op``)."""
        if name not in self.codes:
            self.codes.append(name)  # type: ignore[arg-type]
        dt = np.int8 if self.quant else np.float32
        q = self.qparams(name) if self.quant else (None, None)
        y = self._tensor(out_shape, dt, f"custom_{len(self.ops)}", None, *q)
        o = S.OperatorT()
        o.opcodeIndex = self.codes.index(name)  # type: ignore[arg-type]
        o.inputs = np.array(inputs, np.int32)
        o.outputs = np.array([y], np.int32)
        self.ops.append(o)
        return y

    def custom_typed(self, name: str, inputs: Sequence[int],
                     outs: Sequence[tuple[Sequence[int], Any]], opts: dict[str, Any]) -> list[int]:
        """A custom operator ``name`` with typed outputs (shape, dtype) and its parameters as
        a flexbuffer map (TFLM's Signal operators read theirs so)."""
        from flatbuffers import flexbuffers

        if name not in self.codes:
            self.codes.append(name)  # type: ignore[arg-type]
        ys = [self._tensor(shape, dt, f"{name}_{len(self.ops)}_{k}")
              for k, (shape, dt) in enumerate(outs)]
        o = S.OperatorT()
        o.opcodeIndex = self.codes.index(name)  # type: ignore[arg-type]
        o.inputs = np.array(inputs, np.int32)
        o.outputs = np.array(ys, np.int32)
        o.customOptions = np.frombuffer(flexbuffers.Dumps(opts), np.uint8)
        o.customOptionsFormat = S.CustomOptionsFormat.FLEXBUFFERS
        self.ops.append(o)
        return ys

    def op_into(self, code: str, inputs: Sequence[int], outputs: Sequence[int],
                options: Any = None) -> None:
        """An operator writing tensors the test made itself."""
        c = getattr(S.BuiltinOperator, code)
        if c not in self.codes:
            self.codes.append(c)
        o = S.OperatorT()
        o.opcodeIndex = self.codes.index(c)
        o.inputs = np.array(inputs, np.int32)
        o.outputs = np.array(outputs, np.int32)
        if options is not None:
            o.builtinOptionsType = getattr(S.BuiltinOptions, type(options).__name__[:-1])
            o.builtinOptions = options
        self.ops.append(o)

    def like(self, t: int, name: str) -> int:
        """A new tensor with tensor ``t``'s shape, type and quantisation parameters."""
        src = self.tensors[t]
        q = src.quantization
        return self._tensor(src.shape, {v: k for k, v in _TYPES.items()}[src.type], name, None,
                            None if q is None or q.scale is None else q.scale,
                            None if q is None or q.scale is None else q.zeroPoint)

    def _subgraph(self, outputs: Sequence[int]) -> Any:
        sg = S.SubGraphT()
        sg.tensors, sg.operators = self.tensors, self.ops
        sg.inputs = np.array(self.inputs, np.int32)
        sg.outputs = np.array(outputs, np.int32)
        return sg

    def build(self, outputs: Sequence[int]) -> bytes:
        m = S.ModelT()
        m.version = 3
        m.subgraphs = [self._subgraph(outputs)] + [s._subgraph(s.outputs)
                                                   for s in self.subgraphs]
        m.buffers = self.buffers
        m.operatorCodes = []
        for c in self.codes:
            oc = S.OperatorCodeT()
            if isinstance(c, str):  # a custom operator, by name
                oc.builtinCode = oc.deprecatedBuiltinCode = S.BuiltinOperator.CUSTOM
                oc.customCode = c
                oc.version = 1
                m.operatorCodes.append(oc)
                continue
            oc.builtinCode = c
            oc.deprecatedBuiltinCode = min(c, 127)
            oc.version = VERSIONS.get(c, 1)
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
    try:
        it = Interpreter(model_content=model, experimental_preserve_all_tensors=all_tensors,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    except ValueError:  # no reference kernel for an op (CEIL, BROADCAST_TO, ...): the builtin
        it = Interpreter(model_content=model, experimental_preserve_all_tensors=all_tensors,
                         experimental_op_resolver_type=OpResolverType.BUILTIN)
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


def _typed(rng: np.random.Generator, s: tuple[Any, ...]) -> np.ndarray:
    """An input of shape ``s[:-1]`` and type ``s[-1]`` (bool, int32, ...)."""
    shape, dt = s[:-1], np.dtype(s[-1])
    if dt == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    return rng.integers(-5, 6, size=shape).astype(dt)


def float_and_int8(spec: Callable[[Net], Sequence[int]], shapes: Sequence[Sequence[int]],
                   seed: int = 0) -> dict[str, Any]:
    """Both models and their inputs: float inputs ~ N(0, 1); int8 inputs quantised from them."""
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=s).astype(np.float32) if not isinstance(s, tuple) or len(s) == 0
          or not isinstance(s[-1], type) else _typed(rng, s) for s in shapes]
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
        if q is None:
            qxs.append(x)
            continue
        qxs.append(np.clip(np.round(x / q.scale[0]) + q.zeroPoint[0], -128, 127).astype(np.int8))
    return {"float": (fmodel, xs), "int8": (qmodel, qxs)}
