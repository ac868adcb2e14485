"""TFLite resource variables -> state that lives between calls (aotc/frontend/state.py).

VAR_HANDLE names a variable (its container and shared name); READ_VARIABLE reads its value,
ASSIGN_VARIABLE sets it; CALL_ONCE runs an initialisation subgraph on the first invoke. The
graph is SSA: each variable becomes a graph input (its value when the call starts), every read
is the value last assigned before it in operator order (the input before any assignment), and
the value assigned last becomes a graph output. Both are listed in the model's ``aotc.state``
metadata with the variable's initial bytes, and leave the bundle's API for the caller's state
buffer.

Initial value: what the CALL_ONCE subgraph assigns (constants only: VAR_HANDLE and
ASSIGN_VARIABLE of a constant tensor), else TFLite Micro's (a variable is allocated filled with
its tensor's zero point when int8, with zeros otherwise; MicroResourceVariables).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import helper

from aotc.errors import AotcError
from aotc.frontend.state import METADATA_KEY
from aotc.frontend.tflite.options import _opts

# The Builder (builder.py, whose finish() calls finish_state) is typed Any here.
Builder = Any


@dataclass
class Variable:
    key: str
    input: str  # the graph input holding the value at the start of a call
    current: str  # the ONNX name of its value at this point of the operator order
    dtype: np.dtype
    shape: tuple[int, ...]
    init: bytes


def _key(op: Any, t: int) -> str:
    o = _opts(op, "VarHandleOptions")
    container = (o.Container() or b"").decode("utf-8", "replace") if o else ""
    shared = (o.SharedName() or b"").decode("utf-8", "replace") if o else ""
    return f"{container}/{shared}" if shared or container else f"tensor_{t}"


def _state(b: Builder) -> dict[str, Any]:
    """The builder's variables, made on first use: handles (tensor -> key), variables, and the
    initial bytes CALL_ONCE gave."""
    if not hasattr(b, "variables"):
        b.variables = {"handles": {}, "vars": {}, "init": {}}  # type: ignore[attr-defined]
    return b.variables  # type: ignore[attr-defined, no-any-return]


def _handle(b: Builder, t: int) -> str:
    handles = _state(b)["handles"]
    if t not in handles:
        raise AotcError(f"tensor {b.tname(t)!r} is not a VAR_HANDLE's resource")
    return str(handles[t])


def _variable(b: Builder, key: str, like: int) -> Variable:
    """The variable ``key``, made from tensor ``like`` (its dtype, shape, zero point) on first
    use; later uses must agree with it."""
    st = _state(b)
    dtype, shape = b.dtype(like), b.shape(like)
    var = st["vars"].get(key)
    if var is None:
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        init = st["init"].get(key)
        if init is None:
            q = b.quant(like)
            fill = int(q[1][0]) if q is not None and dtype == np.int8 else 0
            init = np.full(shape, fill, dtype).tobytes()
        elif len(init) != nbytes:
            raise AotcError(f"variable {key!r}: CALL_ONCE assigns {len(init)} bytes, but it is "
                            f"used as {dtype.name}{list(shape)}")
        name = b._claim(key.strip("/").replace("/", "_") or "state")
        var = Variable(key, name, name, dtype, shape, init)
        st["vars"][key] = var
    elif var.dtype != dtype or int(np.prod(var.shape)) != int(np.prod(shape)):
        raise AotcError(f"variable {key!r} is {var.dtype.name}{list(var.shape)} but tensor "
                        f"{b.tname(like)!r} is {dtype.name}{list(shape)}")
    return var  # type: ignore[no-any-return]


def var_handle(b: Builder, op: Any) -> None:
    t = int(op.Outputs(0))
    _state(b)["handles"][t] = _key(op, t)


def read_variable(b: Builder, op: Any) -> None:
    y = int(op.Outputs(0))
    var = _variable(b, _handle(b, int(op.Inputs(0))), y)
    value = var.current
    if tuple(var.shape) != b.shape(y):  # the same bytes in the reader's shape
        value = b.add("Reshape", [value, b.init(np.array(b.shape(y), np.int64), "shape")],
                      "read")[0]
    b.define(y, value, "nhwc")


def assign_variable(b: Builder, op: Any) -> None:
    h, v = int(op.Inputs(0)), int(op.Inputs(1))
    var = _variable(b, _handle(b, h), v)
    value = b.get(v, "nhwc")
    if b.shape(v) != tuple(var.shape):
        value = b.add("Reshape", [value, b.init(np.array(var.shape, np.int64), "shape")],
                      "assign")[0]
    var.current = value


def call_once(b: Builder, op: Any) -> None:
    """The initialisation subgraph, evaluated now: each variable's initial bytes."""
    o = _opts(op, "CallOnceOptions")
    index = int(o.InitSubgraphIndex()) if o else -1
    if not 0 < index < b.model.SubgraphsLength():
        raise AotcError(f"CALL_ONCE names subgraph {index}, which the model does not have")
    sub = b.model.Subgraphs(index)
    # The subgraph's tensors read as the main one's are (Builder.const needs only these).
    init = object.__new__(type(b))
    init.model, init.sub, init.data, init.fname = b.model, sub, b.data, b.fname
    init.folded, init.folded_f16 = {}, {}
    handles: dict[int, str] = {}
    for i in range(sub.OperatorsLength()):
        sop = sub.Operators(i)
        name = _op_name(b.model.OperatorCodes(sop.OpcodeIndex()))
        if name == "VAR_HANDLE":
            handles[int(sop.Outputs(0))] = _key(sop, int(sop.Outputs(0)))
        elif name == "ASSIGN_VARIABLE":
            h, v = int(sop.Inputs(0)), int(sop.Inputs(1))
            data = init.const(v)
            if h not in handles or data is None:
                raise AotcError(f"CALL_ONCE subgraph {index}: operator {i} assigns a value "
                                f"that is not a constant (aotc evaluates initialisers at "
                                f"compile time)")
            _state(b)["init"][handles[h]] = np.ascontiguousarray(data).tobytes()
        else:
            raise AotcError(f"CALL_ONCE subgraph {index}: operator {i} is {name}; an "
                            f"initialiser may only assign constants (VAR_HANDLE, "
                            f"ASSIGN_VARIABLE)")


