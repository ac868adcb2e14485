"""RNN, GRU and LSTM over a static sequence: one kernel walks the time steps of each direction.

The hidden (and cell) state lives in a scratch buffer; per time step and batch row the gate
pre-activations are accumulated in locals and kept in a small scratch row, so the state is
overwritten only once every gate has read it. ``sequence_lens`` is only accepted when it is a
constant with every length equal to the sequence length (the static case).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.builder import BufRef
from aotc.loops.loop_ir import Const, Expr, Var, bmax, bmin, call, cmp, select
from aotc.ops import OpDef, register

# Activation name -> (uses alpha, uses beta, default alpha, default beta), onnxruntime's table.
ACTIVATIONS: dict[str, tuple[bool, bool, float, float]] = {
    "relu": (False, False, 0.0, 0.0), "tanh": (False, False, 0.0, 0.0),
    "sigmoid": (False, False, 0.0, 0.0), "affine": (True, True, 1.0, 0.0),
    "leakyrelu": (True, False, 0.01, 0.0), "thresholdedrelu": (True, False, 1.0, 0.0),
    "scaledtanh": (True, True, 1.0, 1.0), "hardsigmoid": (True, True, 0.2, 0.5),
    "elu": (True, False, 1.0, 0.0), "softsign": (False, False, 0.0, 0.0),
    "softplus": (False, False, 0.0, 0.0),
}
Act = tuple[str, float, float]  # (lower-case name, alpha, beta)


def _np_act(a: Act, x: np.ndarray) -> np.ndarray:
    name, al, be = a
    with np.errstate(over="ignore"):
        return {
            "relu": lambda: np.maximum(x, 0), "tanh": lambda: np.tanh(x),
            "sigmoid": lambda: 1 / (1 + np.exp(-x)), "affine": lambda: al * x + be,
            "leakyrelu": lambda: np.where(x >= 0, x, al * x),
            "thresholdedrelu": lambda: np.where(x > al, x, 0),
            "scaledtanh": lambda: al * np.tanh(be * x),
            "hardsigmoid": lambda: np.clip(al * x + be, 0, 1),
            "elu": lambda: np.where(x >= 0, x, al * (np.exp(x) - 1)),
            "softsign": lambda: x / (1 + np.abs(x)), "softplus": lambda: np.log1p(np.exp(x)),
        }[name]()


def _ir_act(a: Act, x: Var) -> Expr:
    """The activation of the local ``x`` (a variable, so it may appear more than once)."""
    name, al, be = a
    f = x.dtype
    one, zero = Const(1.0, f), Const(0.0, f)
    if name == "relu":
        return bmax(x, zero)
    if name == "tanh":
        return call("tanh", x)
    if name == "sigmoid":
        return one / (one + call("exp", -x))
    if name == "affine":
        return x * al + be
    if name == "leakyrelu":
        return select(cmp("ge", x, zero), x, x * al, f)
    if name == "thresholdedrelu":
        return select(cmp("gt", x, Const(al, f)), x, zero, f)
    if name == "scaledtanh":
        return call("tanh", x * be) * al
    if name == "hardsigmoid":
        return bmin(bmax(x * al + be, zero), one)
    if name == "elu":
        return select(cmp("ge", x, zero), x, (call("exp", x) - one) * al, f)
    if name == "softsign":
        return x / (one + call("abs", x))
    return call("log1p", call("exp", x))  # softplus


class _Recurrent(OpDef):
    """Shared attribute handling, checks, shapes and the time/batch loop nest."""

    n_gates: ClassVar[int] = 1
    default_acts: ClassVar[tuple[str, ...]] = ("Tanh",)
    has_layout: ClassVar[bool] = True
    n_outputs: ClassVar[int] = 2

    # ------------------------------------------------------------------ attributes
    def _dirs(self, node: Node) -> int:
        d = node.attrs.get("direction", "forward")
        if d not in ("forward", "reverse", "bidirectional"):
            raise AotcError(f"direction={d!r} is not forward, reverse or bidirectional",
                            node.name, node.op)
        return 2 if d == "bidirectional" else 1

    def _acts(self, node: Node, nd: int) -> list[list[Act]]:
        """Per direction, the activation functions with their alpha/beta."""
        names = [str(a) for a in (node.attrs.get("activations") or self.default_acts)]
        n = len(self.default_acts)
        if len(names) == n and nd == 2:
            names = names * 2
        if len(names) != n * nd:
            raise AotcError(f"{len(names)} activations given; expected {n * nd}",
                            node.name, node.op)
        alphas = list(node.attrs.get("activation_alpha") or ())
        betas = list(node.attrs.get("activation_beta") or ())
        out: list[Act] = []
        for name in names:
            key = name.lower()
            if key not in ACTIVATIONS:
                raise AotcError(f"activation {name!r} is not supported", node.name, node.op)
            ua, ub, da, db = ACTIVATIONS[key]
            al = float(alphas.pop(0)) if ua and alphas else da
            be = float(betas.pop(0)) if ub and betas else db
            out.append((key, al, be))
        return [out[d * n:(d + 1) * n] for d in range(nd)]

    def _dims(self, node: Node, x_shape: Sequence[int], r_shape: Sequence[int]
              ) -> tuple[int, int, int, int]:
        """(seq_length, batch, input_size, hidden_size)."""
        if len(x_shape) != 3:
            raise AotcError(f"X has rank {len(x_shape)}; expected 3", node.name, node.op)
        if len(r_shape) != 3:
            raise AotcError(f"R has rank {len(r_shape)}; expected 3", node.name, node.op)
        layout = int(node.attrs.get("layout", 0) or 0)
        s, b = (x_shape[1], x_shape[0]) if layout == 1 else (x_shape[0], x_shape[1])
        h = int(r_shape[-1])
        hs = node.attrs.get("hidden_size")
        if hs is not None and int(hs) != h:
            raise AotcError(f"hidden_size={hs} does not match R's last dim {h}",
                            node.name, node.op)
        return int(s), int(b), int(x_shape[2]), h

    # ------------------------------------------------------------------ checks and shapes
    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        for i, v in enumerate(ins):
            if v is None or i == 4:
                continue
            if v.type.dtype.name not in self.dtypes:
                raise AotcError(f"input {i} has dtype {v.type.dtype.name}; supported: "
                                f"{', '.join(self.dtypes)}", node.name, node.op)
        layout = int(node.attrs.get("layout", 0) or 0)
        if layout not in (0, 1):
            raise AotcError(f"layout={layout} is not 0 or 1", node.name, node.op)
        nd = self._dirs(node)
        self._acts(node, nd)
        x, w, r = ins[0], ins[1], ins[2]
        assert x is not None and w is not None and r is not None
        s, b, i_sz, h = self._dims(node, x.type.shape, r.type.shape)
        g = self.n_gates
        if w.type.shape != (nd, g * h, i_sz) or r.type.shape != (nd, g * h, h):
            raise AotcError(f"W {w.type.shape} / R {r.type.shape} do not match "
                            f"[{nd}, {g * h}, {i_sz}] / [{nd}, {g * h}, {h}]", node.name, node.op)
        bias = ins[3] if len(ins) > 3 else None
        if bias is not None and bias.type.shape != (nd, 2 * g * h):
            raise AotcError(f"B has shape {bias.type.shape}; expected [{nd}, {2 * g * h}]",
                            node.name, node.op)
        state = (b, nd, h) if layout else (nd, b, h)
        for k in (5, 6):
            v = ins[k] if len(ins) > k else None
            if v is not None and v.type.shape != state:
                raise AotcError(f"input {k} has shape {v.type.shape}; expected "
                                f"{list(state)}", node.name, node.op)
        if self.linear_before_reset_attr(node) not in (0, 1):
            raise AotcError("linear_before_reset must be 0 or 1", node.name, node.op)
        sl = ins[4] if len(ins) > 4 else None
        if sl is not None:
            if not sl.is_const:
                raise AotcError("sequence_lens must be a compile-time constant (variable "
                                "sequence lengths are not supported)", node.name, node.op)
            lens = np.asarray(sl.const).reshape(-1)
            if lens.size != b or np.any(lens != s):
                raise AotcError(f"sequence_lens={lens.tolist()} differ from the sequence length "
                                f"{s}; only full-length sequences are supported",
                                node.name, node.op)

    def linear_before_reset_attr(self, node: Node) -> int:
        return 0

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        # An all-zero constant initial state (torch's exporter writes one) is the default
        # state: dropping it keeps its bytes out of flash.
        inputs = list(node.inputs)
        for k in (5, 6):  # initial_h, initial_c
            v = ins[k] if k < len(ins) else None
            if v is not None and v.is_const and not np.any(v.const):
                inputs[k] = ""
        return node.with_(inputs=tuple(inputs)) if inputs != list(node.inputs) else node

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x, r = ins[0], ins[2]
        assert x is not None and r is not None
        s, b, _, h = self._dims(node, x.type.shape, r.type.shape)
        nd = self._dirs(node)
        layout = int(node.attrs.get("layout", 0) or 0)
        dt = x.type.dtype
        y = (b, s, nd, h) if layout else (s, nd, b, h)
        yh = (b, nd, h) if layout else (nd, b, h)
        return [TensorType(y, dt)] + [TensorType(yh, dt)] * (self.n_outputs - 1)

    # ------------------------------------------------------------------ numpy reference
    def _np(self, X: np.ndarray, W: np.ndarray, R: np.ndarray, B: np.ndarray | None,
            sequence_lens: np.ndarray | None, initial_h: np.ndarray | None,
            initial_c: np.ndarray | None, P: np.ndarray | None, attrs: dict[str, Any]
            ) -> list[np.ndarray]:
        node = Node(op=self.name, name="", inputs=(), outputs=(), attrs=attrs)
        nd = self._dirs(node)
        acts = self._acts(node, nd)
        layout = int(attrs.get("layout") or 0)
        x = X.astype(np.float64)
        if layout:
            x = x.transpose(1, 0, 2)
        s, b, _ = x.shape
        h = R.shape[-1]
        g = self.n_gates
        hs = np.zeros((nd, b, h)) if initial_h is None else initial_h.astype(np.float64)
        cs = np.zeros((nd, b, h)) if initial_c is None else initial_c.astype(np.float64)
        if layout:
            hs = hs.transpose(1, 0, 2).copy() if initial_h is not None else hs
            cs = cs.transpose(1, 0, 2).copy() if initial_c is not None else cs
        bias = np.zeros((nd, 2 * g * h)) if B is None else B.astype(np.float64)
        peep = np.zeros((nd, 3 * h)) if P is None else P.astype(np.float64)
        y = np.zeros((s, nd, b, h))
        clip = attrs.get("clip")
        direction = attrs.get("direction", "forward")
        for d in range(nd):
            rev = direction == "reverse" or d == 1
            hp, cp = hs[d], cs[d]
            for t in (range(s - 1, -1, -1) if rev else range(s)):
                hp, cp = self._np_cell(x[t], W[d].astype(np.float64), R[d].astype(np.float64),
                                       bias[d], peep[d], hp, cp, acts[d], clip, attrs)
                y[t, d] = hp
            hs[d], cs[d] = hp, cp
        if layout:
            y, hs, cs = y.transpose(2, 0, 1, 3), hs.transpose(1, 0, 2), cs.transpose(1, 0, 2)
        dt = X.dtype
        return [y.astype(dt), hs.astype(dt), cs.astype(dt)][:self.n_outputs]

    def _np_cell(self, x: np.ndarray, w: np.ndarray, r: np.ndarray, bias: np.ndarray,
                 peep: np.ndarray, hp: np.ndarray, cp: np.ndarray, acts: list[Act],
                 clip: float | None, attrs: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    # ------------------------------------------------------------------ lowering
    def lower(self, node: Node, kb: Any, make_ctx: Callable[..., _Ctx] | None = None) -> None:
        """``make_ctx`` (the integer-weight forms, qrecurrent.py): builds the per-step context
        in place of _Ctx, from the same arguments."""
        ins: list[BufRef | None] = list(kb.inputs) + [None] * 8
        X, W, R = ins[0], ins[1], ins[2]
        assert X is not None and W is not None and R is not None
        s, b, i_sz, h = self._dims(node, X.shape, self._r_shape(R.shape))
        nd = self._dirs(node)
        acts = self._acts(node, nd)
        layout = int(node.attrs.get("layout", 0) or 0)
        f32 = X.dtype if X.dtype.is_float else dtypes.float32  # int8 X: qrecurrent.py
        outs = list(kb.outputs) + [None] * 3
        Hs = kb.scratch_buffer("h", f32, (nd, b, h))
        Cs = kb.scratch_buffer("c", f32, (nd, b, h)) if self.n_gates == 4 else None
        G = kb.scratch_buffer("g", f32, (self.n_gates * h,))

        def state_idx(d: Any, bb: Any, j: Any) -> list[Any]:
            return [bb, d, j] if layout else [d, bb, j]

        for buf, init in ((Hs, ins[5]), (Cs, ins[6])):
            if buf is None:
                continue
            with kb.loops((nd, b, h), ("d", "b", "j")) as (d, bb, j):
                kb.store(buf, [d, bb, j],
                         Const(0.0, f32) if init is None else init[state_idx(d, bb, j)])
        clip = node.attrs.get("clip")
        direction = node.attrs.get("direction", "forward")
        for d in range(nd):
            rev = direction == "reverse" or d == 1
            with kb.loop(s, "t") as t:
                tt = (s - 1) - t if rev else t
                with kb.loop(b, "b") as bb:
                    ctx = (make_ctx or _Ctx)(kb, f32, X, W, R, ins[3], ins[7], Hs, Cs, G, d,
                                             tt, bb, layout, i_sz, h, self.n_gates, clip)
                    ctx.begin()
                    self._step(node, ctx, acts[d])
                    if outs[0] is not None:
                        with kb.loop(h, "j") as j:
                            yi = [bb, tt, d, j] if layout else [tt, d, bb, j]
                            kb.store_output(yi, Hs[d, bb, j], out=0)
        for k, buf in ((1, Hs), (2, Cs)):
            if k < len(kb.outputs) and outs[k] is not None and buf is not None:
                with kb.loops((nd, b, h), ("d", "b", "j")) as (d, bb, j):
                    kb.store_output(state_idx(d, bb, j), buf[d, bb, j], out=k)

    def _r_shape(self, shape: Sequence[int]) -> Sequence[int]:
        """R's shape as [nd, gates * hidden, hidden] (qrecurrent.py's transposed R)."""
        return shape

    def _step(self, node: Node, c: _Ctx, acts: list[Act]) -> None:
        raise NotImplementedError


class _Ctx:
    """What one (direction, time, batch row) step reads and writes."""

    def __init__(self, kb: Any, f32: dtypes.DType, X: BufRef, W: BufRef, R: BufRef,
                 B: BufRef | None, P: BufRef | None, Hs: BufRef, Cs: BufRef | None, G: BufRef,
                 d: int, tt: Expr, b: Expr, layout: int, i_sz: int, h: int, n_gates: int,
                 clip: float | None) -> None:
        self.kb, self.f32, self.X, self.W, self.R, self.B, self.P = kb, f32, X, W, R, B, P
        self.Hs, self.Cs, self.G, self.d, self.tt, self.b = Hs, Cs, G, d, tt, b
        self.layout, self.i_sz, self.h, self.n_gates, self.clip = layout, i_sz, h, n_gates, clip

    def begin(self) -> None:
        """Work before the step's gates (the integer forms compute x.W here)."""

    def x(self, k: Expr) -> Expr:
        return self.X[[self.b, self.tt, k] if self.layout else [self.tt, self.b, k]]

    def bias(self, g: int, j: Expr, which: str = "wr") -> Expr:
        """Wb[g] + Rb[g] (or only one of them) for unit j; 0 without B."""
        zero = Const(0.0, self.f32)
        if self.B is None:
            return zero
        out: Expr | None = None
        for part, off in (("w", 0), ("r", self.n_gates)):
            if part in which:
                v = self.B[self.d, (off + g) * self.h + j]
                out = v if out is None else out + v
        return out if out is not None else zero

    def dot_x(self, acc: Var, g: int, j: Expr) -> None:
        with self.kb.loop(self.i_sz, "k") as k:
            self.kb.assign(acc, acc + self.x(k) * self.W[self.d, g * self.h + j, k])

    def dot_h(self, acc: Var, g: int, j: Expr,
              scale: Callable[[Expr], Expr] | None = None) -> None:
        """acc += sum_k H[k] * R[g, j, k] (H[k] times scale(k) when given)."""
        with self.kb.loop(self.h, "k") as k:
            hv: Expr = self.Hs[self.d, self.b, k]
            if scale is not None:
                hv = scale(k) * hv
            self.kb.assign(acc, acc + hv * self.R[self.d, g * self.h + j, k])

    def gate(self, g: int, j: Expr, name: str) -> Var:
        """The full pre-activation of gate g, unit j: bias + X.W + H.R."""
        acc = self.kb.local(self.bias(g, j), name, self.f32)
        self.dot_x(acc, g, j)
        self.dot_h(acc, g, j)
        return acc

    def activate(self, a: Act, pre: Expr, name: str) -> Var:
        """act(clip(pre)) as a new local."""
        if self.clip is not None:
            c = float(self.clip)
            pre = bmin(bmax(pre, -c), c)
        v = self.kb.local(pre, name + "_p", self.f32)
        return self.kb.local(_ir_act(a, v), name, self.f32)


