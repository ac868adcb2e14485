"""aotc.verify is the function however often it is called (the verification module once shadowed
it: the second call raised "'module' object is not callable")."""

from __future__ import annotations

import numpy as np
from onnx import helper
from opcheck import make_model

import aotc


def test_verify_twice(tmp_path):
    node = helper.make_node("Relu", ["x"], ["y"])
    m = make_model([node], {"x": np.zeros((2, 3), np.float32)}, {"y": (np.float32, [2, 3])})
    for i in range(2):
        assert callable(aotc.verify)
        aotc.verify(m, tmp_path / f"b{i}")
