"""float16 weights behind DEQUANTIZE (what TFLite's float16 post-training quantisation writes):
folded to float32 at compile time, so the kernels see float32 weights; the outputs match
LiteRT's reference kernels within rtol/atol 1e-5 (TFLM refuses DEQUANTIZE of float16).

``--keep-float16-weights`` (aotc/lower/half.py) stores them as float16 bits and converts them as
the kernels load them: the outputs are bit-identical with the folded float32 path, the weights
half the bytes (the synthetic model here and the two float16 face detectors of
tests/fixtures/tflite_zoo, 8 vectors each, also against LiteRT). The C conversion
(aotc_f16_f32) is checked on all 65,536 float16 bit patterns against numpy's conversion, and an
ONNX model's float16 initializers cast to float32 against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import test_tflite_zoo as zoo
from ai_edge_litert import schema_py_generated as S
from onnx import TensorProto, numpy_helper
from onnx import helper as oh
from opcheck import run_on_boards
from test_tflite_zoo import META, ZOO
from tflite_builder import Net, interpret, options

import aotc
from aotc.cli import main as cli_main


def _f16_const(net: Net, arr: np.ndarray) -> int:
    """A FLOAT16 constant and its DEQUANTIZE to float32."""
    t = net._tensor(arr.shape, np.float32, f"h{len(net.tensors)}", arr)
    net.tensors[t].type = S.TensorType.FLOAT16
    net.buffers[net.tensors[t].buffer].data = np.frombuffer(
        arr.astype(np.float16).tobytes(), np.uint8)
    out = net._tensor(arr.shape, np.float32, f"dq{len(net.tensors)}")
    net.op_into("DEQUANTIZE", [t], [out])
    return out


def _model() -> bytes:
    net = Net(False, seed=2)
    x = net.input((1, 8, 8, 3))
    w = _f16_const(net, net.rng.normal(scale=0.5, size=(6, 3, 3, 3)))
    b = _f16_const(net, net.rng.normal(scale=0.1, size=6))
    c = net.op("CONV_2D", [x, w, b], (1, 8, 8, 6), options(
        "Conv2DOptions", padding=0, strideH=1, strideW=1, fusedActivationFunction=1))
    r = net.op("RESHAPE", [c, net.ints([1, 384])], (1, 384))
    fw = _f16_const(net, net.rng.normal(scale=0.1, size=(5, 384)))
    return net.build([net.op("FULLY_CONNECTED", [r, fw], (1, 5),
                             options("FullyConnectedOptions"))])


def test_float16_weights_fold_to_float32(tmp_path):
    model = _model()
    path = tmp_path / "m.tflite"
    path.write_bytes(model)
    bundle = aotc.compile(path, tmp_path / "out", name="m")
    runner = bundle.load()
    assert {"DequantizeLinear", "Cast"}.isdisjoint(n.op for n in bundle.compilation.graph.nodes)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.normal(size=(1, 8, 8, 3)).astype(np.float32)
        got = runner.run({runner.meta["inputs"][0]["name"]: x})
        np.testing.assert_allclose(got[runner.meta["outputs"][0]["name"]],
                                   interpret(model, [x])[0][0], rtol=1e-5, atol=1e-5)


def _bits(runner, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    got = runner.run(feeds)
    return [got[t["name"]].view(np.uint32) for t in runner.meta["outputs"]]


def test_keep_float16_weights(tmp_path, capsys):
    """The CLI option: uint16 weights in the C, half the weight bytes, the same output bits
    as the folded float32 path, LiteRT within rtol/atol 1e-5."""
    model = _model()
    path = tmp_path / "m.tflite"
    path.write_bytes(model)
    folded = aotc.compile(path, tmp_path / "f32", name="m")
    assert cli_main(["compile", str(path), "-o", str(tmp_path / "cli"), "--name", "m",
                     "--keep-float16-weights"]) == 0, capsys.readouterr().err
    kept = aotc.compile(path, tmp_path / "f16", name="m", keep_float16_weights=True)
    ws = kept.compilation.weights.values()
    assert {a.dtype for _, a in ws} == {np.dtype(np.uint16)}
    assert 2 * kept.compilation.weights_bytes == folded.compilation.weights_bytes
    assert "aotc_f16_f32(" in (tmp_path / "f16" / "m.c").read_text()
    a, b = folded.load(), kept.load()
    name = a.meta["inputs"][0]["name"]
    rng = np.random.default_rng(1)
    for x in [rng.normal(size=(1, 8, 8, 3)).astype(np.float32) for _ in range(3)]:
        ya, yb = _bits(a, {name: x}), _bits(b, {name: x})
        assert all(np.array_equal(u, v) for u, v in zip(ya, yb))
        np.testing.assert_allclose(yb[0].view(np.float32), interpret(model, [x])[0][0],
                                   rtol=1e-5, atol=1e-5)
    run_on_boards(kept, {name: x}, b.run({name: x}), tmp_path / "fw")


@pytest.mark.parametrize("name", ["face_detection_short_range_fp16",
                                  "face_detection_full_range_sparse_fp16"])
def test_face_detectors_keep_float16(name, tmp_path):
    """The float16 face detectors (DEQUANTIZE; DENSIFY of sparse float16) with their weights
    kept float16: bit-identical with the folded build on the zoo's 8 vectors, LiteRT within
    the zoo test's tolerances, the weights half the bytes (all of them are float16)."""
    path = ZOO / META[name]["file"]
    model = path.read_bytes()
    it = zoo._litert(model)
    sets = zoo.vectors(model, it.get_input_details())
    ref_name, refs = zoo.reference(model, sets, len(it.get_output_details()))
    folded = aotc.compile(path, tmp_path / "f32", name="m")
    kept = aotc.compile(path, tmp_path / "f16", name="m", keep_float16_weights=True)
    f32, f16 = folded.compilation.weights_bytes, kept.compilation.weights_bytes
    assert f16 <= 0.501 * f32, (f16, f32)
    a, b = folded.load(), kept.load()
    ins = [t["name"] for t in a.meta["inputs"]]
    for v, (xs, want) in enumerate(zip(sets, refs)):
        ya, yb = _bits(a, dict(zip(ins, xs))), _bits(b, dict(zip(ins, xs)))
        for k, (u, w) in enumerate(zip(ya, yb)):
            assert np.array_equal(u, w), f"{name} vector {v} output {k}: not bit-identical"
        zoo._compare(name, f"vector {v}", [y.view(np.float32) for y in yb], want,
                     it.get_output_details(), {}, ref_name)


