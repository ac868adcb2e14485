"""Integer depthwise convolution (one input and one output channel per group) on targets
with the DSP extension: Conv.lower's schedule choice for integer weights without a zero point.

Each channel's plane is first copied into a scratch plane bordered by the input zero point
(the padding), so every output reads all its taps without a bounds check. A tap then adds
x * w, and the zero point's share, zp * sum(w) over the taps, is folded into the channel's
bias at compile time (CMSIS-NN's trick; a padded tap holds zp, whose share the fold removes,
so it adds nothing, as in the generic kernel). The weights of a channel are loaded once, and
its pixel loop is outlined (loop_ir.Outline), away from the kernel's other live values.
With Helium (int8 on an "mve" target), a kernel row of taps is one VMLADAVA of two predicated
vector loads, the row's inputs in the plane and its weights in W (loops/mve.py).
The int32 sums wrap alike in any order: same bytes as the generic schedule.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aotc import dtypes
from aotc.ir.graph import Node
from aotc.loops import dsp, mve
from aotc.loops.loop_ir import (
    Call,
    Cast,
    Const,
    Expr,
    Load,
    Var,
    call,
    children,
    flat,
    map_expr,
    referenced_names,
)
from aotc.schedules.conv import knobs as CONV
from aotc.schedules.conv.mve import requantise_plane, vector_requant
from aotc.schedules.conv.pixels import flat_tap, strides

I8 = dtypes.int8
I16 = dtypes.BY_NAME["int16"]
I32 = dtypes.int32
# Elements per step of a long row's copy into the int16 plane. Measured on cortex-m4f
# (bench/boards.py --int8 --verbose, estimated cycles), VWW's nine depthwise convs, 1 -> 4:
# 16,432,819 -> 16,050,572 per inference (k3, stride 2 over 48x48 planes: 600,763 -> 500,143);
# later 4 -> 8 -> 16: m4f 14,634,188 -> 14,486,940 -> 14,438,875, m7 9,290,590 ->
# 9,256,472 -> 9,221,756, m33 12,756,216 -> 12,720,425 -> 12,691,690 (flash +384 B).
COPY_STEP = 16


def depthwise_ok(node: Node, kb: Any, arith: Any, pads: tuple[list[int], list[int]]) -> bool:
    """Integer arithmetic (quant.IntArith) with weights that are a constant without a zero
    point, one channel per group, no negative padding, on a target with the DSP extension."""
    X, Y = kb.inputs[0], kb.outputs[0]
    w = kb.input_const(1)
    group = node.attrs["group"]
    return ("dsp" in kb.features and kb.unroll_tiles and w is not None
            and w.dtype in (np.int8, np.uint8) and hasattr(arith, "x_zp")
            and not np.asarray(arith.w_zp).any() and arith.requant is not None
            and group == X.shape[1] == Y.shape[1] and min(pads[0] + pads[1]) >= 0)


def lower_depthwise(node: Node, kb: Any, X: Any, B: Any, arith: Any,
                    pads: tuple[list[int], list[int]], s: list[int], d: list[int]) -> None:
    Y = kb.outputs[0]
    nd = len(X.shape) - 2
    w = kb.input_const(1)
    in_sp, k_sp, out_sp = X.shape[2:], w.shape[2:], Y.shape[2:]
    pb, _ = pads
    # The scratch plane: the input at offset pb, zero point around it, as far as taps reach.
    plane = [max(i + b, (o - 1) * ss + (k - 1) * dd + 1)
             for i, b, o, ss, k, dd in zip(in_sp, pb, out_sp, s, k_sp, d)]
    pstr = [int(np.prod(plane[k + 1:], dtype=np.int64)) for k in range(nd)]
    x_zp = arith.x_zp
    # The bias the sum of x * w starts from: init - zp * sum(w), modulo 2^32 like the sum.
    init = _init_values(kb, arith, B, w.shape[0])
    folded = None
    if init is not None:
        vals = init - x_zp * w.reshape(w.shape[0], -1).astype(np.int64).sum(axis=1)
        vals = ((vals + (1 << 31)) % (1 << 32)) - (1 << 31)
        folded = kb.const("dwbias", vals.astype(np.int32), I32)
        if not mve.usable(kb, X.dtype, w, arith):  # the DSP schedules: x as it is
            prove_bound(kb, arith, B, w, X.dtype, 0, vals)
    taps = list(np.ndindex(*k_sp))
    # Helium (int8): a kernel row of inputs and of weights per predicated vector load. A row
    # runs along axis ``a``, the last one not of size 1 in both plane and kernel (a (k, 1)
    # kernel on a (h, 1) plane has rows of k taps); its taps are contiguous in the plane (no
    # dilation) and in W. One tap per row stays scalar, which is faster.
    a = nd - 1
    while a > 0 and plane[a] == 1 and k_sp[a] == 1:
        a -= 1
    nrows = int(np.prod(k_sp[:a], dtype=np.int64))
    helium = (mve.usable(kb, X.dtype, w, arith) and folded is not None and d[a] == 1
              and 2 <= k_sp[a] <= mve.LANES)
    # DSP extension: the plane in int16, two taps of a kernel row per SMLAD (one word load
    # of two adjacent int16, possibly unaligned) against a word of two int16 weights; one
    # more plane element, 0, for the high lane of an odd row's last word (its weight is 0).
    pairs = (not helium and folded is not None and d[a] == 1 and k_sp[a] >= 2
             and kb.knob(CONV.DEPTHWISE) == "pairs")
    # int8 rows of 4 or more inputs go into the int16 plane 4 a word: one LDR, SXTB16 twice,
    # PKHBT and PKHTB, two STR (8 instructions a byte and a halfword at a time).
    # The stores need not be word-aligned (STR at a halfword boundary; the core splits it in
    # two halfword accesses, as the two STRH it replaces); keeping the plane's layout keeps the
    # taps' addressing (a column shifted to align them cost the stride-1 convs more: gcc -Os
    # then kept one more pointer in the pixel loop).
    # (rows contiguous only: not a permuted view's, whose x stride is not 1)
    words = (pairs and X.dtype == I8 and in_sp[-1] >= 4
             and (X.strides is None or X.strides[-1] == 1))
    npl = int(np.prod(plane, dtype=np.int64))
    # Helium's row vectors (channel_lanes) read up to 3 bytes past the plane.
    xpad = kb.scratch_buffer("plane", I16 if pairs else X.dtype,
                             (npl + 1 if pairs else npl + 4 if helium else npl,))
    half = -(-k_sp[a] // 2)
    # split_requant: the sums of a block of outputs (the trailing output axes from ``sa`` on,
    # the whole plane when it has at most 256 outputs) go to int32 scratch, then the block is
    # requantised in a loop of its own.
    sa = next(k for k in range(nd) if np.prod(out_sp[k:], dtype=np.int64) <= 256 or k == nd - 1)
    block = int(np.prod(out_sp[sa:], dtype=np.int64))
    sums = (kb.scratch_buffer("sum", I32, (block,))
            if pairs and kb.knob(CONV.SPLIT_REQUANT) else None)
    # Where the outputs are requantised by aotc_q_requant_h (|acc| < 2^30 proven), the sums
    # are made doubled, weights and folded bias twice theirs (int16 lanes of at most 2 * 128;
    # modulo 2^32 like the sum): aotc_q_requant_hd then skips the doubling's shift, one
    # instruction fewer an output.
    doubled = pairs and sums is None and _requantised_h(kb, arith, B)
    if doubled:
        assert folded is not None
        kb.drop_const(folded.buf.name)
        twice = (vals * 2 + (1 << 31)) % (1 << 32) - (1 << 31)
        folded = kb.const("dwbias", twice.astype(np.int32), I32)
    # An odd kernel row's last tap has a word of its own, its high lane 0; two rows' last
    # taps share one instead (lasts): SMLABB takes the low lane's weight, SMLABT the high
    # one's, and the channel keeps a weight word fewer in registers per two rows.
    lasts = pairs and k_sp[a] % 2 == 1 and nrows >= 2
    nw = nrows * (half - 1) + (nrows + 1) // 2 if lasts else nrows * half
    if pairs:
        ch = w.shape[0]
        wq = w.reshape(ch, nrows, k_sp[a]).astype(np.int16) * (2 if doubled else 1)
        wp = np.zeros((ch, nrows, 2 * half), np.int16)
        wp[..., :k_sp[a]] = wq
        lanes = wp.reshape(ch, nrows, half, 2)
        if lasts:
            last = np.zeros((ch, 2 * ((nrows + 1) // 2)), np.int16)
            last[:, :nrows] = wq[:, :, -1]
            lanes = np.concatenate([lanes[:, :, :half - 1].reshape(ch, -1, 2),
                                    last.reshape(ch, -1, 2)], axis=1)
        wpair = kb.const("wpair", np.ascontiguousarray(lanes).reshape(-1).view("<i4"), I32)

    def weight_word(r: int, h: int) -> tuple[int, str]:
        """Kernel row r's h-th pair of taps: its word among the channel's nw, and the
        instruction that multiplies an input pair word by it."""
        if not lasts:
            return r * half + h, "smlad"
        if h == half - 1:
            return nrows * (half - 1) + r // 2, "smlabt" if r % 2 else "smlabb"
        return r * (half - 1) + h, "smlad"
    # Outputs per step along axis v, the one before a (none for a row kernel on a row).
    v = a - 1
    rows = (min(out_sp[v], kb.knob(CONV.DEPTHWISE_ROWS,
                                   default=CONV.depthwise_rows_default(s[v], out_sp[v],
                                                                        kb.cpu)))
            if pairs and v >= 0 and out_sp[v] >= 2 else 1)

    def channel_constants(m: Expr) -> tuple[Any, Expr]:
        """The channel's requantisation constants and folded bias as locals before its pixel
        loop, and the finish that reads them: gcc -Os otherwise reloads each from its table
        at every output (a byte store may alias them) and spills the weight words instead."""
        assert folded is not None
        probe = arith.finish(kb, Var("acc_probe", I32), m, B)
        loads: dict[Load, None] = {}
        stack: list[object] = [probe]
        while stack:
            x = stack.pop()
            if isinstance(x, Load) and "acc_probe" not in referenced_names((x.index,)):
                loads[x] = None  # a per-channel constant (not a table read at the sum)
            stack.extend(children(x))
        held = {ld: kb.local(ld, "q", ld.dtype) for ld in loads}
        bias = kb.local(folded[[m]], "bias", I32)

        def swap(e: Expr) -> Expr:
            if isinstance(e, Load):
                return held.get(e, e)
            if doubled and isinstance(e, Call) and e.fn == "q_requant_h":
                return Call("q_requant_hd", e.args, e.dtype)
            return e

        def finish(kb_: Any, acc: Expr, m_: Expr, B_: Any) -> Expr:
            return map_expr(arith.finish(kb_, acc, m_, B_), swap)
        return finish, bias

    def channel_pairs(n: Expr, m: Expr) -> None:
        """A kernel row's taps two per SMLAD; the channel's weight words stay in registers."""
        assert folded is not None
        wv = [kb.local(wpair.flat(m * nw + j), "w", I32) for j in range(nw)]
        finish, bias = arith.finish, folded[[m]]
        if sums is None:
            finish, bias = channel_constants(m)

        def tap_sums(o: list[Expr], shifts: list[int], biased: bool = True) -> list[Expr]:
            """The sums for output ``o`` and those whose plane index is each of ``shifts``
            further on, from the folded bias or (not ``biased``) from 0: the first pair an
            SMUAD. Every tap reads the output's plane index plus a constant, so gcc -Os keeps
            one pointer; a weight word's SMLADs for the outputs are adjacent (spilled, it is
            reloaded once for all of them)."""
            base = flat([ov * ss for ov, ss in zip(o, s)], pstr)
            accs: list[Any] = [kb.local(bias, "acc", I32) if biased else None for _ in shifts]
            for r, t in enumerate(np.ndindex(*k_sp[:a])):
                tap = (*t, *([0] * (nd - a)))
                off = sum(kv * dd * ps for kv, dd, ps in zip(tap, d, pstr))
                for h in range(half):
                    j, op = weight_word(r, h)
                    for q, shift in enumerate(shifts):
                        xv = call("ld_pair16", xpad.flat(base + (shift + off + 2 * h)),
                                  dtype=I32)
                        if accs[q] is None:
                            assert op == "smlad"
                            accs[q] = kb.local(call("smuad", xv, wv[j], dtype=I32), "acc", I32)
                        else:
                            kb.assign(accs[q], call(op, xv, wv[j], accs[q], dtype=I32))
            return accs

        def tap_sum(o: list[Expr], shift: int = 0, biased: bool = True) -> Expr:
            return tap_sums(o, [shift], biased)[0]

        if sums is None and rows >= 2:
            # ``rows`` outputs a step along axis v (the one before the rows' axis a): they
            # read the input rows between them once (gcc -Os merges the identical loads);
            # the last out_sp[v] % rows as one step of their own.
            names = [f"o{k}" for k in range(nd)]

            def step(pre: list[Expr], first: Expr, count: int) -> None:
                # 3 rows a step, or strided rows: the step's first output row's index in a
                # local, the others at constant offsets from it; gcc -Os then keeps one output
                # pointer instead of one a row (VWW's k1: 60 -> 58 instructions a step of 3
                # outputs, none stored to the stack; m4f VWW 14,197,517 -> 14,090,628). Not
                # for 2 rows of stride 1: KWS's (rows of 5) spilled an accumulator instead
                # (KWS with it / without, m4f 4,532,931 / 4,429,864, m33 3,970,390 /
                # 3,837,239; VWW's convs of 2 rows are all of stride 2).
                Y_ = kb.outputs[0]
                zeros = [Const(0)] * (nd - v - 1)
                one = rows >= 3 or s[v] >= 2
                yrow = kb.local(Y_.index([n, m, *pre, first, *zeros]), "yrow") if one else None
                with kb.loops(out_sp[v + 1:], names[v + 1:]) as post:
                    o = [*pre, first, *post]
                    accs = tap_sums(o, [q * s[v] * pstr[v] for q in range(count)])
                    for q, acc in enumerate(accs):
                        at = Y_.index([Const(0)] * (2 + v) + [Const(q), *post])
                        kb.store_output([n, m, *pre, first + q, *post], finish(kb, acc, m, B),
                                        flat=yrow + at if yrow is not None else None)

            with kb.loops(out_sp[:v], names[:v]) as pre:
                with kb.loop(out_sp[v] // rows, names[v]) as ov:
                    step(pre, ov * rows, rows)
                if out_sp[v] % rows:
                    step(pre, Const(out_sp[v] - out_sp[v] % rows), out_sp[v] % rows)
            return
        if sums is None:
            with kb.loops(out_sp, [f"o{k}" for k in range(nd)]) as o:
                kb.store_output([n, m, *o], finish(kb, tap_sum(o), m, B))
            return
        # A block of sums from 0, then the bias and requantisation in a loop of their own:
        # the sum loop keeps the weight words in registers, the requantisation its
        # multipliers. Two rows (axis v inside the block) a step with conv.depthwise_rows.
        bstr = [int(np.prod(out_sp[k + 1:], dtype=np.int64)) for k in range(sa, nd)]
        names = [f"o{k}" for k in range(nd)]
        with kb.loops(out_sp[:sa], names[:sa]) as pre:
            if rows >= 2 and v >= sa:  # two rows a step
                with kb.loops(out_sp[sa:v], names[sa:v]) as mid:
                    with kb.loop(out_sp[v] // 2, names[v]) as ov:
                        with kb.loops(out_sp[v + 1:], names[v + 1:]) as post:
                            ob = [*mid, ov * 2, *post]
                            accs = [tap_sum([*pre, *ob], q * s[v] * pstr[v], False)
                                    for q in range(2)]
                            for q, acc in enumerate(accs):
                                kb.store(sums, [flat(ob, bstr) + q * bstr[v - sa]], acc)
                    if out_sp[v] % 2:
                        with kb.loops(out_sp[v + 1:], names[v + 1:]) as post:
                            ob = [*mid, Const(out_sp[v] - 1), *post]
                            kb.store(sums, [flat(ob, bstr)], tap_sum([*pre, *ob], 0, False))
            else:
                with kb.loops(out_sp[sa:], names[sa:]) as ob:
                    kb.store(sums, [flat(ob, bstr)], tap_sum([*pre, *ob], 0, False))
            with kb.loops(out_sp[sa:], [f"j{k}" for k in range(sa, nd)]) as jb:
                kb.store_output([n, m, *pre, *jb], arith.finish(
                    kb, sums[[flat(jb, bstr)]] + folded[[m]], m, B))

    def channel(n: Expr, m: Expr) -> None:
        wv = [kb.local(Cast(kb.inputs[1][[m, 0, *t]], I32), "w") for t in taps]
        with kb.loops(out_sp, [f"o{k}" for k in range(nd)]) as o:
            acc = kb.local(folded[[m]] if folded is not None else arith.init(B, m), "acc", I32)
            for t, wt in zip(taps, wv):
                idx = flat([ov * ss + kv * dd for ov, ss, kv, dd in zip(o, s, t, d)], pstr)
                xv = Cast(xpad.flat(idx), I32)
                if folded is None:
                    xv = arith.x(xpad.flat(idx))
                kb.assign(acc, acc + xv * wt)
            kb.store_output([n, m, *o], arith.finish(kb, acc, m, B))

    # Two outputs along axis a per input load where both rows fit a vector: the second
    # output's taps start s[a] lanes on, so its weights are the row shifted by s[a] lanes.
    # Packed at compile time with s[a] leading zeros, which the first output's load skips
    # (W itself is then unused).
    span = k_sp[a] + s[a]
    paired = helium and span <= mve.LANES and out_sp[a] >= 2
    if paired:
        shifted = np.zeros((w.shape[0] * nrows, span), np.int8)
        shifted[:, s[a]:] = w.reshape(-1, k_sp[a])
        wshift = kb.const("wshift", shifted.reshape(-1), I8)

    # Helium's int32x4_t requantisation (knob conv.requant): the sums of a block of outputs
    # (the trailing output axes from ``va`` on, va <= a) to int32 scratch, then 4 per vector,
    # each vector's bytes contiguous in the output plane.
    vq, vsums, va = None, None, a
    if helium:
        va = min(sa, a)
        vblock = int(np.prod(out_sp[va:], dtype=np.int64))
        if vblock <= 1024:
            vq = vector_requant(kb, arith, None, vblock)
    # conv.mve_depthwise=pixels (stride 1 along rows of the last axis, the sums in scratch):
    # 4 outputs of a row per int32x4_t, each tap one VMLA of 4 widened inputs by its weight;
    # a row's last vector spills up to 3 sums past it, which the next row overwrites.
    lanes = (vq is not None and a == nd - 1 and s[a] == 1
             and kb.knob(CONV.MVE_DEPTHWISE) == "pixels")
    if vq is not None:
        vsums = kb.scratch_buffer("vsum", I32, (vblock + (mve.WORDS - 1 if lanes else 0),))
    vstr = strides(out_sp[va:]) if vq is not None else []

    def row_vectors(m: Expr, pre: list[Expr], wk: list[Expr]) -> None:
        """Sums of the row at ``pre`` (the axes before a), 4 outputs per vector, two vectors
        per step sharing each weight."""
        assert folded is not None and vsums is not None
        nv = -(-out_sp[a] // mve.WORDS)

        def step(first: Expr, count: int) -> None:
            accs = [kb.local(mve.vec("vdupq_n_s32", folded[[m]]), "acc", mve.INT32X4)
                    for _ in range(count)]
            for t, wt in zip(taps, wk):
                for k, acc in enumerate(accs):
                    idx = flat([pv * ss + kv * dd for pv, ss, kv, dd in zip(pre, s, t, d)]
                                + [(first + k) * mve.WORDS + t[a] * d[a]], pstr)
                    kb.assign(acc, mve.vec("vmlaq_n_s32", acc, mve.load_words(xpad.flat(idx)),
                                           wt))
            for k, acc in enumerate(accs):
                kb.store(vsums, [flat_tap([*pre, (first + k) * mve.WORDS][va:], vstr)],
                         mve.vec("vstrwq_s32", acc))

        if nv >= 2:
            with kb.loop(nv // 2, "ov") as ov:
                step(ov * 2, 2)
        if nv % 2:
            step(Const(nv - 1), 1)

    def channel_mve(n: Expr, m: Expr) -> None:
        """One kernel row of taps per VMLADAVA (the folded bias holds the zero point's share);
        the C compiler keeps a channel's weight vectors in registers."""
        assert folded is not None
        kw = k_sp[a]
        if lanes:
            wk = [kb.local(Cast(kb.inputs[1][[m, 0, *t]], I32), "w") for t in taps]
        wvs = [kb.local(mve.load(wshift.flat((m * nrows + r) * span + s[a]) if paired else
                                 kb.inputs[1].flat((m * nrows + r) * kw), kw), "wv", mve.INT8X16)
               for r in range(nrows)] if not lanes else []
        wss = [kb.local(mve.load(wshift.flat((m * nrows + r) * span), span), "ws", mve.INT8X16)
               for r in range(nrows)] if paired and not lanes else []

        def outputs(o: list[Expr], count: int) -> None:
            """``count`` (1 or 2) outputs from ``o`` on along axis a."""
            accs = [kb.local(folded[[m]], "acc", I32) for _ in range(count)]
            for r, t in enumerate(np.ndindex(*k_sp[:a])):
                tap = (*t, *([0] * (nd - a)))
                idx = flat([ov * ss + kv * dd for ov, ss, kv, dd in zip(o, s, tap, d)], pstr)
                xv = mve.load(xpad.flat(idx), span if count == 2 else kw)
                for acc, wv in zip(accs, (wvs[r], *wss[r:r + 1])):
                    kb.assign(acc, mve.dot(acc, xv, wv))
            for q, acc in enumerate(accs):
                oq = [ov + q if k == a else ov for k, ov in enumerate(o)]
                if vsums is not None:
                    kb.store(vsums, [flat_tap(oq[va:], vstr)], acc)
                else:
                    kb.store_output([n, m, *oq], arith.finish(kb, acc, m, B))

        # The axes after a have one output each (plane and kernel of size 1 there).
        after = [Const(0)] * (nd - a - 1)
        lead = va if vq is not None else a
        with kb.loops(out_sp[:lead], [f"o{k}" for k in range(lead)]) as outer:
            with kb.loops(out_sp[lead:a], [f"o{k}" for k in range(lead, a)]) as inner:
                pre = [*outer, *inner]
                if lanes:
                    row_vectors(m, pre, wk)
                elif paired:
                    with kb.loop(out_sp[a] // 2, "oa") as oa:
                        outputs([*pre, oa * 2, *after], 2)
                    if out_sp[a] % 2:
                        outputs([*pre, Const(out_sp[a] - 1), *after], 1)
                else:
                    with kb.loop(out_sp[a], "oa") as oa:
                        outputs([*pre, oa, *after], 1)
            if vq is not None:
                assert vsums is not None
                requantise_plane(kb, vq, vsums, vblock, kb.outputs[0].index(
                    [n, m, *outer, *[0] * (nd - lead)]), m, arith, B)

    with kb.loop(Y.shape[0], "n") as n:
        if any(p != i for p, i in zip(plane, in_sp)):  # the border: the zero point
            if pairs:  # 8 int16 a step, 4 word stores of two
                both = (x_zp & 0xFFFF) * 0x10001
                zpw = Const(both - (1 << 32) if both >= 1 << 31 else both, I32)
                with kb.loop(npl // 8, "p") as p:
                    for h in range(4):
                        kb.store(xpad, [p * 8 + 2 * h], call("st_pair16", zpw, dtype=I32))
                for q in range(npl - npl % 8, npl):
                    kb.store(xpad, [Const(q)], Const(x_zp, I16))
            else:
                with kb.loop(npl, "p") as p:
                    kb.store(xpad, [p], Const(x_zp, xpad.dtype))
        if pairs:
            kb.store(xpad, [npl], Const(0, I16))
        with kb.loop(Y.shape[1], "m") as m:
            # The channel into the plane; on tap pairs a short row's copy unrolled (unroll_max).
            def copy(ii: list[Expr]) -> None:
                xv = X[[n, m, *ii]]
                kb.store(xpad, [flat([i + b for i, b in zip(ii, pb)], pstr)],
                         Cast(xv, I16) if pairs else xv)

            def copy4(ii0: list[Expr], i: Expr) -> None:
                """Inputs i .. i + 3 of a row as two words of int16 pairs: SXTB16 gives
                (x0, x2), SXTB16 ROR 8 (x1, x3); PKHBT / PKHTB their low / high lanes."""
                wd = kb.local(dsp.ld_word8(X[[n, m, *ii0, i]]), "cw", I32)
                even = kb.local(call("sxtb16", wd, dtype=I32), "ce", I32)
                odd = kb.local(call("sxtb16_ror8", wd, dtype=I32), "co", I32)
                at = flat([*[i_ + b for i_, b in zip(ii0, pb)], i + pb[-1]], pstr)
                for h in range(2):
                    kb.store(xpad, [at + 2 * h],
                             call("st_pair16", dsp.halves(even, odd, h), dtype=I32))

            # Rows longer than 8: COPY_STEP elements a step (the loop's increment, compare
            # and taken branch shared by them), the rest after the loop.
            step = COPY_STEP if pairs else 1
            width = in_sp[-1]
            with kb.loops(in_sp[:-1], [f"i{k}" for k in range(nd - 1)]) as ii0:
                if words:
                    # COPY_STEP inputs a step, then the rest's words and last few inputs.
                    if width >= step:
                        with kb.loop(width // step, f"i{nd - 1}") as il:
                            for q in range(0, step, 4):
                                copy4(ii0, il * step + q)
                    for q in range(width - width % step, width - width % 4, 4):
                        copy4(ii0, Const(q))
                    for q in range(width - width % 4, width):
                        copy([*ii0, Const(q)])
                elif step > 1 and width > 8:
                    if width >= step:
                        with kb.loop(width // step, f"i{nd - 1}") as il:
                            for q in range(step):
                                copy([*ii0, il * step + q])
                    for q in range(width - width % step, width):
                        copy([*ii0, Const(q)])
                else:
                    with kb.loop(width, f"i{nd - 1}", unroll=pairs) as il:
                        copy([*ii0, il])
            with kb.outline():
                (channel_mve if helium else channel_pairs if pairs else channel)(n, m)


def _requantised_h(kb: Any, arith: Any, B: Any) -> bool:
    """Whether the kernel's requantisation is aotc_q_requant_h (Requant._h_params)."""
    stack: list[object] = [arith.finish(kb, Var("acc_probe", I32), Var("m_probe", I32), B)]
    while stack:
        x = stack.pop()
        if isinstance(x, Call) and x.fn == "q_requant_h":
            return True
        stack.extend(children(x))
    return False


def prove_bound(kb: Any, arith: Any, B: Any, w: np.ndarray, x_dtype: Any, x_zp: int,
                init: np.ndarray | None = None) -> None:
    """Tell the requantisation (quant.Requant.acc_bound) the largest |accumulator| of a conv
    whose accumulators start from ``init`` (default: IntArith.init's values) and add
    (x - x_zp) * w for x of ``x_dtype``: the bias plus the largest sum of products."""
    rq = arith.requant
    if init is None:
        init = _init_values(kb, arith, B, w.shape[0])
    if rq is None or init is None or not hasattr(rq, "acc_bound"):
        return
    info = np.iinfo(x_dtype.np)  # int8, uint8; int16 (16x8)
    lo, hi = int(info.min), int(info.max)
    xmax = max(abs(lo - x_zp), abs(hi - x_zp))
    wsum = np.abs(w.reshape(w.shape[0], -1).astype(np.int64)).sum(axis=1)
    bound = np.abs(np.broadcast_to(np.asarray(init, np.int64).reshape(-1), wsum.shape)) \
        + wsum * xmax
    rq.acc_bound = int(bound.max(initial=0))
    start = np.broadcast_to(np.asarray(init, np.int64).reshape(-1), wsum.shape)
    rq.acc_ranges = (start - wsum * xmax, start + wsum * xmax)


def _init_values(kb: Any, arith: Any, B: Any, m: int) -> np.ndarray | None:
    """The accumulator's start per channel as numbers (IntArith.init's), or None when the
    bias is not a compile-time constant."""
    if arith.folded_bias is not None:
        return np.asarray(kb.consts[arith.folded_bias.buf.name], np.int64)
    if B is None:
        return np.zeros(m, np.int64)
    b = kb.input_const(2)
    return None if b is None else np.asarray(b, np.int64).reshape(-1)
