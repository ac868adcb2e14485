"""TFLite UNIDIRECTIONAL_SEQUENCE_LSTM with TFLM's integer arithmetic (aotc/ops/sequence/qlstm.py):
int8 activations and int16x8 (int16 activations), int8 weights, int16 cell state.

Each model is built here with the flatbuffers builder (per-tensor int8 weights, biases at scale
input x weights as TFLite's converter writes them, hidden and cell states variable tensors) and
fed 8 input vectors spanning the input type's range (random, the extremes, zeros) one after
the other: TFLite Micro's interpreter keeps its variables (the states) from invoke to invoke,
and so does aotc's state buffer. Every output must be bit-exact with TFLM's. The op updates
both states in place in the state buffer (no copy kernel, "in place" slots).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as S
from stateful_tflite import tflm_frames
from test_tflite_lstm import lstm_refusal
from tflite_builder import Net, options

import aotc

N_VECTORS = 8


def qlstm_model(act: type = np.int8, batch: int = 2, steps: int = 3, n_in: int = 5,
                hidden: int = 6, time_major: bool = False, cell_clip: float = 0.0,
                cell_scale: float = 2.0 ** -11, seed: int = 0, peephole: bool = False,
                projection: bool = False, layer_norm: bool = False, cifg: bool = False
                ) -> bytes:
    """One integer LSTM layer: input [batch, steps, n_in] (time-major: [steps, batch, n_in])
    of type ``act`` (int8 or int16), output the same type at the hidden state's scale."""
    rng = np.random.default_rng(seed)
    net = Net(False, seed=seed)
    wide = np.dtype(act) == np.int16
    shape = (steps, batch, n_in) if time_major else (batch, steps, n_in)
    sx, zx = (1 / 8192, 0) if wide else (1 / 40, 3)
    sh, zh = (1 / 16384, 0) if wide else (1 / 128, -2)
    x = net._tensor(shape, act, "input0", None, sx, zx)
    net.inputs.append(x)
    none = -1

    def weight(rows: int, cols: int, scale: float) -> int:
        w = rng.normal(scale=scale, size=(rows, cols))
        s = float(np.abs(w).max() / 127)
        return net._tensor(w.shape, np.int8, f"w{len(net.tensors)}",
                           np.clip(np.round(w / s), -127, 127).astype(np.int8), s, 0)

    w_in = [weight(hidden, n_in, 0.6) for _ in range(4)]
    w_rec = [weight(hidden, hidden, 0.4) for _ in range(4)]
    biases = []
    for g, w in enumerate(w_in):
        sb = float(np.float32(sx) * np.float32(net.tensors[w].quantization.scale[0]))
        b = rng.normal(scale=0.5, size=hidden) + (1.0 if g == 1 else 0.0)  # forget bias
        bt = np.int64 if wide else np.int32
        biases.append(net._tensor((hidden,), bt, f"b{g}", np.round(b / sb).astype(bt), sb, 0))
    ins = [x, none if cifg else w_in[0], *w_in[1:], none if cifg else w_rec[0], *w_rec[1:]]
    ins += [weight(1, hidden, 0.3) for _ in range(3)] if peephole else [none] * 3
    ins += [none if cifg else biases[0], *biases[1:]]
    ins += [weight(hidden, hidden, 0.3), none] if projection else [none, none]
    h = net._tensor((batch, hidden), act, "output_state", None, sh, zh)
    c = net._tensor((batch, hidden), np.int16, "cell_state", None, cell_scale, 0)
    for t in (h, c):
        net.tensors[t].isVariable = True
    ins += [h, c]
    ins += [weight(1, hidden, 0.3) for _ in range(4)] if layer_norm else [none] * 4
    out_shape = (steps, batch, hidden) if time_major else (batch, steps, hidden)
    y = net._tensor(out_shape, act, "out", None, sh, zh)
    opts = options("UnidirectionalSequenceLSTMOptions", fusedActivationFunction=4,
                   cellClip=cell_clip, projClip=0.0, timeMajor=time_major)
    net.op_into("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y])
    net.ops[-1].builtinOptionsType = S.BuiltinOptions.UnidirectionalSequenceLSTMOptions
    net.ops[-1].builtinOptions = opts
    return net.build([y])


def vectors(act: type, shape: tuple[int, ...], seed: int = 1) -> list[np.ndarray]:
    """N_VECTORS inputs spanning the type's range: uniform over all of it, the minimum, the
    maximum, zeros, and alternating extremes."""
    info = np.iinfo(act)
    rng = np.random.default_rng(seed)
    xs = [rng.integers(info.min, info.max + 1, size=shape).astype(act) for _ in range(4)]
    xs += [np.full(shape, info.min, act), np.full(shape, info.max, act),
           np.zeros(shape, act)]
    alt = np.where(np.indices(shape).sum(axis=0) % 2, info.max, info.min).astype(act)
    return xs + [alt]


def _compile(tmp: Path, model: bytes, **kw: object) -> aotc.Bundle:
    src = tmp / "lstm.tflite"
    src.write_bytes(model)
    return aotc.compile(src, tmp / "out", name="lstm", **kw)


CASES = {
    "int8": {},
    "int8_time_major": {"time_major": True},
    "int8_batch1_long": {"batch": 1, "steps": 7, "n_in": 12, "hidden": 16, "seed": 3},
    "int8_cell_clip": {"cell_clip": 0.5, "seed": 4},
    "int8_cell_scale_2^-15": {"cell_scale": 2.0 ** -15, "seed": 5},
    "int8_cell_scale_2^-9": {"cell_scale": 2.0 ** -9, "seed": 6},
    "int16": {"act": np.int16},
    "int16_time_major": {"act": np.int16, "time_major": True, "seed": 7},
    "int16_cell_clip": {"act": np.int16, "cell_clip": 1.0, "hidden": 9, "seed": 8},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_integer_lstm_bit_exact_with_tflm(case: str, tmp_path: Path) -> None:
    kw = CASES[case]
    model = qlstm_model(**kw)  # type: ignore[arg-type]
    act = kw.get("act", np.int8)
    b = _compile(tmp_path, model)
    assert "QLstm" in {n.op for n in b.compilation.graph.nodes}
    assert len(b.kernels) == 1  # the LSTM kernel alone: no copy of the states
    meta = json.loads((b.directory / "bundle.json").read_text())
    assert [s["written"] for s in meta["state"]["slots"]] == ["in place", "in place"]
    r = b.load()
    (spec,) = r.meta["inputs"]
    xs = vectors(act, tuple(spec["shape"]))  # type: ignore[arg-type]
    ref = tflm_frames(model, xs)
    got = [r.run({spec["name"]: x})["out"] for x in xs]
    for k, (o, e) in enumerate(zip(got, ref)):
        assert np.array_equal(o.reshape(e.shape), e), f"vector {k}: {o} != TFLM {e}"
    # the vectors exercise the gates: outputs vary, and not only at the rails
    allv = np.concatenate([e.ravel() for e in ref]).astype(np.int64)
    info = np.iinfo(act)
    assert len(np.unique(allv)) > 10 and ((allv > info.min) & (allv < info.max)).mean() > 0.5
    r.reset()  # the states start again from TFLM's initial values
    o = r.run({spec["name"]: xs[0]})["out"]
    assert np.array_equal(o.reshape(ref[0].shape), ref[0])


@pytest.mark.parametrize("act", [np.int8, np.int16], ids=["int8", "int16"])
def test_qlstm_numpy_reference_matches_tflm(act: type, tmp_path: Path) -> None:
    """The op's numpy reference (what per-node verification compares the kernel with) is
    TFLM's arithmetic too: one vector from the initial states."""
    from aotc.ops.sequence.qlstm import QLstm

    model = qlstm_model(act=act, seed=12)
    b = _compile(tmp_path, model)
    g = b.compilation.graph
    (node,) = [n for n in g.nodes if n.op == "QLstm"]
    consts = {v.name: v.const for v in g.constants()}
    w_in, w_rec, bias = (consts[i] for i in node.inputs[1:4])
    (spec,) = b.load().meta["inputs"]
    x = vectors(act, tuple(spec["shape"]))[0]
    zh = -2 if act == np.int8 else 0  # the hidden state's zero point in qlstm_model
    h0 = np.full((2, 6), zh, act)
    attrs = {k: v for k, v in node.attrs.items() if not k.startswith("_")}
    y, _, _ = QLstm().reference(x, w_in, w_rec, bias, h0, np.zeros((2, 6), np.int16), **attrs)
    (ref,) = tflm_frames(model, [x])
    assert np.array_equal(y.reshape(ref.shape), ref)


@pytest.mark.parametrize("kw, needle", [
    ({"peephole": True}, "peepholes in an int8 LSTM: not supported (TFLM's integer LSTM"),
    ({"projection": True}, "projection in an int8 LSTM"),
    ({"layer_norm": True, "act": np.int16}, "layer normalisation in an int16 LSTM"),
    ({"cifg": True}, "CIFG or missing gate tensors in an int8 LSTM"),
])
def test_integer_lstm_variants_tflm_lacks_are_refused(kw, needle, tmp_path):
    model = qlstm_model(**kw)
    assert needle in lstm_refusal(model, tmp_path, listing=False)
    from tflite_micro.python.tflite_micro import runtime

    with pytest.raises(RuntimeError, match="failed to allocate"):  # TFLM refuses them too
        runtime.Interpreter.from_bytes(model, arena_size=1 << 20)


@pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="needs qemu-system-arm")
@pytest.mark.parametrize("kw", [{}, {"batch": 1, "steps": 4, "n_in": 9, "hidden": 16, "seed": 9,
                                     "time_major": True}], ids=["tiles_4_2", "tiles_8"])
def test_integer_lstm_dsp_on_cortex_m4f(kw: dict, tmp_path: Path) -> None:
    """The DSP extension's schedule (SMLAD, tiles of outputs, an odd input count, a narrower
    last tile) against TFLM, the states carried from run to run on the board."""
    model = qlstm_model(**kw)
    b = _compile(tmp_path, model, target="cortex-m4f")
    board = b.load(board="cortex-m4f")
    (spec,) = board.meta["inputs"]
    xs = vectors(np.int8, tuple(spec["shape"]))[:3]
    ref = tflm_frames(model, xs)
    for k, x in enumerate(xs):
        o = board.run({spec["name"]: x})["out"]
        assert np.array_equal(o.reshape(ref[k].shape), ref[k]), f"vector {k}"


@pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="needs qemu-system-arm")
@pytest.mark.parametrize("board", ["cortex-m0plus", "cortex-m55"])
@pytest.mark.parametrize("act", [np.int8, np.int16], ids=["int8", "int16"])
def test_integer_lstm_on_other_boards(board: str, act: type, tmp_path: Path) -> None:
    """No DSP extension (the scalar loops) and Helium's core (the SMLAD schedule; int16x8 the
    scalar int64 loops): bit-exact with TFLM, the states carried from run to run."""
    model = qlstm_model(act=act, hidden=8)
    b = _compile(tmp_path, model, target=board)
    r = b.load(board=board)
    (spec,) = r.meta["inputs"]
    xs = vectors(act, tuple(spec["shape"]))[:3]
    ref = tflm_frames(model, xs)
    for k, x in enumerate(xs):
        o = r.run({spec["name"]: x})["out"]
        assert np.array_equal(o.reshape(ref[k].shape), ref[k]), f"vector {k}"


