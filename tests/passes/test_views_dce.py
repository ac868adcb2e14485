"""views (Identity/Dropout removal) and dce (dead nodes and constants)."""

from __future__ import annotations

import numpy as np
from pass_helpers import build, expect, node, run_pass

from aotc.passes.dce import dce
from aotc.passes.fuse import fuse
from aotc.passes.views import views


def test_identity_and_dropout_disappear() -> None:
    g = build([node("Identity", ["x"], ["a"], "id1"),
               node("Identity", ["a"], ["b"], "id2"),
               node("Relu", ["b"], ["r"], "relu"),
               node("Dropout", ["r"], ["d"], "drop"),
               node("Sigmoid", ["d"], ["y"], "sig")],
              {"x": [2, 3]}, ["y"])
    out = run_pass(views, g)
    expect(out, """
        graph t (opset 17) {
          input %x: float32[2,3]
          %r = Relu(%x)  # relu  -> float32[2,3]
          %y = Sigmoid(%r)  # sig  -> float32[2,3]
          output %y: float32[2,3]
        }
        """)


def test_identity_feeding_a_graph_output_stays() -> None:
    # Removing it would rename the graph output, which is part of the C API.
    g = build([node("Relu", ["x"], ["r"], "relu"),
               node("Identity", ["r"], ["y"], "id")],
              {"x": [2, 3]}, ["y"])
    out = run_pass(views, g)
    expect(out, """
        graph t (opset 17) {
          input %x: float32[2,3]
          %r = Relu(%x)  # relu  -> float32[2,3]
          %y = Identity(%r)  # id  -> float32[2,3]
          output %y: float32[2,3]
        }
        """)


def test_dce_removes_dead_nodes_and_constants() -> None:
    w = np.full((2, 3), 0.5, np.float32)
    g = build([node("Relu", ["x"], ["dead1"], "dead_relu"),
               node("Add", ["dead1", "w_dead"], ["dead2"], "dead_add"),
               node("Tanh", ["x"], ["t"], "tanh"),
               node("Mul", ["t", "w"], ["y"], "mul")],
              {"x": [2, 3]}, ["y"], {"w": w, "w_dead": w})
    out = run_pass(dce, g)
    expect(out, """
        graph t (opset 17) {
          input %x: float32[2,3]
          const %w: float32[2,3] = [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
          %t = Tanh(%x)  # tanh  -> float32[2,3]
          %y = Mul(%t, %w)  # mul  -> float32[2,3]
          output %y: float32[2,3]
        }
        """)
    assert "w_dead" not in out.values and "w" in out.values


def test_dce_keeps_a_node_with_one_used_output() -> None:
    g = build([node("Split", ["x"], ["a", "b"], "split", axis=1, num_outputs=2),
               node("Relu", ["b"], ["y"], "relu")],
              {"x": [2, 4]}, ["y"], opset=18)
    out = run_pass(dce, g)
    assert [n.name for n in out.nodes] == ["split", "relu"]


def test_dce_sees_constants_read_by_an_epilogue() -> None:
    b = np.full((1, 3), 2.0, np.float32)
    g = build([node("MatMul", ["x", "w"], ["m"], "mm"),
               node("Add", ["m", "b"], ["y"], "bias")],
              {"x": [2, 4]}, ["y"], {"w": np.ones((4, 3), np.float32), "b": b})
    fused = run_pass(fuse, g)
    out = run_pass(dce, fused)
    expect(out, """
        graph t (opset 17) {
          input %x: float32[2,4]
          const %b: float32[1,3] = [2.0, 2.0, 2.0]
          const %w: float32[4,3]
          %y = MatMul(%x, %w)  # mm  -> float32[2,3]
              |> Add(@, %b)  # bias
          output %y: float32[2,3]
        }
        """)
    assert "b" in out.values and out.values["b"].is_const
