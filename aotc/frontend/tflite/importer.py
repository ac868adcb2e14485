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

Only the first subgraph is imported; every operator outside ``CONVERTERS`` is named
in one error before anything is converted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import onnx

from aotc.errors import AotcError
from aotc.frontend.tflite.builder import Builder
from aotc.frontend.tflite.builtins import CONVERTERS


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
    try:
        model = tflite.Model.GetRootAsModel(data, 0)
        n_sub = model.SubgraphsLength()
        sub = model.Subgraphs(0) if n_sub else None
        codes = [_op_name(model.OperatorCodes(i)) for i in range(model.OperatorCodesLength())]
    except Exception as e:  # a corrupt flatbuffer fails anywhere in the generated accessors
        raise AotcError(f"{fname} is not a valid TFLite flatbuffer ({type(e).__name__})") from None
    if sub is None:
        raise AotcError(f"{fname} has no subgraph")
    used = []
    for i in range(sub.OperatorsLength()):
        idx = sub.Operators(i).OpcodeIndex()
        if idx >= len(codes):
            raise AotcError(f"{fname}: operator {i} has opcode index {idx} beyond the table")
        used.append(codes[idx])
    unsupported = sorted({c for c in used if c not in CONVERTERS})
    if unsupported:
        raise AotcError(f"unsupported TFLite operator(s): {', '.join(unsupported)} "
                        f"(see `aotc ops`)")
    try:
        b = Builder(model, sub, data, fname)
    except AotcError:
        raise
    except Exception as e:
        raise AotcError(f"{fname}: malformed subgraph ({type(e).__name__})") from None
    for i in range(sub.OperatorsLength()):
        op = sub.Operators(i)
        b.op_index, b.op_name = i, used[i]
        try:
            CONVERTERS[used[i]](b, op)
        except AotcError as e:
            if e.node is None:
                raise AotcError(e.reason, _safe(b.node_name, op), used[i]) from None
            raise
        except Exception as e:  # a malformed operator: missing inputs, options, data
            raise AotcError(f"malformed operator ({type(e).__name__}: {e})",
                            _safe(b.node_name, op), used[i]) from None
    try:
        return b.finish()
    except AotcError:
        raise
    except Exception as e:
        raise AotcError(f"{fname}: malformed graph outputs ({type(e).__name__}: {e})") from None


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


