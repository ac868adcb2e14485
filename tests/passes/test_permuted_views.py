"""PermuteView (aotc.passes.layout.permuted_views): a Transpose read only by convolutions
becomes no kernel; the convs index its source with permuted strides. Checked against
onnxruntime (float rtol/atol 1e-5; int8 within 1 LSB in --requant onnx) on the generic, DSP
(cortex-m4f) and Helium (cortex-m55) schedules, which must give the generic build's bytes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import aotc
from aotc.verification.run import onnxruntime_outputs

NHWC = (1, 7, 6, 5)


def _model(quant: bool, group: int = 1, two_readers: bool = False,
           other_reader: bool = False, kernel: int = 3,
           shape: tuple[int, ...] = NHWC) -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    c = shape[3]
    cout = c if group > 1 else 4
    dt = TensorProto.INT8 if quant else TensorProto.FLOAT
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2])]
    inits = []
    outs = []
    readers = 2 if two_readers else 1
    for k in range(readers):
        w = rng.normal(size=(cout, c // group, kernel, kernel)).astype(np.float32)
        attrs = (dict(kernel_shape=[3, 3], pads=[1, 0, 1, 2], strides=[1, 2], group=group)
                 if kernel == 3 else dict(kernel_shape=[kernel, kernel], group=group))
        if quant:
            inits += [numpy_helper.from_array(np.clip(np.round(w * 40), -127, 127)
                                              .astype(np.int8), f"w{k}"),
                      numpy_helper.from_array(np.full(cout, 0.02, np.float32), f"ws{k}"),
                      numpy_helper.from_array(np.zeros(cout, np.int8), f"wz{k}")]
            nodes += [helper.make_node("QLinearConv", ["t", "xs", "xz", f"w{k}", f"ws{k}",
                                                      f"wz{k}", "ys", "yz"], [f"y{k}"], **attrs)]
        else:
            inits.append(numpy_helper.from_array(w, f"w{k}"))
            nodes.append(helper.make_node("Conv", ["t", f"w{k}"], [f"y{k}"], **attrs))
        outs.append(f"y{k}")
    if quant:
        inits += [numpy_helper.from_array(np.float32(0.05), "xs"),
                  numpy_helper.from_array(np.int8(3), "xz"),
                  numpy_helper.from_array(np.float32(0.3), "ys"),
                  numpy_helper.from_array(np.int8(-2), "yz")]
    if other_reader:
        nodes.append(helper.make_node("Relu" if not quant else "Identity", ["t"], ["r"]))
        outs.append("r")
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", dt, list(shape))],
                          [helper.make_tensor_value_info(o, dt, None) for o in outs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _input(quant: bool, shape: tuple[int, ...] = NHWC) -> np.ndarray:
    rng = np.random.default_rng(4)
    if quant:
        return rng.integers(-128, 128, shape).astype(np.int8)
    return rng.normal(size=shape).astype(np.float32)


CASES = {"conv": {}, "depthwise": {"group": NHWC[3]}, "two_convs": {"two_readers": True},
         # a 1x1 conv of even channels on 24 pixels (the DSP schedule's 4-pixel word columns)
         "pointwise": {"kernel": 1, "shape": (1, 4, 6, 8)}}


@pytest.mark.parametrize("quant", [False, True], ids=["float", "int8"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_permuted_input_conv(case, quant, tmp_path):
    model = _model(quant, **CASES[case])
    x = _input(quant, CASES[case].get("shape", NHWC))
    want = onnxruntime_outputs(model, {"x": x})
    bundles = {t: aotc.compile(model, tmp_path / str(t), name="m", requant="onnx", target=t)
               for t in (None, "cortex-m4f", "cortex-m55")}
    ops = [n.op for n in bundles[None].compilation.graph.nodes]
    assert "Transpose" not in ops and "PermuteView" in ops, ops
    generic = bundles[None].load().run({"x": x})
    for name, w in want.items():
        if quant:
            diff = np.abs(generic[name].astype(np.int32) - w.astype(np.int32)).max()
            assert diff <= 1, (name, diff)
        else:
            np.testing.assert_allclose(generic[name], w, rtol=1e-5, atol=1e-5)
    for t in ("cortex-m4f", "cortex-m55"):
        got = bundles[t].load().run({"x": x})  # the intrinsics' C twins on the host
        for name in want:
            if quant:
                np.testing.assert_array_equal(got[name], generic[name], err_msg=t)
            else:
                np.testing.assert_allclose(got[name], generic[name], rtol=1e-6, atol=1e-6)


def test_transpose_with_another_reader_stays_a_kernel(tmp_path):
    model = _model(False, other_reader=True)
    x = _input(False)
    b = aotc.compile(model, tmp_path, name="m")
    ops = [n.op for n in b.compilation.graph.nodes]
    assert "Transpose" in ops and "PermuteView" not in ops, ops
    want = onnxruntime_outputs(model, {"x": x})
    got = b.load().run({"x": x})
    for name, w in want.items():
        np.testing.assert_allclose(got[name], w, rtol=1e-5, atol=1e-5)


def test_permuted_view_on_cortex_m4f_in_qemu(tmp_path):
    model = _model(True, group=NHWC[3])
    x = _input(True)
    b = aotc.compile(model, tmp_path, name="m", target="cortex-m4f")
    host = b.load().run({"x": x})
    board = b.load("cortex-m4f").run({"x": x})
    np.testing.assert_array_equal(board["y0"], host["y0"])


@pytest.mark.parametrize("pool", ["MaxPool", "AveragePool"])
def test_permuted_input_pool(pool, tmp_path):
    """Pools read X[[n, c, *pos]] too; a Transpose before one is a view (float; the int8
    QLinearAveragePool: tests/frontend's AVERAGE_POOL_2D on a graph input)."""
    attrs = dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1])
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
             helper.make_node(pool, ["t"], ["y"], **attrs)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     list(NHWC))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = _input(False)
    b = aotc.compile(model, tmp_path, name="m")
    ops = [n.op for n in b.compilation.graph.nodes]
    assert "Transpose" not in ops and "PermuteView" in ops, ops
    np.testing.assert_allclose(b.load().run({"x": x})["y"],
                               onnxruntime_outputs(model, {"x": x})["y"], rtol=1e-6, atol=1e-6)
