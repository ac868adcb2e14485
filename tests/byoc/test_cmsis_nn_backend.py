"""``--byoc cmsis-nn`` end to end: the MLPerf Tiny int8 models bit-exact with TensorFlow Lite
Micro's outputs (``output_tflm``) and with the same model compiled without the backend, on the
host (CMSIS-NN's pure C through cffi) and on QEMU boards (pure C, DSP, MVE paths); the partition
offloads what it should; no run-time transposes; the arena stays within the liveness bound plus
the library's scratch; every refusing check falls back to native code with right outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from opcheck import ort_run

import aotc
from aotc.cli import main as cli_main

CMSIS_NN = Path(__file__).resolve().parents[3] / "shared" / "third_party" / "cmsis-nn"
INT8_MODELS = ["kws_ref_model_int8_qdq", "vww_96_int8_qdq", "pretrainedResnet_int8_qdq",
               "ad01_int8_qdq", "str_ww_ref_model_int8_qdq"]
# Every kernel of these ops must go to CMSIS-NN in the MLPerf models.
OFFLOADED_OPS = {"QLinearConv", "QLinearMatMul", "QLinearAveragePool", "QLinearSoftmax",
                 "QLinearAdd"}


@pytest.fixture(scope="module")
def cmsis_nn() -> str:
    if not (CMSIS_NN / "Include" / "arm_nnfunctions.h").is_file():
        pytest.fail(f"pinned CMSIS-NN not found at {CMSIS_NN} (../shared/third_party)")
    return str(CMSIS_NN)


def _run_all(runner, meta, inputs: np.ndarray) -> np.ndarray:
    i, o = meta["inputs"][0]["name"], meta["outputs"][0]["name"]
    return np.stack([runner.run({i: x})[o] for x in inputs])


def _scratch(c) -> int:
    return max([n for ls in c.lowered for _, n in ls.scratch if ls.backend] + [0])


@pytest.mark.parametrize("stem", INT8_MODELS)
def test_mlperf_host_bit_exact(stem, mlperf_dir, tmp_path, cmsis_nn):
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    native = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path / "native", name="m")
    byoc = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path / "byoc", name="m",
                        byoc=("cmsis-nn",), cmsis_nn_path=cmsis_nn)
    host = byoc.load()
    got = _run_all(host, host.meta, vec["input"])
    want = vec["output_tflm"]
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    nat = native.load()
    np.testing.assert_array_equal(got, _run_all(nat, nat.meta, vec["input"]))

    c = byoc.compilation
    rows = {r.kernel: r for r in c.partition}
    steps = [ls.step.node for ls in c.lowered]
    # No run-time transposes: the layout pass cancelled or folded every one.
    assert not [n.name for n in steps if n.op == "Transpose"], [ls.kernel.name for ls in c.lowered]
    for n in steps:
        if n.op in OFFLOADED_OPS:
            assert rows[n.name].backend == "cmsis-nn", (n.name, rows[n.name].reason)
    assert any(ls.backend == "cmsis-nn" for ls in c.lowered)
    # RAM: within the native liveness bound plus the largest scratch CMSIS-NN asks for.
    assert c.plan.size <= native.compilation.lower_bound + _scratch(c), (
        c.plan.size, native.compilation.lower_bound, _scratch(c))
    src = (tmp_path / "byoc" / "m.c").read_text()
    assert '#include "arm_nnfunctions.h"' in src and "return AOTC_ERR_BACKEND;" in src
    cmake = (tmp_path / "byoc" / "CMakeLists.txt").read_text()
    assert "CMSIS_NN_PATH" in cmake and "target_link_libraries(m PUBLIC cmsis-nn)" in cmake
    # aotc never copies the library into the bundle.
    assert not list((tmp_path / "byoc").rglob("arm_*.c"))


# Boards: Cortex-M0+ code (pure C) on both M0+ boards: cortex-m0plus (the nRF51822's 16 KB of
# RAM and 256 KB of flash, on QEMU's Cortex-M0, which traps any instruction outside ARMv6-M) fits
# only the streaming wakeword model (KWS, VWW and IC need more RAM, AD more flash, natively
# too); rp2040 (the same code with the RP2040's memory) runs the other four. cortex-m4f runs the
# DSP path and cortex-m55 the MVE path on every model; cortex-m7 and cortex-m33 (DSP) and
# rv32imc (pure C on RISC-V) run KWS.
BOARD_CASES = [("cortex-m0plus", "str_ww_ref_model_int8_qdq")]
BOARD_CASES += [("rp2040", s) for s in INT8_MODELS if s != "str_ww_ref_model_int8_qdq"]
BOARD_CASES += [(b, s) for b in ("cortex-m4f", "cortex-m55") for s in INT8_MODELS]
BOARD_CASES += [(b, "kws_ref_model_int8_qdq") for b in ("cortex-m7", "cortex-m33", "rv32imc")]


@pytest.mark.parametrize("board,stem", BOARD_CASES)
def test_mlperf_board_bit_exact(board, stem, mlperf_dir, tmp_path, cmsis_nn):
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    b = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path, name="m", byoc=("cmsis-nn",),
                     cmsis_nn_path=cmsis_nn, target=board)
    meta = b.load().meta
    got = _run_all(b.load(board), meta, vec["input"][:2])
    want = vec["output_tflm"][:2]
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_portable_bundle_runs_on_mve_and_host(mlperf_dir, tmp_path, cmsis_nn):
    """Without --target the bundle runs on any board: scratch for the largest code path and the
    fully connected kernel sums behind #if defined(ARM_MATH_MVEI)."""
    stem = "ad01_int8_qdq"
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    b = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path, name="m", byoc=("cmsis-nn",),
                     cmsis_nn_path=cmsis_nn)
    assert "#if defined(ARM_MATH_MVEI)" in (tmp_path / "m.c").read_text()
    meta = b.load().meta
    for runner in (b.load(), b.load("cortex-m55")):
        got = _run_all(runner, meta, vec["input"][:2])
        np.testing.assert_array_equal(got.reshape(vec["output_tflm"][:2].shape),
                                      vec["output_tflm"][:2])