def _np_clip(x: np.ndarray, clip: float | None) -> np.ndarray:
    return x if clip is None else np.clip(x, -clip, clip)


# --------------------------------------------------------------------------------------- RNN
class _RNN(_Recurrent):
    n_gates = 1
    default_acts = ("Tanh",)
    onnx_tests = ("test_rnn_seq_length", "test_simple_rnn_*")

    def reference(self, X: np.ndarray, W: np.ndarray, R: np.ndarray,  # noqa: N803
                  B: np.ndarray | None = None, sequence_lens: np.ndarray | None = None,  # noqa: N803
                  initial_h: np.ndarray | None = None, *,
                  activation_alpha: Sequence[float] | None = None,
                  activation_beta: Sequence[float] | None = None,
                  activations: Sequence[str] | None = None, clip: float | None = None,
                  direction: str = "forward", hidden_size: int | None = None,
                  layout: int = 0) -> list[np.ndarray]:
        attrs = dict(activation_alpha=activation_alpha, activation_beta=activation_beta,
                     activations=activations, clip=clip, direction=direction, layout=layout)
        return self._np(X, W, R, B, sequence_lens, initial_h, None, None, attrs)

    def _np_cell(self, x, w, r, bias, peep, hp, cp, acts, clip, attrs):  # type: ignore[no-untyped-def]
        h = hp.shape[-1]
        pre = x @ w.T + hp @ r.T + bias[:h] + bias[h:]
        return _np_act(acts[0], _np_clip(pre, clip)), cp

    def _step(self, node: Node, c: _Ctx, acts: list[Act]) -> None:
        kb = c.kb
        with kb.loop(c.h, "j") as j:
            pre = c.gate(0, j, "a")
            kb.store(c.G, [j], c.activate(acts[0], pre, "hn"))
        with kb.loop(c.h, "j") as j:
            kb.store(c.Hs, [c.d, c.b, j], c.G[j])


