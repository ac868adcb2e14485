"""Bad inputs through the real CLI: exit status 2, exactly one ``aotc: error:`` line on stderr
naming the node/op/reason, never a traceback. Plus hostile names that must compile cleanly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AOTC_DEBUG"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "aotc", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=300)


def assert_user_error(res: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The error contract; returns the one message line."""
    assert "Traceback" not in res.stderr + res.stdout, res.stderr
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("aotc: error: "), lines[0]
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"
    return lines[0]


def compile_cli(model: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("compile", model, "-o", out, *extra)


def model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
          outputs: list[onnx.ValueInfoProto], inits: list[onnx.TensorProto] | None = None,
          opset: int = 17, extra_opsets: tuple[tuple[str, int], ...] = ()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", inputs, outputs, inits or [])
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    return helper.make_model(g, opset_imports=ops, ir_version=10)


def vi(name: str, shape: Any, dt: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dt, shape)


def relu_model(shape: Any = (2, 3)) -> onnx.ModelProto:
    return model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", list(shape))],
                 [vi("y", None)])


def save(m: onnx.ModelProto, path: Path) -> Path:
    onnx.save(m, str(path))
    return path


# ------------------------------------------------------------------------------ the file
def test_valid_model_compiles(tmp_path: Path) -> None:
    # The baseline every error case is a variation of: it must succeed.
    res = compile_cli(save(relu_model(), tmp_path / "m.onnx"), tmp_path / "out")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out" / "m.c").is_file()


def test_random_bytes(tmp_path: Path) -> None:
    p = tmp_path / "rand.onnx"
    p.write_bytes(np.random.default_rng(0).bytes(300))
    assert_user_error(compile_cli(p, tmp_path / "o"), "rand.onnx", "not a valid ONNX file")


def test_text_file(tmp_path: Path) -> None:
    p = tmp_path / "notes.onnx"
    p.write_text("this is a text file\nnot a model\n")
    assert_user_error(compile_cli(p, tmp_path / "o"), "notes.onnx", "ONNX")


def test_truncated_model(tmp_path: Path) -> None:
    w = numpy_helper.from_array(np.ones((64, 3), np.float32), "w")
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [vi("x", [2, 64])],
              [vi("y", None)], [w])
    data = m.SerializeToString()
    p = tmp_path / "trunc.onnx"
    p.write_bytes(data[: len(data) // 2])
    assert_user_error(compile_cli(p, tmp_path / "o"), "trunc.onnx", "truncated")


def test_missing_file(tmp_path: Path) -> None:
    assert_user_error(compile_cli(tmp_path / "nope.onnx", tmp_path / "o"), "no such file",
                      "nope.onnx")


def test_output_dir_is_a_file(tmp_path: Path) -> None:
    out = tmp_path / "taken"
    out.write_text("x")
    res = compile_cli(save(relu_model(), tmp_path / "m.onnx"), out)
    assert_user_error(res, "cannot write", "taken")


# ------------------------------------------------------------------------------ the graph
def test_all_unsupported_ops_in_one_message(tmp_path: Path) -> None:
    nodes = [helper.make_node("NonZero", ["x"], ["a"], name="nz"),
             helper.make_node("Unique", ["x"], ["b"], name="uq"),
             helper.make_node("Frobnicate", ["x"], ["y"], name="frob", domain="com.example")]
    m = model(nodes, [vi("x", [2, 3])], [vi("y", None)],
              extra_opsets=(("com.example", 1),))
    msg = assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"),
                            "unsupported")
    for needle in ("NonZero", "'nz'", "Unique", "'uq'", "com.example.Frobnicate", "'frob'"):
        assert needle in msg, msg


def test_unbound_symbolic_dim_then_bound(tmp_path: Path) -> None:
    p = save(relu_model(("batch", 3)), tmp_path / "m.onnx")
    assert_user_error(compile_cli(p, tmp_path / "o"), "'x'", "symbolic", "'batch'",
                      "--input-shape x=")
    res = compile_cli(p, tmp_path / "o2", "--input-shape", "x=5,3")
    assert res.returncode == 0, res.stderr
    meta = json.loads((tmp_path / "o2" / "bundle.json").read_text())
    assert meta["inputs"][0]["shape"] == [5, 3]


@pytest.mark.parametrize("arg, needles", [
    ("z=5,3", ("--input-shape", "z", "inputs: x")),
    ("x=5,3,1", ("--input-shape x", "rank 3", "2")),
    ("x=5,a", ("--input-shape", "NAME=D0,D1", "'x=5,a'")),
    ("x", ("--input-shape", "NAME=D0,D1", "'x'")),
    ("=5,3", ("--input-shape", "NAME=D0,D1")),
    ("x=-1,3", ("--input-shape", "'x=-1,3'")),
])
def test_bad_input_shape(tmp_path: Path, arg: str, needles: tuple[str, ...]) -> None:
    p = save(relu_model(("batch", 3)), tmp_path / "m.onnx")
    assert_user_error(compile_cli(p, tmp_path / "o", "--input-shape", arg), *needles)


def test_input_shape_contradicting_a_fixed_dim(tmp_path: Path) -> None:
    p = save(relu_model(("batch", 3)), tmp_path / "m.onnx")
    assert_user_error(compile_cli(p, tmp_path / "o", "--input-shape", "x=5,4"),
                      "--input-shape x", "dim 1", "4", "3")


def test_cycle(tmp_path: Path) -> None:
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="loop_a"),
             helper.make_node("Relu", ["a"], ["b"], name="loop_b"),
             helper.make_node("Relu", ["a"], ["y"], name="tail")]
    m = model(nodes, [vi("x", [2, 3])], [vi("y", None)])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "cycle",
                      "'loop_a'", "'loop_b'")


