"""The host build's clang check (aotc.targets.host.clang_check, on for the whole test suite through
AOTC_CLANG_CHECK=1 in tests/conftest.py): a bundle gcc accepts but clang warns about is an
AotcError naming clang's diagnostic; a clean bundle passes and is remembered by content."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import aotc
from aotc.targets import host


def _bundle(tmp_path: Path) -> Path:
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "r",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return Path(aotc.compile(model, tmp_path / "b", name="r").directory)


def test_clang_check_rejects_what_only_clang_warns_about(tmp_path, monkeypatch):
    monkeypatch.setenv("AOTC_CACHE_DIR", str(tmp_path / "cache"))
    b = _bundle(tmp_path)
    monkeypatch.setenv("AOTC_CLANG_CHECK", "1")
    host.clang_check(b)  # the generated bundle is clean
    assert len(list((tmp_path / "cache").glob("clang_*.ok"))) == 1
    # gcc -Wall -Wextra -pedantic accepts a logical operator with a constant operand; clang
    # -Wall does not (-Wconstant-logical-operand).
    with (b / "r.c").open("a") as f:
        f.write("int r_extra(int x);\nint r_extra(int x)\n{\n    return x && 4;\n}\n")
    monkeypatch.setenv("AOTC_CLANG_CHECK", "0")
    runner = host.Runner(b)  # gcc alone builds it
    x = np.array([[-1, 0, 2], [3, -4, 5]], np.float32)
    np.testing.assert_array_equal(runner.run({"x": x})["y"], np.maximum(x, 0))
    monkeypatch.setenv("AOTC_CLANG_CHECK", "1")
    with pytest.raises(aotc.AotcError, match=r"failed to compile with clang: .*constant operand"):
        host.Runner(b)
