"""Each supported TFLite builtin on a small model built here (tflite_builder: flatbuffers and
TFLite's schema), float32 and int8, compiled from the .tflite file. Each op runs on a graph
input (NHWC as stored) and after a 1x1 CONV_2D (its input then lives NCHW inside aotc), so
both layouts are covered.

References and tolerances: float32 against the LiteRT interpreter's reference kernels, rtol and
atol 1e-5 (1e-4 for the libm functions: LOGISTIC, TANH, SOFTMAX). int8 against TensorFlow Lite
Micro (whose arithmetic ``--requant tflite`` follows): exact (``LSB`` below would list a
builtin whose int8 result is not TFLM's arithmetic, with its tolerance: none is). LiteRT's own
int8 kernels differ from TFLM's in places (FULLY_CONNECTED rounds once where TFLM rounds
twice), so int8 is also checked against LiteRT within 1 LSB. Each bundle also runs on the
QEMU boards of AOTC_TEST_BOARDS (cortex-m4f, cortex-m0plus) against the host build, as every
op test does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from opcheck import run_on_boards
from tflite_builder import Net, float_and_int8, interpret, interpret_tflm, options
from tflite_cases import CASES as MORE_CASES
from tflite_cases import FLOAT_TOL, TYPED

import aotc
from aotc.errors import AotcError
from aotc.frontend.tflite.builtins import CONVERTERS, TYPES

# int8 LSB tolerance where aotc does not compute TFLite's integer arithmetic (none).
LSB: dict[str, int] = {}
# LiteRT's BUILTIN_REF int8 SUM gives -1 everywhere on these models (its optimized kernel agrees
# with TFLM): compared with TFLM only.
LITERT_REF_WRONG = {"SUM"}

Spec = Callable[[Net, int], int]


def _conv(net: Net, x: int, shape: tuple[int, ...], cout: int, k: int = 3, stride: int = 1,
          padding: int = 0, act: int = 0, dil: int = 1) -> tuple[int, tuple[int, ...]]:
    n, h, w, c = shape
    wt = net.weight(net.rng.normal(scale=0.5, size=(cout, k, k, c)))
    b = net.bias(net.rng.normal(scale=0.1, size=cout), x, wt)
    eff = (k - 1) * dil + 1
    oh, ow = ((-(-h // stride), -(-w // stride)) if padding == 0
              else ((h - eff) // stride + 1, (w - eff) // stride + 1))
    out = (n, oh, ow, cout)
    return net.op("CONV_2D", [x, wt, b], out, options(
        "Conv2DOptions", padding=padding, strideH=stride, strideW=stride,
        fusedActivationFunction=act, dilationHFactor=dil, dilationWFactor=dil)), out


def _unary(code: str, opts: object = None) -> Spec:
    return lambda net, x, s: net.op(code, [x], s, opts)


def _binary(code: str, const: bool) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        other = net.const(net.rng.normal(size=s[-1:])) if const else x
        return net.op(code, [x, other], s, options(code.title() + "Options",
                                                   fusedActivationFunction=1 if const else 0))
    return spec


def _pool(code: str, k: int, stride: int, padding: int) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        n, h, w, c = s
        out = ((n, -(-h // stride), -(-w // stride), c) if padding == 0
               else (n, (h - k) // stride + 1, (w - k) // stride + 1, c))
        return net.op(code, [x], out, options("Pool2DOptions", padding=padding, strideH=stride,
                                              strideW=stride, filterHeight=k, filterWidth=k))
    return spec


def _depthwise(net: Net, x: int, s: tuple[int, ...]) -> int:
    n, h, w, c = s
    wt = net.weight(net.rng.normal(scale=0.5, size=(1, 3, 3, 2 * c)), axis=3)
    b = net.bias(net.rng.normal(scale=0.1, size=2 * c), x, wt)
    return net.op("DEPTHWISE_CONV_2D", [x, wt, b], (n, -(-h // 2), -(-w // 2), 2 * c),
                  options("DepthwiseConv2DOptions", padding=0, strideH=2, strideW=2,
                          depthMultiplier=2, fusedActivationFunction=3))


def _fully_connected(net: Net, x: int, s: tuple[int, ...]) -> int:
    k = int(np.prod(s))
    wt = net.weight(net.rng.normal(scale=0.3, size=(6, k)), axis=None)
    b = net.bias(net.rng.normal(scale=0.1, size=6), x, wt)
    return net.op("FULLY_CONNECTED", [x, wt, b], (1, 6),
                  options("FullyConnectedOptions", fusedActivationFunction=1))


def _conv_spec(**kw: int) -> Spec:
    return lambda net, x, s: _conv(net, x, s, 5, **kw)[0]


def _transpose_conv(net: Net, x: int, s: tuple[int, ...]) -> int:
    n, h, w, c = s
    wt = net.weight(net.rng.normal(scale=0.5, size=(3, 3, 3, c)))
    out = (n, 2 * h, 2 * w, 3)
    return net.op("TRANSPOSE_CONV", [net.ints(out), wt, x], out,
                  options("TransposeConvOptions", padding=0, strideH=2, strideW=2))


def _softmax(net: Net, x: int, s: tuple[int, ...]) -> int:
    return net.op("SOFTMAX", [x], s, options("SoftmaxOptions", beta=1.0))


def _reshape(net: Net, x: int, s: tuple[int, ...]) -> int:
    out = (1, int(np.prod(s)) // 2, 2)
    return net.op("RESHAPE", [x, net.ints(out)], out, options("ReshapeOptions",
                                                             newShape=list(out)))


def _reshape_relu_fc(net: Net, x: int, s: tuple[int, ...]) -> int:
    """Flatten (RESHAPE to [N, H*W*C]) -> RELU -> FULLY_CONNECTED, as a CNN's classifier."""
    flat = (s[0], int(np.prod(s[1:])))
    y = net.op("RESHAPE", [x, net.ints(flat)], flat, options("ReshapeOptions",
                                                             newShape=list(flat)))
    return _fully_connected(net, net.op("RELU", [y], flat), flat)


