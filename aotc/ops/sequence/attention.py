"""Attention (opset 23, 24, 25) and RotaryEmbedding (opset 23).

Attention is one kernel per (batch, query head, query row): the scores of the row go to a
scratch row of kv_sequence floats, are softmaxed there, and are contracted with V, so the
(Sq, Skv) score matrix never exists in the arena. A past KV cache is read in place (the key loop
is split at the cache boundary instead of concatenating), so present_key/present_value are only
written when something reads them. Masking follows the ONNX function body: a boolean mask,
causal frontier, sliding window or padding length disallow a key by adding -inf; a row with no
allowed key (decided on the bias, not on the logits) yields zeros.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.builder import BufRef
from aotc.loops.loop_ir import INDEX, Cast, Const, Expr, bmax, bmin, call, cmp, land, select
from aotc.ops import OpDef, register

F32 = dtypes.float32
NEG_INF = -math.inf


def alive(kb: Any, k: int) -> bool:
    """Whether output ``k`` exists and something reads it."""
    return k < len(kb.outputs) and kb.outputs[k] is not None and k not in kb.dead_outputs


def _err(node: Node, msg: str) -> AotcError:
    return AotcError(msg, node.name, node.op)


# ------------------------------------------------------------------------------------ Attention
@dataclass(frozen=True)
class _Geom:
    rank3: bool
    B: int
    Hq: int
    Hkv: int
    Sq: int
    Snew: int  # new kv rows (K, V)
    P: int  # past kv rows
    Dk: int
    Dv: int

    @property
    def Skv(self) -> int:
        return self.P + self.Snew

    @property
    def group(self) -> int:
        return self.Hq // self.Hkv


def _geom(node: Node, qs: Sequence[int], ks: Sequence[int], vs: Sequence[int],
          pks: Sequence[int] | None, pvs: Sequence[int] | None) -> _Geom:
    """The attention geometry from the Q, K, V (and past) shapes; AotcError if inconsistent."""
    qs, ks, vs = tuple(qs), tuple(ks), tuple(vs)
    if not len(qs) == len(ks) == len(vs) or len(qs) not in (3, 4):
        raise _err(node, f"Q, K, V must all be 3-D or all 4-D, got {qs}, {ks}, {vs}")
    qh, kvh = node.attrs.get("q_num_heads"), node.attrs.get("kv_num_heads")
    if len(qs) == 3:
        if not qh or not kvh:
            raise _err(node, "3-D inputs need the q_num_heads and kv_num_heads attributes")
        if qs[2] % qh or ks[2] % kvh or vs[2] % kvh:
            raise _err(node, f"hidden sizes {qs[2]}, {ks[2]}, {vs[2]} are not divisible by "
                       f"q_num_heads={qh} / kv_num_heads={kvh}")
        g = _Geom(True, qs[0], qh, kvh, qs[1], ks[1], 0, qs[2] // qh, vs[2] // kvh)
        dq, dk = qs[2] // qh, ks[2] // kvh
    else:
        if node.version >= 25 and (qh is not None or kvh is not None):
            raise _err(node, "q_num_heads and kv_num_heads must not be set for 4-D inputs")
        if (qh is not None and qh != qs[1]) or (kvh is not None and kvh != ks[1]):
            raise _err(node, f"q_num_heads={qh} / kv_num_heads={kvh} disagree with the 4-D "
                       f"shapes {qs}, {ks}")
        g = _Geom(False, qs[0], qs[1], ks[1], qs[2], ks[2], 0, qs[3], vs[3])
        dq, dk = qs[3], ks[3]
        if vs[1] != ks[1]:
            raise _err(node, f"K has {ks[1]} heads, V has {vs[1]}")
    if ks[0] != g.B or vs[0] != g.B:
        raise _err(node, f"batch sizes differ: {qs}, {ks}, {vs}")
    if vs[-2 if not g.rank3 else 1] != g.Snew:
        raise _err(node, f"K and V have different sequence lengths: {ks}, {vs}")
    if dq != dk:
        raise _err(node, f"query head size {dq} differs from key head size {dk}")
    if g.Hkv <= 0 or g.Hq % g.Hkv:
        raise _err(node, f"q_num_heads={g.Hq} is not a multiple of kv_num_heads={g.Hkv}")
    if (pks is None) != (pvs is None):
        raise _err(node, "past_key and past_value must be given together")
    if pks is not None and pvs is not None:
        pks, pvs = tuple(pks), tuple(pvs)
        P = pks[2] if len(pks) == 4 else -1
        if pks != (g.B, g.Hkv, P, g.Dk) or pvs != (g.B, g.Hkv, P, g.Dv):
            raise _err(node, f"past_key {pks} / past_value {pvs} do not "
                       f"match (batch, kv_heads, past, head_size) = ({g.B}, {g.Hkv}, P, "
                       f"{g.Dk}/{g.Dv})")
        g = _Geom(g.rank3, g.B, g.Hq, g.Hkv, g.Sq, g.Snew, P, g.Dk, g.Dv)
    return g


def _geom_of(node: Node, ins: Sequence[Value | None]) -> _Geom:
    def shape(k: int) -> tuple[int, ...] | None:
        v = ins[k] if k < len(ins) else None
        return None if v is None else v.type.shape

    qs, ks, vs = shape(0), shape(1), shape(2)
    assert qs is not None and ks is not None and vs is not None
    return _geom(node, qs, ks, vs, shape(4), shape(5))


def _np_attention(Q: np.ndarray, K: np.ndarray, V: np.ndarray, mask: np.ndarray | None,
                  past_k: np.ndarray | None, past_v: np.ndarray | None,
                  nonpad: np.ndarray | None, a: dict[str, Any]) -> tuple[np.ndarray, ...]:
    """The ONNX semantics in numpy (float64 internally), for constant folding."""
    rank3 = Q.ndim == 3
    if rank3:
        def split(x: np.ndarray, h: int) -> np.ndarray:
            return x.reshape(x.shape[0], x.shape[1], h, -1).transpose(0, 2, 1, 3)
        Q, K, V = (split(Q, a["q_num_heads"]), split(K, a["kv_num_heads"]),
                   split(V, a["kv_num_heads"]))
    pk = K if past_k is None else np.concatenate([past_k, K], axis=2)
    pv = V if past_v is None else np.concatenate([past_v, V], axis=2)
    P = 0 if past_k is None else past_k.shape[2]
    sq, skv = Q.shape[2], pk.shape[2]
    scale = a.get("scale")
    s = np.float32(np.sqrt(1 / np.sqrt(Q.shape[3]) if scale is None else scale))
    grp = Q.shape[1] // pk.shape[1]
    kk, vv = np.repeat(pk, grp, axis=1), np.repeat(pv, grp, axis=1)
    raw = ((Q * s).astype(np.float64) @ (kk * s).astype(np.float64).transpose(0, 1, 3, 2))
    capped = raw
    if a.get("softcap", 0.0) > 0:
        capped = a["softcap"] * np.tanh(raw / a["softcap"])
    bias = np.zeros((Q.shape[0], 1, sq, skv))
    if mask is not None:
        m = mask
        if m.shape[-1] < skv:
            fill = False if m.dtype == np.bool_ else -np.inf
            m = np.concatenate([m, np.full(m.shape[:-1] + (skv - m.shape[-1],), fill, m.dtype)],
                               axis=-1)
        bias = bias + (np.where(m, 0.0, -np.inf) if m.dtype == np.bool_ else m)
    i = np.arange(sq).reshape(1, 1, sq, 1)
    j = np.arange(skv).reshape(1, 1, 1, skv)
    off = np.asarray(P if nonpad is None else nonpad.astype(np.int64) - sq).reshape(-1, 1, 1, 1)
    allowed = np.ones((1, 1, sq, skv), bool)
    if a.get("is_causal"):
        allowed = allowed & (j <= i + off)
    if a.get("left_window_size", -1) >= 0:
        allowed = allowed & (i + off - j <= a["left_window_size"])
    if a.get("right_window_size", -1) >= 0:
        allowed = allowed & (j - i - off <= a["right_window_size"])
    if nonpad is not None:
        allowed = allowed & (j < nonpad.astype(np.int64).reshape(-1, 1, 1, 1))
    bias = np.where(allowed, bias, -np.inf)
    x = capped + bias
    with np.errstate(invalid="ignore"):
        mx = x.max(axis=-1, keepdims=True)
        e = np.exp(x - np.where(np.isneginf(mx), 0.0, mx))
        ssum = e.sum(axis=-1, keepdims=True)
        p = e / np.where(ssum == 0, 1.0, ssum)
    p = np.where(np.isneginf(bias.max(axis=-1, keepdims=True)), 0.0, p)
    y = p @ vv
    if rank3:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], sq, -1)
    qk = [raw, capped, x, p][a.get("qk_matmul_output_mode", 0)]
    dt = Q.dtype
    return y.astype(dt), pk.astype(dt), pv.astype(dt), qk.astype(dt)


class _Attention(OpDef):
    name = "Attention"
    kind = "kernel"
    onnx_tests = ("test_attention_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        for k, v in enumerate(ins[:6]):
            if v is not None and k != 3 and v.type.dtype != F32:
                raise _err(node, f"input {k} has dtype {v.type.dtype.name}; supported: float32")
        g = _geom_of(node, ins)
        a = node.attrs
        if a.get("qk_matmul_output_mode", 0) not in (0, 1, 2, 3):
            raise _err(node, f"qk_matmul_output_mode={a['qk_matmul_output_mode']} is not 0-3")
        if a.get("softmax_precision") not in (None, 1):
            raise _err(node, f"softmax_precision={a['softmax_precision']} is not supported "
                       f"(only 1: float32)")
        if a.get("is_causal", 0) not in (0, 1):
            raise _err(node, f"is_causal={a['is_causal']} is not 0 or 1")
        for w in ("left_window_size", "right_window_size"):
            if a.get(w, -1) < -1:
                raise _err(node, f"{w}={a[w]} must be -1 or non-negative")
        mask = ins[3] if len(ins) > 3 else None
        if mask is not None:
            ms = mask.type.shape
            if mask.type.dtype.name not in ("bool", "float32"):
                raise _err(node, f"attn_mask has dtype {mask.type.dtype.name}; supported: bool, "
                           f"float32")
            target = (g.B, g.Hq, g.Sq)
            if not 1 <= len(ms) <= 4 or ms[-1] > g.Skv or any(
                    d not in (1, t) for d, t in zip(ms[-2::-1], target[::-1])):
                raise _err(node, f"attn_mask {ms} does not broadcast to (batch, q_heads, q_seq, "
                           f"<= kv_seq) = {(*target, g.Skv)}")
        nonpad = ins[6] if len(ins) > 6 else None
        if nonpad is not None:
            if nonpad.type.dtype != dtypes.int64 or nonpad.type.shape != (g.B,):
                raise _err(node, f"nonpad_kv_seqlen must be int64 of shape ({g.B},)")
            if g.P:
                raise _err(node, "nonpad_kv_seqlen cannot be combined with past_key/past_value")
        if len(node.outputs) > 4:
            raise _err(node, f"the node has {len(node.outputs)} outputs; Attention has 4")

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        g = _geom_of(node, ins)
        y = (g.B, g.Sq, g.Hq * g.Dv) if g.rank3 else (g.B, g.Hq, g.Sq, g.Dv)
        return [TensorType(y, F32), TensorType((g.B, g.Hkv, g.Skv, g.Dk), F32),
                TensorType((g.B, g.Hkv, g.Skv, g.Dv), F32),
                TensorType((g.B, g.Hq, g.Sq, g.Skv), F32)]

    def _reference(self, Q: np.ndarray, K: np.ndarray, V: np.ndarray,
                   attn_mask: np.ndarray | None, past_key: np.ndarray | None,
                   past_value: np.ndarray | None, nonpad_kv_seqlen: np.ndarray | None,
                   attrs: dict[str, Any]) -> tuple[np.ndarray, ...]:
        return _np_attention(Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen, attrs)

    # ------------------------------------------------------------------ lowering
    def lower(self, node: Node, kb: Any) -> None:
        ins = list(kb.inputs) + [None] * (7 - len(kb.inputs))
        Q, K, V, M, PK, PV, NP = ins[:7]
        a = node.attrs
        g = _geom(node, Q.shape, K.shape, V.shape, PK.shape if PK is not None else None,
                  PV.shape if PV is not None else None)
        self._copy_present(kb, g, K, PK, 1)
        self._copy_present(kb, g, V, PV, 2)

        def heads(X: BufRef, D: int) -> Callable[[Expr, Expr, Expr, Expr], Expr]:
            """x[b, h, s, d] of a 3-D (B, S, H*D) or 4-D (B, H, S, D) input."""
            if g.rank3:
                return lambda b, h, s, d: X[[b, s, h * D + d]]
            return lambda b, h, s, d: X[[b, h, s, d]]

        q_at, k_new, v_new = heads(Q, g.Dk), heads(K, g.Dk), heads(V, g.Dv)
        scale = a.get("scale")
        sq = float(np.float32(math.sqrt(1 / math.sqrt(g.Dk) if scale is None else scale)))
        softcap = float(a.get("softcap") or 0.0)
        mode = int(a.get("qk_matmul_output_mode") or 0)
        want_qk = alive(kb, 3)
        row = kb.scratch_buffer("row", F32, (g.Skv,))
        qrow = kb.scratch_buffer("q", F32, (g.Dk,))

        with kb.loops((g.B, g.Hkv, g.group, g.Sq), ["b", "hk", "gq", "i"]) as (b, hk, gq, i):
            h = hk * g.group + gq if g.group > 1 else hk
            with kb.loop(g.Dk, "d") as d:
                kb.store(qrow, [d], q_at(b, h, i, d) * Const(sq, F32))
            bias_of = self._bias(node, kb, g, M, NP, b, h, i)
            bmx = kb.local(Const(NEG_INF, F32), "bmax", F32) if bias_of else None
            m = kb.local(Const(NEG_INF, F32), "m", F32)

            def score(j: Expr, kat: Callable[[Expr], Expr]) -> None:
                acc = kb.local(Const(0.0, F32), "acc", F32)
                with kb.loop(g.Dk, "d") as d:
                    kb.assign(acc, acc + qrow[[d]] * kat(d))
                s = kb.local(acc * Const(sq, F32), "s", F32)
                qk_idx = [b, h, i, j]
                if want_qk and mode == 0:
                    kb.store_output(qk_idx, s, out=3)
                if softcap > 0:
                    kb.assign(s, Const(softcap, F32) * call("tanh", s / Const(softcap, F32)))
                if want_qk and mode == 1:
                    kb.store_output(qk_idx, s, out=3)
                if bias_of is not None:
                    bias = kb.local(bias_of(j), "bias", F32)
                    kb.assign(s, s + bias)
                    assert bmx is not None
                    kb.assign(bmx, bmax(bmx, bias))
                if want_qk and mode == 2:
                    kb.store_output(qk_idx, s, out=3)
                kb.store(row, [j], s)
                kb.assign(m, bmax(m, s))

            self._kv_loop(kb, g, "j", lambda j, jn: score(
                j, lambda d: PK[[b, hk, j, d]] if jn is None else k_new(b, hk, jn, d)))
            # exp(x - max), with max := 0 for an all -inf row (exp(-inf) = 0, not NaN).
            mm = kb.local(select(cmp("eq", m, Const(NEG_INF, F32)), 0.0, m, F32), "mm", F32)
            total = kb.local(Const(0.0, F32), "sum", F32)
            with kb.loop(g.Skv, "j") as j:
                e = kb.local(call("exp", row[[j]] - mm), "e", F32)
                kb.store(row, [j], e)
                kb.assign(total, total + e)
            r = Const(1.0, F32) / select(cmp("eq", total, Const(0.0, F32)), 1.0, total, F32)
            if bmx is not None:  # no allowed key: a zero row
                r = select(cmp("eq", bmx, Const(NEG_INF, F32)), 0.0, r, F32)
            rs = kb.local(r, "r", F32)
            if want_qk and mode == 3:
                with kb.loop(g.Skv, "j") as j:
                    kb.store_output([b, h, i, j], row[[j]] * rs, out=3)
            with kb.loop(g.Dv, "c") as c:
                acc = kb.local(Const(0.0, F32), "o", F32)
                self._kv_loop(kb, g, "j", lambda j, jn: kb.assign(acc, acc + row[[j]] * (
                    PV[[b, hk, j, c]] if jn is None else v_new(b, hk, jn, c))))
                y_idx = [b, i, h * g.Dv + c] if g.rank3 else [b, h, i, c]
                kb.store_output(y_idx, acc * rs)

    @staticmethod
    def _kv_loop(kb: Any, g: _Geom, name: str,
                 body: Callable[[Expr, Expr | None], None]) -> None:
        """body(j, j_new) over the kv rows: the past rows (j_new None), then the new rows
        (j_new = j - past); two loops instead of a branch per element."""
        if g.P:
            with kb.loop(g.P, name) as j:
                body(j, None)
        if g.Snew:
            with kb.loop(g.Skv, name, start=g.P) as j:
                body(j, j - g.P if g.P else j)

    @staticmethod
    def _copy_present(kb: Any, g: _Geom, X: BufRef, past: BufRef | None, out: int) -> None:
        """present = concat(past, X in (B, H, S, D) layout), only when something reads it."""
        if not alive(kb, out):
            return
        D = kb.outputs[out].shape[3]
        if past is not None and g.P:
            with kb.loops((g.B, g.Hkv, g.P, D), ["b", "h", "j", "d"]) as (b, h, j, d):
                kb.store_output([b, h, j, d], past[[b, h, j, d]], out=out)
        if g.Snew:
            with kb.loops((g.B, g.Hkv, g.Snew, D), ["b", "h", "j", "d"]) as (b, h, j, d):
                v = X[[b, j, h * D + d]] if g.rank3 else X[[b, h, j, d]]
                kb.store_output([b, h, j + g.P, d], v, out=out)

    @staticmethod
    def _bias(node: Node, kb: Any, g: _Geom, M: BufRef | None, NP: BufRef | None, b: Expr,
              h: Expr, i: Expr) -> Callable[[Expr], Expr] | None:
        """The additive bias of key j for this query row, or None when it is always 0."""
        a = node.attrs
        causal = bool(a.get("is_causal"))
        left, right = int(a.get("left_window_size", -1)), int(a.get("right_window_size", -1))
        if M is None and NP is None and not causal and left < 0 and right < 0:
            return None
        ninf = Const(NEG_INF, F32)
        nonpad = None
        if NP is not None:
            nonpad = kb.local(Cast(NP[[b]], INDEX), "nonpad", INDEX)
        # Absolute position of the query: i + offset (past rows, or the unpadded tail).
        pos = i + g.P if nonpad is None else i + (nonpad - g.Sq)

        def bias(j: Expr) -> Expr:
            value: Expr = Const(0.0, F32)
            conds: list[Expr] = []
            if M is not None:
                mkv = M.shape[-1]
                load = M.bcast([b, h, i, j])
                if M.dtype == dtypes.bool_:
                    ok = cmp("ne", load, Const(0, M.dtype))
                    conds.append(land(cmp("lt", j, mkv), ok) if mkv < g.Skv else ok)
                else:
                    # Columns past a short mask are disallowed (-inf), as the spec pads them.
                    value = select(cmp("lt", j, mkv), load, ninf, F32) if mkv < g.Skv else load
            if causal:
                conds.append(cmp("le", j, pos))
            if left >= 0:
                conds.append(cmp("le", pos - j, left))
            if right >= 0:
                conds.append(cmp("le", j - pos, right))
            if nonpad is not None:
                conds.append(cmp("lt", j, nonpad))
            return select(land(*conds), value, ninf, F32) if conds else value

        return bias


@register
class Attention23(_Attention):
    since = 23

    def reference(self, Q: np.ndarray, K: np.ndarray, V: np.ndarray,
                  attn_mask: np.ndarray | None = None, past_key: np.ndarray | None = None,
                  past_value: np.ndarray | None = None, *, is_causal: int = 0,
                  kv_num_heads: int | None = None, q_num_heads: int | None = None,
                  qk_matmul_output_mode: int = 0, scale: float | None = None,
                  softcap: float = 0.0, softmax_precision: int | None = None
                  ) -> tuple[np.ndarray, ...]:
        return self._reference(Q, K, V, attn_mask, past_key, past_value, None, dict(
            is_causal=is_causal, kv_num_heads=kv_num_heads, q_num_heads=q_num_heads,
            qk_matmul_output_mode=qk_matmul_output_mode, scale=scale, softcap=softcap))


@register
class Attention24(_Attention):
    since = 24

    def reference(self, Q: np.ndarray, K: np.ndarray, V: np.ndarray,
                  attn_mask: np.ndarray | None = None, past_key: np.ndarray | None = None,
                  past_value: np.ndarray | None = None,
                  nonpad_kv_seqlen: np.ndarray | None = None, *, is_causal: int = 0,
                  kv_num_heads: int | None = None, q_num_heads: int | None = None,
                  qk_matmul_output_mode: int = 0, scale: float | None = None,
                  softcap: float = 0.0, softmax_precision: int | None = None
                  ) -> tuple[np.ndarray, ...]:
        return self._reference(Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen, dict(
            is_causal=is_causal, kv_num_heads=kv_num_heads, q_num_heads=q_num_heads,
            qk_matmul_output_mode=qk_matmul_output_mode, scale=scale, softcap=softcap))


@register
class Attention25(_Attention):
    since = 25

    def reference(self, Q: np.ndarray, K: np.ndarray, V: np.ndarray,
                  attn_mask: np.ndarray | None = None, past_key: np.ndarray | None = None,
                  past_value: np.ndarray | None = None,
                  nonpad_kv_seqlen: np.ndarray | None = None, *, is_causal: int = 0,
                  kv_num_heads: int | None = None, q_num_heads: int | None = None,
                  left_window_size: int = -1, qk_matmul_output_mode: int = 0,
                  right_window_size: int = -1, scale: float | None = None,
                  softcap: float = 0.0, softmax_precision: int | None = None
                  ) -> tuple[np.ndarray, ...]:
        return self._reference(Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen, dict(
            is_causal=is_causal, kv_num_heads=kv_num_heads, q_num_heads=q_num_heads,
            left_window_size=left_window_size, right_window_size=right_window_size,
            qk_matmul_output_mode=qk_matmul_output_mode, scale=scale, softcap=softcap))


# ------------------------------------------------------------------------------ RotaryEmbedding
@register
class RotaryEmbedding(OpDef):
    """Rotates pairs of each head's first rotary_embedding_dim channels by the angle cached for
    the token's position: halves (x[k], x[k + dim/2]) or, interleaved, (x[2k], x[2k + 1])."""

    name = "RotaryEmbedding"
    since = 23
    kind = "kernel"
    onnx_tests = ("test_rotary_embedding*",)

    @staticmethod
    def _dims(node: Node, xs: Sequence[int]) -> tuple[int, int, int, int, int]:
        """(batch, seq, heads, head_size, rotary_dim) of a 3-D or 4-D input."""
        if len(xs) == 4:
            B, H, S, D = xs
        elif len(xs) == 3:
            nh = node.attrs.get("num_heads")
            if not nh or xs[2] % nh:
                raise _err(node, f"3-D input {tuple(xs)} needs num_heads dividing its hidden "
                           f"size (num_heads={nh})")
            B, S, H, D = xs[0], xs[1], nh, xs[2] // nh
        else:
            raise _err(node, f"input must be 3-D or 4-D, got {tuple(xs)}")
        rot = int(node.attrs.get("rotary_embedding_dim") or 0) or D
        if rot > D or rot % 2:
            raise _err(node, f"rotary_embedding_dim={rot} must be even and <= head size {D}")
        return B, S, H, D, rot

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x, cos, sin = ins[0], ins[1], ins[2]
        assert x is not None and cos is not None and sin is not None
        for k, v in enumerate((x, cos, sin)):
            if v.type.dtype != F32:
                raise _err(node, f"input {k} has dtype {v.type.dtype.name}; supported: float32")
        B, S, _, _, rot = self._dims(node, x.type.shape)
        pid = ins[3] if len(ins) > 3 else None
        cs = cos.type.shape
        if sin.type.shape != cs:
            raise _err(node, f"cos_cache {cs} and sin_cache {sin.type.shape} differ")
        if pid is not None:
            if pid.type.dtype not in (dtypes.int64, dtypes.int32):
                raise _err(node, f"position_ids has dtype {pid.type.dtype.name}; supported: "
                           f"int64")
            if pid.type.shape != (B, S) or len(cs) != 2:
                raise _err(node, f"position_ids {pid.type.shape} must be ({B}, {S}) with a 2-D "
                           f"cache (max_position, rotary_dim/2), got cache {cs}")
        elif len(cs) != 3 or any(c not in (1, t) for c, t in zip(cs[:2], (B, S))):
            raise _err(node, f"without position_ids the caches must be ({B}, {S}, "
                       f"rotary_dim/2), got {cs}")
        if cs[-1] != rot // 2:
            raise _err(node, f"cache last dim {cs[-1]} is not rotary_embedding_dim/2 = "
                       f"{rot // 2}")

    def reference(self, X: np.ndarray, cos_cache: np.ndarray, sin_cache: np.ndarray,
                  position_ids: np.ndarray | None = None, *, interleaved: int = 0,
                  num_heads: int = 0, rotary_embedding_dim: int = 0) -> np.ndarray:
        x = X.transpose(0, 2, 1, 3) if X.ndim == 4 else X.reshape(
            X.shape[0], X.shape[1], num_heads, -1)
        rot = rotary_embedding_dim or x.shape[3]
        cos, sin = cos_cache, sin_cache
        if position_ids is not None:
            cos, sin = cos[position_ids], sin[position_ids]
        cos, sin = cos[:, :, None, :], sin[:, :, None, :]
        xr = x[..., :rot]
        x1, x2 = (xr[..., 0::2], xr[..., 1::2]) if interleaved else np.split(xr, 2, axis=-1)
        real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
        if interleaved:
            rotated = np.stack([real, imag], axis=-1).reshape(xr.shape)
        else:
            rotated = np.concatenate([real, imag], axis=-1)
        y = np.concatenate([rotated, x[..., rot:]], axis=-1).astype(X.dtype)
        return y.transpose(0, 2, 1, 3) if X.ndim == 4 else y.reshape(X.shape)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None
        return [ins[0].type]

    def lower(self, node: Node, kb: Any) -> None:
        X, COS, SIN = kb.inputs[:3]
        PID = kb.inputs[3] if len(kb.inputs) > 3 else None
        B, S, H, D, rot = self._dims(node, X.shape)
        half = rot // 2
        rank4 = len(X.shape) == 4

        def at(b: Expr, s: Expr, h: Expr, d: Expr) -> list[Expr]:
            return [b, h, s, d] if rank4 else [b, s, h * D + d]

        with kb.loops((B, S), ["b", "s"]) as (b, s):
            if PID is not None:
                hi = COS.shape[0] - 1
                p = kb.local(bmax(bmin(Cast(PID[[b, s]], INDEX), hi), 0), "pos", INDEX)

                def cache(C: BufRef, k: Expr) -> Expr:
                    return C[[p, k]]
            else:
                def cache(C: BufRef, k: Expr) -> Expr:
                    return C.bcast([b, s, k])
            with kb.loop(H, "h") as h:
                with kb.loop(half, "k") as k:
                    c = kb.local(cache(COS, k), "c", F32)
                    sn = kb.local(cache(SIN, k), "sn", F32)
                    i1, i2 = (k * 2, k * 2 + 1) if node.attrs.get("interleaved") else (k, k + half)
                    x1 = kb.local(X[at(b, s, h, i1)], "x1", F32)
                    x2 = kb.local(X[at(b, s, h, i2)], "x2", F32)
                    kb.store_output(at(b, s, h, i1), c * x1 - sn * x2)
                    kb.store_output(at(b, s, h, i2), sn * x1 + c * x2)
                if rot < D:
                    with kb.loop(D, "d", start=rot) as d:
                        kb.store_output(at(b, s, h, d), X[at(b, s, h, d)])
