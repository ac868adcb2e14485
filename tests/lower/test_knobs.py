"""Every schedule knob (aotc/schedules) against the default schedule.

Each knob value is applied to every kernel of a small model through CompileOptions.schedules:
the generated C must change (the knob took effect) and the outputs must not: integer kernels
give the default build's bytes on the host and, for the SIMD schedules, on the target board in
QEMU; float kernels stay within 1e-5 of onnxruntime (on a board too, where the case names one)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import helper
from opcheck import make_model, ort_run
from test_dsp import qconv, qconv_nhwc, qmatmul

import aotc
from aotc.schedules import KNOBS


def _workloads(bundle: aotc.Bundle) -> dict:
    return json.loads((bundle.directory / "bundle.json").read_text())["workloads"]


def _compile(model, path, target, knobs, keys):
    schedules = {k: dict(knobs) for k in keys}
    return aotc.compile(model, path, name="m", target=target, schedules=schedules)


def _with(model, tmp_path, target, base_knobs, knobs):
    """(base, tuned): the model compiled with ``base_knobs`` (e.g. a path knob that opens the
    knob under test; {}: the default schedule) and with ``knobs`` on top, for every kernel."""
    keys = {w["key"] for w in _workloads(aotc.compile(model, tmp_path / "d", name="m",
                                                      target=target)).values()}
    base = _compile(model, tmp_path / "base", target, base_knobs, keys)
    tuned = _compile(model, tmp_path / "tuned", target, {**base_knobs, **knobs}, keys)
    used = _workloads(tuned).values()  # bundle.json shows the schedule each kernel used
    assert any(knob in w["space"] and w["schedule"][knob] == v
               for w in used for knob, v in knobs.items()), f"no kernel asks for {knobs}"
    return base, tuned


def _c(bundle: aotc.Bundle) -> str:
    return (bundle.directory / "m.c").read_text()


# (knob, value) for the integer models: target, extra knobs that open the knob's path.
INT_CASES = [
    *[(("conv.path", v), None, "cortex-m4f", {}) for v in ("scalar",)],
    *[(("conv.path", v), None, "cortex-m55", {}) for v in ("scalar",)],
    *[(("conv.pixels", v), None, "cortex-m55", {}) for v in (1, 4)],
    # cortex-m4f: 5 input channels, a flat column, 4 pixels by default; 3x3 on 4 channels
    # (pairs) 2.
    *[(("conv.pixels", v), None, "cortex-m4f", {}) for v in (1, 2, 3)],
    (("conv.pixels", 2), "even", "cortex-m4f", {}),  # column rows: 3 pixels by default
    (("conv.pixels", 3), "even", "cortex-m33", {"conv.dsp_wide": False}),  # packed: 4
    (("conv.pixels", 4), "even", "cortex-m4f", {"conv.column": "pairs"}),
    *[(("conv.simd_tile", 4), None, t, {}) for t in ("cortex-m4f", "cortex-m55")],
    *[(("conv.tile", v), None, None, {}) for v in (2, 8)],
    *[(("conv.requant", "scalar"), k, "cortex-m55", {}) for k in (None, "depthwise")],
    *[(("conv.gather", False), k, "cortex-m55", {}) for k in (None, "pointwise")],
    (("conv.mve_depthwise", "rows"), "depthwise", "cortex-m55", {}),
    *[(("conv.mve_order", v), k, "cortex-m55", {}) for v in ("ordered", "compiler")
      for k in (None, "pointwise")],
    (("conv.depthwise", "bytes"), "depthwise", "cortex-m4f", {}),
    (("conv.split_requant", True), "depthwise", "cortex-m4f", {}),
    (("conv.column", "pairs"), None, "cortex-m4f", {}),  # 5 input channels: flat by default
    (("conv.column", "flat"), "even", "cortex-m4f", {}),
    # 3x3 on 4 channels: rows by default; pairs instead; rows on 5 channels (the last
    # unpaired) and on the M33 (packed weights); two column rows a step of a 12-row column.
    (("conv.column", "pairs"), "even", "cortex-m4f", {}),
    *[(("conv.column", "rows"), None, t, {}) for t in ("cortex-m4f", "cortex-m33")],
    (("conv.dsp_unroll", 8), "long", "cortex-m4f", {}),
    # a 72-word pairs column: 64 words a step by default on the M33 (no loop), 32 instead
    (("conv.dsp_unroll", 32), "longer", "cortex-m33", {"conv.column": "pairs"}),
    # 36-word columns: inline by default (pairs) on the M4, M7 and M33 (up to 128 words, packed
    # weights too on the M33: outlined there below); column rows inline at any length.
    (("conv.outline", True), "long", "cortex-m7", {"conv.column": "pairs"}),
    (("conv.outline", True), "long", "cortex-m4f", {}),
    *[(("conv.outline", True), k, "cortex-m4f", {}) for k in (None, "pointwise")],  # 23, 2
    # 23-word flat columns (no loop by default): 1 and 8 words a step (a rest of 7); a
    # 2-word pointwise column a step at a time.
    *[(("conv.dsp_unroll", v), None, "cortex-m4f", {}) for v in (1, 8)],
    (("conv.dsp_unroll", 1), "pointwise", "cortex-m4f", {}),
    # Depthwise output rows two a step by default: 4 rows of 8, 5 rows of 11 (a rest of
    # one), one a step instead; the sums in scratch first, two rows a step with a rest.
    *[(("conv.depthwise_rows", r), k, "cortex-m4f", {}) for r in (1, 3, 4)
      for k in ("depthwise", "depthwise_wide")],
    (("conv.split_requant", True), "depthwise_wide", "cortex-m4f", {}),
    (("conv.depthwise_rows", 2), "depthwise", "cortex-m33", {}),  # stride 2: 4 on the M33
    (("conv.unroll", False), None, None, {}),
    *[(("conv.tile", v), None, "cortex-m4f", {"conv.path": "scalar"}) for v in (2, 8)],
    *[(("gemm.path", "scalar"), "matmul", t, {}) for t in ("cortex-m4f", "cortex-m55")],
    *[(("gemm.simd_tile", v), "matmul", t, {}) for v in (2, 8)  # 11 columns: default 4
      for t in ("cortex-m4f", "cortex-m55")],
    # K = 24, six quads: 16 k a step by default (one step, two quads after it).
    *[(("gemm.dsp_k", v), "matmul_quads", "cortex-m4f", {}) for v in (2, 4, 8)],
    # Weights pre-extended to int16: the default on the Cortex-M4, M7 and M33 where they fit.
    *[(("gemm.dsp_wide", False), "matmul_quads", t, {})
      for t in ("cortex-m4f", "cortex-m7", "cortex-m33")],
    *[(("conv.dsp_wide", False), k, "cortex-m4f", {}) for k in ("pointwise", "even")],
    (("conv.dsp_wide", False), "long", "cortex-m7", {}),
    (("conv.dsp_wide", True), "wide", "cortex-m7", {}),  # flat columns: off on the M7
    (("conv.dsp_wide", False), "long", "cortex-m33", {}),
    # The bias in the inline tiles' accumulators (default) or added by the requantisation; the
    # requantisation of a pixel group side by side (default on the M7) or output by output.
    (("conv.dsp_bias_tile", False), "pointwise", "cortex-m4f", {}),
    (("conv.dsp_bias_tile", False), None, "cortex-m7", {}),
    # outlined tiles (pairs): off by default; column rows inline: on.
    (("conv.dsp_bias_tile", True), "long", "cortex-m7", {"conv.column": "pairs",
                                                         "conv.outline": True}),
    (("conv.dsp_bias_tile", False), "long", "cortex-m4f", {}),
    (("conv.dsp_requant", "interleaved"), "pointwise", "cortex-m4f", {}),
    # Inline tiles requantise their own accumulators (default) or write sums for a loop of
    # their own; serial (M4) and interleaved (M7); a 36-word pairs column inline.
    *[(("conv.dsp_tile_requant", False), k, t, {}) for k in ("pointwise", None)
      for t in ("cortex-m4f", "cortex-m7")],
    (("conv.dsp_tile_requant", False), "long", "cortex-m4f", {"conv.column": "pairs"}),
    (("conv.dsp_requant", "serial"), "even", "cortex-m7", {}),
    # A 4-pixel tile's column words two pixels at a time (default on the M4 from 8 words).
    *[(("conv.dsp_split", True), "pointwise", t, {}) for t in ("cortex-m4f", "cortex-m7")],
    (("conv.dsp_split", False), "pointwise16", "cortex-m4f", {}),
    # 4 x 2 tiles software-pipelined (default on the M7 from 8-word columns), inline and
    # outlined; on the M4 (default compiler) only aotc_smlad_ordered's host twin in the tiles.
    *[(("conv.dsp_order", "compiler"), "pointwise16", "cortex-m7", o)
      for o in ({}, {"conv.outline": True})],
    (("conv.dsp_order", "pipelined"), "pointwise16", "cortex-m4f", {}),
    # a first conv's word column (3 pixels x 2 channels, 14 words; padded pixels too)
    (("conv.dsp_order", "compiler"), "nhwc", "cortex-m7", {}),
    # Column words loaded one pixel ahead of their MACs (default on the M33 but for 32-word
    # columns): off on a 36-word pairs column (int16 and packed weights), on on the M4; the
    # M33's tiles inline up to 128 words (packed too), outlined instead.
    *[(("conv.dsp_stagger", False), "long", "cortex-m33", {"conv.column": "pairs", **w})
      for w in ({}, {"conv.dsp_wide": False})],
    *[(("conv.dsp_stagger", True), "pointwise", "cortex-m4f", w)
      for w in ({}, {"conv.dsp_wide": False})],
    (("conv.outline", True), "long", "cortex-m33", {"conv.column": "pairs",
                                                    "conv.dsp_wide": False}),
    *[(("gemm.tile", v), "matmul", None, {}) for v in (4, 16)],
    *[(("gemm.mve_order", v), "matmul", "cortex-m55", {}) for v in ("ordered", "compiler")],
    (("gemm.unroll", False), "matmul", None, {}),
    *[(("gemm.unroll_k", v), "matmul", None, {}) for v in (2, 4)],  # K = 21: a rest of 1
    (("gemm.unroll_k", 4), "matmul", "cortex-m4f", {"gemm.path": "scalar"}),
    # Pixel tiles: 3x3 with padding (border pixels and the remainder one at a time), a
    # pointwise conv (pixels flattened), depthwise with stride 2 (tiled along rows); rows of a
    # matmul (M=3: a tile and a narrower rest, or only the rest).
    *[(("conv.tile_pixels", v), k, t, {}) for v in (1, 4) for k in (None, "pointwise")
      for t in (None, "cortex-m0plus")],
    (("conv.tile_pixels", 4), "depthwise", "cortex-m0plus", {}),
    (("conv.tile_pixels", 4), "even", "cortex-m4f", {"conv.path": "scalar"}),
    (("conv.tile_pixels", 2), None, "host", {}),
    *[(("gemm.tile_rows", v), "matmul", t, {}) for v in (1, 4)
      for t in (None, "cortex-m0plus")],
    (("gemm.tile_rows", 2), "matmul", "host", {}),
    (("unroll_max", 1), None, None, {}),
    (("unroll_max", 16), "wide", None, {}),  # a 10-tap window: unrolled only from 16 on
]


def _int_model(kind):
    if kind == "matmul":
        return qmatmul(M=3, K=21, N=11)
    if kind == "matmul_quads":
        return qmatmul(M=3, K=24, N=11)
    if kind == "depthwise":  # odd kernel width: the last word's idle lane; stride 2
        return qconv(cin=6, m=6, group=6, hw=(7, 8), kernel=(3, 3), strides=(2, 1))
    if kind == "depthwise_wide":  # 5 output rows of 11
        return qconv(cin=3, m=3, group=3, hw=(5, 11))
    if kind == "pointwise":  # a 2-word column: tiles inline by default
        return qconv(cin=4, m=6, hw=(3, 4), kernel=(1, 1), pads=(0, 0, 0, 0))
    if kind == "pointwise16":  # an 8-word column
        return qconv(cin=16, m=6, hw=(3, 4), kernel=(1, 1), pads=(0, 0, 0, 0))
    if kind == "even":
        return qconv(cin=4, m=6, hw=(5, 5), pads=(0, 1, 1, 0))
    if kind == "pointwise":
        return qconv(cin=5, m=6, kernel=(1, 1), pads=(0, 0, 0, 0), hw=(5, 7))
    if kind == "nhwc":  # channels-last int8, 3x3 stride 2 over 3 channels, 9 of 7 x 5 pixels
        # padded, the rest a group of 2
        return qconv_nhwc(cin=3, m=7, hw=(13, 9), strides=(2, 2))
    if kind == "pointwise16":  # 8-word columns, 15 pixels (3 groups of 4, a rest of 3), 7
        # channels (3 tiles of 2, a rest of 1)
        return qconv(cin=16, m=7, kernel=(1, 1), pads=(0, 0, 0, 0), hw=(3, 5))
    if kind == "long":  # 4 channel pairs x 9 taps: a 36-word column
        return qconv(cin=8, m=6, hw=(5, 5))
    if kind == "longer":  # 8 channel pairs x 9 taps: a 72-word column
        return qconv(cin=16, m=6, hw=(4, 4))
    if kind == "wide":
        return qconv(cin=3, m=5, kernel=(1, 10), pads=(0, 0, 0, 0), hw=(3, 12))
    return qconv(cin=5, m=7, hw=(6, 5))


@pytest.mark.parametrize("case", INT_CASES, ids=lambda c: f"{c[0][0]}={c[0][1]}-{c[2]}")
def test_integer_knob_gives_the_default_bytes(case, tmp_path):
    (knob, value), kind, target, extra = case
    assert value in KNOBS[knob].choices
    model, x = _int_model(kind)
    base, tuned = _with(model, tmp_path, target, extra, {knob: value})
    assert _c(tuned) != _c(base), f"{knob}={value} changed nothing"
    want = base.load().run({"x": x})["y"]
    np.testing.assert_array_equal(tuned.load().run({"x": x})["y"], want)
    if target not in (None, "host"):
        np.testing.assert_array_equal(tuned.load(target).run({"x": x})["y"], want)


def _float_models():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 5, 6, 5)).astype(np.float32)
    w = rng.standard_normal((7, 5, 3, 3)).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float32)
    conv = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])],
                      {"x": x}, {"y": (np.float32, None)}, {"w": w, "b": b})
    a = rng.standard_normal((3, 21)).astype(np.float32)
    bm = rng.standard_normal((21, 11)).astype(np.float32)
    mm = make_model([helper.make_node("MatMul", ["x", "b"], ["y"])], {"x": a},
                    {"y": (np.float32, None)}, {"b": bm})
    # Depthwise with stride 2 and uneven pads; pointwise on a 5x6 image.
    wd = rng.standard_normal((5, 1, 3, 3)).astype(np.float32)
    dw = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 0, 0, 1],
                                      group=5, strides=[2, 1])],
                    {"x": x}, {"y": (np.float32, None)}, {"w": wd, "b": b[:5]})
    # Depthwise with stride 1 (the plane schedules), dilated rows, uneven pads, a fused Relu.
    dw1 = make_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[2, 1, 1, 1],
                                       group=5, dilations=[2, 1]),
                      helper.make_node("Relu", ["c"], ["y"])],
                     {"x": x}, {"y": (np.float32, None)}, {"w": wd, "b": b[:5]})
    wp = rng.standard_normal((7, 5, 1, 1)).astype(np.float32)
    pw = make_model([helper.make_node("Conv", ["x", "w"], ["y"])],
                    {"x": x}, {"y": (np.float32, None)}, {"w": wp})
    at = rng.standard_normal((21, 5)).astype(np.float32)
    c = rng.standard_normal((1, 11)).astype(np.float32)
    gemm = make_model([helper.make_node("Gemm", ["x", "b", "c"], ["y"], transA=1, alpha=0.5)],
                      {"x": at}, {"y": (np.float32, None)}, {"b": bm, "c": c})
    return {"conv": (conv, x), "matmul": (mm, a), "depthwise": (dw, x), "pointwise": (pw, x),
            "gemm": (gemm, at), "depthwise1": (dw1, x)}


# (model, knob, value, target): values other than the target's default.
FLOAT_CASES = [("conv", "conv.tile", 2, None), ("conv", "conv.tile", 8, "host"),
               ("conv", "conv.unroll", False, None), ("conv", "conv.unroll", True, "host"),
               ("matmul", "gemm.tile", 4, None), ("matmul", "gemm.tile", 16, "host"),
               ("matmul", "gemm.unroll", False, None), ("conv", "unroll_max", 1, None),
               *[(k, "conv.tile_pixels", v, t) for k in ("conv", "depthwise", "pointwise")
                 for v, t in ((2, None), (4, None), (1, "host"), (2, "host"),
                              (1, "cortex-m4f"), (2, "cortex-m4f"))],
               ("conv", "conv.tile", 8, "cortex-m4f"),
               # Float depthwise: the padded plane (default with an FPU for stride 1) or not.
               *[("depthwise1", "conv.float_depthwise", v, "cortex-m4f")
                 for v in ("plane1", "plane2", "plane8", "tiled")],
               *[("depthwise", "conv.float_depthwise", v, "cortex-m4f")
                 for v in ("plane1", "plane4")],
               ("depthwise1", "conv.float_depthwise", "plane2", None),
               # k steps per iteration (K = 21: the rest one at a time).
               *[(k, "gemm.unroll_k", v, t) for k in ("matmul", "gemm")
                 for v, t in ((4, None), (1, "cortex-m4f"), (2, "cortex-m4f"))],
               *[(k, "gemm.tile_rows", v, t) for k in ("matmul", "gemm")
                 for v, t in ((2, None), (4, None), (2, "host"), (1, "cortex-m4f"),
                              (4, "cortex-m4f"))],
               # Loads as one VLDM each (default with an FPU) or not; the tiles of 6 and 8
               # pixels (the inside remainder one narrower tile); float tiles outlined (default
               # from 32 taps: the 3x3 conv's 45) or not.
               *[(k, "conv.vldm", False, "cortex-m4f") for k in ("conv", "pointwise")],
               *[(k, "gemm.vldm", False, "cortex-m4f") for k in ("matmul", "gemm")],
               *[(k, "conv.tile_pixels", v, t) for v in (6, 8)
                 for k, t in (("conv", None), ("pointwise", None), ("pointwise", "cortex-m4f"))],
               ("conv", "conv.outline", False, "cortex-m4f"),
               ("pointwise", "conv.outline", True, "cortex-m4f")]


@pytest.mark.parametrize("case", FLOAT_CASES, ids=lambda c: f"{c[0]}-{c[1]}={c[2]}-{c[3]}")
def test_float_knob_matches_onnxruntime(case, tmp_path):
    kind, knob, value, target = case
    model, x = _float_models()[kind]
    base, tuned = _with(model, tmp_path, target, {}, {knob: value})
    assert _c(tuned) != _c(base), f"{knob}={value} changed nothing"
    want = ort_run(model, {"x": x})["y"]
    np.testing.assert_allclose(tuned.load().run({"x": x})["y"], want, rtol=1e-5, atol=1e-5)
    if target not in (None, "host"):
        np.testing.assert_allclose(tuned.load(target).run({"x": x})["y"], want, rtol=1e-5,
                                   atol=1e-5)


@pytest.mark.parametrize("value", ["plane4", "tiled"])
def test_float_depthwise_inf_weight_in_the_padding_is_nan_as_onnxruntime(value, tmp_path):
    # A padded tap adds 0 * w: NaN for an inf weight in the definition and in onnxruntime;
    # the plane schedule computes it, the tiled one reads a compile-time table.
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 3, 4, 5)).astype(np.float32)
    w = rng.standard_normal((3, 1, 3, 3)).astype(np.float32)
    w[1, 0, 0, 0] = np.inf
    w[2, 0, 2, 1] = -np.inf
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1],
                                         group=3)],
                       {"x": x}, {"y": (np.float32, None)}, {"w": w})
    want = ort_run(model, {"x": x})["y"]
    assert np.isnan(want).any()
    keys = {w["key"] for w in _workloads(aotc.compile(model, tmp_path / "d", name="m",
                                                      target="cortex-m4f")).values()}
    bundle = _compile(model, tmp_path / "t", "cortex-m4f", {"conv.float_depthwise": value},
                      keys)
    assert ("plane" in _c(bundle)) == (value != "tiled")
    for where in (None, "cortex-m4f"):
        np.testing.assert_allclose(bundle.load(where).run({"x": x})["y"], want, rtol=1e-5,
                                   atol=1e-5)


def test_unknown_knob_or_value_is_a_clear_error():
    with pytest.raises(aotc.AotcError, match="unknown schedule knob"):
        aotc.schedules.checked({"conv.tiles": 4})
    with pytest.raises(aotc.AotcError, match=r"conv.tile = 5 is not one of \[2, 4, 8\]"):
        aotc.schedules.checked({"conv.tile": 5})


def test_workload_key_ignores_names_and_weight_values(tmp_path):
    m1, _ = qconv(seed=0)
    m2, _ = qconv(seed=1)
    m2.graph.node[0].name = "renamed"
    k1 = {w["key"] for w in _workloads(aotc.compile(m1, tmp_path / "a", name="m")).values()}
    k2 = {w["key"] for w in _workloads(aotc.compile(m2, tmp_path / "b", name="m")).values()}
    m3, _ = qconv(cin=6)
    k3 = {w["key"] for w in _workloads(aotc.compile(m3, tmp_path / "c", name="m")).values()}
    assert k1 == k2 and k1.isdisjoint(k3)
