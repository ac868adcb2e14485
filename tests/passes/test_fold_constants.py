"""fold_constants: weight-only subgraphs and shape arithmetic become constants."""

from __future__ import annotations

import numpy as np
from pass_helpers import build, expect, node, require_ops, run_pass

from aotc.ir.printer import print_graph
from aotc.passes.fold_constants import fold_constants

W = np.arange(6, dtype=np.float32).reshape(2, 3) / 2  # exact in float32: readable text


def test_transpose_of_a_weight() -> None:
    require_ops("Transpose", "MatMul")
    g = build([node("Transpose", ["w"], ["wt"], "tr", perm=[1, 0]),
               node("MatMul", ["x", "wt"], ["y"], "mm")],
              {"x": [2, 3]}, ["y"], {"w": W})
    assert "%wt = Transpose[perm=[1, 0]](%w)  # tr  -> float32[3,2]" in print_graph(g)
    out = run_pass(fold_constants, g)
    expect(out, """
        graph t (opset 17) {
          input %x: float32[2,3]
          const %wt: float32[3,2] = [0.0, 1.5, 0.5, 2.0, 1.0, 2.5]
          %y = MatMul(%x, %wt)  # mm  -> float32[2,2]
          output %y: float32[2,2]
        }
        """)
    np.testing.assert_array_equal(out.values["wt"].const, W.T)


def test_add_of_two_constants_and_a_chain() -> None:
    a = np.full((2, 3), 0.25, np.float32)
    g = build([node("Add", ["a", "w"], ["c1"], "cadd"),
               node("Mul", ["c1", "a"], ["c2"], "cmul"),
               node("Add", ["x", "c2"], ["y"], "add_x")],
              {"x": [2, 3]}, ["y"], {"a": a, "w": W})
    out = run_pass(fold_constants, g)
    expect(out, """
        graph t (opset 17) {
          input %x: float32[2,3]
          const %c2: float32[2,3] = [0.0625, 0.1875, 0.3125, 0.4375, 0.5625, 0.6875]
          %y = Add(%x, %c2)  # add_x  -> float32[2,3]
          output %y: float32[2,3]
        }
        """)
    np.testing.assert_array_equal(out.values["c2"].const, (a + W) * a)
    assert not out.values["c2"].const.flags.writeable  # constants are frozen


def test_nodes_reading_run_time_values_stay() -> None:
    g = build([node("Relu", ["x"], ["r"], "relu"),
               node("Add", ["r", "w"], ["y"], "add")],
              {"x": [2, 3]}, ["y"], {"w": W})
    out = run_pass(fold_constants, g)
    expect(out, """
        graph t (opset 17) {
          input %x: float32[2,3]
          const %w: float32[2,3] = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
          %r = Relu(%x)  # relu  -> float32[2,3]
          %y = Add(%r, %w)  # add  -> float32[2,3]
          output %y: float32[2,3]
        }
        """)


def test_a_constant_that_would_grow_a_lot_stays_a_kernel() -> None:
    require_ops("Pad")
    small = np.ones(1, np.float32)
    big_pads, small_pads = np.array([0, 3000], np.int64), np.array([0, 3], np.int64)
    g = build([node("Pad", ["c", "big"], ["p_big"], "pad_big"),
               node("Pad", ["c", "small"], ["p_small"], "pad_small"),
               node("Add", ["p_small", "x"], ["y"], "add")],
              {"x": [4]}, ["y", "p_big"], {"c": small, "big": big_pads, "small": small_pads})
    out = run_pass(fold_constants, g)
    # 12 KB from 4 bytes would bloat flash: computed at run time instead.
    assert [n.name for n in out.nodes] == ["pad_big", "add"]
    np.testing.assert_array_equal(out.values["p_small"].const, [1, 0, 0, 0])


def test_shape_arithmetic_on_constants() -> None:
    # Gather -> Unsqueeze -> Concat -> Reshape on a constant shape vector. The frontend must
    # know these values while importing (Reshape needs its shape to infer), fold makes them
    # constants.
    require_ops("Gather", "Unsqueeze", "Concat", "Reshape")
    dims = np.array([2, 3, 4], np.int64)
    g = build([node("Gather", ["dims", "zero"], ["d0"], "gather"),
               node("Unsqueeze", ["d0", "axes"], ["d0v"], "unsq"),
               node("Concat", ["d0v", "minus1"], ["shape"], "concat", axis=0),
               node("Reshape", ["x", "shape"], ["y"], "reshape")],
              {"x": [2, 3, 4]}, ["y"],
              {"dims": dims, "zero": np.array(0, np.int64), "axes": np.array([0], np.int64),
               "minus1": np.array([-1], np.int64)})
    assert g.type("y").shape == (2, 12)
    out = run_pass(fold_constants, g)
    expect(out, """
        graph t (opset 17) {
          input %x: float32[2,3,4]
          const %shape: int64[2] = [2, -1]
          %y = Reshape[allowzero=0](%x, %shape)  # reshape  -> float32[2,12]
          output %y: float32[2,12]
        }
        """)
    np.testing.assert_array_equal(out.values["shape"].const, [2, -1])


def test_shape_of_a_run_time_tensor_folds() -> None:
    require_ops("Shape", "Gather", "Unsqueeze", "Concat", "Reshape")
    g = build([node("Shape", ["x"], ["s"], "shape_of"),
               node("Gather", ["s", "zero"], ["d0"], "gather"),
               node("Unsqueeze", ["d0", "axes"], ["d0v"], "unsq"),
               node("Concat", ["d0v", "minus1"], ["shape"], "concat", axis=0),
               node("Reshape", ["x", "shape"], ["y"], "reshape")],
              {"x": [2, 3, 4]}, ["y"],
              {"zero": np.array(0, np.int64), "axes": np.array([0], np.int64),
               "minus1": np.array([-1], np.int64)})
    out = run_pass(fold_constants, g)
    expect(out, """
        graph t (opset 17) {
          input %x: float32[2,3,4]
          const %shape: int64[2] = [2, -1]
          %y = Reshape[allowzero=0](%x, %shape)  # reshape  -> float32[2,12]
          output %y: float32[2,12]
        }
        """)
    np.testing.assert_array_equal(out.values["shape"].const, [2, -1])
