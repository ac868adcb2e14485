"""The generated C indexes with int32_t: a kernel whose index arithmetic can leave that range is
rejected at compile time with an AotcError naming the node (ranges.index_overflow), and one just
inside the range compiles (-Werror), builds and matches onnxruntime.

The shapes here are tiny; the strides and pads are huge, so ``o * stride - pad`` reaches the
limit (the frontend's per-tensor size limit keeps the buffers themselves far below it).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from opcheck import compile_and_run, make_model, ort_run, rand

import aotc
from aotc.errors import AotcError
from aotc.loops.loop_ir import Buffer, Kernel
from aotc.loops.ranges import index_overflow


def _conv(pad: int, stride: int):  # type: ignore[no-untyped-def]
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="big_conv", pads=[pad] * 4,
                            strides=[stride] * 2)
    return make_model([node], {"x": rand(1, 1, 4, 4)}, {"y": (np.float32, None)},
                      {"w": rand(1, 1, 1, 1, seed=1)})


def test_index_just_inside_int32_compiles_and_matches() -> None:
    s = (2**31 - 1) // 2  # output 3x3: the last o * stride is 2**31 - 2
    model = _conv(s, s)
    x = rand(1, 1, 4, 4, seed=2)
    want = ort_run(model, {"x": x})["y"]
    with tempfile.TemporaryDirectory(prefix="aotc_test_") as tmp:
        got, _ = compile_and_run(model, {"x": x}, Path(tmp) / "b")
    np.testing.assert_allclose(got["y"], want, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("pad,stride", [(2**30, 2**30), (2**31, 2**31), (2**30, 2**30 + 1)])
def test_index_beyond_int32_is_rejected(pad: int, stride: int) -> None:
    with tempfile.TemporaryDirectory(prefix="aotc_test_") as tmp:
        with pytest.raises(AotcError, match=r"node 'big_conv' \(Conv\): .*int32_t indexing"):
            aotc.compile(_conv(pad, stride), tmp, name="m")


def test_buffer_beyond_int32_is_reported() -> None:
    from aotc.dtypes import BY_NAME
    k = Kernel("k", (Buffer("x0", BY_NAME["uint8"], 2**31, "in"),), ())
    assert "2147483648 elements" in (index_overflow(k) or "")
    k = Kernel("k", (Buffer("x0", BY_NAME["uint8"], 2**31 - 1, "in"),), ())
    assert index_overflow(k) is None
