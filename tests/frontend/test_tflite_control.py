"""TFLite IF and WHILE (aotc/frontend/tflite/control.py): single-op models whose branches,
condition and body are further subgraphs (tflite_builder's Net.subgraph), compiled with aotc
and run on the host (the first set also on the QEMU boards of AOTC_TEST_BOARDS, against the
host) against TensorFlow Lite Micro's interpreter: bit-exact (array_equal) on
float32, int8 and int32 tensors, conditions both ways, loops run 0, 1 and several times with a
condition computed at run time. int8 operators inside the subgraphs run on the integer kernels
(the qdq pass runs inside bodies). Malformed or unsupported uses: one-line errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from opcheck import run_on_boards
from tflite_builder import Net, interpret_tflm, options

import aotc
from aotc.cli import main as cli_main


def _run(tmp_path, model: bytes, sets: list[list[np.ndarray]], n_out: int) -> Any:
    """aotc's outputs against TFLM's on each input set, bit-exact; the bundle."""
    path = tmp_path / "m.tflite"
    path.write_bytes(model)
    bundle = aotc.compile(path, tmp_path / "out", name="m")
    runner = bundle.load()
    ins = [t["name"] for t in runner.meta["inputs"]]
    outs = [t["name"] for t in runner.meta["outputs"]]
    for v, xs in enumerate(sets):
        got = runner.run(dict(zip(ins, xs)))
        if v == 0:
            run_on_boards(bundle, dict(zip(ins, xs)), got, tmp_path / "fw")
        want = interpret_tflm(model, xs, n_out)
        for k, (o, w) in enumerate(zip(outs, want)):
            assert got[o].dtype == w.dtype and got[o].shape == w.shape, (v, k, got[o], w)
            np.testing.assert_array_equal(got[o], w, err_msg=f"set {v} output {k}")
    return bundle


# ------------------------------------------------------------------------------------ IF
def _if_model(quant: bool, dtype: Any = None, const_cond: bool | None = None) -> bytes:
    """IF(c, x, y): then ADD(x, y), else MAXIMUM(x, y) (int32: SUB)."""
    net = Net(quant, seed=1)
    c = net.input((1,), np.bool_) if const_cond is None else \
        net._tensor((1,), np.bool_, "c", np.array([const_cond]))
    x, y = net.input((2, 3), dtype), net.input((2, 3), dtype)
    then, other = net.subgraph(), net.subgraph()
    tx, ty = then.input((2, 3), dtype), then.input((2, 3), dtype)
    then.outputs = [then.op("ADD", [tx, ty], (2, 3), options("AddOptions"), dtype=dtype)]
    ex, ey = other.input((2, 3), dtype), other.input((2, 3), dtype)
    other.outputs = [other.op("SUB", [ex, ey], (2, 3), options("SubOptions"), dtype=dtype)
                     if dtype == np.int32 else other.op("MAXIMUM", [ex, ey], (2, 3))]
    out = net.like(then.outputs[0], "if_out") if not quant else \
        net._tensor((2, 3), np.int8, "if_out", None, *then.qparams(
            then.tensors[then.outputs[0]].name))
    net.op_into("IF", [c, x, y], [out], options("IfOptions", thenSubgraphIndex=then.index,
                                                   elseSubgraphIndex=other.index))
    return net.build([out])


def _values(rng: np.random.Generator, dt: Any, shape: tuple[int, ...]) -> np.ndarray:
    if np.dtype(dt).kind in "iu":
        info = np.iinfo(dt) if dt == np.int8 else np.iinfo(np.int16)
        return rng.integers(info.min, info.max + 1, size=shape).astype(dt)
    return rng.normal(size=shape).astype(dt)


@pytest.mark.parametrize("kind", ["float32", "int8", "int32"])
def test_if(kind, tmp_path):
    quant, dtype = kind == "int8", np.int32 if kind == "int32" else None
    dt = {"float32": np.float32, "int8": np.int8, "int32": np.int32}[kind]
    rng = np.random.default_rng(0)
    sets = [[np.array([c]), _values(rng, dt, (2, 3)), _values(rng, dt, (2, 3))]
            for c in (True, False, True, False, False, True)]
    bundle = _run(tmp_path, _if_model(quant, dtype), sets, 1)
    assert any(n.op == "If" for n in bundle.compilation.graph.nodes)
    if quant:  # the int8 ADD of the then-branch: the integer kernel
        (node,) = [n for n in bundle.compilation.graph.nodes if n.op == "If"]
        assert [n.op for n in node.attrs["then_branch"].nodes] == ["QLinearAdd"]


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_a_constant_condition_keeps_one_branch(cond, tmp_path):
    rng = np.random.default_rng(1)
    sets = [[_values(rng, np.float32, (2, 3)), _values(rng, np.float32, (2, 3))]
            for _ in range(3)]
    bundle = _run(tmp_path, _if_model(False, const_cond=cond), sets, 1)
    ops = {n.op for n in bundle.compilation.graph.nodes}
    assert "If" not in ops and ops & {"Add", "Max"} == ({"Add"} if cond else {"Max"}), ops


# --------------------------------------------------------------------------------- WHILE
def _while(net: Net, ins: list[int], cond: Net, body: Net) -> list[int]:
    outs = [net.like(t, f"while_out{k}") for k, t in enumerate(ins)]
    net.op_into("WHILE", ins, outs, options("WhileOptions", condSubgraphIndex=cond.index,
                                            bodySubgraphIndex=body.index))
    return outs


def _float_while(count: int = 3) -> bytes:
    """while i < count and max(x) < 50: x = x * [2, 3, 0.5, -1.5]; i += 1 (i starts at a
    constant 0): stops on the count or on the data."""
    net = Net(False)
    x, i0 = net.input((1, 4)), net.ints([0])
    cond, body = net.subgraph(), net.subgraph()
    cx, ci = cond.input((1, 4)), cond.input((1,), np.int32)
    c1 = cond.op("LESS", [ci, cond.ints([count])], (1,), dtype=np.bool_)
    m = cond.op("REDUCE_MAX", [cx, cond.ints([1])], (1,), options("ReducerOptions"))
    c2 = cond.op("LESS", [m, cond.const(np.array([50.0]))], (1,), dtype=np.bool_)
    cond.outputs = [cond.op("LOGICAL_AND", [c1, c2], (1,), dtype=np.bool_)]
    bx, bi = body.input((1, 4)), body.input((1,), np.int32)
    body.outputs = [
        body.op("MUL", [bx, body.const(np.array([[2.0, 3.0, 0.5, -1.5]]))], (1, 4),
                options("MulOptions")),
        body.op("ADD", [bi, body.ints([1])], (1,), options("AddOptions"), dtype=np.int32)]
    return net.build(_while(net, [x, i0], cond, body))


def test_while_float32_and_int32(tmp_path):
    sets = [[np.array([[1, 2, 3, 4]], np.float32)],      # 3 iterations (the count)
            [np.array([[10, 20, 3, 4]], np.float32)],    # 1 (max reaches 60)
            [np.array([[100, 2, 3, 4]], np.float32)],    # 0 (false on entry)
            [np.array([[-1, 0.5, 7, 4]], np.float32)]]   # 2
    bundle = _run(tmp_path, _float_while(), sets, 2)
    assert [n.op for n in bundle.compilation.graph.nodes if n.op == "Loop"] == ["Loop"]


def test_max_loop_iterations(tmp_path, capsys):
    """--max-loop-iterations 2 on the 3-iteration loop: TFLM's outputs of the same model
    stopping at 2 (the loops that stop earlier on the data are unchanged)."""
    path = tmp_path / "m.tflite"
    path.write_bytes(_float_while(3))
    assert cli_main(["compile", str(path), "-o", str(tmp_path / "out"), "--name", "m", "-q",
                     "--max-loop-iterations", "2"]) == 0, capsys.readouterr().err
    assert "aotc_i0 < 2 && aotc_c0 != 0u" in (tmp_path / "out" / "m.c").read_text()
    bundle = aotc.compile(path, tmp_path / "api", name="m", max_loop_iterations=2)
    runner = bundle.load()
    ins = [t["name"] for t in runner.meta["inputs"]]
    outs = [t["name"] for t in runner.meta["outputs"]]
    for x in ([[1, 2, 3, 4]], [[10, 20, 3, 4]], [[100, 2, 3, 4]], [[-1, 0.5, 7, 4]]):
        xs = [np.array(x, np.float32)]
        got = runner.run(dict(zip(ins, xs)))
        for o, w in zip(outs, interpret_tflm(_float_while(2), xs, 2)):
            np.testing.assert_array_equal(got[o], w)
    assert cli_main(["compile", str(path), "-o", str(tmp_path / "bad"),
                     "--max-loop-iterations", "0"]) == 2
    assert "the bound must be at least 1" in capsys.readouterr().err


def _int8_while() -> bytes:
    """int8 x, int32 i and limit n (carried through): while i < n: x = x + 0.25 (int8 ADD,
    saturating at the top of x's range); i += 1."""
    net = Net(True)
    x, n, i0 = net.input((2, 4)), net.input((1,), np.int32), net.ints([0])
    cond, body = net.subgraph(), net.subgraph()
    cond.input((2, 4))
    cn, ci = cond.input((1,), np.int32), cond.input((1,), np.int32)
    cond.outputs = [cond.op("LESS", [ci, cn], (1,), dtype=np.bool_)]
    bx, bn, bi = body.input((2, 4)), body.input((1,), np.int32), body.input((1,), np.int32)
    y = body.like(bx, "x_next")
    body.op_into("ADD", [bx, body.const(np.array([0.25]))], [y], options("AddOptions"))
    body.outputs = [y, bn, body.op("ADD", [bi, body.ints([1])], (1,), options("AddOptions"),
                                   dtype=np.int32)]
    return net.build(_while(net, [x, n, i0], cond, body))


def test_while_int8(tmp_path):
    rng = np.random.default_rng(2)
    sets = [[rng.integers(-128, 128, size=(2, 4)).astype(np.int8), np.array([k], np.int32)]
            for k in (0, 1, 3, 7, -2, 12)]
    _run(tmp_path, _int8_while(), sets, 3)


# --------------------------------------------------------------------------------- errors
def _compile_error(tmp_path, capsys, model: bytes) -> str:
    path = tmp_path / "m.tflite"
    path.write_bytes(model)
    assert cli_main(["compile", str(path), "-o", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("aotc: error: "), err
    return err[0]


def test_a_subgraph_that_runs_itself_is_refused(tmp_path, capsys):
    net = Net(False)
    x = net.input((1, 2))
    cond, body = net.subgraph(), net.subgraph()
    cx = cond.input((1, 2))
    m = cond.op("REDUCE_MAX", [cx, cond.ints([0, 1])], (), options("ReducerOptions"))
    cond.outputs = [cond.op("LESS", [m, cond.const(np.array(5.0))], (), dtype=np.bool_)]
    bx = body.input((1, 2))
    inner = body.like(bx, "inner")
    body.op_into("WHILE", [bx], [inner], options("WhileOptions", condSubgraphIndex=cond.index,
                                                 bodySubgraphIndex=body.index))
    body.outputs = [inner]
    err = _compile_error(tmp_path, capsys, net.build(_while(net, [x], cond, body)))
    assert f"subgraph {body.index} runs itself" in err, err


def test_if_branches_of_different_shapes_are_refused(tmp_path, capsys):
    net = Net(False)
    c, x = net.input((1,), np.bool_), net.input((2, 3))
    then, other = net.subgraph(), net.subgraph()
    then.outputs = [then.input((2, 3))]
    ox = other.input((2, 3))
    other.outputs = [other.op("RESHAPE", [ox, other.ints([3, 2])], (3, 2))]
    out = net.like(x, "out")
    net.op_into("IF", [c, x], [out], options("IfOptions", thenSubgraphIndex=then.index,
                                                elseSubgraphIndex=other.index))
    err = _compile_error(tmp_path, capsys, net.build([out]))
    assert "needs one static shape and dtype" in err, err


def test_a_missing_subgraph_is_refused(tmp_path, capsys):
    net = Net(False)
    c, x = net.input((1,), np.bool_), net.input((2, 3))
    out = net.like(x, "out")
    net.op_into("IF", [c, x], [out], options("IfOptions", thenSubgraphIndex=4,
                                                elseSubgraphIndex=5))
    err = _compile_error(tmp_path, capsys, net.build([out]))
    assert "subgraph 4 is not in the model" in err, err
