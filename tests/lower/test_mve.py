"""The Helium (MVE) schedule (aotc/loops/mve.py): int8 conv and matmul compiled --target
cortex-m55 reduce 16 channels per VMLADAVA. The same model compiled for a generic MCU is the
reference: the MVE build must give the same bytes on the cortex-m55 board (QEMU) and, through
the C twins of the intrinsics, on the host; the MLPerf int8 models stay bit-exact with TFLite
Micro."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest
from onnx import helper, numpy_helper
from test_dsp import INT8_MODELS, check_target_build, qconv, qmatmul

import aotc
from aotc.loops.mve import pack_rows
from aotc.paths import runtime_dir
from aotc.targets.boards import load_board
from aotc.targets.host import WARN_FLAGS

CASES = {
    "conv1x1": (qconv, dict(kernel=(1, 1), pads=(0, 0, 0, 0), cin=32, m=8)),
    "conv1x1_c17": (qconv, dict(kernel=(1, 1), pads=(0, 0, 0, 0), cin=17, m=5, hw=(3, 3))),
    "conv3x3_padded_c33": (qconv, dict(cin=33, m=6, hw=(5, 5), xz=-7)),
    "conv3x3_padded_c3": (qconv, dict(cin=3, m=7)),
    "conv_cin1": (qconv, dict(cin=1, m=6)),
    "conv_cin3_stride2": (qconv, dict(cin=3, m=5, strides=(2, 2))),
    "conv_c17_stride2_asymmetric": (qconv, dict(cin=17, m=9, hw=(6, 5), strides=(2, 2),
                                                pads=(1, 0, 2, 1), xz=-128)),
    "conv_groups_padded": (qconv, dict(cin=34, m=6, group=2, hw=(4, 4))),
    "conv_one_pixel": (qconv, dict(kernel=(1, 1), pads=(0, 0, 0, 0), hw=(1, 1), cin=7, m=9)),
    "matmul": (qmatmul, {}),
    "matmul_k16": (qmatmul, dict(M=1, K=16, N=5)),
    "matmul_k33": (qmatmul, dict(K=33, N=13, xz=127)),
    "matmul_k1": (qmatmul, dict(K=1, N=4)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_mve_build_equals_generic_build(case, tmp_path):
    make, kw = CASES[case]
    model, x = make(**kw)
    check_target_build(model, x, tmp_path, "cortex-m55",
                       present=("vmladavaq_s8(", "#include <arm_mve.h>"),
                       absent=("vmladavaq", "arm_mve"))


DEPTHWISE = {
    "dw3x3_padded": dict(cin=4, m=4, group=4),
    "dw3x3_stride2_odd": dict(cin=3, m=3, group=3, hw=(7, 6), strides=(2, 2), xz=-128),
    "dw5x5_padded": dict(cin=3, m=3, group=3, kernel=(5, 5), pads=(2, 2, 2, 2), hw=(6, 7)),
    "dw_c1": dict(cin=1, m=1, hw=(4, 5)),
    "dw_k5x1_column": dict(cin=3, m=3, group=3, kernel=(5, 1), pads=(2, 0, 2, 0), hw=(9, 1),
                           xz=-100),
    "dw_even_width": dict(cin=2, m=2, group=2, hw=(5, 8)),
    # 15 taps + a stride of 2 exceed a vector: one output per load
    "dw_k2x15_stride2_unpaired": dict(cin=2, m=2, group=2, kernel=(2, 15), pads=(0, 7, 1, 7),
                                      hw=(3, 20), strides=(1, 2)),
}


@pytest.mark.parametrize("mode", ["rows", "pixels"])
@pytest.mark.parametrize("case", sorted(DEPTHWISE))
def test_mve_depthwise_equals_generic_build(case, mode, tmp_path):
    """conv_depthwise.py with Helium: a kernel row per VMLADAVA (a (k, 1) kernel on a
    one-column plane: the column), two outputs per input load where they fit a vector; or
    (conv.mve_depthwise=pixels, stride 1 along rows) 4 outputs of a row per int32x4_t VMLA."""
    model, x = qconv(**DEPTHWISE[case])
    generic = aotc.compile(model, tmp_path / "generic", name="m")
    keys = json.loads(aotc.compile(model, tmp_path / "d", name="m", target="cortex-m55")
                      .directory.joinpath("bundle.json").read_text())["workloads"]
    fast = aotc.compile(model, tmp_path / "target", name="m", target="cortex-m55",
                        schedules={w["key"]: {"conv.mve_depthwise": mode}
                                   for w in keys.values()})
    c = (tmp_path / "target" / "m.c").read_text()
    lanes = mode == "pixels" and DEPTHWISE[case].get("strides", (1, 1))[1] == 1 \
        and DEPTHWISE[case].get("kernel", (3, 3))[1] > 1
    assert ("vmlaq_n_s32(" if lanes else "vmladavaq_s8(") in c
    want = generic.load().run({"x": x})["y"]
    np.testing.assert_array_equal(fast.load().run({"x": x})["y"], want)
    np.testing.assert_array_equal(fast.load("cortex-m55").run({"x": x})["y"], want)


def _scaled(model, ws, ys=0.05):
    """The model with per-channel weight scales ``ws`` and output scale ``ys`` (input scale
    0.05): requantisation multipliers 0.05 * ws / ys."""
    for t in model.graph.initializer:
        if t.name == "ws":
            t.CopyFrom(numpy_helper.from_array(np.asarray(ws, np.float32), "ws"))
        elif t.name == "ys":
            t.CopyFrom(numpy_helper.from_array(np.float32(ys), "ys"))
    return model


# Multipliers with left shifts (>= 1), a zero shift ([0.5, 1)), right shifts up to 26, ties
# (powers of two), a zero multiplier (2^-40); 9 channels (a scalar tail after two vectors), or one
# multiplier for all (immediates).
MIXED = [2.0 ** -26, 0.3, 0.5, 0.75, 1.0, 1.5, 3.0, 40.0, 2.0 ** -3]
TIES = [0.5, 0.25, 0.125, 2.0 ** -4, 2.0 ** -7, 2.0 ** -40, 2.0 ** -1, 1.0, 2.0 ** -2]
REQUANT = {
    "conv_mixed_shifts": (dict(cin=5, m=9, hw=(4, 5)), MIXED),
    "conv_ties": (dict(cin=5, m=9, hw=(4, 5), xz=-128), TIES),
    "conv1x1_per_tensor_left": (dict(kernel=(1, 1), pads=(0, 0, 0, 0), cin=16, m=8), [3.0] * 8),
    "conv1x1_per_tensor_right": (dict(kernel=(1, 1), pads=(0, 0, 0, 0), cin=16, m=8),
                                 [0.01] * 8),
    "conv1x1_per_tensor_zero_shift": (dict(kernel=(1, 1), pads=(0, 0, 0, 0), cin=16, m=8),
                                      [0.75] * 8),
    "dw_mixed_shifts": (dict(cin=9, m=9, group=9, hw=(5, 6)), MIXED),
    "dw_ties_stride2": (dict(cin=9, m=9, group=9, hw=(7, 6), strides=(2, 2)), TIES),
}


@pytest.mark.parametrize("case", sorted(REQUANT))
def test_vector_requantisation_equals_generic_build(case, tmp_path):
    """The int32x4_t requantisation (VQRDMULH, the sign fixup and VRSHL) against the generic
    build's scalar MultiplyByQuantizedMultiplier (tests/lower/test_fixedpoint.py checks that
    one against qmath on edge values): left, zero and right shifts, ties, a zero multiplier,
    saturating outputs, per-channel and per-tensor constants."""
    kw, ws = REQUANT[case]
    model, x = qconv(**kw)
    check_target_build(_scaled(model, ws), x, tmp_path, "cortex-m55",
                       present=("vqrdmulhq_",), absent=("vqrdmulhq",))


def _conv_add(chain_first: bool, group: int, za: int = -3):
    """QLinearConv (8 channels, 3x3 padded, ``group``) then a residual QLinearAdd of its
    input (the conv's value first or second), fused into the conv's kernel."""
    model, x = qconv(cin=8, m=8, hw=(6, 5), group=group)
    g = model.graph
    g.node[0].output[0] = "c"
    adds = {"as": np.float32(0.1), "az": np.int8(za), "rs": np.float32(0.05),
            "rz": np.int8(3), "os": np.float32(0.07), "oz": np.int8(-5)}
    g.initializer.extend(numpy_helper.from_array(np.asarray(v), k) for k, v in adds.items())
    a, b = (["c", "as", "az"], ["x", "rs", "rz"])
    ins = a + b if chain_first else b + a
    g.node.append(helper.make_node("QLinearAdd", ins + ["os", "oz"], ["y"],
                                   domain="com.microsoft"))
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model, x


@pytest.mark.parametrize("group", [1, 8])
@pytest.mark.parametrize("chain_first", [True, False])
def test_vector_residual_add_equals_generic_build(chain_first, group, tmp_path):
    """A residual QLinearAdd fused into the conv computed on int32x4_t lanes
    (qlinear.QLinearAdd.vector_expr: gathered operand lanes for the conv's channel vectors,
    contiguous ones for the depthwise conv's): the generic build's bytes."""
    model, x = _conv_add(chain_first, group)
    check_target_build(model, x, tmp_path, "cortex-m55",
                       present=("vshlq_r_s32(", "_qlinearadd_part"), absent=("vqrdmulhq",))


@pytest.mark.parametrize("group", [1, 8])
def test_onnx_requantisation_stays_scalar(group, tmp_path):
    """--requant onnx (float scaling) keeps the scalar requantisation: the generic build's
    bytes on the host and in QEMU."""
    model, x = _conv_add(True, group)
    generic = aotc.compile(model, tmp_path / "generic", name="m", requant="onnx")
    fast = aotc.compile(model, tmp_path / "target", name="m", requant="onnx",
                        target="cortex-m55")
    assert "vqrdmulhq" not in (tmp_path / "target" / "m.c").read_text()
    want = generic.load().run({"x": x})["y"]
    np.testing.assert_array_equal(fast.load().run({"x": x})["y"], want)
    np.testing.assert_array_equal(fast.load("cortex-m55").run({"x": x})["y"], want)


def test_mve_depthwise_one_tap_rows_stay_scalar(tmp_path):
    model, _ = qconv(cin=3, m=3, group=3, kernel=(3, 1), pads=(1, 0, 1, 0), hw=(9, 2))
    aotc.compile(model, tmp_path, name="m", target="cortex-m55")
    c = (tmp_path / "m.c").read_text()
    assert "vmladavaq" not in c and "_plane[" in c


@pytest.mark.parametrize("target", ["cortex-m4f", "host"])
def test_other_targets_never_use_mve(target, tmp_path):
    model, _ = qconv(kernel=(1, 1), pads=(0, 0, 0, 0), cin=32)
    aotc.compile(model, tmp_path, name="m", target=target)
    assert "vmladavaq" not in (tmp_path / "m.c").read_text()


def test_uint8_input_keeps_the_dsp_schedule(tmp_path):
    model, _ = qconv(xdt=np.uint8, xz=130)
    aotc.compile(model, tmp_path, name="m", target="cortex-m55")
    c = (tmp_path / "m.c").read_text()
    assert "vmladavaq" not in c and "__smlad(" in c


def test_pack_rows_pads_to_whole_vectors():
    w = np.arange(-20, 14, dtype=np.int8).reshape(2, 17)
    rows = pack_rows(w)
    assert rows.shape == (2, 32) and rows.dtype == np.int8
    np.testing.assert_array_equal(rows[:, :17], w)
    assert not rows[:, 17:].any()


@pytest.mark.parametrize("stem", INT8_MODELS)
def test_mlperf_int8_mve_bit_exact_with_tflm(stem, mlperf_dir, tmp_path):
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    b = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path, name="m", target="cortex-m55")
    assert "vmladavaq_s8(" in (tmp_path / "m.c").read_text()
    runner = b.load("cortex-m55")
    i, o = runner.meta["inputs"][0]["name"], runner.meta["outputs"][0]["name"]
    got = np.stack([runner.run({i: x})[o] for x in vec["input"][:2]])
    want = vec["output_tflm"][:2]
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_mve_bundle_is_strict_c99_for_the_board_compiler(tmp_path):
    """model.c includes arm_mve.h under the host build's warning flags (-std=c99 -pedantic
    -Werror): the non-polymorphic intrinsic names need no C11 _Generic."""
    board = load_board("cortex-m55")
    cc = shutil.which("arm-none-eabi-gcc")
    if cc is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    model, _ = qconv(cin=17, m=5)
    aotc.compile(model, tmp_path, name="m", target="cortex-m55")
    out = subprocess.run([cc, *board.cflags, *WARN_FLAGS, "-O2", "-I", str(tmp_path), "-I",
                          str(runtime_dir()), "-S", "-o", "-", str(tmp_path / "m.c")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "vmladava.s8" in out.stdout and "vldrb.8" in out.stdout
