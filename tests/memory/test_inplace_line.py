"""In-place convs by line (aotc/schedules/conv/line.py): a 2-D conv writes its output over its dead
input through a ring of D output rows. line_delay against a run that overwrites its input,
the generated C against onnxruntime (float: rtol 1e-5, atol 1e-5; int8: equal to the conv
not in place, and to onnxruntime with its requantisation), and the plans as the kernels touch
them, byte by byte (the MLPerf Tiny models that use the mode, KWS and VWW, are checked
against TFLM on the host and on cortex-m4f / cortex-m55 in test_inplace_conv.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from opcheck import ort_run
from test_inplace_planner import _replay

import aotc
from aotc.compiler import CompileOptions, compile_model
from aotc.memory import check_no_overlap
from aotc.schedules.conv.line import line_delay


def _out_sp(h, w, kh, kw, pads, strides, dil):  # type: ignore[no-untyped-def]
    return ((h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1,
            (w + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1)


def _row(src, w, m, oy, depthwise, hw, pads, strides, dil):  # type: ignore[no-untyped-def]
    """Output row oy of channel m, reading the input (C, H, W) from the flat array src."""
    h, wd = hw
    cg, kh, kw = w.shape[1:]
    ow = _out_sp(h, wd, kh, kw, pads, strides, dil)[1]
    out = np.zeros(ow)
    for ox in range(ow):
        for c in range(cg):
            ic = m if depthwise else c
            for a in range(kh):
                for b in range(kw):
                    y = oy * strides[0] + a * dil[0] - pads[0]
                    z = ox * strides[1] + b * dil[1] - pads[1]
                    if 0 <= y < h and 0 <= z < wd:
                        out[ox] += src[(ic * h + y) * wd + z] * w[m, c, a, b]
    return out


def _by_line(x, w, depthwise, pads, strides, dil, delay):  # type: ignore[no-untyped-def]
    """The conv run as the "line" kernel runs: units in order into a ring of `delay` slots,
    unit u - delay copied from the ring to its place in the one buffer that holds the input
    (X and Y at the same address) before unit u is computed; the last units at the end."""
    c, h, wd = x.shape
    mout, _, kh, kw = w.shape
    oh, ow = _out_sp(h, wd, kh, kw, pads, strides, dil)
    buf = np.zeros(max(x.size, mout * oh * ow))
    buf[:x.size] = x.reshape(-1)
    units = [(m, oy) for m in range(mout) for oy in range(oh)] if depthwise else list(range(oh))
    ring: dict[int, np.ndarray] = {}

    def flush(u: int) -> None:
        if depthwise:
            buf[u * ow:(u + 1) * ow] = ring[u % delay]
        else:
            for m in range(mout):
                buf[m * oh * ow + u * ow:m * oh * ow + (u + 1) * ow] = ring[u % delay][m]

    for u, unit in enumerate(units):
        if u >= delay:
            flush(u - delay)
        rows = [_row(buf, w, m, unit[1] if depthwise else unit, depthwise, (h, wd), pads,
                     strides, dil) for m in ([unit[0]] if depthwise else range(mout))]
        ring[u % delay] = rows[0] if depthwise else np.stack(rows)
    for u in range(max(len(units) - delay, 0), len(units)):
        flush(u)
    return buf[:mout * oh * ow].reshape(mout, oh, ow)


@settings(max_examples=200, deadline=None)
@given(st.booleans(), st.integers(1, 3), st.integers(1, 4), st.integers(1, 7),
       st.integers(1, 7), st.integers(1, 3), st.integers(1, 3),
       st.lists(st.integers(0, 2), min_size=4, max_size=4),
       st.lists(st.integers(1, 2), min_size=2, max_size=2),
       st.lists(st.integers(1, 2), min_size=2, max_size=2))
def test_line_delay_is_the_smallest_ring_that_reads_only_originals(
        depthwise, c, m, h, wd, kh, kw, pads, strides, dil):
    """Where line_delay gives D, the overwriting run gives the plain result (random inputs: a
    clobbered read would show), and with D - 1 slots it does not."""
    mout = c if depthwise else m
    oh, ow = _out_sp(h, wd, kh, kw, pads, strides, dil)
    if oh <= 0 or ow <= 0:
        return
    delay = line_delay(depthwise, c, mout, (h, wd), (oh, ow), (kh, kw), pads[:2], strides, dil)
    if delay is None:
        return
    rng = np.random.default_rng(c * 1000 + h * 10 + wd)
    x = rng.standard_normal((c, h, wd))
    w = rng.standard_normal((mout, 1 if depthwise else c, kh, kw))
    flat = x.reshape(-1)
    plain = np.stack([np.stack([_row(flat, w, mm, oy, depthwise, (h, wd), pads, strides, dil)
                                for oy in range(oh)]) for mm in range(mout)])
    np.testing.assert_allclose(_by_line(x, w, depthwise, pads, strides, dil, delay), plain,
                               rtol=1e-12, atol=1e-12)
    if delay > 1:
        short = _by_line(x, w, depthwise, pads, strides, dil, delay - 1)
        assert not np.allclose(short, plain, rtol=1e-9, atol=1e-9)


def test_stride_1_3x3_needs_two_rows():
    """Output row r lands on input row r, which output row r + 1 still reads."""
    assert line_delay(True, 8, 8, (48, 48), (48, 48), (3, 3), (1, 1), (1, 1), (1, 1)) == 2
    assert line_delay(False, 16, 16, (32, 32), (32, 32), (3, 3), (1, 1), (1, 1), (1, 1)) == 2
    # 5x5, two rows of padding: three rows; a depthwise without padding (its rows land on
    # earlier rows): one
    assert line_delay(True, 4, 4, (12, 12), (12, 12), (5, 5), (2, 2), (1, 1), (1, 1)) == 2 + 1
    assert line_delay(True, 4, 4, (12, 12), (10, 10), (3, 3), (0, 0), (1, 1), (1, 1)) == 1
    # NCHW: a plain conv's smaller output channel 1 lands on the late rows of input channel
    # 0, which the last output rows read: no ring short of the whole output
    assert line_delay(False, 4, 4, (12, 12), (10, 10), (3, 3), (0, 0), (1, 1), (1, 1)) is None


def conv_chain(c: int, m: int, hw: tuple[int, int], k: tuple[int, int], pads: list[int],
               depthwise: bool, dil: int = 1, seed: int = 0):  # type: ignore[no-untyped-def]
    """x -> 3x3 stem (3 -> c) -> the conv under test (c -> m; depthwise: group c) -> Relu ->
    1x1 conv to 2 channels: the conv under test reads an arena buffer that dies there."""
    rng = np.random.default_rng(seed)
    inits = {"w0": rng.standard_normal((c, 3, 3, 3)) * 0.3,
             "w": rng.standard_normal((m, 1 if depthwise else c, *k)) * 0.3,
             "b": rng.standard_normal(m) * 0.1, "wz": rng.standard_normal((2, m, 1, 1)) * 0.3}
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "w", "b"], ["y0"], pads=pads,
                              group=c if depthwise else 1, dilations=[dil, dil]),
             helper.make_node("Relu", ["y0"], ["r"]),
             helper.make_node("Conv", ["r", "wz"], ["y"])]
    g = helper.make_graph(
        nodes, "line", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, *hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


CHAINS = [  # (c, m, (h, w), kernel, pads, depthwise, dilation)
    (8, 8, (9, 11), (3, 3), [1, 1, 1, 1], True),      # odd sizes, same padding
    (4, 4, (12, 13), (5, 5), [2, 2, 2, 2], True),     # 5x5: three rows
    (5, 5, (8, 7), (3, 2), [0, 1, 2, 0], True),       # asymmetric kernel and pads
    (6, 4, (7, 10), (3, 3), [1, 1, 1, 1], False),     # plain conv, fewer outputs
    (5, 5, (9, 6), (3, 3), [0, 0, 0, 0], False),      # plain conv, no padding (smaller map)
    (3, 5, (6, 9), (2, 3), [1, 0, 0, 2], False),      # plain conv, more outputs than inputs
    (4, 4, (11, 10), (3, 3), [2, 2, 2, 2], False, 2),  # plain conv, dilation 2: three rows
]


@pytest.mark.parametrize("case", CHAINS)
def test_line_conv_float_against_onnxruntime(case, tmp_path):
    model, hw = conv_chain(*case), case[2]
    x = np.random.default_rng(1).standard_normal((1, 3, *hw)).astype(np.float32)
    want = ort_run(model, {"x": x})["y"]
    b = aotc.compile(model, tmp_path / "line", name="m", inplace_conv=True)
    np.testing.assert_allclose(b.load().run({"x": x})["y"], want, rtol=1e-5, atol=1e-5)
    assert b.compilation.liveness.modes == {1: "line"}
    plain = aotc.compile(model, tmp_path / "plain", name="m")
    assert b.arena_bytes < plain.arena_bytes, (b.arena_bytes, plain.arena_bytes)


def qlinear_chain(c: int, m: int, hw: tuple[int, int], k: tuple[int, int], pads: list[int],
                  depthwise: bool, dil: int = 1,
                  seed: int = 0):  # type: ignore[no-untyped-def]
    """conv_chain as int8 QLinearConv nodes (per-channel weight scales, zero point -3)."""
    rng = np.random.default_rng(seed)
    inits: dict[str, np.ndarray] = {"s": np.float32(0.05), "z": np.int8(-3),
                                    "ys": np.float32(0.08)}
    nodes = []
    for name, x, y, wshape, attrs in [
            ("stem", "x", "a", (c, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
            ("conv", "a", "r", (m, 1 if depthwise else c, *k),
             {"pads": pads, "group": c if depthwise else 1, "dilations": [dil, dil]}),
            ("head", "r", "y", (2, m, 1, 1), {})]:
        inits[f"{name}_w"] = rng.integers(-90, 90, wshape).astype(np.int8)
        inits[f"{name}_ws"] = rng.uniform(0.002, 0.01, wshape[0]).astype(np.float32)
        inits[f"{name}_wz"] = np.zeros(wshape[0], np.int8)
        inits[f"{name}_b"] = rng.integers(-500, 500, wshape[0]).astype(np.int32)
        nodes.append(helper.make_node(
            "QLinearConv", [x, "s", "z", f"{name}_w", f"{name}_ws", f"{name}_wz", "ys", "z",
                            f"{name}_b"], [y], **attrs))
    g = helper.make_graph(
        nodes, "qline", [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 3, *hw])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("requant", ["onnx", "tflite"])
@pytest.mark.parametrize("case", CHAINS)
def test_line_conv_int8_bit_exact(case, requant, tmp_path):
    """Integer sums are exact in any order: the line kernel's bytes are the plain kernel's.
    With onnxruntime's requantisation (requant="onnx") they are onnxruntime's; with TFLite's
    fixed-point multiplier (the default) within 1 LSB of it (a tie rounds differently)."""
    model, hw = qlinear_chain(*case), case[2]
    x = np.random.default_rng(2).integers(-128, 128, (1, 3, *hw)).astype(np.int8)
    b = aotc.compile(model, tmp_path / "line", name="m", inplace_conv=True, requant=requant)
    got = b.load().run({"x": x})["y"]
    assert b.compilation.liveness.modes == {1: "line"}
    plain = aotc.compile(model, tmp_path / "plain", name="m", requant=requant)
    np.testing.assert_array_equal(got, plain.load().run({"x": x})["y"])
    want = ort_run(model, {"x": x})["y"]
    if requant == "onnx":
        np.testing.assert_array_equal(got, want)
    else:
        assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1


def _root_replay(c) -> None:  # type: ignore[no-untyped-def]
    """The plan as the kernels see it (every tensor and temporary at its offset, in-place
    pairs overlapping at their step), byte by byte."""
    reqs, placed, pairs = c.liveness.root_view(c.plan)
    if not reqs:  # one conv from the graph input to the output: nothing in the arena
        return
    check_no_overlap(reqs, placed, pairs)
    _replay(reqs, placed, pairs)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(2, 6), st.integers(1, 3),
                          st.integers(1, 3), st.integers(0, 1)), min_size=1, max_size=4),
       st.integers(4, 9), st.integers(4, 9), st.booleans())
def test_planner_with_line_rings(layers, h, w, io_in_arena):
    """Chains of depthwise and plain convs of random shapes compiled in place: every plan,
    line rings included, replayed byte by byte (compile_model itself runs check_no_overlap on
    the merged buffers and on the tensors)."""
    rng = np.random.default_rng(h * 10 + w)
    inits, nodes, x, c = [], [], "x", 3
    for k, (depthwise, m, kh, kw, pad) in enumerate(layers):
        m = c if depthwise else m
        wt = rng.standard_normal((m, 1 if depthwise else c, kh, kw)).astype(np.float32)
        inits.append(numpy_helper.from_array(wt, f"w{k}"))
        top, left = min(pad, kh - 1), min(pad, kw - 1)  # the map keeps its size
        nodes.append(helper.make_node("Conv", [x, f"w{k}"], [f"t{k}"], group=c if depthwise
                                      else 1, pads=[top, left, kh - 1 - top, kw - 1 - left]))
        x, c = f"t{k}", m
    g = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, h, w])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    c = compile_model(model, CompileOptions(inplace_conv=True, io_in_arena=io_in_arena))
    event("modes: " + ", ".join(sorted(set(c.liveness.modes.values()))))
    _root_replay(c)


def test_line_conv_int8_on_m4f(tmp_path):
    """A plain 3x3 conv and a 5x5 depthwise by line on cortex-m4f in QEMU (the DSP schedules
    for the convs not in place): the bytes of the plain host build."""
    for k, case in enumerate([CHAINS[3], CHAINS[1]]):
        model = qlinear_chain(*case)
        x = np.random.default_rng(3).integers(-128, 128, (1, 3, *case[2])).astype(np.int8)
        want = aotc.compile(model, tmp_path / f"p{k}", name="m").load().run({"x": x})["y"]
        b = aotc.compile(model, tmp_path / f"l{k}", name="m", inplace_conv=True,
                         target="cortex-m4f")
        assert b.compilation.liveness.modes == {1: "line"}
        np.testing.assert_array_equal(b.load("cortex-m4f").run({"x": x})["y"], want)


def test_inspect_states_the_stack_temporaries():
    """A ring of at most STACK_TEMP_MAX bytes that would raise the arena is on the C stack
    (here the 480 B map is the arena): not arena scratch, and listed by inspect and in the
    HTML report's summary."""
    from aotc.api import inspect
    from aotc.cli.commands import _fmt_inspect
    from aotc.report.html import _summary

    model = conv_chain(4, 4, (6, 5), (3, 3), [1, 1, 1, 1], True)  # 2 rows of 5 floats: 40 B
    rep = inspect(model, inplace_conv=True)
    assert rep["memory"]["stack_temporaries"] == [
        {"kernel": "k1_conv_relu", "name": "line", "bytes": 40}]
    assert "on the C stack, not in the arena: k1_conv_relu line 40 B" in _fmt_inspect(rep)
    row = [r for r in _summary({**rep, "bench": None}) if r["key"] == "stack_temporaries"]
    assert [r["value"] for r in row] == [40]
