"""The validation step of the TFLite importer (aotc/frontend/tflite/validate.py): findings of
the .tflite fuzzer (scripts/fuzz.py --format tflite), each a model aotc used to compile to
outputs that differ from TFLM's (or from both references'). Each test edits a valid model the
way the fuzzer did, shows what the references make of it (TFLM ignores the edit, TFLM and
LiteRT disagree, or both refuse), and checks that aotc now refuses it with one line naming the
operator (index and builtin) or tensor and the reason.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as S
from ai_edge_litert.interpreter import Interpreter
from test_tflite_uint8 import SPECS
from tflite_builder import float_and_int8, interpret, interpret_tflm

from aotc.cli import main as cli_main

# The references run in a forked child (a malformed model may crash them): the fuzz oracle's.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from tflite_oracle import in_child, run_litert  # noqa: E402
from tflite_seeds import seed_bytes  # noqa: E402


def _model(name: str, kind: str) -> tuple[Any, list[np.ndarray]]:
    """A model of test_tflite_uint8's SPECS (kind float or int8) or, with kind "seed", a seed
    of the .tflite fuzzer (tests/fuzz/tflite_seeds.py) with random inputs."""
    if kind == "seed":
        data = seed_bytes(name)
        it = Interpreter(model_content=data)
        rng = np.random.default_rng(0)
        xs = []
        for d in it.get_input_details():
            dt = np.dtype(d["dtype"])
            lo, hi = (-3, 3) if dt.kind == "f" else (np.iinfo(dt).min, np.iinfo(dt).max)
            xs.append(rng.uniform(lo, hi, d["shape"]).astype(dt))
        return S.ModelT.InitFromPackedBuf(data, 0), xs
    spec, shapes = SPECS[name]
    data, xs = float_and_int8(spec, shapes)[kind]
    return S.ModelT.InitFromPackedBuf(data, 0), xs


def _pack(m: Any) -> bytes:
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _refused(data: bytes, tmp_path, capsys) -> str:
    path = tmp_path / "model.tflite"
    path.write_bytes(data)
    rc = cli_main(["compile", str(path), "-o", str(tmp_path / "b")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and len(err) == 1 and err[0].startswith("aotc: error: "), (rc, err)
    return err[0]


def _tflm(data: bytes, xs: list[np.ndarray]) -> np.ndarray | None:
    """TFLM's first output, None when it refuses (or crashes on) the model."""
    ok, out = in_child(lambda: interpret_tflm(data, xs)[0])
    return out if ok else None


def _litert(data: bytes, xs: list[np.ndarray]) -> np.ndarray | None:
    ok, out = in_child(lambda: interpret(data, xs)[0][0])
    return out if ok else None


def test_fused_tanh_on_conv_is_refused(tmp_path, capsys):
    """CONV_2D with fused activation TANH: TFLM and LiteRT ignore it (the output equals the
    model's with NONE); aotc used to apply tanh."""
    for kind in ("float", "int8"):
        m, xs = _model("CONV_2D", kind)
        m.subgraphs[0].operators[0].builtinOptions.fusedActivationFunction = \
            S.ActivationFunctionType.NONE
        plain = _pack(m)
        m.subgraphs[0].operators[0].builtinOptions.fusedActivationFunction = \
            S.ActivationFunctionType.TANH
        tanh = _pack(m)
        np.testing.assert_array_equal(interpret_tflm(tanh, xs)[0], interpret_tflm(plain, xs)[0])
        np.testing.assert_array_equal(interpret(tanh, xs)[0][0], interpret(plain, xs)[0][0])
        line = _refused(tanh, tmp_path, capsys)
        assert "operator 0 CONV_2D" in line and "TANH" in line, line