def _onnx_f16(tmp_path, w: np.ndarray, nodes, inputs, outputs):  # type: ignore[no-untyped-def]
    g = oh.make_graph([oh.make_node("Cast", ["w16"], ["w"], to=TensorProto.FLOAT), *nodes],
                      "g", inputs, outputs, [numpy_helper.from_array(w, "w16")])
    path = tmp_path / "m.onnx"
    onnx.save(oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)]), path)
    return path


def test_half_to_float_on_every_bit_pattern(tmp_path):
    """aotc_f16_f32 on all 65,536 float16 values (subnormals, infinities, NaNs with their
    payloads, signed zeros): a Gather from an ONNX float16 initializer cast to float32, its
    output bits against numpy's float16 -> float32 conversion."""
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    path = _onnx_f16(tmp_path, h, [oh.make_node("Gather", ["w", "i"], ["y"])],
                     [oh.make_tensor_value_info("i", TensorProto.INT64, [1 << 16])],
                     [oh.make_tensor_value_info("y", TensorProto.FLOAT, [1 << 16])])
    kept = aotc.compile(path, tmp_path / "out", name="m", keep_float16_weights=True)
    assert kept.compilation.weights_bytes == 2 << 16
    idx = np.random.default_rng(0).permutation(1 << 16).astype(np.int64)
    got = kept.load().run({"i": idx})["y"]
    np.testing.assert_array_equal(got.view(np.uint32), h[idx].astype(np.float32).view(np.uint32))


def test_half_to_float_on_the_boards(tmp_path):
    """The same on the QEMU boards of AOTC_TEST_BOARDS (FPU and soft-float), on every 61st
    bit pattern and the special ones (zeros, the subnormal ends, the normal ends, infinities,
    quiet and signalling NaNs): against numpy on the host, the boards against the host."""
    special = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00,
               0x7C00, 0xFC00, 0x7C01, 0x7DFF, 0x7E00, 0xFE00, 0x7FFF, 0xFFFF]
    bits = np.unique(np.r_[np.arange(0, 1 << 16, 61), special]).astype(np.uint16)
    h = bits.view(np.float16)
    path = _onnx_f16(tmp_path, h, [oh.make_node("Gather", ["w", "i"], ["y"])],
                     [oh.make_tensor_value_info("i", TensorProto.INT32, [h.size])],
                     [oh.make_tensor_value_info("y", TensorProto.FLOAT, [h.size])])
    kept = aotc.compile(path, tmp_path / "out", name="m", keep_float16_weights=True)
    feeds = {"i": np.random.default_rng(1).permutation(h.size).astype(np.int32)}
    got = kept.load().run(feeds)
    np.testing.assert_array_equal(got["y"].view(np.uint32),
                                  h[feeds["i"]].astype(np.float32).view(np.uint32))
    run_on_boards(kept, feeds, got, tmp_path / "fw")


def test_onnx_float16_initializer_cast_to_float(tmp_path):
    """An ONNX float16 initializer read through Cast to float32: imported as float32; kept
    float16 with the option (half the bytes, the same output bits); onnxruntime within 1e-5."""
    rng = np.random.default_rng(3)
    path = _onnx_f16(tmp_path, rng.normal(size=(16, 8)).astype(np.float16),
                     [oh.make_node("MatMul", ["x", "w"], ["y"])],
                     [oh.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                     [oh.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
    folded = aotc.compile(path, tmp_path / "f32", name="m")
    kept = aotc.compile(path, tmp_path / "f16", name="m", keep_float16_weights=True)
    assert 2 * kept.compilation.weights_bytes == folded.compilation.weights_bytes == 512
    x = rng.normal(size=(4, 16)).astype(np.float32)
    ya, yb = _bits(folded.load(), {"x": x}), _bits(kept.load(), {"x": x})
    assert np.array_equal(ya[0], yb[0])
    want = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
    np.testing.assert_allclose(yb[0].view(np.float32), want, rtol=1e-5, atol=1e-5)