CMSIS_NN = Path(__file__).resolve().parents[3] / "shared" / "third_party" / "cmsis-nn"


@pytest.mark.parametrize("kw", [{}, {"time_major": True, "cell_clip": 0.5, "seed": 4}],
                         ids=["batch_major", "time_major_clip"])
def test_integer_lstm_cmsis_nn_backend_bit_exact(kw: dict, tmp_path: Path) -> None:
    """--byoc cmsis-nn hands the int8 LSTM to arm_lstm_unidirectional_s8 (the pure C path on
    the host), its states in aotc's state buffer: bit-exact with TFLM over the 8 vectors."""
    if not (CMSIS_NN / "Include" / "arm_nnfunctions.h").is_file():
        pytest.fail(f"pinned CMSIS-NN not found at {CMSIS_NN} (../shared/third_party)")
    model = qlstm_model(**kw)
    b = _compile(tmp_path, model, byoc=("cmsis-nn",), cmsis_nn_path=str(CMSIS_NN))
    assert [ls.backend for ls in b.compilation.lowered] == ["cmsis-nn"]
    r = b.load()
    (spec,) = r.meta["inputs"]
    xs = vectors(np.int8, tuple(spec["shape"]))
    ref = tflm_frames(model, xs)
    for k, x in enumerate(xs):
        o = r.run({spec["name"]: x})["out"]
        assert np.array_equal(o.reshape(ref[k].shape), ref[k]), f"vector {k}"