@pytest.mark.parametrize("how", ["tag", "table"])
def test_options_of_the_wrong_type_are_refused(how, tmp_path, capsys):
    """A Pool2DOptions union tag on CONV_2D's Conv2DOptions table (TFLM reads the table as
    Pool2DOptions; LiteRT's flatbuffer verifier refuses it: read as Pool2DOptions, an int32
    field is misaligned, which aotc's verifier names), or a table of another type."""
    m, xs = _model("CONV_2D", "int8")
    op = m.subgraphs[0].operators[0]
    if how == "tag":
        op.builtinOptionsType = S.BuiltinOptions.Pool2DOptions
    else:
        o = S.AddOptionsT()
        o.fusedActivationFunction = 1
        op.builtinOptionsType, op.builtinOptions = S.BuiltinOptions.AddOptions, o
    line = _refused(_pack(m), tmp_path, capsys)
    if how == "tag":
        assert _litert(_pack(m), xs) is None, "LiteRT's verifier accepted the model"
        assert "not a valid TFLite flatbuffer: the builtin options (Pool2DOptions) of " \
               "operator 0 of subgraph 0: field 3 (byte" in line and "not 4-byte aligned" in line, \
               line
    else:
        assert "CONV_2D" in line and "options" in line and "Conv2DOptions" in line, line


def test_invalid_padding_is_refused(tmp_path, capsys):
    m, xs = _model("pools_softmax", "float")
    m.subgraphs[0].operators[0].builtinOptions.padding = 2  # SAME 0, VALID 1
    line = _refused(_pack(m), tmp_path, capsys)
    assert "operator 0 AVERAGE_POOL_2D" in line and "padding is 2" in line, line


def test_disagreeing_builtin_codes_are_refused(tmp_path, capsys):
    """deprecated_builtin_code CONV_2D with builtin_code DEPTHWISE_CONV_2D: the references take
    the larger; the schema says the two are equal."""
    m, xs = _model("CONV_2D", "float")
    oc = m.operatorCodes[0]
    oc.deprecatedBuiltinCode, oc.builtinCode = S.BuiltinOperator.CONV_2D, \
        S.BuiltinOperator.DEPTHWISE_CONV_2D
    line = _refused(_pack(m), tmp_path, capsys)
    assert "operator 0" in line and "disagree" in line, line
    oc.deprecatedBuiltinCode, oc.builtinCode = 127, 130  # the placeholder: a valid pair
    assert "disagree" not in _refused(_pack(m), tmp_path, capsys)


def test_changed_rank_of_an_intermediate_tensor_is_refused(tmp_path, capsys):
    """The conv output of kws_like declared [1, 10, 6, 8, 1]: LiteRT recomputes the shape,
    TFLM keeps the declared one; aotc refuses rather than pick one."""
    m, xs = _model("kws_like", "int8")
    sg = m.subgraphs[0]
    conv_out = int(sg.operators[1].inputs[0])  # the depthwise conv's input
    sg.tensors[conv_out].shape = np.array([1, 10, 6, 8, 1], np.int32)
    sg.outputs = np.array([int(sg.outputs[0])], np.int32)  # the conv output is not an output
    data = _pack(m)
    line = _refused(data, tmp_path, capsys)
    assert "operator 0 CONV_2D: output 'conv_2d_0_0' is declared [1, 10, 6, 8, 1]" in line, line


def test_schema_version_other_than_3_is_refused(tmp_path, capsys):
    m, xs = _model("CONV_2D", "float")
    m.version = 16
    assert "schema version 16" in _refused(_pack(m), tmp_path, capsys)


def test_stride_that_disagrees_with_the_declared_output_is_refused(tmp_path, capsys):
    """strideW 7 on a SAME CONV_2D whose output is declared [1, 8, 8, 6]: TFLM writes the
    declared shape, LiteRT computes [1, 8, 2, 6]."""
    m, xs = _model("kws_like", "float")
    m.subgraphs[0].operators[0].builtinOptions.strideW = 7
    data = _pack(m)
    tflm, lit = _tflm(data, xs), _litert(data, xs)
    assert tflm is None or lit is None or tflm.shape != lit.shape or not np.allclose(tflm, lit)
    line = _refused(data, tmp_path, capsys)
    assert "operator 0 CONV_2D" in line and "the operator computes another shape" in line, line


