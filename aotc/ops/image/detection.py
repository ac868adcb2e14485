"""TFLite's SSD post-processing (custom operator TFLite_Detection_PostProcess, TFLM's
detection_postprocess.cc): anchor-relative box decoding, then the fast multi-class non-max
suppression (one class per anchor, its highest score) or the regular one (per class, at most
detections_per_class each, the best max_detections of all classes kept).

The arithmetic is the kernel's: the box centre and half sides in double (as TFLM casts each
operand), the corners and the IoU in float32, candidates ordered by score with ties to the
lower anchor (TFLM's stable merge sort of the kept scores), suppression when IoU > threshold;
the regular path's running list merged with each class's detections with ties to the earlier
entry (TFLM's partial sort with the position as tie-break). The C finds each next detection
by a scan for the best still-active candidate instead of a sort: the same greedy order, no
sort buffer, no recursion. Slots past the detections hold zeros (TFLM's fast path leaves
them as the arena held them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Cast, Const, bmax, bmin, call, cmp, land, lor
from aotc.ops import OpDef, register

F32, I32, U8 = (dtypes.BY_NAME[n] for n in ("float32", "int32", "uint8"))


def decode_reference(box: np.ndarray, anchor: np.ndarray, scales: Sequence[float]
                     ) -> np.ndarray:
    """[N, 4] (ymin, xmin, ymax, xmax) float32 from encodings [N, >=4] and anchors [N, 4]
    (y, x, h, w): DecodeCenterSizeBoxes."""
    b = box[:, :4].astype(np.float64)
    a = anchor.astype(np.float64)
    s = [float(np.float32(v)) for v in scales]
    yc = (b[:, 0] / s[0] * a[:, 2] + a[:, 0]).astype(np.float32)
    xc = (b[:, 1] / s[1] * a[:, 3] + a[:, 1]).astype(np.float32)
    hh = np.array([0.5 * math.exp(v / s[2]) for v in b[:, 2]]) * a[:, 2]
    hw = np.array([0.5 * math.exp(v / s[3]) for v in b[:, 3]]) * a[:, 3]
    hh, hw = hh.astype(np.float32), hw.astype(np.float32)
    return np.stack([yc - hh, xc - hw, yc + hh, xc + hw], axis=1).astype(np.float32)


def iou_reference(bi: np.ndarray, bj: np.ndarray) -> np.float32:
    """ComputeIntersectionOverUnion in float32."""
    f = np.float32
    area_i = f(f(bi[2] - bi[0]) * f(bi[3] - bi[1]))
    area_j = f(f(bj[2] - bj[0]) * f(bj[3] - bj[1]))
    if area_i <= 0 or area_j <= 0:
        return f(0)
    ih = f(max(f(min(bi[2], bj[2]) - max(bi[0], bj[0])), f(0)))
    iw = f(max(f(min(bi[3], bj[3]) - max(bi[1], bj[1])), f(0)))
    inter = f(ih * iw)
    return f(inter / f(f(area_i + area_j) - inter))


def _dequantize_reference(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    if x.dtype == np.float32:
        return x
    return (x.astype(np.float32) - np.float32(zero_point)) * np.float32(scale)


def _nms_reference(dec: np.ndarray, score: np.ndarray, limit: int, thr: np.float32,
                   iou_thr: np.float32) -> list[int]:
    """NonMaxSuppressionSingleClassHelper: the anchors selected, best first."""
    n = len(score)
    active = [bool(score[r] >= thr) for r in range(n)]
    picks: list[int] = []
    while len(picks) < limit:
        pick = -1
        for r in range(n):
            if active[r] and (pick < 0 or score[r] > score[pick]):
                pick = r
        if pick < 0:
            break
        active[pick] = False
        picks.append(pick)
        for r in range(n):
            if active[r] and iou_reference(dec[pick], dec[r]) > iou_thr:
                active[r] = False
    return picks


def _regular_reference(dec: np.ndarray, sc: np.ndarray, m: int, per_class: int,
                       thr: np.float32, iou_thr: np.float32) -> tuple[np.ndarray, ...]:
    """NonMaxSuppressionMultiClassRegularHelper: per class, then the best m of the running
    list and the class's detections (a stable order: ties to the running list)."""
    kept: list[tuple[np.float32, int, int]] = []
    for c in range(sc.shape[1]):
        picks = _nms_reference(dec, sc[:, c], per_class, thr, iou_thr)
        kept = sorted(kept + [(sc[p, c], p, c) for p in picks], key=lambda t: -t[0])[:m]
    return _outputs(dec, kept, m)


