"""Attention, RotaryEmbedding, LinearAttention and CausalConvWithState.

Attention (opset 23/24) and RotaryEmbedding run against onnxruntime. The cases onnxruntime
does not run are checked against onnx.reference.ReferenceEvaluator instead (named ``*_ref``):
a float mask shorter than the kv sequence (onnxruntime insists on the full length), the opset-25
sliding window (onnxruntime 1.31 has no Attention-25), and the opset-27 LinearAttention and
CausalConvWithState (no onnxruntime kernel)."""

import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator
from opcheck import check, compile_and_run, make_model, rand, run_on_boards

from aotc.errors import AotcError

TOL = dict(atol=1e-5, rtol=1e-4)  # expf/tanhf may differ by an ulp from onnxruntime's


def model_of(op, inputs, attrs, outputs, opset, names=None, initializers=None):
    """A one-node model; ``names`` may hold "" for omitted optional inputs, ``outputs`` "" for
    omitted optional outputs. Output types come from onnx shape inference."""
    node = helper.make_node(op, list(names or inputs), list(outputs), **attrs)
    m = make_model([node], inputs, {o: (np.float32, None) for o in outputs if o},
                   initializers, opset)
    inferred = onnx.shape_inference.infer_shapes(m)
    by_name = {v.name: v for v in [*inferred.graph.value_info, *inferred.graph.output]}
    del m.graph.output[:]
    m.graph.output.extend(by_name[o] for o in outputs if o)
    return m


def check_ref(model, feeds, atol=1e-5, rtol=1e-4):
    """Like opcheck.check, with ReferenceEvaluator as the oracle (ops onnxruntime lacks)."""
    want = ReferenceEvaluator(model).run(None, feeds)
    names = [o.name for o in model.graph.output]
    with tempfile.TemporaryDirectory(prefix="aotc_test_") as tmp:
        got, bundle = compile_and_run(model, feeds, Path(tmp) / "bundle")
        for k, w in zip(names, want):
            assert got[k].shape == w.shape, (k, got[k].shape, w.shape)
            np.testing.assert_allclose(got[k], w, atol=atol, rtol=rtol, err_msg=k)
        run_on_boards(bundle, feeds, got, Path(tmp) / "fw")


# ------------------------------------------------------------------------------------ Attention
Q4, K4, V4 = rand(2, 4, 3, 8), rand(2, 2, 5, 8, seed=1), rand(2, 2, 5, 6, seed=2)


def test_attention_gqa_causal_rectangular():
    # 4 query heads share 2 kv heads; Sq=3 < Skv=5 with no cache: top-left causal frontier.
    m = model_of("Attention", {"Q": Q4, "K": K4, "V": V4}, {"is_causal": 1}, ["Y"], 23)
    check(m, {"Q": Q4, "K": K4, "V": V4}, **TOL)


def test_attention_3d_gqa_scaled():
    q, k, v = rand(2, 3, 32), rand(2, 5, 16, seed=1), rand(2, 5, 12, seed=2)
    m = model_of("Attention", {"Q": q, "K": k, "V": v},
                 {"q_num_heads": 4, "kv_num_heads": 2, "scale": 0.3}, ["Y"], 23)
    check(m, {"Q": q, "K": k, "V": v}, **TOL)


def test_attention_bool_mask_with_fully_masked_row_gives_zeros():
    mask = rand(3, 5, seed=7, lo=0, hi=1).astype(bool)
    mask[1] = False  # query row 1 attends nothing: Y row is 0, not NaN
    feeds = {"Q": Q4, "K": K4, "V": V4, "M": mask}
    check(model_of("Attention", feeds, {}, ["Y"], 23), feeds, **TOL)


