"""The liveness bounds agree and say what they count: activations <= + scratch <= + graph I/O,
on a model whose kernels need scratch larger than its inputs and outputs (a 2-layer LSTM)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from aotc.compilation import memory_report
from aotc.compiler import CompileOptions, compile_model


def lstm2(seq: int = 2, inp: int = 4, hidden: int = 64) -> onnx.ModelProto:
    """Two stacked LSTMs; the gates scratch (4 * hidden floats) dwarfs the sequence I/O."""
    rng = np.random.default_rng(0)
    inits, nodes, x = [], [], "x"
    for layer in range(2):
        width = inp if layer == 0 else hidden
        w = rng.standard_normal((1, 4 * hidden, width)).astype(np.float32) * 0.3
        r = rng.standard_normal((1, 4 * hidden, hidden)).astype(np.float32) * 0.3
        inits += [numpy_helper.from_array(w, f"W{layer}"),
                  numpy_helper.from_array(r, f"R{layer}"),
                  numpy_helper.from_array(np.array([1], np.int64), f"axis{layer}")]
        nodes += [helper.make_node("LSTM", [x, f"W{layer}", f"R{layer}"], [f"Y{layer}"],
                                   hidden_size=hidden),
                  helper.make_node("Squeeze", [f"Y{layer}", f"axis{layer}"], [f"s{layer}"])]
        x = f"s{layer}"
    graph = helper.make_graph(
        nodes, "lstm2", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, 1, inp])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [seq, 1, hidden])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("seq,hidden", [(2, 64), (8, 8), (1, 16)])
def test_bounds_are_consistent_on_lstm(seq, hidden):
    c = compile_model(lstm2(seq, hidden=hidden), CompileOptions())
    b = c.bounds
    assert 0 < b.activations <= b.scratch <= b.io, b
    m = memory_report(c)
    assert m["lower_bound"] == b.scratch and m["io_lower_bound"] == b.io
    assert m["bounds"] == {"activations": b.activations, "activations_scratch": b.scratch,
                           "activations_scratch_io": b.io}
    assert m["arena_holds"] == "activations + scratch"
    # Scratch is really there: the bound with scratch exceeds the activations alone.
    assert b.scratch > b.activations
    io_bytes = sum(c.graph.type(v).nbytes for v in (*c.graph.inputs, *c.graph.outputs))
    assert b.io <= b.scratch + io_bytes


def test_bounds_with_io_count_scratch():
    """The regression: scratch larger than the I/O made the bound with I/O the smaller one."""
    c = compile_model(lstm2(2, hidden=64), CompileOptions())
    assert c.io_lower_bound >= c.lower_bound > 2 * 64 * 4 + 2 * 4 * 4
