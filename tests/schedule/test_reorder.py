"""Operator reordering (aotc/steps/reorder.py): a branching graph runs in the order of smallest
liveness bound, which brute force over every topological order confirms; --keep-order keeps
the model's order; outputs still match onnxruntime; the bundle is deterministic."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper as h
from opcheck import check, make_model

import aotc
from aotc.compiler import CompileOptions, compile_model

X = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
W = np.linspace(0.5, 2, 64 * 16, dtype=np.float32).reshape(64, 16)
AXES = np.array([0], dtype=np.int64)
# Two branches, each with a 4 KB intermediate. In the model's order the first branch's big
# tensor stays live while the second branch makes its own: 8 KB at once instead of 4 KB.
NODES = [
    h.make_node("Mul", ["x", "w"], ["big"], name="n1"),
    h.make_node("Relu", ["x"], ["s1"], name="n2"),
    h.make_node("Mul", ["s1", "w"], ["s2"], name="n3"),
    h.make_node("ReduceSum", ["s2", "axes"], ["s3"], name="n4"),
    h.make_node("ReduceSum", ["big", "axes"], ["t"], name="n5"),
    h.make_node("Add", ["t", "s3"], ["y"], name="n6"),
]


def _model(nodes: list[onnx.NodeProto]) -> onnx.ModelProto:
    return make_model(nodes, {"x": X}, {"y": (np.float32, [1, 16])}, {"w": W, "axes": AXES})


def _topological_orders(nodes: list[onnx.NodeProto]) -> list[list[onnx.NodeProto]]:
    made = {o: n.name for n in nodes for o in n.output}
    out = []
    for perm in itertools.permutations(nodes):
        seen: set[str] = set()
        ok = True
        for n in perm:
            if any(i in made and made[i] not in seen for i in n.input):
                ok = False
                break
            seen.add(n.name)
        if ok:
            out.append(list(perm))
    return out


def _bound(model: onnx.ModelProto, **opts: object) -> tuple[int, int]:
    c = compile_model(model, CompileOptions(name="m", **opts))  # type: ignore[arg-type]
    return c.lower_bound, c.plan.size


def test_reorder_reaches_the_brute_force_optimum() -> None:
    orders = _topological_orders(NODES)
    assert len(orders) == 10
    best = min(_bound(_model(o), keep_order=True)[0] for o in orders)
    keep = _bound(_model(NODES), keep_order=True)
    assert keep[0] > best
    assert _bound(_model(NODES)) == (best, best)  # bound and arena at the optimum
    assert keep[1] >= keep[0] > best  # --keep-order keeps the model's (larger) arena


def test_reordered_outputs_match_onnxruntime() -> None:
    reordered = check(_model(NODES), {"x": X}).compilation
    kept = check(_model(NODES), {"x": X}, keep_order=True).compilation
    names = [s.node.name for s in kept.schedule.steps]
    assert names == sorted(names)  # the model's order (n6 is fused into n5)
    assert [s.node.name for s in reordered.schedule.steps] == ["n2", "n3", "n4", "n1", "n5"]
    assert reordered.lower_bound < kept.lower_bound


def test_reordering_is_deterministic(tmp_path: Path) -> None:
    a = aotc.compile(_model(NODES), tmp_path / "a", name="m")
    b = aotc.compile(_model(NODES), tmp_path / "b", name="m")
    def files(d: Path) -> list[str]:
        return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())

    assert files(tmp_path / "a") == files(tmp_path / "b")
    for f in files(tmp_path / "a"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    assert [s.node.name for s in a.compilation.schedule.steps] == \
        [s.node.name for s in b.compilation.schedule.steps]


MLPERF_INT8 = ["kws_ref_model_int8_qdq", "vww_96_int8_qdq", "pretrainedResnet_int8_qdq",
               "ad01_int8_qdq", "str_ww_ref_model_int8_qdq"]


@pytest.mark.parametrize("stem", MLPERF_INT8)
def test_mlperf_reordering_never_raises_the_bound(stem: str, mlperf_dir: Path,
                                                   tmp_path: Path) -> None:
    model = mlperf_dir / f"{stem}.onnx"
    kept = compile_model(model, CompileOptions(name="m", keep_order=True))
    bundle = aotc.compile(model, tmp_path, name="m")
    assert bundle.compilation.lower_bound <= kept.lower_bound
    assert bundle.compilation.plan.size <= kept.plan.size
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    runner = bundle.load()
    in_name, out_name = runner.meta["inputs"][0]["name"], runner.meta["outputs"][0]["name"]
    for x, want in zip(vec["input"][:2], vec["output_tflm"][:2]):
        got = runner.run({in_name: x})[out_name]
        np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_greedy_beyond_the_exact_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past EXACT_STATES the greedy order runs; here it also finds the optimum."""
    from aotc.steps import reorder

    exact = _bound(_model(NODES))
    monkeypatch.setattr(reorder, "EXACT_STATES", 1)
    assert reorder._exact(reorder._costs(_compiled_graph(), {})) is None
    assert _bound(_model(NODES)) == exact


def _compiled_graph():  # type: ignore[no-untyped-def]
    return compile_model(_model(NODES), CompileOptions(name="m", keep_order=True)).graph


def test_cli_keep_order(tmp_path: Path) -> None:
    from aotc.cli import main

    onnx.save(_model(NODES), tmp_path / "m.onnx")
    for flag, name in (([], "r"), (["--keep-order"], "k")):
        assert main(["compile", str(tmp_path / "m.onnx"), "-o", str(tmp_path / name), "-q",
                     *flag]) == 0
    header = [(tmp_path / d / "m.h").read_text() for d in ("r", "k")]
    assert "M_ARENA_SIZE 4160" in header[0] and "M_ARENA_SIZE 8256" in header[1]
