"""Floating-point semantics at the extremes (docs/floating-point.md): float ops are evaluated
in IEEE float32 in the order of the op's definition, so infinities, NaNs and overflow to
infinity come out as onnxruntime's wherever onnxruntime also evaluates the definition. Inputs
span +-FLT_MAX, +-1e38, +-inf and NaN; the comparison is through the generated C with
atol=rtol=1e-5 and NaNs in the same places (host only)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from opcheck import compile_and_run, make_model, ort_run

EXTREMES = np.array([[-3.4028235e38, -1e38, -100, -1, -0.0, 0, 1, 100, 1e38, 3.4028235e38,
                      np.inf, -np.inf, np.nan]], np.float32)

UNARY = ["Sigmoid", "Tanh", "Softplus", "Elu", "Selu", "HardSwish", "HardSigmoid", "Relu",
         "LeakyRelu", "Erf", "Exp", "Log", "Sqrt", "Reciprocal", "Abs", "Neg", "Softsign",
         "Softmax", "LogSoftmax"]


def _compare(model, feeds) -> None:  # type: ignore[no-untyped-def]
    want = ort_run(model, feeds)
    with tempfile.TemporaryDirectory(prefix="aotc_test_") as tmp:
        got, _ = compile_and_run(model, feeds, Path(tmp) / "b")
    for k, w in want.items():
        np.testing.assert_array_equal(np.isnan(got[k]), np.isnan(w), err_msg=f"{k}: NaNs")
        np.testing.assert_allclose(got[k], w, atol=1e-5, rtol=1e-5, equal_nan=True, err_msg=k)


@pytest.mark.parametrize("op", UNARY)
def test_unary_at_extremes(op: str) -> None:
    model = make_model([helper.make_node(op, ["x"], ["y"])], {"x": EXTREMES},
                       {"y": (np.float32, None)})
    _compare(model, {"x": EXTREMES})


def test_fused_chain_overflows_like_float32() -> None:
    """x * 1e30 * 1e30 overflows to +-inf in float32 (it would not in float64), exp of that is
    inf or 0, and inf - inf is NaN: the fused kernel keeps every step in float32."""
    x = np.array([[-10, -1e-30, 0, 1e-31, 1, 10, np.inf, np.nan]], np.float32)
    nodes = [helper.make_node("Mul", ["x", "c"], ["a"]), helper.make_node("Mul", ["a", "c"], ["b"]),
             helper.make_node("Exp", ["b"], ["e"]), helper.make_node("Sub", ["e", "i"], ["y"])]
    model = make_model(nodes, {"x": x}, {"y": (np.float32, None)},
                       {"c": np.array([1e30], np.float32), "i": np.array([np.inf], np.float32)})
    _compare(model, {"x": x})


def test_constant_folding_overflows_like_float32() -> None:
    """A subgraph of constants is folded at compile time with float32 results: 1e30 * 1e30 is
    inf there too, so y = x + inf - inf is NaN, as onnxruntime computes it."""
    x = np.array([[1, -2, 3]], np.float32)
    nodes = [helper.make_node("Mul", ["c", "c"], ["cc"]),
             helper.make_node("Add", ["x", "cc"], ["a"]),
             helper.make_node("Sub", ["a", "cc"], ["y"])]
    model = make_model(nodes, {"x": x}, {"y": (np.float32, None)},
                       {"c": np.array([1e30], np.float32)})
    _compare(model, {"x": x})
