"""uint8 TFLite models (the older post-training format): aotc computes them on the int8 kernels
(value - 128, zero point - 128: the same real numbers), keeps the weights one byte and the
bundle's inputs and outputs uint8 as the model declares them. TFLM refuses uint8, so the
reference is LiteRT's reference kernels (OpResolverType.BUILTIN_REF): bit-exact.

The models: each test's graph is built in float and in int8 (tflite_builder.float_and_int8,
per-tensor weights), then rewritten as a uint8 model the way the old converter wrote them:
activations uint8 with zero point + 128, weights re-quantised asymmetric uint8 (zero points
other than 128), biases re-scaled to input scale x weight scale.
"""

from __future__ import annotations

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as S
from tflite_builder import Net, float_and_int8, interpret, options

import aotc

WEIGHTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def to_uint8(model: bytes) -> bytes:
    import flatbuffers

    m = S.ModelT.InitFromObj(S.Model.GetRootAs(model, 0))
    sg = m.subgraphs[0]
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in m.operatorCodes]
    names = {v: k for k, v in S.BuiltinOperator.__dict__.items() if isinstance(v, int)}
    weights: dict[int, tuple[int, int]] = {}  # weight tensor -> (input, bias)
    for op in sg.operators:
        if names[codes[op.opcodeIndex]] in WEIGHTED:
            ins = list(op.inputs)
            weights[ins[1]] = (ins[0], ins[2] if len(ins) > 2 else -1)

    def data(t: int, dt: type) -> np.ndarray:
        return np.frombuffer(bytes(m.buffers[sg.tensors[t].buffer].data), dt)

    def put(t: int, arr: np.ndarray) -> None:
        m.buffers[sg.tensors[t].buffer].data = np.frombuffer(arr.tobytes(), np.uint8)

    for k, t in enumerate(sg.tensors):
        if t.type != S.TensorType.INT8:
            continue
        q = t.quantization
        t.type = S.TensorType.UINT8
        if k in weights:  # asymmetric uint8, as the old converter wrote weights
            real = data(k, np.int8).astype(np.float64) * q.scale[0]
            lo, hi = min(real.min(), 0.0), max(real.max(), 0.0)
            s = np.float32((hi - lo) / 255)
            zp = int(np.clip(round(-lo / s), 0, 255))
            put(k, np.clip(np.round(real / s) + zp, 0, 255).astype(np.uint8))
            x, b = weights[k]
            if b >= 0:
                bs = sg.tensors[b].quantization
                sx = sg.tensors[x].quantization.scale[0]
                new = np.float32(sx * s)
                put(b, np.round(data(b, np.int32) * (bs.scale[0] / new)).astype(np.int32))
                bs.scale, bs.zeroPoint = np.array([new], np.float32), np.zeros(1, np.int64)
            q.scale, q.zeroPoint = np.array([s], np.float32), np.array([zp], np.int64)
        else:
            if t.buffer and m.buffers[t.buffer].data is not None:
                put(k, (data(k, np.int8).astype(np.int16) + 128).astype(np.uint8))
            q.zeroPoint = np.asarray(q.zeroPoint, np.int64) + 128
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _conv(net: Net, x: int, c: int, cout: int, k: int = 3, act: int = 3) -> int:
    w = net.weight(net.rng.normal(scale=0.5, size=(cout, k, k, c)), axis=None)
    b = net.bias(net.rng.normal(scale=0.1, size=cout), x, w)
    return w, b


def conv(net: Net) -> list[int]:
    x = net.input((1, 8, 8, 3))
    w, b = _conv(net, x, 3, 6)
    return [net.op("CONV_2D", [x, w, b], (1, 8, 8, 6), options(
        "Conv2DOptions", padding=0, strideH=1, strideW=1, fusedActivationFunction=3))]


def depthwise(net: Net) -> list[int]:
    x = net.input((1, 7, 7, 4))
    w = net.weight(net.rng.normal(scale=0.5, size=(1, 3, 3, 4)), axis=None)
    b = net.bias(net.rng.normal(scale=0.1, size=4), x, w)
    return [net.op("DEPTHWISE_CONV_2D", [x, w, b], (1, 4, 4, 4), options(
        "DepthwiseConv2DOptions", padding=0, strideH=2, strideW=2, depthMultiplier=1,
        fusedActivationFunction=1))]


def fully_connected(net: Net) -> list[int]:
    x = net.input((2, 20))
    w = net.weight(net.rng.normal(scale=0.3, size=(7, 20)), axis=None)
    b = net.bias(net.rng.normal(scale=0.1, size=7), x, w)
    return [net.op("FULLY_CONNECTED", [x, w, b], (2, 7), options("FullyConnectedOptions"))]


