"""TFLite Micro's integer LSTM (UNIDIRECTIONAL_SEQUENCE_LSTM with int8 or int16 activations,
int8 weights and an int16 cell state), as one aotc-domain op: ``QLstm``.

The arithmetic is TFLM's (tensorflow/lite/micro/kernels/lstm_eval.h, lstm_eval_common.cc):
per time step and gate (order i, f, c, o), two fully connected products, each requantised on
its own to int16 at scale 2^-12 (the input one with the gate bias, the recurrent one with
none), added with int16 saturation; the gate's activation on int16: sigmoid (i, f, o) or tanh
(c), both TFLite's interpolated 16-bit table (``sigmoid_table_uint16``, output scale 2^-15).
The cell: ``f * c`` and ``i * g`` each requantised to the cell scale (int16), added saturating,
clipped to the quantised cell clip; the hidden state: tanh of the cell (input shift from the
cell scale's power of two) times ``o``, requantised to the hidden state's scale and zero point.
int8 activations accumulate in int32 (gemmlowp's MultiplyByQuantizedMultiplier); int16
activations (16x8) accumulate in int64 with an int64 bias (TFLM's int64 overload, which keeps
16 bits of the multiplier). The input offsets are folded into the biases at compile time.

Inputs: x (3-D, time-major or batch-major), input weights [4, H, I], recurrent weights
[4, H, H], bias [4, H] (int32; int64 for 16x8), hidden state [B, H], cell state [B, H]
(int16). Outputs: y, the next hidden state, the next cell state. The next states may be written
over the states (``writes_over``): each step computes every gate from the previous hidden state
before it writes any of it, and the cell state is updated element by element, so the TFLite
importer makes both states slots of the caller's state buffer, which cost no copy per call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops import dsp
from aotc.loops.loop_ir import INDEX, Bin, Cast, Const, Expr, Store, bmax, bmin, call, cmp, select
from aotc.ops import OpDef, register
from aotc.ops.quant import arith as qmath
from aotc.schedules.gemm import knobs as GEMM
from aotc.schedules.gemm.tiled import over_tiles, store_tile

I16, I32, I64 = dtypes.BY_NAME["int16"], dtypes.BY_NAME["int32"], dtypes.BY_NAME["int64"]
U16 = dtypes.BY_NAME["uint16"]
GATES = "ifco"  # TFLite's gate order (lstm_shared.h)

# TFLite's sigmoid(i / 24) in 0.16 (tensorflow/lite/kernels/internal/common.h,
# sigmoid_table_uint16, copied: it is not round(65536 * sigmoid(i / 24)) everywhere), shared
# by its 16-bit sigmoid and tanh.
SIGMOID_TABLE = np.array([
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794,
    41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443,
    48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374,
    54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544,
    58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279,
    61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990,
    63090, 63186, 63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030,
    64090, 64148, 64204, 64257, 64308, 64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652,
    64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019,
    65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234,
    65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360,
    65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476,
    65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516,
    65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529,
    65529, 65530, 65530, 65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532,
    65532, 65532, 65532, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534,
    65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535], np.int64)


# ------------------------------------------------------------------ TFLM's scalar primitives
def sigmoid16(x: np.ndarray) -> np.ndarray:
    """reference_integer_ops::Logistic on int16 with input_multiplier 0, shift 0 (LSTM)."""
    v = x.astype(np.int64) * 3
    a = np.abs(v)
    uh = a >> 9
    ua, ub = SIGMOID_TABLE[np.minimum(uh, 254)], SIGMOID_TABLE[np.minimum(uh + 1, 255)]
    r = np.where(uh >= 255, 0x7FFF << 10, (ua << 9) + (a & 0x1FF) * (ub - ua))
    r = np.where(v >= 0, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1) >> 10
    return r.astype(np.int16)


def tanh_params(cell_power: int) -> tuple[int, int]:
    """TFLM lstm_internal::Tanh: (input multiplier, right shift) of its int16 input."""
    left = (15 + cell_power) - 3
    mult = 0
    if left < 0:
        left, mult = -left, 3
    if mult == 0:  # reference_integer_ops::Tanh's power-of-two case
        return 3 << left, 0
    return mult, left


def tanh16(x: np.ndarray, cell_power: int) -> np.ndarray:
    mult, shift = tanh_params(cell_power)
    rnd = (1 << (shift - 1)) if shift > 0 else 0
    v = (x.astype(np.int64) * mult + rnd) >> shift
    a = np.abs(v)
    uh = a >> 8
    ua, ub = SIGMOID_TABLE[np.minimum(uh, 254)], SIGMOID_TABLE[np.minimum(uh + 1, 255)]
    r = np.where(uh >= 255, 0xFFFF << 8, (ua << 8) + (a & 0xFF) * (ub - ua))
    r = np.where(v >= 0, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1) >> 8
    return r.astype(np.int16)


def _mbqm(acc: np.ndarray, m: int, s: int, wide: bool) -> np.ndarray:
    f = qmath.mbqm64 if wide else qmath.mbqm
    return np.array([f(int(v), m, s) for v in acc.ravel()], np.int64).reshape(acc.shape)


def _sat16(v: np.ndarray) -> np.ndarray:
    return np.clip(v, -32768, 32767)


@register
class QLstm(OpDef):
    name = "QLstm"
    domain = "aotc"
    dtypes = ("int8", "int16")
    const_inputs = (1, 2, 3)
    # Outputs 1 and 2 (the next hidden and cell states) may be written over inputs 4 and 5.
    writes_over: ClassVar[dict[int, int]] = {1: 4, 2: 5}

    def reference(self, x: np.ndarray, w_in: np.ndarray, w_rec: np.ndarray, bias: np.ndarray,
                  h: np.ndarray, c: np.ndarray, *, time_major: int = 0,
                  x_zero_point: int = 0, h_zero_point: int = 0,
                  in_mult: Sequence[int] = (), in_shift: Sequence[int] = (),
                  rec_mult: Sequence[int] = (), rec_shift: Sequence[int] = (),
                  fc_mult: int = 0, fc_shift: int = 0, ic_mult: int = 0, ic_shift: int = 0,
                  out_mult: int = 0, out_shift: int = 0, cell_power: int = -15,
                  cell_clip: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        wide = x.dtype == np.int16
        xs = x if time_major else x.transpose(1, 0, 2)  # [time, batch, in]
        hq = h.astype(np.int64).reshape(xs.shape[1], -1).copy()
        cq = c.astype(np.int64).reshape(xs.shape[1], -1).copy()
        info = np.iinfo(h.dtype)
        ys = []
        for t in range(xs.shape[0]):
            xt = xs[t].astype(np.int64) - x_zero_point
            ht = hq - h_zero_point
            g = []
            for k in range(4):
                a = _sat16(_mbqm(xt @ w_in[k].astype(np.int64).T + bias[k].astype(np.int64),
                                 in_mult[k], in_shift[k], wide))
                r = _sat16(_mbqm(ht @ w_rec[k].astype(np.int64).T, rec_mult[k], rec_shift[k],
                                 wide))
                s = _sat16(a + r)
                g.append((tanh16(s, -12) if k == 2 else sigmoid16(s)).astype(np.int64))
            gi, gf, gc, go = g
            c1 = _sat16(_mbqm(gf * cq, fc_mult, fc_shift, False))
            c2 = _sat16(_mbqm(gi * gc, ic_mult, ic_shift, False))
            cq = _sat16(c1 + c2)
            if cell_clip > 0:
                cq = np.clip(cq, -cell_clip, cell_clip)
            th = tanh16(cq, cell_power).astype(np.int64)
            hq = np.clip(_mbqm(th * go, out_mult, out_shift, False) + h_zero_point,
                         info.min, info.max)
            ys.append(hq.copy())
        y = np.stack(ys).astype(x.dtype)
        if not time_major:
            y = y.transpose(1, 0, 2)
        return y, hq.reshape(h.shape).astype(h.dtype), cq.reshape(c.shape).astype(np.int16)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x, wi, wr, b, h, c = (list(ins) + [None] * 6)[:6]
        if x is None or wi is None or wr is None or b is None or h is None or c is None:
            raise AotcError("needs the input, weights, bias and both states", node.name,
                            node.op)
        if len(x.type.shape) != 3:
            raise AotcError(f"the input has shape {list(x.type.shape)}; expected 3-D",
                            node.name, node.op)
        tm = int(node.attrs.get("time_major", 0))
        batch, n_in = (x.type.shape[1] if tm else x.type.shape[0]), x.type.shape[2]
        hid = wr.type.shape[-1] if len(wr.type.shape) == 3 else -1
        if wi.type.shape != (4, hid, n_in) or wr.type.shape != (4, hid, hid) or \
                b.type.shape != (4, hid) or h.type.numel != batch * hid or \
                c.type.numel != batch * hid:
            raise AotcError("the input, weights, bias and state shapes do not agree",
                            node.name, node.op)
        wide = x.type.dtype.name == "int16"
        want = ("int8", "int8", "int64" if wide else "int32", x.type.dtype.name, "int16")
        got = tuple(v.type.dtype.name for v in (wi, wr, b, h, c))
        if got != want:
            raise AotcError(f"weights, bias and states are {', '.join(got)}; a "
                            f"{x.type.dtype.name} LSTM needs {', '.join(want)}", node.name,
                            node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x, wr, h, c = ins[0], ins[2], ins[4], ins[5]
        assert x is not None and wr is not None and h is not None and c is not None
        return [TensorType((*x.type.shape[:2], wr.type.shape[-1]), x.type.dtype), h.type,
                c.type]

    def macs(self, node: Node, g: Any) -> int:
        x, wi, wr = (g.type(i) for i in node.inputs[:3])
        steps = x.shape[0] * x.shape[1]
        return int(steps * (wi.numel + wr.numel))

    # ------------------------------------------------------------------ lowering
    def lower(self, node: Node, kb: Any) -> None:
        a = node.attrs
        x, w_in, w_rec, _, h_in, c_in = kb.inputs[:6]
        y, h_out, c_out = kb.outputs[:3]
        tm = int(a.get("time_major", 0))
        steps, batch = (x.shape[0], x.shape[1]) if tm else (x.shape[1], x.shape[0])
        n_in, hid = x.shape[2], w_rec.shape[-1]
        wide = x.dtype.name == "int16"
        acc_t = I64 if wide else I32
        wi = np.asarray(kb.input_const(1), np.int64)
        wr = np.asarray(kb.input_const(2), np.int64)
        bias = np.asarray(kb.input_const(3), np.int64)
        xz, hz = int(a.get("x_zero_point", 0)), int(a.get("h_zero_point", 0))
        # (x - xz) . w + b = x . w + (b - xz * sum(w)): the offsets folded into the biases.
        b_in = kb.const("bias_in", bias - xz * wi.sum(axis=2), acc_t)
        b_rec = kb.const("bias_rec", -hz * wr.sum(axis=2), acc_t)
        table = kb.const("sigmoid", SIGMOID_TABLE, U16)
        G = kb.scratch_buffer("gates", I16, (4, hid))
        hinfo = np.iinfo(h_out.dtype.np)

        def requant(acc: Expr, m: int, s: int) -> Expr:
            if wide:
                red, total = qmath.mbqm64_params(m, s)
                v = Bin("shr", acc * Const(red, I64) + Const(1 << (total - 1), I64),
                        Const(total, I64), I64)
                return Cast(v, I32)
            return call("q_mbqm", acc, Const(m, I32), Const(s, I32), dtype=I32)

        def sat(v: Expr, lo: int = -32768, hi: int = 32767) -> Expr:
            return bmin(bmax(v, Const(lo, I32)), Const(hi, I32))

        def lut(idx: Expr) -> Expr:
            return Cast(table[[Cast(idx, INDEX)]], I32)

        def interp(v: Expr, bits: int, sat_value: int) -> Expr:
            """TFLM's table interpolation of |v| with ``bits`` fraction bits per entry."""
            av = kb.local(call("abs", v, dtype=I32), "av", I32)
            uh = kb.local(Bin("shr", av, Const(bits, I32), I32), "uh", I32)
            ui = kb.local(bmin(uh, Const(254, I32)), "ui", I32)
            ua = kb.local(lut(ui), "ua", I32)
            ut = Bin("band", av, Const((1 << bits) - 1, I32), I32)
            r = Bin("shl", ua, Const(bits, I32), I32) + ut * (lut(ui + 1) - ua)
            return select(cmp("ge", uh, Const(255, I32)), Const(sat_value, I32), r, I32)

        def sigmoid(s: Expr) -> Expr:
            v = kb.local(s * Const(3, I32), "sv", I32)
            r = kb.local(interp(v, 9, 0x7FFF << 10), "sr", I32)
            pos = Bin("shr", r + Const(1 << 9, I32), Const(10, I32), I32)
            neg = Bin("shr", Const((1 << 25) + (1 << 9) - 1, I32) - r, Const(10, I32), I32)
            return select(cmp("ge", v, Const(0, I32)), pos, neg, I32)

        def tanh(s: Expr, power: int) -> Expr:
            mult, shift = tanh_params(power)
            v: Expr = s * Const(mult, I32)
            if shift:
                v = Bin("shr", v + Const(1 << (shift - 1), I32), Const(shift, I32), I32)
            v = kb.local(v, "tv", I32)
            r = kb.local(interp(v, 8, 0xFFFF << 8), "tr", I32)
            pos = Bin("shr", r - Const((1 << 23) - (1 << 7), I32), Const(8, I32), I32)
            neg = Bin("shr", Const((1 << 23) + (1 << 7) - 1, I32) - r, Const(8, I32), I32)
            return select(cmp("ge", v, Const(0, I32)), pos, neg, I32)

        def x_at(t: Expr, b: Expr, k: Expr) -> Expr:
            return x[[t, b, k]] if tm else x[[b, t, k]]

        dsp_tile = 0
        if "dsp" in kb.features and kb.unroll_tiles and not wide:
            # Cores with the DSP extension: each gate's two products two inputs at a time, one
            # SMLAD per output, in tiles of outputs sharing each input pair (loops/dsp.py,
            # the int8 gemm's schedule). The same int32 sums.
            dsp_tile = GEMM.dsp_simd_tile_default(hid)
            pre = kb.scratch_buffer("pre", I16, (hid,))

            def words(w: np.ndarray, name: str) -> tuple[Any, int]:
                """Gate after gate, tile after tile: pack_words of the [K, 1, tile] slice of
                the gate's transposed weights (tiled_dot_dsp's layout); and one gate's size."""
                per_gate = [np.concatenate([
                    dsp.pack_words(w[g].T[:, None, n0:n0 + dsp_tile]).reshape(-1)
                    for n0 in range(0, hid, dsp_tile)]) for g in range(4)]
                return kb.const(name, np.concatenate(per_gate), I32), per_gate[0].size

            (wq_in, n_in_words), (wq_rec, n_rec_words) = words(wi, "wq_in"), words(wr, "wq_rec")
            xq_buf = kb.scratch_buffer("xq", I32, (-(-n_in // 2),))
            hq_buf = kb.scratch_buffer("hq", I32, (-(-hid // 2),))

        def pairs_of(n: int, at: Any, buf: Any) -> Any:
            """The int16 pairs of n int8 values (SXTB16 lanes), once per step: every tile
            of every gate reads them."""
            if n // 2:
                with kb.loop(n // 2, "kp") as kp:
                    kb.store(buf, [kp], dsp.x_pair(at(2 * kp), at(2 * kp + 1), 0))
            if n % 2:
                kb.store(buf, [n // 2], dsp.x_pair(at(Const(n - 1, INDEX)), None, 0))
            return buf

        def dot_tiles(K: int, xq: Any, words: Any, base0: int, store: Any, init: Any) -> None:
            """tiled_dot_dsp with the activation pairs read from ``xq``."""
            pairs = -(-K // 2)

            def block(n0: Expr, width: int, t: Expr) -> None:
                half = -(-width // 2)
                acc = kb.local_array(width, "acc", I32)
                for j in range(width):
                    kb.store(acc, [j], init(n0 + j))
                base = t * (pairs * (dsp_tile // 2)) + base0
                with kb.loop(pairs, "kp") as kp:
                    xp = kb.local(xq[[kp]], "xp", I32)
                    dsp.mac_tile(kb, acc, words, base + kp * half, width, xp)
                store_tile(kb, acc, n0, width, store, I32)

            over_tiles(kb, hid, dsp_tile, block)

        def gates_dsp(t: Expr, b: Expr, h_src: Any) -> None:
            xq = pairs_of(n_in, lambda k: x_at(t, b, k), xq_buf)
            hq = pairs_of(hid, lambda k: h_src.flat(b * hid + k), hq_buf)
            for g in range(4):
                def store_in(n: Expr, v: Expr, g: int = g) -> None:
                    kb.store(pre, [n], Cast(sat(requant(v, int(a["in_mult"][g]),
                                                        int(a["in_shift"][g]))), I16))

                def store_rec(n: Expr, v: Expr, g: int = g) -> None:
                    r = sat(requant(v, int(a["rec_mult"][g]), int(a["rec_shift"][g])))
                    s = kb.local(sat(Cast(pre[[n]], I32) + r), "pre", I32)
                    kb.store(G, [g, n], Cast(tanh(s, -12) if g == 2 else sigmoid(s), I16))

                dot_tiles(n_in, xq, wq_in, g * n_in_words, store_in,
                          lambda n, g=g: b_in[[g, n]])
                dot_tiles(hid, hq, wq_rec, g * n_rec_words, store_rec,
                          lambda n, g=g: b_rec[[g, n]])

        def step(t: Expr, h_src: Any, c_src: Any) -> None:
            with kb.loop(batch, "b") as b:
                if dsp_tile:
                    gates_dsp(t, b, h_src)
                for g in range(4 if not dsp_tile else 0):
                    with kb.loop(hid, "j") as j:
                        acc = kb.local(b_in[[g, j]], "acc", acc_t)
                        with kb.loop(n_in, "k") as k:
                            kb.assign(acc, acc + Cast(w_in[[g, j, k]], acc_t) *
                                      Cast(x_at(t, b, k), acc_t))
                        ra = kb.local(b_rec[[g, j]], "racc", acc_t)
                        with kb.loop(hid, "k") as k:
                            kb.assign(ra, ra + Cast(w_rec[[g, j, k]], acc_t) *
                                      Cast(h_src.flat(b * hid + k), acc_t))
                        s = kb.local(sat(sat(requant(acc, int(a["in_mult"][g]),
                                                     int(a["in_shift"][g]))) +
                                         sat(requant(ra, int(a["rec_mult"][g]),
                                                     int(a["rec_shift"][g])))), "pre", I32)
                        kb.store(G, [g, j], Cast(tanh(s, -12) if g == 2 else sigmoid(s), I16))
                with kb.loop(hid, "j") as j:
                    gi, gf, gc, go = (Cast(G[[g, j]], I32) for g in range(4))
                    c1 = sat(call("q_mbqm", gf * Cast(c_src.flat(b * hid + j), I32),
                                  Const(int(a["fc_mult"]), I32), Const(int(a["fc_shift"]), I32),
                                  dtype=I32))
                    c2 = sat(call("q_mbqm", gi * gc, Const(int(a["ic_mult"]), I32),
                                  Const(int(a["ic_shift"]), I32), dtype=I32))
                    cn: Expr = sat(c1 + c2)
                    clip = int(a.get("cell_clip", 0))
                    if clip > 0:
                        cn = sat(cn, -clip, clip)
                    cv = kb.local(cn, "cell", I32)
                    kb.emit(Store(c_out.buf, b * hid + j, Cast(cv, I16)))
                    th = kb.local(tanh(cv, int(a["cell_power"])), "th", I32)
                    hv = call("q_mbqm", th * go, Const(int(a["out_mult"]), I32),
                              Const(int(a["out_shift"]), I32), dtype=I32) + Const(hz, I32)
                    hn = kb.local(sat(hv, int(hinfo.min), int(hinfo.max)), "hn", I32)
                    kb.emit(Store(h_out.buf, b * hid + j, Cast(hn, h_out.dtype)))
                    kb.store(y, [t, b, j] if tm else [b, t, j], Cast(hn, y.dtype))

        step(Const(0, INDEX), h_in, c_in)
        if steps > 1:
            with kb.loop(steps - 1, "t") as t:
                step(t + 1, h_out, c_out)


def cell_power(cell_scale: float) -> int:
    """TFLM CheckedLog2 (float32 arithmetic): the cell scale's power of two."""
    v = np.float32(math.log(np.float32(cell_scale))) * np.float32(1.0 / np.float32(math.log(2.0)))
    return int(qmath.tflite_round(float(np.float32(v))))
