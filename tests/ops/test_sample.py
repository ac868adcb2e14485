"""Spatial sampling ops against onnxruntime: GridSample (modes x padding modes x align_corners,
2-D and volumetric, opset 16 names), AffineGrid, CenterCropPad, Col2Im, RoiAlign and DeformConv;
and the AotcErrors for what is not supported."""

from __future__ import annotations

import numpy as np
import pytest
from opcheck import rand
from test_resize import one_node, run
from test_shape import expect_error

from aotc.errors import AotcError
from aotc.ir.graph import Node
from aotc.ops.image.sample import Col2Im

F32, I64 = np.float32, np.int64


def i64(*v: int) -> np.ndarray:
    return np.array(v, I64)


# ---------------------------------------------------------------------------------- GridSample
@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_gridsample_2d(mode, padding, align):
    x = rand(2, 3, 5, 4, seed=1)
    grid = rand(2, 3, 6, 2, seed=2, lo=-1.4, hi=1.4)
    run("GridSample", {"x": x, "grid": grid},
        {"mode": mode, "padding_mode": padding, "align_corners": align}, opset=20)


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("padding", ["border", "reflection"])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_gridsample_far_outside(mode, padding, align):
    """Grid points several image widths away: reflection folds more than once."""
    x = rand(1, 2, 3, 5, seed=17)
    grid = rand(1, 4, 5, 2, seed=18, lo=-4.5, hi=4.5)
    run("GridSample", {"x": x, "grid": grid},
        {"mode": mode, "padding_mode": padding, "align_corners": align}, opset=20)


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_gridsample_volumetric(mode, padding, align):
    x = rand(1, 2, 3, 4, 5, seed=3)
    grid = rand(1, 2, 3, 4, 3, seed=4, lo=-1.3, hi=1.3)
    run("GridSample", {"x": x, "grid": grid},
        {"mode": mode, "padding_mode": padding, "align_corners": align}, opset=20)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_gridsample_opset16(mode):
    x = rand(1, 2, 4, 4, seed=5)
    grid = rand(1, 5, 3, 2, seed=6, lo=-1.2, hi=1.2)
    run("GridSample", {"x": x, "grid": grid}, {"mode": mode, "padding_mode": "border"},
        opset=16)


def test_gridsample_bad_mode_for_opset_is_an_error():
    x, grid = rand(1, 1, 3, 3), rand(1, 2, 2, 2, seed=1)
    m = one_node("GridSample", {"x": x, "grid": grid}, {"mode": "linear"}, opset=20)
    m.opset_import[0].version = 16
    expect_error(m, "mode='linear' is not valid at this opset")


# ---------------------------------------------------------------------------------- AffineGrid
@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 1, 3, 2, 4)])
def test_affine_grid(size, align):
    d = len(size) - 2
    theta = rand(size[0], d, d + 1, seed=7)
    run("AffineGrid", {"theta": theta}, {"align_corners": align},
        {"size": np.array(size, I64)}, opset=20)


# ------------------------------------------------------------------------------- CenterCropPad
@pytest.mark.parametrize("shape,target,axes", [
    ((6, 7, 3), [4, 9, 3], None),
    ((6, 7, 3), [9, 2], [0, 1]),
    ((3, 6, 7), [8, 3], [-1, -2]),
    ((5,), [5], None),
])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int64])
def test_center_crop_pad(shape, target, axes, dtype):
    x = (rand(*shape, seed=8) * 50).astype(dtype)
    attrs = {} if axes is None else {"axes": axes}
    run("CenterCropPad", {"x": x}, attrs, {"shape": np.array(target, I64)}, opset=18,
        atol=0, rtol=0)


# -------------------------------------------------------------------------------------- Col2Im
@pytest.mark.parametrize("image,block,attrs", [
    ((5, 5), (2, 2), {}),
    ((6, 5), (3, 2), {"strides": [2, 1], "dilations": [1, 2], "pads": [1, 0, 1, 2]}),
    ((4, 7), (1, 3), {"pads": [0, 1, 0, 1], "strides": [1, 2]}),
])
def test_col2im(image, block, attrs):
    nd = len(image)
    st = attrs.get("strides", [1] * nd)
    dil = attrs.get("dilations", [1] * nd)
    pads = attrs.get("pads", [0] * 2 * nd)
    cols = [(image[i] + pads[i] + pads[i + nd] - dil[i] * (block[i] - 1) - 1) // st[i] + 1
            for i in range(nd)]
    x = rand(2, 3 * int(np.prod(block)), int(np.prod(cols)), seed=9)
    run("Col2Im", {"x": x}, attrs, {"image_shape": np.array(image, I64),
                                    "block_shape": np.array(block, I64)}, opset=18)


