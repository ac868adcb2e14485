"""TFLite UNIDIRECTIONAL_SEQUENCE_LSTM (float32) -> one ONNX LSTM node (aotc/ops/sequence/).

TFLite keeps one weight tensor per gate, in the order input, forget, cell, output; ONNX stacks
them as i, o, f, c (W: [1, 4H, I], R: [1, 4H, H], B: [1, 8H] with the recurrent bias zero,
P: [1, 3H] in the order i, o, f). ``time_major`` picks the ONNX layout (1: [batch, time, ...],
0: [time, batch, ...]); the LSTM's Y ([.., 1, .., H]) is reshaped to TFLite's 3-D output. The
fused activation is the activation of the cell gate and of the cell output (ONNX's g and h).

The output and cell states are TFLite variable tensors: zero when the interpreter starts, then
carried from one invoke to the next. aotc starts them at zero on every run (one invoke of a
freshly reset interpreter); keeping them between runs is the state buffer of docs/streaming.md.

Refused with one line each: CIFG (no input gate), projection, cell or projection clipping,
layer normalisation, fused activations other than TANH, int8 / int16 (TFLM's integer LSTM)
and hybrid (int8 weights with float activations) models.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.frontend.tflite.builder import Builder

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
# converters write): for the others the references disagree (NONE: LiteRT leaves the cell
# output's scratch unwritten, TFLM keeps tanh on the output; RELU: TFLM differs from LiteRT).
_ACTIVATIONS = {4: "Tanh"}
_ACT_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 5: "SIGN_BIT"}


def _options(op: Any) -> Any:
    import tflite

    t = op.BuiltinOptions()
    if t is None:
        raise AotcError("the operator has no UnidirectionalSequenceLSTMOptions")
    o = tflite.UnidirectionalSequenceLSTMOptions()
    o.Init(t.Bytes, t.Pos)
    return o


def unidirectional_sequence_lstm(b: Builder, op: Any) -> None:
    ins = [int(op.Inputs(i)) for i in range(op.InputsLength())]
    (y,) = [int(op.Outputs(i)) for i in range(op.OutputsLength())]
    if len(ins) not in (20, 24):
        raise AotcError(f"{len(ins)} inputs; UNIDIRECTIONAL_SEQUENCE_LSTM has 20 (24 with "
                        f"layer normalisation)")

    def present(k: int) -> bool:
        return k < len(ins) and ins[k] >= 0

    x = ins[INPUT]
    if b.dtype(x) != np.float32 or b.dtype(y) != np.float32:
        raise AotcError(f"input {b.dtype(x).name}, output {b.dtype(y).name}: only the float32 "
                        f"LSTM is supported (TFLM's integer LSTM, int8 or int16 activations "
                        f"with an int16 cell, is not)")
    o = _options(op)
    refuse = []
    if not present(W_I) or not present(R_I):
        refuse.append("CIFG (no input gate)")
    if present(PROJ_W) or present(PROJ_B):
        refuse.append("a projection layer")
    if o.CellClip() != 0.0:
        refuse.append(f"cell_clip = {o.CellClip():g}")
    if o.ProjClip() != 0.0:
        refuse.append(f"proj_clip = {o.ProjClip():g}")
    if any(present(k) for k in LAYER_NORM):
        refuse.append("layer normalisation")
    if o.DiagonalRecurrentTensors():
        refuse.append("diagonal recurrent weights")
    act = o.FusedActivationFunction()
    if act not in _ACTIVATIONS:
        refuse.append(f"the {_ACT_NAMES.get(act, act)} activation (TANH only)")
    peep = [present(k) for k in (P_I, P_F, P_O)]
    if any(peep) and not all(peep):
        refuse.append("peephole weights on some gates only")
    if refuse:
        raise AotcError(f"{', '.join(refuse)}: not supported (aotc maps the LSTM onto ONNX's "
                        f"LSTM, which has none of these)")

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
    time_major = bool(o.TimeMajor())
    n_batch = shape[1] if time_major else shape[0]
    gates = "ofc"  # ONNX's order after i
    w_in = {g: weight(k, f"input-to-{g} weights") for g, k in zip("ifco", (W_I, W_F, W_C, W_O))}
    w_rec = {g: weight(k, f"recurrent-to-{g} weights")
             for g, k in zip("ifco", (R_I, R_F, R_C, R_O))}
    bias = {g: weight(k, f"{g} gate bias") for g, k in zip("ifco", (B_I, B_F, B_C, B_O))}
    hidden = w_in["i"].shape[0]
    n_out = w_rec["i"].shape[1]
    if n_out != hidden:  # only with a projection, refused above
        raise AotcError(f"recurrent weights [{hidden}, {n_out}]: the output size differs from "
                        f"the cell size without a projection")
    order = ["i", *gates]
    W = np.concatenate([w_in[g] for g in order])[None].astype(np.float32)
    R = np.concatenate([w_rec[g] for g in order])[None].astype(np.float32)
    B = np.concatenate([*(bias[g] for g in order), np.zeros(4 * hidden, np.float32)])[None]
    state = (1, n_batch, hidden) if time_major else (n_batch, 1, hidden)  # ONNX's layout
    inputs = [b.get(x), b.init(W, "W"), b.init(R, "R"), b.init(B.astype(np.float32), "B"), "",
              b.init(np.zeros(state, np.float32), "initial_h"),
              b.init(np.zeros(state, np.float32), "initial_c")]
    if all(peep):
        P = np.concatenate([weight(P_I, "cell-to-input weights"),
                            weight(P_O, "cell-to-output weights"),
                            weight(P_F, "cell-to-forget weights")])[None]
        inputs.append(b.init(P.astype(np.float32), "P"))
    name = _ACTIVATIONS[act]
    seq = b.add("LSTM", inputs, "lstm", hidden_size=hidden, layout=0 if time_major else 1,
                activations=["Sigmoid", name, name])[0]
    out = b.add("Reshape", [seq, b.init(np.array(b.shape(y), np.int64), "shape")], "output")[0]
    b.define(y, out)
