"""If, Loop and Scan through the generated C against onnxruntime (opcheck: atol 1e-5, rtol
1e-5 for float32; exact for integers)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper
from opcheck import check, make_model

import aotc
from aotc.errors import AotcError


def _branch(name: str, bias: list, out_shape: list[int] | None = None) -> object:
    """x + bias (x read from the outer scope), optionally reshaped."""
    c = h.make_node("Constant", [], [f"{name}_b"],
                    value=numpy_helper.from_array(np.array(bias, np.float32)))
    add = h.make_node("Add", ["x", f"{name}_b"], [f"{name}_out"])
    return h.make_graph([c, add], name, [],
                        [h.make_tensor_value_info(f"{name}_out", T.FLOAT, out_shape)])


def _if_model(cond_nodes: list[object], inputs: dict[str, np.ndarray],
              init: dict[str, np.ndarray] | None = None, else_bias: list[float] | None = None
              ) -> object:
    n = h.make_node("If", ["c"], ["y"], then_branch=_branch("t", [1, 2, 3]),
                    else_branch=_branch("e", else_bias or [10, 20, 30]))
    relu = h.make_node("Relu", ["y"], ["z"])
    return make_model([*cond_nodes, n, relu], inputs, {"z": (np.float32, [3])}, init)


X = np.array([-5.0, 0.5, 7.0], np.float32)


def _ops(bundle: aotc.Bundle) -> list[str]:
    return [st.node.op for st in bundle.compilation.schedule.steps]


def test_if_on_initializer_folds_to_one_branch():
    m = _if_model([], {"x": X}, {"c": np.array(False)})
    b = check(m, {"x": X}, name="if_init")
    assert "If" not in _ops(b) and "Copy" not in _ops(b)
    assert all(st.ctrl == "" for st in b.compilation.schedule.steps)


def test_if_on_shape_comparison_folds_to_one_branch():
    # Shape(x) -> Gather(0) -> Equal(3): known once shapes are, the exporters' pattern.
    nodes = [h.make_node("Shape", ["x"], ["s"]),
             h.make_node("Gather", ["s", "zero"], ["d0"], axis=0),
             h.make_node("Equal", ["d0", "three"], ["c"])]
    init = {"zero": np.array(0, np.int64), "three": np.array(3, np.int64)}
    b = check(_if_model(nodes, {"x": X}, init), {"x": X}, name="if_shape")
    assert not {"If", "Shape", "Gather", "Equal", "Copy"} & set(_ops(b))


@pytest.mark.parametrize("cond", [True, False])
def test_if_on_run_time_input(cond: bool):
    m = _if_model([], {"x": X, "c": np.array(cond)})
    b = check(m, {"x": X, "c": np.array(cond)}, name="if_rt")
    assert [st.ctrl for st in b.compilation.schedule.steps if st.ctrl] == ["if", "else", "endif"]


def test_if_branch_shape_mismatch_is_one_line_error(tmp_path):
    n = h.make_node("If", ["c"], ["y"], then_branch=_branch("t", [1, 2, 3]),
                    else_branch=_branch("e", [[1.0], [2.0]]))
    m = make_model([n], {"x": X, "c": np.array(True)}, {"y": (np.float32, None)})
    with pytest.raises(AotcError) as e:
        aotc.compile(m, tmp_path, name="m")
    msg = str(e.value)
    assert "\n" not in msg and "'If_0'" in msg and "float32[3]" in msg


def _scan_body() -> object:
    """h = tanh(h_in @ W + x_t); out_t = h: a simple RNN cell; W from the outer scope."""
    nodes = [h.make_node("MatMul", ["h_in", "W"], ["hw"]),
             h.make_node("Add", ["hw", "x_t"], ["pre"]),
             h.make_node("Tanh", ["pre"], ["h_out"]),
             h.make_node("Identity", ["h_out"], ["y_t"])]
    return h.make_graph(nodes, "rnn", [h.make_tensor_value_info("h_in", T.FLOAT, [1, 4]),
                                       h.make_tensor_value_info("x_t", T.FLOAT, [1, 4])],
                        [h.make_tensor_value_info("h_out", T.FLOAT, [1, 4]),
                         h.make_tensor_value_info("y_t", T.FLOAT, [1, 4])])


@pytest.mark.parametrize("reverse", [0, 1])
def test_scan_rnn_cell(reverse: int):
    rng = np.random.default_rng(0)
    xs = rng.uniform(-1, 1, (5, 1, 4)).astype(np.float32)
    h0 = rng.uniform(-1, 1, (1, 4)).astype(np.float32)
    w = rng.uniform(-0.5, 0.5, (4, 4)).astype(np.float32)
    n = h.make_node("Scan", ["h0", "xs"], ["h_last", "ys"], body=_scan_body(),
                    num_scan_inputs=1, scan_input_directions=[reverse],
                    scan_output_directions=[reverse])
    m = make_model([n], {"h0": h0, "xs": xs},
                   {"h_last": (np.float32, [1, 4]), "ys": (np.float32, [5, 1, 4])}, {"W": w})
    b = check(m, {"h0": h0, "xs": xs}, name="scan_rnn")
    assert b.compilation.schedule.loops


def _loop_body(with_break: bool) -> object:
    """acc = acc + x * (i + 1); scan out acc; stop when acc[0] > limit (with_break)."""
    nodes = [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
             h.make_node("Add", ["fi", "one"], ["f1"]),
             h.make_node("Mul", ["x", "f1"], ["xi"]),
             h.make_node("Add", ["acc_in", "xi"], ["acc_out"]),
             h.make_node("Identity", ["acc_out"], ["scan"])]
    if with_break:
        nodes += [h.make_node("ReduceMax", ["acc_out"], ["mx"], keepdims=0),
                  h.make_node("Less", ["mx", "limit"], ["cond_out"])]
    else:
        nodes.append(h.make_node("Identity", ["cond_in"], ["cond_out"]))
    outs = [h.make_tensor_value_info("cond_out", T.BOOL, []),
            h.make_tensor_value_info("acc_out", T.FLOAT, [3])]
    if not with_break:
        outs.append(h.make_tensor_value_info("scan", T.FLOAT, [3]))
    return h.make_graph(nodes, "body", [h.make_tensor_value_info("i", T.INT64, []),
                                        h.make_tensor_value_info("cond_in", T.BOOL, []),
                                        h.make_tensor_value_info("acc_in", T.FLOAT, [3])],
                        outs)


def test_loop_static_trip_count_with_scan_output():
    acc0 = np.array([0.5, -1.0, 2.0], np.float32)
    init = {"M": np.array(4, np.int64), "one": np.array(1.0, np.float32)}
    n = h.make_node("Loop", ["M", "", "acc0"], ["acc", "scan"], body=_loop_body(False))
    m = make_model([n], {"x": X, "acc0": acc0},
                   {"acc": (np.float32, [3]), "scan": (np.float32, [4, 3])}, init)
    check(m, {"x": X, "acc0": acc0}, name="loop_static")


@pytest.mark.parametrize("limit", [3.0, 100.0])
def test_loop_data_dependent_stop_with_bound(limit: float):
    acc0 = np.zeros(3, np.float32)
    init = {"M": np.array(10, np.int64), "one": np.array(1.0, np.float32),
            "limit": np.array(limit, np.float32), "c0": np.array(True)}
    n = h.make_node("Loop", ["M", "c0", "acc0"], ["acc"], body=_loop_body(True))
    m = make_model([n], {"x": X, "acc0": acc0}, {"acc": (np.float32, [3])}, init)
    check(m, {"x": X, "acc0": acc0}, name="loop_break")


def test_loop_scan_output_with_run_time_trip_count_is_rejected(tmp_path):
    acc0 = np.zeros(3, np.float32)
    n = h.make_node("Loop", ["M", "", "acc0"], ["acc", "scan"], body=_loop_body(False))
    m = make_model([n], {"x": X, "acc0": acc0, "M": np.array(4, np.int64)},
                   {"acc": (np.float32, [3]), "scan": (np.float32, None)},
                   {"one": np.array(1.0, np.float32)})
    with pytest.raises(AotcError, match="trip count M is not known at compile time"):
        aotc.compile(m, tmp_path, name="m")
