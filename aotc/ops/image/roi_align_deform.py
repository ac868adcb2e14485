"""Bilinear sampling at run-time positions: RoiAlign (positions from the rois input) and
DeformConv (positions shifted by the offset input). Both compute the four taps of each sample
point in the kernel; only the geometry that does not depend on data is fixed at compile time."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import (
    INDEX,
    Cast,
    Const,
    Expr,
    bmax,
    bmin,
    call,
    cmp,
    land,
    select,
)
from aotc.ops import OpDef, register


# -------------------------------------------------------------------------------------- RoiAlign
def _roi_taps(y: float, x: float, H: int, W: int) -> list[tuple[int, float]]:
    """RoiAlign's bilinear taps (flat position, weight) of one sample point."""
    if y < -1.0 or y > H or x < -1.0 or x > W:
        return [(0, 0.0)] * 4
    y, x = max(y, 0.0), max(x, 0.0)
    yl, xl = int(y), int(x)
    if yl >= H - 1:
        yl = yh = H - 1
        y = yl
    else:
        yh = yl + 1
    if xl >= W - 1:
        xl = xh = W - 1
        x = xl
    else:
        xh = xl + 1
    ly, lx = y - yl, x - xl
    hy, hx = 1 - ly, 1 - lx
    return [(yl * W + xl, hy * hx), (yl * W + xh, hy * lx), (yh * W + xl, ly * hx),
            (yh * W + xh, ly * lx)]


def roi_align_ref(X: np.ndarray, rois: np.ndarray, batch: np.ndarray, mode: str, oh: int,
                  ow: int, ratio: int, scale: float, half_pixel: bool) -> np.ndarray:
    N, C, H, W = X.shape
    R = batch.shape[0]
    Y = np.zeros((R, C, oh, ow), np.float64)
    off = 0.5 if half_pixel else 0.0
    for r in range(R):
        x1, y1, x2, y2 = (float(v) * scale - off for v in rois[r, :4])
        rw, rh = x2 - x1, y2 - y1
        if not half_pixel:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / oh, rw / ow
        gh = ratio if ratio > 0 else int(math.ceil(rh / oh))
        gw = ratio if ratio > 0 else int(math.ceil(rw / ow))
        if not 0 <= int(batch[r]) < N:
            continue  # a batch index outside the batch gives zeros (as the C)
        plane = X[int(batch[r])].reshape(C, -1).astype(np.float64)
        for ph in range(oh):
            for pw in range(ow):
                vals = []
                for iy in range(gh):
                    yy = y1 + ph * bh + (iy + 0.5) * bh / gh
                    for ix in range(gw):
                        xx = x1 + pw * bw + (ix + 0.5) * bw / gw
                        taps = [w * plane[:, p] for p, w in _roi_taps(yy, xx, H, W)]
                        vals.append(sum(taps) if mode == "avg" else np.max(taps, axis=0))
                if vals:
                    Y[r, :, ph, pw] = (np.sum(vals, axis=0) / max(gh * gw, 1) if mode == "avg"
                                       else np.max(vals, axis=0))
    return Y.astype(X.dtype)


