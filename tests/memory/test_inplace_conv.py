"""In-place convolutions (inplace_conv=True): a depthwise conv writes each output channel over
its dead input channel, a 1x1 conv each output pixel over its dead input pixel, through a
one-channel / one-pixel temporary (a stride-1 conv through a ring of output rows:
test_inplace_line.py). Outputs are bit-identical with the plain plan, and the MLPerf Tiny int8
models stay bit-exact with TFLM with a smaller arena."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlperf_check import assert_tflm_bytes
from onnx import TensorProto, helper, numpy_helper

import aotc
from aotc.compiler import CompileOptions, compile_model
from aotc.loops.builder import STACK_TEMP_MAX
from aotc.steps.inplace import _writes_behind_reads


def dw_pw_chain(channels: list[int], hw: int, dw_stride: int = 1, batch: int = 1, seed: int = 0):
    """x -> 3x3 conv -> (depthwise 3x3, Relu, 1x1 conv to the next width) per width step."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def conv(x: str, w_shape: tuple[int, ...], name: str, **attrs: object) -> str:
        w = (rng.standard_normal(w_shape) * 0.3).astype(np.float32)
        b = (rng.standard_normal(w_shape[0]) * 0.1).astype(np.float32)
        inits.extend([numpy_helper.from_array(w, f"{name}_w"),
                      numpy_helper.from_array(b, f"{name}_b")])
        nodes.append(helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [name], **attrs))
        return name

    c0 = channels[0]
    x = conv("x", (c0, 3, 3, 3), "stem", pads=[1, 1, 1, 1])
    for k, (c, m) in enumerate(zip(channels, channels[1:])):
        x = conv(x, (c, 1, 3, 3), f"dw{k}", group=c, pads=[1, 1, 1, 1],
                 strides=[dw_stride if k == 0 else 1] * 2)
        nodes.append(helper.make_node("Relu", [x], [f"r{k}"]))
        x = conv(f"r{k}", (m, c, 1, 1), f"pw{k}")
    graph = helper.make_graph(
        nodes, "dwpw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, hw, hw])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _depthwise_overwriting(x, w, pads, strides, dil):
    """A 2-D depthwise conv run the way an "element" in-place kernel runs: outputs in order,
    each stored at its own flat index of the one buffer that holds the input (which is
    truncated to the output's size afterwards)."""
    c, h, wd = x.shape
    kh, kw = w.shape[1:]
    oh = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    buf = x.reshape(-1).copy()
    for m in range(c):
        for i in range(oh):
            for j in range(ow):
                acc = 0.0
                for a in range(kh):
                    for b in range(kw):
                        y = i * strides[0] + a * dil[0] - pads[0]
                        z = j * strides[1] + b * dil[1] - pads[1]
                        if 0 <= y < h and 0 <= z < wd:
                            acc += buf[(m * h + y) * wd + z] * w[m, a, b]
                buf[(m * oh + i) * ow + j] = acc
    return buf[: c * oh * ow].reshape(c, oh, ow), (oh, ow)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 3), st.integers(1, 7), st.integers(1, 7), st.integers(1, 3),
       st.integers(1, 3), st.lists(st.integers(0, 2), min_size=4, max_size=4),
       st.lists(st.integers(1, 3), min_size=2, max_size=2),
       st.lists(st.integers(1, 2), min_size=2, max_size=2))
def test_element_mode_only_where_no_later_output_reads_what_it_overwrites(
        c, h, wd, kh, kw, pads, strides, dil):
    """_writes_behind_reads against an actual run that overwrites its input: when it says
    yes, that run gives the plain result (random inputs: a clobbered read would show)."""
    oh = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    if oh <= 0 or ow <= 0 or oh * ow > h * wd:
        return
    rng = np.random.default_rng(c * 1000 + h * 10 + wd)
    x = rng.standard_normal((c, h, wd))
    w = rng.standard_normal((c, kh, kw))
    got, _ = _depthwise_overwriting(x, w, pads, strides, dil)
    # The plain result: the same loops over an untouched copy.
    plain = np.zeros((c, oh, ow))
    for m in range(c):
        for i in range(oh):
            for j in range(ow):
                for a in range(kh):
                    for b in range(kw):
                        y = i * strides[0] + a * dil[0] - pads[0]
                        z = j * strides[1] + b * dil[1] - pads[1]
                        if 0 <= y < h and 0 <= z < wd:
                            plain[m, i, j] += x[m, y, z] * w[m, a, b]
    if _writes_behind_reads(c, (h, wd), (oh, ow), (kh, kw), pads[:2], strides, dil):
        np.testing.assert_allclose(got, plain, rtol=1e-12, atol=1e-12)


def test_element_mode_for_strided_not_for_stride_1():
    # VWW's downsampling depthwise (3x3, stride 2, pads 0/1 as TFLite SAME) and its 3x3 stride 1
    assert _writes_behind_reads(16, (48, 48), (24, 24), (3, 3), (0, 0), (2, 2), (1, 1))
    assert not _writes_behind_reads(8, (48, 48), (48, 48), (3, 3), (1, 1), (1, 1), (1, 1))


