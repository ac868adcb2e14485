"""TFLite import: a ``.tflite`` flatbuffer, read with the ``tflite`` package (the Python code
generated from TensorFlow Lite's published schema), becomes an ONNX-semantics model that
``aotc.frontend.onnx.importer.import_model`` turns into the graph IR with its usual checks and shape
rules.

Layout: TFLite tensors are NHWC. Each 4-D tensor is kept in whichever layout its producer wrote
(NCHW for Conv/pool/ConvTranspose, NHWC for the graph inputs, Reshape, FullyConnected, ...);
a consumer that needs the other layout gets a Transpose, and a Transpose that moves only size-1
dimensions is a Reshape (a view: no kernel, no copy). Layout-free ops (elementwise,
activations, Concatenation, Pad, Mean, Split, StridedSlice, Softmax, Quantize) run in the
layout their input already has, with their axes and constants remapped at compile time.
Weights are re-laid out at compile time (OHWI -> OIHW, depthwise 1HWC -> C1HW, ...).

Quantisation: an int8 tensor is an int8 value; an op on int8 tensors is written as TFLite's
arithmetic in QDQ form (DequantizeLinear on each operand with the tensor's scale and zero point,
the float op, the fused activation, QuantizeLinear with the output's parameters), which
``aotc.passes.qdq`` turns into the same integer kernels as a tf2onnx QDQ model: in ``--requant
tflite`` mode bit-exact with TFLite Micro. Shape-only ops (Reshape, Squeeze, Transpose, Pad,
MaxPool, StridedSlice, Split, Concatenation with equal parameters) run on the integers.

Only the first subgraph is imported. Before anything is converted every operator is checked
(its builtin has a converter, the type of its data operand is one ``TYPES`` lists for it): all
that fail are listed in one error, one line each (operator index, builtin, tensor types, what
is supported). Operators whose inputs are all constants are computed at compile time
(fold.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import onnx

from aotc.errors import AotcError
from aotc.frontend.tflite.builder import Builder
from aotc.frontend.tflite.builtins import CONVERTERS, TYPE_WHY, TYPES
from aotc.frontend.tflite.flatbuffer import check_flatbuffer
from aotc.frontend.tflite.fold import try_fold
from aotc.frontend.tflite.validate import validate
from aotc.frontend.tflite.validate_shapes import check_shapes

# TFLite TensorType codes -> names.
TYPE_NAMES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "string",
              6: "bool", 7: "int16", 8: "complex64", 9: "int8", 10: "float64",
              11: "complex128", 12: "uint64", 13: "resource", 14: "variant", 15: "uint32",
              16: "uint16", 17: "int4", 18: "bfloat16"}
# Where a builtin's type is read: (inputs or outputs, index). Default: input 0.
KIND_FROM = {"QUANTIZE": ("out", 0), "FILL": ("out", 0), "ZEROS_LIKE": ("out", 0),
             "EMBEDDING_LOOKUP": ("in", 1), "SELECT_V2": ("in", 1),
             "SPLIT": ("in", 1), "TRANSPOSE_CONV": ("in", 2), "SHAPE": ("out", 0),
             "READ_VARIABLE": ("out", 0), "ASSIGN_VARIABLE": ("in", 1), "IF": ("out", 0)}
# Why builtins and custom operators that aotc does not convert are not converted.
WHY_NOT = {
    "CUSTOM:ethos-u": "an Ethos-U NPU command stream (Vela output); compile the model as it "
                      "was before Vela",
    "CUSTOM:TFLM_DECODE": "TFLM's compressed-tensor DECODE is not supported",
    "DECODE": "TFLM's compressed-tensor DECODE is not supported",
    "DELEGATE": "a delegate's subgraph cannot be compiled",
}
CONTROL_FLOW = {"CALL"}  # (IF, WHILE: control.py; CALL_ONCE: variables.py)
RESOURCES = {"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"}


def is_tflite(path: str | os.PathLike[str]) -> bool:
    """A .tflite file (by suffix, or by the flatbuffer identifier "TFL3" at byte 4)."""
    p = Path(path)
    if p.suffix.lower() == ".tflite":
        return True
    try:
        with p.open("rb") as f:
            return f.read(8)[4:8] == b"TFL3"
    except OSError:
        return False


def computes_in_integers(data: bytes) -> bool:
    """Whether a .tflite model computes in integers: some activation (a tensor of the main
    subgraph without constant data) is int8, uint8 or int16 and has a quantisation scale,
    whatever the types of the model's inputs and outputs (a float model's QUANTIZE ...
    DEQUANTIZE). Such a model's reference is TFLM, whose arithmetic aotc follows. The file
    must have passed check_flatbuffer (or the accessors may raise)."""
    import tflite

    model = tflite.Model.GetRootAsModel(data, 0)
    if not model.SubgraphsLength():
        return False
    sub = model.Subgraphs(0)
    for i in range(sub.TensorsLength()):
        t = sub.Tensors(i)
        if t.Type() not in (3, 7, 9):  # uint8, int16, int8
            continue
        buf = model.Buffers(t.Buffer()) if t.Buffer() < model.BuffersLength() else None
        if buf is not None and (buf.DataLength() or buf.Size()):
            continue  # a constant
        q = t.Quantization()
        if q is not None and q.ScaleLength():
            return True
    return False


def load_tflite(path: str | os.PathLike[str]) -> onnx.ModelProto:
    p = Path(path)
    if not p.is_file():
        raise AotcError(f"no such file: {p}")
    return convert(p.read_bytes(), p.name)


def convert(data: bytes, fname: str = "model.tflite") -> onnx.ModelProto:
    """The TFLite flatbuffer ``data`` as an ONNX model (opset 17, QDQ for int8 tensors)."""
    import tflite


    if len(data) < 8 or data[4:8] != b"TFL3":
        raise AotcError(f"{fname} is not a TFLite model (no 'TFL3' flatbuffer identifier)")
    bad = check_flatbuffer(data)
    if bad is not None:
        raise AotcError(f"{fname} is not a valid TFLite flatbuffer: {bad}")
    try:
        model = tflite.Model.GetRootAsModel(data, 0)
        n_sub = model.SubgraphsLength()
        sub = model.Subgraphs(0) if n_sub else None
        codes = [_op_name(model.OperatorCodes(i)) for i in range(model.OperatorCodesLength())]
    except Exception as e:  # a corrupt flatbuffer fails anywhere in the generated accessors
        raise AotcError(f"{fname} is not a valid TFLite flatbuffer ({type(e).__name__})") from None
    if sub is None:
        raise AotcError(f"{fname} has no subgraph")
    used = _check_all(model, sub, codes, fname, "")
    try:
        b = Builder(model, sub, data, fname)
    except AotcError:
        raise
    except Exception as e:
        raise AotcError(f"{fname}: malformed subgraph ({type(e).__name__})") from None
    b.subgraph = _Subgraphs(model, data, fname, codes)
    _convert_ops(b, used)
    try:
        m = b.finish()
    except AotcError:
        raise
    except Exception as e:
        raise AotcError(f"{fname}: malformed graph outputs ({type(e).__name__}: {e})") from None
    check_shapes(b, sub, m, used)
    if _uint8_products(b, sub, used):
        helper_props = {p.key: p.value for p in m.metadata_props}
        helper_props[SCALE_PRODUCT_KEY] = "float32"
        onnx.helper.set_model_props(m, helper_props)
    return m


# A uint8 model's CONV_2D and DEPTHWISE_CONV_2D requantise as LiteRT's uint8 kernels do: input
# scale x filter scale multiplied in float32 (its uint8 FULLY_CONNECTED, and TFLM's int8
# kernels, multiply in double; tests/frontend/test_tflite_uint8.py). The metadata tells the qdq
# pass, which marks the QLinearConv kernels.
SCALE_PRODUCT_KEY = "aotc.scale_product"
_PRODUCT_OPS = {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 0}


def _uint8_products(b: Builder, sub: Any, used: list[str]) -> bool:
    for i, name in enumerate(used):
        k = _PRODUCT_OPS.get(name)
        if k is None:
            continue
        op = sub.Operators(i)
        if op.InputsLength() > k and op.Inputs(k) >= 0 and b.uint8(op.Inputs(k)):
            return True
    return False


def _check_all(model: Any, sub: Any, codes: list[str], fname: str, where: str) -> list[str]:
    """The builtin of each operator of ``sub``, after validating the subgraph's structure
    (validate.py) and checking every operator (one error listing every operator that cannot
    be converted)."""
    used = []
    try:
        for i in range(sub.OperatorsLength()):
            idx = sub.Operators(i).OpcodeIndex()
            if idx >= len(codes):
                raise AotcError(f"{fname}{where}: operator {i} has opcode index {idx} beyond "
                                f"the table")
            used.append(codes[idx])
        validate(model, sub, used, KIND_FROM)
    except AotcError:
        raise
    except Exception as e:  # a table the accessors cannot read
        raise AotcError(f"{fname} is not a valid TFLite flatbuffer ({type(e).__name__})") from None
    problems = [line for i in range(sub.OperatorsLength())
                if (line := _check(sub, i, used[i])) is not None]
    if problems:
        raise AotcError(f"{fname}{where}: {len(problems)} operator(s) cannot be converted "
                        f"(see `aotc ops` and docs/frontends.md)", details=problems)
    return used


def _convert_ops(b: Builder, used: list[str]) -> None:
    for i in range(b.sub.OperatorsLength()):
        op = b.sub.Operators(i)
        b.op_index, b.op_name = i, used[i]
        try:
            if not try_fold(b, used[i], op):
                CONVERTERS[used[i]](b, op)
        except AotcError as e:
            if e.node is None:
                raise AotcError(e.reason, _safe(b.node_name, op), used[i]) from None
            raise
        except Exception as e:  # a malformed operator: missing inputs, options, data
            raise AotcError(f"malformed operator ({type(e).__name__}: {e})",
                            _safe(b.node_name, op), used[i]) from None


class _Subgraphs:
    """Builder.subgraph: another subgraph of the model (an IF branch, a WHILE condition or
    body) converted with its inputs bound to ONNX names of the graph around it; its nodes,
    initializers and output names (NHWC). A subgraph that (through others) runs itself, and
    resource variables inside one, are refused."""

    def __init__(self, model: Any, data: bytes, fname: str, codes: list[str]) -> None:
        self.model, self.data, self.fname, self.codes = model, data, fname, codes
        self.active: list[int] = []

    def __call__(self, parent: Builder, index: int, bind: list[str]
                 ) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto], list[str]]:
        if not 0 < index < self.model.SubgraphsLength():
            raise AotcError(f"subgraph {index} is not in the model (it has "
                            f"{self.model.SubgraphsLength()})")
        if index in self.active:
            raise AotcError(f"subgraph {index} runs itself (recursion is not supported)")
        sub = self.model.Subgraphs(index)
        used = _check_all(self.model, sub, self.codes, self.fname, f" subgraph {index}")
        state = sorted({u for u in used if u in RESOURCES or u == "CALL_ONCE"})
        if state:
            raise AotcError(f"subgraph {index} uses {', '.join(state)}: resource variables "
                            f"inside IF and WHILE subgraphs are not supported")
        self.active.append(index)
        try:
            b = Builder(self.model, sub, self.data, self.fname, bind, parent)
            _convert_ops(b, used)
            outs = [b.get(t, "nhwc") for t in b.outputs]
        finally:
            self.active.pop()
        return b.nodes, b.inits, outs


def _safe(fn: Any, *args: Any) -> str:
    try:
        return str(fn(*args))
    except Exception:
        return "?"


def _op_name(code: Any) -> str:
    from tflite.utils import BUILTIN_OPCODE2NAME

    c = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    if c == 32:  # CUSTOM
        custom = code.CustomCode()
        return "CUSTOM:" + (custom.decode("utf-8", "replace") if custom else "?")
    return BUILTIN_OPCODE2NAME.get(c, f"BUILTIN_{c}")




def _types(sub: Any, ts: Any) -> list[str]:
    out = []
    for t in ts:
        t = int(t)
        if t < 0:
            continue
        if not 0 <= t < sub.TensorsLength():
            out.append("?")
            continue
        code = sub.Tensors(t).Type()
        out.append(TYPE_NAMES.get(code, f"type {code}"))
    return out


def kind_of(sub: Any, op: Any, name: str) -> str:
    """The type an operator computes in: its data operand's (``KIND_FROM``)."""
    side, k = KIND_FROM.get(name, ("in", 0))
    ins = _types(sub, op.InputsAsNumpy()) if op.InputsLength() else []
    outs = _types(sub, op.OutputsAsNumpy()) if op.OutputsLength() else []
    seq = outs if side == "out" else ins
    return seq[k] if k < len(seq) else (ins or outs or ["none"])[0]