class _RoiAlign(OpDef):
    name = "RoiAlign"
    defined = ("a run-time batch index outside [0, N) gives an all-zero output for its ROI "
               "(onnxruntime refuses the run); samples outside the map read 0 (ONNX)")
    onnx_tests = ("test_roialign*",)

    def half_pixel(self, node: Node) -> bool:
        return node.attrs.get("coordinate_transformation_mode", "output_half_pixel") \
            == "half_pixel"

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        for i, v in enumerate(ins[:2]):
            if v is not None and v.type.dtype.name != "float32":
                raise AotcError(f"input {i} has dtype {v.type.dtype.name}; supported: float32",
                                node.name, node.op)
        x, rois, bi = ins[0], ins[1], ins[2]
        assert x is not None and rois is not None and bi is not None
        if bi.type.dtype.name not in ("int32", "int64"):
            raise AotcError(f"batch_indices have dtype {bi.type.dtype.name}", node.name, node.op)
        if len(x.type.shape) != 4 or len(rois.type.shape) != 2 or rois.type.shape[1] != 4 \
                or len(bi.type.shape) != 1 or bi.type.shape[0] != rois.type.shape[0]:
            raise AotcError(f"expects X (N, C, H, W), rois (R, 4), batch_indices (R,); got "
                            f"{list(x.type.shape)}, {list(rois.type.shape)}, "
                            f"{list(bi.type.shape)}", node.name, node.op)
        at = node.attrs
        if at["mode"] not in ("avg", "max"):
            raise AotcError(f"mode={at['mode']!r} is not valid", node.name, node.op)
        if at.get("coordinate_transformation_mode", "output_half_pixel") not in (
                "half_pixel", "output_half_pixel"):
            raise AotcError(f"coordinate_transformation_mode="
                            f"{at['coordinate_transformation_mode']!r} is not valid",
                            node.name, node.op)
        if at["output_height"] < 1 or at["output_width"] < 1 or at["sampling_ratio"] < 0:
            raise AotcError("output_height/output_width must be >= 1 and sampling_ratio >= 0",
                            node.name, node.op)
        if bi.is_const:
            b = np.asarray(bi.const).reshape(-1)
            if b.size and (b.min() < 0 or b.max() >= x.type.shape[0]):
                raise AotcError(f"batch_indices {b.tolist()} are out of range for batch "
                                f"{x.type.shape[0]}", node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x, bi = ins[0], ins[2]
        assert x is not None and bi is not None
        at = node.attrs
        return [TensorType((bi.type.shape[0], x.type.shape[1], int(at["output_height"]),
                            int(at["output_width"])), x.type.dtype)]

    def run_reference(self, node: Node, args: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        X, rois, bi = args[0], args[1], args[2]
        assert X is not None and rois is not None and bi is not None
        at = node.attrs
        return [roi_align_ref(X, rois, bi.reshape(-1), at["mode"], int(at["output_height"]),
                              int(at["output_width"]), int(at["sampling_ratio"]),
                              float(at["spatial_scale"]), self.half_pixel(node))]

    def lower(self, node: Node, kb: Any) -> None:
        X, ROI, BI, Y = kb.inputs[0], kb.inputs[1], kb.inputs[2], kb.outputs[0]
        if Y.numel == 0:
            return
        dt = X.dtype
        at = node.attrs
        _, C, H, W = X.shape
        R, OH, OW = Y.shape[0], int(at["output_height"]), int(at["output_width"])
        ratio, scale = int(at["sampling_ratio"]), float(at["spatial_scale"])
        half = self.half_pixel(node)
        off = 0.5 if half else 0.0
        avg = at["mode"] == "avg"
        N = X.shape[0]
        with kb.loop(R, "r") as r:
            # A run-time batch index outside [0, N) reads nothing: its ROI's output is 0
            # (onnxruntime refuses the run). The C reads image 0 with weight 0 instead.
            bi = kb.local(BI.flat(r), "bi", BI.dtype)
            valid = kb.local(land(cmp("ge", bi, 0), cmp("lt", bi, N)), "valid", INDEX)
            b = kb.local(select(cmp("ne", valid, 0), Cast(bi, INDEX), 0, INDEX), "b")
            c0 = [kb.local(ROI.flat(r * 4 + k) * scale - off, nm, dt)
                  for k, nm in enumerate(("rx1", "ry1", "rx2", "ry2"))]
            rw: Expr = c0[2] - c0[0]
            rh: Expr = c0[3] - c0[1]
            if not half:
                rw, rh = bmax(rw, 1.0), bmax(rh, 1.0)
            bh = kb.local(rh / OH, "bh", dt)
            bw = kb.local(rw / OW, "bw", dt)
            if ratio > 0:
                gh: Expr = Const(ratio)
                gw: Expr = Const(ratio)
            else:
                gh = kb.local(Cast(call("ceil", rh / OH), INDEX), "gh")
                gw = kb.local(Cast(call("ceil", rw / OW), INDEX), "gw")
            n = gh * gw
            with kb.loop(C, "c") as c, kb.loop(OH, "ph") as ph, kb.loop(OW, "pw") as pw:
                acc = kb.local(0.0 if avg else -math.inf, "acc", dt)
                base = (b * C + c) * (H * W)
                with kb.loop(gh, "iy") as iy, kb.loop(gw, "ix") as ix:
                    yy = kb.local(c0[1] + Cast(ph, dt) * bh
                                  + (Cast(iy, dt) + 0.5) * bh / Cast(gh, dt), "yy", dt)
                    xx = kb.local(c0[0] + Cast(pw, dt) * bw
                                  + (Cast(ix, dt) + 0.5) * bw / Cast(gw, dt), "xx", dt)
                    inside = land(cmp("ne", valid, 0),
                                  cmp("ge", yy, -1.0), cmp("le", yy, float(H)),
                                  cmp("ge", xx, -1.0), cmp("le", xx, float(W)))
                    lo_hi = []
                    for v, size, nm in ((yy, H, "y"), (xx, W, "x")):
                        vc = kb.local(bmin(bmax(v, 0.0), float(size)), f"{nm}c", dt)
                        v0 = kb.local(Cast(vc, INDEX), f"{nm}i")
                        edge = cmp("ge", v0, size - 1)
                        low = kb.local(select(edge, size - 1, v0, INDEX), f"{nm}lo")
                        high = select(edge, size - 1, v0 + 1, INDEX)
                        frac = kb.local(select(edge, 0.0, vc - Cast(v0, dt), dt), f"l{nm}", dt)
                        lo_hi.append((low, high, frac))
                    (yl, yh, ly), (xl, xh, lx) = lo_hi
                    hy, hx = 1 - ly, 1 - lx
                    taps = [(yl * W + xl, hy * hx), (yl * W + xh, hy * lx),
                            (yh * W + xl, ly * hx), (yh * W + xh, ly * lx)]
                    vals = [select(inside, w, 0.0, dt) * X.flat(base + p) for p, w in taps]
                    if avg:
                        kb.assign(acc, acc + ((vals[0] + vals[1]) + vals[2]) + vals[3])
                    else:
                        kb.assign(acc, bmax(acc, bmax(bmax(vals[0], vals[1]),
                                                      bmax(vals[2], vals[3]))))
                if avg:
                    value: Expr = acc / Cast(bmax(n, 1), dt)
                else:
                    value = select(cmp("gt", n, 0), acc, 0.0, dt)
                kb.store_output([], value, flat=((r * C + c) * OH + ph) * OW + pw)


@register
class RoiAlign10(_RoiAlign):
    since = 10

    def half_pixel(self, node: Node) -> bool:
        return False

    def reference(self, X: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, *,
                  mode: str = "avg", output_height: int = 1, output_width: int = 1,
                  sampling_ratio: int = 0, spatial_scale: float = 1.0) -> np.ndarray:
        return roi_align_ref(X, rois, batch_indices.reshape(-1), mode, output_height,
                             output_width, sampling_ratio, spatial_scale, False)


@register
class RoiAlign16(_RoiAlign):
    since = 16

    def reference(self, X: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, *,
                  coordinate_transformation_mode: str = "half_pixel", mode: str = "avg",
                  output_height: int = 1, output_width: int = 1, sampling_ratio: int = 0,
                  spatial_scale: float = 1.0) -> np.ndarray:
        return roi_align_ref(X, rois, batch_indices.reshape(-1), mode, output_height,
                             output_width, sampling_ratio, spatial_scale,
                             coordinate_transformation_mode == "half_pixel")


# ------------------------------------------------------------------------------------ DeformConv
def _bilinear_zero(img: np.ndarray, y: float, x: float) -> np.ndarray:
    """img (C, H, W) sampled at (y, x); taps outside the image read zero."""
    _, H, W = img.shape
    y0, x0 = math.floor(y), math.floor(x)
    out = np.zeros(img.shape[0])
    for yy, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
        for xx, wx in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
            if 0 <= yy < H and 0 <= xx < W:
                out += wy * wx * img[:, yy, xx]
    return out


@register
class DeformConv(OpDef):
    name = "DeformConv"
    since = 19
    onnx_tests = ("test_*deform_conv*",)
    defined = ("a NaN offset becomes tap index 0 (the saturating float -> integer "
               "conversion) with NaN bilinear weights: the outputs it feeds are NaN, and no "
               "read leaves X")

    def geometry(self, node: Node, xs: Sequence[int], ws: Sequence[int], os_: Sequence[int]
                 ) -> dict[str, Any]:
        def err(msg: str) -> AotcError:
            return AotcError(msg, node.name, node.op)

        if len(xs) != 4 or len(ws) != 4 or len(os_) != 4:
            raise err(f"only 2-D DeformConv is supported (X {list(xs)}, W {list(ws)})")
        at = node.attrs
        k = [int(v) for v in at.get("kernel_shape") or ws[2:]]
        st = [int(v) for v in at.get("strides") or [1, 1]]
        dil = [int(v) for v in at.get("dilations") or [1, 1]]
        pads = [int(v) for v in at.get("pads") or [0, 0, 0, 0]]
        group, og = int(at.get("group", 1)), int(at.get("offset_group", 1))
        N, IC, H, W = xs
        OC = ws[0]
        if list(k) != list(ws[2:]) or IC != ws[1] * group or OC % group or IC % og:
            raise err(f"X {list(xs)}, W {list(ws)}, group {group}, offset_group {og} and "
                      f"kernel_shape {k} do not match")
        oh = (H + pads[0] + pads[2] - (dil[0] * (k[0] - 1) + 1)) // st[0] + 1
        ow = (W + pads[1] + pads[3] - (dil[1] * (k[1] - 1) + 1)) // st[1] + 1
        if tuple(os_) != (N, og * k[0] * k[1] * 2, oh, ow):
            raise err(f"offset shape {list(os_)} does not match "
                      f"{[N, og * k[0] * k[1] * 2, oh, ow]}")
        return {"k": k, "st": st, "dil": dil, "pads": pads, "group": group, "og": og,
                "out": (N, OC, oh, ow)}

    def _geo(self, node: Node, ins: Sequence[Value | None]) -> dict[str, Any]:
        x, w, o = ins[0], ins[1], ins[2]
        assert x is not None and w is not None and o is not None
        return self.geometry(node, x.type.shape, w.type.shape, o.type.shape)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        g = self._geo(node, ins)
        N, OC, oh, ow = g["out"]
        if len(ins) > 3 and ins[3] is not None and tuple(ins[3].type.shape) != (OC,):
            raise AotcError(f"B shape {list(ins[3].type.shape)} is not ({OC},)", node.name,
                            node.op)
        want = (N, g["og"] * g["k"][0] * g["k"][1], oh, ow)
        if len(ins) > 4 and ins[4] is not None and tuple(ins[4].type.shape) != want:
            raise AotcError(f"mask shape {list(ins[4].type.shape)} is not {list(want)}",
                            node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        return [TensorType(self._geo(node, ins)["out"], x.type.dtype)]

    def reference(self, X: np.ndarray, W: np.ndarray, offset: np.ndarray,
                  B: np.ndarray | None = None, mask: np.ndarray | None = None, *,
                  dilations: Sequence[int] | None = None, group: int = 1,
                  kernel_shape: Sequence[int] | None = None, offset_group: int = 1,
                  pads: Sequence[int] | None = None, strides: Sequence[int] | None = None
                  ) -> np.ndarray:
        node = Node("DeformConv", "reference", (), (), {
            "dilations": dilations, "group": group, "kernel_shape": kernel_shape,
            "offset_group": offset_group, "pads": pads, "strides": strides})
        g = self.geometry(node, X.shape, W.shape, offset.shape)
        N, OC, oh, ow = g["out"]
        kh, kw = g["k"]
        og, group = g["og"], g["group"]
        icg, ocg, icog = X.shape[1] // group, OC // group, X.shape[1] // og
        off = offset.reshape(N, og, kh, kw, 2, oh, ow)
        m = np.ones((N, og, kh, kw, oh, ow)) if mask is None else mask.reshape(
            N, og, kh, kw, oh, ow)
        Y = np.zeros((N, OC, oh, ow))
        if B is not None:
            Y += B.reshape(1, -1, 1, 1)
        for n in range(N):
            for i in range(oh):
                for j in range(ow):
                    for a in range(kh):
                        for b in range(kw):
                            for o in range(og):
                                y = i * g["st"][0] - g["pads"][0] + a * g["dil"][0] \
                                    + off[n, o, a, b, 0, i, j]
                                x = j * g["st"][1] - g["pads"][1] + b * g["dil"][1] \
                                    + off[n, o, a, b, 1, i, j]
                                chans = slice(o * icog, (o + 1) * icog)
                                v = _bilinear_zero(X[n, chans], y, x) * m[n, o, a, b, i, j]
                                for oc in range(OC):
                                    gi = oc // ocg
                                    for ic in range(o * icog, (o + 1) * icog):
                                        if ic // icg == gi:
                                            Y[n, oc, i, j] += W[oc, ic - gi * icg, a, b] \
                                                * v[ic - o * icog]
        return Y.astype(X.dtype)

    def lower(self, node: Node, kb: Any) -> None:
        """Per output pixel: a scratch row of OC accumulators. Each (offset group, kernel tap)
        sample point gets its four taps once; each input channel is then sampled once and
        scattered into the accumulators of its group's output channels: the multiply-adds of
        a plain convolution plus one bilinear read per (channel, tap), and O(OC) memory."""
        X, Wt, OFF, Y = kb.inputs[0], kb.inputs[1], kb.inputs[2], kb.outputs[0]
        B = kb.inputs[3] if len(kb.inputs) > 3 else None
        M = kb.inputs[4] if len(kb.inputs) > 4 else None
        if Y.numel == 0:
            return
        dt = X.dtype
        g = self.geometry(node, X.shape, Wt.shape, OFF.shape)
        N, OC, OH, OW = g["out"]
        _, IC, H, W = X.shape
        KH, KW = g["k"]
        og, group = g["og"], g["group"]
        icg, ocg, icog = IC // group, OC // group, IC // og
        P = OH * OW
        acc = kb.scratch_buffer("acc", dt, (OC,))
        with kb.loops((N, OH, OW), ["n", "oi", "oj"]) as (n, i, j):
            with kb.loop(OC, "oc") as oc:
                kb.store(acc, [oc], Const(0.0, dt))  # the bias is added after the sum
            pos = i * OW + j
            with kb.loop(og, "og") as o, kb.loop(KH, "ka") as a, kb.loop(KW, "kb") as b:
                k = (n * og + o) * (KH * KW) + a * KW + b
                y = kb.local(Cast(i * g["st"][0] - g["pads"][0] + a * g["dil"][0], dt)
                             + OFF.flat((k * 2) * P + pos), "sy", dt)
                x = kb.local(Cast(j * g["st"][1] - g["pads"][1] + b * g["dil"][1], dt)
                             + OFF.flat((k * 2 + 1) * P + pos), "sx", dt)
                yf = kb.local(call("floor", y), "yf", dt)
                xf = kb.local(call("floor", x), "xf", dt)
                # Clamped before the cast (no overflow); the clamped taps stay outside.
                y0 = kb.local(Cast(bmin(bmax(yf, -2.0), float(H)), INDEX), "yi")
                x0 = kb.local(Cast(bmin(bmax(xf, -2.0), float(W)), INDEX), "xi")
                ly = kb.local(y - yf, "ly", dt)
                lx = kb.local(x - xf, "lx", dt)
                m = M.flat(k * P + pos) if M is not None else None
                taps = []
                for yy, wy in ((y0, 1 - ly), (y0 + 1, ly)):
                    for xx, wx in ((x0, 1 - lx), (x0 + 1, lx)):
                        ok = land(cmp("ge", yy, 0), cmp("lt", yy, H), cmp("ge", xx, 0),
                                  cmp("lt", xx, W))
                        w = select(ok, wy * wx, 0.0, dt)
                        idx = bmin(bmax(yy, 0), H - 1) * W + bmin(bmax(xx, 0), W - 1)
                        t = len(taps)
                        taps.append((kb.local(idx, f"q{t}"),
                                     kb.local(w if m is None else w * m, f"w{t}", dt)))
                with kb.loop(icog, "icl") as icl:
                    ic = o * icog + icl
                    base = (n * IC + ic) * (H * W)
                    val: Expr | None = None
                    for q, w in taps:
                        term = w * X.flat(base + q)
                        val = term if val is None else val + term
                    assert val is not None
                    v = kb.local(val, "v", dt)
                    gi = ic / icg if group > 1 else Const(0)
                    with kb.loop(gi * ocg + ocg, "oc", start=gi * ocg) as oc:
                        wv = Wt.flat(((oc * icg + (ic - gi * icg)) * KH + a) * KW + b)
                        kb.store(acc, [oc], acc[oc] + wv * v)
            with kb.loop(OC, "oc") as oc:
                kb.store_output([], acc[oc] + B.flat(oc) if B is not None else acc[oc],
                                flat=((n * OC + oc) * OH + i) * OW + j)
