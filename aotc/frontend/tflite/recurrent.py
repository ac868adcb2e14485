"""TFLite UNIDIRECTIONAL_SEQUENCE_LSTM: float32 -> an ONNX LSTM node (aotc/ops/sequence/), or a
Scan over time for the variants ONNX's LSTM lacks.

TFLite keeps one weight tensor per gate, in the order input, forget, cell, output; ONNX stacks
them as i, o, f, c (W: [1, 4H, I], R: [1, 4H, H], B: [1, 8H] with the recurrent bias zero,
P: [1, 3H] in the order i, o, f). ``time_major`` picks the ONNX layout (1: [batch, time, ...],
0: [time, batch, ...]); the LSTM's Y ([.., 1, .., H]) is reshaped to TFLite's 3-D output. The
fused activation is the activation of the cell gate and of the cell output (ONNX's g and h).

The output and cell states are TFLite variable tensors: zero when the interpreter starts, then
carried from one invoke to the next. aotc makes both slots of the caller's state buffer
(aotc/frontend/tflite/variables.py, as the integer LSTM): zero after ``<name>_reset`` (TFLM's
ResetVariableTensors zeroes a float variable whatever its buffer holds), read by the LSTM (the
ONNX LSTM's initial_h/initial_c, the Scan's initial states) and set to its final states (Y_h
and Y_c, the Scan's last h and c). The LSTM kernel reads its initial states before it writes
anything and writes Y_h and Y_c last (``writes_over``, aotc/ops/sequence/recurrent.py), so it
writes both slots in place: no copy per call. A Scan is a loop, so its final states go to the
slots through a Copy step at the end of the call (batch x n_out and batch x hidden floats).

The plain LSTM (with or without peepholes) is one ONNX LSTM node. The variants ONNX's LSTM
lacks (CIFG, a projection layer, cell and projection clipping, layer normalisation; its
``clip`` bounds the gates' pre-activations, not the cell) become an ONNX Scan over time whose
body is TFLite's float step. Refused with one line each: fused activations other than TANH,
hybrid (int8 weights with float activations) models, tensors of a gate given in part.

The integer LSTM (int8 or int16 activations, int8 weights, int16 cell state) is TFLM's
(``_integer``, aotc/ops/sequence/qlstm.py): bit-exact, its states in the state buffer; what
TFLM's integer kernel lacks (peepholes, projection, layer normalisation, CIFG) is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper

from aotc.errors import AotcError
from aotc.frontend.tflite.builder import Builder
from aotc.frontend.tflite.options import _opts

# TFLite's operand order (tensorflow/lite/kernels/lstm_shared.h).
INPUT = 0
W_I, W_F, W_C, W_O = 1, 2, 3, 4  # input-to-gate weights [H, I]
R_I, R_F, R_C, R_O = 5, 6, 7, 8  # recurrent-to-gate weights [H, H_out]
P_I, P_F, P_O = 9, 10, 11  # cell-to-gate (peephole) weights [H]
B_I, B_F, B_C, B_O = 12, 13, 14, 15  # gate biases [H]
PROJ_W, PROJ_B = 16, 17
OUTPUT_STATE, CELL_STATE = 18, 19
LAYER_NORM = (20, 21, 22, 23)

# Fused activation -> ONNX LSTM activation of the cell gate and output. Only TANH (what the
# converters write): for NONE and RELU LiteRT and TFLM disagree with each other (measured: up to
# 0.6 apart on a 4-cell layer; TFLM's NONE matches tanh on the cell output), so neither is
# a reference aotc could be held to.
_ACTIVATIONS = {4: "Tanh"}
_ACT_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 5: "SIGN_BIT"}


def unidirectional_sequence_lstm(b: Builder, op: Any) -> None:
    ins = [int(op.Inputs(i)) for i in range(op.InputsLength())]
    (y,) = [int(op.Outputs(i)) for i in range(op.OutputsLength())]
    if len(ins) not in (20, 24):
        raise AotcError(f"{len(ins)} inputs; UNIDIRECTIONAL_SEQUENCE_LSTM has 20 (24 with "
                        f"layer normalisation)")

    def present(k: int) -> bool:
        return k < len(ins) and ins[k] >= 0

    x = ins[INPUT]
    o = _opts(op, "UnidirectionalSequenceLSTMOptions")
    if o is None:
        raise AotcError("the operator has no UnidirectionalSequenceLSTMOptions")
    if b.dtype(x) in (np.int8, np.int16):
        _integer(b, op, ins, y, o)
        return
    if b.dtype(x) != np.float32 or b.dtype(y) != np.float32:
        raise AotcError(f"input {b.dtype(x).name}, output {b.dtype(y).name}: the LSTM is "
                        f"float32, int8 or int16 (16x8)")
    refuse = []
    cifg = not present(W_I)
    if cifg != (not present(R_I)) or (cifg and present(B_I)) or \
            (cifg and present(P_I)):
        refuse.append("an input gate given in part (CIFG needs none of its tensors)")
    if present(PROJ_B) and not present(PROJ_W):
        refuse.append("a projection bias without projection weights")
    norm = [present(k) for k in LAYER_NORM]
    if any(norm) and norm != [not cifg, True, True, True]:
        refuse.append("layer normalisation on some gates only")
    if o.DiagonalRecurrentTensors():
        refuse.append("diagonal recurrent weights")
    act = o.FusedActivationFunction()
    if act not in _ACTIVATIONS:
        refuse.append(f"the {_ACT_NAMES.get(act, act)} activation (TANH only)")
    peep = [present(k) for k in (P_I, P_F, P_O)]
    if any(peep) and peep != [not cifg, True, True]:
        refuse.append("peephole weights on some gates only")
    if refuse:
        raise AotcError(f"{', '.join(refuse)}: not supported")

    def weight(k: int, what: str) -> np.ndarray:
        c = b.const(ins[k])
        if c is None:
            raise AotcError(f"the {what} ({b.tname(ins[k])!r}) must be a constant")
        if c.dtype != np.float32:
            raise AotcError(f"the {what} ({b.tname(ins[k])!r}) is {c.dtype.name}: hybrid LSTMs "
                            f"(integer weights, float activations) are not supported")
        return c

    shape = b.shape(x)
    if len(shape) != 3:
        raise AotcError(f"the input has shape {list(shape)}; the LSTM needs 3-D input")
    gates = "fco" if cifg else "ifco"
    lstm = _Weights(
        w_in={g: weight(k, f"input-to-{g} weights") for g, k in zip("ifco", (W_I, W_F, W_C, W_O))
              if g in gates},
        w_rec={g: weight(k, f"recurrent-to-{g} weights")
               for g, k in zip("ifco", (R_I, R_F, R_C, R_O)) if g in gates},
        bias={g: weight(k, f"{g} gate bias") for g, k in zip("ifco", (B_I, B_F, B_C, B_O))
              if g in gates},
        peep={g: weight(k, f"cell-to-{g} weights") for g, k in zip("ifo", (P_I, P_F, P_O))
              if present(k)},
        norm={g: weight(k, f"{g} layer norm coefficients") for g, k in zip("ifco", LAYER_NORM)
              if present(k)},
        proj=weight(PROJ_W, "projection weights") if present(PROJ_W) else None,
        proj_bias=weight(PROJ_B, "projection bias") if present(PROJ_B) else None,
        cell_clip=float(o.CellClip()), proj_clip=float(o.ProjClip()))
    hidden = lstm.w_in["f"].shape[0]
    n_out = lstm.proj.shape[0] if lstm.proj is not None else hidden
    if lstm.w_rec["f"].shape != (hidden, n_out):
        raise AotcError(f"recurrent weights {list(lstm.w_rec['f'].shape)}; expected "
                        f"[{hidden}, {n_out}]")
    time_major = bool(o.TimeMajor())
    states = _float_states(b, ins, hidden, n_out)
    if cifg or lstm.proj is not None or lstm.norm or lstm.cell_clip > 0 or lstm.proj_clip > 0:
        _as_scan(b, x, y, lstm, time_major, hidden, n_out, states)
    else:
        _as_onnx_lstm(b, x, y, lstm, time_major, hidden, states)


def _float_states(b: Builder, ins: list[int], hidden: int, n_out: int) -> list[Any]:
    """The output and cell state variables (aotc/frontend/tflite/variables.py), each
    [batch, n_out] and [batch, hidden] float32 as TFLite declares them."""
    from aotc.frontend.tflite.variables import _variable

    n_batch = None
    out = []
    for k, what, width in ((OUTPUT_STATE, "output state", n_out), (CELL_STATE, "cell state",
                                                                    hidden)):
        t = ins[k]
        if t < 0:
            raise AotcError(f"no {what} tensor: the LSTM's states are variable tensors")
        shape = b.shape(t)
        if b.dtype(t) != np.float32 or len(shape) != 2 or shape[1] != width or \
                (n_batch is not None and shape[0] != n_batch):
            raise AotcError(f"the {what} {b.tname(t)!r} is {b.dtype(t).name}{list(shape)}; "
                            f"the float LSTM needs float32[batch, {width}]")
        n_batch = shape[0]
        out.append(_variable(b, f"tensor_{t}", t))
    return out


def _reshaped(b: Builder, v: str, shape: tuple[int, ...], what: str) -> str:
    return b.add("Reshape", [v, b.init(np.array(shape, np.int64), "shape")], what)[0]


@dataclass
class _Weights:
    """The LSTM's constants by gate (i, f, c, o; no i with CIFG)."""

    w_in: dict[str, np.ndarray]
    w_rec: dict[str, np.ndarray]
    bias: dict[str, np.ndarray]
    peep: dict[str, np.ndarray]
    norm: dict[str, np.ndarray]
    proj: np.ndarray | None
    proj_bias: np.ndarray | None
    cell_clip: float
    proj_clip: float


