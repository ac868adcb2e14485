"""Corrupted model files never crash aotc: every outcome is a working bundle or an AotcError
(the only exception users see). Byte flips, truncations and field edits of a valid model."""

from __future__ import annotations

import sys
from pathlib import Path

import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aotc

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import make_example  # noqa: E402

VALID = make_example.build().SerializeToString()


def _compile_or_user_error(data: bytes, tmp: Path) -> None:
    path = tmp / "m.onnx"
    path.write_bytes(data)
    try:
        aotc.inspect(path, name="m")
    except aotc.AotcError as e:
        assert "\n" not in e.one_line()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), min_size=1,
                max_size=8))
def test_byte_flips_never_crash(tmp_path, flips):
    data = bytearray(VALID)
    for pos, val in flips:
        data[pos] = val
    _compile_or_user_error(bytes(data), tmp_path)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, len(VALID) - 1))
def test_truncations_never_crash(tmp_path, n):
    _compile_or_user_error(VALID[:n], tmp_path)


@pytest.mark.parametrize("edit", ["neg_dim", "huge_group", "bad_perm_kernel", "wrong_rank_w",
                                  "dangling_output", "zero_dim"])
def test_semantic_edits_are_user_errors_or_work(tmp_path, edit):
    m = make_example.build()
    g = m.graph
    if edit == "neg_dim":
        g.input[0].type.tensor_type.shape.dim[2].dim_value = -3
    elif edit == "huge_group":
        g.node[3].attribute[0].i = 1_000_000 if g.node[3].attribute[0].name == "group" else 1
    elif edit == "bad_perm_kernel":
        g.node[0].attribute.append(onnx.helper.make_attribute("kernel_shape", [7, 7]))
    elif edit == "wrong_rank_w":
        w = onnx.numpy_helper.to_array(g.initializer[0])
        g.initializer[0].CopyFrom(onnx.numpy_helper.from_array(w.reshape(w.shape[0], -1),
                                                              g.initializer[0].name))
    elif edit == "dangling_output":
        g.output[0].name = "nothing_makes_this"
    elif edit == "zero_dim":
        g.input[0].type.tensor_type.shape.dim[3].dim_value = 0
    _compile_or_user_error(m.SerializeToString(), tmp_path)
