"""AOTC_HOST_CFLAGS: extra words for the host build only (the latency benches pass
"-march=native -fpeel-loops"). They reach the compiler after the default flags, key the
library cache, and leave the bundle's own files (its CMakeLists.txt for firmware) alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import aotc
from aotc.errors import AotcError
from aotc.targets import host


def _bundle(tmp_path: Path) -> aotc.Bundle:
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "r",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return aotc.compile(model, tmp_path / "b", name="r")


def test_host_cflags_reach_the_compiler_and_key_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AOTC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("AOTC_HOST_CFLAGS", raising=False)
    b = _bundle(tmp_path)
    cmake = (b.directory / "CMakeLists.txt").read_text()
    plain = host.build_shared(b.directory)
    assert host.host_flags()[-1] == "-shared"

    monkeypatch.setenv("AOTC_HOST_CFLAGS", " -fpeel-loops  -DAOTC_TEST_FLAG=1 ")
    assert host.host_flags()[-2:] == ["-fpeel-loops", "-DAOTC_TEST_FLAG=1"]
    flagged = host.build_shared(b.directory)
    assert flagged != plain  # another library, not the cached one
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(b.load().run({"x": x})["y"], np.maximum(x, 0))

    monkeypatch.setenv("AOTC_HOST_CFLAGS", "-fno-such-option-aotc")
    with pytest.raises(AotcError, match="host cc"):
        host.build_shared(b.directory)
    assert (b.directory / "CMakeLists.txt").read_text() == cmake
