"""TFLite's SSD post-processing custom operator TFLite_Detection_PostProcess (TFLM's
detection_postprocess.cc; parameters in a flexbuffer map) -> aotc.DetectionPostProcess
(aotc/ops/image/detection.py).

float32 inputs are TFLM's case; uint8 ones (quantised SSD models such as Coral's) are
LiteRT's, which dequantises the encodings, the scores and the anchors first ((q - zero point)
* scale in float32: the kernel reads the first two so, the anchors are dequantised at compile
time); TFLM's kernel refuses them. The fast
non-max suppression is converted with one class per detection (max_classes_per_detection 1),
the regular one (use_regular_nms) as it is.
"""

from __future__ import annotations

import math
from typing import Any

from aotc.errors import AotcError
from aotc.frontend.tflite.signal import _ins, _outs, options

Builder = Any
NAME = "TFLite_Detection_PostProcess"
_FLOATS = ("nms_score_threshold", "nms_iou_threshold", "y_scale", "x_scale", "h_scale",
           "w_scale")


def _opts(op: Any) -> dict[str, Any]:
    """The parameters TFLM reads, checked as its kernel checks them."""
    try:
        o = options(op)
    except AotcError as e:
        raise AotcError(f"{NAME}: {e}") from None
    out: dict[str, Any] = {}
    for k in ("max_detections", "max_classes_per_detection", "num_classes"):
        v = o.get(k)
        if isinstance(v, bool) or not isinstance(v, int):
            raise AotcError(f"{NAME}: option {k!r} is missing or not an integer ({v!r})")
        out[k] = v
    for k in _FLOATS:
        v = o.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise AotcError(f"{NAME}: option {k!r} is missing or not a finite number ({v!r})")
        out[k] = float(v)
    regular = o.get("use_regular_nms", False)
    if regular is None:
        regular = False
    if not isinstance(regular, (bool, int)):
        raise AotcError(f"{NAME}: option 'use_regular_nms' is not a boolean ({regular!r})")
    out["use_regular_nms"] = int(bool(regular))
    per_class = o.get("detections_per_class")
    if per_class is None:
        per_class = 100  # TFLM's default
    if isinstance(per_class, bool) or not isinstance(per_class, int):
        raise AotcError(f"{NAME}: option 'detections_per_class' is not an integer "
                        f"({per_class!r})")
    if regular and per_class < 1:
        raise AotcError(f"{NAME}: detections_per_class={per_class} must be positive")
    out["detections_per_class"] = max(per_class, 1)
    if not regular and out["max_classes_per_detection"] != 1:
        raise AotcError(f"{NAME}: max_classes_per_detection="
                        f"{out['max_classes_per_detection']} is not supported (only 1: TFLM's "
                        f"fast path writes further classes outside its outputs)")
    if out["max_detections"] < 1 or out["num_classes"] < 1:
        raise AotcError(f"{NAME}: max_detections={out['max_detections']} and num_classes="
                        f"{out['num_classes']} must be positive")
    if not 0.0 < out["nms_iou_threshold"] <= 1.0:
        raise AotcError(f"{NAME}: nms_iou_threshold={out['nms_iou_threshold']} must be in "
                        f"(0, 1] (TFLM's kernel checks it)")
    for k in ("y_scale", "x_scale", "h_scale", "w_scale"):
        if out[k] == 0.0:
            raise AotcError(f"{NAME}: option {k!r} is 0 (the encodings are divided by it)")
    return out


def detection_postprocess(b: Builder, op: Any) -> None:
    o = _opts(op)
    ins, outs = _ins(op), _outs(op)
    if len(ins) != 3 or len(outs) != 4:
        raise AotcError(f"{NAME} takes 3 inputs and 4 outputs, got {len(ins)} and {len(outs)}")
    if b.const(ins[2]) is None:
        raise AotcError(f"{NAME}: the anchors ({b.tname(ins[2])!r}) must be a constant")
    # The encodings and scores as stored (a uint8 model's: the graph's int8), read through
    # their parameters by the kernel; the anchors dequantised at compile time.
    srcs, qattrs = [], {}
    for t, key in zip(ins[:2], ("box", "score")):
        q = b.quant(t)
        if q is None:
            srcs.append(b.fin(t))
            continue
        if b.dtype(t) != "int8" or len(q[0]) != 1:
            raise AotcError(f"{NAME}: {b.tname(t)!r} must be float32 or uint8 with one scale")
        srcs.append(b.get(t))
        qattrs[f"{key}_scale"], qattrs[f"{key}_zero_point"] = float(q[0][0]), int(q[1][0])
    srcs.append(b.fin(ins[2]))
    ys = b.add("DetectionPostProcess", srcs, "detection", n_out=4, domain="aotc", **qattrs,
               max_detections=o["max_detections"], num_classes=o["num_classes"],
               use_regular_nms=o["use_regular_nms"],
               detections_per_class=o["detections_per_class"], **{k: o[k] for k in _FLOATS})
    m = o["max_detections"]
    for t, y, shape in zip(outs, ys, ((1, m, 4), (1, m), (1, m), (1,))):
        declared = b.shape(t)
        if declared and tuple(declared) != shape:
            raise AotcError(f"{NAME}: output {b.tname(t)!r} is declared {list(declared)}; "
                            f"max_detections={m} makes it {list(shape)}")
        b.shapes[t] = shape  # TFLite models often leave these outputs' shapes unset
        b.define(t, y)


CONVERTERS = {"CUSTOM:" + NAME: detection_postprocess}
# The type of the data operand (input 0): float32 (TFLM) or uint8 quantised (LiteRT).
TYPES: dict[str, tuple[str, ...]] = {"CUSTOM:" + NAME: ("float32", "uint8")}
ONNX_OPS = {"CUSTOM:" + NAME: ("aotc.DetectionPostProcess",)}
