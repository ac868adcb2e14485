"""fuse: anchors take the chain of elementwise ops after them as an epilogue, but only when the
intermediate has one user, is no graph output, keeps shape and dtype, and every other operand
exists when the anchor runs. Fused graphs are also run against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper
from opcheck import check, make_model, rand
from pass_helpers import build, expect, node, onnx_model, run_pass

from aotc.frontend.onnx.importer import import_model
from aotc.passes.fuse import fuse

CONV = "Conv[auto_pad='NOTSET', dilations=[], group=1, kernel_shape=[], pads=[], strides=[]]"
X = {"x": [1, 2, 4, 4]}
OUT = "float32[1,3,2,2]"
W = rand(3, 2, 3, 3, seed=1)
W2 = rand(3, 2, 3, 3, seed=2)
BIAS = np.array([0.5, -1.0, 2.0], np.float32).reshape(1, 3, 1, 1)


def _ort_check(nodes: list, outputs: list[str], inits: dict[str, np.ndarray]) -> None:
    x = rand(1, 2, 4, 4, seed=9)
    m = make_model([helper.make_node(n.op_type, n.input, n.output, name=n.name) for n in nodes],
                   {"x": x}, {o: (np.float32, [1, 3, 2, 2]) for o in outputs}, inits)
    check(m, {"x": x}, atol=1e-5, rtol=1e-5)


def test_conv_bias_relu() -> None:
    nodes = [node("Conv", ["x", "w"], ["c"], "conv"),
             node("Add", ["c", "b"], ["cb"], "bias"),
             node("Relu", ["cb"], ["y"], "relu")]
    out = run_pass(fuse, build(nodes, X, ["y"], {"w": W, "b": BIAS}))
    expect(out, f"""
        graph t (opset 17) {{
          input %x: float32[1,2,4,4]
          const %b: float32[1,3,1,1] = [0.5, -1.0, 2.0]
          const %w: float32[3,2,3,3]
          %y = {CONV}(%x, %w)  # conv  -> {OUT}
              |> Add(@, %b)  # bias
              |> Relu(@)  # relu
          output %y: {OUT}
        }}
        """)
    _ort_check(nodes, ["y"], {"w": W, "b": BIAS})


def test_residual_add_fuses_into_the_later_anchor() -> None:
    # Add(ca, cb): cb does not exist yet when conv_a runs, so the Add goes to conv_b.
    nodes = [node("Conv", ["x", "wa"], ["ca"], "conv_a"),
             node("Conv", ["x", "wb"], ["cb"], "conv_b"),
             node("Add", ["ca", "cb"], ["s"], "res"),
             node("Relu", ["s"], ["y"], "relu")]
    out = run_pass(fuse, build(nodes, X, ["y"], {"wa": W, "wb": W2}))
    expect(out, f"""
        graph t (opset 17) {{
          input %x: float32[1,2,4,4]
          const %wa: float32[3,2,3,3]
          const %wb: float32[3,2,3,3]
          %ca = {CONV}(%x, %wa)  # conv_a  -> {OUT}
          %y = {CONV}(%x, %wb)  # conv_b  -> {OUT}
              |> Add(%ca, @)  # res
              |> Relu(@)  # relu
          output %y: {OUT}
        }}
        """)
    _ort_check(nodes, ["y"], {"wa": W, "wb": W2})


def test_a_value_with_two_users_ends_the_chain() -> None:
    nodes = [node("Conv", ["x", "w"], ["c"], "conv"),
             node("Relu", ["c"], ["r"], "relu"),
             node("Sigmoid", ["r"], ["s1"], "sig"),
             node("Tanh", ["r"], ["s2"], "tanh"),
             node("Add", ["s1", "s2"], ["y"], "add")]
    out = run_pass(fuse, build(nodes, X, ["y"], {"w": W}))
    expect(out, f"""
        graph t (opset 17) {{
          input %x: float32[1,2,4,4]
          const %w: float32[3,2,3,3]
          %r = {CONV}(%x, %w)  # conv  -> {OUT}
              |> Relu(@)  # relu
          %s1 = Sigmoid(%r)  # sig  -> {OUT}
          %y = Tanh(%r)  # tanh  -> {OUT}
              |> Add(%s1, @)  # add
          output %y: {OUT}
        }}
        """)
    _ort_check(nodes, ["y"], {"w": W})


def test_graph_outputs_and_double_reads_are_not_fused() -> None:
    nodes = [node("Conv", ["x", "w"], ["c"], "conv"),
             node("Relu", ["c"], ["r"], "relu"),      # c is a graph output: stays
             node("Mul", ["r", "r"], ["y"], "square")]  # reads r twice: stays
    out = run_pass(fuse, build(nodes, X, ["y", "c"], {"w": W}))
    expect(out, f"""
        graph t (opset 17) {{
          input %x: float32[1,2,4,4]
          const %w: float32[3,2,3,3]
          %c = {CONV}(%x, %w)  # conv  -> {OUT}
          %r = Relu(%c)  # relu  -> {OUT}
          %y = Mul(%r, %r)  # square  -> {OUT}
          output %y: {OUT}
          output %c: {OUT}
        }}
        """)
    _ort_check(nodes, ["y", "c"], {"w": W})


def test_shape_or_dtype_changes_are_not_fused() -> None:
    nodes = [node("MatMul", ["x", "w"], ["m"], "mm"),
             node("Add", ["m", "big"], ["y"], "bcast"),      # [2,3] + [4,2,3] -> [4,2,3]
             node("MatMul", ["x", "w"], ["m2"], "mm2"),
             node("Cast", ["m2"], ["y2"], "cast", to=6)]     # float32 -> int32
    m = onnx_model(nodes, {"x": [2, 4]}, ["y", "y2"],
                   {"w": np.ones((4, 3), np.float32), "big": np.ones((4, 2, 3), np.float32)})
    m.graph.output[1].type.tensor_type.elem_type = onnx.TensorProto.INT32  # y2 is the Cast's
    g = import_model(m, name="t")
    out = run_pass(fuse, g)
    assert [(n.name, len(n.epilogue)) for n in out.nodes] == \
        [("mm", 0), ("bcast", 0), ("mm2", 0), ("cast", 0)]
