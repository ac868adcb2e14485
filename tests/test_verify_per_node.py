"""``aotc verify --per-node``: one row per kernel output, in schedule order, against onnxruntime
(graph optimisations off) on the same ONNX tensor; the first row beyond the tolerance is where
an error starts. Checked on the MLPerf Tiny KWS models (int8 in both requant modes, float), on
a model with one edited weight (the reference is the original), on a QEMU board against the
host, with CMSIS-NN's NHWC kernels, and through the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from opcheck import make_model

import aotc
from aotc.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import make_example  # noqa: E402

KWS_INT8 = "kws_ref_model_int8_qdq"
CMSIS_NN = ROOT.parent / "shared" / "third_party" / "cmsis-nn"


def _kws_inputs(mlperf_dir: Path, stem: str, n: int = 2) -> list[dict[str, np.ndarray]]:
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    return [{"input_1": x} for x in vec["input"][:n]]


def _per_node(model, inputs, atol=1e-4, **kw):  # type: ignore[no-untyped-def]
    """The rows, also when the final outputs fail (then they ride on the error)."""
    try:
        return aotc.verify(model, inputs=inputs, atol=atol, per_node=True, **kw)["per_node"]
    except aotc.AotcError as e:
        assert e.report is not None, e
        return e.report["per_node"]


def _edited(model: onnx.ModelProto, weight: str, index: tuple[int, ...], delta: float
            ) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for t in out.graph.initializer:
        if t.name == weight:
            a = numpy_helper.to_array(t).copy()
            a[index] = np.clip(a[index].astype(np.float64) + delta, *_range(a.dtype))
            t.CopyFrom(numpy_helper.from_array(a.astype(a.dtype), weight))
            return out
    raise KeyError(weight)


def _range(dt: np.dtype) -> tuple[float, float]:
    if dt.kind in "iu":
        return float(np.iinfo(dt).min), float(np.iinfo(dt).max)
    return -np.inf, np.inf


@pytest.mark.parametrize("requant", ["tflite", "onnx"])
def test_int8_rows_one_per_kernel_in_lsb(requant, mlperf_dir):
    model = mlperf_dir / f"{KWS_INT8}.onnx"
    rows = _per_node(model, _kws_inputs(mlperf_dir, KWS_INT8), atol=0, requant=requant)
    kernels = aotc.inspect(model, requant=requant)["kernels"]
    assert [r["kernel"] for r in rows] == kernels
    assert [r["step"] for r in rows] == list(range(len(kernels)))
    for r in rows:
        assert r["tensor"] is not None and r["dtype"] == "int8", r
        assert isinstance(r["lsb"], int) and "max_rel_error" not in r
        assert (r["differ"] > 0) == (r["lsb"] > 0) and r["differ"] <= r["elements"]
        # The error in real units is the LSB distance times the QuantizeLinear's scale.
        assert r["scale"] > 0 and r["max_abs_error"] == pytest.approx(r["lsb"] * r["scale"])
        assert r["within_tolerance"] == (r["lsb"] == 0)
    assert rows[-1]["tensor"] == "Identity"  # the graph output is the last kernel's
    if requant == "onnx":
        # Float requantisation, as the reference computes it: within 1 LSB everywhere.
        assert max(r["lsb"] for r in rows) <= 1
    first = [r for r in rows if r["first_divergence"]]
    assert len(first) == (1 if any(r["lsb"] for r in rows) else 0)
    if first:
        k = rows.index(first[0])
        assert all(r["lsb"] == 0 for r in rows[:k]) and rows[k]["lsb"] > 0


def test_int8_tflite_requant_drifts_more_than_onnx(mlperf_dir):
    """TFLite's fixed-point multipliers round differently from onnxruntime's float scale:
    the tflite compile differs from the reference in more elements, and by at least as many
    LSB, than the onnx-mode compile of the same model."""
    model = mlperf_dir / f"{KWS_INT8}.onnx"
    inputs = _kws_inputs(mlperf_dir, KWS_INT8)
    tfl = _per_node(model, inputs, atol=0, requant="tflite")
    ref = _per_node(model, inputs, atol=0, requant="onnx")
    assert [r["tensor"] for r in tfl] == [r["tensor"] for r in ref]
    assert sum(r["differ"] for r in tfl) > sum(r["differ"] for r in ref)
    assert max(r["lsb"] for r in tfl) >= max(r["lsb"] for r in ref)


def test_float_rows_within_1e_5(mlperf_dir):
    stem = "kws_ref_model_float"
    rows = aotc.verify(mlperf_dir / f"{stem}.onnx", inputs=_kws_inputs(mlperf_dir, stem),
                       atol=1e-5, rtol=0, per_node=True)["per_node"]
    assert [r["kernel"] for r in rows] == aotc.inspect(mlperf_dir / f"{stem}.onnx")["kernels"]
    for r in rows:
        assert r["dtype"] == "float32" and "lsb" not in r and "differ" not in r
        assert r["max_abs_error"] <= 1e-5 and r["within_tolerance"], r
        assert r["max_rel_error"] >= 0
    assert not any(r["first_divergence"] for r in rows)


def test_edited_weight_divergence_starts_at_its_kernel(tmp_path):
    """The depthwise weight of the example net is edited; the reference is the original: the
    rows before the kernel that reads it are within tolerance, that row is the first beyond."""
    original = make_example.build()
    edited = _edited(original, "dw_w", (3, 0, 1, 1), 0.5)
    with pytest.raises(aotc.AotcError) as info:
        aotc.verify(edited, tmp_path / "b", per_node=True, reference=original)
    assert info.value.report is not None
    rows = info.value.report["per_node"]
    bundle = aotc.compile(edited, tmp_path / "c", name="m")
    uses = [ls.kernel.name for ls in bundle.compilation.lowered
            if "dw_w" in ls.step.node.inputs]
    assert len(uses) == 1
    k = [r["kernel"] for r in rows].index(uses[0])
    assert k > 0 and all(r["within_tolerance"] for r in rows[:k])
    assert rows[k]["first_divergence"] and not rows[k]["within_tolerance"]


def test_edited_int8_weight_divergence_starts_at_its_kernel(mlperf_dir, tmp_path):
    """The same on the int8 model (onnx requant: within 1 LSB of the reference until the
    edit): one int8 weight of the fourth convolution moved by 100."""
    original = onnx.load(mlperf_dir / f"{KWS_INT8}.onnx")
    bundle = aotc.compile(original, tmp_path / "b", name="m", requant="onnx")
    convs = [ls for ls in bundle.compilation.lowered if ls.step.node.op == "QLinearConv"]
    target = convs[3]
    weight = target.step.node.inputs[3]  # QLinearConv's w: the int8 initializer
    shape = bundle.compilation.graph.type(weight).shape
    edited = _edited(original, weight, (5,) + (0,) * (len(shape) - 1), 100)
    rows = _per_node(edited, _kws_inputs(mlperf_dir, KWS_INT8), atol=1, requant="onnx",
                     reference=original)
    k = [r["kernel"] for r in rows].index(target.kernel.name)
    assert all(r["within_tolerance"] for r in rows[:k])
    assert rows[k]["first_divergence"] and rows[k]["lsb"] > 1


def test_board_rows_equal_host(mlperf_dir):
    """On cortex-m4f in QEMU the generated integer C gives the host's rows exactly."""
    model = mlperf_dir / f"{KWS_INT8}.onnx"
    inputs = _kws_inputs(mlperf_dir, KWS_INT8, 1)
    host = _per_node(model, inputs, atol=0)
    board = _per_node(model, inputs, atol=0, board="cortex-m4f")
    assert board == host


