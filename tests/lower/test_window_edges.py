"""Windowed ops on degenerate geometries, where the range analysis decides whole taps or whole
windows at compile time (aotc.loops.ranges) and the bindings their guards used must vanish
with them: kernel larger than the input, pads larger than the kernel, stride larger than the
input, 1x1 (and length-1) feature maps. Each case is compiled with -Werror (aotc.targets.host builds
with ``-std=c99 -Wall -Wextra -Werror -pedantic``, so an unused local fails the build) and its
outputs are compared with onnxruntime through the generated C, tolerance atol=rtol=1e-5. Host
only: the mechanism under test is in the compiler, not the target, and the boards run the same C.

Left out, because onnxruntime rejects them as invalid: pools whose pads are >= the kernel
("Pad should be smaller than kernel"), which the ONNX spec also disallows, and geometries whose
output would be empty (ConvTranspose with pads > kernel gets stride 4 instead).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from opcheck import compile_and_run, make_model, ort_run, rand

# (name, input spatial shape, attributes): the degenerate geometries, in 1-D and 2-D.
GEOMETRIES_2D = [
    ("kernel>input", (2, 9), dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2])),
    ("kernel>input_both", (2, 3), dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2])),
    ("pads>kernel", (3, 4), dict(kernel_shape=[2, 2], pads=[3, 3, 3, 3])),
    ("stride>input", (3, 4), dict(kernel_shape=[2, 3], strides=[5, 6], pads=[1, 1, 1, 1])),
    ("1x1", (1, 1), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ("1x1_k1", (1, 1), dict(kernel_shape=[1, 1])),
]
GEOMETRIES_1D = [
    ("kernel>input", (2,), dict(kernel_shape=[5], pads=[2, 2])),
    ("pads>kernel", (3,), dict(kernel_shape=[2], pads=[3, 3])),
    ("stride>input", (3,), dict(kernel_shape=[2], strides=[5], pads=[1, 1])),
    ("len1", (1,), dict(kernel_shape=[3], pads=[1, 1])),
]
GEOMETRIES = [(f"{len(s)}d_{n}", s, a) for n, s, a in GEOMETRIES_2D + GEOMETRIES_1D]

C = 4  # channels: depthwise uses group=4, grouped group=2

CONVS = {  # name -> (op, group, weight shape head (M, C/group))
    "conv": ("Conv", 1, (3, C)),
    "depthwise": ("Conv", C, (C, 1)),
    "grouped": ("Conv", 2, (4, C // 2)),
    "convtranspose": ("ConvTranspose", 1, (C, 3)),
    "convtranspose_grouped": ("ConvTranspose", 2, (C, 2)),
}
POOLS = {  # name -> (op, extra attributes)
    "maxpool": ("MaxPool", {}),
    "avgpool_cip0": ("AveragePool", dict(count_include_pad=0)),
    "avgpool_cip1": ("AveragePool", dict(count_include_pad=1)),
    "lppool": ("LpPool", dict(p=2)),
}


def _pool_valid(attrs: dict) -> bool:
    k = attrs["kernel_shape"]
    pads = attrs.get("pads", [0] * 2 * len(k))
    return all(p < k[i % len(k)] for i, p in enumerate(pads))


def _run(node: onnx.NodeProto, x: np.ndarray, inits: dict[str, np.ndarray]) -> None:
    model = make_model([node], {"x": x}, {"y": (np.float32, None)}, inits, opset=18)
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model)
    want = ort_run(model, {"x": x})["y"]
    assert want.size > 0
    with tempfile.TemporaryDirectory(prefix="aotc_test_") as tmp:
        got, _ = compile_and_run(model, {"x": x}, Path(tmp) / "b")
    assert got["y"].shape == want.shape
    np.testing.assert_allclose(got["y"], want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("op_name", list(CONVS))
@pytest.mark.parametrize("geom", GEOMETRIES, ids=[g[0] for g in GEOMETRIES])
def test_conv_edges(op_name: str, geom: tuple) -> None:
    name, spatial, attrs = geom
    op, group, head = CONVS[op_name]
    if op == "ConvTranspose" and "pads>kernel" in name:
        # (in - 1) * stride + k - 2 * pads must stay positive (onnxruntime rejects an empty
        # output): stride 4 keeps the pads larger than the kernel and crops whole taps.
        attrs = {**attrs, "strides": [4] * len(spatial)}
    x = rand(1, C, *spatial, seed=1)
    w = rand(*head, *attrs["kernel_shape"], seed=2)
    b = rand(head[1] * group if op == "ConvTranspose" else head[0], seed=3)
    node = helper.make_node(op, ["x", "w", "b"], ["y"], group=group, **attrs)
    _run(node, x, {"w": w, "b": b})


@pytest.mark.parametrize("op_name", list(POOLS))
@pytest.mark.parametrize("geom", [g for g in GEOMETRIES if _pool_valid(g[2])],
                         ids=[g[0] for g in GEOMETRIES if _pool_valid(g[2])])
def test_pool_edges(op_name: str, geom: tuple) -> None:
    _, spatial, attrs = geom
    op, extra = POOLS[op_name]
    x = rand(1, C, *spatial, seed=4)
    node = helper.make_node(op, ["x"], ["y"], **attrs, **extra)
    _run(node, x, {})