@register
class RNN7(_RNN):
    name = "RNN"
    since = 7


@register
class RNN14(_RNN):
    name = "RNN"
    since = 14


@register
class RNN22(_RNN):
    name = "RNN"
    since = 22


# --------------------------------------------------------------------------------------- GRU
class _GRU(_Recurrent):
    n_gates = 3
    default_acts = ("Sigmoid", "Tanh")
    onnx_tests = ("test_gru_*",)

    def linear_before_reset_attr(self, node: Node) -> int:
        return int(node.attrs.get("linear_before_reset", 0) or 0)

    def reference(self, X: np.ndarray, W: np.ndarray, R: np.ndarray,  # noqa: N803
                  B: np.ndarray | None = None, sequence_lens: np.ndarray | None = None,  # noqa: N803
                  initial_h: np.ndarray | None = None, *,
                  activation_alpha: Sequence[float] | None = None,
                  activation_beta: Sequence[float] | None = None,
                  activations: Sequence[str] | None = None, clip: float | None = None,
                  direction: str = "forward", hidden_size: int | None = None,
                  layout: int = 0, linear_before_reset: int = 0) -> list[np.ndarray]:
        attrs = dict(activation_alpha=activation_alpha, activation_beta=activation_beta,
                     activations=activations, clip=clip, direction=direction, layout=layout,
                     linear_before_reset=linear_before_reset)
        return self._np(X, W, R, B, sequence_lens, initial_h, None, None, attrs)

    def _np_cell(self, x, w, r, bias, peep, hp, cp, acts, clip, attrs):  # type: ignore[no-untyped-def]
        h = hp.shape[-1]
        wb, rb = bias[:3 * h], bias[3 * h:]
        xw = x @ w.T + wb
        z = _np_act(acts[0], _np_clip(xw[:, :h] + hp @ r[:h].T + rb[:h], clip))
        rr = _np_act(acts[0], _np_clip(xw[:, h:2 * h] + hp @ r[h:2 * h].T + rb[h:2 * h], clip))
        if attrs.get("linear_before_reset"):
            pre = xw[:, 2 * h:] + rr * (hp @ r[2 * h:].T + rb[2 * h:])
        else:
            pre = xw[:, 2 * h:] + (rr * hp) @ r[2 * h:].T + rb[2 * h:]
        hn = _np_act(acts[1], _np_clip(pre, clip))
        return (1 - z) * hn + z * hp, cp

    def _step(self, node: Node, c: _Ctx, acts: list[Act]) -> None:
        kb, h = c.kb, c.h
        with kb.loop(h, "j") as j:  # update (z) and reset (r) gates
            kb.store(c.G, [j], c.activate(acts[0], c.gate(0, j, "az"), "z"))
            kb.store(c.G, [h + j], c.activate(acts[0], c.gate(1, j, "ar"), "r"))
        with kb.loop(h, "j") as j:  # the candidate state
            xa = kb.local(c.bias(2, j, "w"), "ax", c.f32)
            c.dot_x(xa, 2, j)
            ha = kb.local(c.bias(2, j, "r"), "ah", c.f32)
            if self.linear_before_reset_attr(node):
                c.dot_h(ha, 2, j)
                pre = xa + c.G[h + j] * ha
            else:
                c.dot_h(ha, 2, j, scale=lambda k: c.G[h + k])
                pre = xa + ha
            kb.store(c.G, [2 * h + j], c.activate(acts[1], pre, "hc"))
        with kb.loop(h, "j") as j:
            z = kb.local(c.G[j], "zj", c.f32)
            hp = c.Hs[c.d, c.b, j]
            kb.store(c.Hs, [c.d, c.b, j], (Const(1.0, c.f32) - z) * c.G[2 * h + j] + z * hp)


