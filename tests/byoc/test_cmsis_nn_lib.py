"""CMSIS-NN building blocks (aotc/byoc/cmsis_nn): locating the library, its scratch sizes per
feature set, and the parameter conversion, run through the real library.

The bit-exactness tests generate a C harness from params.py's output (weights re-laid out,
multipliers, offsets, the call function), compile it with -std=c99 -Wall -Wextra -Werror
-pedantic against the cached host build of the pinned CMSIS-NN, run it on NHWC data and compare
with (a) onnxruntime's QLinearConv / QLinearMatMul on the same data in NCHW: within 1 LSB, as
CMSIS-NN requantises with TFLite's fixed-point multiplier and onnxruntime in float with round half
to even, so a tie may round the other way; and (b) aotc's own ``requant="tflite"`` bundle of the
same model: exactly equal.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import cffi
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from opcheck import ort_run

import aotc
from aotc.byoc.cmsis_nn import library, params, scratch
from aotc.errors import AotcError

CMSIS_NN = Path(__file__).resolve().parents[3] / "shared" / "third_party" / "cmsis-nn"
WARN = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic"]


@pytest.fixture(scope="module")
def lib() -> library.CmsisNN:
    if not (CMSIS_NN / "Include" / "arm_nnfunctions.h").is_file():
        pytest.fail(f"pinned CMSIS-NN not found at {CMSIS_NN} (../shared/third_party)")
    return library.locate(CMSIS_NN)


# ----------------------------------------------------------------------------- locating
def test_locate_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CMSIS_NN_PATH", raising=False)
    with pytest.raises(AotcError, match="CMSIS-NN not found: pass --cmsis-nn-path") as e:
        library.locate()
    assert "\n" not in str(e.value)
    with pytest.raises(AotcError, match="is not a directory"):
        library.locate(tmp_path / "nope")
    (tmp_path / "Include").mkdir()
    with pytest.raises(AotcError, match="is not a CMSIS-NN tree"):
        library.locate(tmp_path)
    monkeypatch.setenv("CMSIS_NN_PATH", str(tmp_path))
    with pytest.raises(AotcError, match="CMSIS_NN_PATH .* is not a CMSIS-NN tree"):
        library.locate()
    # An explicit path wins over the environment; the environment is used without one.
    assert library.locate(CMSIS_NN).root == CMSIS_NN.resolve()
    monkeypatch.setenv("CMSIS_NN_PATH", str(CMSIS_NN))
    assert library.locate().root == CMSIS_NN.resolve()


def test_sources_and_host_build(lib: library.CmsisNN) -> None:
    names = {p.name for p in lib.sources()}
    assert {"arm_convolve_wrapper_s8.c", "arm_depthwise_conv_wrapper_s8.c",
            "arm_fully_connected_s8.c", "arm_avgpool_s8.c", "arm_softmax_s8.c",
            "arm_elementwise_add_s8.c", "arm_nntables.c"} <= names
    assert not any(n.endswith(("_f16.c", "_f32.c")) for n in names)
    a = lib.host_archive()
    assert a == lib.host_archive() and a.stat().st_size > 0  # cached: same file
    nm = subprocess.run(["nm", "--defined-only", str(a)], capture_output=True, text=True).stdout
    assert " T arm_convolve_wrapper_s8\n" in nm


@pytest.mark.parametrize("cflags, want", [
    (["-mcpu=cortex-m0plus", "-mthumb"], "none"),
    (["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"], "dsp"),
    (["-mcpu=cortex-m55", "-mthumb", "-mfpu=auto", "-mfloat-abi=hard"], "mve"),
])
def test_feature_set(cflags: list[str], want: str) -> None:
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    assert library.feature_set("arm-none-eabi-gcc", cflags) == want


def test_feature_set_host() -> None:
    assert library.feature_set(library.host_cc()) == "none"


def test_cmake_snippet_builds(lib: library.CmsisNN, tmp_path: Path) -> None:
    """The snippet configures and builds the static library with the host compiler, and a
    wrong CMSIS_NN_PATH stops the configure with the snippet's message."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake not installed")
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(t C)\n" + library.cmake_snippet())
    bad = subprocess.run(["cmake", "-S", str(src), "-B", str(tmp_path / "bad"),
                          f"-DCMSIS_NN_PATH={tmp_path}"], capture_output=True, text=True)
    # CMake wraps long message lines (a long tmp path moves words to the next line)
    assert bad.returncode != 0 and "is not a CMSIS-NN tree" in " ".join(bad.stderr.split())
    env = {k: v for k, v in os.environ.items() if k != "CMSIS_NN_PATH"}
    env["CMSIS_NN_PATH"] = str(lib.root)  # through the environment, as documented
    cfg = subprocess.run(["cmake", "-S", str(src), "-B", str(tmp_path / "b")],
                         capture_output=True, text=True, env=env)
    assert cfg.returncode == 0, cfg.stderr
    build = subprocess.run(["cmake", "--build", str(tmp_path / "b"), "--target", "cmsis-nn"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stdout[-2000:]
    assert (tmp_path / "b" / "libcmsis-nn.a").is_file()
    with pytest.raises(AotcError):
        library.cmake_snippet("bad name")


# ----------------------------------------------------------------------------- scratch
def _conv(x_shape, w_shape, y_shape, group=1, strides=(1, 1), pads=(0, 0, 0, 0)):
    w = np.ones(w_shape, np.int8)
    return params.conv_call(x_shape, w, None, y_shape, x_zp=0, real=0.01, y_zp=0, group=group,
                            strides=strides, pads=pads)


def test_scratch_sizes(lib: library.CmsisNN) -> None:
    s = scratch.Scratch(lib)
    feats = library.FEATURES
    # General 3x3 conv, 8 -> 16: im2col of 72 int8 values. Pure C and DSP expand two columns to
    # int16 (2 * 72 * 2 bytes); MVE keeps four int8 columns padded to 16 (4 * 80).
    c = _conv((1, 8, 10, 10), (16, 8, 3, 3), (1, 16, 5, 5), strides=(2, 2), pads=(1, 1, 1, 1))
    assert [s.conv(c, f) for f in feats] == [288, 288, 320]
    # 1x1 stride 1 (the fast path): no scratch with gcc on any path.
    c = _conv((1, 16, 6, 6), (8, 16, 1, 1), (1, 8, 6, 6))
    assert [s.conv(c, f) for f in feats] == [0, 0, 0]
    # 1xN (input height 1): MVE sizes its own padded row.
    c = _conv((1, 8, 1, 12), (8, 8, 1, 3), (1, 8, 1, 12), pads=(0, 1, 0, 1))
    sizes = [s.conv(c, f) for f in feats]
    assert sizes[0] == sizes[1] > 0 and sizes[2] > 0 and sizes[2] != sizes[1]
    # Depthwise 3x3 pad 1: pure C and DSP (its 3x3 kernel) need none; MVE needs its blocks.
    c = _conv((1, 16, 10, 10), (16, 1, 3, 3), (1, 16, 10, 10), group=16, pads=(1, 1, 1, 1))
    assert [s.conv(c, f) for f in feats][:2] == [0, 0] and s.conv(c, "mve") > 0
    # Depthwise 5x5: DSP's opt kernel takes C * 25 int16 values; pure C none.
    c = _conv((1, 16, 10, 10), (16, 1, 5, 5), (1, 16, 10, 10), group=16, pads=(2, 2, 2, 2))
    assert s.conv(c, "none") == 0 and s.conv(c, "dsp") == 16 * 25 * 2 and s.conv(c, "mve") > 0
    # Fully connected: only MVE, its kernel sums (4 bytes per output).
    f = params.fc_call((1, 64), np.ones((64, 12), np.int8), None, x_zp=0, real=0.5, y_zp=0)
    assert [s.fully_connected(f, x) for x in feats] == [0, 0, 48]
    # Average pool: DSP sums in int32 per channel; pure C and MVE none.
    assert [s.avgpool(5, 32, x) for x in feats] == [0, 128, 0]
    with pytest.raises(AotcError, match="unknown CMSIS-NN feature set"):
        s.avgpool(5, 32, "neon")


def test_no_scratch_kernels_have_no_size_function(lib: library.CmsisNN) -> None:
    """max pool, softmax and elementwise add/mul: the library declares no get_buffer_size."""
    header = (lib.root / "Include" / "arm_nnfunctions.h").read_text()
    for fn in scratch.NO_SCRATCH:
        assert f"{fn}(" in header
        assert f"{fn}_get_buffer_size" not in header


# ----------------------------------------------------------------------------- models
def _model(node: onnx.NodeProto, x: np.ndarray, inits: dict[str, np.ndarray]) -> onnx.ModelProto:
    g = helper.make_graph(
        [node], "q", [helper.make_tensor_value_info("x", TensorProto.INT8, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.INT8, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _qconv(rng: np.random.Generator, x_shape, w_shape, *, group=1, strides=(1, 1),
           pads=(0, 0, 0, 0), bias=True, x_zp=5, y_zp=-3):
    m = w_shape[0]
    w = rng.integers(-127, 128, w_shape).astype(np.int8)
    w_scale = rng.uniform(0.002, 0.02, m).astype(np.float32)  # per channel
    inits = {"xs": np.float32(0.05), "xz": np.int8(x_zp), "w": w, "ws": w_scale,
             "wz": np.zeros(m, np.int8), "ys": np.float32(0.1), "yz": np.int8(y_zp)}
    ins = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias:
        inits["b"] = rng.integers(-2000, 2000, m).astype(np.int32)
        ins.append("b")
    node = helper.make_node("QLinearConv", ins, ["y"], group=group, strides=list(strides),
                            pads=list(pads), kernel_shape=list(w_shape[2:]))
    x = rng.integers(-128, 128, x_shape).astype(np.int8)
    real = np.float64(np.float32(0.05)) * w_scale.astype(np.float64) / np.float64(np.float32(0.1))
    return _model(node, x, inits), x, w, inits.get("b"), real


def _qmatmul(rng: np.random.Generator, a_shape, n, *, per_column=False, x_zp=-7, y_zp=4):
    k = a_shape[-1]
    b = rng.integers(-127, 128, (k, n)).astype(np.int8)
    bs = (rng.uniform(0.002, 0.02, n) if per_column else np.full(1, 0.01)).astype(np.float32)
    inits = {"as": np.float32(0.04), "az": np.int8(x_zp), "b": b,
             "bs": bs if per_column else bs[0], "bz": np.zeros(n, np.int8) if per_column
             else np.int8(0), "ys": np.float32(0.2), "yz": np.int8(y_zp)}
    node = helper.make_node("QLinearMatMul", ["x", "as", "az", "b", "bs", "bz", "ys", "yz"],
                            ["y"])
    x = rng.integers(-128, 128, a_shape).astype(np.int8)
    real = np.float64(np.float32(0.04)) * bs.astype(np.float64) / np.float64(np.float32(0.2))
    return _model(node, x, inits), x, b, real


# ----------------------------------------------------------------------------- the harness
def _harness(lib: library.CmsisNN, tmp: Path, body: str) -> tuple[cffi.FFI, object]:
    """Compile ``body`` (arrays + a call function k + run()) into a .so linked against the
    cached host archive, with aotc's warning flags."""
    src = tmp / "harness.c"
    src.write_text("#include <stddef.h>\n#include <stdint.h>\n#include \"arm_nnfunctions.h\"\n\n"
                   + body + "\nint run(const int8_t *input, int8_t *output, int8_t *scratch);\n"
                   "int run(const int8_t *input, int8_t *output, int8_t *scratch)\n{\n"
                   "    return (int)k(input, output, scratch);\n}\n")
    so = tmp / "harness.so"
    cmd = [library.host_cc(), *WARN, "-fPIC", "-shared",
           *(f"-I{d}" for d in lib.include_dirs), str(src), str(lib.host_archive()),
           "-o", str(so)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    ffi = cffi.FFI()
    ffi.cdef("int run(const int8_t *input, int8_t *output, int8_t *scratch);")
    return ffi, ffi.dlopen(str(so))


def _run_harness(lib, tmp, body, x_nhwc, y_shape_nhwc, scratch_bytes):
    ffi, h = _harness(lib, tmp, body)
    x = np.ascontiguousarray(x_nhwc, np.int8)
    y = np.zeros(y_shape_nhwc, np.int8)
    buf = np.zeros(max(scratch_bytes, 1), np.int8)
    status = h.run(ffi.from_buffer("int8_t[]", x), ffi.from_buffer("int8_t[]", y),
                   ffi.from_buffer("int8_t[]", buf))
    assert status == 0, f"CMSIS-NN returned {status}"
    return y


def _compare(model, x, got_nchw, tmp: Path, act: tuple[int, int] = (-128, 127)) -> None:
    want = np.clip(ort_run(model, {"x": x})["y"], *act)
    assert got_nchw.shape == want.shape
    d = np.abs(got_nchw.astype(np.int64) - want.astype(np.int64))
    assert d.max() <= 1, f"{int((d > 0).sum())} of {d.size} differ, max {d.max()} LSB"
    ours = aotc.compile(model, tmp / "aotc", name="m", requant="tflite").load().run({"x": x})["y"]
    ours = np.clip(ours, *act)  # a fused clamp after the requantisation: the same as clipping
    np.testing.assert_array_equal(got_nchw, ours)
    assert (got_nchw != want).mean() < 0.05  # ties only, not a systematic offset


CONV_CASES = {
    # name: (x NCHW, w OIHW, group, strides, pads, bias)
    "3x3_stride2_pad": ((1, 8, 9, 10), (16, 8, 3, 3), 1, (2, 2), (1, 1, 1, 1), True),
    "3x3_asym_pad": ((2, 4, 7, 7), (6, 4, 3, 3), 1, (1, 1), (0, 1, 2, 1), True),
    "1x1": ((1, 16, 6, 5), (8, 16, 1, 1), 1, (1, 1), (0, 0, 0, 0), False),
    "1x1_stride2": ((1, 12, 7, 7), (8, 12, 1, 1), 1, (2, 2), (0, 0, 0, 0), True),
    "1xN": ((1, 8, 1, 12), (8, 8, 1, 3), 1, (1, 1), (0, 1, 0, 1), True),
    "depthwise_3x3": ((1, 16, 8, 9), (16, 1, 3, 3), 16, (1, 1), (1, 1, 1, 1), True),
    "depthwise_3x3_stride2": ((1, 8, 9, 9), (8, 1, 3, 3), 8, (2, 2), (1, 1, 1, 1), True),
    "depthwise_5x5_mult2": ((1, 4, 8, 8), (8, 1, 5, 5), 4, (1, 1), (2, 2, 2, 2), False),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES) + ["3x3_stride2_pad+clamp"])
def test_conv_bit_exact(lib: library.CmsisNN, tmp_path: Path, case: str) -> None:
    x_shape, w_shape, group, strides, pads, bias = CONV_CASES[case.split("+")[0]]
    act = (-3, 100) if case.endswith("+clamp") else (-128, 127)  # a fused Relu + Clip(max)
    rng = np.random.default_rng(sum(map(ord, case)))
    model, x, w, b, real = _qconv(rng, x_shape, w_shape, group=group, strides=strides,
                                  pads=pads, bias=bias)
    y_shape = ort_run(model, {"x": x})["y"].shape
    call = params.conv_call(x.shape, w, b, y_shape, x_zp=5, real=real, y_zp=-3, group=group,
                            strides=strides, pads=pads, act_lo=act[0], act_hi=act[1])
    assert call.function == ("arm_depthwise_conv_wrapper_s8" if group > 1
                             else "arm_convolve_wrapper_s8")
    assert call.params.input_offset == -5 and call.params.output_offset == -3
    size = scratch.Scratch(lib).conv(call, "none")
    body = (params.c_array("w0", call.weights, "int8_t")
            + (params.c_array("b0", call.bias, "int32_t") if call.bias is not None else "")
            + params.c_array("m0", call.multiplier, "int32_t")
            + params.c_array("s0", call.shift, "int32_t") + "\n"
            + params.conv_function(call, "k", weights="w0",
                                   bias="b0" if call.bias is not None else None,
                                   multiplier="m0", shift="s0", scratch_bytes=size))
    y = _run_harness(lib, tmp_path, body, x.transpose(0, 2, 3, 1),
                     (y_shape[0], y_shape[2], y_shape[3], y_shape[1]), size)
    _compare(model, x, y.transpose(0, 3, 1, 2), tmp_path, act)


@pytest.mark.parametrize("per_column", [False, True])
def test_fully_connected_bit_exact(lib: library.CmsisNN, tmp_path: Path,
                                   per_column: bool) -> None:
    rng = np.random.default_rng(7 + per_column)
    model, x, b, real = _qmatmul(rng, (3, 40), 10, per_column=per_column)
    call = params.fc_call(x.shape, b, None, x_zp=-7, real=real, y_zp=4)
    assert call.function == ("arm_fully_connected_per_channel_s8" if per_column
                             else "arm_fully_connected_s8")
    assert call.filter_dims == params.Dims(40, 1, 1, 10) and call.input_dims.n == 3
    sums = scratch.Scratch(lib).kernel_sums(call)  # what the MVE path reads; others ignore it
    np.testing.assert_array_equal(sums, 7 * b.astype(np.int64).sum(axis=0))
    body = (params.c_array("w0", call.weights, "int8_t")
            + params.c_array("m0", call.multiplier, "int32_t")
            + params.c_array("s0", call.shift, "int32_t")
            + params.c_array("ks0", sums, "int32_t") + "\n"
            + params.fc_function(call, "k", weights="w0", bias=None, multiplier="m0",
                                 shift="s0", kernel_sums="ks0"))
    y = _run_harness(lib, tmp_path, body, x, (3, 10), 0)
    _compare(model, x, y, tmp_path)


# ----------------------------------------------------------------------------- conversions
def test_weight_layouts() -> None:
    w = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    ohwi = params.conv_weights_ohwi(w)
    assert ohwi.shape == (2, 4, 5, 3) and ohwi[1, 2, 3, 0] == w[1, 0, 2, 3]
    dw = np.arange(6 * 3 * 3).reshape(6, 1, 3, 3)
    hwc = params.depthwise_weights_1hwc(dw)
    assert hwc.shape == (1, 3, 3, 6) and hwc[0, 1, 2, 5] == dw[5, 0, 1, 2]
    kn = np.arange(12).reshape(4, 3)
    assert params.fc_weights(kn)[2, 1] == kn[1, 2]
    assert params.fc_weights(kn.T, transposed=True)[2, 1] == kn[1, 2]


def test_requant_and_activation() -> None:
    mult, shift = params.requant([0.5, 0.75, 2.0, 1e-3])
    # real = mult * 2^(shift - 31), mult in [2^30, 2^31) (TFLite's QuantizeMultiplier).
    assert mult.dtype == np.int32 and shift.dtype == np.int32
    assert list(shift) == [0, 0, 2, -9] and mult[0] == 1 << 30 and mult[1] == 3 << 29
    assert params.activation(None, None) == params.Activation(-128, 127)
    assert params.activation(-3, 300) == params.Activation(-3, 127)


def test_struct_text_order() -> None:
    """cmsis_nn_tile is {w, h}; cmsis_nn_dims is {n, h, w, c}."""
    call = params.conv_call((1, 4, 6, 8), np.ones((5, 4, 3, 1), np.int8), None, (1, 5, 2, 8),
                            x_zp=-2, real=0.1, y_zp=1, strides=(3, 1), pads=(1, 0, 1, 0))
    assert call.params.c_init() == "{2, 1, {1, 3}, {0, 1}, {1, 1}, {-128, 127}}"
    assert call.input_dims.c_init() == "{1, 6, 8, 4}"
    assert call.filter_dims.c_init() == "{5, 3, 1, 4}"


@pytest.mark.parametrize("kwargs, why", [
    (dict(w_zp=1), "symmetric"),
    (dict(dilations=(2, 2)), "dilations"),
    (dict(x_dtype="uint8"), "must be int8"),
    (dict(group=2), "neither 1 nor depthwise"),
    (dict(bias=np.full(4, 2 ** 31 - 1000)), "overflow"),
])
def test_conv_refusals(kwargs: dict, why: str) -> None:
    bias = kwargs.pop("bias", None)
    w = np.ones((4, 4, 3, 3), np.int8)
    assert why in (params.conv_refusal((1, 4, 8, 8), w, bias, **kwargs) or "")
    if "x_dtype" not in kwargs:
        with pytest.raises(AotcError, match=why):
            params.conv_call((1, 4, 8, 8), w, bias, (1, 4, 6, 6), x_zp=0, real=0.1, y_zp=0,
                             **kwargs)
    assert params.conv_refusal((1, 4, 8, 8), w, None) is None


def test_conv_refuses_non_tflite_1xn_padding() -> None:
    """The MVE 1xN kernel fails unless right = left or left + 1: pads (2, 0) on width."""
    w = np.ones((8, 8, 1, 3), np.int8)
    assert "TFLite-style" in params.conv_refusal((1, 8, 1, 12), w, None, pads=(0, 2, 0, 0),
                                                 y_shape=(1, 8, 1, 12))
    assert params.conv_refusal((1, 8, 1, 12), w, None, pads=(0, 1, 0, 1),
                               y_shape=(1, 8, 1, 12)) is None