def test_input_produced_by_nothing(tmp_path: Path) -> None:
    m = model([helper.make_node("Add", ["x", "ghost"], ["y"], name="adder")],
              [vi("x", [2, 3])], [vi("y", None)])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'adder'",
                      "(Add)", "'ghost'", "produced by no node")


def test_output_produced_by_nothing(tmp_path: Path) -> None:
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2, 3])],
              [vi("y", None), vi("phantom", None)])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'phantom'")


def test_value_defined_twice(tmp_path: Path) -> None:
    m = model([helper.make_node("Relu", ["x"], ["a"], name="first"),
               helper.make_node("Sigmoid", ["x"], ["a"], name="second"),
               helper.make_node("Tanh", ["a"], ["y"], name="t")],
              [vi("x", [2, 3])], [vi("y", None)])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'second'",
                      "'a'", "defined twice")


def test_graph_input_listed_as_output(tmp_path: Path) -> None:
    """Valid ONNX (onnxruntime runs it): the output gets its own C parameter and a copy."""
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2, 3])],
              [vi("y", None), vi("x", [2, 3])])
    res = run_cli("verify", save(m, tmp_path / "m.onnx"), "-o", tmp_path / "o")
    assert res.returncode == 0, res.stderr
    header = (tmp_path / "o" / "m.h").read_text()
    assert "const float *x, float *y, float *x_1" in header


def test_op_version_older_than_supported(tmp_path: Path) -> None:
    # Old opsets load; an op version aotc does not implement (Reshape-1 took the shape as an
    # attribute; aotc has Reshape from version 5) is named in the error.
    m = model([helper.make_node("Reshape", ["x"], ["y"], name="r", shape=[3, 2])],
              [vi("x", [2, 3])], [vi("y", None)], opset=4)
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"),
                      "unsupported ops at opset 4", "Reshape")


@pytest.mark.parametrize("name", ["1abc", "int", "a-b", "aotc_x", "size_t"])
def test_bad_bundle_name(tmp_path: Path, name: str) -> None:
    res = compile_cli(save(relu_model(), tmp_path / "m.onnx"), tmp_path / "o", "--name", name)
    assert_user_error(res, "--name", repr(name), "C identifier")