def _outputs(dec: np.ndarray, dets: list[tuple[Any, int, int]], m: int
             ) -> tuple[np.ndarray, ...]:
    """The four outputs of detections (score, anchor, class), zeros past them."""
    out_b = np.zeros((1, m, 4), np.float32)
    out_c = np.zeros((1, m), np.float32)
    out_s = np.zeros((1, m), np.float32)
    for d, (score, anchor, c) in enumerate(dets):
        out_b[0, d], out_c[0, d], out_s[0, d] = dec[anchor], c, score
    return out_b, out_c, out_s, np.array([len(dets)], np.float32)


@register
class DetectionPostProcess(OpDef):
    """Inputs: box encodings [1, N, >=4], class scores [1, N, C] (C = num_classes or one
    more, a background class first), anchors [N, 4] float32. The encodings and the scores
    float32, or int8 read as (q - zero point) * scale in float32 with the ``box_`` and
    ``score_`` parameters (a uint8 model's tensors: LiteRT dequantises them so, and no float
    copy is kept). Outputs: boxes [1, M, 4], classes [1, M], scores [1, M], the number of
    detections [1], float32; M = max_detections."""

    name = "DetectionPostProcess"
    domain = "aotc"
    dtypes = ("float32", "int8")

    def reference(self, boxes: np.ndarray, scores: np.ndarray, anchors: np.ndarray, *,
                  max_detections: int = 1, num_classes: int = 1,
                  nms_score_threshold: float = 0.0, nms_iou_threshold: float = 0.5,
                  y_scale: float = 1.0, x_scale: float = 1.0, h_scale: float = 1.0,
                  w_scale: float = 1.0, use_regular_nms: int = 0,
                  detections_per_class: int = 100, box_scale: float = 0.0,
                  box_zero_point: int = 0, score_scale: float = 0.0,
                  score_zero_point: int = 0) -> tuple[np.ndarray, ...]:
        boxes = _dequantize_reference(boxes, box_scale, box_zero_point)
        scores = _dequantize_reference(scores, score_scale, score_zero_point)
        n = boxes.shape[1]
        dec = decode_reference(boxes[0], anchors, (y_scale, x_scale, h_scale, w_scale))
        sc = scores[0].astype(np.float32)
        off = sc.shape[1] - num_classes
        thr, iou_thr = np.float32(nms_score_threshold), np.float32(nms_iou_threshold)
        if use_regular_nms:
            return _regular_reference(dec, sc[:, off:off + num_classes], max_detections,
                                      detections_per_class, thr, iou_thr)
        best = np.zeros(n, np.float32)
        cls = np.zeros(n, np.int64)
        for r in range(n):
            m, c = sc[r, off], 0
            for k in range(1, num_classes):
                if sc[r, off + k] > m:
                    m, c = sc[r, off + k], k
            best[r], cls[r] = m, c
        picks = _nms_reference(dec, best, max_detections, thr, iou_thr)
        return _outputs(dec, [(best[p], p, int(cls[p])) for p in picks], max_detections)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        b, s, a = ins[:3]
        assert b is not None and s is not None and a is not None
        if a.type.dtype != F32:
            raise AotcError("the anchors must be float32", node.name, node.op)
        for v, key in ((b, "box"), (s, "score")):
            if v.type.dtype != F32 and not float(node.attrs.get(f"{key}_scale", 0.0)) > 0:
                raise AotcError(f"int8 {key} input without a positive {key}_scale", node.name,
                                node.op)
        n = b.type.shape[1] if len(b.type.shape) == 3 else -1
        c = int(node.attrs.get("num_classes", 1))
        if len(b.type.shape) != 3 or b.type.shape[0] != 1 or b.type.shape[2] < 4:
            raise AotcError(f"box encodings must be [1, anchors, >=4], got {list(b.type.shape)}",
                            node.name, node.op)
        if len(s.type.shape) != 3 or tuple(s.type.shape[:2]) != (1, n) or \
                s.type.shape[2] - c not in (0, 1):
            raise AotcError(f"class scores must be [1, {n}, num_classes={c} (+1 background)], "
                            f"got {list(s.type.shape)}", node.name, node.op)
        if tuple(a.type.shape) != (n, 4):
            raise AotcError(f"anchors must be [{n}, 4], got {list(a.type.shape)}",
                            node.name, node.op)
        if min(int(node.attrs.get(k, 1)) for k in ("max_detections",
                                                   "detections_per_class")) < 1 or c < 1:
            raise AotcError("max_detections, detections_per_class and num_classes must be "
                            "positive", node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        m = int(node.attrs.get("max_detections", 1))
        return [TensorType((1, m, 4), F32), TensorType((1, m), F32), TensorType((1, m), F32),
                TensorType((1,), F32)]

    def lower(self, node: Node, kb: Any) -> None:
        a = node.attrs
        boxes, scores = (_Dequantized(kb.inputs[i], a, key) for i, key in ((0, "box"),
                                                                           (1, "score")))
        anchors = kb.inputs[2]
        n, k_all = boxes.shape[1], scores.shape[2]
        ncls = int(a["num_classes"])
        off = k_all - ncls
        m = int(a["max_detections"])
        thr, iou_thr = _f(a["nms_score_threshold"]), _f(a["nms_iou_threshold"])
        dec = _decode(kb, node, boxes, anchors)
        active = kb.scratch_buffer("active", U8, (n,))
        if int(a.get("use_regular_nms", 0)):
            self._regular(kb, dec, active, scores, off, ncls, m,
                          min(int(a.get("detections_per_class", 100)), n), thr, iou_thr)
            return
        best = kb.scratch_buffer("best", F32, (n,))
        cls = kb.scratch_buffer("class", I32, (n,))
        with kb.loop(n, "r") as r:
            row = r * k_all + off
            mx = kb.local(scores.flat(row), "mx", F32)
            c = kb.local(Const(0), "c", I32)
            if ncls > 1:
                with kb.loop(ncls - 1, "k") as k0:
                    v = kb.local(scores.flat(row + k0 + 1), "v", F32)
                    with kb.if_(cmp("gt", v, mx)):
                        kb.assign(mx, v)
                        kb.assign(c, k0 + 1)
            kb.store(best, [r], mx)
            kb.store(cls, [r], c)
            kb.store(active, [r], Cast(cmp("ge", mx, thr), U8))
        ob, oc, os_, on = kb.outputs
        count = kb.local(Const(0), "count", I32)

        def found(det: Any, pick: Any, ps: Any) -> None:
            for j in range(4):
                kb.store(ob, [0, det, j], dec[[pick, j]])
            kb.store(oc, [0, det], Cast(cls.flat(pick), F32))
            kb.store(os_, [0, det], ps)
            kb.assign(count, count + 1)

        def none(det: Any) -> None:
            _zero_slot(kb, det)

        _nms(kb, dec, active, best.flat, n, m, iou_thr, found, none)
        kb.store(on, [0], Cast(count, F32))

    @staticmethod
    def _regular(kb: Any, dec: Any, active: Any, scores: Any, off: int, ncls: int, m: int,
                 per_class: int, thr: Any, iou_thr: Any) -> None:
        """Per class: its suppression into a candidate list, merged with the running list
        (best m, ties to the running list's entries)."""
        n, k_all = dec.shape[0], scores.shape[2]
        ra, rc, rs = (kb.scratch_buffer(f"kept_{x}", t, (m,))
                      for x, t in (("anchor", I32), ("class", I32), ("score", F32)))
        ta, tc, ts = (kb.scratch_buffer(f"merged_{x}", t, (m,))
                      for x, t in (("anchor", I32), ("class", I32), ("score", F32)))
        ca = kb.scratch_buffer("cand_anchor", I32, (per_class,))
        cs = kb.scratch_buffer("cand_score", F32, (per_class,))
        kept = kb.local(Const(0), "kept", I32)
        with kb.loop(ncls, "cls") as c:
            def score(r: Any) -> Any:
                return scores.flat(r * k_all + off + c)

            with kb.loop(n, "r") as r:
                kb.store(active, [r], Cast(cmp("ge", score(r), thr), U8))
            cn = kb.local(Const(0), "cn", I32)

            def found(k: Any, pick: Any, ps: Any) -> None:
                kb.store(ca, [cn], pick)
                kb.store(cs, [cn], ps)
                kb.assign(cn, cn + 1)

            _nms(kb, dec, active, score, n, per_class, iou_thr, found, None)
            i = kb.local(Const(0), "i", I32)
            j = kb.local(Const(0), "j", I32)
            with kb.loop(m, "o") as o:
                # C's && does not read kept_score[i] once i == kept (nor cand_score[cn]).
                take = kb.local(Cast(land(cmp("lt", i, kept), lor(
                    cmp("ge", j, cn), cmp("ge", rs.flat(bmin(i, m - 1)),
                                          cs.flat(bmin(j, per_class - 1))))), U8), "take", U8)
                with kb.if_(cmp("ne", take, Const(0, U8))):
                    kb.store(ta, [o], ra.flat(i))
                    kb.store(tc, [o], rc.flat(i))
                    kb.store(ts, [o], rs.flat(i))
                    kb.assign(i, i + 1)
                with kb.if_(land(cmp("eq", take, Const(0, U8)), cmp("lt", j, cn))):
                    kb.store(ta, [o], ca.flat(j))
                    kb.store(tc, [o], c)
                    kb.store(ts, [o], cs.flat(j))
                    kb.assign(j, j + 1)
            kb.assign(kept, bmin(kept + cn, m))
            with kb.loop(m, "o") as o:
                with kb.if_(cmp("lt", o, kept)):
                    kb.store(ra, [o], ta.flat(o))
                    kb.store(rc, [o], tc.flat(o))
                    kb.store(rs, [o], ts.flat(o))
        ob, oc, os_, on = kb.outputs
        with kb.loop(m, "det") as det:
            with kb.if_(cmp("lt", det, kept)):
                p = kb.local(ra.flat(det), "p", I32)
                for jj in range(4):
                    kb.store(ob, [0, det, jj], dec[[p, jj]])
                kb.store(oc, [0, det], Cast(rc.flat(det), F32))
                kb.store(os_, [0, det], rs.flat(det))
            with kb.if_(cmp("ge", det, kept)):
                _zero_slot(kb, det)
        kb.store(on, [0], Cast(kept, F32))


def _f(v: Any) -> Const:
    return Const(float(np.float32(v)), F32)


class _Dequantized:
    """An input read as float32: as it is, or an int8 one as (q - zero point) * scale."""

    def __init__(self, ref: Any, attrs: dict[str, Any], key: str) -> None:
        self.ref, self.shape = ref, ref.shape
        self.scale = _f(attrs.get(f"{key}_scale", 0.0))
        self.zp = _f(int(attrs.get(f"{key}_zero_point", 0)))

    def flat(self, i: Any) -> Any:
        v = self.ref.flat(i)
        if self.ref.dtype == F32:
            return v
        return (Cast(v, F32) - self.zp) * self.scale


def _zero_slot(kb: Any, det: Any) -> None:
    ob, oc, os_ = kb.outputs[:3]
    for j in range(4):
        kb.store(ob, [0, det, j], Const(0.0, F32))
    kb.store(oc, [0, det], Const(0.0, F32))
    kb.store(os_, [0, det], Const(0.0, F32))


def _decode(kb: Any, node: Node, boxes: Any, anchors: Any) -> Any:
    """DecodeCenterSizeBoxes into a scratch [N, 4] (ymin, xmin, ymax, xmax)."""
    a = node.attrs
    n, d = boxes.shape[1], boxes.shape[2]
    sy, sx, sh, sw = (_f(a[k]) for k in ("y_scale", "x_scale", "h_scale", "w_scale"))
    dec = kb.scratch_buffer("decoded", F32, (n, 4))
    with kb.loop(n, "r") as r:
        ay, ax, ah, aw = (kb.local(anchors.flat(r * 4 + j), f"a{x}", F32)
                          for j, x in enumerate("yxhw"))
        yc = kb.local(call("f64_box_center", boxes.flat(r * d), sy, ah, ay), "yc", F32)
        xc = kb.local(call("f64_box_center", boxes.flat(r * d + 1), sx, aw, ax), "xc", F32)
        hh = kb.local(call("f64_box_half", boxes.flat(r * d + 2), sh, ah), "hh", F32)
        hw = kb.local(call("f64_box_half", boxes.flat(r * d + 3), sw, aw), "hw", F32)
        for j, v in enumerate((yc - hh, xc - hw, yc + hh, xc + hw)):
            kb.store(dec, [r, j], v)
    return dec


def _nms(kb: Any, dec: Any, active: Any, score: Any, n: int, limit: int, iou_thr: Any,
         found: Any, none: Any) -> None:
    """NonMaxSuppressionSingleClassHelper over the ``active`` candidates (set by the score
    threshold): ``limit`` rounds, each the best active candidate (score(r) highest, ties to
    the lower r) -> found(round, anchor, score) and the suppression of what overlaps it, or
    none(round) once there is none."""
    zero = Const(0, U8)
    with kb.loop(limit, "det") as det:
        pick = kb.local(Const(-1), "pick", I32)
        ps = kb.local(Const(0.0, F32), "pick_score", F32)
        with kb.loop(n, "r") as r:
            b = kb.local(score(r), "b", F32)
            with kb.if_(land(cmp("ne", active.flat(r), zero),
                             lor(cmp("lt", pick, 0), cmp("gt", b, ps)))):
                kb.assign(pick, r)
                kb.assign(ps, b)
        with kb.if_(cmp("ge", pick, 0)):
            kb.store(active, [pick], zero)
            found(det, pick, ps)
            _suppress(kb, dec, active, pick, n, iou_thr)
        if none is not None:
            with kb.if_(cmp("lt", pick, 0)):
                none(det)


def _suppress(kb: Any, dec: Any, active: Any, pick: Any, n: int, iou_thr: Any) -> None:
    """Deactivate every active candidate whose IoU with ``pick`` exceeds the threshold
    (ComputeIntersectionOverUnion: 0 when either area is not positive)."""
    zero_f = Const(0.0, F32)
    pi = [kb.local(dec[[pick, j]], f"p{j}", F32) for j in range(4)]
    area_i = kb.local((pi[2] - pi[0]) * (pi[3] - pi[1]), "area_i", F32)
    with kb.loop(n, "q") as q:
        with kb.if_(cmp("ne", active.flat(q), Const(0, U8))):
            qj = [kb.local(dec[[q, j]], f"q{j}", F32) for j in range(4)]
            area_j = kb.local((qj[2] - qj[0]) * (qj[3] - qj[1]), "area_j", F32)
            ih = bmax(bmin(pi[2], qj[2]) - bmax(pi[0], qj[0]), zero_f)
            iw = bmax(bmin(pi[3], qj[3]) - bmax(pi[1], qj[1]), zero_f)
            inter = kb.local(ih * iw, "inter", F32)
            iou = kb.local(inter / (area_i + area_j - inter), "iou", F32)
            pos = land(cmp("gt", area_i, zero_f), cmp("gt", area_j, zero_f))
            with kb.if_(land(pos, cmp("gt", iou, iou_thr))):
                kb.store(active, [q], Const(0, U8))
