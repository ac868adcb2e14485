"""float16 weights behind DEQUANTIZE (what TFLite's float16 post-training quantisation writes):
folded to float32 at compile time, so the kernels see float32 weights; the outputs match
LiteRT's reference kernels within rtol/atol 1e-5. ``--keep-float16-weights`` (float16 kept in
flash) is not implemented and is refused with a one-line error."""

from __future__ import annotations

import numpy as np
from ai_edge_litert import schema_py_generated as S
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


def test_keep_float16_weights_is_refused(tmp_path, capsys):
    path = tmp_path / "m.tflite"
    path.write_bytes(_model())
    assert cli_main(["compile", str(path), "-o", str(tmp_path / "out"),
                     "--keep-float16-weights"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--keep-float16-weights is not implemented" in err[0], err
