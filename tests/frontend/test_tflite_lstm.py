"""TFLite UNIDIRECTIONAL_SEQUENCE_LSTM, float32, built here with the flatbuffers builder
(tflite_builder), compiled from the .tflite file and run through the generated C.

References: LiteRT's reference kernels, and TensorFlow Lite Micro's interpreter where its kernel
runs the model (not with peepholes, projection, CIFG or layer norm), each on a fresh interpreter
(the output and cell states are variable tensors, zero before the first invoke); for the states
carried from call to call (aotc's state buffer), one TFLM interpreter invoked again and again.
Tolerance: rtol 1e-4, atol 1e-5 (expf/tanhf of glibc against TFLite's own sigmoid and tanh
over a few time steps). What aotc refuses (activations other than TANH, an int8 cell state) is
one `aotc: error:` line naming the operator. The integer LSTM: test_tflite_qlstm.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from opcheck import run_on_boards
from tflite_builder import Net, interpret, interpret_tflm, options

import aotc

TOL = dict(rtol=1e-4, atol=1e-5)


def _lstm_model(batch: int = 2, steps: int = 5, n_in: int = 3, hidden: int = 4,
                time_major: bool = False, peephole: bool = False, act: int = 4,
                cell_clip: float = 0.0, proj_clip: float = 0.0, cifg: bool = False,
                projection: bool = False, proj_bias: bool = False, layer_norm: bool = False,
                seed: int = 0, int8: bool = False) -> tuple[bytes, np.ndarray]:
    """One LSTM layer (input [batch, steps, n_in], or [steps, batch, n_in] time-major) and
    a random input. ``int8``: int8 input, weights, output and cell state (only to test the
    refusal)."""
    net = Net(int8, seed=seed)
    rng = net.rng
    shape = (steps, batch, n_in) if time_major else (batch, steps, n_in)
    x = net.input(shape)

    def w(*s: int, scale: float = 0.5) -> int:
        return net.weight(rng.normal(scale=scale, size=s))

    n_out = 3 if projection else hidden
    none = -1
    ins = [x]
    ins += [none if cifg else w(hidden, n_in), w(hidden, n_in), w(hidden, n_in), w(hidden, n_in)]
    ins += [none if cifg else w(hidden, n_out), w(hidden, n_out), w(hidden, n_out),
            w(hidden, n_out)]
    ins += [none if cifg else w(hidden, scale=0.3), w(hidden, scale=0.3),
            w(hidden, scale=0.3)] if peephole else [none] * 3
    ins += [none if cifg else w(hidden, scale=0.1), w(hidden, scale=0.1) + 0,
            w(hidden, scale=0.1), w(hidden, scale=0.1)]
    ins += [w(n_out, hidden), w(n_out, scale=0.1) if proj_bias else none] if projection \
        else [none, none]
    for name, size in (("output_state", n_out), ("cell_state", hidden)):
        q = {"scale": 0.01, "zp": 0} if int8 else {}
        t = net._tensor((batch, size), np.int8 if int8 else np.float32, name, **q)
        net.tensors[t].isVariable = True
        ins.append(t)
    if layer_norm:
        ins += [none if cifg else net.weight(1 + rng.normal(scale=0.2, size=hidden))]
        ins += [net.weight(1 + rng.normal(scale=0.2, size=hidden)) for _ in range(3)]
    else:
        ins += [none] * 4  # no layer normalisation (TFLM wants all 24 operands)
    out_shape = (steps, batch, n_out) if time_major else (batch, steps, n_out)
    opts = options("UnidirectionalSequenceLSTMOptions", fusedActivationFunction=act,
                   cellClip=cell_clip, projClip=proj_clip, timeMajor=time_major)
    y = net.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, out_shape, opts)
    xs = np.random.default_rng(seed + 1).normal(size=shape).astype(np.float32)
    return net.build([y]), xs


def _run_aotc(model: bytes, x: np.ndarray, tmp: Path) -> tuple[np.ndarray, aotc.Bundle]:
    path = tmp / "lstm.tflite"
    path.write_bytes(model)
    bundle = aotc.compile(path, tmp / "out", name="lstm")
    runner = bundle.load()
    (spec,) = runner.meta["inputs"]
    got = runner.run({spec["name"]: x})
    run_on_boards(bundle, {spec["name"]: x}, got, tmp / "fw")  # AOTC_TEST_BOARDS
    (out,) = runner.meta["outputs"]
    return got[out["name"]], bundle


# The plain LSTM (one ONNX LSTM node) and the variants ONNX's LSTM lacks (an ONNX Scan whose
# body is TFLite's step). TFLM runs the plain, time-major and cell-clip models; its kernel
# refuses peepholes, projection, CIFG and layer norm in Prepare, so those are against LiteRT.
CASES = {
    "batch_major_tanh": {},
    "time_major": {"time_major": True},
    "peephole": {"peephole": True},
    "peephole_time_major_batch1": {"peephole": True, "time_major": True, "batch": 1,
                                   "steps": 7},
    "wider": {"n_in": 10, "hidden": 16, "steps": 8, "seed": 5},
    "cell_clip": {"cell_clip": 0.3},
    "projection": {"projection": True},
    "projection_bias_clip": {"projection": True, "proj_bias": True, "proj_clip": 0.2},
    "cifg": {"cifg": True},
    "cifg_peephole": {"cifg": True, "peephole": True, "seed": 6},
    "layer_norm": {"layer_norm": True, "seed": 7},
    "layer_norm_cifg_time_major": {"layer_norm": True, "cifg": True, "time_major": True},
    "everything": {"layer_norm": True, "peephole": True, "projection": True, "proj_bias": True,
                   "cell_clip": 0.5, "proj_clip": 0.2, "time_major": True, "seed": 8},
}
TFLM_RUNS = {"batch_major_tanh", "time_major", "wider", "cell_clip"}
SCAN = {"cell_clip", "projection", "projection_bias_clip", "cifg", "cifg_peephole",
        "layer_norm", "layer_norm_cifg_time_major", "everything"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_lstm_float_matches_litert_and_tflm(case, tmp_path):
    kw = CASES[case]
    model, x = _lstm_model(**kw)
    got, bundle = _run_aotc(model, x, tmp_path)
    ops = {n.op for n in bundle.compilation.graph.nodes}
    assert ("Scan" if case in SCAN else "LSTM") in ops, ops
    (litert,) = interpret(model, [x])[0]
    np.testing.assert_allclose(got, litert, **TOL)
    assert np.abs(litert).max() > 0.05  # the test exercises the gates, not a zero output
    if case in TFLM_RUNS:
        (tflm,) = interpret_tflm(model, [x])
        np.testing.assert_allclose(got, tflm, **TOL)
    clips = {k: 0.0 for k in ("cell_clip", "proj_clip") if kw.get(k)}
    if clips:  # the clipping changes the output (the test would see it missing)
        (unclipped,) = interpret(_lstm_model(**{**kw, **clips})[0], [x])[0]
        assert np.abs(unclipped - litert).max() > 1e-3


def lstm_refusal(model: bytes, tmp: Path, listing: bool = True) -> str:
    """The line of `aotc compile`'s refusal (exit 2, no traceback) of an LSTM model: one line,
    or where ``listing`` (a type the converter table refuses) a heading and one line per
    operator; the line names UNIDIRECTIONAL_SEQUENCE_LSTM. test_tflite_qlstm.py uses it too."""
    path = tmp / "m.tflite"
    path.write_bytes(model)
    res = subprocess.run([sys.executable, "-m", "aotc", "compile", str(path), "-o",
                          str(tmp / "o")], capture_output=True, text=True, timeout=300)
    assert "Traceback" not in res.stderr and res.returncode == 2, res.stderr
    lines = res.stderr.splitlines()
    assert lines and all(ln.startswith("aotc: error: ") for ln in lines), res.stderr
    assert len(lines) == 1 or listing and len(lines) == 2 and "cannot be converted" in lines[0], \
        res.stderr
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in lines[-1]
    return lines[-1]


@pytest.mark.parametrize("kw, needle", [
    ({"act": 3}, "the RELU6 activation (TANH only)"),
    ({"act": 1}, "the RELU activation (TANH only)"),
    # int8 with an int8 cell state (TFLM's integer LSTM needs int16: test_tflite_qlstm.py)
    ({"int8": True}, "int8 cell state, int8 output: an integer LSTM needs the input's type for "
                     "the output state and output, and an int16 cell state"),
])
def test_lstm_variants_refused_in_one_line(kw, needle, tmp_path):
    model, _ = _lstm_model(**kw)
    assert needle in lstm_refusal(model, tmp_path)
    # LiteRT runs these models: they are valid, aotc refuses them
    if not kw.get("int8"):
        interpret(model, [np.zeros((2, 5, 3), np.float32)])


def _tflm_frames(model: bytes, xs: list[np.ndarray]) -> list[np.ndarray]:
    """TFLM's outputs for consecutive invokes of one interpreter (its variable tensors, the
    LSTM's output and cell states, kept from one invoke to the next)."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(model, arena_size=1 << 20)
    out = []
    for x in xs:
        it.set_input(x, 0)
        it.invoke()
        out.append(it.get_output(0).copy())
    return out