def test_col2im_bad_length_is_an_error():
    # onnx shape inference rejects such a model first: check the geometry directly.
    with pytest.raises(AotcError, match="does not match"):
        Col2Im().geometry(Node("Col2Im", "n", (), (), {}), (1, 4, 7), [3, 3], [2, 2])


# ------------------------------------------------------------------------------------ RoiAlign
ROIS = np.array([[0.5, 0.8, 4.2, 3.9], [1, 0, 6.5, 5], [-1, 2, 3, 7.5]], F32)


@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("ratio", [0, 2])
@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_roialign_avg(ctm, ratio, scale):
    x = rand(2, 3, 6, 7, seed=10)
    run("RoiAlign", {"x": x, "rois": ROIS * (1 / scale)},
        {"coordinate_transformation_mode": ctm, "sampling_ratio": ratio, "mode": "avg",
         "output_height": 3, "output_width": 2, "spatial_scale": scale},
        {"batch_indices": i64(0, 1, 1)}, ["x", "rois", "batch_indices"], opset=16)


def test_roialign_runtime_batch_indices():
    x = rand(2, 2, 5, 5, seed=11)
    run("RoiAlign", {"x": x, "rois": ROIS, "bi": i64(1, 0, 1)},
        {"output_height": 2, "output_width": 2, "sampling_ratio": 1}, opset=16)


def test_roialign_bad_batch_index_is_an_error():
    m = one_node("RoiAlign", {"x": rand(1, 1, 4, 4), "rois": ROIS},
                 {"output_height": 2, "output_width": 2}, {"bi": i64(0, 1, 0)}, opset=16)
    expect_error(m, "batch_indices .* out of range")


# ---------------------------------------------------------------------------------- DeformConv
@pytest.mark.parametrize("group,og,attrs,with_mask,with_bias", [
    (1, 1, {}, False, False),
    (1, 1, {"pads": [1, 1, 1, 1]}, True, True),
    (2, 2, {"strides": [2, 1], "dilations": [1, 2], "pads": [1, 0, 0, 2]}, True, False),
    (1, 2, {}, False, True),
    (2, 1, {"pads": [0, 1, 1, 0]}, False, False),
])
def test_deform_conv(group, og, attrs, with_mask, with_bias):
    N, IC, H, W, OC, KH, KW = 1, 4, 5, 6, 4, 2, 3
    st, dil = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    pads = attrs.get("pads", [0, 0, 0, 0])
    oh = (H + pads[0] + pads[2] - dil[0] * (KH - 1) - 1) // st[0] + 1
    ow = (W + pads[1] + pads[3] - dil[1] * (KW - 1) - 1) // st[1] + 1
    inputs = {"x": rand(N, IC, H, W, seed=12), "w": rand(OC, IC // group, KH, KW, seed=13),
              "off": rand(N, og * KH * KW * 2, oh, ow, seed=14, lo=-1.5, hi=1.5)}
    names = ["x", "w", "off", "", ""]
    consts = {}
    if with_bias:
        consts["b"], names[3] = rand(OC, seed=15), "b"
    if with_mask:
        inputs["mask"], names[4] = rand(N, og * KH * KW, oh, ow, seed=16, lo=0, hi=1), "mask"
    while names[-1] == "":
        names.pop()
    run("DeformConv", inputs, {"kernel_shape": [KH, KW], "group": group, "offset_group": og,
                               **attrs}, consts, names, opset=19)


def test_roialign_max():
    x = rand(1, 2, 6, 7, seed=19)
    run("RoiAlign", {"x": x, "rois": ROIS},
        {"mode": "max", "output_height": 2, "output_width": 3, "sampling_ratio": 2},
        {"batch_indices": i64(0, 0, 0)}, ["x", "rois", "batch_indices"], opset=16)