def test_cmsis_nn_nhwc_kernels_compared_as_the_models_nchw_tensors(mlperf_dir):
    """With --byoc cmsis-nn the convolutions write NHWC twins (X__nhwc): the rows compare
    them as the model's NCHW X, with the numbers of the native compile (CMSIS-NN is bit-exact
    with aotc's TFLite-mode kernels)."""
    if not (CMSIS_NN / "Include" / "arm_nnfunctions.h").is_file():
        pytest.fail(f"pinned CMSIS-NN not found at {CMSIS_NN} (../shared/third_party)")
    model = mlperf_dir / f"{KWS_INT8}.onnx"
    inputs = _kws_inputs(mlperf_dir, KWS_INT8, 1)
    native = _per_node(model, inputs, atol=0)
    byoc = _per_node(model, inputs, atol=0, byoc=("cmsis-nn",), cmsis_nn_path=str(CMSIS_NN))
    assert all("cmsis_nn" in r["kernel"] for r in byoc)
    keys = ("tensor", "dtype", "shape", "lsb", "differ", "max_abs_error")
    assert [{k: r[k] for k in keys} for r in byoc] == [{k: r[k] for k in keys} for r in native]


def test_output_view_and_second_use_keep_the_kernels(tmp_path):
    """A kernel output that is also read through a Reshape graph output (the probe copies it)
    and a Split with two outputs: every tensor gets its row, and the kernels are unchanged."""
    x = np.zeros((1, 2, 4, 4), np.float32)
    w = np.random.default_rng(0).standard_normal((4, 2, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["flat"]),
             helper.make_node("Split", ["r"], ["s0", "s1"], axis=1, num_outputs=2),
             helper.make_node("Sigmoid", ["s0"], ["y0"]),
             helper.make_node("Tanh", ["s1"], ["y1"])]
    m = make_model(nodes, {"x": x}, {"flat": (np.float32, [1, 64]), "y0": (np.float32, None),
                                     "y1": (np.float32, None)},
                   {"w": w, "shape": np.array([1, 64], np.int64)}, opset=18)
    rows = aotc.verify(m, tmp_path / "b", atol=1e-5, per_node=True)["per_node"]
    assert [r["tensor"] for r in rows] == ["r", "s0", "s1", "y0", "y1"]
    assert all(r["within_tolerance"] for r in rows)


