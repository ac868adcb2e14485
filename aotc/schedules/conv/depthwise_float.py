"""Float depthwise convolution (one input and one output channel per group) on a padded plane:
Conv.lower's schedule choice conv.float_depthwise = plane1 / plane2 / plane4.

Each channel's plane is copied into a scratch plane with a border of 0 (the padding), so every
output reads all its taps without a bounds check; the channel's weights are loaded once into
locals (FPU registers). Along the last axis that has more than one output, ``p`` outputs are
made per step: each kernel row's inputs are loaded once into locals and shared by the p sums.

Every output still sums its taps in the ONNX order (row-major over the kernel, starting from
0, the bias added after; ConvArith). A padded tap adds 0 * w: +0 or -0 for a finite w, which
leaves a sum that started at +0 unchanged (it never becomes -0), and NaN for an inf or NaN w,
as the definition (and onnxruntime) gives, so no padded-NaN table is needed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aotc.ir.graph import Node
from aotc.loops.loop_ir import Const, Expr, flat
from aotc.schedules.conv import knobs as CONV


def float_depthwise_ok(node: Node, kb: Any, arith: Any,
                       pads: tuple[list[int], list[int]]) -> bool:
    """Plain float arithmetic (ConvArith itself), one channel per group, no negative padding;
    then the knob decides (default: the generic schedule for strided convs, whose copy of the
    plane costs more per output: VWW's stride-2 depthwise convs lose 20-35% with plane4)."""
    X, Y = kb.inputs[0], kb.outputs[0]
    group = node.attrs["group"]
    if not (arith.acc.is_float and type(arith).__name__ == "ConvArith"
            and group == X.shape[1] == Y.shape[1] and kb.inputs[1].shape[1] == 1
            and min(pads[0] + pads[1]) >= 0):
        return False
    strided = any(v > 1 for v in node.attrs.get("strides") or [])
    # Rows of 12 or more outputs on cores with an FPU: the tiled schedule's 8 pixels per step
    # from one VLDM per tap (conv.vldm) beat plane4 (VWW on m4f: 48-, 24- and 12-wide maps 12%,
    # 12%, 11% fewer instructions; 6 and 3 wide: 10% and 40% more).
    wide = ("fpu" in kb.features and "autovec" not in kb.features
            and Y.shape[-1] >= 12 and arith.acc == X.dtype)
    return kb.knob(CONV.FLOAT_DEPTHWISE,
                   default="tiled" if strided or wide else None) != "tiled"


def lower_float_depthwise(node: Node, kb: Any, X: Any, B: Any, arith: Any,
                          pads: tuple[list[int], list[int]], s: list[int],
                          d: list[int]) -> None:
    Y, W = kb.outputs[0], kb.inputs[1]
    f32 = arith.acc
    nd = len(X.shape) - 2
    in_sp, k_sp, out_sp = list(X.shape[2:]), list(W.shape[2:]), list(Y.shape[2:])
    pb, _ = pads
    # The scratch plane: the input at offset pb, 0 around it, as far as the taps reach.
    plane = [max(i + b, (o - 1) * ss + (k - 1) * dd + 1)
             for i, b, o, ss, k, dd in zip(in_sp, pb, out_sp, s, k_sp, d)]
    pstr = [int(np.prod(plane[k + 1:], dtype=np.int64)) for k in range(nd)]
    npl = int(np.prod(plane, dtype=np.int64))
    xpad = kb.scratch_buffer("plane", X.dtype, (npl,))
    taps = list(np.ndindex(*k_sp))
    # Outputs per step along axis a: the last axis with more than one output.
    p = int(kb.knob(CONV.FLOAT_DEPTHWISE)[len("plane"):])
    a = max([k for k in range(nd) if out_sp[k] > 1] or [nd - 1])
    p = min(p, out_sp[a])

    def outputs(n: Expr, m: Expr, wv: list[Any], o: list[Expr], count: int) -> None:
        """``count`` outputs from ``o`` on along axis a; the taps of a kernel row along a
        share their input loads."""
        accs = [kb.local(Const(0.0, f32), "acc", f32) for _ in range(count)]
        # Taps in the definition's order; an input is loaded once and shared by the outputs
        # whose taps read it (keyed by the tap's other coordinates and its offset along a).
        xs: dict[tuple[int, ...], Any] = {}
        for ti, t in enumerate(taps):
            rest = list(t)
            rest[a] = 0
            origin = flat([ov * ss + kv * dd for ov, ss, kv, dd in zip(o, s, rest, d)], pstr)
            for q in range(count):
                off = q * s[a] + t[a] * d[a]
                key = (*t[:a], *t[a + 1:], off)
                if key not in xs:
                    xs[key] = kb.local(xpad.flat(origin + off * pstr[a]), "xv", f32)
                kb.assign(accs[q], accs[q] + xs[key] * wv[ti])
        for q, acc in enumerate(accs):
            oq = [ov + q if k == a and q else ov for k, ov in enumerate(o)]
            kb.store_output([n, m, *oq], arith.finish(kb, acc, m, B))

    def channel(n: Expr, m: Expr) -> None:
        wv = [kb.local(W[[m, 0, *t]], "w", f32) for t in taps]
        names = [f"o{k}" for k in range(nd)]
        pre_ax = [k for k in range(nd) if k != a]
        with kb.loops([out_sp[k] for k in pre_ax], [names[k] for k in pre_ax]) as ov:
            def at(v: Expr) -> list[Expr]:
                o: list[Expr] = list(ov)
                o.insert(a, v)
                return o

            nb, rest = divmod(out_sp[a], p)
            with kb.loop(nb, "ob") as ob:
                with kb.block():
                    outputs(n, m, wv, at(ob * p if p > 1 else ob), p)
            for r in range(rest):
                with kb.block():
                    outputs(n, m, wv, at(Const(nb * p + r)), 1)

    with kb.loop(Y.shape[0], "n") as n:
        if plane != in_sp:  # the border: 0
            with kb.loop(npl, "p") as pi:
                kb.store(xpad, [pi], Const(0.0, X.dtype))
        with kb.loop(Y.shape[1], "m") as m:
            # The copy, its short rows unrolled (a load and a store per element).
            with kb.loops(in_sp[:-1], [f"i{k}" for k in range(nd - 1)]) as ii:
                with kb.loop(in_sp[-1], f"i{nd - 1}", unroll=in_sp[-1] <= 8) as il:
                    iv = [*ii, il]
                    kb.store(xpad, [flat([i + b for i, b in zip(iv, pb)], pstr)],
                             X[[n, m, *iv]])
            with kb.outline():
                channel(n, m)