def test_attention_rank3_float_mask_broadcasts_over_batch():
    feeds = {"Q": Q4, "K": K4, "V": V4, "M": rand(4, 3, 5, seed=4)}
    check(model_of("Attention", feeds, {"softcap": 1.5}, ["Y"], 23), feeds, **TOL)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_attention_qk_matmul_output_modes(mode):
    # Mode 0 is the raw product even with softcap; 1 after softcap; 2 plus the mask; 3 softmax.
    feeds = {"Q": Q4, "K": K4, "V": V4, "M": rand(3, 5, seed=4)}
    m = model_of("Attention", feeds, {"qk_matmul_output_mode": mode, "softcap": 1.5},
                 ["Y", "", "", "qk"], 23)
    check(m, feeds, **TOL)


def test_attention_past_and_present_causal():
    # The causal frontier is offset by the cache length (query i sees keys j <= i + past).
    feeds = {"Q": Q4, "K": K4, "V": V4, "pk": rand(2, 2, 4, 8, seed=5),
             "pv": rand(2, 2, 4, 6, seed=6)}
    m = model_of("Attention", feeds, {"is_causal": 1}, ["Y", "pk_out", "pv_out"], 23,
                 names=["Q", "K", "V", "", "pk", "pv"])
    check(m, feeds, **TOL)


def test_attention_present_only_used_output():
    # present_key/value requested without a cache: they are K and V in (B, H, S, D) layout.
    q, k, v = rand(1, 2, 16), rand(1, 4, 16, seed=1), rand(1, 4, 8, seed=2)
    feeds = {"Q": q, "K": k, "V": v}
    node = helper.make_node("Attention", ["Q", "K", "V"], ["Y", "pk_out", "pv_out"],
                            q_num_heads=2, kv_num_heads=2)
    m = make_model([node], feeds, {"Y": (np.float32, [1, 2, 8]),
                                   "pk_out": (np.float32, [1, 2, 4, 8]),
                                   "pv_out": (np.float32, [1, 2, 4, 4])}, opset=23)
    check(m, feeds, **TOL)


def test_attention_nonpad_kv_seqlen_runtime_opset24():
    # nonpad_kv_seqlen is a runtime input; causal aligns to the end of each row's valid keys.
    n = np.array([3, 5], np.int64)
    feeds = {"Q": Q4, "K": K4, "V": V4, "n": n}
    m = model_of("Attention", feeds, {"is_causal": 1}, ["Y"], 24,
                 names=["Q", "K", "V", "", "", "", "n"])
    check(m, feeds, **TOL)


def test_attention_short_float_mask_is_padded_with_neg_inf_ref():
    feeds = {"Q": Q4, "K": K4, "V": V4, "M": rand(1, 3, 3, seed=4)}
    check_ref(model_of("Attention", feeds, {}, ["Y"], 23), feeds)


@pytest.mark.parametrize("left,right,causal", [(1, 1, 0), (0, -1, 0), (2, -1, 1)])
def test_attention_sliding_window_opset25_ref(left, right, causal):
    feeds = {"Q": Q4, "K": K4, "V": V4}
    m = model_of("Attention", feeds, {"left_window_size": left, "right_window_size": right,
                                      "is_causal": causal, "qk_matmul_output_mode": 3},
                 ["Y", "", "", "qk"], 25)
    check_ref(m, feeds)


@pytest.mark.parametrize("attrs,inputs,msg", [
    ({"softmax_precision": 11}, {}, "softmax_precision"),
    ({}, {"M": rand(2, 3)}, "attn_mask"),
])
def test_attention_rejects(attrs, inputs, msg):
    feeds = {"Q": Q4, "K": K4, "V": V4, **inputs}
    m = model_of("Attention", feeds, attrs, ["Y"], 23)
    with pytest.raises(AotcError, match=msg):
        compile_and_run(m, feeds)


def test_attention_3d_without_num_heads_is_rejected():
    q = rand(1, 2, 8)
    m = make_model([helper.make_node("Attention", ["Q", "K", "V"], ["Y"])],
                   {"Q": q, "K": q, "V": q}, {"Y": (np.float32, [1, 2, 8])}, opset=23)
    with pytest.raises(AotcError, match="q_num_heads"):
        compile_and_run(m, {"Q": q, "K": q, "V": q})


