"""RNN, GRU and LSTM with int8 weights (aotc/ops/sequence/qrecurrent.py, the qrecurrent pass)
against onnxruntime, on models quantised by onnxruntime.quantization itself:

- quantize_static in QDQ format (X, initial states, W, R, B and the outputs quantised; int8 or
  uint8 activations): the graph's 8-bit outputs (the QuantizeLinear after the op) within
  1 LSB of onnxruntime, which computes the op on the dequantised floats;
- W and R as DequantizeLinear of int8 constants with float X and outputs (weight-only, per
  tensor, per direction or per gate row): float outputs within atol 1e-4, rtol 1e-4 (aotc
  quantises x and h to int16 per step, an error of 1.5e-5 of their largest magnitude; the
  largest difference measured here is 1.9e-5); the float op where the pattern does not
  match, within atol 1e-5, rtol 1e-4;
- quantize_dynamic's DynamicQuantizeLSTM (com.microsoft): aotc keeps X and h float where
  onnxruntime quantises them to uint8 at run time, so the outputs agree within atol 0.03
  (the largest difference measured over these cases is 0.0043).

Each test checks which kernel ran (the int8-weight one, or the float op where the pattern does
not match); the bundles run on the QEMU boards of AOTC_TEST_BOARDS too, against the host
build. test_dsp_path_cortex_m4f compiles --target cortex-m4f (x.W and h.R through the DSP dual
MAC) and runs that bundle on the host and on the cortex-m4f board.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)
from opcheck import compile_and_run, ort_run, run_on_boards

import aotc
from aotc.errors import AotcError

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def float_model(op: str, seq: int, batch: int, inp: int, hid: int, direction: str,
                initial: bool, seed: int = 0, attrs: dict | None = None) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    nd = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    inits = [numpy_helper.from_array((rng.standard_normal((nd, g * hid, inp)) * 0.4)
                                     .astype(np.float32), "W"),
             numpy_helper.from_array((rng.standard_normal((nd, g * hid, hid)) * 0.4)
                                     .astype(np.float32), "R"),
             numpy_helper.from_array((rng.standard_normal((nd, 2 * g * hid)) * 0.2)
                                     .astype(np.float32), "B")]
    names = ["X", "W", "R", "B", ""]
    ins = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [seq, batch, inp])]
    if initial:
        names.append("h0")
        ins.append(helper.make_tensor_value_info("h0", TensorProto.FLOAT, [nd, batch, hid]))
        if op == "LSTM":
            names.append("c0")
            ins.append(helper.make_tensor_value_info("c0", TensorProto.FLOAT,
                                                     [nd, batch, hid]))
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outs, name=f"{op.lower()}0", hidden_size=hid,
                            direction=direction, **(attrs or {}))
    graph = helper.make_graph([node], "g", ins, [
        helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def feeds_of(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i.name: rng.uniform(-1, 1, [d.dim_value for d in i.type.tensor_type.shape.dim])
            .astype(np.float32) for i in model.graph.input}


class _Calib(CalibrationDataReader):
    def __init__(self, model: onnx.ModelProto) -> None:
        self.it = iter([feeds_of(model, 100 + k) for k in range(8)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.it, None)


def qdq_model(model: onnx.ModelProto, act: QuantType, per_channel: bool = False
              ) -> onnx.ModelProto:
    """quantize_static (QDQ) of the op, then the trailing DequantizeLinear of each output
    dropped: the graph outputs are the 8-bit tensors."""
    op = model.graph.node[0].op_type
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "f.onnx", Path(tmp) / "q.onnx"
        onnx.save(model, src)
        quantize_static(str(src), str(dst), _Calib(model), quant_format=QuantFormat.QDQ,
                        activation_type=act, weight_type=QuantType.QInt8,
                        op_types_to_quantize=[op], per_channel=per_channel)
        q = onnx.load(dst)
    outs = {o.name for o in q.graph.output}
    keep, new_outs = [], []
    for n in q.graph.node:
        if n.op_type == "DequantizeLinear" and n.output[0] in outs:
            new_outs.append(helper.make_tensor_value_info(n.input[0], act_type(act), None))
            continue
        keep.append(n)
    del q.graph.node[:]
    q.graph.node.extend(keep)
    del q.graph.output[:]
    q.graph.output.extend(new_outs)
    return q


def act_type(act: QuantType) -> int:
    return TensorProto.INT8 if act == QuantType.QInt8 else TensorProto.UINT8


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], tmp: Path, **opts
        ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], aotc.Bundle]:
    want = ort_run(model, feeds)
    got, bundle = compile_and_run(model, feeds, tmp / "b", **opts)
    run_on_boards(bundle, feeds, got, tmp / "fw")
    return got, want, bundle


def kernel_ops(bundle: aotc.Bundle) -> list[str]:
    return [ls.step.node.op for ls in bundle.compilation.lowered]


def assert_lsb(got: np.ndarray, want: np.ndarray, lsb: int = 1) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    d = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert d.max() <= lsb, f"max {d.max()} LSB ({int((d > 0).sum())} of {d.size} differ)"


# ------------------------------------------------------------------------ quantize_static QDQ
QDQ_CASES = [
    # op, seq, batch, input, hidden, direction, initial states
    ("LSTM", 5, 1, 6, 8, "forward", False),
    ("LSTM", 1, 2, 5, 3, "reverse", True),
    ("LSTM", 4, 2, 7, 5, "bidirectional", True),
    ("LSTM", 6, 1, 16, 12, "forward", True),
    ("GRU", 5, 1, 6, 8, "forward", True),
    ("GRU", 1, 1, 4, 4, "reverse", False),
    ("GRU", 3, 2, 5, 6, "bidirectional", False),
    ("RNN", 5, 2, 6, 8, "forward", False),
    ("RNN", 1, 1, 3, 5, "bidirectional", True),
    ("RNN", 4, 1, 9, 7, "reverse", True),
]


@pytest.mark.parametrize("case", QDQ_CASES, ids=lambda c: "-".join(map(str, c)))
def test_quantize_static_qdq_int8(case, tmp_path):
    op, seq, batch, inp, hid, direction, initial = case
    m = float_model(op, seq, batch, inp, hid, direction, initial)
    q = qdq_model(m, QuantType.QInt8)
    got, want, bundle = run(q, feeds_of(m, 1), tmp_path)
    assert f"Qdq{op}" in kernel_ops(bundle)
    for k in want:
        assert_lsb(got[k], want[k])


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_quantize_static_qdq_uint8_activations(op, tmp_path):
    m = float_model(op, 4, 1, 6, 5, "bidirectional", True, seed=3)
    q = qdq_model(m, QuantType.QUInt8)
    got, want, bundle = run(q, feeds_of(m, 2), tmp_path)
    assert f"Qdq{op}" in kernel_ops(bundle)
    for k in want:
        assert_lsb(got[k], want[k])


def test_gru_linear_before_reset_and_clip(tmp_path):
    m = float_model("GRU", 4, 1, 5, 6, "forward", True, seed=4,
                    attrs={"linear_before_reset": 1, "clip": 0.8})
    q = qdq_model(m, QuantType.QInt8)
    got, want, bundle = run(q, feeds_of(m, 3), tmp_path)
    assert "QdqGRU" in kernel_ops(bundle)
    for k in want:
        assert_lsb(got[k], want[k])


# ------------------------------------------------------------------------ weight-only QDQ
def weight_only(model: onnx.ModelProto, axis: int | None, zero_point: bool = True
                ) -> onnx.ModelProto:
    """W and R as DequantizeLinear of symmetric int8 constants (per tensor: axis None; else
    per slice along ``axis``), X and the outputs float."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    nodes = []
    for name in ("W", "R"):
        w = inits[name]
        red = tuple(k for k in range(3) if k != axis) if axis is not None else None
        amax = np.abs(w).max(axis=red) if red is not None else np.abs(w).max()
        scale = (np.asarray(amax) / 127).astype(np.float32)
        shape = [1, 1, 1]
        if axis is not None:
            shape[axis] = -1
        zp = np.zeros(scale.shape, np.int8) if zero_point else None
        if zero_point and axis is not None:
            zp = (np.arange(scale.size) % 3 - 1).astype(np.int8).reshape(scale.shape)
        q = np.clip(np.rint(w / scale.reshape(shape)) + (0 if zp is None else
                    zp.astype(np.float32).reshape(shape)), -128, 127).astype(np.int8)
        m.graph.initializer.append(numpy_helper.from_array(q, f"{name}_q"))
        m.graph.initializer.append(numpy_helper.from_array(scale, f"{name}_s"))
        ins = [f"{name}_q", f"{name}_s"]
        if zp is not None:
            m.graph.initializer.append(numpy_helper.from_array(zp, f"{name}_z"))
            ins.append(f"{name}_z")
        kw = {"axis": axis} if axis is not None else {}
        nodes.append(helper.make_node("DequantizeLinear", ins, [f"{name}_dq"], **kw))
    keep = [i for i in m.graph.initializer if i.name not in ("W", "R")]
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)
    op = m.graph.node[0]
    op.input[1], op.input[2] = "W_dq", "R_dq"
    rest = list(m.graph.node)
    del m.graph.node[:]
    m.graph.node.extend(nodes + rest)
    return m


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_weight_only(op, axis, tmp_path):
    m = weight_only(float_model(op, 3, 2, 5, 6, "bidirectional", True, seed=5), axis)
    got, want, bundle = run(m, feeds_of(m, 4), tmp_path)
    assert f"Qdq{op}" in kernel_ops(bundle)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], atol=1e-4, rtol=1e-4, err_msg=k)


