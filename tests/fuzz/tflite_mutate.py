"""Structure-aware mutations of a .tflite seed: the flatbuffer is unpacked into TensorFlow Lite's
object tree (``ModelT`` of ai_edge_litert's schema_py_generated), edited, and packed again.
Each mutation takes a seeded ``random.Random`` and a ``TfliteCase``, edits it in place and
returns a one-line description (or None when it does not apply to this model); MUTATIONS maps
each to its class tag.

``make_case(seed, index)`` is deterministic: the same (seed, index) gives the same bytes.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as S
from tflite_seeds import SEEDS, seed_bytes

SUFFIX = ".tflite"


@dataclass
class TfliteCase:
    model: Any  # schema_py_generated.ModelT
    files: dict[str, bytes] = field(default_factory=dict)
    byte_ops: list[Callable[[bytes], bytes]] = field(default_factory=list)
    file_name = "model.tflite"

    @classmethod
    def from_bytes(cls, data: bytes) -> TfliteCase:
        return cls(S.ModelT.InitFromPackedBuf(data, 0))

    def serialise(self) -> bytes:
        b = flatbuffers.Builder(1024)
        b.Finish(self.model.Pack(b), file_identifier=b"TFL3")
        data = bytes(b.Output())
        for op in self.byte_ops:
            data = op(data)
        return data


Mutation = Callable[[random.Random, TfliteCase], "str | None"]

INTS = [0, -1, 1, 2, 3, 4, 5, 6, 7, 100, -2**31, 2**31 - 1, 65536]
FLOATS = [0.0, -1.0, float("nan"), float("inf"), float("-inf"), 1e38, 1e-45, 1e-12, 3.5, 1e6,
          0.5, 2.0]
TYPES = [S.TensorType.FLOAT32, S.TensorType.INT8, S.TensorType.INT16, S.TensorType.INT32,
         S.TensorType.UINT8, S.TensorType.INT64, S.TensorType.BOOL, S.TensorType.FLOAT16,
         S.TensorType.INT4, S.TensorType.RESOURCE, 99]
OPTION_CLASSES = sorted(k for k in vars(S.BuiltinOptions) if not k.startswith("_") and
                        k != "NONE" and hasattr(S, k + "T"))


def _pick(rng: random.Random, seq):  # type: ignore[no-untyped-def]
    seq = list(seq)
    return seq[rng.randrange(len(seq))] if seq else None


def _sub(rng: random.Random, c: TfliteCase) -> Any:
    return c.model.subgraphs[0] if rng.random() < 0.85 else _pick(rng, c.model.subgraphs)


def _ops(sg: Any) -> list[Any]:
    return list(sg.operators or [])


def _ints(a: Any) -> list[int]:
    return [] if a is None else [int(v) for v in a]


def _op_label(c: TfliteCase, sg: Any, op: Any) -> str:
    k = _ops(sg).index(op)
    try:
        code = c.model.operatorCodes[op.opcodeIndex]
        name = {v: n for n, v in vars(S.BuiltinOperator).items()
                if not n.startswith("_")}.get(max(code.builtinCode, code.deprecatedBuiltinCode),
                                               "?")
    except (IndexError, TypeError):
        name = "?"
    return f"operator {k} {name}"


def _consts(c: TfliteCase, sg: Any) -> list[int]:
    bufs = c.model.buffers or []
    return [i for i, t in enumerate(sg.tensors or []) if 0 < t.buffer < len(bufs)
            and bufs[t.buffer].data is not None and len(bufs[t.buffer].data)]


def _acts(c: TfliteCase, sg: Any) -> list[int]:
    cs = set(_consts(c, sg))
    return [i for i in range(len(sg.tensors or [])) if i not in cs]


# --- tensor and buffer indices ----------------------------------------------------------------

def tensor_index(rng: random.Random, c: TfliteCase) -> str | None:
    sg = _sub(rng, c)
    op = _pick(rng, _ops(sg))
    if op is None:
        return None
    side = "inputs" if (rng.random() < 0.6 or not _ints(op.outputs)) else "outputs"
    idx = _ints(getattr(op, side))
    if not idx:
        return None
    k = rng.randrange(len(idx))
    n = len(sg.tensors or [])
    new = _pick(rng, [-1, -2, n, n + 5, 2**31 - 1, rng.randrange(max(n, 1)),
                      rng.randrange(max(n, 1))])
    old, idx[k] = idx[k], new
    setattr(op, side, np.array(idx, np.int32))
    return f"{_op_label(c, sg, op)} {side[:-1]} {k}: tensor {old} -> {new}"


def buffer_index(rng: random.Random, c: TfliteCase) -> str | None:
    sg = _sub(rng, c)
    t = _pick(rng, sg.tensors or [])
    if t is None:
        return None
    nb = len(c.model.buffers or [])
    new = _pick(rng, [0, -1, nb, nb + 3, rng.randrange(max(nb, 1)), rng.randrange(max(nb, 1))])
    old, t.buffer = t.buffer, new
    return f"tensor {_name(t)} buffer {old} -> {new}"


def _name(t: Any) -> str:
    n = t.name
    return (n.decode("utf-8", "replace") if isinstance(n, bytes) else str(n))[:40]


# --- shapes and buffer sizes ------------------------------------------------------------------

def shape(rng: random.Random, c: TfliteCase) -> str | None:
    """A tensor's shape: one dim changed, the rank changed (an intermediate tensor's too), or
    the shape dropped; shape_signature sometimes edited with it."""
    sg = _sub(rng, c)
    ts = sg.tensors or []
    if not ts:
        return None
    k = rng.randrange(len(ts))
    t = ts[k]
    s = _ints(t.shape)
    how = rng.randrange(5)
    if how == 0 and s:
        j = rng.randrange(len(s))
        s[j] = _pick(rng, [0, -1, 1, 2, 3, s[j] + 1, max(s[j] - 1, 0), 2**31 - 1, 65536])
    elif how == 1:
        s = s + [1] if rng.random() < 0.5 else s + [_pick(rng, [2, 3])]
    elif how == 2 and s:
        s = s[:-1] if rng.random() < 0.5 else s[1:]
    elif how == 3 and len(s) > 1:
        j = rng.randrange(len(s) - 1)
        s[j], s[j + 1] = s[j + 1], s[j]
    else:
        s = [] if rng.random() < 0.5 else [int(np.prod(s))] if s else [1]
    old = _ints(t.shape)
    t.shape = np.array(s, np.int32)
    if rng.random() < 0.3:
        t.shapeSignature = np.array(s, np.int32)
    return f"tensor {k} {_name(t)} shape {old} -> {s}"


def buffer_size(rng: random.Random, c: TfliteCase) -> str | None:
    """A constant's data shorter or longer than its shape says."""
    sg = _sub(rng, c)
    t = _pick(rng, [sg.tensors[i] for i in _consts(c, sg)])
    if t is None:
        return None
    buf = c.model.buffers[t.buffer]
    data = np.asarray(buf.data, np.uint8)
    n = len(data)
    new = _pick(rng, [0, 1, n - 1, n // 2, n + 1, n + 4, 2 * n])
    buf.data = (data[:new] if new <= n else np.concatenate(
        [data, np.frombuffer(bytes(rng.randrange(256) for _ in range(new - n)), np.uint8)]))
    return f"tensor {_name(t)} buffer {t.buffer} data {n} -> {new} bytes"


def buffer_data(rng: random.Random, c: TfliteCase) -> str | None:
    """Constant values: extreme floats, or extreme integers (shape tensors, axes, indices)."""
    sg = _sub(rng, c)
    t = _pick(rng, [sg.tensors[i] for i in _consts(c, sg)])
    if t is None:
        return None
    dt = {S.TensorType.FLOAT32: np.float32, S.TensorType.INT32: np.int32,
          S.TensorType.INT8: np.int8, S.TensorType.INT64: np.int64,
          S.TensorType.INT16: np.int16}.get(t.type)
    buf = c.model.buffers[t.buffer]
    raw = bytes(np.asarray(buf.data, np.uint8))
    if dt is None or len(raw) % np.dtype(dt).itemsize:
        return None
    arr = np.frombuffer(raw, dt).copy()
    if not arr.size:
        return None
    j = rng.randrange(arr.size)
    if np.dtype(dt).kind == "f":
        v = _pick(rng, FLOATS)
    else:
        info = np.iinfo(dt)
        v = _pick(rng, [0, -1, 1, 2, 3, 7, info.min, info.max, -5, 100])
    arr[j] = v
    buf.data = np.frombuffer(arr.tobytes(), np.uint8)
    return f"tensor {_name(t)} element {j} = {v}"


# --- quantisation -----------------------------------------------------------------------------

def quant_params(rng: random.Random, c: TfliteCase) -> str | None:
    sg = _sub(rng, c)
    ts = sg.tensors or []
    if not ts:
        return None
    quantised = [t for t in ts if t.quantization is not None and t.quantization.scale is not None
                 and len(t.quantization.scale)]
    how = rng.randrange(6)
    if how == 5 or not quantised:  # add parameters to a tensor, or drop them
        t = _pick(rng, ts)
        if t.quantization is not None and rng.random() < 0.5:
            t.quantization = None
            return f"tensor {_name(t)} quantisation dropped"
        q = S.QuantizationParametersT()
        q.scale = np.array([_pick(rng, [0.5, 0.01, 1.0])], np.float32)
        q.zeroPoint = np.array([_pick(rng, [0, 3, -128])], np.int64)
        t.quantization = q
        return f"tensor {_name(t)} given scale {q.scale[0]} zero point {q.zeroPoint[0]}"
    t = _pick(rng, quantised)
    q = t.quantization
    scale = np.array(q.scale, np.float32)
    zp = np.array(q.zeroPoint if q.zeroPoint is not None else [], np.int64)
    if how == 0:
        j = rng.randrange(len(scale))
        scale[j] = _pick(rng, FLOATS)
        q.scale = scale
        return f"tensor {_name(t)} scale[{j}] = {scale[j]}"
    if how == 1 and len(zp):
        j = rng.randrange(len(zp))
        zp[j] = _pick(rng, [-129, 128, 127, -128, 255, 1000, -2**40, 5])
        q.zeroPoint = zp
        return f"tensor {_name(t)} zero_point[{j}] = {zp[j]}"
    if how == 2:  # lengths that disagree
        if rng.random() < 0.5:
            q.scale = np.concatenate([scale, scale[:1]])
            return f"tensor {_name(t)} scale has {len(scale) + 1} entries"
        q.zeroPoint = zp[:-1] if len(zp) else np.array([0, 0], np.int64)
        return f"tensor {_name(t)} zero_point has {len(q.zeroPoint)} entries"
    if how == 3:  # per-tensor <-> per-channel
        s = _ints(t.shape)
        if len(scale) > 1:
            q.scale, q.zeroPoint = scale[:1], zp[:1]
            return f"tensor {_name(t)} per-channel parameters cut to one"
        n = s[-1] if s else 2
        n = n if rng.random() < 0.7 else n + 1
        q.scale = np.full(n, scale[0], np.float32) * np.linspace(0.5, 1.5, n).astype(np.float32)
        q.zeroPoint = np.full(n, zp[0] if len(zp) else 0, np.int64)
        q.quantizedDimension = max(len(s) - 1, 0)
        return f"tensor {_name(t)} given {n} per-channel scales on dimension {max(len(s) - 1, 0)}"
    old = q.quantizedDimension
    q.quantizedDimension = _pick(rng, [-1, 0, 1, 2, 3, 4, 7, len(_ints(t.shape))])
    return f"tensor {_name(t)} quantized_dimension {old} -> {q.quantizedDimension}"


def quant_dim(rng: random.Random, c: TfliteCase) -> str | None:
    """quantized_dimension of a per-channel tensor (a weight's), to another axis."""
    sg = _sub(rng, c)
    per_channel = [t for t in sg.tensors or [] if t.quantization is not None and
                   t.quantization.scale is not None and len(t.quantization.scale) > 1]
    t = _pick(rng, per_channel)
    if t is None:  # make a weight per-channel along a wrong axis instead
        ws = [sg.tensors[i] for i in _consts(c, sg) if sg.tensors[i].quantization is not None
              and sg.tensors[i].quantization.scale is not None
              and len(sg.tensors[i].quantization.scale) == 1 and len(_ints(sg.tensors[i].shape))]
        t = _pick(rng, ws)
        if t is None:
            return None
        q, s = t.quantization, _ints(t.shape)
        ax = rng.randrange(len(s))
        q.scale = np.full(s[ax], q.scale[0], np.float32)
        q.zeroPoint = np.full(s[ax], q.zeroPoint[0] if q.zeroPoint is not None and
                              len(q.zeroPoint) else 0, np.int64)
        q.quantizedDimension = ax
        return f"tensor {_name(t)} per-tensor -> per-channel on dimension {ax} ({s[ax]} scales)"
    q = t.quantization
    old = q.quantizedDimension
    q.quantizedDimension = _pick(rng, [v for v in [-1, 0, 1, 2, 3, 4] if v != old])
    return f"tensor {_name(t)} quantized_dimension {old} -> {q.quantizedDimension} " \
           f"({len(q.scale)} scales, shape {_ints(t.shape)})"


def dtype(rng: random.Random, c: TfliteCase) -> str | None:
    sg = _sub(rng, c)
    t = _pick(rng, sg.tensors or [])
    if t is None:
        return None
    old, t.type = t.type, _pick(rng, [x for x in TYPES if x != t.type])
    return f"tensor {_name(t)} type {old} -> {t.type}"


# --- operator codes ---------------------------------------------------------------------------

def opcode_version(rng: random.Random, c: TfliteCase) -> str | None:
    oc = _pick(rng, c.model.operatorCodes or [])
    if oc is None:
        return None
    old, oc.version = oc.version, _pick(rng, [0, -1, 2, 3, 4, 7, 99, 2**31 - 1])
    return f"opcode {max(oc.builtinCode, oc.deprecatedBuiltinCode)} version {old} -> {oc.version}"


def opcode_code(rng: random.Random, c: TfliteCase) -> str | None:
    """builtin_code and deprecated_builtin_code that disagree, a new code (> 127) with the
    placeholder 127, an unknown code, another builtin, a custom code."""
    codes = c.model.operatorCodes or []
    oc = _pick(rng, codes)
    if oc is None:
        return None
    known = sorted(v for k, v in vars(S.BuiltinOperator).items() if not k.startswith("_"))
    old = (oc.deprecatedBuiltinCode, oc.builtinCode)
    how = rng.randrange(5)
    if how == 0:
        oc.deprecatedBuiltinCode = _pick(rng, [v for v in known if v < 127])
    elif how == 1:
        oc.builtinCode = _pick(rng, known)
    elif how == 2:
        oc.deprecatedBuiltinCode, oc.builtinCode = 127, _pick(rng, [v for v in known if v > 127])
    elif how == 3:
        oc.builtinCode = oc.deprecatedBuiltinCode = _pick(rng, [v for v in known if v < 127])
    else:
        oc.builtinCode = _pick(rng, [max(known) + 1, 500, -1, 32])
        if oc.builtinCode == 32:
            oc.customCode = _pick(rng, ["", "Foo", "TFLite_Detection_PostProcess"])
    return f"opcode (deprecated, builtin) {old} -> {(oc.deprecatedBuiltinCode, oc.builtinCode)}"


def opcode_index(rng: random.Random, c: TfliteCase) -> str | None:
    sg = _sub(rng, c)
    op = _pick(rng, _ops(sg))
    if op is None:
        return None
    n = len(c.model.operatorCodes or [])
    old, op.opcodeIndex = op.opcodeIndex, _pick(rng, [rng.randrange(max(n, 1)), n, 2**31 - 1])
    return f"operator {_ops(sg).index(op)} opcode index {old} -> {op.opcodeIndex}"


# --- operator inputs and outputs --------------------------------------------------------------

def op_io(rng: random.Random, c: TfliteCase) -> str | None:
    sg = _sub(rng, c)
    op = _pick(rng, _ops(sg))
    if op is None:
        return None
    ins, outs = _ints(op.inputs), _ints(op.outputs)
    n = len(sg.tensors or [])
    how = rng.randrange(6)
    label = _op_label(c, sg, op)
    if how == 0 and ins:
        k = rng.randrange(len(ins))
        del ins[k]
        what = f"input {k} removed"
    elif how == 1:
        ins.append(_pick(rng, [-1, rng.randrange(max(n, 1))]))
        what = f"input {ins[-1]} appended"
    elif how == 2 and ins:
        k = rng.randrange(len(ins))
        ins[k] = -1
        what = f"input {k} made optional (-1)"
    elif how == 3 and outs:
        if rng.random() < 0.5:
            outs = outs[:-1]
            what = "last output removed"
        else:
            outs.append(rng.randrange(max(n, 1)))
            what = f"output {outs[-1]} appended"
    elif how == 4 and len(ins) > 1:
        a, b = rng.sample(range(len(ins)), 2)
        ins[a], ins[b] = ins[b], ins[a]
        what = f"inputs {a} and {b} swapped"
    else:  # an output that is also written by another operator or is a constant
        if not outs:
            return None
        k = rng.randrange(len(outs))
        outs[k] = _pick(rng, _consts(c, sg) or [0])
        what = f"output {k} -> tensor {outs[k]}"
    op.inputs, op.outputs = np.array(ins, np.int32), np.array(outs, np.int32)
    return f"{label} {what}"


def op_order(rng: random.Random, c: TfliteCase) -> str | None:
    sg = _sub(rng, c)
    ops = _ops(sg)
    if len(ops) < 2:
        return None
    a, b = rng.sample(range(len(ops)), 2)
    ops[a], ops[b] = ops[b], ops[a]
    sg.operators = ops
    return f"operators {a} and {b} swapped"


# --- builtin options --------------------------------------------------------------------------

def options_type(rng: random.Random, c: TfliteCase) -> str | None:
    """The options union's tag or table of another type, or dropped, or given to an operator
    that has none."""
    sg = _sub(rng, c)
    op = _pick(rng, _ops(sg))
    if op is None:
        return None
    label = _op_label(c, sg, op)
    how = rng.randrange(4)
    if how == 0 and op.builtinOptions is not None:
        op.builtinOptionsType, op.builtinOptions = 0, None
        return f"{label} options dropped"
    cls = _pick(rng, OPTION_CLASSES)
    tag = getattr(S.BuiltinOptions, cls)
    if how == 1 and op.builtinOptions is not None:  # the tag of another type, the same table
        old, op.builtinOptionsType = op.builtinOptionsType, tag
        return f"{label} options tag {old} -> {tag} ({cls}), table unchanged"
    obj = getattr(S, cls + "T")()
    for k, v in vars(obj).items():  # nonzero fields, so the table is not empty
        if isinstance(v, bool):
            setattr(obj, k, True)
        elif isinstance(v, int):
            setattr(obj, k, _pick(rng, [1, 2, 3, 4]))
        elif isinstance(v, float):
            setattr(obj, k, 0.5)
    op.builtinOptionsType, op.builtinOptions = tag, obj
    return f"{label} options -> {cls}"


def options_value(rng: random.Random, c: TfliteCase) -> str | None:
    """A field of an operator's builtin options: fused activation (TANH, SIGN_BIT, unknown),
    padding (unknown), strides, filter sizes, dilations, axes, beta, flags."""
    sg = _sub(rng, c)
    ops = [o for o in _ops(sg) if o.builtinOptions is not None and vars(o.builtinOptions)]
    op = _pick(rng, ops)
    if op is None:
        return None
    o = op.builtinOptions
    names = [k for k, v in vars(o).items() if isinstance(v, (int, float, bool)) or v is None]
    if not names:
        return None
    k = _pick(rng, names)
    old = getattr(o, k)
    if k == "fusedActivationFunction":
        v: Any = _pick(rng, [1, 2, 3, 4, 4, 5, 6, 7])
    elif k == "padding":
        v = _pick(rng, [0, 1, 2, 3, -1])
    elif isinstance(old, bool):
        v = not old
    elif isinstance(old, float):
        v = _pick(rng, FLOATS)
    else:
        v = _pick(rng, INTS)
    setattr(o, k, v)
    return f"{_op_label(c, sg, op)} {type(o).__name__[:-1]}.{k} {old} -> {v}"


# --- subgraphs and variables ------------------------------------------------------------------

def subgraph_io(rng: random.Random, c: TfliteCase) -> str | None:
    sg = _sub(rng, c)
    ins, outs = _ints(sg.inputs), _ints(sg.outputs)
    n = len(sg.tensors or [])
    how = rng.randrange(6)
    if how == 0 and outs:
        outs.append(_pick(rng, _acts(c, sg) or [0]))
        what = f"output {outs[-1]} appended"
    elif how == 1 and len(outs) > 0:
        del outs[rng.randrange(len(outs))]
        what = "an output removed"
    elif how == 2:
        ins.append(_pick(rng, [*(_consts(c, sg) or [0]), *(_acts(c, sg) or [0])]))
        what = f"input {ins[-1]} appended"
    elif how == 3 and ins:
        del ins[rng.randrange(len(ins))]
        what = "an input removed"
    elif how == 4:
        k = rng.randrange(2)
        seq = ins if k == 0 else outs
        if not seq:
            return None
        seq[rng.randrange(len(seq))] = _pick(rng, [-1, n, n + 9])
        what = f"{'input' if k == 0 else 'output'} index out of range"
    else:
        if not outs:
            return None
        outs.append(outs[0])
        what = "an output listed twice"
    sg.inputs, sg.outputs = np.array(ins, np.int32), np.array(outs, np.int32)
    return f"subgraph {c.model.subgraphs.index(sg)} {what}"


def subgraphs(rng: random.Random, c: TfliteCase) -> str | None:
    sgs = c.model.subgraphs or []
    how = rng.randrange(4)
    if how == 0:
        c.model.subgraphs = sgs + [copy.deepcopy(sgs[0])]
        return "subgraph 0 copied to the end"
    if how == 1 and len(sgs) > 1:
        c.model.subgraphs = sgs[:1]
        return "subgraphs after the first removed"
    if how == 2 and len(sgs) > 1:
        c.model.subgraphs = [sgs[1], sgs[0], *sgs[2:]]
        return "subgraphs 0 and 1 swapped"
    if how == 3:
        c.model.subgraphs = []
        return "no subgraph"
    empty = S.SubGraphT()
    empty.tensors, empty.operators = [], []
    c.model.subgraphs = [*sgs, empty]
    return "an empty subgraph appended"


def variables(rng: random.Random, c: TfliteCase) -> str | None:
    """Variable tensors and resource variables: is_variable toggled, CALL_ONCE's init
    subgraph index, VAR_HANDLE's shared name, a resource tensor's type."""
    sg = c.model.subgraphs[0]
    found = []
    for op in _ops(sg):
        o = op.builtinOptions
        if isinstance(o, S.CallOnceOptionsT):
            found.append(("call_once", op))
        if isinstance(o, S.VarHandleOptionsT):
            found.append(("var_handle", op))
    how = rng.randrange(3)
    if how == 0 and found:
        kind, op = _pick(rng, found)
        if kind == "call_once":
            old = op.builtinOptions.initSubgraphIndex
            op.builtinOptions.initSubgraphIndex = _pick(rng, [0, 2, -1, 5])
            return f"CALL_ONCE init subgraph {old} -> {op.builtinOptions.initSubgraphIndex}"
        old = op.builtinOptions.sharedName
        op.builtinOptions.sharedName = _pick(rng, ["", "other", "acc"])
        return f"VAR_HANDLE shared name {old!r} -> {op.builtinOptions.sharedName!r}"
    ts = sg.tensors or []
    if how == 1:
        res = [t for t in ts if t.type == S.TensorType.RESOURCE]
        t = _pick(rng, res)
        if t is not None:
            t.type = _pick(rng, [S.TensorType.INT32, S.TensorType.FLOAT32])
            return f"resource tensor {_name(t)} type -> {t.type}"
    t = _pick(rng, ts)
    if t is None:
        return None
    t.isVariable = not t.isVariable
    return f"tensor {_name(t)} is_variable -> {t.isVariable}"


# --- bytes ------------------------------------------------------------------------------------

def fb_truncate(rng: random.Random, c: TfliteCase) -> str | None:
    frac = rng.random()
    c.byte_ops.append(lambda b: b[: int(len(b) * frac)])
    return f"flatbuffer truncated to {frac:.3f} of its length"


def fb_bitflip(rng: random.Random, c: TfliteCase) -> str | None:
    flips = [(rng.random(), rng.randrange(8)) for _ in range(rng.randrange(1, 6))]

    def flip(b: bytes) -> bytes:
        out = bytearray(b)
        for pos, bit in flips:
            out[8 + int(pos * (len(out) - 9))] ^= 1 << bit  # the identifier stays
        return bytes(out)

    c.byte_ops.append(flip)
    return f"{len(flips)} bit flips in the flatbuffer"


MUTATIONS: dict[str, Mutation] = {f.__name__: f for f in (
    tensor_index, buffer_index, shape, buffer_size, buffer_data, quant_params, quant_dim, dtype,
    opcode_version, opcode_code, opcode_index, op_io, op_order, options_type, options_value,
    subgraph_io, subgraphs, variables, fb_truncate, fb_bitflip)}
# Weights of the classes (the byte-level ones rarely reach past the flatbuffer reader).
WEIGHTS = {"fb_truncate": 0.3, "fb_bitflip": 0.5, "options_value": 2.0, "options_type": 1.5,
           "quant_params": 1.5, "shape": 1.5}


def make_case(seed: int, index: int) -> tuple[str, str, list[str], TfliteCase]:
    """(class tag, seed model name, mutation descriptions, case) for case ``index`` of the
    .tflite run with ``seed``. Most cases get one mutation; one in five two or three."""
    rng = random.Random(f"aotc-fuzz-tflite:{seed}:{index}")
    seed_name = _pick(rng, SEEDS)
    case = TfliteCase.from_bytes(seed_bytes(seed_name))
    count = 1 if rng.random() < 0.8 else rng.choice([2, 3])
    tags = sorted(MUTATIONS)
    weights = [WEIGHTS.get(t, 1.0) for t in tags]
    done: list[tuple[str, str]] = []
    attempts = 0
    while len(done) < count and attempts < 50:
        attempts += 1
        tag = rng.choices(tags, weights)[0]
        if tag.startswith("fb_") and done:
            continue  # bytes last, alone
        try:
            desc = MUTATIONS[tag](rng, case)
        except Exception:  # noqa: BLE001 - e.g. a tensor an earlier mutation spoilt
            desc = None
        if desc is not None:
            done.append((tag, desc))
        if tag.startswith("fb_") and desc is not None:
            break
    try:
        case.serialise()
    except Exception as e:  # noqa: BLE001 - the object tree no longer packs: bytes instead
        done = [("fb_bitflip", f"(packing failed: {type(e).__name__}) ")]
        case = TfliteCase.from_bytes(seed_bytes(seed_name))
        done[0] = ("fb_bitflip", done[0][1] + (fb_bitflip(rng, case) or ""))
    tag = done[0][0] if len(done) == 1 else "multi"
    return tag, seed_name, [f"{t}: {d}" for t, d in done], case
