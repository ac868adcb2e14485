"""DFT, STFT, window generators and MelWeightMatrix against onnxruntime (numpy's FFT for the
cases onnxruntime does not implement): axes, dft_length truncation and zero padding, real and
complex inputs, onesided, inverse, windows with both periodic settings and output dtypes."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from opcheck import check, check_node, compile_and_run, make_model, rand

import aotc
from aotc.errors import AotcError

TOL = dict(atol=1e-4, rtol=1e-4)


def _generated(op, attrs, inits, n_out, dtype=np.float32, **tol):
    """The folded generator output plus a zero graph input (the board runner needs one), so
    the bundle still returns exactly the generated values."""
    z = np.zeros(n_out, dtype)
    nodes = [helper.make_node(op, list(inits), ["g"], **attrs),
             helper.make_node("Add", ["g", "z"], ["y"])]
    m = make_model(nodes, {"z": z}, {"y": (dtype, list(n_out))}, inits, opset=17)
    check(m, {"z": z}, **tol)


# A one-sample symmetric window is 0/0 in the formula; it is left out rather than skipped.
WINDOW_CASES = [(p, n) for p in (0, 1) for n in (1, 8, 13) if not (n == 1 and p == 0)]


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic,size", WINDOW_CASES)
def test_windows(op, periodic, size):
    _generated(op, {"periodic": periodic}, {"n": np.array(size, np.int64)}, (size,),
               atol=1e-6, rtol=1e-6)


def test_window_output_datatype():
    _generated("HannWindow", {"output_datatype": TensorProto.INT32},
               {"n": np.array(6, np.int32)}, (6,), np.int32)


def test_window_feeds_a_kernel():
    # The folded window is a constant operand of the next node.
    x = rand(10)
    nodes = [helper.make_node("HammingWindow", ["n"], ["w"]),
             helper.make_node("Mul", ["x", "w"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [10])}, {"n": np.array(10, np.int64)})
    check(m, {"x": x}, atol=1e-6, rtol=1e-6)


def test_melweightmatrix():
    inits = {"bins": np.array(8, np.int64), "len": np.array(32, np.int64),
             "sr": np.array(16000, np.int64), "lo": np.array(100.0, np.float32),
             "hi": np.array(6000.0, np.float32)}
    _generated("MelWeightMatrix", {}, inits, (17, 8), atol=1e-6, rtol=1e-6)


def _dft_numpy(x, length, axis, inverse, onesided):
    sig = x[..., 0] if x.shape[-1] == 1 else x[..., 0] + 1j * x[..., 1]
    if inverse and onesided:
        return np.fft.irfft(sig, n=length, axis=axis)[..., None]
    y = np.fft.ifft(sig, n=length, axis=axis) if inverse else np.fft.fft(sig, n=length, axis=axis)
    if onesided:
        y = np.take(y, np.arange(length // 2 + 1), axis=axis)
    return np.stack([y.real, y.imag], axis=-1)


DFT_CASES = [  # (shape, axis, dft_length, inverse, onesided)
    ((2, 8, 1), 1, None, 0, 0),
    ((2, 8, 2), 1, None, 0, 0),
    ((3, 6, 4, 2), 1, None, 0, 0),
    ((3, 6, 4, 1), 2, None, 0, 1),
    ((3, 6, 4, 2), -3, None, 1, 0),
    ((2, 9, 1), 1, 12, 0, 0),
    ((2, 9, 2), 1, 5, 1, 0),
    ((2, 7, 1), 1, 7, 0, 1),
]


@pytest.mark.parametrize("shape,axis,length,inverse,onesided", DFT_CASES)
def test_dft20(shape, axis, length, inverse, onesided):
    x = rand(*shape, seed=1)
    inits = {"ax": np.array(axis, np.int64)}
    names = ["x", "", "ax"]
    if length is not None:
        inits["len"] = np.array(length, np.int64)
        names[1] = "len"
    check_node("DFT", {"x": x}, {"inverse": inverse, "onesided": onesided}, inits,
               opset=20, input_names=names, **TOL)


@pytest.mark.parametrize("axis", [1, 2])
def test_dft17_axis_attribute(axis):
    x = rand(2, 5, 6, 2, seed=4)
    check_node("DFT", {"x": x}, {"axis": axis}, opset=17, **TOL)


@pytest.mark.parametrize("n,length", [(5, None), (5, 8), (4, 7), (6, 6)])
def test_irfft_against_numpy(n, length):
    # onnxruntime has no IRFFT mode (inverse + onesided): numpy's irfft is the oracle.
    x = rand(2, n, 3, 2, seed=2)
    inits = {"ax": np.array(1, np.int64)}
    names = ["x", "", "ax"]
    if length is not None:
        inits["len"] = np.array(length, np.int64)
        names[1] = "len"
    L = length or 2 * (n - 1)
    node = helper.make_node("DFT", names, ["y"], inverse=1, onesided=1)
    m = make_model([node], {"x": x}, {"y": (np.float32, [2, L, 3, 1])}, inits, opset=20)
    got, _ = compile_and_run(m, {"x": x})
    np.testing.assert_allclose(got["y"], _dft_numpy(x, L, 1, 1, 1), **TOL)


@pytest.mark.parametrize("window", [False, True])
@pytest.mark.parametrize("onesided", [0, 1])
def test_stft(window, onesided):
    x = rand(2, 40, 1, seed=3)
    inits = {"step": np.array(6, np.int64)}
    names = ["x", "step"]
    if window:
        inits["w"] = np.hanning(10).astype(np.float32)
        names.append("w")
    else:
        inits["fl"] = np.array(10, np.int64)
        names += ["", "fl"]
    check_node("STFT", {"x": x}, {"onesided": onesided}, inits, opset=17, input_names=names,
               **TOL)


def test_stft_complex_runtime_window():
    x = rand(1, 30, 2, seed=5)
    w = rand(8, seed=6, lo=0, hi=1)
    check_node("STFT", {"x": x, "w": w}, {"onesided": 0}, {"step": np.array(4, np.int64)},
               opset=17, input_names=["x", "step", "w"], **TOL)


def test_dft_axis_on_complex_dim_rejected(tmp_path):
    x = rand(2, 8, 1)
    node = helper.make_node("DFT", ["x", "", "ax"], ["y"], name="dft")
    m = make_model([node], {"x": x}, {"y": (np.float32, None)}, {"ax": np.array(2, np.int64)},
                   opset=20)
    with pytest.raises(AotcError, match="axis=2 is out of range"):
        aotc.compile(m, tmp_path, name="m")


def test_dft_runtime_length_rejected(tmp_path):
    x = rand(2, 8, 1)
    node = helper.make_node("DFT", ["x", "len"], ["y"], name="dft", axis=1)
    m = make_model([node], {"x": x, "len": np.array([8], np.int64)},
                   {"y": (np.float32, None)}, opset=17)
    with pytest.raises(AotcError, match="input 1 must be a compile-time constant"):
        aotc.compile(m, tmp_path, name="m")
