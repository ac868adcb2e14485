"""TFLite MEAN, SUM, REDUCE_MAX and REDUCE_MIN on int8: bit-exact with TensorFlow Lite Micro's
Python interpreter (its reduce_common.cc integer arithmetic: aotc.ops.quant.reduce) on random
shapes, axes (negative ones too), keep_dims and input/output parameters that differ, several
random inputs each plus the ends of the int8 range. float32 against LiteRT's reference kernels
(rtol/atol 1e-5). The ONNX QDQ form (DequantizeLinear -> ReduceMean -> QuantizeLinear) follows
the same arithmetic under ``--requant tflite`` and onnxruntime's float arithmetic (within 1 LSB)
under ``--requant onnx``.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from tflite_builder import Net, interpret, interpret_tflm, options

import aotc

# (input shape, axes, keep_dims, (in scale, in zp), (out scale, out zp))
CASES = [
    ((1, 6, 6, 4), [1, 2], True, (0.05, -3), (0.02, 7)),
    ((1, 6, 6, 4), [1, 2], False, (0.05, -3), (0.05, -3)),
    ((1, 5, 7, 3), [2], True, (0.1, 10), (0.03, -20)),
    ((2, 3, 4, 5), [-1], False, (0.02, -128), (0.02, 127)),
    ((1, 4, 9, 6), [1, 2, 3], False, (0.07, 0), (0.001, 5)),
    ((3, 10), [1], True, (0.3, 4), (0.7, -1)),
    ((4, 3, 5), [0, 2], False, (0.01, -50), (0.2, 0)),
    ((1, 13, 1, 8), [1], True, (0.05, 0), (0.05, 0)),
    ((1, 7, 7, 16), [1, 2], True, (0.023, -11), (0.0097, -4)),  # 49: not a power of two
]


def _reduce_model(code: str, shape, axes, keep, qin, qout) -> bytes:
    net = Net(True)
    x = net._tensor(shape, np.int8, "x", None, *qin)
    net.inputs.append(x)
    rank = len(shape)
    red = {a % rank for a in axes}
    out_shape = [1 if d in red else s for d, s in enumerate(shape) if keep or d not in red]
    y = net._tensor(out_shape, np.int8, "y", None, *qout)
    net.op_into(code, [x, net.ints(axes)], [y])
    net.ops[-1].builtinOptionsType = 27  # ReducerOptions
    net.ops[-1].builtinOptions = options("ReducerOptions", keepDims=keep)
    return net.build([y])


def _inputs(shape, seed):
    rng = np.random.default_rng(seed)
    xs = [rng.integers(-128, 128, size=shape, dtype=np.int8) for _ in range(4)]
    xs += [np.full(shape, -128, np.int8), np.full(shape, 127, np.int8)]
    return xs


def _aotc(model: bytes, tmp, xs, **kw):
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "m.tflite"
    path.write_bytes(model)
    bundle = aotc.compile(path, tmp / "out", name="m", **kw)
    runner = bundle.load()
    name_in = runner.meta["inputs"][0]["name"]
    name_out = runner.meta["outputs"][0]["name"]
    ops = {n.op for n in bundle.compilation.graph.nodes}
    return [runner.run({name_in: x})[name_out] for x in xs], ops


@pytest.mark.parametrize("code", ["MEAN", "SUM"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_int8_mean_sum_bit_exact_with_tflm(code, case, tmp_path):
    shape, axes, keep, qin, qout = CASES[case]
    if code == "SUM":  # a sum needs a coarser output scale to stay in range
        qout = (qout[0] * 8, qout[1])
    model = _reduce_model(code, shape, axes, keep, qin, qout)
    xs = _inputs(shape, case)
    got, ops = _aotc(model, tmp_path, xs)
    assert "QReduce" in ops, ops  # integer arithmetic, no float in the kernel
    for k, (g, x) in enumerate(zip(got, xs)):
        want = interpret_tflm(model, [x])[0]
        assert g.shape == want.shape and g.dtype == want.dtype
        diff = np.flatnonzero(g.astype(np.int32) != want.astype(np.int32))
        assert diff.size == 0, (f"{code} case {case} input {k}: {diff.size} elements differ, "
                                f"first at {diff[0]}: {g.ravel()[diff[0]]} vs "
                                f"{want.ravel()[diff[0]]}")


@pytest.mark.parametrize("code", ["REDUCE_MAX", "REDUCE_MIN"])
def test_int8_max_min_bit_exact_with_tflm(code, tmp_path):
    shape, axes = (2, 5, 4, 3), [1, -1]
    for keep in (True, False):
        model = _reduce_model(code, shape, axes, keep, (0.05, -3), (0.05, -3))
        xs = _inputs(shape, 3)
        got, ops = _aotc(model, tmp_path / str(keep), xs)
        assert "QuantizeLinear" not in ops and "DequantizeLinear" not in ops, ops
        for g, x in zip(got, xs):
            np.testing.assert_array_equal(g, interpret_tflm(model, [x])[0])


def test_max_with_differing_parameters_is_refused(tmp_path):
    model = _reduce_model("REDUCE_MAX", (1, 4, 4, 2), [1], False, (0.05, -3), (0.1, 0))
    path = tmp_path / "m.tflite"
    path.write_bytes(model)
    with pytest.raises(aotc.AotcError, match="needs the input's scale and zero point"):
        aotc.compile(path, tmp_path / "out", name="m")


@pytest.mark.parametrize("code", ["MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN"])
def test_float_reductions_match_litert(code, tmp_path):
    net = Net(False)
    shape = (2, 5, 4, 3)
    x = net.input(shape)
    y = net.op(code, [x, net.ints([1, -2])], (2, 3), options("ReducerOptions", keepDims=False))
    model = net.build([y])
    xs = [np.random.default_rng(0).normal(size=shape).astype(np.float32)]
    got, _ = _aotc(model, tmp_path, xs)
    np.testing.assert_allclose(got[0], interpret(model, xs)[0][0], rtol=1e-5, atol=1e-5)


def _qdq_mean(shape, axes, keep, qin, qout, dt=np.int8) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.float32(qin[0]), "sx"),
             numpy_helper.from_array(np.array(qin[1], dt), "zx"),
             numpy_helper.from_array(np.float32(qout[0]), "sy"),
             numpy_helper.from_array(np.array(qout[1], dt), "zy")]
    opset = 17 if dt == np.int8 else 21  # int16 DequantizeLinear from opset 21
    if opset >= 18:  # axes an input
        inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
        mean = helper.make_node("ReduceMean", ["xf", "axes"], ["m"], keepdims=int(keep))
    else:
        mean = helper.make_node("ReduceMean", ["xf"], ["m"], axes=axes, keepdims=int(keep))
    nodes = [helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xf"]), mean,
             helper.make_node("QuantizeLinear", ["m", "sy", "zy"], ["y"])]
    rank = len(shape)
    red = {a % rank for a in axes}
    out_shape = [1 if d in red else s for d, s in enumerate(shape) if keep or d not in red]
    et = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    g = helper.make_graph(nodes, "qdq_mean", [helper.make_tensor_value_info("x", et, shape)],
                          [helper.make_tensor_value_info("y", et, out_shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset == 17 else 10
    return m


@pytest.mark.parametrize("case", [0, 2, 4, 8])
def test_onnx_qdq_reduce_mean_follows_tflm_under_requant_tflite(case, tmp_path):
    import onnxruntime as ort

    shape, axes, keep, qin, qout = CASES[case]
    onnx_model = _qdq_mean(shape, axes, keep, qin, qout)
    tfl_model = _reduce_model("MEAN", shape, axes, keep, qin, qout)
    path = tmp_path / "m.onnx"
    onnx.save(onnx_model, path)
    sess = ort.InferenceSession(onnx_model.SerializeToString(),
                                providers=["CPUExecutionProvider"])
    xs = _inputs(shape, case)
    for mode in ("tflite", "onnx"):
        bundle = aotc.compile(path, tmp_path / mode, name="m", requant=mode)
        runner = bundle.load()
        ops = {n.op for n in bundle.compilation.graph.nodes}
        assert ("QReduce" in ops) == (mode == "tflite"), ops
        for x in xs:
            got = runner.run({"x": x})["y"]
            if mode == "tflite":
                np.testing.assert_array_equal(got, interpret_tflm(tfl_model, [x])[0])
            else:
                want = sess.run(None, {"x": x})[0]
                assert np.abs(got.astype(np.int32) - want).max() <= 1



def _int16_tflite(model: bytes) -> bytes:
    import flatbuffers
    from ai_edge_litert import schema_py_generated as S

    m = S.ModelT.InitFromObj(S.Model.GetRootAs(model, 0))
    for t in m.subgraphs[0].tensors:
        if t.type == S.TensorType.INT8:
            t.type = S.TensorType.INT16
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


@pytest.mark.parametrize("case", [0, 2, 3, 8])
def test_int16_qdq_mean_bit_exact_with_tflm(case, tmp_path):
    """int16 (zero point 0, as the 16x8 converter writes it): the ONNX QDQ form at opset 21
    (the TFLite importer's opset 17 has no int16 DequantizeLinear) against TFLM running the
    int16 MEAN."""
    shape, axes, keep, qin, qout = CASES[case]
    qin, qout = (qin[0] / 256, 0), (qout[0] / 256, 0)
    tfl = _int16_tflite(_reduce_model("MEAN", shape, axes, keep, qin, qout))
    m = _qdq_mean(shape, axes, keep, qin, qout, np.int16)
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    bundle = aotc.compile(path, tmp_path / "out", name="m")
    assert "QReduce" in {n.op for n in bundle.compilation.graph.nodes}
    runner = bundle.load()
    rng = np.random.default_rng(case)
    xs = [rng.integers(-32768, 32768, size=shape, dtype=np.int16) for _ in range(4)]
    xs += [np.full(shape, -32768, np.int16), np.full(shape, 32767, np.int16)]
    for x in xs:
        np.testing.assert_array_equal(runner.run({"x": x})["y"], interpret_tflm(tfl, [x])[0])