@pytest.mark.parametrize("channels,stride,batch", [
    ([8, 8, 8], 1, 1),          # same widths
    ([8, 4, 4], 2, 1),          # narrowing 1x1, strided depthwise
    ([4, 8, 8, 6], 1, 1),       # widening 1x1 (output larger than its input)
    ([6, 6, 6], 1, 2),          # batch 2: the 1x1 convs cannot run in place, so none does
])
def test_inplace_conv_bit_identical_with_plain(channels, stride, batch, tmp_path):
    model = dw_pw_chain(channels, 12, stride, batch)
    x = np.random.default_rng(1).standard_normal((batch, 3, 12, 12)).astype(np.float32)
    plain = aotc.compile(model, tmp_path / "plain", name="m")
    inplace = aotc.compile(model, tmp_path / "inplace", name="m", inplace_conv=True)
    want = plain.load().run({"x": x})
    got = inplace.load().run({"x": x})
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    c = inplace.compilation
    if batch == 1:
        assert c.liveness.inplace, "no conv ran in place"
        assert c.plan.size < plain.arena_bytes, (c.plan.size, plain.arena_bytes)
    # The plain liveness bound does not count the in-place temporaries.
    assert c.bounds == plain.compilation.bounds


def test_inplace_conv_with_io_in_arena(tmp_path):
    """With the I/O in the arena the first depthwise conv writes over the graph input too."""
    model = dw_pw_chain([3, 3], 10)
    model.graph.node.pop(0)  # no stem: the graph input feeds the depthwise conv
    model.graph.node[0].input[0] = "x"
    x = np.random.default_rng(2).standard_normal((1, 3, 10, 10)).astype(np.float32)
    want = aotc.compile(model, tmp_path / "p", name="m").load().run({"x": x})
    b = aotc.compile(model, tmp_path / "i", name="m", inplace_conv=True, io_in_arena=True)
    got = b.load().run({"x": x})
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    assert 0 in b.compilation.liveness.inplace


# Arena bounds with inplace_conv. VWW: its widest map (48x48x16, 36,864 B): the widening 1x1's
# one-pixel temporary (16 B) is on the C stack, the strided depthwise after it stores each
# output at once (no temporary), and the other temporaries sit in free tails of merged buffers.
# KWS: its 8,000 B map and the 64 B average-pool output read from it (the depthwise convs run
# by line, their 10 B rings in free tails).
INT8 = {"kws_ref_model_int8_qdq": 8_064, "str_ww_ref_model_int8_qdq": 6_656,
        "vww_96_int8_qdq": 36_864}


@pytest.mark.parametrize("stem", sorted(INT8))
@pytest.mark.parametrize("io_in_arena", [False, True])
def test_inplace_conv_mlperf_bit_exact_with_tflm(stem, io_in_arena, mlperf_dir, tmp_path):
    bundle = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path, name="m", inplace_conv=True,
                          io_in_arena=io_in_arena)
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    runner = bundle.load()
    i, o = runner.meta["inputs"][0]["name"], runner.meta["outputs"][0]["name"]
    got = np.stack([runner.run({i: x})[o] for x in vec["input"]])
    np.testing.assert_array_equal(got.reshape(vec["output_tflm"].shape), vec["output_tflm"])
    c = bundle.compilation
    assert c.liveness.inplace
    if not io_in_arena:
        assert c.plan.size <= INT8[stem], c.plan.size
    # The temporaries outside the arena are stated, each at most STACK_TEMP_MAX bytes; only
    # VWW's widening 1x1 (at the widest step, without the I/O in the arena) needs one.
    stack = runner.meta["stack_temporaries"]
    assert stack == c.stack_temporaries
    assert all(0 < t["bytes"] <= STACK_TEMP_MAX for t in stack)
    if stem == "vww_96_int8_qdq" and not io_in_arena:
        assert [t["bytes"] for t in stack] == [16], stack
    if stem != "str_ww_ref_model_int8_qdq":  # KWS, VWW: stride-1 3x3 depthwise by line
        assert "line" in c.liveness.modes.values()


@pytest.mark.parametrize("target", [None, "cortex-m4f"])  # generic and DSP schedules
def test_inplace_conv_kws_on_board(target, mlperf_dir, tmp_path):
    stem = "kws_ref_model_int8_qdq"
    bundle = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path, name="m", inplace_conv=True,
                          io_in_arena=True, target=target)
    # the 490 B input is live with the first output; the DSP schedule adds its scratch column
    scratch = max([sum(n for _, n in ls.scratch) for ls in bundle.compilation.lowered] + [0])
    assert bundle.arena_bytes <= 8_064 + 490 + (scratch if target else 0), bundle.arena_bytes
    assert "line" in bundle.compilation.liveness.modes.values()
    assert_tflm_bytes(bundle, mlperf_dir, stem, "cortex-m4f", 2)


@pytest.mark.parametrize("target", ["cortex-m4f", "cortex-m55"])  # DSP / MVE schedules
def test_inplace_conv_vww_on_board(target, mlperf_dir, tmp_path):
    """VWW in place on the board in QEMU (DSP or MVE schedules and their scratch for the convs
    not in place, temporaries in the free tails of merged buffers or on the stack): bit-exact
    with TFLM."""
    stem = "vww_96_int8_qdq"
    bundle = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path, name="m", inplace_conv=True,
                          target=target)
    c = bundle.compilation
    assert any(r.profile for r in c.liveness.reqs), "no merged buffer with a free tail"
    assert {"line", "pixel", "element"} <= set(c.liveness.modes.values())
    scratch = max([sum(n for _, n in ls.scratch) for ls in c.lowered] + [0])
    assert bundle.arena_bytes <= INT8[stem] + scratch, bundle.arena_bytes
    assert_tflm_bytes(bundle, mlperf_dir, stem, target, 2)


def test_inplace_conv_never_worse(mlperf_dir):
    """Where merging buffers would raise the peak (VWW's widening 1x1 convs), the plain plan
    is kept."""
    for stem in ("vww_96_int8_qdq", "pretrainedResnet_int8_qdq"):
        plain = compile_model(mlperf_dir / f"{stem}.onnx", CompileOptions())
        c = compile_model(mlperf_dir / f"{stem}.onnx", CompileOptions(inplace_conv=True))
        assert c.plan.size <= plain.plan.size
