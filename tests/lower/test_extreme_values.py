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


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
@pytest.mark.parametrize("channels", [1, 12])  # 12 output channels: the tiled float kernel
def test_conv_bias_added_after_the_sum(op: str, channels: int) -> None:
    """Conv(x, W, B) = sum(x * W) + B: the bias is added after the sum of products, as the
    definition writes it and onnxruntime computes it. With W = 3e38 and B = -3e38, bias first
    gives -3e38 + 3e38 + 3e38 = 3e38 (finite); the definition gives (3e38 + 3e38) - 3e38 = inf."""
    x = np.ones((1, 2, 3, 3), np.float32)
    shape = (channels, 2, 1, 1) if op == "Conv" else (2, channels, 1, 1)
    w = np.full(shape, 3e38, np.float32)
    b = np.full((channels,), -3e38, np.float32)
    model = make_model([helper.make_node(op, ["x", "w", "b"], ["y"])], {"x": x},
                       {"y": (np.float32, None)}, {"w": w, "b": b})
    want = ort_run(model, {"x": x})["y"]
    assert np.isinf(want).all()  # the order matters for this case: it can fail
    _compare(model, {"x": x})


@pytest.mark.parametrize("kind", ["plain", "tiled", "depthwise"])
def test_conv_padding_times_infinite_weight_is_nan(kind: str) -> None:
    """A tap in the zero padding contributes 0 * w, NaN when w is inf or NaN (the definition;
    onnxruntime's im2col computes it). aotc's kernels skip padded taps, and a compile-time
    table marks the outputs this makes NaN (only built for non-finite weights)."""
    rng = np.random.default_rng(3)
    m, c, group = {"plain": (1, 2, 1), "tiled": (9, 2, 1), "depthwise": (3, 3, 3)}[kind]
    x = rng.uniform(-1, 1, (1, c, 5, 5)).astype(np.float32)
    w = rng.uniform(-1, 1, (m, c // group, 3, 3)).astype(np.float32)
    w[0, 0, 0, 0] = np.inf       # NaN wherever the top-left tap is in the padding
    if m > 1:
        w[m - 1, -1, 2, 1] = np.nan  # channel m-1 NaN everywhere (NaN times any input)
    b = rng.uniform(-1, 1, m).astype(np.float32)
    model = make_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1],
                                         group=group),
                        helper.make_node("Clip", ["c", "lo", "hi"], ["y"])],
                       {"x": x}, {"y": (np.float32, None)},
                       {"w": w, "b": b, "lo": np.float32(-6), "hi": np.float32(6)})
    want = ort_run(model, {"x": x})["y"]
    # the padding matters for this case: top row and left column NaN, the rest not
    assert np.isnan(want[0, 0, 0]).all() and np.isnan(want[0, 0, :, 0]).all()
    assert not np.isnan(want[0, 0, 1:, 1:]).any()
    _compare(model, {"x": x})


# scale, B, mean, var: scale / sqrt(var + eps) overflows float32 in every row; B - mean * s
# is then 1 - 0.5 * inf = -inf, 0 - 0 * inf = NaN, 0 - 1e-30 * inf = -inf.
BN_EXTREME = [(1e38, 1.0, 0.5, 1e-8), (1e38, 0.0, 0.0, 1e-8), (3e38, 0.0, 1e-30, 0.0),
              (2.0, 0.5, -1.0, 4.0)]


@pytest.mark.parametrize("after_conv", [False, True])
def test_batchnorm_scale_overflow_like_onnxruntime(after_conv: bool) -> None:
    """BatchNormalization with constant statistics is x * s + t with s = scale / sqrt(var +
    eps) and t = B - mean * s, each step in float32, as onnxruntime computes it: when s
    overflows, 0 * inf makes NaN where onnxruntime has NaN. A BN after a Conv is then not
    folded into the Conv's weights."""
    scale, b, mean, var = (np.array(c, np.float32) for c in zip(*BN_EXTREME))
    C = len(BN_EXTREME)
    x = np.tile(np.array([0, 1e-3, -1, 1, np.inf, np.nan], np.float32), (1, C, 1, 1))
    inits = {"s": scale, "b": b, "m": mean, "v": var}
    nodes = [helper.make_node("BatchNormalization", ["h" if after_conv else "x", "s", "b", "m",
                                                      "v"], ["y"], epsilon=1e-5)]
    if after_conv:
        inits["w"] = np.eye(C, dtype=np.float32).reshape(C, C, 1, 1)
        nodes.insert(0, helper.make_node("Conv", ["x", "w"], ["h"]))
    model = make_model(nodes, {"x": x}, {"y": (np.float32, None)}, inits)
    want = ort_run(model, {"x": x})["y"]
    assert np.isnan(want[0, :3]).any() and np.isfinite(want[0, 3, :, :4]).all()
    _compare(model, {"x": x})


def _gru(x: np.ndarray, w_scale: float, lbr: int):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    H, I = 3, x.shape[2]
    w = (rng.standard_normal((1, 3 * H, I)) * w_scale).astype(np.float32)
    r = (rng.standard_normal((1, 3 * H, H)) * w_scale).astype(np.float32)
    b = rng.standard_normal((1, 6 * H)).astype(np.float32)
    return make_model([helper.make_node("GRU", ["x", "W", "R", "B"], ["Y", "Yh"], hidden_size=H,
                                        linear_before_reset=lbr)],
                      {"x": x}, {"Y": (np.float32, None), "Yh": (np.float32, None)},
                      {"W": w, "R": r, "B": b})


@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_at_extremes_matches_onnxruntime(lbr: int) -> None:
    """GRU with +-inf and +-1e38 inputs (one per step, so no inf - inf) and weights near 1e30:
    gate pre-activations reach +-inf, sigmoid/tanh saturate them to 0/+-1, as in
    onnxruntime."""
    x = np.array([[[1e38, -2]], [[np.inf, 0.5]], [[-np.inf, 0.2]], [[0.3, -1e38]]], np.float32)
    _compare(_gru(x, 1e30, lbr), {"x": x})


@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_nan_propagates_like_the_definition(lbr: int) -> None:
    """A NaN pre-activation (a NaN input here; inf - inf from weights near 1e38 likewise) makes
    the hidden state NaN from that step on, as the definition computes it: checked against the
    ONNX reference evaluator. onnxruntime's GRU kernel differs: its own sigmoid/tanh clamp their
    argument in a way that turns NaN into a finite value. That difference is recorded here, so a
    change in onnxruntime is noticed (docs/floating-point.md)."""
    from onnx.reference import ReferenceEvaluator

    x = np.array([[[0.5, -2]], [[0.1, 0.5]], [[np.nan, 1]], [[0.3, 1]]], np.float32)
    model = _gru(x, 1.0, lbr)
    want = dict(zip(["Y", "Yh"], ReferenceEvaluator(model).run(None, {"x": x})))
    with tempfile.TemporaryDirectory(prefix="aotc_test_") as tmp:
        got, _ = compile_and_run(model, {"x": x}, Path(tmp) / "b")
    for k, w in want.items():
        assert np.isnan(w).any()  # the case can fail: NaN reaches the outputs
        np.testing.assert_array_equal(np.isnan(got[k]), np.isnan(w), err_msg=f"{k}: NaNs")
        np.testing.assert_allclose(got[k], w, atol=1e-5, rtol=1e-5, equal_nan=True, err_msg=k)
    ort = ort_run(model, {"x": x})
    assert not np.isnan(ort["Yh"]).any(), "onnxruntime's GRU now propagates NaN: match it"
