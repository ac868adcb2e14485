"""The BYOC interface itself, with small backends defined here: partitioning order, the layout
pass (transposes cancelled, size-1 transposes as views), scratch planned in the arena, an
entry-point backend, and one-line errors for a backend's mistakes."""

from __future__ import annotations

import importlib.metadata
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import aotc
import aotc.byoc
from aotc.byoc import Backend, Constant, Emitted, Pattern, Subgraph
from aotc.cli import main as cli_main
from aotc.errors import AotcError


def _relu_model(shape=(1, 3, 4, 5)) -> onnx.ModelProto:
    """s = Sigmoid(x) is a graph output (so nothing fuses into it); y = Neg(Relu(s)) is one
    fused kernel."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"], name="sig"),
             helper.make_node("Relu", ["s"], ["r"], name="relu"),
             helper.make_node("Neg", ["r"], ["y"], name="neg")]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     list(shape))],
                          [helper.make_tensor_value_info("s", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


class AddOne(Backend):
    """Takes ``op`` kernels and computes x + 1 (a deliberately different function: the output
    proves who ran) through a constant and a scratch buffer, so the test sees both used."""

    name = "add-one"

    def __init__(self, layout: str = "NCHW", scratch: int = 64, op: str = "Sigmoid") -> None:
        self.layout = layout
        self.scratch_bytes = scratch
        self.op = op
        self.seen: list[Subgraph] = []

    def patterns(self):
        return [Pattern("sig", self.op, dtypes=("float32",))]

    def codegen(self, sub: Subgraph, symbol: str) -> Emitted:
        self.seen.append(sub)
        n = sub.output_type(0).numel  # type: ignore[union-attr]
        if self.scratch_bytes:
            src = (f"static int {symbol}(const float *x, float *y, const float *one, "
                   f"void *scratch)\n{{\n    float *tmp = (float *)scratch;\n    int i;\n"
                   f"    for (i = 0; i < {n}; ++i) {{\n        tmp[i % 16] = x[i] + one[0];\n"
                   f"        y[i] = tmp[i % 16];\n    }}\n    return 0;\n}}\n")
        else:
            src = (f"static int {symbol}(const float *x, float *y, const float *one)\n{{\n"
                   f"    int i;\n    for (i = 0; i < {n}; ++i) {{\n"
                   f"        y[i] = x[i] + one[0];\n    }}\n    return 0;\n}}\n")
        return Emitted(src, [Constant("one", np.ones(1, np.float32))], self.scratch_bytes)


def test_claimed_kernel_runs_the_backend_code_with_its_constant_and_scratch(tmp_path):
    model = _relu_model()
    be = AddOne()
    b = aotc.compile(model, tmp_path, name="m", byoc=(be,))
    c = b.compilation
    assert [(r.kernel, r.ops, r.backend) for r in c.partition] == [
        ("sig", "Sigmoid", "add-one"), ("relu", "Relu+Neg", "native")]
    x = np.random.default_rng(0).normal(0, 1, (1, 3, 4, 5)).astype(np.float32)
    got = b.load().run({"x": x})
    np.testing.assert_allclose(got["s"], x + 1, rtol=1e-6)
    np.testing.assert_allclose(got["y"], -np.maximum(x + 1, 0), rtol=1e-6)
    scratch = [r for r in c.liveness.reqs if r.name.endswith("_scratch")]
    assert len(scratch) == 1 and scratch[0].size >= 64
    assert c.plan.size >= 64


def _sig_relu_model() -> onnx.ModelProto:
    """Sigmoid -> Relu fuse into one kernel: an epilogue the pattern must accept."""
    g = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["s"], name="sig"),
         helper.make_node("Relu", ["s"], ["y"], name="relu")], "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_a_fused_epilogue_outside_the_pattern_is_split_off(tmp_path):
    """Sigmoid+Relu: the backend takes Sigmoid alone, Relu becomes a native kernel after it."""
    rep = aotc.inspect(_sig_relu_model(), byoc=(AddOne(),))
    rows = [(r["ops"], r["backend"]) for r in rep["partition"]]
    assert rows == [("Sigmoid", "add-one"), ("Relu", "native")]
    x = np.linspace(-3, 3, 16, dtype=np.float32).reshape(2, 8)
    got = aotc.compile(_sig_relu_model(), tmp_path, name="m",
                       byoc=(AddOne(),)).load().run({"x": x})["y"]
    np.testing.assert_allclose(got, np.maximum(x + 1, 0), rtol=1e-6)


def test_a_fused_kernel_no_backend_takes_in_any_form_is_refused_with_the_reason():
    """The split is tried (Sigmoid alone) and refused too: one native kernel, as fused."""
    class Refuser(AddOne):
        def patterns(self):
            return [Pattern("sig", "Sigmoid", check=lambda sub: "never")]

    (row,) = aotc.inspect(_sig_relu_model(), byoc=(Refuser(),))["partition"]
    assert row["ops"] == "Sigmoid+Relu" and row["backend"] == "native"
    assert row["reason"] == "add-one/sig: fused Relu is not supported"


def test_first_backend_that_accepts_wins():
    class Refuser(AddOne):
        name = "refuser"

        def patterns(self):
            return [Pattern("sig", "Sigmoid", check=lambda sub: "never")]

    rep = aotc.inspect(_relu_model(), byoc=(Refuser(), AddOne()))
    row = rep["partition"][0]
    assert row["backend"] == "add-one"
    rep = aotc.inspect(_relu_model(), byoc=(AddOne(), Refuser()))
    assert rep["partition"][0]["backend"] == "add-one"
    rep = aotc.inspect(_relu_model(), byoc=(Refuser(),))
    assert rep["partition"][0]["reason"] == "refuser/sig: never"


def test_nhwc_backend_sees_onnx_shapes_and_the_transposes_cancel(tmp_path):
    """Two NHWC kernels in a row: no transpose between them; the graph's NCHW input and output
    each need one; a [1, 1, H, W] input needs none (a view)."""
    be = AddOne(layout="NHWC", scratch=0, op="Softmax")
    g = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["a"], name="s1"),
         helper.make_node("Softmax", ["a"], ["y"], name="s2")], "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    b = aotc.compile(model, tmp_path / "a", name="m", byoc=(be,))
    ops = [ls.step.node.op for ls in b.compilation.lowered]
    assert ops == ["Transpose", "Softmax", "Softmax", "Transpose"], ops
    assert [s.input_type(0).shape for s in be.seen] == [(1, 3, 4, 5)] * 2
    assert b.compilation.graph.type(be.seen[0].activations[0]).shape == (1, 4, 5, 3)
    x = np.random.default_rng(1).normal(0, 1, (1, 3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(b.load().run({"x": x})["y"], x + 2, rtol=1e-6)

    g1 = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["y"], name="s1")], "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model1 = helper.make_model(g1, opset_imports=[helper.make_opsetid("", 17)])
    b1 = aotc.compile(model1, tmp_path / "b", name="m",
                      byoc=(AddOne(layout="NHWC", op="Softmax"),))
    assert [ls.step.node.op for ls in b1.compilation.lowered] == ["Softmax"]
    x1 = np.arange(20, dtype=np.float32).reshape(1, 1, 4, 5)
    np.testing.assert_allclose(b1.load().run({"x": x1})["y"], x1 + 1)


def test_entry_point_backend(tmp_path, monkeypatch, capsys):
    (tmp_path / "toy_backend.py").write_text(
        "from aotc.byoc import Backend, Emitted, Pattern\n"
        "class Toy(Backend):\n"
        "    name = 'toy'\n"
        "    def patterns(self):\n"
        "        return [Pattern('sig', 'Sigmoid')]\n"
        "    def codegen(self, sub, symbol):\n"
        "        n = sub.output_type(0).numel\n"
        "        return Emitted(f'static int {symbol}(const float *x, float *y)\\n{{\\n'\n"
        "                       f'    int i;\\n    for (i = 0; i < {n}; ++i) {{\\n'\n"
        "                       f'        y[i] = 1.0f / (1.0f + expf(-x[i]));\\n'\n"
        "                       f'    }}\\n    return 0;\\n}}\\n')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = importlib.metadata.EntryPoint("toy", "toy_backend:Toy", aotc.byoc.ENTRY_POINT_GROUP)
    monkeypatch.setattr(aotc.byoc, "_entry_points", lambda: {"toy": ep})
    assert "toy" in aotc.byoc.available()
    model = _relu_model()
    onnx.save(model, tmp_path / "m.onnx")
    assert cli_main(["verify", str(tmp_path / "m.onnx"), "--byoc", "toy"]) == 0
    assert "verify OK" in capsys.readouterr().out
    rep = aotc.inspect(model, byoc=("toy",))
    assert [r["backend"] for r in rep["partition"]] == ["toy", "native"]
    sys.modules.pop("toy_backend", None)


# ----------------------------------------------------------------------------- errors
class Broken(AddOne):
    name = "broken"

    def __init__(self, where: str) -> None:
        super().__init__()
        self.where = where

    def patterns(self):
        def check(sub):
            if self.where == "check":
                raise KeyError("oops")
            return None

        return [Pattern("sig", "Sigmoid", check=check)]

    def codegen(self, sub, symbol):
        if self.where == "codegen":
            raise ValueError("bad value")
        if self.where == "symbol":
            return Emitted("static int other(void)\n{\n    return 0;\n}\n")
        if self.where == "type":
            return "int f(void);"
        return super().codegen(sub, symbol)


@pytest.mark.parametrize("where,msg", [
    ("check", "BYOC backend 'broken': the check of pattern 'sig' raised KeyError"),
    ("codegen", "BYOC backend 'broken': codegen raised ValueError: bad value"),
    ("symbol", "codegen source does not define the function k0_broken_sigmoid"),
    ("type", "codegen returned str, not aotc.byoc.Emitted"),
])
def test_backend_mistakes_are_one_line_errors(where, msg):
    with pytest.raises(AotcError) as e:
        aotc.inspect(_relu_model(), byoc=(Broken(where),))
    assert msg in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("spec,msg", [
    ("nope", "unknown BYOC backend 'nope'; available: cmsis-nn"),
    ("missing.py", "--byoc 'missing.py': no such file"),
])
def test_bad_byoc_names(spec, msg, tmp_path, capsys):
    model = tmp_path / "m.onnx"
    onnx.save(_relu_model(), model)
    assert cli_main(["compile", str(model), "-o", str(tmp_path / "o"), "--byoc", spec]) != 0
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1 and "Traceback" not in err


def test_backend_file_without_backend(tmp_path, capsys):
    f = tmp_path / "empty_backend.py"
    f.write_text("X = 1\n")
    model = tmp_path / "m.onnx"
    onnx.save(_relu_model(), model)
    assert cli_main(["inspect", str(model), "--byoc", str(f)]) != 0
    assert "defines neither BACKEND nor backend()" in capsys.readouterr().err


def test_bad_backend_objects():
    class NoName(AddOne):
        name = "Bad Name"

    with pytest.raises(AotcError, match="name must be a lower-case word"):
        aotc.inspect(_relu_model(), byoc=(NoName(),))
    with pytest.raises(AotcError, match="layout must be one of NCHW, NHWC"):
        aotc.inspect(_relu_model(), byoc=(AddOne(layout="NCWH"),))
    with pytest.raises(AotcError, match="enabled twice"):
        aotc.inspect(_relu_model(), byoc=(AddOne(), AddOne()))


def test_cmsis_nn_not_found(monkeypatch, tmp_path):
    monkeypatch.delenv("CMSIS_NN_PATH", raising=False)
    with pytest.raises(AotcError, match="CMSIS-NN not found: pass --cmsis-nn-path"):
        aotc.inspect(_relu_model(), byoc=("cmsis-nn",))

