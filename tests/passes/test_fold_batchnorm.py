"""fold_batchnorm: inference BatchNormalization folds into the Conv / Gemm before it.

The graphs are built directly in the IR (the pass needs no op registry), so this runs whether
or not BatchNormalization is registered; the end-to-end case against onnxruntime needs it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import helper
from opcheck import check, make_model, rand
from pass_helpers import expect, require_ops, run_pass

from aotc import dtypes
from aotc.ir.graph import Graph, Node, TensorType, Value
from aotc.ir.verify import VerifyError, verify
from aotc.passes.fold_batchnorm import fold_batchnorm

F32 = dtypes.float32
EPS = 1e-3


def _const(name: str, arr: np.ndarray) -> Value:
    a = np.asarray(arr, np.float32, order="C")
    a.setflags(write=False)
    return Value(name, TensorType(tuple(a.shape), F32), a)


def _act(name: str, *shape: int) -> Value:
    return Value(name, TensorType(shape, F32))


def _bn_params(c: int) -> dict[str, np.ndarray]:
    return {"scale": rand(c, seed=3), "bias": rand(c, seed=4), "mean": rand(c, seed=5),
            "var": rand(c, seed=6, lo=0.5, hi=2.0)}


def _graph(anchor: Node, acts: list[Value], consts: dict[str, np.ndarray],
           extra: list[Node] = (), outputs: tuple[str, ...] = ("r",)) -> Graph:  # type: ignore[assignment]
    values = {v.name: v for v in acts} | {k: _const(k, v) for k, v in consts.items()}
    bn = Node("BatchNormalization", "bn", ("c", "scale", "bias", "mean", "var"), ("y",),
              {"epsilon": EPS, "momentum": 0.9}, 15)
    relu = Node("Relu", "relu", ("y",), ("r",), {}, 14)
    g = Graph("t", ["x"], list(outputs), values, [anchor, bn, relu, *extra], 17)
    verify(g)
    return g


def _bn(z: np.ndarray, p: dict[str, np.ndarray], axis: int = 1) -> np.ndarray:
    shape = [1] * z.ndim
    shape[axis] = -1
    s = {k: v.astype(np.float64).reshape(shape) for k, v in p.items()}
    return (z - s["mean"]) / np.sqrt(s["var"] + EPS) * s["scale"] + s["bias"]


def _conv_graph(with_bias: bool = True, extra_acts: tuple[Value, ...] = (), **kw: Any
                ) -> tuple[Graph, dict[str, np.ndarray]]:
    consts = {"w": rand(3, 2, 1, 1, seed=1), **_bn_params(3)}
    ins = ("x", "w", "b") if with_bias else ("x", "w")
    if with_bias:
        consts["b"] = rand(3, seed=2)
    acts = [_act("x", 1, 2, 4, 4), _act("c", 1, 3, 4, 4), _act("y", 1, 3, 4, 4),
            _act("r", 1, 3, 4, 4), *extra_acts]
    conv = Node("Conv", "conv", ins, ("c",), {}, 11)
    return _graph(conv, acts, consts, **kw), consts


def _conv1x1(x: np.ndarray, w: np.ndarray, b: np.ndarray | float) -> np.ndarray:
    out = np.einsum("oi,bihw->bohw", w[:, :, 0, 0].astype(np.float64), x.astype(np.float64))
    return out + np.reshape(b, (1, -1, 1, 1))


@pytest.mark.parametrize("with_bias", [True, False])
def test_conv_bn_folds(with_bias: bool) -> None:
    g, p = _conv_graph(with_bias)
    out = run_pass(fold_batchnorm, g)
    expect(out, """
        graph t (opset 17) {
          input %x: float32[1,2,4,4]
          const %conv_B_bn: float32[3]
          const %conv_W_bn: float32[3,2,1,1]
          %y = Conv(%x, %conv_W_bn, %conv_B_bn)  # conv  -> float32[1,3,4,4]
          %r = Relu(%y)  # relu  -> float32[1,3,4,4]
          output %r: float32[1,3,4,4]
        }
        """, const_values=False)
    x = rand(1, 2, 4, 4, seed=7)
    want = _bn(_conv1x1(x, p["w"], p.get("b", 0.0)), p)
    got = _conv1x1(x, out.values["conv_W_bn"].const, out.values["conv_B_bn"].const)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("trans_b", [0, 1])
def test_gemm_bn_folds(trans_b: int) -> None:
    w = rand(3, 5, seed=1) if trans_b else rand(5, 3, seed=1)
    consts = {"w": w, "b": rand(3, seed=2), **_bn_params(3)}
    acts = [_act("x", 4, 5), _act("c", 4, 3), _act("y", 4, 3), _act("r", 4, 3)]
    gemm = Node("Gemm", "fc", ("x", "w", "b"), ("c",),
                {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": trans_b}, 13)
    out = run_pass(fold_batchnorm, _graph(gemm, acts, consts))
    assert [n.name for n in out.nodes] == ["fc", "relu"]
    assert out.nodes[0].inputs == ("x", "fc_W_bn", "fc_B_bn")
    x = rand(4, 5, seed=7).astype(np.float64)
    w_eff = w.T if trans_b else w
    want = _bn(x @ w_eff + consts["b"], consts)
    nw = out.values["fc_W_bn"].const.astype(np.float64)
    got = x @ (nw.T if trans_b else nw) + out.values["fc_B_bn"].const
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv_output_with_a_second_user_does_not_fold() -> None:
    extra = [Node("Sigmoid", "sig", ("c",), ("s",), {}, 13)]
    g, _ = _conv_graph(extra=extra, outputs=("r", "s"), extra_acts=(_act("s", 1, 3, 4, 4),))
    out = run_pass(fold_batchnorm, g)
    # Not folded into the conv weights; the BN becomes a per-channel affine (Mul + Add) instead.
    assert [n.op for n in out.nodes] == ["Conv", "Mul", "Add", "Relu", "Sigmoid"]


def test_conv_output_that_is_a_graph_output_does_not_fold() -> None:
    g, _ = _conv_graph(outputs=("r", "c"))
    out = run_pass(fold_batchnorm, g)
    assert [n.op for n in out.nodes] == ["Conv", "Mul", "Add", "Relu"]


def test_gemm_with_alpha_does_not_fold() -> None:
    consts = {"w": rand(5, 3, seed=1), **_bn_params(3)}
    acts = [_act("x", 4, 5), _act("c", 4, 3), _act("y", 4, 3), _act("r", 4, 3)]
    gemm = Node("Gemm", "fc", ("x", "w"), ("c",),
                {"alpha": 2.0, "beta": 1.0, "transA": 0, "transB": 0}, 13)
    out = run_pass(fold_batchnorm, _graph(gemm, acts, consts))
    assert [n.op for n in out.nodes] == ["Gemm", "Mul", "Add", "Relu"]


def test_new_weight_names_never_overwrite_a_model_value() -> None:
    # A graph input already named like the folded weight: the pass must pick another name.
    g, _ = _conv_graph()
    g.values["conv_W_bn"] = _act("conv_W_bn", 1)
    g.inputs.append("conv_W_bn")
    out = run_pass(fold_batchnorm, g)
    assert out.nodes[0].inputs[1] != "conv_W_bn"
    assert not out.values["conv_W_bn"].is_const


def test_verify_catches_an_input_turned_constant() -> None:
    # What the name clash above used to produce.
    g, _ = _conv_graph()
    g.values["x"] = _const("x", np.zeros((1, 2, 4, 4)))
    with pytest.raises(VerifyError, match="input x is also a constant"):
        verify(g)


def test_conv_bn_relu_end_to_end_matches_onnxruntime() -> None:
    require_ops("BatchNormalization", "Conv", "Relu")
    x = rand(1, 2, 6, 6)
    c = 3
    p = _bn_params(c)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"],
                              epsilon=EPS, name="bn"),
             helper.make_node("Relu", ["y"], ["r"], name="relu")]
    m = make_model(nodes, {"x": x}, {"r": (np.float32, [1, c, 6, 6])},
                   {"w": rand(c, 2, 3, 3, seed=1), "b": rand(c, seed=2), **p})
    bundle = check(m, {"x": x}, atol=1e-5, rtol=1e-5)
    assert len(bundle.kernels) == 1  # Conv + folded BN + fused Relu


def test_standalone_bn_becomes_per_channel_affine_with_exact_constants() -> None:
    # s = scale / sqrt(var + eps), t = bias - mean * s, each step in float32 as onnxruntime
    # computes them (docs/floating-point.md), shaped (C, 1, 1).
    g, _ = _conv_graph(outputs=("r", "c"))
    out = run_pass(fold_batchnorm, g)
    mul, add = out.nodes[1], out.nodes[2]
    s = out.values[mul.inputs[1]].const
    t = out.values[add.inputs[1]].const
    bn = next(n for n in g.nodes if n.op == "BatchNormalization")
    scale, bias, mean, var = (g.values[i].const.astype(np.float32) for i in bn.inputs[1:5])
    want_s = scale / np.sqrt(var + np.float32(bn.attrs["epsilon"]))
    assert want_s.dtype == np.float32 and s.shape == (len(scale), 1, 1)
    np.testing.assert_array_equal(s.reshape(-1), want_s)
    np.testing.assert_array_equal(t.reshape(-1), bias - mean * want_s)
