"""`aotc verify` on a .tflite model, through the CLI: the reference is TFLM for a quantised model
and LiteRT where TFLM refuses the model (uint8), named in the output; 8 default vectors that
span each input type's range (its minimum, maximum, zero, then random over the whole range);
a mismatch names the first differing element (output, flat index, multi-index) and its
distance in LSB.
"""

from __future__ import annotations

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as S
from test_tflite_uint8 import SPECS, to_uint8
from tflite_builder import float_and_int8

import aotc.verification.run as vrun
from aotc.cli import main as cli_main


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    ms = float_and_int8(*SPECS["kws_like"])
    paths = {"int8": d / "i8.tflite", "float": d / "f32.tflite", "uint8": d / "u8.tflite"}
    paths["int8"].write_bytes(ms["int8"][0])
    paths["float"].write_bytes(ms["float"][0])
    paths["uint8"].write_bytes(to_uint8(ms["int8"][0]))
    paths["int8_float_io"] = d / "i8f.tflite"
    paths["int8_float_io"].write_bytes(_float_io(ms["int8"][0]))
    return paths


def _float_io(data: bytes) -> bytes:
    """The int8 model with float32 inputs and outputs: a QUANTIZE before each input and a
    DEQUANTIZE after each output, as the TFLite converter writes a model quantised with float
    inference_input_type / inference_output_type."""
    m = S.ModelT.InitFromPackedBuf(data, 0)
    sg = m.subgraphs[0]
    codes = {}
    for name in ("QUANTIZE", "DEQUANTIZE"):
        oc = S.OperatorCodeT()
        oc.builtinCode = oc.deprecatedBuiltinCode = getattr(S.BuiltinOperator, name)
        oc.version = 1
        codes[name] = len(m.operatorCodes)
        m.operatorCodes.append(oc)

    def float_twin(k: int) -> int:
        t = S.TensorT()
        t.shape, t.type, t.name = sg.tensors[k].shape, S.TensorType.FLOAT32, b"f_" + \
            sg.tensors[k].name
        t.buffer = 0
        sg.tensors.append(t)
        return len(sg.tensors) - 1

    def op(code: str, i: int, o: int) -> S.OperatorT:
        x = S.OperatorT()
        x.opcodeIndex, x.inputs, x.outputs = codes[code], np.array([i], np.int32), \
            np.array([o], np.int32)
        return x

    ins = [float_twin(k) for k in sg.inputs]
    outs = [float_twin(k) for k in sg.outputs]
    sg.operators = [op("QUANTIZE", f, k) for f, k in zip(ins, sg.inputs)] + sg.operators + \
        [op("DEQUANTIZE", k, f) for k, f in zip(sg.outputs, outs)]
    sg.inputs, sg.outputs = np.array(ins, np.int32), np.array(outs, np.int32)
    m.signatureDefs = None
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


@pytest.mark.parametrize("kind, ref", [("int8", "vs TFLM,"), ("float", "vs LiteRT,"),
                                       ("uint8", "vs LiteRT (TFLM refused the model"),
                                       ("int8_float_io", "vs TFLM,")])
def test_verify_names_its_reference(models, kind, ref, capsys):
    """A model that computes in integers is checked against TFLM, whose arithmetic aotc
    follows, also when its inputs and outputs are float (LiteRT's reference kernels round
    some 16x8 steps differently: XMOS's denoise_16x8 example, float in and out, differs
    between the two by up to 0.2 in its output)."""
    assert cli_main(["verify", str(models[kind]), "-q"]) == 0
    out = capsys.readouterr().out
    assert "verify OK on host: 8 vectors" in out and ref in out, out


def test_default_vectors_span_the_range():
    specs = [{"name": "a", "dtype": "int8", "shape": [3, 4]},
             {"name": "b", "dtype": "uint8", "shape": [50]},
             {"name": "c", "dtype": "float32", "shape": [2]}]
    vs = vrun.default_vectors(specs, None, 0, tflite=True)
    assert len(vs) == 8
    assert (vs[0]["a"] == -128).all() and (vs[1]["a"] == 127).all() and (vs[2]["a"] == 0).all()
    assert (vs[0]["b"] == 0).all() and (vs[1]["b"] == 255).all()
    rand = np.concatenate([v["b"] for v in vs[3:]])
    assert rand.min() < 20 and rand.max() > 235  # the whole range, not [-100, 100]
    assert all(v[k].dtype == np.dtype(s["dtype"]) for v in vs for k, s in zip("abc", specs))


def test_mismatch_names_the_first_differing_element(models, monkeypatch, capsys):
    """A reference that is off by 3 at one element of one output (a monkeypatched TFLM) makes
    verify fail naming that element."""
    real = vrun._tflm

    def off(data, xs, n):
        outs = real(data, xs, n)
        y = outs[1]  # conv_2d_0_0, [1, 10, 6, 8]
        y.reshape(-1)[77] = np.clip(int(y.reshape(-1)[77]) + 3, -128, 127) \
            if y.reshape(-1)[77] < 120 else y.reshape(-1)[77] - 3
        return outs

    monkeypatch.setattr(vrun, "_tflm", off)
    assert cli_main(["verify", str(models["int8"]), "-q"]) == 2
    err = capsys.readouterr().err
    assert "output 'conv_2d_0_0' (vector 1 of 8, reference TFLM)" in err, err
    assert "1 of 480 elements differ; the first is conv_2d_0_0[77] (index (0, 1, 3, 5))" in err
    assert "3 LSB" in err, err
