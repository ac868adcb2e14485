"""TFLite resource variables as state that lives between calls (docs/streaming.md).

The models (stateful_tflite.py) run for 24 consecutive frames in the bundle and in TFLite
Micro's interpreter, which keeps its variables between invoke calls, fed the same frames: int8
outputs bit-exact, float32 within rtol = atol = 1e-5 (the same float ops in possibly another
order). After ``reset()`` the first frames give the first frames' outputs again (a fresh TFLM
interpreter's: TFLM's own reset() refills the variables with their default, zero point or 0,
and does not run CALL_ONCE again, so it is not the reference there). On cortex-m4f in QEMU a
few frames, the state carried between firmware runs, against TFLM.

SVDF (aotc/ops/sequence/svdf.py), whose activation state is a variable tensor: float32 (within
rtol = atol = 1e-5 of TFLM), int8 with an int16 state and time weights, and int8 with an int8
state (zero point 2), bit-exact with TFLM over 24 frames; the kernel writes the next state over
the old one in the state buffer (no copy per frame).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from stateful_tflite import accumulator, frames, ring, svdf, tflm_frames

import aotc
from aotc.errors import AotcError

N_FRAMES = 24
MODELS = {
    "accumulator": (lambda q: accumulator(q), (1, 8)),
    "accumulator_noinit": (lambda q: accumulator(q, init=False), (1, 8)),
    "ring": (ring, (1, 1, 4)),
}
# Bytes of each model's state buffer: float32 / int8 (slots aligned to 16 bytes).
STATE_BYTES = {"accumulator": (32, 8), "accumulator_noinit": (32, 8), "ring": (48, 12)}


def _compile(tmp_path: Path, model: bytes, name: str = "m", **kw: object) -> aotc.Bundle:
    src = tmp_path / "model.tflite"
    src.write_bytes(model)
    return aotc.compile(src, tmp_path / "bundle", name=name, **kw)


def _check(outs: list[np.ndarray], ref: list[np.ndarray], quant: bool) -> None:
    for k, (o, e) in enumerate(zip(outs, ref)):
        o = o.reshape(e.shape)
        if quant:
            assert np.array_equal(o, e), f"frame {k}: {o} != TFLM {e}"
        else:
            np.testing.assert_allclose(o, e, rtol=1e-5, atol=1e-5, err_msg=f"frame {k}")


@pytest.mark.parametrize("quant", [False, True], ids=["float32", "int8"])
@pytest.mark.parametrize("which", sorted(MODELS))
def test_frames_match_tflm(tmp_path: Path, which: str, quant: bool) -> None:
    make, shape = MODELS[which]
    model = make(quant)
    xs = frames(quant, shape, N_FRAMES)
    ref = tflm_frames(model, xs)
    assert not all(np.array_equal(ref[0], r) for r in ref[1:]), "the state changes nothing"
    b = _compile(tmp_path, model)
    assert b.compilation.state_bytes == STATE_BYTES[which][quant]
    header = (b.directory / "m.h").read_text()
    assert f"#define M_STATE_BYTES {STATE_BYTES[which][quant]}" in header
    assert "int m_reset(void *state);" in header
    meta = json.loads((b.directory / "bundle.json").read_text())
    assert [s["name"] for s in meta["inputs"]] == ["input0"]  # the state is not an input
    assert len(meta["outputs"]) == 1
    # Nothing reads the old state after the kernel writing the new one: written in place.
    assert [s["written"] for s in meta["state"]["slots"]] == ["in place"]
    r = b.load()
    outs = [r.run({"input0": x})["out"] for x in xs]
    _check(outs, ref, quant)
    r.reset()
    _check([r.run({"input0": x})["out"] for x in xs[:3]], ref[:3], quant)


def test_state_not_in_arena_and_reported(tmp_path: Path) -> None:
    """The state is neither in the arena nor in its bound; the memory report gives its bytes."""
    b = _compile(tmp_path, ring(True))
    c = b.compilation
    assert c.state_bytes == 12
    planned = {r.name for r in c.liveness.reqs}
    assert not planned & {sl.input for sl in c.schedule.state}
    rep = aotc.inspect(tmp_path / "model.tflite", name="m")
    assert rep["memory"]["state_bytes"] == 12


def test_stateless_model_has_no_state_api(tmp_path: Path) -> None:
    from tflite_builder import Net

    net = Net(False)
    x = net.input([1, 4])
    model = net.build([net.op("RELU", [x], [1, 4])])
    b = _compile(tmp_path, model)
    header = (b.directory / "m.h").read_text()
    assert "STATE" not in header and "m_reset" not in header
    assert "void *arena, size_t arena_size);" in header
    assert "state" not in json.loads((b.directory / "bundle.json").read_text())


def test_call_once_with_computed_initialiser_is_refused(tmp_path: Path) -> None:
    """An initialiser aotc cannot evaluate at compile time: one line naming the operator."""
    from ai_edge_litert import schema_py_generated as S

    model = bytearray(accumulator(False))
    m = S.ModelT.InitFromObj(S.Model.GetRootAs(bytes(model), 0))
    init = m.subgraphs[1]
    relu = S.OperatorCodeT()
    relu.builtinCode = relu.deprecatedBuiltinCode = S.BuiltinOperator.RELU
    relu.version = 1
    m.operatorCodes.append(relu)
    op = S.OperatorT()
    op.opcodeIndex = len(m.operatorCodes) - 1
    op.inputs = np.array([int(init.operators[1].inputs[1])], np.int32)
    op.outputs = np.array([int(init.operators[1].inputs[1])], np.int32)
    init.operators.insert(1, op)
    import flatbuffers

    fb = flatbuffers.Builder(1024)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    with pytest.raises(AotcError, match="CALL_ONCE subgraph 1: operator 1 is RELU"):
        _compile(tmp_path, bytes(fb.Output()))


@pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="needs qemu-system-arm")
@pytest.mark.parametrize("quant", [False, True], ids=["float32", "int8"])
def test_frames_on_cortex_m4f(tmp_path: Path, quant: bool) -> None:
    model = accumulator(quant)
    xs = frames(quant, (1, 8), 4)
    ref = tflm_frames(model, xs)
    b = _compile(tmp_path, model, target="cortex-m4f")
    board = b.load(board="cortex-m4f")
    outs = [board.run({"input0": x})["out"] for x in xs[:3]]
    _check(outs, ref[:3], quant)
    board.reset()
    _check([board.run({"input0": xs[0]})["out"]], ref[:1], quant)


SVDF_CASES = {"float32": (False, np.int16), "int8_int16_state": (True, np.int16),
              "int8_int8_state": (True, np.int8)}
# [1, 80] activation state: float32 / int16 / int8.
SVDF_STATE_BYTES = {"float32": 320, "int8_int16_state": 160, "int8_int8_state": 80}


@pytest.mark.parametrize("rank", [1, 2])
@pytest.mark.parametrize("case", sorted(SVDF_CASES))
def test_svdf_frames_match_tflm(tmp_path: Path, case: str, rank: int) -> None:
    quant, state_dtype = SVDF_CASES[case]
    model = svdf(quant, state_dtype, rank=rank)
    xs = frames(quant, (1, 16), N_FRAMES)
    ref = tflm_frames(model, xs)
    b = _compile(tmp_path, model)
    assert b.compilation.state_bytes == SVDF_STATE_BYTES[case]
    meta = json.loads((b.directory / "bundle.json").read_text())
    assert [s["written"] for s in meta["state"]["slots"]] == ["in place"]
    assert len(b.kernels) == 1  # the SVDF kernel alone: no copy of the state
    r = b.load()
    _check([r.run({"input0": x})["out"] for x in xs], ref, quant)
    r.reset()
    _check([r.run({"input0": x})["out"] for x in xs[:2]], ref[:2], quant)


def test_svdf_int16x8_refused_as_tflm_refuses_it(tmp_path: Path) -> None:
    """TFLM's SVDF takes float32 or int8 input (svdf_common.cc's Prepare): there is no int16x8
    SVDF to be bit-exact with, so aotc refuses it in one line."""
    from tflite_micro.python.tflite_micro import runtime

    model = svdf(True, np.int16, int16x8=True)
    with pytest.raises(RuntimeError, match="failed to allocate"):
        runtime.Interpreter.from_bytes(model, arena_size=1 << 20)
    with pytest.raises(AotcError, match="operator 0 SVDF .*: int16 is not supported; aotc "
                                        "converts SVDF for float32, int8"):
        _compile(tmp_path, model)


@pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="needs qemu-system-arm")
def test_svdf_int8_on_cortex_m4f(tmp_path: Path) -> None:
    model = svdf(True, np.int16)
    xs = frames(True, (1, 16), 3)
    ref = tflm_frames(model, xs)
    b = _compile(tmp_path, model, target="cortex-m4f")
    board = b.load(board="cortex-m4f")
    _check([board.run({"input0": x})["out"] for x in xs], ref, True)