def test_version_of_a_builtin_tflm_lacks_is_refused(tmp_path, capsys):
    """TILE (no TFLM kernel) at opcode version 3: LiteRT's reference kernels register versions
    1 and 2 only (the reference of the fuzz oracle, run_litert; LiteRT's optimised kernels
    take 3), so both references refuse the model; aotc compiled it."""
    m, xs = _model("op_tile_float", "seed")
    assert _tflm(_pack(m), xs) is None and _litert(_pack(m), xs) is not None
    for oc in m.operatorCodes:
        if oc.builtinCode == S.BuiltinOperator.TILE:
            oc.version = 3
    data = _pack(m)
    assert _tflm(data, xs) is None and not in_child(lambda: run_litert(data, xs))[0]
    line = _refused(data, tmp_path, capsys)
    assert "TILE: opcode version 3; TFLM has no TILE" in line, line


def test_flatbuffer_the_verifier_rejects_is_refused(tmp_path, capsys):
    """The root Model table's vtable grown by 512 bytes (the fuzzer's bit flip in op_pad_float):
    fields aotc does not read (metadata_buffer, signature_defs) now point at misaligned
    garbage; LiteRT's flatbuffer verifier refuses the model and TFLM's reader fails."""
    m, xs = _model("op_pad_float", "seed")
    data = bytearray(_pack(m))
    root = int.from_bytes(data[0:4], "little")
    vt = root - int.from_bytes(data[root:root + 4], "little", signed=True)
    data[vt + 1] ^= 2  # the vtable size's high byte
    data = bytes(data)
    assert _tflm(data, xs) is None and _litert(data, xs) is None
    line = _refused(data, tmp_path, capsys)
    assert "is not a valid TFLite flatbuffer: the Model table: metadata buffer" in line, line