def _as_onnx_lstm(b: Builder, x: int, y: int, w: _Weights, time_major: bool,
                  hidden: int, states: list[Any]) -> None:
    """The plain LSTM (peepholes allowed): one ONNX LSTM node, aotc's LSTM kernel."""
    n_batch = b.shape(x)[1] if time_major else b.shape(x)[0]
    order = "iofc"  # ONNX's gate order
    W = np.concatenate([w.w_in[g] for g in order])[None].astype(np.float32)
    R = np.concatenate([w.w_rec[g] for g in order])[None].astype(np.float32)
    B = np.concatenate([*(w.bias[g] for g in order), np.zeros(4 * hidden, np.float32)])[None]
    state = (1, n_batch, hidden) if time_major else (n_batch, 1, hidden)  # ONNX's layout
    h_var, c_var = states
    if h_var.shape[0] != n_batch:
        raise AotcError(f"the states have batch {h_var.shape[0]}, the input {n_batch}")
    inputs = [b.get(x), b.init(W, "W"), b.init(R, "R"), b.init(B.astype(np.float32), "B"), "",
              _reshaped(b, h_var.current, state, "initial_h"),
              _reshaped(b, c_var.current, state, "initial_c")]
    if w.peep:
        P = np.concatenate([w.peep["i"], w.peep["o"], w.peep["f"]])[None]
        inputs.append(b.init(P.astype(np.float32), "P"))
    seq, y_h, y_c = b.add("LSTM", inputs, "lstm", n_out=3, hidden_size=hidden,
                          layout=0 if time_major else 1, activations=["Sigmoid", "Tanh", "Tanh"])
    h_var.current = _reshaped(b, y_h, tuple(h_var.shape), "next_h")
    c_var.current = _reshaped(b, y_c, tuple(c_var.shape), "next_c")
    out = b.add("Reshape", [seq, b.init(np.array(b.shape(y), np.int64), "shape")], "output")[0]
    b.define(y, out)