def test_weight_only_flash_is_a_quarter(tmp_path):
    f = float_model("LSTM", 2, 1, 32, 32, "forward", False, seed=6)
    q = weight_only(f, 1, zero_point=False)
    _, fb = compile_and_run(f, feeds_of(f, 5), tmp_path / "f")
    _, qb = compile_and_run(q, feeds_of(q, 5), tmp_path / "q")
    w_float = 4 * (4 * 32 * 32 * 2)  # W and R as float32
    # int8 W and R, plus the per-row scales (two float tables) and the float bias, as before
    assert qb.weights_bytes <= fb.weights_bytes - w_float + w_float // 4 + 2 * 4 * 128
    assert "QdqLSTM" in kernel_ops(qb)


# ------------------------------------------------------------------------ float fallback
def test_only_w_quantised_stays_float(tmp_path):
    m = weight_only(float_model("LSTM", 3, 1, 5, 4, "forward", False, seed=7), None)
    op = m.graph.node[-1]
    inits = {i.name: i for i in m.graph.initializer}
    r = numpy_helper.to_array(inits["R_q"]).astype(np.float32) * \
        numpy_helper.to_array(inits["R_s"])
    m.graph.initializer.append(numpy_helper.from_array(r.astype(np.float32), "R_float"))
    op.input[2] = "R_float"
    got, want, bundle = run(m, feeds_of(m, 6), tmp_path)
    ops = kernel_ops(bundle)
    assert "LSTM" in ops and "QdqLSTM" not in ops
    for k in want:
        np.testing.assert_allclose(got[k], want[k], atol=1e-5, rtol=1e-4, err_msg=k)