def test_inspect_partition_table(mlperf_dir, cmsis_nn, capsys):
    rc = cli_main(["inspect", str(mlperf_dir / "kws_ref_model_int8_qdq.onnx"), "--byoc",
                   "cmsis-nn", "--cmsis-nn-path", cmsis_nn])
    assert rc == 0
    out = capsys.readouterr().out
    table = out[out.index("partition:"):].splitlines()
    assert table[1].split() == ["kernel", "ops", "backend", "reason"]
    convs = [ln for ln in table if "QLinearConv" in ln]
    assert len(convs) == 9 and all("cmsis-nn" in ln and "conv2d" in ln for ln in convs)


# ----------------------------------------------------------------------------- refusals
def _qconv_model(*, x_dtype=TensorProto.INT8, w_zp=0, dilations=(1, 1), seed=0,
                 shape=(1, 4, 7, 7), kernel=(3, 3), pads=(1, 1, 1, 1), bias=500
                 ) -> tuple[onnx.ModelProto, np.ndarray]:
    rng = np.random.default_rng(seed)
    m = 6
    np_x = np.uint8 if x_dtype == TensorProto.UINT8 else np.int8
    lo, hi = np.iinfo(np_x).min, np.iinfo(np_x).max
    inits = {"xs": np.float32(0.05), "xz": np_x(3),
             "w": rng.integers(-127, 128, (m, 4, *kernel)).astype(np.int8),
             "ws": rng.uniform(0.002, 0.02, m).astype(np.float32),
             "wz": np.full(m, w_zp, np.int8), "ys": np.float32(0.1), "yz": np_x(lo + 100),
             "b": (rng.integers(-bias, bias, m) if bias < 2**30 else np.full(m, bias))
             .astype(np.int32)}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                            ["y"], pads=list(pads), dilations=list(dilations),
                            kernel_shape=list(kernel))
    g = helper.make_graph(
        [node], "q", [helper.make_tensor_value_info("x", x_dtype, list(shape))],
        [helper.make_tensor_value_info("y", x_dtype, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, rng.integers(lo, hi + 1, shape).astype(np_x)


REFUSALS = {
    # case: (model kwargs, compile kwargs, reason fragment)
    "uint8_activations": ({"x_dtype": TensorProto.UINT8}, {}, "input dtype uint8"),
    "weight_zero_point": ({"w_zp": 2}, {}, "weights must be symmetric"),
    "dilation": ({"dilations": (2, 2)}, {}, "dilations [2, 2] are not supported"),
    "requant_onnx": ({}, {"requant": "onnx"}, "--requant onnx"),
    "conv3d": ({"shape": (1, 4, 7, 7, 5)}, {}, "only 2-D convolutions"),
    "1xN_padding": ({"shape": (1, 4, 1, 12), "kernel": (1, 3), "pads": (0, 2, 0, 0)}, {},
                    "not TFLite-style"),
    "huge_bias": ({"bias": 2**31 - 1000}, {}, "int32 accumulator could overflow"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refused_kernels_fall_back_to_native(case, tmp_path, cmsis_nn):
    mk, ck, why = REFUSALS[case]
    if case == "conv3d":
        model, x = _qconv3d()
    else:
        model, x = _qconv_model(**mk)
    rep = aotc.inspect(model, byoc=("cmsis-nn",), cmsis_nn_path=cmsis_nn, **ck)
    (row,) = rep["partition"]
    assert row["backend"] == "native" and why in row["reason"], row
    b = aotc.compile(model, tmp_path, name="m", byoc=("cmsis-nn",), cmsis_nn_path=cmsis_nn, **ck)
    assert not b.compilation.libraries  # nothing offloaded: nothing to link
    got = b.load().run({"x": x})["y"]
    if case == "huge_bias":
        # onnxruntime's (and the reference evaluator's) int32 accumulator wraps here; aotc
        # defines the result as exact arithmetic would give it (docs/operators.md, QLinearConv):
        # computed here in float64 from the model's own numbers.
        from aotc.ops.nn.conv import Conv

        init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        acc = Conv().reference((x.astype(np.float64) - float(init["xz"])),
                               init["w"].astype(np.float64), pads=[1, 1, 1, 1])
        acc = acc + init["b"].astype(np.float64).reshape(1, -1, 1, 1)
        real = (np.float64(init["xs"]) * init["ws"].astype(np.float64)
                / np.float64(init["ys"])).reshape(1, -1, 1, 1)
        want = np.clip(np.rint(acc * real) + float(init["yz"]), -128, 127).astype(np.int8)
    else:
        want = ort_run(model, {"x": x})["y"]
    # onnxruntime requantises in float (round half to even), --requant tflite in fixed point:
    # a tie may round the other way (1 LSB); --requant onnx is exact.
    tol = 0 if ck.get("requant") == "onnx" else 1
    assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= tol


def _qconv3d() -> tuple[onnx.ModelProto, np.ndarray]:
    rng = np.random.default_rng(3)
    inits = {"xs": np.float32(0.05), "xz": np.int8(3),
             "w": rng.integers(-127, 128, (2, 4, 3, 3, 3)).astype(np.int8),
             "ws": np.float32(0.01), "wz": np.int8(0), "ys": np.float32(0.1), "yz": np.int8(-20)}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"],
                            kernel_shape=[3, 3, 3])
    g = helper.make_graph(
        [node], "q", [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 4, 5, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, rng.integers(-128, 128, (1, 4, 5, 5, 5)).astype(np.int8)


def test_native_kernel_between_offloaded_ones_gets_two_transposes(tmp_path, cmsis_nn):
    """conv (offloaded) -> dilated conv (refused: native, NCHW) -> conv (offloaded): the
    native conv reads the NHWC output in place (a permuted view), one transpose after it, and
    the right answer."""
    rng = np.random.default_rng(5)
    nodes, inits = [], {"s": np.float32(0.05), "z": np.int8(0), "wz": np.zeros(4, np.int8)}
    prev = "x"
    for k, dil in enumerate([1, 2, 1]):
        inits[f"w{k}"] = rng.integers(-60, 60, (4, 4, 3, 3)).astype(np.int8)
        inits[f"ws{k}"] = np.float32(0.01)
        nodes.append(helper.make_node(
            "QLinearConv", [prev, "s", "z", f"w{k}", f"ws{k}", "wz", "s", "z"], [f"y{k}"],
            pads=[dil, dil, dil, dil], dilations=[dil, dil], kernel_shape=[3, 3]))
        prev = f"y{k}"
    g = helper.make_graph(
        nodes, "q", [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 4, 6, 6])],
        [helper.make_tensor_value_info(prev, TensorProto.INT8, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    b = aotc.compile(model, tmp_path, name="m", byoc=("cmsis-nn",), cmsis_nn_path=cmsis_nn)
    ops = [(ls.step.node.op, ls.backend) for ls in b.compilation.lowered]
    # The graph input and output are NCHW: a transpose at each end, and after the native conv
    # (which reads its NHWC input through a PermuteView: no kernel before it).
    assert ops == [("Transpose", None), ("QLinearConv", "cmsis-nn"),
                   ("QLinearConv", None), ("Transpose", None), ("QLinearConv", "cmsis-nn"),
                   ("Transpose", None)], ops
    x = rng.integers(-128, 128, (1, 4, 6, 6)).astype(np.int8)
    got = b.load().run({"x": x})[prev]
    native = aotc.compile(model, tmp_path / "n", name="m").load().run({"x": x})[prev]
    np.testing.assert_array_equal(got, native)


# ----------------------------------------------------------------------------- pools, softmax,
# elementwise: one-node models, offloaded or refused, always equal to aotc's own kernels
def _ms_model(nodes, x_shapes, inits, out_dtype=TensorProto.INT8) -> onnx.ModelProto:
    g = helper.make_graph(
        nodes, "q", [helper.make_tensor_value_info(k, TensorProto.INT8, list(v))
                     for k, v in x_shapes.items()],
        [helper.make_tensor_value_info("y", out_dtype, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                               helper.make_opsetid("com.microsoft", 1)],
                             ir_version=8)


def _pool(op, ys=0.05, yz=-4, **attrs):
    inits = {"xs": np.float32(0.05), "xz": np.int8(-4), "ys": np.float32(ys), "yz": np.int8(yz)}
    return _ms_model([helper.make_node(op, ["x", "xs", "xz", "ys", "yz"], ["y"],
                                       domain="com.microsoft", **attrs)],
                     {"x": (1, 6, 9, 11)}, inits)


def _binary(op, b_shape=(1, 6, 9, 11)):
    inits = {"as": np.float32(0.05), "az": np.int8(-4), "bs": np.float32(0.02),
             "bz": np.int8(9), "ys": np.float32(0.07), "yz": np.int8(3)}
    return _ms_model([helper.make_node(op, ["x", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"],
                                       domain="com.microsoft")],
                     {"x": (1, 6, 9, 11), "b": b_shape}, inits)


def _softmax(shape, ys=1 / 256, yz=-128, xs=0.1):
    inits = {"xs": np.float32(xs), "xz": np.int8(5), "ys": np.float32(ys), "yz": np.int8(yz)}
    return _ms_model([helper.make_node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"],
                                       domain="com.microsoft", axis=-1, opset=13)],
                     {"x": shape}, inits)


def _maxpool(**attrs):
    return _ms_model([helper.make_node("MaxPool", ["x"], ["y"], **attrs)], {"x": (1, 6, 9, 11)},
                     {})


KERNEL_CASES = {
    # case: (model, offloaded?, reason fragment when refused)
    "avgpool_3x3_s2_pad": (lambda: _pool("QLinearAveragePool", kernel_shape=[3, 3],
                                         strides=[2, 2], pads=[1, 1, 1, 1]), True, ""),
    "avgpool_ceil": (lambda: _pool("QLinearAveragePool", kernel_shape=[2, 3], strides=[2, 2],
                                   ceil_mode=1), True, ""),
    "global_avgpool": (lambda: _pool("QLinearGlobalAveragePool"), True, ""),
    "avgpool_rescale": (lambda: _pool("QLinearAveragePool", ys=0.1, kernel_shape=[2, 2]), False,
                        "arm_avgpool_s8 does not requantise"),
    "avgpool_include_pad": (lambda: _pool("QLinearAveragePool", kernel_shape=[3, 3],
                                          pads=[1, 1, 1, 1], count_include_pad=1), False,
                            "count_include_pad=1"),
    "maxpool_3x3_s2_pad": (lambda: _maxpool(kernel_shape=[3, 3], strides=[2, 2],
                                            pads=[1, 0, 1, 2]), True, ""),
    "maxpool_dilated": (lambda: _maxpool(kernel_shape=[2, 2], dilations=[2, 2]), False,
                        "dilations [2, 2]"),
    "add": (lambda: _binary("QLinearAdd"), True, ""),
    "mul": (lambda: _binary("QLinearMul"), True, ""),
    "add_broadcast": (lambda: _binary("QLinearAdd", (1, 6, 1, 1)), False, "broadcasting"),
    "softmax_2d": (lambda: _softmax((3, 40)), True, ""),
    "softmax_4d": (lambda: _softmax((1, 2, 3, 40)), False, "4-D input"),
    "softmax_scale": (lambda: _softmax((3, 40), ys=1 / 128), False, "scale 1/256"),
    # input scales TFLM's Prepare rejects (multiplier not above 1) or that need 1 << 31
    "softmax_tiny_input_scale": (lambda: _softmax((3, 40), xs=2.0**-28), False, "above 2^-26"),
    "softmax_huge_input_scale": (lambda: _softmax((3, 40), xs=40.0), False, "shift of 31"),
}


@pytest.mark.parametrize("case", sorted(KERNEL_CASES))
def test_kernels_offloaded_or_refused_and_equal_to_native(case, tmp_path, cmsis_nn):
    make, offloaded, why = KERNEL_CASES[case]
    model = make()
    rng = np.random.default_rng(sum(map(ord, case)))
    feeds = {i.name: rng.integers(-128, 128, [d.dim_value for d in
                                              i.type.tensor_type.shape.dim]).astype(np.int8)
             for i in model.graph.input}
    feeds[model.graph.input[0].name].flat[:2] = [-128, 127]  # the extremes
    b = aotc.compile(model, tmp_path / "b", name="m", byoc=("cmsis-nn",), cmsis_nn_path=cmsis_nn)
    (row,) = b.compilation.partition
    if offloaded:
        assert row.backend == "cmsis-nn", row.reason
    else:
        assert row.backend == "native" and why in row.reason, row.reason
    got = b.load().run(feeds)["y"]
    native = aotc.compile(model, tmp_path / "n", name="m").load().run(feeds)["y"]
    np.testing.assert_array_equal(got, native)  # both TFLite's integer arithmetic: exact
    want = ort_run(model, feeds)["y"]
    # onnxruntime requantises in float: a tie may round the other way (1 LSB); its int8
    # softmax is float: within 1 LSB of TFLite's fixed point here.
    assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1


def test_mlperf_in_two_pools_on_board(mlperf_dir, tmp_path, cmsis_nn):
    """CMSIS-NN kernels (and their context buffers) planned into two memory pools on the
    cortex-m4f-pools board (docs/memory.md): bit-exact with TFLM in QEMU."""
    stem = "kws_ref_model_int8_qdq"
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    b = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path, name="m", byoc=("cmsis-nn",),
                     cmsis_nn_path=cmsis_nn, target="cortex-m4f-pools",
                     pools=("dtcm:8K:.dtcm", "sram:64K:.sram"))
    sizes = b.compilation.plan.pool_sizes
    assert 0 < sizes["dtcm"] <= 8192 and sizes["sram"] > 0
    meta = b.load().meta
    got = _run_all(b.load("cortex-m4f-pools"), meta, vec["input"][:2])
    want = vec["output_tflm"][:2]
    np.testing.assert_array_equal(got.reshape(want.shape), want)