def test_unknown_pass_and_cli_usage(tmp_path: Path) -> None:
    p = save(relu_model(), tmp_path / "m.onnx")
    assert_user_error(compile_cli(p, tmp_path / "o", "-p", "fold,nosuchpass"), "nosuchpass")
    assert_user_error(run_cli("compile", p), "-o/--output")
    assert_user_error(run_cli("frobnicate"), "invalid choice")
    assert_user_error(compile_cli(p, tmp_path / "o", "--dump-after", "nosuch"), "--dump-after",
                      "nosuch")


# ------------------------------------------------------------------------------ nodes
def test_unsupported_attribute_value(tmp_path: Path) -> None:
    w = numpy_helper.from_array(np.ones((3, 2, 3, 3), np.float32), "w")
    m = model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv1", auto_pad="FOO")],
              [vi("x", [1, 2, 5, 5])], [vi("y", None)], [w])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'conv1'",
                      "(Conv)", "auto_pad", "FOO")


def test_unknown_attribute(tmp_path: Path) -> None:
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r1", frobnicate=3)],
              [vi("x", [2, 3])], [vi("y", None)])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'r1'",
                      "(Relu)", "'frobnicate'")


def test_attribute_of_the_wrong_type(tmp_path: Path) -> None:
    m = model([helper.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha="steep")],
              [vi("x", [2, 3])], [vi("y", None)])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'lr'",
                      "(LeakyRelu)", "'alpha'", "FLOAT", "STRING")


def test_sqrt_on_int32(tmp_path: Path) -> None:
    m = model([helper.make_node("Sqrt", ["x"], ["y"], name="sq")],
              [vi("x", [2, 3], TensorProto.INT32)], [vi("y", None, TensorProto.INT32)])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'sq'",
                      "(Sqrt)", "int32", "float32")


def test_float64_input(tmp_path: Path) -> None:
    m = model([helper.make_node("Sqrt", ["x"], ["y"], name="sq")],
              [vi("x", [2, 3], TensorProto.DOUBLE)], [vi("y", None, TensorProto.DOUBLE)])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'x'",
                      "DOUBLE")


def test_float64_constant(tmp_path: Path) -> None:
    c = numpy_helper.from_array(np.ones((2, 3), np.float64), "c64")
    m = model([helper.make_node("Sqrt", ["c64"], ["s"], name="sq"),
               helper.make_node("Add", ["x", "s"], ["y"], name="ad")],
              [vi("x", [2, 3])], [vi("y", None)], [c])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'c64'",
                      "float64")


# ------------------------------------------------------------------------------ external data
def _external_model(folder: Path, location: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    b = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "bias")
    m = model([helper.make_node("Add", ["x", "bias"], ["y"], name="ad")], [vi("x", [2, 3])],
              [vi("y", None)], [b])
    p = folder / "m.onnx"
    onnx.save_model(m, str(p), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    if location != "weights.bin":
        m = onnx.load(str(p), load_external_data=False)
        for e in m.graph.initializer[0].external_data:
            if e.key == "location":
                e.value = location
        onnx.save(m, str(p))
    return p


def test_external_data_inside_folder_works(tmp_path: Path) -> None:
    p = _external_model(tmp_path / "model", "weights.bin")
    res = compile_cli(p, tmp_path / "o")
    assert res.returncode == 0, res.stderr
    weights = (tmp_path / "o" / "m_weights.c").read_text()
    assert "5.0f" in weights  # the bias really came from weights.bin


@pytest.mark.parametrize("where", ["parent", "absolute"])
def test_external_data_outside_folder_is_refused(tmp_path: Path, where: str) -> None:
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.arange(6, dtype=np.float32).tobytes())
    loc = "../secret.bin" if where == "parent" else str(secret)
    p = _external_model(tmp_path / "model", loc)
    assert_user_error(compile_cli(p, tmp_path / "o"), "'bias'", "outside the model's folder",
                      repr(loc))
    assert not (tmp_path / "o").exists()


def test_external_data_file_missing(tmp_path: Path) -> None:
    p = _external_model(tmp_path / "model", "weights.bin")
    (tmp_path / "model" / "weights.bin").unlink()
    assert_user_error(compile_cli(p, tmp_path / "o"), "'bias'", "not found")