MUTATIONS: dict[str, tuple[str, str, Callable[[Any], None], str]] = {
    # name: (seed, kind, edit, what the one line says)
    "variable_constant": ("CONV_2D", "float", lambda m: setattr(
        m.subgraphs[0].tensors[1], "isVariable", True), "variable tensor with constant data"),
    "bias_scale": ("CONV_2D", "int8", lambda m: setattr(
        m.subgraphs[0].tensors[2].quantization, "scale",
        np.asarray(m.subgraphs[0].tensors[2].quantization.scale) * 3),
        "input scale x weight scale"),
    "extra_input": ("CONV_2D", "float", lambda m: setattr(
        m.subgraphs[0].operators[0], "inputs",
        np.append(m.subgraphs[0].operators[0].inputs, 1).astype(np.int32)), "4 inputs"),
    "output_type": ("ADD", "int8", lambda m: (
        setattr(m.subgraphs[0].tensors[2], "type", S.TensorType.INT16),
        setattr(m.subgraphs[0].tensors[2].quantization, "zeroPoint", np.zeros(1, np.int64))),
        "output 0 is int16"),
    "zero_scale": ("ADD", "int8", lambda m: setattr(
        m.subgraphs[0].tensors[0].quantization, "scale", np.zeros(1, np.float32)),
        "quantisation scale 0.0"),
    "short_buffer": ("FULLY_CONNECTED", "float", lambda m: setattr(
        m.buffers[m.subgraphs[0].tensors[1].buffer], "data",
        np.asarray(m.buffers[m.subgraphs[0].tensors[1].buffer].data)[:-4]), "bytes of data"),
    "tensor_index": ("ADD", "float", lambda m: setattr(
        m.subgraphs[0].operators[0], "inputs", np.array([0, 99], np.int32)), "tensor 99"),
    "softmax_without_options": ("pools_softmax", "float", lambda m: setattr(
        m.subgraphs[0].operators[3], "builtinOptions", None) or setattr(
        m.subgraphs[0].operators[3], "builtinOptionsType", 0), "no builtin options"),
    "svdf_without_options": ("svdf_f32", "seed", lambda m: setattr(
        m.subgraphs[0].operators[0], "builtinOptions", None) or setattr(
        m.subgraphs[0].operators[0], "builtinOptionsType", 0), "operator 0 SVDF: no builtin"),
    "pack_count": ("op_pack_int8", "seed", lambda m: setattr(
        m.subgraphs[0].operators[1].builtinOptions, "valuesCount", 3),
        "operator 1 PACK: PackOptions.ValuesCount is 3 for 2 inputs"),
    "depth_multiplier": ("depthwise_conv_2d_float", "seed", lambda m: setattr(
        m.subgraphs[0].operators[0].builtinOptions, "depthMultiplier", 3),
        "depth_multiplier 3 with 4 input and 4 output channels"),
    "input_types": ("add_int8", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[1], "type", S.TensorType.INT64), "inputs of types int64, int8"),
    "nan_constant": ("op_maximum_float", "seed", lambda m: setattr(
        m.buffers[m.subgraphs[0].tensors[4].buffer], "data", np.frombuffer(np.full(
            4, np.nan, np.float32).tobytes(), np.uint8)), "a float constant holding NaN"),
    "int16_input_shape": ("add_int16", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[0], "shape", np.array([1, 6, 4, 6], np.int32)),
        "operator 0 ADD: output 'add_0_0' is declared [1, 6, 6, 4]"),
    "dilation_int16": ("depthwise_conv_2d_int8", "seed", lambda m: setattr(
        m.subgraphs[0].operators[0].builtinOptions, "dilationWFactor", 65536),
        "DepthwiseConv2DOptions.DilationWFactor is 65536"),
    "uint8_weights": ("conv_2d_int8", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[1], "type", S.TensorType.UINT8), "uint8 weights for an int8"),
    "fc_output": ("fully_connected_int8", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[3], "shape", np.array([14], np.int32)),
        "output declared [14]; FULLY_CONNECTED computes [2, 7]"),
    "squeeze_output": ("op_squeeze_float", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[5], "shape", np.array([4], np.int32)),
        "output declared [4]; SQUEEZE computes [1, 4]"),
    "assign_variable_inputs": ("accumulator_int8", "seed", lambda m: setattr(
        m.subgraphs[0].operators[5], "inputs",
        np.append(m.subgraphs[0].operators[5].inputs, -1).astype(np.int32)),
        "operator 5 ASSIGN_VARIABLE: 3 inputs"),
    "softmax_beta": ("pools_softmax_int8", "seed", lambda m: setattr(
        m.subgraphs[0].operators[3].builtinOptions, "beta", 0.0),
        "SoftmaxOptions.beta is 0.0"),
    "concat_params": ("op_concatenation_h_int8", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[int(m.subgraphs[0].operators[1].outputs[0])].quantization,
        "zeroPoint", np.array([-128], np.int64)), "operator 1 CONCATENATION: input 0 has"),
    "int16_bias_scale": ("fully_connected_int16", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[2].quantization, "scale",
        np.asarray(m.subgraphs[0].tensors[2].quantization.scale) * 1000),
        "input scale x weight scale"),
    "inf_constant": ("op_prelu_float", "seed", lambda m: setattr(
        m.buffers[m.subgraphs[0].tensors[1].buffer], "data", np.frombuffer(np.full(
            len(m.buffers[m.subgraphs[0].tensors[1].buffer].data) // 4, np.inf,
            np.float32).tobytes(), np.uint8)), "a float constant holding NaN or infinity"),
    "softmax_small_beta": ("zoo_magic_wand_int8", "seed", lambda m: setattr(
        m.subgraphs[0].operators[8].builtinOptions, "beta", 1e-12),
        "operator 8 SOFTMAX: beta 1e-12 x input scale"),
    "div_by_zero": ("op_div_int8", "seed", lambda m: setattr(
        m.buffers[m.subgraphs[0].tensors[4].buffer], "data", np.frombuffer(np.full(
            4, m.subgraphs[0].tensors[4].quantization.zeroPoint[0], np.int8).tobytes(),
            np.uint8)), "holds zero"),
    "svdf_state_shape": ("svdf_int8", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[4], "shape", np.array([80, 1], np.int32)),
        "operator 0 SVDF: activation state of shape [80, 1]"),
    "per_channel_activation": ("fully_connected_int8", "seed", lambda m: (
        setattr(m.subgraphs[0].tensors[0].quantization, "scale",
                np.linspace(0.01, 0.02, 20).astype(np.float32)),
        setattr(m.subgraphs[0].tensors[0].quantization, "zeroPoint", np.zeros(20, np.int64)),
        setattr(m.subgraphs[0].tensors[0].quantization, "quantizedDimension", 1)),
        "per-channel quantisation of a graph input"),
    "transpose_conv_stride": ("op_transpose_conv_float", "seed", lambda m: setattr(
        m.subgraphs[0].operators[1].builtinOptions, "strideH", 4),
        "operator 1 TRANSPOSE_CONV: output height 12; stride 4 and SAME padding on 6 give 24"),
    "softmax_output_params": ("pools_softmax_int8", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[int(m.subgraphs[0].operators[3].outputs[0])].quantization,
        "zeroPoint", np.array([127], np.int64)), "operator 3 SOFTMAX: output scale"),
    "pool_params": ("op_squeeze_int8", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[3].quantization, "scale", np.array([3.5], np.float32)),
        "operator 1 AVERAGE_POOL_2D: input 0 has scale 3.5"),
    "shrink_output": ("op_strided_slice_shrink_float", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[7], "shape", np.array([6, 2, 2], np.int32)),
        "output declared [6, 2, 2]; the slice with shrink_axis_mask 1 gives [2, 6, 2]"),
    "uint8_input_int8_weights": ("fully_connected_int8", "seed", lambda m: [setattr(
        m.subgraphs[0].tensors[k], "type", S.TensorType.UINT8) for k in (0, 3)],
        "int8 weights for a uint8 input"),
    "int16_zero_point": ("conv_2d_int16", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[3].quantization, "zeroPoint", np.array([1000], np.int64)),
        "an int16 activation with zero point 1000"),
    "concat_activation": ("op_concatenation_h_float", "seed", lambda m: setattr(
        m.subgraphs[0].operators[1].builtinOptions, "fusedActivationFunction", 1),
        "a fused activation on CONCATENATION"),
    "concat_axis": ("op_concatenation_h_float", "seed", lambda m: setattr(
        m.subgraphs[0].operators[1].builtinOptions, "axis", 7), "axis 7 of a rank-4 input"),
    "resize_size": ("op_resize_bilinear_float", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[4], "shape", np.array([2, 1], np.int32)),
        "size of shape [2, 1]"),
    "var_handle_options": ("accumulator_int8", "seed", lambda m: [
        (setattr(o, "builtinOptions", None), setattr(o, "builtinOptionsType", 0))
        for o in m.subgraphs[0].operators
        if isinstance(o.builtinOptions, S.VarHandleOptionsT)], "VAR_HANDLE: no builtin options"),
    "opcode_version_0": ("conv_2d_float", "seed", lambda m: setattr(
        m.operatorCodes[0], "version", 0), "opcode version 0"),
    "prelu_alpha": ("op_prelu_float", "seed", lambda m: setattr(
        m.subgraphs[0].operators[1], "inputs", np.array(
            [m.subgraphs[0].operators[1].inputs[0], 1], np.int32)),
        "operator 1 PRELU: alpha of shape [4, 1, 1, 4] does not broadcast"),
    "fc_output_type": ("fully_connected_int16", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[int(m.subgraphs[0].operators[0].outputs[0])], "type",
        S.TensorType.INT32), "output 0 is int32"),
    "bias_overflow": ("conv_2d_int8", "seed", lambda m: setattr(
        m.buffers[m.subgraphs[0].tensors[2].buffer], "data", np.concatenate([np.frombuffer(
            np.int32(2**31 - 1).tobytes(), np.uint8), np.asarray(
            m.buffers[m.subgraphs[0].tensors[2].buffer].data)[4:]])),
        "operator 0 CONV_2D: bias 2147483647 of output channel 0"),
    "shrink_negative_stride": ("op_strided_slice_shrink_int8", "seed", lambda m: setattr(
        m.buffers[m.subgraphs[0].tensors[6].buffer], "data", np.concatenate([np.frombuffer(
            np.int32(-1).tobytes(), np.uint8), np.asarray(
            m.buffers[m.subgraphs[0].tensors[6].buffer].data)[4:]])),
        "operator 1 STRIDED_SLICE: stride -1 on axis 0 of shrink_axis_mask 1"),
    "add_scale_1e38": ("add_int8", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[1].quantization, "scale", np.array([1e38], np.float32)),
        "operator 0 ADD: input scale 1e+38 with output scale"),
    "add_multiplier": ("add_int8", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[1].quantization, "scale", np.array([1.2e4], np.float32)),
        "output multiplier 1.00941 is not below 1"),
    "add_multiplier_int16": ("add_int16", "seed", lambda m: setattr(
        m.subgraphs[0].tensors[0].quantization, "scale", np.array([2.5], np.float32)),
        "output multiplier 1.05691 is not below 1"),
    "builtin_code": ("conv_2d_float", "seed", lambda m: setattr(
        m.operatorCodes[0], "builtinCode", S.BuiltinOperator.DEPTHWISE_CONV_2D),
        "deprecated_builtin_code 3 (CONV_2D) and builtin_code 4 (DEPTHWISE_CONV_2D) disagree"),
}


