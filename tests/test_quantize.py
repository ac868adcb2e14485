"""``aotc quantize``: a float model quantised with onnxruntime (QDQ, int8) from .npz calibration
data compiles into integer kernels that match onnxruntime on the quantised model within 1 LSB;
bad calibration files are one-line user errors (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import aotc
from aotc.cli import main
from aotc.errors import AotcError
from aotc.quantize import quantize

REPO = Path(__file__).resolve().parents[1]
# Ops allowed in a compiled quantised graph: integer kernels, integer views, and the float
# boundary (Q at the input, DQ at the output).
INTEGER_OK = {"QuantizeLinear", "DequantizeLinear", "Reshape", "Flatten", "Transpose", "QLut"}


def float_model(tmp_path: Path, seed: int = 0) -> Path:
    """x[1,3,8,8] -> Conv(3x3, pad 1) + bias -> Relu -> Flatten -> MatMul -> Add -> y[1,10]."""
    rng = np.random.default_rng(seed)
    inits = {
        "W": (rng.normal(size=(6, 3, 3, 3)) * 0.3).astype(np.float32),
        "B": (rng.normal(size=(6,)) * 0.1).astype(np.float32),
        "M": (rng.normal(size=(6 * 8 * 8, 10)) * 0.05).astype(np.float32),
        "C": (rng.normal(size=(10,)) * 0.1).astype(np.float32),
    }
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["f"], name="flat"),
             helper.make_node("MatMul", ["f", "M"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "C"], ["y"], name="bias")]
    g = helper.make_graph(
        nodes, "qtest", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(m)
    path = tmp_path / "float.onnx"
    onnx.save(m, str(path))
    return path


def calibration(tmp_path: Path, n: int = 32, key: str = "x", shape: tuple[int, ...] = (1, 3, 8, 8),
                seed: int = 1) -> Path:
    path = tmp_path / f"cal_{key}.npz"
    data = np.random.default_rng(seed).normal(size=(n, *shape)).astype(np.float32)
    np.savez(path, **{key: data})
    return path


def ort_quantized(model: Path, x: np.ndarray) -> np.ndarray:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def output_scale(model: onnx.ModelProto) -> float:
    """Scale of the DequantizeLinear that produces the graph output (1 LSB in float)."""
    out = model.graph.output[0].name
    dq = next(n for n in model.graph.node if n.op_type == "DequantizeLinear" and out in n.output)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return float(inits[dq.input[1]])


def check_integer_and_exact(qpath: Path, tmp_path: Path, requant: str = "onnx") -> None:
    bundle = aotc.compile(qpath, tmp_path / f"bundle_{requant}", name="q", requant=requant)
    ops = [n.op for n in bundle.compilation.graph.nodes]
    assert "QLinearConv" in ops and "QLinearMatMul" in ops, ops
    assert not [o for o in ops if o not in INTEGER_OK and not o.startswith("QLinear")], ops
    assert not {"Conv", "MatMul", "Gemm"} & set(ops), ops
    runner = bundle.load()
    lsb = output_scale(onnx.load(str(qpath)))
    rng = np.random.default_rng(7)
    for _ in range(8):
        x = rng.normal(size=(1, 3, 8, 8)).astype(np.float32)
        got = runner.run({"x": x})["y"]
        want = ort_quantized(qpath, x)
        assert np.max(np.abs(got - want)) <= lsb * 1.001, (np.abs(got - want).max() / lsb)


def test_cli_quantize_compiles_to_integer_kernels(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "q.onnx"
    rc = main(["quantize", str(float_model(tmp_path)), "--calibration",
               str(calibration(tmp_path)), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "float ops none" in err and "32 calibration samples" in err, err
    q = onnx.load(str(out))
    ops = {n.op_type for n in q.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    # Per-channel weights by default: the Conv weight DQ has one scale per output channel.
    inits = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}
    w_dq = next(n for n in q.graph.node if n.op_type == "DequantizeLinear"
                and inits.get(n.input[0]) is not None and inits[n.input[0]].ndim == 4)
    assert inits[w_dq.input[0]].dtype == np.int8
    assert inits[w_dq.input[1]].shape == (6,)
    check_integer_and_exact(out, tmp_path, "onnx")


def test_generated_conv_is_integer(tmp_path: Path) -> None:
    qpath = tmp_path / "q.onnx"
    quantize(float_model(tmp_path), calibration(tmp_path), qpath)
    bundle = aotc.compile(qpath, tmp_path / "b", name="q", requant="tflite")
    conv = [k for k in bundle.kernels if "conv" in k.lower()]
    assert conv, bundle.kernels
    src = (tmp_path / "b" / "q.c").read_text()
    for k in conv:  # the kernel body: from its definition to the next top-level brace
        start = src.index(f"{k}(")
        body = src[start:src.index("\n}\n", start)]
        assert "float" not in body, k


def test_per_tensor_symmetric(tmp_path: Path) -> None:
    qpath = tmp_path / "q.onnx"
    res = quantize(float_model(tmp_path), calibration(tmp_path), qpath, per_channel=False,
                   symmetric_activations=True)
    assert res.float_ops == [] and "QLinearConv" in res.integer_ops
    q = onnx.load(str(qpath))
    inits = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}
    for n in q.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in inits:
            assert inits[n.input[1]].size == 1  # per-tensor weights and biases
        if n.op_type == "QuantizeLinear":
            assert int(inits[n.input[2]]) == 0  # symmetric activations
    check_integer_and_exact(qpath, tmp_path, "onnx")


def test_single_array_any_key_and_stacked_batch(tmp_path: Path) -> None:
    # One array, one input: the key does not matter; (N, 3, 8, 8) for a batch-1 input works.
    cal = calibration(tmp_path, n=10, key="images", shape=(3, 8, 8))
    res = quantize(float_model(tmp_path), cal, tmp_path / "q.onnx")
    assert res.samples == 10 and res.float_ops == []


# ------------------------------------------------------------------------------ user errors
def assert_one_line(rc: int, err: str, *needles: str) -> str:
    assert "Traceback" not in err
    assert rc == 2, (rc, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("aotc: error: "), lines[0]
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"
    return lines[0]


def test_bad_keys_subprocess(tmp_path: Path) -> None:
    model = float_model(tmp_path)
    cal = tmp_path / "bad.npz"
    np.savez(cal, a=np.zeros((2, 1, 3, 8, 8), np.float32), b=np.zeros((2, 4), np.float32))
    env = {k: v for k, v in os.environ.items() if k != "AOTC_DEBUG"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-m", "aotc", "quantize", str(model), "--calibration",
                          str(cal), "-o", str(tmp_path / "q.onnx")], capture_output=True,
                         text=True, env=env, cwd=REPO, timeout=300)
    assert_one_line(res.returncode, res.stderr + res.stdout, "bad.npz", "missing ['x']",
                    "unexpected ['a', 'b']")
    assert not (tmp_path / "q.onnx").exists()


def _cli_error(capsys: pytest.CaptureFixture[str], *args: str | Path) -> str:
    rc = main(["quantize", *map(str, args)])
    cap = capsys.readouterr()
    return assert_one_line(rc, cap.err + cap.out)


@pytest.mark.parametrize("case,needle", [
    ("missing_cal", "no such file"),
    ("missing_model", "no such file"),
    ("wrong_shape", "expected (samples, 1, 3, 8, 8)"),
    ("no_samples", "no samples"),
    ("strings", "must be numeric"),
    ("nan", "NaN"),
    ("not_npz", "cannot read calibration data"),
    ("already_quantised", "already quantised"),
    ("no_output_dir", "does not exist"),
])
def test_user_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str,
                     needle: str) -> None:
    model = float_model(tmp_path)
    cal = calibration(tmp_path)
    out: Path = tmp_path / "q.onnx"
    if case == "missing_cal":
        cal = tmp_path / "nope.npz"
    elif case == "missing_model":
        model = tmp_path / "nope.onnx"
    elif case == "wrong_shape":
        cal = calibration(tmp_path, shape=(1, 3, 8, 7))
    elif case == "no_samples":
        cal = calibration(tmp_path, n=0)
    elif case == "strings":
        np.savez(cal, x=np.array(["a", "b"]))
    elif case == "nan":
        np.savez(cal, x=np.full((2, 1, 3, 8, 8), np.nan, np.float32))
    elif case == "not_npz":
        cal = tmp_path / "text.npz"
        cal.write_text("not numpy")
    elif case == "already_quantised":
        quantize(model, cal, tmp_path / "q0.onnx", check=False)
        model = tmp_path / "q0.onnx"
    elif case == "no_output_dir":
        out = tmp_path / "missing" / "q.onnx"
    line = _cli_error(capsys, model, "--calibration", cal, "-o", out)
    assert needle in line, line


def test_missing_calibration_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["quantize", str(float_model(tmp_path)), "-o", str(tmp_path / "q.onnx")])
    assert e.value.code == 2
    assert_one_line(2, capsys.readouterr().err, "--calibration")


def test_two_inputs_keys_and_counts(tmp_path: Path) -> None:
    g = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])], "two",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("a", "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / "two.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10),
              str(path))
    cal = tmp_path / "two.npz"
    np.savez(cal, a=np.zeros((3, 1, 4), np.float32))  # one array, two inputs: keys must match
    with pytest.raises(AotcError, match=r"missing \['b'\]"):
        quantize(path, cal, tmp_path / "q.onnx")
    np.savez(cal, a=np.zeros((3, 1, 4), np.float32), b=np.zeros((2, 1, 4), np.float32))
    with pytest.raises(AotcError, match="different sample counts"):
        quantize(path, cal, tmp_path / "q.onnx")
    rng = np.random.default_rng(0)
    np.savez(cal, a=rng.normal(size=(8, 1, 4)).astype(np.float32),
             b=rng.normal(size=(8, 1, 4)).astype(np.float32))
    res = quantize(path, cal, tmp_path / "q.onnx")
    assert res.integer_ops == ["QLinearAdd"] and res.float_ops == []