def add(net: Net) -> list[int]:
    x = net.input((1, 5, 5, 4))
    y = net.input((1, 5, 5, 4))
    return [net.op("ADD", [x, y], (1, 5, 5, 4), options("AddOptions"))]


def resize_nearest(net: Net) -> list[int]:
    """SSD feature pyramids (Coral's traffic model) upsample uint8 maps: a movement."""
    x = net.input((1, 3, 4, 5))
    return [net.op("RESIZE_NEAREST_NEIGHBOR", [x, net.ints([6, 8])], (1, 6, 8, 5),
                   options("ResizeNearestNeighborOptions"))]


def pools_softmax(net: Net) -> list[int]:
    x = net.input((1, 6, 6, 5))
    a = net.op("AVERAGE_POOL_2D", [x], (1, 3, 3, 5), options(
        "Pool2DOptions", padding=1, strideH=2, strideW=2, filterHeight=2, filterWidth=2))
    m = net.op("MAX_POOL_2D", [a], (1, 1, 1, 5), options(
        "Pool2DOptions", padding=1, strideH=3, strideW=3, filterHeight=3, filterWidth=3))
    r = net.op("RESHAPE", [m, net.ints([1, 5])], (1, 5))
    return [net.op("SOFTMAX", [r], (1, 5), options("SoftmaxOptions", beta=1.0))]


def kws_like(net: Net) -> list[int]:
    """conv -> depthwise -> average pool -> reshape -> fully connected -> softmax, and the
    conv output as a second output."""
    x = net.input((1, 10, 6, 1))
    w, b = _conv(net, x, 1, 8)
    c = net.op("CONV_2D", [x, w, b], (1, 10, 6, 8), options(
        "Conv2DOptions", padding=0, strideH=1, strideW=1, fusedActivationFunction=1))
    dw = net.weight(net.rng.normal(scale=0.5, size=(1, 3, 3, 8)), axis=None)
    db = net.bias(net.rng.normal(scale=0.1, size=8), c, dw)
    d = net.op("DEPTHWISE_CONV_2D", [c, dw, db], (1, 10, 6, 8), options(
        "DepthwiseConv2DOptions", padding=0, strideH=1, strideW=1, depthMultiplier=1,
        fusedActivationFunction=3))
    p = net.op("AVERAGE_POOL_2D", [d], (1, 1, 1, 8), options(
        "Pool2DOptions", padding=1, strideH=10, strideW=6, filterHeight=10, filterWidth=6))
    r = net.op("RESHAPE", [p, net.ints([1, 8])], (1, 8))
    fw = net.weight(net.rng.normal(scale=0.5, size=(4, 8)), axis=None)
    fb = net.bias(net.rng.normal(scale=0.1, size=4), r, fw)
    f = net.op("FULLY_CONNECTED", [r, fw, fb], (1, 4), options("FullyConnectedOptions"))
    return [net.op("SOFTMAX", [f], (1, 4), options("SoftmaxOptions", beta=1.0)), c]


def resize(net: Net) -> list[int]:
    """RESIZE_BILINEAR by 2 (ties: LiteRT's uint8 kernel rounds the non-negative sum half
    up, which value - 128 would round toward -inf), half-pixel, and align_corners."""
    x = net.input((1, 5, 7, 3))
    outs = []
    for size, kw in (((10, 14), {}), ((9, 12), {"halfPixelCenters": True}),
                     ((8, 11), {"alignCorners": True})):
        outs.append(net.op("RESIZE_BILINEAR", [x, net.ints(list(size))], (1, *size, 3),
                           options("ResizeBilinearOptions", **kw)))
    return outs


SPECS = {"CONV_2D": (conv, [(1, 8, 8, 3)]), "DEPTHWISE_CONV_2D": (depthwise, [(1, 7, 7, 4)]),
         "FULLY_CONNECTED": (fully_connected, [(2, 20)]),
         "ADD": (add, [(1, 5, 5, 4), (1, 5, 5, 4)]),
         "RESIZE_NEAREST_NEIGHBOR": (resize_nearest, [(1, 3, 4, 5)]),
         "pools_softmax": (pools_softmax, [(1, 6, 6, 5)]),
         "kws_like": (kws_like, [(1, 10, 6, 1)]),
         "RESIZE_BILINEAR": (resize, [(1, 5, 7, 3)])}


