"""Patch-based execution (--patches, aotc/passes/patches.py): the first stage of convolutions
runs in a grid of spatial patches, each over its receptive field; the first layer reads its box
of the stage input in place (SliceView). Checked against onnxruntime (float: rtol 1e-4, atol
1e-5), and MLPerf Tiny VWW int8 bit-exact with TFLM's output (output_tflm) on the host and on
cortex-m4f and cortex-m55 in QEMU, with the arena under 16 KiB."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from mlperf_check import assert_tflm_bytes
from onnx import TensorProto, helper, numpy_helper

import aotc
from aotc.cli import main as cli_main
from aotc.compiler import CompileOptions, _pipeline, compile_model
from aotc.frontend.onnx.importer import import_model
from aotc.ir.graph import CHAIN, Graph
from aotc.memory.buffers import check_no_overlap
from aotc.memory.liveness import analyse, choose_inplace
from aotc.memory.planner import plan
from aotc.ops import resolve
from aotc.passes import run_pipeline
from aotc.passes.layout import permuted_views
from aotc.passes.patches import graph_macs, split_stage, stage_chain
from aotc.steps.inplace import conv_inplace_modes, inplace_temps
from aotc.steps.schedule import make_schedule

# (out channels, kernel, stride, dilation, pads [top, left, bottom, right], depthwise)
Layer = tuple[int, int, int, int, tuple[int, int, int, int], bool]


def chain_model(layers: list[Layer], hw: tuple[int, int], cin: int = 3, relu_in: bool = False,
                nhwc: bool = False, seed: int = 0) -> onnx.ModelProto:
    """x -> [Relu] -> conv layers (each + Relu) -> 1x1 conv -> y (float)."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    x, c = "x", cin
    if nhwc:  # an NHWC input read through a PermuteView, as TFLite-converted models
        nodes.append(helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 3, 1, 2]))
        x = "xt"
    if relu_in:  # the stage input is an arena buffer, not the caller's
        nodes.append(helper.make_node("Relu", [x], ["xr"]))
        x = "xr"
    for k, (m, ks, s, d, pads, dw) in enumerate([*layers, (5, 1, 1, 1, (0, 0, 0, 0), False)]):
        m = c if dw else m
        w = (rng.standard_normal((m, 1 if dw else c, ks, ks)) * 0.4).astype(np.float32)
        b = (rng.standard_normal(m) * 0.1).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{k}"), numpy_helper.from_array(b, f"b{k}")]
        nodes.append(helper.make_node("Conv", [x, f"w{k}", f"b{k}"], [f"c{k}"],
                                      kernel_shape=[ks, ks], strides=[s, s], dilations=[d, d],
                                      pads=list(pads), group=m if dw else 1))
        nodes.append(helper.make_node("Relu", [f"c{k}"], [f"r{k}"]))
        x, c = f"r{k}", m
    shape = [1, *hw, cin] if nhwc else [1, cin, *hw]
    graph = helper.make_graph(nodes, "chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _ort(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), so).run(None, {"x": x})[0]


MOBILE: list[Layer] = [(8, 3, 2, 1, (0, 0, 1, 1), False), (8, 3, 1, 1, (1, 1, 1, 1), True),
                       (12, 1, 1, 1, (0, 0, 0, 0), False), (12, 3, 2, 1, (0, 0, 1, 1), True)]
ODD: list[Layer] = [(4, 5, 1, 2, (4, 3, 4, 2), False), (6, 3, 3, 1, (2, 0, 1, 2), False),
                    (6, 2, 1, 1, (0, 1, 1, 0), True)]


@pytest.mark.parametrize("layers,hw,patches,nhwc,relu_in", [
    (MOBILE, (25, 23), 2, True, False),        # VWW-like, odd sizes, through a PermuteView
    (MOBILE, (25, 23), 3, False, True),        # stage input in the arena
    (MOBILE, (32, 32), (3, 2, 3), False, False),  # 2x3 grid over the first 3 layers
    (MOBILE, (21, 30), "1x3", False, False),   # one row of 3 patches, auto depth
    (ODD, (19, 17), 2, False, False),          # dilation 2, stride 3, uneven pads, 2x2 kernel
    (ODD, (19, 17), (2, 3, 1), True, False),   # 3x1 grid over 2 layers
])
def test_patches_against_onnxruntime(layers, hw, patches, nhwc, relu_in, tmp_path):
    model = chain_model(layers, hw, nhwc=nhwc, relu_in=relu_in)
    shape = (1, *hw, 3) if nhwc else (1, 3, *hw)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    b = aotc.compile(model, tmp_path, name="m", patches=patches)
    got = b.load().run({"x": x})
    want = _ort(model, x)
    np.testing.assert_allclose(next(iter(got.values())), want, rtol=1e-4, atol=1e-5)
    rep = b.compilation.patches
    assert rep is not None and rep["grid"], rep
    assert any(n.op == "SliceView" for n in b.compilation.graph.nodes)


def test_patches_with_io_in_arena_and_inplace_conv(tmp_path):
    """The stage input in the arena (--io-in-arena) is read in place by every patch and
    outlives the last one; in-place convs never take a slice view as their input."""
    model = chain_model(MOBILE, (25, 23), nhwc=True)
    x = np.random.default_rng(2).standard_normal((1, 25, 23, 3)).astype(np.float32)
    b = aotc.compile(model, tmp_path, name="m", patches=3, io_in_arena=True, inplace_conv=True)
    got = b.load().run({"x": x})
    np.testing.assert_allclose(next(iter(got.values())), _ort(model, x), rtol=1e-4, atol=1e-5)
    c = b.compilation
    views = {n.outputs[0] for n in c.graph.nodes if n.op == "SliceView"}
    assert views and not any(c.schedule.steps[i].node.inputs[0] in views
                             for i in c.liveness.inplace)


# ------------------------------------------------------------------------ graph-level property
def _evaluate(g: Graph, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The graph run node by node with the ops' numpy references (epilogues included)."""
    env = {v.name: v.const for v in g.constants()}
    env.update(feeds)
    for n in g.nodes:
        args = [env[i] if i else None for i in n.inputs]
        out = resolve(n.op, g.opset, n.domain).run_reference(n, args)[0]
        for e in n.epilogue:
            eargs = [out if i == CHAIN else env[i] if i else None for i in e.inputs]
            out = resolve(e.op, g.opset, e.domain).run_reference(e, eargs)[0]
        env[n.outputs[0]] = out
    return {o: env[o] for o in g.outputs}


@st.composite
def stages(draw):  # type: ignore[no-untyped-def]
    layers = []
    for _ in range(draw(st.integers(1, 4))):
        ks = draw(st.integers(1, 4))
        pads = tuple(draw(st.integers(0, ks - 1)) for _ in range(4))
        layers.append((draw(st.integers(1, 4)), ks, draw(st.sampled_from([1, 1, 2, 3])),
                       draw(st.sampled_from([1, 1, 2])), pads, draw(st.booleans())))
    hw = (draw(st.integers(8, 24)), draw(st.integers(8, 24)))
    return layers, hw, draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.booleans())


@settings(max_examples=120, deadline=None)
@given(stages(), st.booleans(), st.sampled_from(["best", "greedy_size", "two_ended"]))
def test_patched_plans_keep_every_read_intact(case, inplace_conv, algorithm):
    """Any stage geometry and grid: the patched graph computes what onnxruntime computes on
    the model (numpy references, rtol 1e-4, atol 1e-5), its plan passes check_no_overlap, and
    a byte-level replay of the schedule finds every byte a kernel reads (a SliceView box
    included) still holding what its producer wrote: the stage input stays live, unclobbered,
    until the last patch has read it."""
    layers, hw, rows, cols, relu_in = case
    model = chain_model(layers, hw, cin=2, relu_in=relu_in)
    try:
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
        g = import_model(model, {}, "m")
    except Exception:
        return  # an empty output somewhere: not a model
    g = permuted_views(run_pipeline(g, _pipeline(None)))
    chain = stage_chain(g)
    depth = len(chain)
    y = g.type(chain[-1].outputs[0]).shape
    rows, cols = min(rows, y[2]), min(cols, y[3])
    if (rows, cols) == (1, 1):
        return
    try:
        pg = split_stage(g, chain[:depth], (rows, cols))
    except ValueError:
        return  # a patch that reads only padding
    x = np.random.default_rng(0).standard_normal((1, 2, *hw)).astype(np.float32)
    np.testing.assert_allclose(next(iter(_evaluate(pg, {"x": x}).values())), _ort(model, x),
                               rtol=1e-4, atol=1e-5)
    # (fewer MACs is possible: a strided layer skips outputs of the one before it)
    assert graph_macs(pg) > 0
    s = make_schedule(pg)
    offered = conv_inplace_modes(s) if inplace_conv else {}
    modes = choose_inplace(s, {}, offered, inplace_temps(s, offered)) if offered else {}
    live = analyse(s, {}, 4, True, False, modes)
    p = plan(live.reqs, algorithm)
    check_no_overlap(live.reqs, p)
    check_no_overlap(*live.root_view(p))
    _replay(s, live, p)
    event("replayed")


def _replay(s, live, p) -> None:  # type: ignore[no-untyped-def]
    """Step by step, the root that last wrote each arena byte: every byte a step reads must
    hold its root's data (checked before the step writes its outputs)."""
    g = s.graph
    owner: dict[int, str] = {}

    def span(value: str) -> range:
        root = s.root[value]
        base = p.offsets[live.buffer_of(root)]
        t = g.type(value)
        if value not in s.strides:
            return range(base, base + g.type(root).nbytes)
        first = int(s.offset.get(value, "0"))
        last = first + sum((d - 1) * k for d, k in zip(t.shape, s.strides[value]))
        return range(base + first * t.dtype.itemsize, base + (last + 1) * t.dtype.itemsize)

    for step in s.steps:
        n = step.node
        for i in [*n.inputs, *(i for e in n.epilogue for i in e.inputs if i != CHAIN)]:
            if i and s.kind[s.root[i]] == "arena":
                bad = [b for b in span(i) if owner.get(b) != s.root[i]]
                assert not bad, f"step {step.index} ({n.name}) reads {i}: byte {bad[0]} " \
                                f"holds {owner.get(bad[0])}"
        for o in n.outputs:
            if o and s.kind[s.root[o]] == "arena":
                for b in span(o):
                    owner[b] = s.root[o]


# ------------------------------------------------------------------------------ VWW int8
VWW = "vww_96_int8_qdq"


def _vww(mlperf_dir, tmp_path, **kw):  # type: ignore[no-untyped-def]
    return aotc.compile(mlperf_dir / f"{VWW}.onnx", tmp_path, name="m", **kw)


def test_vww_int8_patches_bit_exact_under_16k(mlperf_dir, tmp_path):
    """3x3 patches over the first 8 layers (to dw4's 12x12x32 output) with in-place convs:
    the arena is under 16 KiB for less than 25% more MACs, bit-exact with TFLM."""
    b = _vww(mlperf_dir, tmp_path, patches=3, inplace_conv=True)
    vec = np.load(mlperf_dir / "vectors" / f"{VWW}.npz")
    runner = b.load()
    i, o = runner.meta["inputs"][0]["name"], runner.meta["outputs"][0]["name"]
    got = np.stack([runner.run({i: x})[o] for x in vec["input"]])
    np.testing.assert_array_equal(got.reshape(vec["output_tflm"].shape), vec["output_tflm"])
    rep = b.compilation.patches
    assert b.arena_bytes <= 16_384, b.arena_bytes
    assert rep is not None and rep["grid"] == [3, 3] and rep["extra_macs_pct"] <= 25, rep
    assert runner.meta["patches"] == rep  # bundle.json reports it


@pytest.mark.parametrize("target", ["cortex-m4f", "cortex-m55"])
def test_vww_int8_patches_on_board(target, mlperf_dir, tmp_path):
    """The same in QEMU on cortex-m4f (DSP conv schedules) and cortex-m55 (Helium): their
    kernels read the input box in place; bit-exact with output_tflm on 2 vectors."""
    b = _vww(mlperf_dir, tmp_path, patches=3, inplace_conv=True, target=target)
    scratch = max([sum(n for _, n in ls.scratch) for ls in b.compilation.lowered] + [0])
    assert b.arena_bytes <= 16_384 + scratch, b.arena_bytes
    assert_tflm_bytes(b, mlperf_dir, VWW, target, 2)


# The other int8 MLPerf Tiny models with a patched first stage (AD has no convolution: the
# one-line error of test_cli_no_stage_is_one_line). Patches don't lower their arenas (auto keeps
# the plain plan on each), but a forced grid must still give TFLM's bytes.
@pytest.mark.parametrize("stem,grid", [("kws_ref_model_int8_qdq", 2),
                                       ("pretrainedResnet_int8_qdq", 2),
                                       ("str_ww_ref_model_int8_qdq", "2x1")])
@pytest.mark.parametrize("inplace_conv", [False, True])
def test_other_int8_models_patched_bit_exact_with_tflm(stem, grid, inplace_conv, mlperf_dir,
                                                       tmp_path):
    b = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path, name="m", patches=grid,
                     inplace_conv=inplace_conv)
    assert b.compilation.patches is not None
    assert any(n.op == "SliceView" for n in b.compilation.schedule.graph.nodes)
    assert_tflm_bytes(b, mlperf_dir, stem)