def test_per_input_column_scales_stay_float(tmp_path):
    m = weight_only(float_model("GRU", 3, 1, 5, 5, "forward", False, seed=8), 2)
    got, want, bundle = run(m, feeds_of(m, 7), tmp_path)
    ops = kernel_ops(bundle)
    assert "GRU" in ops and "QdqGRU" not in ops
    for k in want:
        np.testing.assert_allclose(got[k], want[k], atol=1e-5, rtol=1e-4, err_msg=k)


# ------------------------------------------------------------------------ quantize_dynamic
def dynamic_model(model: onnx.ModelProto, per_channel: bool) -> onnx.ModelProto:
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "f.onnx", Path(tmp) / "q.onnx"
        onnx.save(model, src)
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8,
                         per_channel=per_channel)
        return onnx.load(dst)


@pytest.mark.parametrize("case", [(5, 1, 6, 8, "forward", False, False),
                                  (1, 2, 4, 5, "reverse", True, False),
                                  (4, 2, 7, 6, "bidirectional", True, True),
                                  (6, 1, 16, 16, "forward", True, True)],
                         ids=lambda c: "-".join(map(str, c)))
def test_quantize_dynamic_lstm(case, tmp_path):
    seq, batch, inp, hid, direction, initial, per_channel = case
    m = dynamic_model(float_model("LSTM", seq, batch, inp, hid, direction, initial, seed=9),
                      per_channel)
    assert m.graph.node[0].op_type == "DynamicQuantizeLSTM"
    got, want, bundle = run(m, feeds_of(m, 8), tmp_path)
    assert "DynamicQuantizeLSTM" in kernel_ops(bundle)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], atol=0.03, rtol=0, err_msg=k)


def test_dynamic_quantize_lstm_runtime_weights_refused(tmp_path):
    m = dynamic_model(float_model("LSTM", 2, 1, 3, 4, "forward", False, seed=10), False)
    w = [i for i in m.graph.initializer if i.name == m.graph.node[0].input[1]][0]
    m.graph.input.append(helper.make_tensor_value_info(w.name, TensorProto.INT8,
                                                       list(w.dims)))
    keep = [i for i in m.graph.initializer if i.name != w.name]
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)
    with pytest.raises(AotcError, match="constant int8 or uint8"):
        aotc.compile(m, tmp_path / "b")


# ------------------------------------------------------------------------ the DSP dual MAC
@pytest.mark.parametrize("op,quant", [("LSTM", "static"), ("GRU", "static"), ("RNN", "static"),
                                      ("LSTM", "dynamic"), ("GRU", "weights")])
def test_dsp_path_cortex_m4f(op, quant, tmp_path):
    """Compiled --target cortex-m4f (x.W and h.R through SMLAD): the host build (the C
    definitions of the intrinsics) and the cortex-m4f board (QEMU) against onnxruntime."""
    f = float_model(op, 4, 2, 9, 6, "bidirectional", True, seed=11)
    m = {"static": lambda: qdq_model(f, QuantType.QInt8),
         "dynamic": lambda: dynamic_model(f, True),
         "weights": lambda: weight_only(f, 1)}[quant]()
    feeds = feeds_of(f, 12)
    want = ort_run(m, feeds)
    got, bundle = compile_and_run(m, feeds, tmp_path / "b", target="cortex-m4f")
    src = "".join(p.read_text() for p in Path(bundle.directory).glob("*.c"))
    assert "__smlad(" in src
    assert any(o.startswith(("Qdq", "DynamicQuantize")) for o in kernel_ops(bundle))
    board = bundle.load("cortex-m4f").run(feeds)
    for k in want:
        if quant == "static":
            assert_lsb(got[k], want[k])
            assert_lsb(board[k], want[k])
        else:
            atol = 0.03 if quant == "dynamic" else 1e-4
            np.testing.assert_allclose(got[k], want[k], atol=atol, rtol=1e-4, err_msg=k)
            np.testing.assert_allclose(board[k], got[k], atol=1e-6, rtol=1e-5, err_msg=k)
