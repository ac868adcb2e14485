"""Graph inputs and outputs whose names sanitise to the same C identifier (``x.1`` and ``x_1``,
``x`` and ``x-``, an input and an output) get distinct parameters of ``<name>_run``: the bundle
builds with -Werror and matches onnxruntime (atol=rtol=1e-5, host only). Duplicate names in
the graph itself are rejected by the frontend (tests/errors)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from opcheck import compile_and_run, make_model, ort_run, rand

F = np.float32
CASES = {
    "dot_vs_underscore": ([helper.make_node("Add", ["x.1", "x_1"], ["y"])],
                          {"x.1": rand(3), "x_1": rand(3, seed=1)}, {"y": (F, [3])}),
    "input_vs_output": ([helper.make_node("Relu", ["x.1"], ["x_1"])],
                        {"x.1": rand(3)}, {"x_1": (F, [3])}),
    "punctuation": ([helper.make_node("Add", ["x", "x-"], ["x/"])],
                    {"x": rand(3), "x-": rand(3, seed=1)}, {"x/": (F, [3])}),
    "two_outputs": ([helper.make_node("Relu", ["x"], ["y.1"]),
                     helper.make_node("Neg", ["x"], ["y_1"])],
                    {"x": rand(3)}, {"y.1": (F, [3]), "y_1": (F, [3])}),
    "long_common_prefix": ([helper.make_node("Add", ["a" * 60 + "1", "a" * 60 + "2"],
                                             ["a" * 60 + "3"])],
                           {"a" * 60 + "1": rand(3), "a" * 60 + "2": rand(3, seed=1)},
                           {"a" * 60 + "3": (F, [3])}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_colliding_io_names_get_distinct_parameters(case: str) -> None:
    nodes, ins, outs = CASES[case]
    model = make_model(nodes, ins, outs)
    want = ort_run(model, ins)
    with tempfile.TemporaryDirectory(prefix="aotc_test_") as tmp:
        got, bundle = compile_and_run(model, ins, Path(tmp) / "b")
        header = (Path(bundle.directory) / "m.h").read_text()
    run_line = next(line for line in header.splitlines() if "m_run(" in line)
    params = [p.split("*")[-1].strip() for p in run_line.split("(", 1)[1].split(",")]
    assert len(set(params)) == len(params), run_line
    for k, w in want.items():
        np.testing.assert_allclose(got[k], w, atol=1e-5, rtol=1e-5, err_msg=k)