def test_kws_int8_patched_on_cortex_m4f(mlperf_dir, tmp_path):
    """KWS's first stage in 2x2 patches under the DSP schedules in QEMU: TFLM's bytes."""
    stem = "kws_ref_model_int8_qdq"
    b = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path, name="m", patches=2,
                     target="cortex-m4f")
    assert_tflm_bytes(b, mlperf_dir, stem, "cortex-m4f", 2)


def test_vww_float_patches_match_onnxruntime_vectors(mlperf_dir, tmp_path):
    """Float VWW with 3x3 patches: every golden vector within 1e-4 of onnxruntime's output
    (output_ort, as tests/models/test_mlperf_float.py) and identical to the plain bundle's
    output (each patch output sums the same terms in the same order)."""
    stem = "vww_96_float"
    b = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path / "p", name="m", patches=3)
    plain = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path / "q", name="m").load()
    runner = b.load()
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    i, o = runner.meta["inputs"][0]["name"], runner.meta["outputs"][0]["name"]
    for k in range(vec["input"].shape[0]):
        got = runner.run({i: vec["input"][k]})[o]
        np.testing.assert_allclose(got, vec["output_ort"][k].reshape(got.shape), atol=1e-4)
        np.testing.assert_array_equal(got, plain.run({i: vec["input"][k]})[o])
    assert b.arena_bytes <= 73_728, b.arena_bytes


