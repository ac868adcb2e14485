"""TFLite UNIDIRECTIONAL_SEQUENCE_LSTM (float32) -> an ONNX LSTM node (aotc/ops/sequence/), or a
Scan over time for the variants ONNX's LSTM lacks.

TFLite keeps one weight tensor per gate, in the order input, forget, cell, output; ONNX stacks
them as i, o, f, c (W: [1, 4H, I], R: [1, 4H, H], B: [1, 8H] with the recurrent bias zero,
P: [1, 3H] in the order i, o, f). ``time_major`` picks the ONNX layout (1: [batch, time, ...],
0: [time, batch, ...]); the LSTM's Y ([.., 1, .., H]) is reshaped to TFLite's 3-D output. The
fused activation is the activation of the cell gate and of the cell output (ONNX's g and h).

The output and cell states are TFLite variable tensors: zero when the interpreter starts, then
carried from one invoke to the next. aotc starts them at zero on every run (one invoke of a
freshly reset interpreter); keeping them between runs is the state buffer (issue 24, item 1).

The plain LSTM (with or without peepholes) is one ONNX LSTM node. The variants ONNX's LSTM
lacks (CIFG, a projection layer, cell and projection clipping, layer normalisation; its
``clip`` bounds the gates' pre-activations, not the cell) become an ONNX Scan over time whose
body is TFLite's float step. Refused with one line each: fused activations other than TANH,
int8 / int16 (TFLM's integer LSTM) and hybrid (int8 weights with float activations) models,
tensors of a gate given in part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper

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
# converters write): for NONE and RELU LiteRT and TFLM disagree with each other (measured: up to
# 0.6 apart on a 4-cell layer; TFLM's NONE matches tanh on the cell output), so neither is
# a reference aotc could be held to.
_ACTIVATIONS = {4: "Tanh"}
_ACT_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 5: "SIGN_BIT"}


def _options(op: Any) -> Any:
    import tflite

    t = op.BuiltinOptions()
    if t is None:
        raise AotcError("the operator has no UnidirectionalSequenceLSTMOptions")
    if op.BuiltinOptionsType() != tflite.BuiltinOptions.UnidirectionalSequenceLSTMOptions:
        raise AotcError(f"builtin options of type {op.BuiltinOptionsType()}; the operator "
                        f"takes UnidirectionalSequenceLSTMOptions")
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
    if cifg or lstm.proj is not None or lstm.norm or lstm.cell_clip > 0 or lstm.proj_clip > 0:
        _as_scan(b, x, y, lstm, time_major, hidden, n_out)
    else:
        _as_onnx_lstm(b, x, y, lstm, time_major, hidden)


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
                  hidden: int) -> None:
    """The plain LSTM (peepholes allowed): one ONNX LSTM node, aotc's LSTM kernel."""
    n_batch = b.shape(x)[1] if time_major else b.shape(x)[0]
    order = "iofc"  # ONNX's gate order
    W = np.concatenate([w.w_in[g] for g in order])[None].astype(np.float32)
    R = np.concatenate([w.w_rec[g] for g in order])[None].astype(np.float32)
    B = np.concatenate([*(w.bias[g] for g in order), np.zeros(4 * hidden, np.float32)])[None]
    state = (1, n_batch, hidden) if time_major else (n_batch, 1, hidden)  # ONNX's layout
    inputs = [b.get(x), b.init(W, "W"), b.init(R, "R"), b.init(B.astype(np.float32), "B"), "",
              b.init(np.zeros(state, np.float32), "initial_h"),
              b.init(np.zeros(state, np.float32), "initial_c")]
    if w.peep:
        P = np.concatenate([w.peep["i"], w.peep["o"], w.peep["f"]])[None]
        inputs.append(b.init(P.astype(np.float32), "P"))
    seq = b.add("LSTM", inputs, "lstm", hidden_size=hidden, layout=0 if time_major else 1,
                activations=["Sigmoid", "Tanh", "Tanh"])[0]
    out = b.add("Reshape", [seq, b.init(np.array(b.shape(y), np.int64), "shape")], "output")[0]
    b.define(y, out)


def _as_scan(b: Builder, x: int, y: int, w: _Weights, time_major: bool, hidden: int,
             n_out: int) -> None:
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
    h0 = const(np.zeros((n_batch, n_out)), "initial_h")
    c0 = const(np.zeros((n_batch, hidden)), "initial_c")
    _, _, seq = b.add("Scan", [h0, c0, xs], "lstm", n_out=3, body=graph, num_scan_inputs=1)
    if not time_major:
        seq = b.add("Transpose", [seq], "batch_major", perm=[1, 0, 2])[0]
    b.define(y, seq)
