"""ONNX models that carry their state as graph inputs and outputs, compiled with --state IN=OUT
(docs/streaming.md): the state leaves the API for the caller's state buffer, zero after reset.

Each model runs frame by frame in the bundle and in onnxruntime, which is fed the state by hand
(the previous frame's state outputs, zeros first); outputs within atol = rtol = 1e-5 (float32,
the same ops, possibly summed in another order). After reset() the first frames again.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import aotc
from aotc.errors import AotcError

N_FRAMES = 20
H, X = 6, 8


def _vi(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _init(name: str, arr: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(arr.astype(np.float32), name)


def lstm_model(seed: int = 0) -> onnx.ModelProto:
    """A one-step LSTM cell (a VAD's h/c as graph inputs and outputs) and a dense head."""
    rng = np.random.default_rng(seed)
    inits = [_init("W", rng.normal(scale=0.4, size=(1, 4 * H, X))),
             _init("R", rng.normal(scale=0.4, size=(1, 4 * H, H))),
             _init("B", rng.normal(scale=0.1, size=(1, 8 * H))),
             _init("V", rng.normal(scale=0.5, size=(H, 2))),
             numpy_helper.from_array(np.array([1, H], np.int64), "flat")]
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B", "", "h", "c"], ["", "h_next", "c_next"],
                              hidden_size=H),
             helper.make_node("Reshape", ["h_next", "flat"], ["h_flat"]),
             helper.make_node("MatMul", ["h_flat", "V"], ["y"])]
    g = helper.make_graph(nodes, "vad", [_vi("x", [1, 1, X]), _vi("h", [1, 1, H]),
                                         _vi("c", [1, 1, H])],
                          [_vi("y", [1, 2]), _vi("h_next", [1, 1, H]), _vi("c_next", [1, 1, H])],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def leaky_model(read_after: bool) -> onnx.ModelProto:
    """s' = tanh(0.5 s + x); y = 2 s' (the old state dead after the kernel writing s': it is
    written in place) or y = s' * s (the old state read after it: copied at the end)."""
    nodes = [helper.make_node("Mul", ["s", "half"], ["sh"]),
             helper.make_node("Add", ["sh", "x"], ["pre"]),
             helper.make_node("Tanh", ["pre"], ["s_next"]),
             helper.make_node("Mul", ["s_next", "s" if read_after else "two"], ["y"])]
    inits = [_init("half", np.full((1, X), 0.5)), _init("two", np.full((1, X), 2.0))]
    g = helper.make_graph(nodes, "leaky", [_vi("x", [1, X]), _vi("s", [1, X])],
                          [_vi("y", [1, X]), _vi("s_next", [1, X])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _frames(shape: tuple[int, ...], n: int = N_FRAMES, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=shape).astype(np.float32) for _ in range(n)]


def _ort_frames(model: onnx.ModelProto, xs: list[np.ndarray], pairs: dict[str, str]
                ) -> list[np.ndarray]:
    """onnxruntime frame by frame, the state fed by hand (zeros first)."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim]
              for i in model.graph.input}
    state = {k: np.zeros(shapes[k], np.float32) for k in pairs}
    outs = []
    for x in xs:
        res = dict(zip([o.name for o in model.graph.output],
                       sess.run(None, {"x": x, **state})))
        state = {k: res[v] for k, v in pairs.items()}
        outs.append(res["y"])
    return outs


def _compile(tmp_path: Path, model: onnx.ModelProto, pairs: dict[str, str], **kw: object
             ) -> aotc.Bundle:
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    return aotc.compile(path, tmp_path / "b", name="m",
                        state=tuple(f"{k}={v}" for k, v in pairs.items()), **kw)


@pytest.mark.parametrize("io_in_arena", [False, True], ids=["io", "io_in_arena"])
def test_lstm_state_frame_by_frame(tmp_path: Path, io_in_arena: bool) -> None:
    model, pairs = lstm_model(), {"h": "h_next", "c": "c_next"}
    xs = _frames((1, 1, X))
    ref = _ort_frames(model, xs, pairs)
    b = _compile(tmp_path, model, pairs, io_in_arena=io_in_arena)
    meta = json.loads((b.directory / "bundle.json").read_text())
    assert [t["name"] for t in meta["inputs"]] == ["x"]
    assert [t["name"] for t in meta["outputs"]] == ["y"]
    assert meta["state"]["bytes"] == 32 + 24  # two float32[1, 1, 6] slots, 16-byte aligned
    r = b.load()
    outs = [r.run({"x": x})["y"] for x in xs]
    for k, (o, e) in enumerate(zip(outs, ref)):
        np.testing.assert_allclose(o, e, rtol=1e-5, atol=1e-5, err_msg=f"frame {k}")
    r.reset()
    np.testing.assert_allclose(r.run({"x": xs[0]})["y"], ref[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("read_after", [False, True], ids=["in_place", "copied"])
def test_state_written_in_place_when_dead(tmp_path: Path, read_after: bool) -> None:
    model, pairs = leaky_model(read_after), {"s": "s_next"}
    xs = _frames((1, X))
    ref = _ort_frames(model, xs, pairs)
    b = _compile(tmp_path, model, pairs)
    slot = json.loads((b.directory / "bundle.json").read_text())["state"]["slots"][0]
    assert slot["written"] == ("copied at the end" if read_after else "in place")
    kernels = b.kernels
    assert any("copy" in k for k in kernels) == read_after
    r = b.load()
    for k, x in enumerate(xs):
        np.testing.assert_allclose(r.run({"x": x})["y"], ref[k], rtol=1e-5, atol=1e-5,
                                   err_msg=f"frame {k}")


@pytest.mark.parametrize("pair, message", [
    ("s", "expected INPUT=OUTPUT"),
    ("q=s_next", "'q' is not a graph input"),
    ("s=nope", "'nope' is not a graph output"),
    ("x=y", None),  # both exist with equal types: accepted (a state, however odd)
])
def test_state_option_errors(tmp_path: Path, pair: str, message: str | None) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(leaky_model(False), path)
    if message is None:
        aotc.compile(path, tmp_path / "b", name="m", state=(pair,))
        return
    with pytest.raises(AotcError, match=message):
        aotc.compile(path, tmp_path / "b", name="m", state=(pair,))


def test_state_type_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(lstm_model(), path)
    with pytest.raises(AotcError, match=r"the input is float32\[1, 1, 8\] but the output is "
                                        r"float32\[1, 1, 6\]"):
        aotc.compile(path, tmp_path / "b", name="m", state=("x=h_next",))


def test_package_refuses_a_bundle_with_state(tmp_path: Path) -> None:
    from aotc.package import write_package

    b = _compile(tmp_path, leaky_model(False), {"s": "s_next"})
    with pytest.raises(AotcError, match="packages of streaming bundles"):
        write_package(b.directory, "zephyr", tmp_path / "pkg")


def test_verify_runs_frames_and_refuses_per_node(tmp_path: Path) -> None:
    """verify compares consecutive frames against onnxruntime fed the state by hand;
    --per-node (one call from the graph inputs) is refused in one line."""
    path = tmp_path / "m.onnx"
    onnx.save(lstm_model(), path)
    rep = aotc.verify(path, tmp_path / "b", name="m", state=("h=h_next", "c=c_next"),
                      inputs=[{"x": x} for x in _frames((1, 1, X), 5)], atol=1e-5, rtol=1e-5)
    assert rep["vectors"] == 5
    with pytest.raises(AotcError, match="--per-node compares one call"):
        aotc.verify(path, tmp_path / "b2", name="m", state=("h=h_next", "c=c_next"),
                    per_node=True)
