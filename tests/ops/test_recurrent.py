"""RNN, GRU and LSTM against onnxruntime: directions, activations with alpha/beta, clip,
linear_before_reset, input_forget, peepholes, initial states, omitted outputs, constant
full-length sequence_lens; layout=1 (onnxruntime has no batchwise kernels) against the onnx
reference evaluator; rejections of what the static lowering cannot do."""

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator
from opcheck import check, check_node, compile_and_run, make_model, rand

import aotc
from aotc.errors import AotcError

TOL = dict(atol=1e-5, rtol=1e-4)
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _weights(op, nd, h, i, seed=0, bias=True):
    g = GATES[op]
    w = {"W": rand(nd, g * h, i, seed=seed, lo=-0.6, hi=0.6),
         "R": rand(nd, g * h, h, seed=seed + 1, lo=-0.6, hi=0.6)}
    if bias:
        w["B"] = rand(nd, 2 * g * h, seed=seed + 2, lo=-0.5, hi=0.5)
    return w


def _case(op, seq=4, batch=2, inp=3, h=5, direction="forward", attrs=None, bias=True,
          initial=False, peep=False, seq_lens=False, n_out=None, opset=17, const_w=True):
    nd = 2 if direction == "bidirectional" else 1
    w = _weights(op, nd, h, inp, bias=bias)
    inputs = {"x": rand(seq, batch, inp, seed=7)}
    names = ["x", "W", "R", "B" if bias else ""]
    inits = dict(w) if const_w else {}
    if not const_w:
        inputs.update(w)
    if seq_lens:
        inits["sl"] = np.full((batch,), seq, np.int32)
    names.append("sl" if seq_lens else "")
    if initial:
        inputs["h0"] = rand(nd, batch, h, seed=11, lo=-1, hi=1)
        names.append("h0")
        if op == "LSTM":
            inputs["c0"] = rand(nd, batch, h, seed=12, lo=-1, hi=1)
            names.append("c0")
    if peep:
        while len(names) < 7:
            names.append("")
        inits["P"] = rand(nd, 3 * h, seed=13, lo=-0.5, hi=0.5)
        names.append("P")
    while names and names[-1] == "":
        names.pop()
    a = {"hidden_size": h, "direction": direction, **(attrs or {})}
    n_out = n_out or (3 if op == "LSTM" else 2)
    check_node(op, inputs, a, inits, n_outputs=n_out, opset=opset, input_names=names, **TOL)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions(op, direction):
    _case(op, direction=direction)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_initial_state_no_bias_runtime_weights(op):
    _case(op, bias=False, initial=True, const_w=False, direction="bidirectional")


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("opset", [7, 14, 22])
def test_opsets_and_full_sequence_lens(op, opset):
    _case(op, seq=3, batch=1, inp=2, h=3, seq_lens=True, opset=opset)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_clip(op):
    _case(op, attrs={"clip": 0.3}, direction="bidirectional")


@pytest.mark.parametrize("acts", [
    (["Relu"], [], []),
    (["Sigmoid"], [], []),
    (["HardSigmoid"], [0.3], [0.4]),
    (["LeakyRelu"], [0.2], []),
    (["Affine"], [0.7], [0.1]),
    (["ScaledTanh"], [1.5], [0.5]),
    (["Elu"], [0.8], []),
    (["Softsign"], [], []),
    (["Softplus"], [], []),
    (["ThresholdedRelu"], [0.1], []),
])
def test_rnn_activations(acts):
    names, alpha, beta = acts
    attrs = {"activations": names}
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    _case("RNN", attrs=attrs)


def test_gru_activations_per_direction():
    _case("GRU", direction="bidirectional",
          attrs={"activations": ["HardSigmoid", "Tanh", "Sigmoid", "Relu"],
                 "activation_alpha": [0.25], "activation_beta": [0.45]})


def test_lstm_activations():
    _case("LSTM", attrs={"activations": ["HardSigmoid", "Softsign", "Relu"],
                         "activation_alpha": [0.3], "activation_beta": [0.55]})


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_gru_linear_before_reset(direction):
    _case("GRU", direction=direction, attrs={"linear_before_reset": 1}, initial=True)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_lstm_peepholes_initial_state(direction):
    _case("LSTM", direction=direction, initial=True, peep=True)


