"""RNN, GRU and LSTM with int8 weights: the weights stay 8-bit in flash (a quarter of float's
bytes) and the gate matmuls read them as integers.

``QdqRNN`` / ``QdqGRU`` / ``QdqLSTM`` (aotc domain) are made by the qrecurrent pass from an
ONNX RNN / GRU / LSTM whose W and R are DequantizeLinear of constant 8-bit tensors (what
onnxruntime's quantize_static writes in QDQ format). ``DynamicQuantizeLSTM`` (com.microsoft,
onnxruntime's quantize_dynamic) is the same LSTM with W and R stored transposed.

Inputs: the float op's eight (X, W, R, B, sequence_lens, initial_h, initial_c, P; GRU and RNN
leave initial_c and P empty), then W_scale, W_zero_point, R_scale, R_zero_point (one value,
one per direction [nd], or one per gate row [nd, gates * hidden]), then X_scale and
X_zero_point when X is an 8-bit tensor.

Per step of each direction and batch row:

- x.W of every gate row, and h.R of every gate row that reads h as it is (all but GRU's
  candidate without linear_before_reset), each one row of a gemm with int32 sums through the
  gemm schedules (aotc/schedules/gemm/tiled.py: the DSP dual MAC on cores that have it):
  an 8-bit X as it is (its zero point folded into a constant per row); a float X and the
  float hidden state quantised to int16 first, symmetric, per step (largest magnitude to
  32767, or less where the int32 sum could overflow: _q16_max); weight zero points applied
  once per row (- zw * sum(a)); the sums scaled to float by the scales;
- GRU's candidate (r * h).R in float against R read as 8-bit values;
- the gate nonlinearities and the cell update in float, as the float op (recurrent.py).

Why int16 and not onnxruntime's uint8 for h and a float X: an error of 1.5e-5 of the vector's
largest magnitude instead of 2e-3, at the same cost (SMLAD takes 16-bit lanes; an int8 X is
unpacked to them by SXTB16). onnxruntime computes a QDQ model's op on the dequantised floats:
aotc's 8-bit outputs match it (tests/ops/test_qrecurrent.py: 0 LSB measured, 1 allowed).
DynamicQuantizeLSTM quantises X and h to uint8 at run time in onnxruntime, so the two differ
by onnxruntime's coarser activation rounding (docs/streaming.md states the tolerances).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops import dsp
from aotc.loops.builder import BufRef
from aotc.loops.loop_ir import Cast, Const, Expr, Var, bmax, call, cmp, select
from aotc.ops import register
from aotc.ops.quant.conv_matmul import IntArith
from aotc.ops.sequence.recurrent import _GRU, _LSTM, _RNN, _Ctx, _Recurrent
from aotc.schedules.gemm import knobs as GEMM
from aotc.schedules.gemm.tiled import tiled_dot, tiled_dot_dsp

F32 = dtypes.float32
I32 = dtypes.BY_NAME["int32"]
I16 = dtypes.BY_NAME["int16"]
Q8 = ("int8", "uint8")
# Input positions after the float op's eight.
W_SCALE, W_ZP, R_SCALE, R_ZP, X_SCALE, X_ZP = range(8, 14)


def per_row(a: np.ndarray | None, nd: int, rows: int, what: str, node: Node,
            default: float | int) -> np.ndarray:
    """A scale or zero point as [nd, rows]: one value, one per direction or one per row."""
    if a is None:
        return np.full((nd, rows), default)
    a = np.asarray(a)
    if a.size == 1:
        return np.full((nd, rows), a.reshape(-1)[0])
    if a.shape == (nd,):
        return np.repeat(a.reshape(nd, 1), rows, axis=1)
    if a.shape == (nd, rows):
        return a
    raise AotcError(f"{what} has shape {list(a.shape)}; expected one value, [{nd}] or "
                    f"[{nd}, {rows}]", node.name, node.op)


class _QRecurrent(_Recurrent):
    """The int8-weight form of a float recurrent op (the second base class)."""

    domain = "aotc"
    since = 1
    transposed = False  # W [nd, I, G*H] and R [nd, H, G*H] (DynamicQuantizeLSTM)

    # ------------------------------------------------------------------ shapes and checks
    def _wr(self, w: Value, r: Value) -> tuple[Value, Value]:
        """W and R as the float op's shapes and dtype (for its checks)."""
        def f(v: Value) -> Value:
            shape = v.type.shape
            if self.transposed and len(shape) == 3:
                shape = (shape[0], shape[2], shape[1])
            return Value(v.name, TensorType(shape, F32))
        return f(w), f(r)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x, w, r = ins[0], ins[1], ins[2]
        if x is None or w is None or r is None:
            raise AotcError("X, W and R are required", node.name, node.op)
        for k, v in ((1, w), (2, r)):
            if v.type.dtype.name not in Q8 or not v.is_const:
                raise AotcError(f"input {k} must be a constant int8 or uint8 tensor",
                                node.name, node.op)
        xs = ins[X_SCALE] if len(ins) > X_SCALE else None
        if x.type.dtype.name in Q8 and xs is None:
            raise AotcError("an 8-bit X needs X_scale", node.name, node.op)
        if x.type.dtype.name not in Q8 + ("float32",):
            raise AotcError(f"X has dtype {x.type.dtype.name}; expected float32, int8 or "
                            "uint8", node.name, node.op)
        for k in (W_SCALE, W_ZP, R_SCALE, R_ZP, X_SCALE, X_ZP):
            v = ins[k] if len(ins) > k else None
            if v is not None and not v.is_const:
                raise AotcError(f"input {k} (a scale or zero point) must be a constant",
                                node.name, node.op)
        fx = Value(x.name, TensorType(x.type.shape, F32))
        super().check(node, [fx, *self._wr(w, r), *ins[3:8]])
        self._params(node, ins)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x, w, r = ins[0], ins[1], ins[2]
        assert x is not None and w is not None and r is not None
        fx = Value(x.name, TensorType(x.type.shape, F32))
        return super().infer(node, [fx, *self._wr(w, r), *ins[3:]])

    def _params(self, node: Node, ins: Sequence[Value | None]) -> dict[str, Any]:
        """Scales [nd, G*H] (float32; W's times X's for an 8-bit X) and zero points."""
        r = ins[2]
        assert r is not None
        nd = self._dirs(node)
        rows = r.type.shape[1 if not self.transposed else 2]

        def c(k: int) -> np.ndarray | None:
            v = ins[k] if len(ins) > k else None
            return None if v is None else np.asarray(v.const)
        ws = per_row(c(W_SCALE), nd, rows, "W_scale", node, 1.0).astype(np.float64)
        rs = per_row(c(R_SCALE), nd, rows, "R_scale", node, 1.0).astype(np.float32)
        wz = per_row(c(W_ZP), nd, rows, "W_zero_point", node, 0).astype(np.int64)
        rz = per_row(c(R_ZP), nd, rows, "R_zero_point", node, 0).astype(np.int64)
        xs, xz = c(X_SCALE), c(X_ZP)
        if xs is not None and xs.size != 1 or xz is not None and xz.size != 1:
            raise AotcError("X_scale and X_zero_point must be one value each",
                            node.name, node.op)
        x8 = xs is not None
        if x8:
            ws = ws * np.float64(np.float32(xs.reshape(-1)[0]))
        return {"_xs": ws.astype(np.float32), "_wz": wz, "_rs": rs, "_rz": rz,
                "_xz": int(xz.reshape(-1)[0]) if xz is not None else 0, "_x8": x8}

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        node = super().prepare(node, ins)
        return node.with_(inputs=node.inputs[:8], attrs={**node.attrs, **self._params(node, ins)})

    def _r_shape(self, shape: Sequence[int]) -> Sequence[int]:
        return (shape[0], shape[2], shape[1]) if self.transposed else shape

    # ------------------------------------------------------------------ reference
    def _dequant(self, X: np.ndarray, W: np.ndarray, R: np.ndarray, q: list[Any], attrs: Any
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        node = Node(op=self.name, name="", inputs=(), outputs=(), attrs=attrs)
        nd = self._dirs(node)
        if self.transposed:
            W, R = W.transpose(0, 2, 1), R.transpose(0, 2, 1)
        rows = R.shape[1]

        def deq(a: np.ndarray, s: Any, z: Any) -> np.ndarray:
            s2 = per_row(s, nd, rows, "scale", node, 1.0).astype(np.float32)
            z2 = per_row(z, nd, rows, "zero point", node, 0).astype(np.float32)
            return ((a.astype(np.float32) - z2[..., None]) * s2[..., None]).astype(np.float32)
        ws, wz, rs, rz, xs, xz = (q + [None] * 6)[:6]
        if xs is not None:
            zx = np.float32(0 if xz is None else np.asarray(xz).reshape(-1)[0])
            X = ((X.astype(np.float32) - zx) * np.float32(np.asarray(xs).reshape(-1)[0])
                 ).astype(np.float32)
        return X, deq(W, ws, wz), deq(R, rs, rz)

    # ------------------------------------------------------------------ lowering
    def lower(self, node: Node, kb: Any, make_ctx: Any = None) -> None:
        W, R = kb.inputs[1], kb.inputs[2]
        nd = self._dirs(node)
        w = kb.input_const(1)
        r = kb.input_const(2)
        assert w is not None and r is not None
        if self.transposed:
            w, r = w.transpose(0, 2, 1), r.transpose(0, 2, 1)
        rows, i_sz = w.shape[1], w.shape[2]
        h = r.shape[2]
        gru_candidate = self.n_gates == 3 and not self.linear_before_reset_attr(node)
        plain_h = 2 * h if gru_candidate else rows
        t = _Tables(kb, node, nd, rows, i_sz, h, w, r, W, R, self.transposed, plain_h)
        super().lower(node, kb, make_ctx=lambda *a: _QCtx(t, *a))


class _Zp:
    """A zero point per row as a constant (all rows alike) or a table, indexed like one."""

    def __init__(self, kb: Any, name: str, v: np.ndarray, dt: Any) -> None:
        flat = v.reshape(-1)
        self.one = Const(float(flat[0]) if dt.is_float else int(flat[0]), dt) \
            if (flat == flat[0]).all() else None
        self.table = None if self.one is not None else kb.const(name, flat.astype(dt.np), dt)

    def __getitem__(self, idx: Any) -> Expr:
        return self.one if self.one is not None else self.table[idx]  # type: ignore[index]


def _table(kb: Any, name: str, v: np.ndarray, dt: Any) -> _Zp | None:
    return None if not v.any() else _Zp(kb, name, v, dt)


def _q16_max(k: int, w: np.ndarray, zp: np.ndarray) -> int:
    """The largest int16 magnitude a float vector of ``k`` values is quantised to so that its
    int32 sums against the 8-bit weights ``w`` (zero points ``zp``, applied after the sum)
    cannot overflow: 32767 unless k is in the hundreds."""
    bound = k * (int(np.abs(w.astype(np.int64)).max(initial=0)) + int(np.abs(zp).max(initial=0)))
    return int(min(32767, (2 ** 31 - 1) // max(bound, 1)))


class _Gemv:
    """One gemm row per step against 8-bit weights [nd, rows, K] (the rows of W or R): the
    weights packed for the DSP dual MAC where the target has it, zero points and scales."""

    def __init__(self, kb: Any, name: str, w: np.ndarray, zp: np.ndarray, scale: np.ndarray,
                 rows: int, arith: IntArith) -> None:
        nd = w.shape[0]
        self.rows, self.k, self.arith = rows, w.shape[2], arith
        self.scale = kb.const(f"{name}s", scale[:, :rows].reshape(-1).astype(np.float32), F32)
        self.zp = _table(kb, f"{name}z", zp[:, :rows], I32)
        self.qmax = _q16_max(self.k, w, zp)
        self.words: list[BufRef] = []
        self.tile = 0
        # The DSP dual MAC: int8 weights (SXTB16), cores with the extension.
        if ("dsp" in kb.features and kb.unroll_tiles and w.dtype == np.int8
                and kb.knob(GEMM.PATH) == "simd"):
            self.tile = kb.knob(GEMM.SIMD_TILE, default=GEMM.dsp_simd_tile_default(rows))
            for d in range(nd):
                wd = w[d, :rows].T  # [K, rows]
                self.words.append(kb.const(f"{name}q{d}", np.concatenate(
                    [dsp.pack_words(wd[:, n0:n0 + self.tile][:, None, :]).reshape(-1)
                     for n0 in range(0, rows, self.tile)]), I32))

    def run(self, kb: Any, d: int, a_at: Any, w_at: Any, start: Any, store: Any) -> None:
        """store(n, int32 sum) for n < rows: start(n) + sum_k a_at(k) * w[d, n, k]."""
        if self.words:
            tiled_dot_dsp(kb, self.rows, self.k, a_at, self.words[d], store, start, self.arith,
                          self.tile)
            return
        tiled_dot(kb, 1, self.rows, self.k, lambda r, k: Cast(a_at(k), I32),
                  lambda k, n: Cast(w_at(n, k), I32), lambda r, n, acc: store(n, acc),
                  start, I32)


class _Tables:
    """What every step of the kernel shares: scales, zero points, the packed weights, and
    the scratch rows of the step's x.W and h.R."""

    def __init__(self, kb: Any, node: Node, nd: int, rows: int, i_sz: int, h: int,
                 w: np.ndarray, r: np.ndarray, W: BufRef, R: BufRef, transposed: bool,
                 plain_h: int) -> None:
        a = node.attrs
        self.kb, self.nd, self.rows, self.i_sz, self.W, self.R = kb, nd, rows, i_sz, W, R
        self.transposed = transposed
        self.plain_h = plain_h  # the gate rows whose h.R reads h as it is (begin)
        self.x8 = bool(a["_x8"])
        wz, rz = np.asarray(a["_wz"]), np.asarray(a["_rz"])
        self.arith = IntArith(0, np.zeros(1, np.int64), None)  # int32 sums of a as it is
        self.gw = _Gemv(kb, "gw", w, wz, np.asarray(a["_xs"]), rows, self.arith)
        self.gr = _Gemv(kb, "gr", r, rz, np.asarray(a["_rs"]), plain_h, self.arith) \
            if plain_h else None
        self.xw = kb.scratch_buffer("xw", F32, (rows,))  # the step's x.W, scaled
        self.hr = kb.scratch_buffer("hr", F32, (plain_h,)) if plain_h else None
        self.xq = None if self.x8 else kb.scratch_buffer("xq", I16, (i_sz,))
        self.hq = kb.scratch_buffer("hq", I16, (h,)) if plain_h else None
        # GRU's candidate row (r * h).R, summed in float against R as it is.
        self.rs = kb.const("rs", np.asarray(a["_rs"]).reshape(-1), F32) \
            if plain_h < rows else None
        self.rz = _table(kb, "rz", rz, F32) if plain_h < rows else None
        # An 8-bit X's zero point: sum (x - zx)(w - zw) = sum x w - zw sum x - zx sum (w - zw),
        # the last term a constant per row (CMSIS-NN's trick), so the sum reads x as it is.
        xz = int(a["_xz"]) if self.x8 else 0
        wmz = w.astype(np.int64) - wz[:, :, None]
        self.start = None if not xz else \
            kb.const("xb", (-xz * wmz.sum(axis=2)).reshape(-1).astype(np.int32), I32)

    def w_at(self, buf: BufRef, d: int, row: Expr, k: Expr) -> Expr:
        return buf[d, k, row] if self.transposed else buf[d, row, k]


class _QCtx(_Ctx):
    def __init__(self, t: _Tables, *args: Any) -> None:
        super().__init__(*args)
        self.t = t

    def _sum(self, n: int, at: Any, name: str) -> Var:
        s = self.kb.local(Const(0, I32), name, I32)
        with self.kb.loop(n, "k") as k:
            self.kb.assign(s, s + Cast(at(k), I32))
        return s

    def _q16(self, n: int, at: Any, buf: BufRef, qmax: int, name: str) -> Var:
        """buf[k] = at(k) quantised to int16, symmetric, its largest magnitude to ``qmax``;
        returns the step's scale (the float of one unit). Rounded half away from zero."""
        kb = self.kb
        m = kb.local(Const(0.0, F32), name + "max", F32)
        with kb.loop(n, "k") as k:
            kb.assign(m, bmax(m, call("abs", at(k))))
        inv = kb.local(select(cmp("gt", m, Const(0.0, F32)), Const(float(qmax), F32) / m,
                              Const(0.0, F32), F32), name + "inv", F32)
        with kb.loop(n, "k") as k:
            v = kb.local(at(k) * inv, "v", F32)
            half = select(cmp("ge", v, Const(0.0, F32)), Const(0.5, F32), Const(-0.5, F32), F32)
            kb.store(buf, [k], Cast(v + half, I16))
        return kb.local(m / Const(float(qmax), F32), name + "unit", F32)

    def begin(self) -> None:
        """For this step: x.W of every gate row and h.R of the rows that read h as it is, each
        a row of a gemm (int32 sums through the gemm schedules), scaled to float (xw, hr).
        A float X and h are quantised to int16 for it, per step (their largest magnitude to
        about 32767: an error of 1.5e-5 of it)."""
        t, d = self.t, self.d
        g = t.gw
        unit: Expr | None = None
        if t.x8:
            def x_at(k: Expr) -> Expr:
                return self.x(k)
        else:
            assert t.xq is not None
            xq = t.xq
            unit = self._q16(t.i_sz, self.x, xq, g.qmax, "x")

            def x_at(k: Expr) -> Expr:
                return xq[[k]]
        self._gemv(g, x_at, lambda n, k: t.w_at(t.W, d, n, k), t.start, unit, t.xw, "x")
        if t.gr is None:
            return
        assert t.hq is not None and t.hr is not None
        hq = t.hq
        hunit = self._q16(self.h, lambda k: self.Hs[d, self.b, k], hq, t.gr.qmax, "h")
        self._gemv(t.gr, lambda k: hq[[k]], lambda n, k: t.w_at(self.R, d, n, k), None, hunit,
                   t.hr, "h")

    def _gemv(self, g: _Gemv, a_at: Any, w_at: Any, start_tab: BufRef | None,
              unit: Expr | None, out: BufRef, name: str) -> None:
        kb, d, rows = self.kb, self.d, g.rows
        asum = self._sum(g.k, a_at, name + "sum") if g.zp is not None else None

        def start(n: Expr) -> Expr:
            v: Expr = start_tab[[d * rows + n]] if start_tab is not None else Const(0, I32)
            if asum is not None and g.zp is not None:
                v = v - g.zp[[d * rows + n]] * asum
            return v

        def store(n: Expr, acc: Expr) -> None:
            sc: Expr = g.scale[[d * rows + n]]
            kb.store(out, [n], Cast(acc, F32) * (sc * unit if unit is not None else sc))
        g.run(kb, d, a_at, w_at, start, store)

    def dot_x(self, acc: Var, g: int, j: Expr) -> None:
        self.kb.assign(acc, acc + self.t.xw[[g * self.h + j]])

    def dot_h(self, acc: Var, g: int, j: Expr, scale: Any = None) -> None:
        t, kb, d = self.t, self.kb, self.d
        row = g * self.h + j
        if scale is None and t.hr is not None and (g + 1) * self.h <= t.plain_h:
            kb.assign(acc, acc + t.hr[[row]])
            return
        # GRU's candidate without linear_before_reset: (r * h).R, r known only now.
        assert t.rs is not None
        s = kb.local(Const(0.0, F32), "sh", F32)
        hs = kb.local(Const(0.0, F32), "hs", F32) if t.rz is not None else None
        with kb.loop(self.h, "k") as k:
            hv: Expr = self.Hs[d, self.b, k]
            if scale is not None:
                hv = kb.local(scale(k) * hv, "hv", F32)
            kb.assign(s, s + hv * Cast(t.w_at(self.R, d, row, k), F32))
            if hs is not None:
                kb.assign(hs, hs + hv)
        if hs is not None and t.rz is not None:
            kb.assign(s, s - t.rz[[d * t.rows + row]] * hs)
        kb.assign(acc, acc + s * t.rs[[d * t.rows + row]])


def _ref(self: Any, X: np.ndarray, W: np.ndarray, R: np.ndarray, q: list[Any],
         rest: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    X, W, R = self._dequant(X, W, R, q, attrs)
    return self._np(X, W, R, *rest, attrs)


# ------------------------------------------------------------------------------------------ ops
@register
class QdqRNN(_QRecurrent, _RNN):
    name = "QdqRNN"
    onnx_tests = ()

    def reference(self, X: np.ndarray, W: np.ndarray, R: np.ndarray,  # noqa: N803
                  B: np.ndarray | None = None, sequence_lens: np.ndarray | None = None,  # noqa: N803
                  initial_h: np.ndarray | None = None, initial_c: np.ndarray | None = None,
                  P: np.ndarray | None = None, W_scale: Any = None,  # noqa: N803
                  W_zero_point: Any = None, R_scale: Any = None,  # noqa: N803
                  R_zero_point: Any = None, X_scale: Any = None,  # noqa: N803
                  X_zero_point: Any = None, *,  # noqa: N803
                  activation_alpha: Sequence[float] | None = None,
                  activation_beta: Sequence[float] | None = None,
                  activations: Sequence[str] | None = None, clip: float | None = None,
                  direction: str = "forward", hidden_size: int | None = None,
                  layout: int = 0) -> list[np.ndarray]:
        attrs = dict(activation_alpha=activation_alpha, activation_beta=activation_beta,
                     activations=activations, clip=clip, direction=direction, layout=layout)
        q = [W_scale, W_zero_point, R_scale, R_zero_point, X_scale, X_zero_point]
        return _ref(self, X, W, R, q, [B, sequence_lens, initial_h, None, None], attrs)


@register
class QdqGRU(_QRecurrent, _GRU):
    name = "QdqGRU"
    onnx_tests = ()

    def reference(self, X: np.ndarray, W: np.ndarray, R: np.ndarray,  # noqa: N803
                  B: np.ndarray | None = None, sequence_lens: np.ndarray | None = None,  # noqa: N803
                  initial_h: np.ndarray | None = None, initial_c: np.ndarray | None = None,
                  P: np.ndarray | None = None, W_scale: Any = None,  # noqa: N803
                  W_zero_point: Any = None, R_scale: Any = None,  # noqa: N803
                  R_zero_point: Any = None, X_scale: Any = None,  # noqa: N803
                  X_zero_point: Any = None, *,  # noqa: N803
                  activation_alpha: Sequence[float] | None = None,
                  activation_beta: Sequence[float] | None = None,
                  activations: Sequence[str] | None = None, clip: float | None = None,
                  direction: str = "forward", hidden_size: int | None = None,
                  layout: int = 0, linear_before_reset: int = 0) -> list[np.ndarray]:
        attrs = dict(activation_alpha=activation_alpha, activation_beta=activation_beta,
                     activations=activations, clip=clip, direction=direction, layout=layout,
                     linear_before_reset=linear_before_reset)
        q = [W_scale, W_zero_point, R_scale, R_zero_point, X_scale, X_zero_point]
        return _ref(self, X, W, R, q, [B, sequence_lens, initial_h, None, None], attrs)


class _QLSTMBase(_QRecurrent, _LSTM):
    onnx_tests = ()
    writes_over: ClassVar[dict[int, int]] = {}  # not measured on these forms

    def reference(self, X: np.ndarray, W: np.ndarray, R: np.ndarray,  # noqa: N803
                  B: np.ndarray | None = None, sequence_lens: np.ndarray | None = None,  # noqa: N803
                  initial_h: np.ndarray | None = None, initial_c: np.ndarray | None = None,
                  P: np.ndarray | None = None, W_scale: Any = None,  # noqa: N803
                  W_zero_point: Any = None, R_scale: Any = None,  # noqa: N803
                  R_zero_point: Any = None, X_scale: Any = None,  # noqa: N803
                  X_zero_point: Any = None, *,  # noqa: N803
                  activation_alpha: Sequence[float] | None = None,
                  activation_beta: Sequence[float] | None = None,
                  activations: Sequence[str] | None = None, clip: float | None = None,
                  direction: str = "forward", hidden_size: int | None = None,
                  input_forget: int = 0, layout: int = 0) -> list[np.ndarray]:
        attrs = dict(activation_alpha=activation_alpha, activation_beta=activation_beta,
                     activations=activations, clip=clip, direction=direction, layout=layout,
                     input_forget=input_forget)
        q = [W_scale, W_zero_point, R_scale, R_zero_point, X_scale, X_zero_point]
        return _ref(self, X, W, R, q, [B, sequence_lens, initial_h, initial_c, P], attrs)


@register
class QdqLSTM(_QLSTMBase):
    name = "QdqLSTM"


@register
class DynamicQuantizeLSTM(_QLSTMBase):
    """onnxruntime's quantize_dynamic LSTM: W [nd, I, 4H] and R [nd, H, 4H] int8 (or uint8),
    scales and zero points per direction or per gate row; float X (aotc keeps X and h float,
    onnxruntime quantises them to uint8 at run time)."""

    name = "DynamicQuantizeLSTM"
    domain = "com.microsoft"
    transposed = True

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        x = ins[0]
        if x is not None and x.type.dtype.name != "float32":
            raise AotcError("X must be float32", node.name, node.op)
        super().check(node, list(ins[:X_SCALE]))