# ------------------------------------------------------------------------------ RotaryEmbedding
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rot", [0, 4])
def test_rotary_embedding_position_ids(interleaved, rot):
    x = rand(2, 4, 3, 8)
    half = (rot or 8) // 2
    feeds = {"X": x, "c": rand(10, half, seed=1), "s": rand(10, half, seed=2),
             "p": np.array([[0, 3, 9], [1, 2, 2]], np.int64)}
    m = model_of("RotaryEmbedding", feeds,
                 {"interleaved": interleaved, "rotary_embedding_dim": rot}, ["Y"], 23)
    check(m, feeds, **TOL)


def test_rotary_embedding_3d_no_position_ids():
    feeds = {"X": rand(2, 3, 16), "c": rand(2, 3, 4, seed=1), "s": rand(2, 3, 4, seed=2)}
    m = model_of("RotaryEmbedding", feeds, {"num_heads": 2, "interleaved": 1}, ["Y"], 23)
    check(m, feeds, **TOL)


# ------------------------------------------------------------------------------ LinearAttention
def _linear_attention(rule, hq, hkv, past, decay_per_dim=False, beta_scalar=False, t=3):
    dk, dv, B = 4, 3, 2
    feeds = {"q": rand(B, t, hq * dk), "k": rand(B, t, hkv * dk, seed=1, lo=-0.5, hi=0.5),
             "v": rand(B, t, hkv * dv, seed=2)}
    names = ["q", "k", "v", "", "", ""]
    if past:
        feeds["s0"] = rand(B, hkv, dk, dv, seed=3)
        names[3] = "s0"
    if rule in ("gated", "gated_delta"):
        feeds["g"] = rand(B, t, hkv * dk if decay_per_dim else hkv, seed=4, lo=-1, hi=0)
        names[4] = "g"
    if rule in ("delta", "gated_delta"):
        feeds["beta"] = rand(B, t, 1 if beta_scalar else hkv, seed=5, lo=0, hi=1)
        names[5] = "beta"
    while names[-1] == "":
        names.pop()
    return model_of("LinearAttention", feeds, {"update_rule": rule, "q_num_heads": hq,
                                               "kv_num_heads": hkv},
                    ["out", "state"], 27, names=names), feeds


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
@pytest.mark.parametrize("heads", [(2, 2), (4, 2)])
@pytest.mark.parametrize("past", [False, True])
def test_linear_attention_ref(rule, heads, past):
    m, feeds = _linear_attention(rule, *heads, past)
    check_ref(m, feeds, atol=1e-4)


def test_linear_attention_per_dim_decay_scalar_beta_ref():
    m, feeds = _linear_attention("gated_delta", 3, 1, True, decay_per_dim=True,
                                 beta_scalar=True)
    check_ref(m, feeds, atol=1e-4)


def test_linear_attention_missing_decay_is_rejected():
    m, feeds = _linear_attention("linear", 2, 2, False)
    m.graph.node[0].attribute[-1].CopyFrom(helper.make_attribute("update_rule", "gated"))
    with pytest.raises(AotcError, match="decay"):
        compile_and_run(m, feeds)


# -------------------------------------------------------------------------- CausalConvWithState
@pytest.mark.parametrize("L,k", [(6, 4), (2, 5), (1, 3), (5, 1)])
@pytest.mark.parametrize("past,bias,act", [(False, False, "none"), (True, True, "silu")])
def test_causal_conv_with_state_ref(L, k, past, bias, act):
    B, C = 2, 3
    feeds = {"x": rand(B, C, L), "w": rand(C, 1, k, seed=1)}
    names = ["x", "w", "", ""]
    if bias:
        feeds["b"] = rand(C, seed=2)
        names[2] = "b"
    if past and k > 1:
        feeds["s0"] = rand(B, C, k - 1, seed=3)
        names[3] = "s0"
    while names[-1] == "":
        names.pop()
    m = model_of("CausalConvWithState", feeds, {"activation": act}, ["y", "state"], 27,
                 names=names)
    check_ref(m, feeds)