def test_lstm_clip_with_peepholes():
    _case("LSTM", attrs={"clip": 0.4}, initial=True, peep=True, direction="bidirectional")


def test_lstm_input_forget():
    _case("LSTM", attrs={"input_forget": 1}, initial=True, peep=True)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_only_last_state_output(op):
    # Y omitted: the kernel writes only Y_h.
    h, i = 4, 3
    w = _weights(op, 1, h, i)
    x = rand(3, 2, i, seed=5)
    node = helper.make_node(op, ["x", "W", "R", "B"], ["", "yh"], hidden_size=h)
    m = make_model([node], {"x": x}, {"yh": (np.float32, [1, 2, h])}, w)
    check(m, {"x": x}, **TOL)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_layout_1_against_onnx_reference(op, direction):
    nd = 2 if direction == "bidirectional" else 1
    h, i, b, s = 3, 2, 2, 4
    w = _weights(op, nd, h, i)
    x = rand(b, s, i, seed=3)
    h0 = rand(b, nd, h, seed=4)
    names = ["x", "W", "R", "B", "", "h0"]
    feeds = {"x": x, "h0": h0}
    outs = ["y", "yh"]
    if op == "LSTM":
        names.append("c0")
        feeds["c0"] = rand(b, nd, h, seed=5)
        outs.append("yc")
    node = helper.make_node(op, names, outs, hidden_size=h, layout=1, direction=direction)
    shapes = {"y": [b, s, nd, h], "yh": [b, nd, h], "yc": [b, nd, h]}
    m = make_model([node], feeds, {o: (np.float32, shapes[o]) for o in outs}, w, opset=14)
    onnx.checker.check_model(m)
    want = ReferenceEvaluator(m).run(None, feeds)
    got, _ = compile_and_run(m, feeds)
    for o, wv in zip(outs, want):
        np.testing.assert_allclose(got[o], wv, **TOL, err_msg=o)


def _compile(tmp_path, op, names, inits, attrs, x):
    node = helper.make_node(op, names, ["y"], name="rnn", **attrs)
    m = make_model([node], {"x": x}, {"y": (np.float32, None)}, inits)
    aotc.compile(m, tmp_path, name="m")


def test_partial_sequence_lens_rejected(tmp_path):
    w = _weights("RNN", 1, 3, 2)
    x = rand(4, 2, 2)
    inits = {**w, "sl": np.array([4, 2], np.int32)}
    with pytest.raises(AotcError, match="only full-length sequences"):
        _compile(tmp_path, "RNN", ["x", "W", "R", "B", "sl"], inits, {"hidden_size": 3}, x)


def test_runtime_sequence_lens_rejected(tmp_path):
    w = _weights("GRU", 1, 3, 2)
    x = rand(4, 2, 2)
    node = helper.make_node("GRU", ["x", "W", "R", "B", "sl"], ["y"], name="g", hidden_size=3)
    m = make_model([node], {"x": x, "sl": np.array([4, 4], np.int32)},
                   {"y": (np.float32, None)}, w)
    with pytest.raises(AotcError, match="sequence_lens must be a compile-time constant"):
        aotc.compile(m, tmp_path, name="m")


def test_unknown_activation_rejected(tmp_path):
    w = _weights("RNN", 1, 3, 2)
    with pytest.raises(AotcError, match="activation 'Gelu' is not supported"):
        _compile(tmp_path, "RNN", ["x", "W", "R", "B"], w,
                 {"hidden_size": 3, "activations": ["Gelu"]}, rand(4, 2, 2))


def test_hidden_size_mismatch_rejected(tmp_path):
    w = _weights("LSTM", 1, 3, 2)
    with pytest.raises(AotcError, match="hidden_size=4"):
        _compile(tmp_path, "LSTM", ["x", "W", "R", "B"], w, {"hidden_size": 4}, rand(4, 2, 2))