def _squeeze(net: Net, x: int, s: tuple[int, ...]) -> int:
    pooled = _pool("AVERAGE_POOL_2D", s[1], s[1], 1)(net, x, s)  # [n, 1, 1, c]
    return net.op("SQUEEZE", [pooled], (s[0], s[3]), options("SqueezeOptions",
                                                            squeezeDims=[1, 2]))


def _concat(net: Net, x: int, s: tuple[int, ...]) -> int:
    y = net.op("MAX_POOL_2D", [x], s, options("Pool2DOptions", padding=0, strideH=1,
                                              strideW=1, filterHeight=2, filterWidth=2))
    return net.op("CONCATENATION", [x, y], s[:3] + (2 * s[3],),
                  options("ConcatenationOptions", axis=3))


def _concat_h(net: Net, x: int, s: tuple[int, ...]) -> int:
    return net.op("CONCATENATION", [x, x], (s[0], 2 * s[1], s[2], s[3]),
                  options("ConcatenationOptions", axis=1))


def _pad(net: Net, x: int, s: tuple[int, ...]) -> int:
    p = [[0, 0], [1, 2], [2, 0], [0, 1]]
    out = tuple(d + a + b for d, (a, b) in zip(s, p))
    return net.op("PAD", [x, net.ints(p)], out)


def _mean(keep: bool, code: str = "MEAN") -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        out = (s[0], 1, 1, s[3]) if keep else (s[0], s[3])
        return net.op(code, [x, net.ints([1, 2])], out, options("ReducerOptions",
                                                                keepDims=keep))
    return spec


def _transpose(net: Net, x: int, s: tuple[int, ...]) -> int:
    perm = (0, 3, 1, 2)
    return net.op("TRANSPOSE", [x, net.ints(perm)], tuple(s[p] for p in perm))


def _strided_slice(shrink: bool) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        begin, end, step = [0, 1, 0, 1], [1, 5, 0, 3], [1, 2, 1, 1]
        opts = options("StridedSliceOptions", beginMask=0, endMask=4,
                       shrinkAxisMask=1 if shrink else 0)
        out = (2, s[2], 2) if shrink else (1, 2, s[2], 2)
        return net.op("STRIDED_SLICE", [x, net.ints(begin), net.ints(end), net.ints(step)],
                      out, opts)
    return spec