def _stream(case: str, calls: int) -> tuple[bytes, list[np.ndarray]]:
    model, x = _lstm_model(**CASES[case])
    rng = np.random.default_rng(11)
    return model, [rng.normal(size=x.shape).astype(np.float32) for _ in range(calls)]


# The states carried from call to call: the plain LSTM (ONNX LSTM) and the Scan (cell clip),
# against TFLM with its variables kept between invokes.
@pytest.mark.parametrize("case", ["batch_major_tanh", "time_major", "cell_clip"])
def test_lstm_float_states_carried_between_calls_as_tflm(case, tmp_path):
    model, xs = _stream(case, 24)
    path = tmp_path / "lstm.tflite"
    path.write_bytes(model)
    bundle = aotc.compile(path, tmp_path / "out", name="lstm")
    r = bundle.load()
    # both states are slots of the state buffer: the LSTM kernel writes them in place (it is
    # the bundle's only kernel); a Scan (a loop) gets them copied at the end of the call
    written = "copied at the end" if case in SCAN else "in place"
    assert [s["written"] for s in r.meta["state"]["slots"]] == [written] * 2
    if case not in SCAN:
        assert len(bundle.kernels) == 1
    (spec,) = r.meta["inputs"]
    (out,) = r.meta["outputs"]
    ref = _tflm_frames(model, xs)
    got = [r.run({spec["name"]: x})[out["name"]] for x in xs]
    for k, (o, e) in enumerate(zip(got, ref)):
        np.testing.assert_allclose(o, e, **TOL, err_msg=f"call {k}")
    # the states matter: the second call differs from a fresh interpreter's answer
    (fresh,) = interpret_tflm(model, [xs[1]])
    assert np.abs(fresh - ref[1]).max() > 1e-2
    r.reset()  # zero states again, as a fresh interpreter
    np.testing.assert_allclose(r.run({spec["name"]: xs[0]})[out["name"]], ref[0], **TOL)


@pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="needs qemu-system-arm")
def test_lstm_float_states_carried_on_cortex_m4f(tmp_path):
    """The states carried from run to run on the board (QEMU), against TFLM."""
    model, xs = _stream("batch_major_tanh", 4)
    path = tmp_path / "lstm.tflite"
    path.write_bytes(model)
    bundle = aotc.compile(path, tmp_path / "out", name="lstm", target="cortex-m4f")
    board = bundle.load(board="cortex-m4f")
    (spec,) = board.meta["inputs"]
    (out,) = board.meta["outputs"]
    ref = _tflm_frames(model, xs)
    for k, x in enumerate(xs):
        np.testing.assert_allclose(board.run({spec["name"]: x})[out["name"]], ref[k], **TOL,
                                   err_msg=f"call {k}")