# Edits TFLM ignores (aotc read the field and computed a third answer).
IGNORED = {"bias_scale"}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_invalid_structure_is_refused(name, tmp_path, capsys):
    """Each edit makes TFLM refuse the model or compute something else than LiteRT (or, in
    IGNORED, TFLM ignores it); aotc used to compile it to a third answer."""
    seed, kind, edit, says = MUTATIONS[name]
    m, xs = _model(seed, kind)
    before = _pack(m)
    want = interpret_tflm(before, xs)[0]
    edit(m)
    data = _pack(m)
    tflm, lit = _tflm(data, xs), _litert(data, xs)
    if name in IGNORED:  # TFLM does not read the edited field: its answer is unchanged
        assert tflm is not None and np.array_equal(tflm, want)
    else:  # the references disagree, or TFLM's answer changed with the edit
        agree = tflm is not None and lit is not None and tflm.shape == lit.shape and \
            np.allclose(tflm.astype(np.float64), lit.astype(np.float64), atol=1, equal_nan=True)
        assert not agree or tflm.shape != want.shape or not np.allclose(
            tflm.astype(np.float64), want.astype(np.float64), atol=1e-6), \
            "the references agree and ignore the edit: no reason to refuse"
    line = _refused(data, tmp_path, capsys)
    assert says in line, line