def _as_scan(b: Builder, x: int, y: int, w: _Weights, time_major: bool, hidden: int,
             n_out: int, states: list[Any]) -> None:
    """The variants ONNX's LSTM lacks (CIFG, projection, cell and projection clipping, layer
    normalisation) as an ONNX Scan over time whose body is TFLite's float LSTM step
    (tensorflow/lite/kernels/lstm_eval.cc): per gate, input and recurrent products, peephole,
    layer norm (then the bias) or the bias, activation; the cell update, clipped; the output
    gate on the new cell; the projection, clipped. States: h [batch, n_out], c [batch, hidden]."""
    n_batch = b.shape(x)[1] if time_major else b.shape(x)[0]
    xs = b.get(x)
    if not time_major:  # Scan walks axis 0
        xs = b.add("Transpose", [xs], "time_major", perm=[1, 0, 2])[0]
    body: list[onnx.NodeProto] = []

    def node(op_type: str, inputs: list[str], **attrs: Any) -> str:
        out = b.fresh(f"step/{op_type.lower()}")
        body.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def const(arr: Any, what: str) -> str:
        return b.init(np.asarray(arr, np.float32), what)

    h_in, c_in, x_t = (b.fresh(f"step/{n}") for n in ("h_in", "c_in", "x_t"))

    def gate(g: str, cell: str | None, act: str) -> str:
        acc = node("Add", [node("MatMul", [x_t, const(w.w_in[g].T, f"w_{g}")]),
                           node("MatMul", [h_in, const(w.w_rec[g].T, f"r_{g}")])])
        if g in w.peep and cell is not None:
            acc = node("Add", [acc, node("Mul", [cell, const(w.peep[g], f"p_{g}")])])
        if g in w.norm:  # MeanStddevNormalization: (v - mean) / sqrt(var + 1e-8)
            mean = node("ReduceMean", [acc], axes=[1], keepdims=1)  # opset 17: an attribute
            sq = node("ReduceMean", [node("Mul", [acc, acc])], axes=[1], keepdims=1)
            var = node("Sub", [sq, node("Mul", [mean, mean])])
            inv = node("Div", [const(1.0, "one"), node("Sqrt", [node("Add", [
                var, const(1e-8, "eps")])])])
            acc = node("Mul", [node("Mul", [node("Sub", [acc, mean]), inv]),
                               const(w.norm[g], f"ln_{g}")])
        acc = node("Add", [acc, const(w.bias[g], f"b_{g}")])
        return node(act, [acc])

    def clip(v: str, bound: float, what: str) -> str:
        if bound <= 0:
            return v
        return node("Clip", [v, const(-bound, f"{what}_min"), const(bound, f"{what}_max")])

    f = gate("f", c_in, "Sigmoid")
    i = node("Sub", [const(1.0, "one"), f]) if "i" not in w.w_in else gate("i", c_in, "Sigmoid")
    g = gate("c", None, "Tanh")
    c_new = clip(node("Add", [node("Mul", [f, c_in]), node("Mul", [i, g])]), w.cell_clip,
                 "cell_clip")
    o = gate("o", c_new, "Sigmoid")
    h_new = node("Mul", [o, node("Tanh", [c_new])])
    if w.proj is not None:
        h_new = node("MatMul", [h_new, const(w.proj.T, "proj")])
        if w.proj_bias is not None:
            h_new = node("Add", [h_new, const(w.proj_bias, "proj_bias")])
        h_new = clip(h_new, w.proj_clip, "proj_clip")
    c_out, h_out, y_t = node("Identity", [c_new]), node("Identity", [h_new]), \
        node("Identity", [h_new])
    f32 = onnx.TensorProto.FLOAT
    graph = helper.make_graph(
        body, b.fresh("step"),
        [helper.make_tensor_value_info(h_in, f32, [n_batch, n_out]),
         helper.make_tensor_value_info(c_in, f32, [n_batch, hidden]),
         helper.make_tensor_value_info(x_t, f32, [n_batch, b.shape(x)[2]])],
        [helper.make_tensor_value_info(h_out, f32, [n_batch, n_out]),
         helper.make_tensor_value_info(c_out, f32, [n_batch, hidden]),
         helper.make_tensor_value_info(y_t, f32, [n_batch, n_out])])
    h_var, c_var = states
    if h_var.shape[0] != n_batch:
        raise AotcError(f"the states have batch {h_var.shape[0]}, the input {n_batch}")
    h_var.current, c_var.current, seq = b.add("Scan", [h_var.current, c_var.current, xs], "lstm",
                                              n_out=3, body=graph, num_scan_inputs=1)
    if not time_major:
        seq = b.add("Transpose", [seq], "batch_major", perm=[1, 0, 2])[0]
    b.define(y, seq)


