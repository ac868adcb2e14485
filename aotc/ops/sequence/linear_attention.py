"""Stateful sequence-mixing ops of opset 27: LinearAttention and CausalConvWithState.

Both carry a recurrent state from one call to the next (past_state in, present_state out).
LinearAttention runs its recurrence token by token, which is also what a microcontroller wants
(no chunked prefill): the (d_k, d_v) state of one KV head lives in present_state (or in scratch
when nothing reads it) and is updated in place. CausalConvWithState is a depthwise 1-D
convolution over [past_state, input]; the two parts are read by split loops, so the padded
sequence is never materialised.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.builder import BufRef
from aotc.loops.loop_ir import Const, Expr, bmax, call
from aotc.ops import OpDef, register
from aotc.ops.sequence.attention import alive

F32 = dtypes.float32
RULES = ("linear", "gated", "delta", "gated_delta")


def _err(node: Node, msg: str) -> AotcError:
    return AotcError(msg, node.name, node.op)


def _opt(ins: Sequence[Any], k: int) -> Any:
    return ins[k] if k < len(ins) else None


# ------------------------------------------------------------------------------ LinearAttention
@register
class LinearAttention(OpDef):
    name = "LinearAttention"
    since = 27
    kind = "kernel"
    onnx_tests = ("test_linear_attention_*",)

    @staticmethod
    def _dims(node: Node, shapes: Sequence[tuple[int, ...] | None]
              ) -> tuple[int, int, int, int, int, int]:
        """(B, T, Hq, Hkv, d_k, d_v), checking every input shape."""
        q, k, v = shapes[0], shapes[1], shapes[2]
        assert q is not None and k is not None and v is not None
        hq, hkv = int(node.attrs["q_num_heads"]), int(node.attrs["kv_num_heads"])
        if hq <= 0 or hkv <= 0 or hq % hkv:
            raise _err(node, f"q_num_heads={hq} must be a positive multiple of "
                       f"kv_num_heads={hkv}")
        if len(q) != 3 or len(k) != 3 or len(v) != 3:
            raise _err(node, f"query, key, value must be 3-D (B, T, H*D), got {q}, {k}, {v}")
        B, T = q[0], q[1]
        if k[:2] != (B, T) or v[:2] != (B, T) or q[2] % hq or v[2] % hkv:
            raise _err(node, f"query {q}, key {k}, value {v} do not agree with q_num_heads={hq}, "
                       f"kv_num_heads={hkv}")
        dk, dv = q[2] // hq, v[2] // hkv
        if k[2] != hkv * dk:
            raise _err(node, f"key {k} must have kv_num_heads * d_k = {hkv * dk} channels")
        past, decay, beta = _opt(shapes, 3), _opt(shapes, 4), _opt(shapes, 5)
        if past is not None and past != (B, hkv, dk, dv):
            raise _err(node, f"past_state {past} must be {(B, hkv, dk, dv)}")
        if decay is not None and decay not in ((B, T, hkv), (B, T, hkv * dk)):
            raise _err(node, f"decay {decay} must be {(B, T, hkv)} or {(B, T, hkv * dk)}")
        if beta is not None and beta not in ((B, T, hkv), (B, T, 1)):
            raise _err(node, f"beta {beta} must be {(B, T, hkv)} or {(B, T, 1)}")
        return B, T, hq, hkv, dk, dv

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        rule = node.attrs["update_rule"]
        if rule not in RULES:
            raise _err(node, f"update_rule={rule!r} is not one of {', '.join(RULES)}")
        gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
        for k, what, need in ((4, "decay", gated), (5, "beta", delta)):
            if (_opt(ins, k) is not None) != need:
                raise _err(node, f"update_rule={rule!r} {'needs' if need else 'forbids'} the "
                           f"{what} input")
        self._dims(node, [None if v is None else v.type.shape for v in ins])

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        B, T, hq, hkv, dk, dv = self._dims(node, [None if v is None else v.type.shape
                                                  for v in ins])
        return [TensorType((B, T, hq * dv), F32), TensorType((B, hkv, dk, dv), F32)]

    def reference(self, query: np.ndarray, key: np.ndarray, value: np.ndarray,
                  past_state: np.ndarray | None = None, decay: np.ndarray | None = None,
                  beta: np.ndarray | None = None, *, chunk_size: int = 64,
                  kv_num_heads: int, q_num_heads: int,
                  scale: float = 0.0, update_rule: str = "gated_delta"
                  ) -> tuple[np.ndarray, np.ndarray]:
        B, T, _ = query.shape
        dk, dv = query.shape[2] // q_num_heads, value.shape[2] // kv_num_heads
        grp = q_num_heads // kv_num_heads

        def heads(x: np.ndarray, h: int) -> np.ndarray:  # (B, T, H*D) -> (B, H, T, D)
            return x.reshape(B, T, h, -1).transpose(0, 2, 1, 3).astype(np.float64)

        q, k, v = heads(query, q_num_heads), heads(key, kv_num_heads), heads(value, kv_num_heads)
        state = (np.zeros((B, kv_num_heads, dk, dv)) if past_state is None
                 else past_state.astype(np.float64))
        s = scale or 1.0 / math.sqrt(dk)
        out = np.zeros((B, q_num_heads, T, dv))
        for t in range(T):
            if decay is not None:
                g = heads(decay, kv_num_heads)[:, :, t, :]  # (B, H, 1) or (B, H, d_k)
                state = state * np.exp(g)[..., None]
            vt = v[:, :, t, :]
            if beta is not None:
                bt = beta.reshape(B, T, -1, 1).transpose(0, 2, 1, 3)[:, :, t, :]
                vt = bt * (vt - np.einsum("bhdm,bhd->bhm", state, k[:, :, t, :]))
            state = state + k[:, :, t, :, None] * vt[:, :, None, :]
            out[:, :, t, :] = s * np.einsum("bhd,bhdm->bhm", q[:, :, t, :],
                                            np.repeat(state, grp, axis=1))
        y = out.transpose(0, 2, 1, 3).reshape(B, T, -1)
        return y.astype(query.dtype), state.astype(query.dtype)

    def lower(self, node: Node, kb: Any) -> None:
        ins = list(kb.inputs)
        Q, K, V = ins[:3]
        PAST, DECAY, BETA = _opt(ins, 3), _opt(ins, 4), _opt(ins, 5)
        B, T, hq, hkv, dk, dv = self._dims(node, [None if r is None else r.shape for r in ins])
        grp = hq // hkv
        scale = float(node.attrs["scale"]) or 1.0 / math.sqrt(dk)
        keep = alive(kb, 1)
        scratch = None if keep else kb.scratch_buffer("state", F32, (dk, dv))
        u = kb.scratch_buffer("u", F32, (dv,)) if BETA is not None else None

        with kb.loops((B, hkv), ["b", "h"]) as (b, h):
            def S(d: Expr, m: Expr) -> list[Expr]:
                return [b, h, d, m] if keep else [d, m]

            def put(d: Expr, m: Expr, value: Expr) -> None:
                if keep:
                    kb.store_output(S(d, m), value, out=1)
                else:
                    assert scratch is not None
                    kb.store(scratch, S(d, m), value)

            def at(d: Expr, m: Expr) -> Expr:
                return kb.outputs[1][S(d, m)] if keep else scratch[S(d, m)]  # type: ignore[index]

            with kb.loops((dk, dv), ["d", "m"]) as (d, m):
                put(d, m, Const(0.0, F32) if PAST is None else PAST[[b, h, d, m]])
            with kb.loop(T, "t") as t:
                if DECAY is not None:
                    per_dim = DECAY.shape[2] != hkv
                    with kb.loop(dk, "d") as d:
                        g = DECAY[[b, t, h * dk + d]] if per_dim else DECAY[[b, t, h]]
                        ge = kb.local(call("exp", g), "decay", F32)
                        with kb.loop(dv, "m") as m:
                            put(d, m, at(d, m) * ge)
                if BETA is not None:
                    assert u is not None
                    bt = kb.local(BETA[[b, t, h]] if BETA.shape[2] == hkv else BETA[[b, t, 0]],
                                  "beta", F32)
                    with kb.loop(dv, "m") as m:
                        r = kb.local(Const(0.0, F32), "r", F32)
                        with kb.loop(dk, "d") as d:
                            kb.assign(r, r + at(d, m) * K[[b, t, h * dk + d]])
                        kb.store(u, [m], bt * (V[[b, t, h * dv + m]] - r))
                with kb.loop(dk, "d") as d:
                    kd = kb.local(K[[b, t, h * dk + d]], "k", F32)
                    with kb.loop(dv, "m") as m:
                        vm = u[[m]] if u is not None else V[[b, t, h * dv + m]]
                        put(d, m, at(d, m) + kd * vm)
                with kb.loop(grp, "g") as gq:
                    hh = h * grp + gq
                    with kb.loop(dv, "m") as m:
                        acc = kb.local(Const(0.0, F32), "o", F32)
                        with kb.loop(dk, "d") as d:
                            kb.assign(acc, acc + Q[[b, t, hh * dk + d]] * at(d, m))
                        kb.store_output([b, t, hh * dv + m], acc * Const(scale, F32))


# -------------------------------------------------------------------------- CausalConvWithState
@register
class CausalConvWithState(OpDef):
    name = "CausalConvWithState"
    since = 27
    kind = "kernel"
    onnx_tests = ("test_causal_conv_with_state_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        act = node.attrs["activation"]
        if act not in ("none", "silu", "swish"):
            raise _err(node, f"activation={act!r} is not one of none, silu, swish")
        x, w = ins[0], ins[1]
        assert x is not None and w is not None
        xs, ws = x.type.shape, w.type.shape
        if len(xs) != 3 or len(ws) != 3 or ws[:2] != (xs[1], 1) or ws[2] < 1:
            raise _err(node, f"input {xs} must be (B, C, L) and weight {ws} (C, 1, k)")
        bias, past = _opt(ins, 2), _opt(ins, 3)
        if bias is not None and bias.type.shape != (xs[1],):
            raise _err(node, f"bias {bias.type.shape} must be ({xs[1]},)")
        if past is not None and past.type.shape != (xs[0], xs[1], ws[2] - 1):
            raise _err(node, f"past_state {past.type.shape} must be "
                       f"{(xs[0], xs[1], ws[2] - 1)}")

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x, w = ins[0], ins[1]
        assert x is not None and w is not None
        B, C, _ = x.type.shape
        return [x.type, TensorType((B, C, w.type.shape[2] - 1), F32)]

    def reference(self, input: np.ndarray, weight: np.ndarray,  # noqa: A002
                  bias: np.ndarray | None = None, past_state: np.ndarray | None = None, *,
                  activation: str = "none") -> tuple[np.ndarray, np.ndarray]:
        B, C, L = input.shape
        k = weight.shape[2]
        pad = np.zeros((B, C, k - 1), input.dtype) if past_state is None else past_state
        xp = np.concatenate([pad, input], axis=2).astype(np.float64)
        y = sum(xp[:, :, t:t + L] * weight[None, :, 0, t, None] for t in range(k))
        if bias is not None:
            y = y + bias[None, :, None]
        if activation in ("silu", "swish"):
            y = y / (1.0 + np.exp(-y))
        return y.astype(input.dtype), xp[:, :, L:].astype(input.dtype)

    def lower(self, node: Node, kb: Any) -> None:
        X, W = kb.inputs[0], kb.inputs[1]
        bias, past = _opt(kb.inputs, 2), _opt(kb.inputs, 3)
        B, C, L = X.shape
        k = W.shape[2]
        silu = node.attrs["activation"] in ("silu", "swish")
        with kb.loops((B, C, L), ["b", "c", "t"]) as (b, c, t):
            acc = kb.local(Const(0.0, F32), "acc", F32)  # the bias is added after the sum
            # Tap j reads padded position t + j: the past state while t + j < k - 1.
            split = bmax(Const(k - 1) - t, 0)
            if past is not None and k > 1:
                with kb.loop(split, "j") as j:
                    kb.assign(acc, acc + W[[c, 0, j]] * past[[b, c, t + j]])
            with kb.loop(k, "j", start=split) as j:
                kb.assign(acc, acc + W[[c, 0, j]] * X[[b, c, t + j - (k - 1)]])
            if bias is not None:
                kb.assign(acc, acc + bias[[c]])
            value: Expr = acc
            if silu:
                value = acc / (Const(1.0, F32) + call("exp", -acc))
            kb.store_output([b, c, t], value)
        if k > 1 and alive(kb, 1):
            self._state(kb, X, past, B, C, L, k)

    @staticmethod
    def _state(kb: Any, X: BufRef, past: BufRef | None, B: int, C: int, L: int, k: int) -> None:
        """present_state = the last k - 1 positions of [past_state, input]."""
        from_past = max(k - 1 - L, 0)  # leading state positions still taken from the past
        with kb.loops((B, C), ["b", "c"]) as (b, c):
            if from_past:
                with kb.loop(from_past, "p") as p:
                    v = Const(0.0, F32) if past is None else past[[b, c, p + L]]
                    kb.store_output([b, c, p], v, out=1)
            with kb.loop(k - 1, "p", start=from_past) as p:
                kb.store_output([b, c, p], X[[b, c, p + L - (k - 1)]], out=1)