@pytest.mark.parametrize("seed, scale", [
    ("pools_softmax_int8", None), ("average_pool_2d_int16", None),
    ("average_pool_2d_int16", 1 / 16384.5), ("average_pool_2d_int16", 1 / 1000.5)])
def test_average_pool_with_fused_relu_n1_to_1_matches_tflm(seed, scale, tmp_path):
    """AVERAGE_POOL_2D (int8, int16) with fused RELU_N1_TO_1 (fuzz finding options_value, 1 LSB
    off TFLM): the Clip(-1, 1) folds into QLinearAveragePool's activation range like RELU and
    RELU6; bit-exact with TFLM on 4 input vectors, also at scales where 1 / scale is a tie."""
    from test_tflite_int16 import _compile_run

    m, _ = _model(seed, "seed")
    op = m.subgraphs[0].operators[0]
    op.builtinOptions.fusedActivationFunction = S.ActivationFunctionType.RELU_N1_TO_1
    if scale is not None:  # the pool's input and output share their parameters
        for t in (op.inputs[0], op.outputs[0]):
            m.subgraphs[0].tensors[t].quantization.scale = np.array([scale], np.float32)
    data = _pack(m)
    it = Interpreter(model_content=data)
    d = it.get_input_details()[0]
    info = np.iinfo(d["dtype"])
    for k in range(4):
        x = np.random.default_rng(k).integers(info.min, info.max + 1, d["shape"]).astype(
            d["dtype"])
        want = interpret_tflm(data, [x])[0]
        got, ops = _compile_run(data, [x], tmp_path / str(k))
        assert "QLinearAveragePool" in ops and "Clip" not in ops, ops
        np.testing.assert_array_equal(got, want)
