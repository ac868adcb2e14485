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


# ---- Loop with a stop condition computed at run time: a C for loop bounded by the trip count
def _feeds_loop(extra: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    return {"x": X, "acc0": np.zeros(3, np.float32), **(extra or {})}


@pytest.mark.parametrize("c0", [True, False])
@pytest.mark.parametrize("limit", [3.0, 100.0])
def test_loop_condition_at_entry_is_a_graph_input(c0: bool, limit: float):
    """cond false at entry: the body never runs (acc = acc0); true: early exit or full trip."""
    init = {"M": np.array(6, np.int64), "one": np.array(1.0, np.float32),
            "limit": np.array(limit, np.float32)}
    n = h.make_node("Loop", ["M", "c0", "acc0"], ["acc"], body=_loop_body(True))
    feeds = _feeds_loop({"c0": np.array(c0)})
    check(make_model([n], feeds, {"acc": (np.float32, [3])}, init), feeds, name="loop_c0")


@pytest.mark.parametrize("x0", [-1.0, 1.0])
def test_loop_condition_at_entry_computed_in_the_graph(x0: float):
    """c0 = ReduceSum(x) > 0, computed before the loop: x0 = -1 makes it false at entry."""
    x = np.array([x0, 0.25, 0.5], np.float32) * np.float32(abs(x0) * 3)
    init = {"M": np.array(5, np.int64), "one": np.array(1.0, np.float32),
            "limit": np.array(4.0, np.float32), "zero": np.array(0.0, np.float32)}
    nodes = [h.make_node("ReduceSum", ["x"], ["sx"], keepdims=0),
             h.make_node("Greater", ["sx", "zero"], ["c0"]),
             h.make_node("Loop", ["M", "c0", "acc0"], ["acc"], body=_loop_body(True))]
    feeds = {"x": x, "acc0": np.zeros(3, np.float32)}
    check(make_model(nodes, feeds, {"acc": (np.float32, [3])}, init), feeds, name="loop_c0_calc")


@pytest.mark.parametrize("m, limit", [(0, 100.0), (3, 100.0), (8, 100.0), (8, 10.0)])
def test_loop_trip_count_is_a_graph_input(m: int, limit: float):
    """M fed at run time (C: i < *M), stop computed in the body; M = 0 skips the body."""
    init = {"one": np.array(1.0, np.float32), "limit": np.array(limit, np.float32)}
    n = h.make_node("Loop", ["M", "", "acc0"], ["acc"], body=_loop_body(True))
    feeds = _feeds_loop({"M": np.array(m, np.int64)})
    b = check(make_model([n], feeds, {"acc": (np.float32, [3])}, init), feeds, name="loop_m")
    assert b.compilation.schedule.loops


def test_loop_body_reads_a_row_at_the_iteration_number():
    """while sum(acc) < limit and i < M: acc += xs[i] (Gather at the counter), acc and the
    counter of rows used are carried."""
    nodes = [h.make_node("Gather", ["xs", "i"], ["row"], axis=0),
             h.make_node("Add", ["acc_in", "row"], ["acc_out"]),
             h.make_node("Add", ["n_in", "one_i"], ["n_out"]),
             h.make_node("ReduceSum", ["acc_out"], ["s"], keepdims=0),
             h.make_node("Less", ["s", "limit"], ["cond_out"])]
    body = h.make_graph(nodes, "body", [h.make_tensor_value_info("i", T.INT64, []),
                                        h.make_tensor_value_info("cond_in", T.BOOL, []),
                                        h.make_tensor_value_info("acc_in", T.FLOAT, [3]),
                                        h.make_tensor_value_info("n_in", T.INT64, [])],
                        [h.make_tensor_value_info("cond_out", T.BOOL, []),
                         h.make_tensor_value_info("acc_out", T.FLOAT, [3]),
                         h.make_tensor_value_info("n_out", T.INT64, [])])
    n = h.make_node("Loop", ["M", "", "acc0", "n0"], ["acc", "n"], body=body)
    xs = np.arange(15, dtype=np.float32).reshape(5, 3)
    for limit in (20.0, 1000.0):  # stops after 2 rows / reads all 5
        feeds = {"xs": xs, "acc0": np.zeros(3, np.float32), "n0": np.array(0, np.int64),
                 "limit": np.array(limit, np.float32)}
        m = make_model([n], feeds, {"acc": (np.float32, [3]), "n": (np.int64, [])},
                       {"M": np.array(5, np.int64), "one_i": np.array(1, np.int64)})
        check(m, feeds, name="loop_gather")


def test_loop_scan_output_with_data_dependent_stop_is_rejected(tmp_path):
    body = _loop_body(True)
    body.output.append(h.make_tensor_value_info("scan", T.FLOAT, [3]))
    n = h.make_node("Loop", ["M", "", "acc0"], ["acc", "scan"], body=body)
    m = make_model([n], _feeds_loop(), {"acc": (np.float32, [3]), "scan": (np.float32, None)},
                   {"M": np.array(10, np.int64), "one": np.array(1.0, np.float32),
                    "limit": np.array(3.0, np.float32)})
    with pytest.raises(AotcError) as e:
        aotc.compile(m, tmp_path, name="m")
    msg = str(e.value)
    assert "\n" not in msg and "'Loop_0'" in msg and "may stop early" in msg


# ---- inspect and report on If and Loop models, through the command line
def _loop_model() -> object:
    """The early-exit Loop of the tests above with a MatMul in its body (9 MACs per
    iteration, at most 10 iterations), then a Relu."""
    body = _loop_body(True)
    mm = h.make_node("MatMul", ["xi", "W"], ["xw"])
    for k, nd in enumerate(body.node):
        if nd.op_type == "Add" and "acc_in" in nd.input:
            nd.input[1] = "xw"
            body.node.insert(k, mm)
            break
    n = h.make_node("Loop", ["M", "", "acc0"], ["acc"], body=body)
    return make_model([n, h.make_node("Relu", ["acc"], ["z"])], _feeds_loop(),
                      {"z": (np.float32, [3])},
                      {"M": np.array(10, np.int64), "one": np.array(1.0, np.float32),
                       "limit": np.array(30.0, np.float32),
                       "W": np.eye(3, dtype=np.float32) * np.float32(0.5)})


@pytest.mark.parametrize("kind", ["if", "loop"])
def test_inspect_and_report_on_control_flow(kind: str, tmp_path, capsys):
    import json

    import onnx

    from aotc.cli import main as cli_main

    model = _if_model([], {"x": X, "c": np.array(True)}) if kind == "if" else _loop_model()
    path = tmp_path / f"{kind}.onnx"
    onnx.save(model, path)
    feeds = {"x": X, "c": np.array(True)} if kind == "if" else _feeds_loop()
    check(model, feeds, name=f"m_{kind}")  # the model itself compiles and matches onnxruntime
    capsys.readouterr()
    assert cli_main(["inspect", str(path)]) == 0
    text = capsys.readouterr().out
    assert cli_main(["inspect", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    body_nodes = [n for n in rep["nodes"] if n.get("in")]
    inside = [r for r in rep["schedule"] if r["in"]]
    if kind == "if":
        assert {n["in"] for n in body_nodes} == {"If_0.then_branch", "If_0.else_branch"}
        assert {r["in"] for r in inside} == {"If_0 then", "If_0 else"}
        # y (the If's result) is written by a copy in each branch; Relu reads both
        (relu,) = [r for r in rep["schedule"] if r["op"] == "Relu"]
        assert len(relu["inputs"][0]["kernels"]) == 2
    else:
        assert {n["in"] for n in body_nodes} == {"Loop_0.body"}
        assert {r["in"] for r in inside} == {"Loop_0 body (at most 10 iterations)"}
        assert rep["total_macs"] == 10 * 9  # M iterations of a 3x3 MatMul
        assert [n["macs"] for n in rep["nodes"] if n["op"] == "MatMul"] == [9]
    for n in body_nodes:
        assert n["name"] in text
    html = tmp_path / f"{kind}.html"
    assert cli_main(["report", str(path), "-o", str(html)]) == 0
    page = html.read_text()
    assert page.count('class="kernel"') == len(rep["schedule"])
    for ctx in {r["in"] for r in inside}:
        assert f"<title>cluster_{ctx}</title>" in page and f"in {ctx}" in page