def _check(sub: Any, i: int, name: str) -> str | None:
    """None when operator ``i`` (builtin ``name``) converts, else its line of the error."""
    op = sub.Operators(i)
    try:
        ins = _types(sub, op.InputsAsNumpy()) if op.InputsLength() else []
        outs = _types(sub, op.OutputsAsNumpy()) if op.OutputsLength() else []
        kind = kind_of(sub, op, name)
    except Exception:  # a malformed operator is reported when it is converted
        return None
    where = f"operator {i} {name} ({', '.join(ins) or '-'} -> {', '.join(outs) or '-'})"
    if name in CONVERTERS:
        if kind in TYPES[name]:
            return None
        why = f" ({TYPE_WHY[name, kind]})" if (name, kind) in TYPE_WHY else ""
        return f"{where}: {kind} is not supported{why}; aotc converts {name} for " \
               f"{', '.join(TYPES[name])}"
    if name in WHY_NOT:
        why = WHY_NOT[name]
    elif name.startswith("CUSTOM:Signal"):
        why = f"TFLM's Signal operator {name[7:]} is not supported yet (aotc converts " \
              f"{', '.join(k[7:] for k in CONVERTERS if k.startswith('CUSTOM:Signal'))})"
    elif name.startswith("CUSTOM:"):
        why = "custom operators are not supported (only TFLM's builtins)"
    elif name in CONTROL_FLOW:
        why = "a call of another subgraph is not supported (IF and WHILE are)"
    elif name in RESOURCES:
        why = "resource variables are not supported"
    else:
        why = "aotc has no converter for this builtin"
    return f"{where}: {why}"