def test_shape_op_moved_above_its_dequantize_gets_a_note(tmp_path):
    """DQ -> Transpose -> MatMul -> Q: the QDQ pass transposes the int8 tensor (a kernel whose
    output the model has only in float); its row has a note and no numbers, the others
    compare in LSB. (Before a Conv the Transpose would be a permuted view, no kernel.)"""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("Transpose", ["xd"], ["xt"], perm=[0, 1, 3, 2]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
             helper.make_node("MatMul", ["xt", "wd"], ["c"]),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["y"])]
    m = make_model(nodes, {"x": np.zeros((1, 3, 6, 5), np.float32)}, {"y": (np.int8, None)},
                   {"s": np.float32(0.05), "z": np.int8(3), "ws": np.float32(0.01),
                    "wz": np.int8(0), "ys": np.float32(0.1), "yz": np.int8(-2),
                    "w": rng.integers(-50, 50, (6, 4)).astype(np.int8)})
    rows = aotc.verify(m, tmp_path / "b", atol=1, per_node=True)["per_node"]
    assert [r["tensor"] for r in rows] == ["xq", None, "y"]
    assert "DequantizeLinear" in rows[1]["note"] and "lsb" not in rows[1]
    assert all(r["lsb"] <= 1 for r in (rows[0], rows[2]))


def _two_layer(tmp_path: Path) -> Path:
    x = np.zeros((1, 3), np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [1, 3])},
                   {"w": np.eye(3, dtype=np.float32)})
    path = tmp_path / "two.onnx"
    onnx.save(m, path)
    return path


def test_cli_prints_the_table_and_exits_0_within_tolerance(tmp_path, capsys):
    model = tmp_path / "kws_tiny.onnx"
    onnx.save(make_example.build(), model)
    assert cli_main(["verify", str(model), "--per-node", "--atol", "1e-4"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    head = next(k for k, line in enumerate(lines) if line.lstrip().startswith("step"))
    kernels = aotc.inspect(model)["kernels"]
    table = lines[head + 1: head + 1 + len(kernels)]
    assert [line.split()[1] for line in table] == kernels
    assert ">>" not in out and "every compared tensor is within the tolerance" in out
    assert "verify OK" in lines[-1]


def test_cli_edited_model_marks_the_row_and_exits_2(tmp_path):
    original = make_example.build()
    onnx.save(original, tmp_path / "orig.onnx")
    edited = _edited(original, "pw_w", (2, 5, 0, 0), 5.0)
    onnx.save(edited, tmp_path / "edited.onnx")
    lowered = aotc.compile(edited, tmp_path / "b", name="m").compilation.lowered
    kernel = next(ls.kernel.name for ls in lowered if "pw_w" in ls.step.node.inputs)
    res = subprocess.run([sys.executable, "-m", "aotc", "verify", str(tmp_path / "edited.onnx"),
                          "--per-node", "--reference", str(tmp_path / "orig.onnx")],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 2, res.stderr
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("aotc: error: verification failed"), res.stderr
    marked = [line for line in res.stdout.splitlines() if line.startswith(">>")]
    assert len(marked) == 1 and marked[0].split()[2] == kernel, res.stdout
    assert f"first beyond the tolerance: step {marked[0].split()[1]}, kernel {kernel}" \
        in res.stdout


def test_cli_one_node_model_prints_one_row(tmp_path, capsys):
    node = helper.make_node("Relu", ["x"], ["y"])
    m = make_model([node], {"x": np.zeros((2, 3), np.float32)}, {"y": (np.float32, [2, 3])})
    onnx.save(m, tmp_path / "relu.onnx")
    assert cli_main(["verify", str(tmp_path / "relu.onnx"), "--per-node"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(k for k, line in enumerate(lines) if line.lstrip().startswith("step"))
    assert lines[head + 1].split()[:4] == ["0", "k0_relu", "float32", "2x3"]
    assert lines[head + 2] == "every compared tensor is within the tolerance"


def test_cli_reference_with_other_tensor_names_notes_the_rows(tmp_path, capsys):
    """A reference model that lacks a tensor: its row says so, with no numbers."""
    path = _two_layer(tmp_path)
    ref = onnx.load(path)
    ref.graph.node[0].output[0] = "hidden"
    ref.graph.node[1].input[0] = "hidden"
    onnx.save(ref, tmp_path / "ref.onnx")
    assert cli_main(["verify", str(path), "--per-node", "--reference",
                     str(tmp_path / "ref.onnx"), "-p", "qdq,fold,views,dce"]) == 0
    out = capsys.readouterr().out
    assert "not computed by the reference model" in out


def test_cli_reference_with_another_shape_is_one_line_error(tmp_path):
    path = _two_layer(tmp_path)
    ref = onnx.load(path)
    ref.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.ones((3, 4), np.float32), "w"))
    ref.graph.output[0].type.tensor_type.ClearField("shape")
    onnx.save(ref, tmp_path / "ref.onnx")
    res = subprocess.run([sys.executable, "-m", "aotc", "verify", str(path), "--per-node",
                          "--reference", str(tmp_path / "ref.onnx"), "-p", "qdq,fold,views,dce"],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 2
    assert res.stderr.splitlines() == ["aotc: error: tensor 'h' has shape [1, 4] in the "
                                       "reference, [1, 3] in the model"], res.stderr
