"""Resize and Upsample against onnxruntime: every mode, coordinate transformation and
nearest_mode, scales vs sizes, axes, antialias, keep_aspect_ratio_policy, tf_crop_and_resize
extrapolation, integer dtypes (nearest only), and the AotcErrors for what is not supported."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper
from opcheck import check, make_model, rand
from test_shape import expect_error

import aotc
from aotc.errors import AotcError
from aotc.ir.graph import Node
from aotc.ops.image.resize import resize_plan

F32 = np.float32
TOL = {"atol": 1e-5, "rtol": 1e-4}


def one_node(op: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any] | None = None,
             consts: Mapping[str, np.ndarray] | None = None, names: Sequence[str] | None = None,
             opset: int = 19, out_dtype: Any = None) -> onnx.ModelProto:
    """A one-node model; ``names`` orders the node inputs ("" for an omitted one)."""
    names = list(names) if names is not None else [*inputs, *(consts or {})]
    dtype = out_dtype or next(iter(inputs.values())).dtype
    node = helper.make_node(op, names, ["y"], name="n", **dict(attrs or {}))
    m = make_model([node], inputs, {"y": (dtype, None)}, consts, opset)
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    m.graph.output[0].CopyFrom(inferred.graph.output[0])
    return m


def run(op: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any] | None = None,
        consts: Mapping[str, np.ndarray] | None = None, names: Sequence[str] | None = None,
        opset: int = 19, **tol: float) -> aotc.Bundle:
    m = one_node(op, inputs, attrs, consts, names, opset)
    return check(m, dict(inputs), **(tol or TOL))


def resize(x: np.ndarray, attrs: Mapping[str, Any], scales: Sequence[float] | None = None,
           sizes: Sequence[int] | None = None, roi: Sequence[float] | None = None,
           opset: int = 19, **tol: float) -> aotc.Bundle:
    consts: dict[str, np.ndarray] = {}
    names = ["x", "", "", ""]
    if roi is not None:
        consts["roi"], names[1] = np.array(roi, F32), "roi"
    if scales is not None:
        consts["scales"], names[2] = np.array(scales, F32), "scales"
    if sizes is not None:
        consts["sizes"], names[3] = np.array(sizes, np.int64), "sizes"
    while names[-1] == "":
        names.pop()
    return run("Resize", {"x": x}, attrs, consts, names, opset, **tol)


X4 = rand(1, 2, 4, 5, seed=1)


# ----------------------------------------------------------------------------------- modes
@pytest.mark.parametrize("ctm", ["half_pixel", "pytorch_half_pixel", "align_corners",
                                 "asymmetric", "half_pixel_symmetric"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 1.5], [1, 1, 0.6, 0.8]])
def test_resize_modes_scales(ctm, mode, scales):
    if ctm == "align_corners":
        # The onnx reference (and the node tests) divide by the fractional output length
        # in * scale, onnxruntime by the integer one: compare only where they agree.
        scales = [1, 1, 2, 0.6] if scales[2] > 1 else [1, 1, 0.5, 1.6]
    resize(X4, {"mode": mode, "coordinate_transformation_mode": ctm}, scales=scales)


@pytest.mark.parametrize("ctm", ["half_pixel", "align_corners", "asymmetric",
                                 "pytorch_half_pixel"])
@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("sizes", [[1, 2, 7, 3], [1, 2, 1, 9]])
def test_resize_modes_sizes(ctm, mode, sizes):
    resize(X4, {"mode": mode, "coordinate_transformation_mode": ctm}, sizes=sizes)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor",
                                          "ceil"])
@pytest.mark.parametrize("ctm", ["half_pixel", "asymmetric", "align_corners"])
def test_resize_nearest_modes(nearest_mode, ctm):
    resize(X4, {"mode": "nearest", "nearest_mode": nearest_mode,
                "coordinate_transformation_mode": ctm}, sizes=[1, 2, 7, 8])


@pytest.mark.parametrize("a,exclude", [(-0.5, 1), (-0.75, 0), (-0.5, 0)])
def test_resize_cubic_coeff(a, exclude):
    resize(X4, {"mode": "cubic", "cubic_coeff_a": a, "exclude_outside": exclude},
           scales=[1, 1, 1.7, 0.6])


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scales", [[1, 1, 0.5, 0.4], [1, 1, 0.75, 1.5]])
def test_resize_antialias(mode, scales):
    x = rand(1, 1, 8, 10, seed=3)
    resize(x, {"mode": mode, "antialias": 1}, scales=scales)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_tf_crop_and_resize(mode):
    resize(X4, {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize",
                "extrapolation_value": 7.5},
           roi=[0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3], sizes=[1, 2, 5, 6])


def test_resize_axes_and_aspect_ratio():
    for policy in ("not_larger", "not_smaller"):
        resize(X4, {"mode": "linear", "axes": [3, 2], "keep_aspect_ratio_policy": policy},
               sizes=[7, 6])
    resize(X4, {"mode": "nearest", "axes": [-1]}, scales=[2.5])


def test_resize_3d_and_5d():
    resize(rand(2, 3, 7, seed=4), {"mode": "linear"}, scales=[1, 1, 1.6])
    resize(rand(1, 1, 3, 4, 2, seed=5), {"mode": "linear"}, sizes=[1, 1, 5, 3, 4])


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_resize_older_opsets(opset):
    x = rand(1, 2, 3, 4, seed=6)
    consts = {"roi": np.zeros(0, F32), "scales": np.array([1, 1, 2, 0.5], F32)}
    run("Resize", {"x": x}, {"mode": "linear", "coordinate_transformation_mode": "asymmetric"},
        consts, ["x", "roi", "scales"], opset)
    if opset == 11:
        run("Resize", {"x": x}, {"mode": "nearest",
                                 "coordinate_transformation_mode": "tf_half_pixel_for_nn"},
            consts, ["x", "roi", "scales"], opset)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32])
def test_resize_nearest_integer(dtype):
    x = np.arange(2 * 3 * 4, dtype=dtype).reshape(1, 2, 3, 4)
    resize(x, {"mode": "nearest"}, scales=[1, 1, 2.5, 0.5], atol=0, rtol=0)


def test_resize_identity_axis_is_a_copy():
    b = resize(X4, {"mode": "linear"}, scales=[1, 1, 1, 2])
    assert any("resize" in k for k in b.kernels)


# ----------------------------------------------------------------------------------- Upsample
@pytest.mark.parametrize("mode,scales", [("nearest", [1, 1, 2, 3]), ("nearest", [1, 1, 1.5, 2]),
                                         ("linear", [1, 1, 2, 2.5])])
def test_upsample9(mode, scales):
    x = rand(1, 2, 3, 4, seed=7)
    run("Upsample", {"x": x}, {"mode": mode}, {"scales": np.array(scales, F32)}, opset=9)


def test_upsample7_attribute_scales():
    x = rand(1, 2, 3, 4, seed=8)
    run("Upsample", {"x": x}, {"mode": "nearest", "scales": [1.0, 1.0, 2.0, 2.0]}, opset=7)


# ----------------------------------------------------------------------------------- errors
def test_resize_linear_integer_is_an_error():
    x = np.zeros((1, 1, 2, 2), np.uint8)
    m = one_node("Resize", {"x": x}, {"mode": "linear"},
                 {"scales": np.array([1, 1, 2, 2], F32)}, ["x", "", "scales"])
    expect_error(m, "only nearest")


def test_resize_runtime_scales_is_an_error():
    m = one_node("Resize", {"x": X4, "scales": np.ones(4, F32)}, {"mode": "linear"},
                 names=["x", "", "scales"])
    expect_error(m, "input 2 must be a compile-time constant")


def test_resize_scales_and_sizes_is_an_error():
    node = Node("Resize", "n", ("x",), ("y",), {"mode": "linear",
                                               "coordinate_transformation_mode": "half_pixel"})
    with pytest.raises(AotcError, match="exactly one of scales and sizes"):
        resize_plan(node, (1, 2, 4, 5), None, np.ones(4, F32), np.array([1, 2, 4, 5]))