def _split(net: Net, x: int, s: tuple[int, ...]) -> int:
    a, b = net.op("SPLIT", [net.ints([3]), x], s[:3] + (s[3] // 2,),
                  options("SplitOptions", numSplits=2), n_out=2)
    return net.op("ADD", [a, b], s[:3] + (s[3] // 2,), options("AddOptions"))


CASES: dict[str, Spec] = {
    "CONV_2D": _conv_spec(act=1),
    "CONV_2D_valid_stride2_dil": _conv_spec(stride=2, padding=1, act=3, dil=1),
    "CONV_2D_dilated": _conv_spec(padding=0, dil=2),
    "DEPTHWISE_CONV_2D": _depthwise,
    "FULLY_CONNECTED": _fully_connected,
    "AVERAGE_POOL_2D": _pool("AVERAGE_POOL_2D", 3, 2, 0),
    "MAX_POOL_2D": _pool("MAX_POOL_2D", 2, 2, 1),
    "SOFTMAX_4D": _softmax,
    "RESHAPE": _reshape,
    "RESHAPE_relu_fc": _reshape_relu_fc,
    "SQUEEZE": _squeeze,
    "ADD": _binary("ADD", False),
    "ADD_const": _binary("ADD", True),
    "SUB": _binary("SUB", True),
    "MUL": _binary("MUL", True),
    "CONCATENATION": _concat,
    "CONCATENATION_h": _concat_h,
    "PAD": _pad,
    "MEAN": _mean(True),
    "MEAN_squeezed": _mean(False),
    "SUM": _mean(True, "SUM"),
    "REDUCE_MAX": _mean(False, "REDUCE_MAX"),
    "REDUCE_MIN": _mean(True, "REDUCE_MIN"),
    "LOGISTIC": _unary("LOGISTIC"),
    "TANH": _unary("TANH"),
    "RELU": _unary("RELU"),
    "RELU6": _unary("RELU6"),
    "HARD_SWISH": _unary("HARD_SWISH"),
    "LEAKY_RELU": lambda net, x, s: net.op("LEAKY_RELU", [x], s,
                                           options("LeakyReluOptions", alpha=0.2)),
    "TRANSPOSE": _transpose,
    "STRIDED_SLICE": _strided_slice(False),
    "STRIDED_SLICE_shrink": _strided_slice(True),
    "SPLIT": _split,
    "TRANSPOSE_CONV": _transpose_conv,
    **MORE_CASES,
}
SHAPE = (1, 6, 6, 4)
# int8 cases refused although the builtin's int8 form converts: the error they must give.
# (TFLM pads SPACE_TO_BATCH_ND with an uninitialised value, LiteRT with the zero point.)
REFUSED_INT8 = {"SPACE_TO_BATCH_ND_padded": "TFLM pads with an uninitialised value"}
# int8 cases LiteRT cannot run (no int8 kernel, e.g. ADD_N, CUMSUM): TFLM only.
TFLM_NOT_LITERT = {"ZEROS_LIKE", "ADD_N", "CUMSUM", "CUMSUM_exclusive_reverse"}
# Builtins on bool / int32 tensors whatever the model's activations are.
TYPED_OPS = {"LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT", "REDUCE_ANY", "REDUCE_ALL", "SHAPE",
             "BROADCAST_ARGS"}
# After a conv these read its NCHW output flattened: the weights are permuted instead, so no
# transpose kernel runs.
NO_TRANSPOSE = {"FULLY_CONNECTED", "RESHAPE_relu_fc"}


def _spec(case: str, after_conv: bool) -> Callable[[Net], list[int]]:
    def spec(net: Net) -> list[int]:
        x = net.input(SHAPE)
        s = SHAPE
        if after_conv:
            x, s = _conv(net, x, SHAPE, 4, k=1)
        return [CASES[case](net, x, s)]
    return spec


def _run_aotc(model: bytes, xs: list[np.ndarray], tmp: Path) -> list[np.ndarray]:
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "m.tflite"
    path.write_bytes(model)
    bundle = aotc.compile(path, tmp / "out", name="m")
    runner = bundle.load()
    ins = {t["name"]: x for t, x in zip(runner.meta["inputs"], xs)}
    got = runner.run(ins)
    run_on_boards(bundle, ins, got, tmp / "fw")  # AOTC_TEST_BOARDS, as every op test
    ops = [n.op for n in bundle.compilation.graph.nodes]
    return [got[t["name"]] for t in runner.meta["outputs"]], ops


def builtin_of(case: str) -> str:
    """The builtin a case tests: the longest converter name it is or starts with + "_"."""
    return max((c for c in CONVERTERS if case == c or case.startswith(c + "_")), key=len)


def reference(model: bytes, xs: list[np.ndarray], kind: str) -> tuple[list[np.ndarray], str]:
    """TFLM for int8 where it has the kernel, else LiteRT's reference kernels."""
    if kind == "int8":
        try:
            return interpret_tflm(model, xs), "TFLM"
        except Exception:  # TFLM refuses the model (no kernel for the op or the type)
            pass
    return interpret(model, xs)[0], "LiteRT"


@pytest.mark.parametrize("after_conv", [False, True], ids=["input", "after_conv"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_tflite_op(case, after_conv, tmp_path):
    models = float_and_int8(_spec(case, after_conv), [SHAPE])
    lsb = max((v for k, v in LSB.items() if case.startswith(k)), default=0)
    builtin = builtin_of(case)
    for kind, (model, xs) in models.items():
        if kind == "int8" and "int8" not in TYPES[builtin] and builtin not in TYPED_OPS:
            # Refused, naming the operator and what is supported (never a silent difference).
            with pytest.raises(AotcError, match=f"{builtin} .*int8 is not supported"):
                _run_aotc(model, xs, tmp_path / kind)
            continue
        if kind == "int8" and case in REFUSED_INT8:
            with pytest.raises(AotcError, match=REFUSED_INT8[case]):
                _run_aotc(model, xs, tmp_path / kind)
            continue
        want, ref = reference(model, xs, kind)
        got, ops = _run_aotc(model, xs, tmp_path / kind)
        if case in NO_TRANSPOSE:
            assert "Transpose" not in ops, ops
        if case == "SHAPE_keras_flatten":  # the shape arithmetic folded away
            assert not {"Shape", "Concat", "Unsqueeze", "Slice"} & set(ops), ops
        if kind == "int8" and ref == "TFLM" and case not in TFLM_NOT_LITERT \
                and builtin_of(case) not in LITERT_REF_WRONG:
            for g, w in zip(got, interpret(model, xs)[0]):
                diff = np.abs(g.astype(np.int32) - w.astype(np.int32)).max()
                assert diff <= max(lsb, 1), f"{case} int8: {diff} LSB from LiteRT"
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, (kind, g.shape, w.shape)
            if kind == "float" and g.dtype == np.float32:
                tol = 1e-4 if case in ("LOGISTIC", "TANH", "SOFTMAX_4D") else FLOAT_TOL.get(
                    builtin, 1e-5)
                np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=kind)
            elif g.dtype == np.int8:
                diff = np.abs(g.astype(np.int32) - w.astype(np.int32)).max()
                assert diff <= lsb, f"{case} int8: {diff} LSB from {ref}"
            else:
                np.testing.assert_array_equal(g, w, err_msg=f"{case} {kind} vs {ref}")


@pytest.mark.parametrize("case", sorted(TYPED))
def test_tflite_typed_op(case, tmp_path):
    """int32 / bool operands, exact, against TFLM (LiteRT where TFLM has no kernel)."""
    net = Net(False)
    model = net.build(TYPED[case](net))
    rng = np.random.default_rng(3)
    xs = []
    for t in net.inputs:
        ts = net.tensors[t]
        shape = tuple(int(d) for d in ts.shape)
        xs.append(rng.integers(0, 2, size=shape).astype(np.bool_) if ts.type == 6
                  else rng.integers(-6, 7, size=shape).astype(np.int32))
    want, ref = reference(model, xs, "int8")
    got, _ = _run_aotc(model, xs, tmp_path)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w, err_msg=f"{case} vs {ref}")


def test_every_builtin_has_a_test_and_an_ops_row():
    from aotc.frontend.tflite.builtins import ONNX_OPS

    assert set(ONNX_OPS) == set(CONVERTERS) == set(TYPES)
    tested = {builtin_of(k) for k in [*CASES, *TYPED]}
    # QUANTIZE/DEQUANTIZE: test_quantize_dequantize below; UNIDIRECTIONAL_SEQUENCE_LSTM:
    # test_tflite_lstm.py; the resource variables and SVDF: test_tflite_state.py; TFLM's
    # Signal custom operators: test_tflite_signal.py; IF and WHILE: test_tflite_control.py;
    # the SSD post-processing: test_tflite_detection.py.
    signal = {k for k in CONVERTERS if k.startswith("CUSTOM:Signal")}
    assert set(CONVERTERS) - tested - signal == {
        "QUANTIZE", "DEQUANTIZE", "UNIDIRECTIONAL_SEQUENCE_LSTM", "VAR_HANDLE", "READ_VARIABLE",
        "ASSIGN_VARIABLE", "CALL_ONCE", "SVDF", "IF", "WHILE",
        "CUSTOM:TFLite_Detection_PostProcess"}


def test_quantize_dequantize(tmp_path):
    """float -> QUANTIZE -> int8 -> DEQUANTIZE -> float, and the int8 tensor as an output."""
    net = Net(False)
    x = net.input(SHAPE)
    q = net._tensor(SHAPE, np.int8, "q", None, 0.02, 3)
    y = net._tensor(SHAPE, np.float32, "y")
    for code, i, o in (("QUANTIZE", x, q), ("DEQUANTIZE", q, y)):
        net.op_into(code, [i], [o])
    model = net.build([q, y])
    xs = [np.random.default_rng(1).normal(size=SHAPE).astype(np.float32)]
    got = _run_aotc(model, xs, tmp_path)[0]
    for g, w in zip(got, interpret(model, xs)[0]):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    for g, w in zip(got, interpret_tflm(model, xs, 2)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("code", ["ABS", "ELU", "RSQRT"])
@pytest.mark.parametrize("ranges", [((-3.0, 2.0), (0.0, 3.0)), ((-0.7, 5.0), (-1.0, 4.0))],
                         ids=["a", "b"])
def test_int8_tables_every_code(code, ranges, tmp_path):
    """The int8 builtins aotc computes as a 256-entry table, on every input code, for two
    pairs of input/output parameters: exact with TFLM."""
    net = Net(True, {"input0": ranges[0], f"{code.lower()}_0_0": ranges[1]})
    shape = (1, 16, 16, 1)
    y = net.op(code, [net.input(shape)], shape)
    model = net.build([y])
    codes = np.arange(-128, 128)
    if code == "RSQRT":  # TFLM refuses the codes of negative values at run time
        zp = int(net.tensors[net.inputs[0]].quantization.zeroPoint[0])
        codes = np.resize(np.arange(zp + 1, 128), 256)
    xs = [codes.astype(np.int8).reshape(shape)]
    got = _run_aotc(model, xs, tmp_path)[0][0]
    np.testing.assert_array_equal(got, interpret_tflm(model, xs)[0])


@pytest.mark.parametrize("ranges", [
    ((-3.0, 2.0), (0.0, 3.0)),          # reluish multiplier left-shifted by 1
    ((-0.7, 5.0), (-1.0, 4.0)),
    ((-0.1, 0.15), (-0.05, 0.1)),       # right-shifted (a small input scale)
    ((-300.0, 700.0), (-1.0, 700.0)),   # left-shifted by 9: saturating shifts
    ((0.0, 6.0), (-0.375, 6.0)),        # zero points -128 / near it
    ((-6.0, 0.0), (-0.5, 0.0)),         # zero points 127
], ids=["a", "b", "small", "large", "zp-128", "zp127"])
def test_int8_hard_swish_every_code(ranges, tmp_path):
    """int8 HARD_SWISH (a table of TFLM's fixed-point arithmetic) on every input code, for six
    pairs of input/output parameters: exact with TFLM."""
    net = Net(True, {"input0": ranges[0], "hard_swish_0_0": ranges[1]})
    shape = (1, 16, 16, 1)
    y = net.op("HARD_SWISH", [net.input(shape)], shape)
    model = net.build([y])
    xs = [np.arange(-128, 128).astype(np.int8).reshape(shape)]
    got = _run_aotc(model, xs, tmp_path)[0][0]
    np.testing.assert_array_equal(got, interpret_tflm(model, xs)[0])


@pytest.mark.parametrize("x_range", [(-1.0, 2.0), (0.0, 3.0), (-3.0, 0.0), (-0.2, 5.0)],
                         ids=["mid", "zp-128", "zp127", "skewed"])
@pytest.mark.parametrize("geom", [(2, 0, True), (1, 1, False), (2, 1, True)],
                         ids=["s2_same_bias", "s1_valid", "s2_valid_bias"])
def test_int8_transpose_conv_zero_points(x_range, geom, tmp_path):
    """int8 TRANSPOSE_CONV with input zero points across the range (per-channel weights,
    with and without a bias): TFLM's integer kernel (QConvTranspose), exact with TFLM."""
    stride, padding, with_bias = geom
    net = Net(True, {"input0": x_range, "transpose_conv_0_0": (-4.0, 6.0)}, seed=3)
    n, h, w, c = shape = (1, 5, 4, 3)
    x = net.input(shape)
    wt = net.weight(net.rng.normal(scale=0.5, size=(4, 3, 3, c)))
    out = ((n, stride * h, stride * w, 4) if padding == 0
           else (n, (h - 1) * stride + 3, (w - 1) * stride + 3, 4))
    ins = [net.ints(out), wt, x]
    if with_bias:
        ins.append(net.bias(net.rng.normal(scale=0.3, size=4), x, wt))
    y = net.op("TRANSPOSE_CONV", ins, out, options(
        "TransposeConvOptions", padding=padding, strideH=stride, strideW=stride))
    model = net.build([y])
    xs = [net.rng.integers(-128, 128, size=shape).astype(np.int8)]
    got, ops = _run_aotc(model, xs, tmp_path)
    assert "QConvTranspose" in ops and "ConvTranspose" not in ops, ops
    np.testing.assert_array_equal(got[0], interpret_tflm(model, xs)[0])


@pytest.mark.parametrize("requant", ["tflite", "onnx"])
def test_onnx_qdq_transpose_conv_int8(requant, tmp_path):
    """An ONNX QDQ int8 ConvTranspose holding the same integers as a TFLite TRANSPOSE_CONV
    (stride 2, VALID, per-channel weights, bias; input zero point nonzero): with
    ``--requant tflite`` it becomes QConvTranspose, exact with TFLM on the .tflite model; with
    ``--requant onnx`` it stays float between DequantizeLinear and QuantizeLinear."""
    from onnx import TensorProto, helper, numpy_helper

    net = Net(True, {"input0": (-1.0, 2.0), "transpose_conv_0_0": (-4.0, 6.0)}, seed=5)
    n, h, w, c = shape = (1, 5, 4, 3)
    m = 4
    x = net.input(shape)
    wt = net.weight(net.rng.normal(scale=0.5, size=(m, 3, 3, c)))
    b = net.bias(net.rng.normal(scale=0.3, size=m), x, wt)
    out = (n, 2 * h + 1, 2 * w + 1, m)
    y = net.op("TRANSPOSE_CONV", [net.ints(out), wt, x, b], out, options(
        "TransposeConvOptions", padding=1, strideH=2, strideW=2))
    model = net.build([y])

    def data(t: int, dt: type) -> np.ndarray:
        buf = net.buffers[net.tensors[t].buffer].data
        return np.frombuffer(np.asarray(buf, np.uint8).tobytes(), dt).reshape(
            net.tensors[t].shape)

    def qp(t: int) -> tuple[np.ndarray, np.ndarray]:
        q = net.tensors[t].quantization
        return np.asarray(q.scale, np.float32), np.asarray(q.zeroPoint, np.int64)

    (sx, zx), (sw, _), (sb, _), (sy, zy) = qp(x), qp(wt), qp(b), qp(y)
    inits = [
        numpy_helper.from_array(np.float32(sx[0]), "sx"),
        numpy_helper.from_array(np.int8(zx[0]), "zx"),
        numpy_helper.from_array(data(wt, np.int8).transpose(3, 0, 1, 2).copy(), "wq"),
        numpy_helper.from_array(sw, "sw"),
        numpy_helper.from_array(np.zeros(m, np.int8), "zw"),
        numpy_helper.from_array(data(b, np.int32), "bq"),
        numpy_helper.from_array(sb, "sb"),
        numpy_helper.from_array(np.zeros(m, np.int32), "zb"),
        numpy_helper.from_array(np.float32(sy[0]), "sy"),
        numpy_helper.from_array(np.int8(zy[0]), "zy"),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xf"]),
        helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wf"], axis=1),
        helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bf"], axis=0),
        helper.make_node("ConvTranspose", ["xf", "wf", "bf"], ["yf"], strides=[2, 2],
                         kernel_shape=[3, 3]),
        helper.make_node("QuantizeLinear", ["yf", "sy", "zy"], ["y"]),
    ]
    g = helper.make_graph(nodes, "convt", [helper.make_tensor_value_info(
        "x", TensorProto.INT8, [n, c, h, w])], [helper.make_tensor_value_info(
            "y", TensorProto.INT8, [n, m, out[1], out[2]])], inits)
    onnx_model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    xs = net.rng.integers(-128, 128, size=shape).astype(np.int8)
    bundle = aotc.compile(onnx_model, tmp_path / "out", name="m", requant=requant)
    got = bundle.load().run({"x": xs.transpose(0, 3, 1, 2).copy()})["y"].transpose(0, 2, 3, 1)
    ops = {nd.op for nd in bundle.compilation.graph.nodes}
    want = interpret_tflm(model, [xs])[0]
    if requant == "tflite":
        assert "QConvTranspose" in ops and "ConvTranspose" not in ops, ops
        np.testing.assert_array_equal(got, want)
    else:  # float between DequantizeLinear and QuantizeLinear: onnxruntime's answer
        import onnxruntime as ort

        assert "ConvTranspose" in ops and "QConvTranspose" not in ops, ops
        sess = ort.InferenceSession(onnx_model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        ref = sess.run(None, {"x": xs.transpose(0, 3, 1, 2).copy()})[0].transpose(0, 2, 3, 1)
        assert np.abs(got.astype(np.int64) - ref).max() <= 1, "more than 1 LSB from onnxruntime"


def test_int32_floor_div_and_mod_match_litert(tmp_path):
    """int32 FLOOR_DIV and FLOOR_MOD (MoveNet's keypoint decoding; TFLM has float32 kernels
    only, so the reference is LiteRT): floor semantics for every sign pair, a broadcast
    divisor, exact."""
    net = Net(False)
    x, y = net.input((4, 9), np.int32), net.input((1, 9), np.int32)
    outs = [net.op(code, [x, y], (4, 9), dtype=np.int32) for code in ("FLOOR_DIV", "FLOOR_MOD")]
    model = net.build(outs)
    rng = np.random.default_rng(5)
    for _ in range(4):
        xs = [rng.integers(-1000, 1000, (4, 9)).astype(np.int32),
              np.where(rng.integers(0, 2, (1, 9)) == 1, 1, -1).astype(np.int32) *
              rng.integers(1, 40, (1, 9)).astype(np.int32)]
        got, ops = _run_aotc(model, xs, tmp_path)
        for g, w in zip(got, interpret(model, xs)[0]):
            np.testing.assert_array_equal(g, w)


def test_uint8_image_cast_to_float_matches_litert(tmp_path):
    """CAST of a plain (unquantised) uint8 image to float32, as MoveNet's first op."""
    net = Net(False)
    x = net.input((1, 4, 5, 3), np.uint8)
    model = net.build([net.op("CAST", [x], (1, 4, 5, 3), dtype=np.float32)])
    xs = [np.arange(60, dtype=np.int64).reshape(1, 4, 5, 3).astype(np.uint8) * 4]
    got, _ = _run_aotc(model, xs, tmp_path)
    np.testing.assert_array_equal(got[0], interpret(model, xs)[0][0])
