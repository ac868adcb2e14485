"""The DSP-extension schedule (aotc/loops/dsp.py): int8 conv and matmul compiled --target
cortex-m4f reduce two channels per SMLAD. The same model compiled for a generic MCU is the
reference: the DSP build must give the same bytes on the cortex-m4f board (QEMU) and, through
the C definitions of the intrinsics, on the host; the MLPerf int8 models stay bit-exact with
TFLite Micro."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import aotc
from aotc.loops.dsp import pack_quads, pack_quads_wide, pack_words, widen


def _model(node: onnx.NodeProto, inits: dict, x_shape: tuple, xdt: type, opset: int
           ) -> onnx.ModelProto:
    et = TensorProto.INT8 if xdt == np.int8 else TensorProto.UINT8
    g = helper.make_graph([node], "q", [helper.make_tensor_value_info("x", et, list(x_shape))],
                          [helper.make_tensor_value_info("y", et, None)],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def qconv(cin=4, m=6, kernel=(3, 3), pads=(1, 1, 1, 1), group=1, hw=(7, 7), xz=3, xdt=np.int8,
          strides=(1, 1), seed=0, bias=None, ws=None):
    rng = np.random.default_rng(seed)
    lo, hi = np.iinfo(xdt).min, np.iinfo(xdt).max
    inits = {"xs": np.float32(0.05), "xz": xdt(xz),
             "w": rng.integers(-128, 128, (m, cin // group, *kernel)).astype(np.int8),
             "ws": rng.uniform(0.002, 0.02, m).astype(np.float32),
             "wz": np.zeros(m, np.int8), "ys": np.float32(0.1), "yz": xdt(lo + 100),
             "b": rng.integers(-500, 500, m).astype(np.int32)}
    if bias is not None:
        inits["b"] = np.asarray(bias, np.int32)
    if ws is not None:
        inits["ws"] = np.asarray(ws, np.float32)
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                            ["y"], pads=list(pads), kernel_shape=list(kernel), group=group,
                            strides=list(strides))
    shape = (1, cin, *hw)
    return _model(node, inits, shape, xdt, 17), rng.integers(lo, hi + 1, shape).astype(xdt)


def qconv_nhwc(cin=3, m=8, hw=(16, 16), **kw):
    """qconv's model fed channels last, as the MLPerf models' first convs are: x (1, H, W, C)
    through a Transpose, the conv reading it as a permuted view."""
    model, x = qconv(cin=cin, m=m, hw=hw, **kw)
    g = model.graph
    conv = g.node[0]
    conv.input[0] = "xt"
    g.node.insert(0, helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 3, 1, 2]))
    g.input[0].CopyFrom(helper.make_tensor_value_info(
        "x", g.input[0].type.tensor_type.elem_type, [1, *hw, cin]))
    return model, np.ascontiguousarray(x.transpose(0, 2, 3, 1))


def qmatmul(M=3, K=10, N=7, xz=3, xdt=np.int8, seed=0):
    rng = np.random.default_rng(seed)
    lo, hi = np.iinfo(xdt).min, np.iinfo(xdt).max
    inits = {"as": np.float32(0.05), "az": xdt(xz),
             "b": rng.integers(-128, 128, (K, N)).astype(np.int8),
             "bs": rng.uniform(0.002, 0.02, N).astype(np.float32),
             "bz": np.zeros(N, np.int8), "ys": np.float32(0.1), "yz": xdt(lo + 100)}
    node = helper.make_node("QLinearMatMul", ["x", "as", "az", "b", "bs", "bz", "ys", "yz"],
                            ["y"])
    return _model(node, inits, (M, K), xdt, 21), rng.integers(lo, hi + 1, (M, K)).astype(xdt)


CASES = {
    "conv3x3_padded": (qconv, {}),
    "conv1x1": (qconv, dict(kernel=(1, 1), pads=(0, 0, 0, 0), cin=8, m=8)),
    "conv_odd_channels": (qconv, dict(cin=5, m=7)),
    "conv_cin1": (qconv, dict(cin=1, m=6)),
    "conv_cin3_stride2": (qconv, dict(cin=3, m=5, strides=(2, 2))),
    "conv_uint8": (qconv, dict(xdt=np.uint8, xz=130)),
    "conv_groups": (qconv, dict(cin=8, m=12, group=2, kernel=(1, 1), pads=(0, 0, 0, 0))),
    "conv_one_pixel": (qconv, dict(kernel=(1, 1), pads=(0, 0, 0, 0), hw=(1, 1), cin=7, m=9)),
    # 1x1 columns of 65 words (inline on the M4, a tile requantising its accumulators, a rest
    # of 2 channels) and of 129 (outlined, each pixel's column word loaded before its MACs);
    # 4 pixels' column words from one word load per channel, 2 pixels in a rest group.
    "conv1x1_65_words": (qconv, dict(kernel=(1, 1), pads=(0, 0, 0, 0), hw=(2, 3), cin=130,
                                     m=6, xz=-128)),
    "conv1x1_129_words": (qconv, dict(kernel=(1, 1), pads=(0, 0, 0, 0), hw=(2, 3), cin=258,
                                      m=4, xz=0)),
    "conv_groups_padded_stride2": (qconv, dict(cin=6, m=10, group=2, hw=(6, 5),
                                               strides=(2, 2), pads=(1, 0, 2, 1))),
    "conv_uint8_odd_pixels": (qconv, dict(xdt=np.uint8, xz=7, cin=3, m=3, hw=(3, 5),
                                          kernel=(2, 3), pads=(0, 1, 1, 1))),
    # conv.column=rows (even channel counts, 2-D kernels): the row words built once per
    # output row; strides, uneven pads (a pad wider than the kernel's reach on one side),
    # groups, no padding, and rows of output pixels not a multiple of 4 (a rest group).
    "conv_rows_stride2_uneven": (qconv, dict(cin=4, m=6, hw=(7, 6), strides=(2, 2),
                                             pads=(1, 0, 2, 1))),
    "conv_rows_groups": (qconv, dict(cin=8, m=6, group=2, hw=(5, 6), strides=(1, 2),
                                     pads=(0, 1, 1, 0))),
    "conv_rows_narrow": (qconv, dict(cin=2, m=4, hw=(4, 3), kernel=(2, 3),
                                     pads=(0, 2, 3, 2))),
    "conv_rows_valid": (qconv, dict(cin=6, m=4, hw=(6, 9), pads=(0, 0, 0, 0), xz=-7)),
    # Flat columns (odd channel counts) with most pixels inside the input (over FAST_INSIDE):
    # the unguarded path for those, the zero fill and guarded taps at the edges.
    "conv_cin3_stride2_mostly_inside": (qconv, dict(cin=3, m=8, hw=(20, 20), strides=(2, 2),
                                                    pads=(0, 0, 1, 1))),
    "conv_cin3_padded_mostly_inside": (qconv, dict(cin=3, m=6, hw=(16, 16), xz=-128)),
    # Channels-last int8 input, the flat column's kernel rows contiguous: read four bytes a
    # word load (schedules/conv/dsp.py word_taps), the rows' last bytes two a word; padded
    # pixels through the lanes array. VWW's first conv's shape (3 channels, stride 2, padded
    # after), padding on every side, one channel (rows of 5: a word and a byte), 5 channels
    # (rows of 15: three words and three bytes), no padding (every pixel unguarded).
    "conv_nhwc_cin3_stride2": (qconv_nhwc, dict(hw=(20, 20), strides=(2, 2),
                                                pads=(0, 0, 1, 1), xz=-128)),
    "conv_nhwc_cin3_padded": (qconv_nhwc, dict(m=6, seed=1, xz=5)),
    "conv_nhwc_cin1_rows_of_5": (qconv_nhwc, dict(cin=1, m=4, kernel=(3, 5),
                                                  pads=(1, 2, 1, 2), hw=(24, 30), seed=2)),
    "conv_nhwc_cin5": (qconv_nhwc, dict(cin=5, m=6, kernel=(2, 3), pads=(0, 1, 1, 1),
                                        hw=(12, 14), seed=3)),
    "conv_nhwc_valid": (qconv_nhwc, dict(cin=3, m=5, pads=(0, 0, 0, 0), hw=(7, 9), seed=4)),
    # Most pixels with taps in the padding (KWS's first conv: 52%), a 4x4 kernel, stride 2.
    "conv_nhwc_cin1_mostly_padded": (qconv_nhwc, dict(cin=1, m=4, kernel=(4, 4), hw=(9, 6),
                                                      strides=(2, 2), pads=(1, 1, 2, 2),
                                                      seed=5, xz=-3)),
    "matmul": (qmatmul, {}),
    "matmul_odd": (qmatmul, dict(K=9, N=5)),
    "matmul_k1": (qmatmul, dict(K=1, N=4)),
    "matmul_uint8": (qmatmul, dict(xdt=np.uint8, xz=120, K=33, N=13)),
}
# K a multiple of 4 with int8 activations: gemm.dsp_k's quads (a word of four activations per
# SMLAD pair); K = 40 is 2 loop steps of 16 and 2 quads after them, N = 10 two tiles of 4 and
# one of 2; with and without the activations' zero point (SADD16).
QUADS = {
    "matmul_quads": (qmatmul, dict(K=40, N=10, M=2)),
    "matmul_quads_zp0": (qmatmul, dict(K=16, N=8, xz=0, seed=3)),
    "matmul_quads_one_column": (qmatmul, dict(K=4, N=1, xz=-128, M=1, seed=4)),
}


def check_target_build(model, x, tmp_path, target, present=(), absent=()):
    """The model compiled for ``target`` (its C holds each string of ``present``, the generic
    build's C none of ``absent``) gives the generic build's bytes on the host, through the
    intrinsics' C twins, and on the target board in QEMU."""
    generic = aotc.compile(model, tmp_path / "generic", name="m")
    fast = aotc.compile(model, tmp_path / "target", name="m", target=target)
    c_fast = (tmp_path / "target" / "m.c").read_text()
    c_generic = (tmp_path / "generic" / "m.c").read_text()
    assert all(s in c_fast for s in present), present
    assert not any(s in c_generic for s in absent), absent
    want = generic.load().run({"x": x})["y"]
    np.testing.assert_array_equal(fast.load().run({"x": x})["y"], want)
    np.testing.assert_array_equal(fast.load(target).run({"x": x})["y"], want)


@pytest.mark.parametrize("case", sorted(CASES))
def test_dsp_build_equals_generic_build(case, tmp_path):
    make, kw = CASES[case]
    model, x = make(**kw)
    check_target_build(model, x, tmp_path, "cortex-m4f",
                       present=("__smlad(", "#include <arm_acle.h>"),
                       absent=("smlad", "arm_acle"))


@pytest.mark.parametrize("case", sorted(c for c in CASES if c.startswith("conv_nhwc")))
def test_flat_column_reads_channels_last_rows_by_words(case, tmp_path):
    make, kw = CASES[case]
    model, x = make(**kw)
    check_target_build(model, x, tmp_path, "cortex-m7", present=("aotc_ld_word8(&x",))


@pytest.mark.parametrize("target", ["cortex-m4f", "cortex-m33"])
@pytest.mark.parametrize("case", sorted(QUADS))
def test_dsp_quads_build_equals_generic_build(case, target, tmp_path):
    """On cortex-m4f and cortex-m33 the quads' weights pre-extended to int16 (gemm.dsp_wide's
    default where they fit the part's flash: no SXTB16 on a weight word)."""
    make, kw = QUADS[case]
    model, x = make(**kw)
    check_target_build(model, x, tmp_path, target,
                       present=("__smlad(", "aotc_ld_word8(&"), absent=("smlad", "arm_acle"))
    c = (tmp_path / "target" / "m.c").read_text()
    assert "__sxtb16(wq" not in c


DEPTHWISE = {
    "dw3x3_padded": dict(cin=4, m=4, group=4),
    "dw3x3_stride2_odd": dict(cin=3, m=3, group=3, hw=(7, 6), strides=(2, 2)),
    "dw_asymmetric_pads_uint8": dict(cin=2, m=2, group=2, xdt=np.uint8, xz=130, hw=(5, 4),
                                     kernel=(3, 2), pads=(0, 1, 2, 0)),
    "dw_c1": dict(cin=1, m=1, hw=(4, 5)),
    # 6 output rows of stride 1: 3 rows a step (conv.depthwise_rows' default there)
    "dw3x3_rows3": dict(cin=4, m=4, group=4, hw=(6, 5)),
    # rows longer than 8 copied into the plane COPY_STEP (16) a step and the rest after
    # them: 37 = 2 x 16 + 5; 12, no step. int8 rows go 4 a word (aotc_st_pair16): 37 = two
    # steps of 4 words, a word and one input; 12 three words; 5, 6 (above) a word and the rest
    "dw_long_rows": dict(cin=2, m=2, group=2, hw=(4, 37), strides=(1, 2)),
    "dw_rows_of_12": dict(cin=3, m=3, group=3, hw=(3, 12)),
    "dw_kx1_unpadded": dict(cin=5, m=5, group=5, kernel=(3, 1), pads=(0, 0, 0, 0), hw=(6, 2)),
    # odd kernel rows: two rows' last taps share a weight word (SMLABB / SMLABT), an odd
    # row count's last alone; 4 rows of 3 taps and 5 of 5 (3x3 above: 3 of 3)
    "dw_4x3": dict(cin=3, m=3, group=3, kernel=(4, 3), pads=(1, 1, 2, 1), hw=(6, 7)),
    "dw_5x5": dict(cin=2, m=2, group=2, kernel=(5, 5), pads=(2, 2, 2, 2), hw=(7, 9)),
}


@pytest.mark.parametrize("case", sorted(DEPTHWISE))
def test_depthwise_schedule_equals_generic_build(case, tmp_path):
    """conv_depthwise.py: the zero-point-bordered plane and the folded bias give the generic
    kernel's bytes (host, and cortex-m4f in QEMU)."""
    model, x = qconv(**DEPTHWISE[case])
    check_target_build(model, x, tmp_path, "cortex-m4f", present=("_plane[",),
                       absent=("_plane[",))


def test_depthwise_copies_int8_rows_into_the_plane_a_word_at_a_time(tmp_path):
    """int8 rows of 4 or more inputs: LDR, SXTB16 twice, PKHBT / PKHTB and two word stores a
    4 inputs (bytes: test_depthwise_schedule_equals_generic_build); uint8 and rows of 3 one
    input at a time."""
    for name, kw, words in [("a", DEPTHWISE["dw_long_rows"], True),
                            ("b", DEPTHWISE["dw_asymmetric_pads_uint8"], False),
                            ("c", dict(cin=2, m=2, group=2, hw=(5, 3)), False)]:
        model, _ = qconv(**kw)
        aotc.compile(model, tmp_path / name, name="m", target="cortex-m4f")
        c = (tmp_path / name / "m.c").read_text()
        assert "__smlad(aotc_ld_pair16(" in c
        # 3 taps a kernel row (not b's 2): rows 0 and 1 share their last taps' word
        assert ("__smlabt(aotc_ld_pair16(" in c) == (name != "b"), name
        assert "aotc_st_pair16(&" in c  # the zero-point border, 2 a word, in all three
        assert ("aotc_pkhtb(" in c) == words, name
        assert ("aotc_ld_word8(&" in c) == words, name


def test_depthwise_uses_smlad_on_tap_pairs_unless_the_schedule_says_bytes(tmp_path):
    model, _ = qconv(cin=4, m=4, group=4)
    aotc.compile(model, tmp_path / "a", name="m", target="cortex-m4f")
    assert "__smlad(aotc_ld_pair16(" in (tmp_path / "a" / "m.c").read_text()
    key = next(iter(json.loads((tmp_path / "a" / "bundle.json").read_text())["workloads"]
                    .values()))["key"]
    aotc.compile(model, tmp_path / "b", name="m", target="cortex-m4f",
                 schedules={key: {"conv.depthwise": "bytes"}})
    assert "smlad" not in (tmp_path / "b" / "m.c").read_text()


# Channel 1's multiplier ws * xs / ys against a bias of 1.2e9: 50.5 / 1.2e9 puts its outputs
# on both sides of 50.5 (a rounding boundary) over its accumulators' range, 4e-6 saturates it.
BIG_BIAS = {"varying": 50.5 / 1.2e9 * 0.1 / 0.05, "constant": 4e-6}


@pytest.mark.parametrize("group", [1, 4])
@pytest.mark.parametrize("big", [None, "varying", "constant"])
def test_doubled_requantisation_only_below_2_30(group, big, tmp_path):
    """The DSP schedules requantise with aotc_q_requant_h (the accumulator doubled) only where
    every |accumulator| is provably below 2^30; a bias of 1.2e9 keeps aotc_q_requant_r,
    unless that channel's output is the same at both ends of its accumulators' range (then
    constant: its multiplier 0, Requant._h_params). The depthwise conv (group 4) sums its
    accumulators already doubled (aotc_q_requant_hd; the constant channel's, near 2^31,
    wrap, which its output ignores). All give the generic build's bytes (host, and
    cortex-m4f in QEMU)."""
    bias = [-3, 1_200_000_000, 40, -7] if big else None
    ws = [0.01, BIG_BIAS[big], 0.005, 0.02] if big else None
    model, x = qconv(cin=4, m=4, group=group, bias=bias, ws=ws, pads=(0, 1, 1, 0))
    doubled = big != "varying"
    h = "aotc_q_requant_hd(" if group == 4 else "aotc_q_requant_h("
    check_target_build(model, x, tmp_path, "cortex-m4f",
                       present=(h if doubled else "aotc_q_requant_r(",))
    c = (tmp_path / "target" / "m.c").read_text()
    assert (h in c) == doubled
    assert ("aotc_q_requant_h(" in c) == (doubled and group == 1)


def test_host_target_never_uses_the_dsp_schedule(tmp_path):
    model, _ = qconv(kernel=(1, 1), pads=(0, 0, 0, 0))
    aotc.compile(model, tmp_path, name="m", target="host")
    assert "smlad" not in (tmp_path / "m.c").read_text()


def _sxtb16(w: np.ndarray, shift: int) -> np.ndarray:
    b = w.astype("<u4") >> shift
    return np.stack([(b & 0xFF).astype(np.uint8).view(np.int8),
                     ((b >> 16) & 0xFF).astype(np.uint8).view(np.int8)], -1).astype(np.int64)


def test_pack_words_lane_order():
    """SXTB16 of a word gives the even output channel's pair of input channels, SXTB16 of the
    word >> 8 the odd one's; past the edges the weights are 0."""
    rng = np.random.default_rng(1)
    w = rng.integers(-128, 128, (5, 3, 7)).astype(np.int8)  # (C, K, J)
    words = pack_words(w)
    assert words.shape == (3, 3, 4) and words.dtype == np.int32
    padded = np.zeros((6, 3, 8), np.int64)
    padded[:5, :, :7] = w
    for shift, j0 in ((0, 0), (8, 1)):
        lanes = _sxtb16(words, shift)  # (cp, k, jp, 2)
        want = padded[:, :, j0::2].reshape(3, 2, 3, 4).transpose(0, 2, 3, 1)
        np.testing.assert_array_equal(lanes, want)


def test_pack_quads_lane_order():
    """A pack_quads word holds column j's four consecutive k, first k in byte 0: SXTB16 of
    it gives k 0 and 2, of it >> 8 k 1 and 3, as x_quad splits four activations."""
    rng = np.random.default_rng(2)
    w = rng.integers(-128, 128, (12, 5)).astype(np.int8)  # (K, J)
    words = pack_quads(w)
    assert words.shape == (3, 5) and words.dtype == np.int32
    quads = w.astype(np.int64).reshape(3, 4, 5).transpose(0, 2, 1)  # (q, j, 4)
    np.testing.assert_array_equal(_sxtb16(words, 0), quads[..., 0::2])
    np.testing.assert_array_equal(_sxtb16(words, 8), quads[..., 1::2])


def test_widen_is_sxtb16_at_compile_time():
    """widen's two words per packed word are its SXTB16 and SXTB16 ROR 8 (the lanes the DSP
    schedules unpack at run time), for the conv's pack_words too."""
    rng = np.random.default_rng(6)
    w = rng.integers(-128, 128, (5, 3, 7)).astype(np.int8)
    w[0, 0, :2] = [-128, 127]
    words = pack_words(w)
    wide = widen(words)
    assert wide.shape == (*words.shape, 2) and wide.dtype == np.int32
    lanes = wide.view("<i2").reshape(*words.shape, 2, 2).astype(np.int64)
    np.testing.assert_array_equal(lanes[..., 0, :], _sxtb16(words, 0))
    np.testing.assert_array_equal(lanes[..., 1, :], _sxtb16(words, 8))


def test_pack_quads_wide_is_pack_quads_sign_extended():
    """pack_quads_wide's two words per column and quad are SXTB16 and SXTB16 ROR 8 of
    pack_quads' word: the int16 lanes (k0, k2) and (k1, k3), low lane first."""
    rng = np.random.default_rng(5)
    w = rng.integers(-128, 128, (12, 5)).astype(np.int8)
    w[0, 0], w[2, 1] = -128, 127
    wide = pack_quads_wide(w)
    assert wide.shape == (3, 5, 2) and wide.dtype == np.int32
    lanes = wide.view("<i2").reshape(3, 5, 2, 2).astype(np.int64)
    words = pack_quads(w)
    np.testing.assert_array_equal(lanes[:, :, 0], _sxtb16(words, 0))
    np.testing.assert_array_equal(lanes[:, :, 1], _sxtb16(words, 8))


INT8_MODELS = ["kws_ref_model_int8_qdq", "vww_96_int8_qdq", "pretrainedResnet_int8_qdq",
               "ad01_int8_qdq", "str_ww_ref_model_int8_qdq"]
MODEL_CASES = [("cortex-m4f", s) for s in INT8_MODELS] + [
    ("cortex-m33", "kws_ref_model_int8_qdq"),
    # The M33's part (512 KB): some layers widened to int16, the others packed (VWW, AD).
    ("cortex-m33", "vww_96_int8_qdq"),
    # gemm.dsp_k's quads (AD: all matmuls) on the other two cores of the DSP extension.
    ("cortex-m33", "ad01_int8_qdq"), ("cortex-m7", "ad01_int8_qdq"),
    # conv.dsp_wide's int16 weights (the default on the M7 as on the M4).
    ("cortex-m7", "kws_ref_model_int8_qdq"),
    # the M7's own pointwise defaults (3-pixel groups, conv.dsp_pixels_default).
    ("cortex-m7", "vww_96_int8_qdq")]


@pytest.mark.parametrize("board,stem", MODEL_CASES)
def test_mlperf_int8_dsp_bit_exact_with_tflm(board, stem, mlperf_dir, tmp_path):
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    b = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path, name="m", target=board)
    assert "__smlad(" in (tmp_path / "m.c").read_text()
    runner = b.load(board)
    i, o = runner.meta["inputs"][0]["name"], runner.meta["outputs"][0]["name"]
    got = np.stack([runner.run({i: x})[o] for x in vec["input"][:2]])
    want = vec["output_tflm"][:2]
    np.testing.assert_array_equal(got.reshape(want.shape), want)