def test_vww_auto_and_ad_auto(mlperf_dir):
    """auto on VWW picks a grid within the budget with a smaller arena than the plain plan;
    on AD (dense layers only) it keeps the plain plan and says so."""
    plain = compile_model(mlperf_dir / f"{VWW}.onnx", CompileOptions())
    c = compile_model(mlperf_dir / f"{VWW}.onnx", CompileOptions(patches="auto"))
    rep = c.patches
    assert rep is not None and rep["auto"] and rep["extra_macs_pct"] <= 25, rep
    assert c.plan.size < plain.plan.size, (c.plan.size, plain.plan.size)
    assert c.plan.size == min(t["arena_bytes"] for t in rep["candidates"])
    tight = compile_model(mlperf_dir / f"{VWW}.onnx", CompileOptions(patches="auto",
                                                                        patch_macs=0.08))
    assert tight.patches is not None and tight.patches["extra_macs_pct"] <= 8, tight.patches
    ad = compile_model(mlperf_dir / "ad01_int8_qdq.onnx", CompileOptions(patches="auto"))
    assert ad.patches is not None and ad.patches.get("kept_plain"), ad.patches


@pytest.mark.parametrize("args,needle", [
    (["--patches", "1"], "at least 2"),
    (["--patches", "many"], "use auto, N"),
    (["--patches", "1x1"], "at least 2"),
    (["--patches", "2x3x4"], "use auto, N"),
    (["--patches", "99"], "does not fit"),
    (["--patches", "auto", "--patch-macs", "-5"], "percentage >= 0"),
])
def test_cli_patch_errors_are_one_line(args, needle, tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(chain_model(MOBILE, (16, 16)), path)
    rc = cli_main(["compile", str(path), "-o", str(tmp_path / "b"), "-q", *args])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and needle in err and "\n" not in err, err


def test_cli_compile_and_inspect_report_patches(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(chain_model(MOBILE, (16, 16)), path)
    assert cli_main(["compile", str(path), "-o", str(tmp_path / "b"), "-q", "--patches",
                     "2"]) == 0
    assert "patches: 2x2 over the first" in capsys.readouterr().err
    assert cli_main(["inspect", str(path), "--patches", "auto", "--patch-macs", "0"]) == 0
    assert "patches auto (extra MACs <= 0%)" in capsys.readouterr().out


def test_cli_no_stage_is_one_line(mlperf_dir, tmp_path, capsys):
    rc = cli_main(["compile", str(mlperf_dir / "ad01_int8_qdq.onnx"), "-o", str(tmp_path / "b"),
                   "-q", "--patches", "2"])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and "no stage of convolutions" in err and "\n" not in err, err
