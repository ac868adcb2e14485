"""ir.verify: accepts valid graphs (including fused ones) and names each broken invariant."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from opcheck import make_model, rand

from aotc import dtypes
from aotc.frontend.onnx.importer import import_model
from aotc.ir.graph import CHAIN, Graph, Node, TensorType, Value
from aotc.ir.verify import VerifyError, verify
from aotc.passes import default_pipeline, run_pipeline

F32 = dtypes.float32
T = TensorType((2, 3), F32)


def _graph() -> Graph:
    """x -> relu -> r; r + b -> y, with a fused variant built by the tests."""
    b = np.ones((2, 3), np.float32)
    b.setflags(write=False)
    values = {"x": Value("x", T), "b": Value("b", T, b), "r": Value("r", T), "y": Value("y", T)}
    nodes = [Node("Relu", "relu", ("x",), ("r",)), Node("Add", "add", ("r", "b"), ("y",))]
    return Graph("g", ["x"], ["y"], values, nodes, 17)


def _fused() -> Graph:
    g = _graph()
    add = Node("Add", "add", (CHAIN, "b"), ())
    return g.replace(nodes=[Node("Relu", "relu", ("x",), ("y",), epilogue=(add,))])


def test_valid_graphs_pass() -> None:
    verify(_graph())
    verify(_fused())


def test_the_default_pipeline_keeps_a_real_graph_valid() -> None:
    x = rand(1, 2, 5, 5)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Identity", ["r"], ["i"], name="id"),
             helper.make_node("Flatten", ["i"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "wf"], ["y"], transB=1, name="fc")]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [1, 4])},
                   {"w": rand(3, 2, 3, 3, seed=1), "wf": rand(4, 27, seed=2)})
    g = import_model(m)
    seen = []
    run_pipeline(g, default_pipeline(), verify=True, on_pass=lambda n, _: seen.append(n))
    assert seen == [p.name for p in default_pipeline()]


def test_use_before_def() -> None:
    g = _graph()
    g.nodes.reverse()
    with pytest.raises(VerifyError, match="add reads r before it is defined"):
        verify(g)


def test_read_of_an_unknown_value() -> None:
    g = _graph()
    g.nodes[1] = g.nodes[1].with_(inputs=("r", "ghost"))
    with pytest.raises(VerifyError, match="reads ghost"):
        verify(g)


def test_duplicate_definition() -> None:
    g = _graph()
    g.nodes.append(Node("Relu", "relu2", ("x",), ("r",)))
    with pytest.raises(VerifyError, match="value r is defined twice"):
        verify(g)


def test_a_node_redefining_an_input_or_constant() -> None:
    g = _graph()
    g.nodes.append(Node("Relu", "relu2", ("x",), ("b",)))
    with pytest.raises(VerifyError, match="value b is defined twice"):
        verify(g)


def test_duplicate_node_name() -> None:
    g = _graph()
    g.nodes[1] = g.nodes[1].with_(name="relu")
    with pytest.raises(VerifyError, match="duplicate node name relu"):
        verify(g)


def test_missing_output() -> None:
    g = _graph()
    g.outputs.append("nowhere")
    with pytest.raises(VerifyError, match="graph output nowhere is never produced"):
        verify(g)


def test_node_output_without_a_type() -> None:
    g = _graph()
    del g.values["r"]
    with pytest.raises(VerifyError, match="output r has no type"):
        verify(g)


@pytest.mark.parametrize("step, message", [
    (Node("Add", "add", ("r", "b"), ()), "must read @ once"),           # no CHAIN
    (Node("Mul", "add", (CHAIN, CHAIN), ()), "must read @ once"),        # CHAIN twice
    (Node("Add", "add", (CHAIN, "b"), ("z",)), "define nothing"),       # defines a value
    (Node("Add", "add", (CHAIN, "late"), ()), "reads late before it is defined"),
    (Node("Add", "relu", (CHAIN, "b"), ()), "duplicate node name relu"),
])
def test_bad_epilogue(step: Node, message: str) -> None:
    g = _graph()
    g.values["late"] = Value("late", T)
    g.nodes = [Node("Relu", "relu", ("x",), ("y",), epilogue=(step,)),
               Node("Relu", "producer_of_late", ("x",), ("late",))]
    with pytest.raises(VerifyError, match=message):
        verify(g)


def test_epilogue_on_a_node_with_two_outputs() -> None:
    g = _fused()
    g.values["r2"] = Value("r2", T)
    g.nodes[0] = g.nodes[0].with_(outputs=("y", "r2"))
    with pytest.raises(VerifyError, match="not exactly one output"):
        verify(g)


def test_chain_outside_an_epilogue() -> None:
    g = _graph()
    g.nodes[1] = g.nodes[1].with_(inputs=(CHAIN, "b"))
    with pytest.raises(VerifyError, match="outside an epilogue"):
        verify(g)


def test_constant_data_must_match_its_type() -> None:
    g = _graph()
    g.values["b"] = Value("b", T, np.ones((3, 2), np.float32))
    with pytest.raises(VerifyError, match="constant b data does not match"):
        verify(g)
    g.values["b"] = Value("b", T, np.ones((2, 3), np.float64))
    with pytest.raises(VerifyError, match="constant b data does not match"):
        verify(g)


def test_shapes_must_be_static() -> None:
    g = _graph()
    g.values["r"] = Value("r", TensorType((2, -1), F32))
    with pytest.raises(VerifyError, match="non-static shape"):
        verify(g)