def _integer(b: Builder, op: Any, ins: list[int], y: int, o: Any) -> None:
    """TFLM's integer LSTM (int8 or int16 activations, int8 weights, int16 cell state): one
    aotc.QLstm (aotc/ops/sequence/qlstm.py) with TFLM's Prepare computed here
    (lstm_eval_common.cc: the gate products requantised to 2^-12, the gate outputs at 2^-15).
    Its hidden and cell states, variable tensors, become slots of the caller's state buffer
    (carried from call to call, as TFLM carries them from invoke to invoke), which the op
    updates in place. What TFLM's integer kernel refuses in Prepare is refused here too."""
    from aotc.frontend.tflite.variables import _variable
    from aotc.ops.quant.arith import quantize_multiplier
    from aotc.ops.sequence.qlstm import cell_power

    def present(k: int) -> bool:
        return k < len(ins) and ins[k] >= 0

    x = ins[INPUT]
    act = b.dtype(x)
    refuse = []
    if not all(present(k) for k in range(W_I, R_O + 1)) or \
            not all(present(k) for k in range(B_I, B_O + 1)):
        refuse.append("CIFG or missing gate tensors")
    for ks, what in (((P_I, P_F, P_O), "peepholes"), ((PROJ_W, PROJ_B), "projection"),
                     (LAYER_NORM, "layer normalisation")):
        if any(present(k) for k in ks):
            refuse.append(what)
    if refuse:
        raise AotcError(f"{', '.join(refuse)} in an {act.name} LSTM: not supported (TFLM's "
                        f"integer LSTM kernel has none of them)")
    if o.FusedActivationFunction() != 4:
        a = o.FusedActivationFunction()
        raise AotcError(f"the {_ACT_NAMES.get(a, a)} activation (TANH only)")
    if o.DiagonalRecurrentTensors():
        raise AotcError("diagonal recurrent weights: not supported")
    hs, cs = ins[OUTPUT_STATE], ins[CELL_STATE]
    for t, what in ((hs, "output state"), (cs, "cell state")):
        if t < 0 or not b.tensor(t).IsVariable():  # t: a tensor index (not an input slot)
            raise AotcError(f"the {what} must be a variable tensor (TFLM's integer LSTM)")
    if b.dtype(cs) != np.int16 or b.dtype(hs) != act or b.dtype(y) != act:
        raise AotcError(f"{act.name} input, {b.dtype(hs).name} output state, "
                        f"{b.dtype(cs).name} cell state, {b.dtype(y).name} output: an integer "
                        f"LSTM needs the input's type for the output state and output, and an "
                        f"int16 cell state")

    def per_tensor(t: int, what: str) -> tuple[np.float32, int]:
        q = b.quant(t)
        if q is None or len(q[0]) != 1:
            raise AotcError(f"the {what} ({b.tname(t)!r}) needs per-tensor quantisation "
                            f"parameters (TFLM's integer LSTM uses one scale per tensor)")
        return np.float32(q[0][0]), int(q[1][0])

    def weights(ks: tuple[int, ...], what: str, dtype: Any) -> list[np.ndarray]:
        out = []
        for g, k in zip(GATE_ORDER, ks):
            c = b.const(ins[k])
            if c is None or c.dtype != dtype:
                raise AotcError(f"the {g} {what} ({b.tname(ins[k])!r}) must be a constant "
                                f"{np.dtype(dtype).name} tensor")
            out.append(c)
        return out

    bias_t = np.int64 if act == np.int16 else np.int32
    w_in = weights((W_I, W_F, W_C, W_O), "input weights", np.int8)
    w_rec = weights((R_I, R_F, R_C, R_O), "recurrent weights", np.int8)
    bias = weights((B_I, B_F, B_C, B_O), "gate bias", bias_t)
    sx, zx = per_tensor(x, "input")
    sh, zh = per_tensor(hs, "output state")
    sc, _ = per_tensor(cs, "cell state")
    attrs: dict[str, Any] = {"time_major": int(bool(o.TimeMajor())), "x_zero_point": zx,
                             "h_zero_point": zh}
    for key, src, ks in (("in", sx, (W_I, W_F, W_C, W_O)), ("rec", sh, (R_I, R_F, R_C, R_O))):
        ms = []
        for k in ks:
            sw, zw = per_tensor(ins[k], "weights")
            if zw:
                raise AotcError(f"the weights {b.tname(ins[k])!r} have zero point {zw}; "
                                f"TFLM's integer LSTM needs symmetric weights")
            # TFLM: static_cast<double>(float * float) / double(2^-12)
            ms.append(quantize_multiplier(float(np.float32(src * sw)) / 2.0 ** -12))
        attrs[f"{key}_mult"] = [m for m, _ in ms]
        attrs[f"{key}_shift"] = [s for _, s in ms]
    for key, real in (("fc", 2.0 ** -15 * float(sc) / float(sc)),
                      ("ic", 2.0 ** -15 * 2.0 ** -15 / float(sc)),
                      ("out", 2.0 ** -15 * 2.0 ** -15 / float(sh))):
        attrs[f"{key}_mult"], attrs[f"{key}_shift"] = quantize_multiplier(real)
    attrs["cell_power"] = cell_power(float(sc))
    clip = float(np.float32(o.CellClip()))
    if clip > 0:
        attrs["cell_clip"] = int(min(max(clip / float(sc), -32768.0), 32767.0))
    h_var = _variable(b, f"tensor_{hs}", hs)
    c_var = _variable(b, f"tensor_{cs}", cs)
    outs = b.add("QLstm", [b.get(x), b.init(np.stack(w_in), "w_in"),
                           b.init(np.stack(w_rec), "w_rec"), b.init(np.stack(bias), "bias"),
                           h_var.current, c_var.current], "lstm", n_out=3, domain="aotc",
                 **attrs)
    b.define(y, outs[0])
    h_var.current, c_var.current = outs[1], outs[2]


GATE_ORDER = "ifco"