def _op_name(code: Any) -> str:
    from tflite.utils import BUILTIN_OPCODE2NAME

    c = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    return str(BUILTIN_OPCODE2NAME.get(c, f"BUILTIN_{c}"))


def finish_state(b: Builder, inputs: list[Any], outputs: list[Any]) -> list[dict[str, Any]]:
    """Appends each variable's graph input and (when assigned) output; returns the
    ``aotc.state`` entries."""
    entries = []
    for var in _state(b)["vars"].values() if hasattr(b, "variables") else ():
        dt = helper.np_dtype_to_tensor_dtype(var.dtype)
        inputs.append(helper.make_tensor_value_info(var.input, dt, list(var.shape)))
        out = None
        if var.current != var.input:
            out = b._claim(f"{var.input}/next")
            b.nodes.append(helper.make_node("Identity", [var.current], [out], name=out))
            outputs.append(helper.make_tensor_value_info(out, dt, list(var.shape)))
        entries.append({"input": var.input, "output": out, "init": var.init.hex()})
    return entries


def metadata(entries: list[dict[str, Any]]) -> tuple[str, str] | None:
    return (METADATA_KEY, json.dumps(entries)) if entries else None


_SVDF_ACTIVATIONS = {0: "none", 1: "relu", 2: "relu_n1_to_1", 3: "relu6", 4: "tanh"}


def svdf(b: Builder, op: Any) -> None:
    """SVDF: its activation state (a variable tensor) becomes a state slot, which the op
    (aotc/ops/sequence/svdf.py) shifts and writes in place each call. Integer: TFLite Micro's
    Prepare (the two multipliers from float32 scale arithmetic, as it computes them); its
    int8 kernel applies no fused activation, nor does aotc's."""
    from aotc.ops.quant.arith import quantize_multiplier

    o = _opts(op, "SVDFOptions")
    rank = int(o.Rank()) if o else 1
    act = int(o.FusedActivationFunction()) if o else 0
    ins = [int(op.Inputs(i)) for i in range(op.InputsLength())]
    if len(ins) != 5:
        raise AotcError(f"SVDF takes 5 inputs, got {len(ins)}")
    x, wf, wt, bias, st = ins
    y = int(op.Outputs(0))
    if not b.tensor(st).IsVariable():
        raise AotcError(f"the activation state {b.tname(st)!r} is not a variable tensor")
    if act not in _SVDF_ACTIVATIONS:
        raise AotcError(f"fused activation {act} is not supported")
    consts = []
    for t, what in ((wf, "feature weights"), (wt, "time weights")):
        c = b.const(t)
        if c is None:
            raise AotcError(f"the {what} ({b.tname(t)!r}) must be a constant")
        consts.append(b.init(c, what.replace(" ", "_")))
    bias_c = b.const(bias) if bias >= 0 else None
    if bias >= 0 and bias_c is None:
        raise AotcError(f"the bias ({b.tname(bias)!r}) must be a constant")
    attrs: dict[str, Any] = {"rank": rank, "activation": _SVDF_ACTIVATIONS[act]}
    if b.dtype(x) == np.int8:
        q = {t: b.quant(t) for t in (x, wf, wt, st, y)}
        if any(v is None or len(v[0]) != 1 for v in q.values()):
            raise AotcError("an int8 SVDF needs per-tensor quantisation parameters on its "
                            "input, weights, state and output")
        sc = {t: np.float32(v[0][0]) for t, v in q.items()}  # type: ignore[index]
        # TFLM: static_cast<double>(float * float / float).
        m1, s1 = quantize_multiplier(float(np.float32(sc[x] * sc[wf]) / sc[st]))
        m2, s2 = quantize_multiplier(float(np.float32(sc[st] * sc[wt]) / sc[y]))
        attrs.update(x_zero_point=int(q[x][1][0]), state_zero_point=int(q[st][1][0]),  # type: ignore[index]
                     y_zero_point=int(q[y][1][0]), m1=m1, s1=s1, m2=m2, s2=s2)  # type: ignore[index]
        attrs["activation"] = "none"
    elif b.dtype(x) != np.float32:
        raise AotcError(f"SVDF on {b.dtype(x).name} input is not supported (float32, int8)")
    elif any(b.dtype(t) != np.float32 for t in (wf, wt, st)):
        raise AotcError("a hybrid SVDF (float input, quantised weights) is not supported")
    var = _variable(b, f"tensor_{st}", st)
    outs = b.add("Svdf", [b.get(x), *consts, b.init(bias_c, "bias") if bias_c is not None
                          else "", var.current], "svdf", n_out=2, domain="aotc", **attrs)
    b.define(y, outs[0])
    var.current = outs[1]


CONVERTERS = {"ASSIGN_VARIABLE": assign_variable, "CALL_ONCE": call_once,
              "READ_VARIABLE": read_variable, "SVDF": svdf, "VAR_HANDLE": var_handle}