def _vectors(shapes, seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = [[rng.integers(0, 256, s, dtype=np.uint8) for s in shapes] for _ in range(4)]
    out += [[np.full(s, v, np.uint8) for s in shapes] for v in (0, 255, 128)]
    return out


@pytest.mark.parametrize("case", sorted(SPECS))
def test_uint8_model_bit_exact_with_litert(case, tmp_path):
    spec, shapes = SPECS[case]
    model = to_uint8(float_and_int8(spec, shapes)["int8"][0])
    path = tmp_path / "m.tflite"
    path.write_bytes(model)
    bundle = aotc.compile(path, tmp_path / "out", name="m")
    runner = bundle.load()
    ins, outs = runner.meta["inputs"], runner.meta["outputs"]
    for t in (*ins, *outs):
        assert t["dtype"] == "uint8", t  # the bundle's I/O keeps the declared type
    g = bundle.compilation.graph
    for v in g.values.values():  # weights stay one byte
        if v.is_const and np.asarray(v.const).size > 16:
            assert np.asarray(v.const).dtype.itemsize == 1 or v.type.dtype.name == "int32", v
    for xs in _vectors(shapes, 0):
        got = runner.run({t["name"]: x for t, x in zip(ins, xs)})
        want = interpret(model, xs)[0]
        for t, w in zip(outs, want):
            assert got[t["name"]].dtype == w.dtype == np.uint8
            np.testing.assert_array_equal(got[t["name"]], w, err_msg=f"{case} {t['name']}")


def test_uint8_io_around_an_int8_model_bit_exact_with_tflm(tmp_path):
    """The converter's inference_input_type/output_type=uint8: QUANTIZE uint8 -> int8 at the
    input and int8 -> uint8 at the output of an int8 model, which TFLM runs: bit-exact with
    TFLM (the uint8 tensors become int8 with the same parameters, so each QUANTIZE is exact)."""
    from tflite_builder import interpret_tflm

    model8 = float_and_int8(conv, [(1, 8, 8, 3)])["int8"][0]
    m = S.ModelT.InitFromObj(S.Model.GetRootAs(model8, 0))
    sg = m.subgraphs[0]
    x8, y8 = int(sg.inputs[0]), int(sg.outputs[0])

    def u8_twin(t: int, name: str, zp_shift: int = 128) -> int:
        src = sg.tensors[t]
        u = S.TensorT()
        u.shape, u.type, u.name, u.buffer = src.shape, S.TensorType.UINT8, name, 0
        q = S.QuantizationParametersT()
        q.scale = np.asarray(src.quantization.scale, np.float32)
        q.zeroPoint = np.asarray(src.quantization.zeroPoint, np.int64) + zp_shift
        u.quantization = q
        sg.tensors.append(u)
        return len(sg.tensors) - 1

    xu, yu = u8_twin(x8, "image_u8"), u8_twin(y8, "out_u8", 150)  # output: other zero point
    code = S.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = S.BuiltinOperator.QUANTIZE
    code.version = 1
    m.operatorCodes.append(code)
    ops = []
    for i, o in ((xu, x8), (y8, yu)):
        op = S.OperatorT()
        op.opcodeIndex = len(m.operatorCodes) - 1
        op.inputs, op.outputs = np.array([i], np.int32), np.array([o], np.int32)
        ops.append(op)
    sg.operators = [ops[0], *sg.operators, ops[1]]
    sg.inputs, sg.outputs = np.array([xu], np.int32), np.array([yu], np.int32)
    import flatbuffers

    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    model = bytes(b.Output())
    path = tmp_path / "m.tflite"
    path.write_bytes(model)
    runner = aotc.compile(path, tmp_path / "out", name="m").load()
    for (x,) in _vectors([(1, 8, 8, 3)], 1):
        got = runner.run({"image_u8": x})["out_u8"]
        np.testing.assert_array_equal(got, interpret_tflm(model, [x])[0])


def test_uint8_arg_max_matches_litert(tmp_path):
    """ARG_MAX / ARG_MIN of a uint8 tensor (DeepLab's last op): the order of value - 128 is the
    order of the uint8 values; int32 and int64 outputs."""
    def spec(net: Net) -> list[int]:
        x = net.input((2, 6, 9))
        return [net.op("ARG_MAX", [x, net.ints([2])], (2, 6), options(
                    "ArgMaxOptions", outputType=S.TensorType.INT64), dtype=np.int64),
                net.op("ARG_MIN", [x, net.ints([1])], (2, 9), options(
                    "ArgMinOptions", outputType=S.TensorType.INT32), dtype=np.int32)]
    model = to_uint8(float_and_int8(spec, [(2, 6, 9)])["int8"][0])
    (tmp_path / "m.tflite").write_bytes(model)
    runner = aotc.compile(tmp_path / "m.tflite", tmp_path / "out", name="m").load()
    ins, outs = runner.meta["inputs"], runner.meta["outputs"]
    for xs in _vectors([(2, 6, 9)], 1):
        got = runner.run({ins[0]["name"]: xs[0]})
        for t, w in zip(outs, interpret(model, xs)[0]):
            np.testing.assert_array_equal(got[t["name"]], w)