@register
class GRU7(_GRU):
    name = "GRU"
    since = 7


@register
class GRU14(_GRU):
    name = "GRU"
    since = 14


@register
class GRU22(_GRU):
    name = "GRU"
    since = 22


# -------------------------------------------------------------------------------------- LSTM
class _LSTM(_Recurrent):
    n_gates = 4
    default_acts = ("Sigmoid", "Tanh", "Tanh")
    n_outputs = 3
    onnx_tests = ("test_lstm_*",)
    # Y_h over initial_h, Y_c over initial_c: the kernel reads the initial states once, into
    # its scratch state, before it writes anything, and writes Y_h and Y_c last (a state
    # slot, e.g. TFLite's float LSTM's variable tensors, is then written in place).
    writes_over: ClassVar[dict[int, int]] = {1: 5, 2: 6}

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        if int(node.attrs.get("input_forget", 0) or 0) not in (0, 1):
            raise AotcError("input_forget must be 0 or 1", node.name, node.op)
        p = ins[7] if len(ins) > 7 else None
        nd = self._dirs(node)
        r = ins[2]
        assert r is not None
        if p is not None and p.type.shape != (nd, 3 * r.type.shape[-1]):
            raise AotcError(f"P has shape {p.type.shape}; expected [{nd}, "
                            f"{3 * r.type.shape[-1]}]", node.name, node.op)

    def reference(self, X: np.ndarray, W: np.ndarray, R: np.ndarray,  # noqa: N803
                  B: np.ndarray | None = None, sequence_lens: np.ndarray | None = None,  # noqa: N803
                  initial_h: np.ndarray | None = None, initial_c: np.ndarray | None = None,
                  P: np.ndarray | None = None, *,  # noqa: N803
                  activation_alpha: Sequence[float] | None = None,
                  activation_beta: Sequence[float] | None = None,
                  activations: Sequence[str] | None = None, clip: float | None = None,
                  direction: str = "forward", hidden_size: int | None = None,
                  input_forget: int = 0, layout: int = 0) -> list[np.ndarray]:
        attrs = dict(activation_alpha=activation_alpha, activation_beta=activation_beta,
                     activations=activations, clip=clip, direction=direction, layout=layout,
                     input_forget=input_forget)
        return self._np(X, W, R, B, sequence_lens, initial_h, initial_c, P, attrs)

    def _np_cell(self, x, w, r, bias, peep, hp, cp, acts, clip, attrs):  # type: ignore[no-untyped-def]
        h = hp.shape[-1]
        a = x @ w.T + hp @ r.T + bias[:4 * h] + bias[4 * h:]
        f_, g_, h_ = acts
        i = _np_act(f_, _np_clip(a[:, :h] + peep[:h] * cp, clip))
        if attrs.get("input_forget"):
            f = 1 - i
        else:
            f = _np_act(f_, _np_clip(a[:, 2 * h:3 * h] + peep[2 * h:] * cp, clip))
        cn = f * cp + i * _np_act(g_, _np_clip(a[:, 3 * h:], clip))
        o = _np_act(f_, _np_clip(a[:, h:2 * h] + peep[h:2 * h] * cn, clip))
        return o * _np_act(h_, cn), cn

    def _step(self, node: Node, c: _Ctx, acts: list[Act]) -> None:
        kb, h = c.kb, c.h
        assert c.Cs is not None
        with kb.loop(h, "j") as j:  # pre-activations of the gates i, o, f, c
            for g, nm in enumerate(("ai", "ao", "af", "ac")):
                kb.store(c.G, [g * h + j], c.gate(g, j, nm))
        f_, g_, h_ = acts
        with kb.loop(h, "j") as j:
            cp = kb.local(c.Cs[c.d, c.b, j], "cp", c.f32)

            def peep(k: int, cell: Expr, j: Expr = j) -> Expr:
                return Const(0.0, c.f32) if c.P is None else c.P[c.d, k * h + j] * cell

            i = c.activate(f_, c.G[j] + peep(0, cp), "ig")
            if int(node.attrs.get("input_forget", 0) or 0):
                f = kb.local(Const(1.0, c.f32) - i, "fg", c.f32)
            else:
                f = c.activate(f_, c.G[2 * h + j] + peep(2, cp), "fg")
            cc = c.activate(g_, c.G[3 * h + j], "cg")
            cn = kb.local(f * cp + i * cc, "cn", c.f32)
            o = c.activate(f_, c.G[h + j] + peep(1, cn), "og")
            kb.store(c.Cs, [c.d, c.b, j], cn)
            kb.store(c.Hs, [c.d, c.b, j], o * _ir_act(h_, cn))


@register
class LSTM7(_LSTM):
    name = "LSTM"
    since = 7


@register
class LSTM14(_LSTM):
    name = "LSTM"
    since = 14


@register
class LSTM22(_LSTM):
    name = "LSTM"
    since = 22
