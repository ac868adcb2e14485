"""TFLite_Detection_PostProcess (SSD post-processing, fast non-max suppression) compiled by
aotc against the kernels that define it: float32 models against TFLM's Python interpreter,
uint8 models against LiteRT's (TFLM's kernel refuses quantised inputs). Every detection is
compared bit for bit (boxes, classes, scores exactly equal, no tolerance) and the count; the
slots past the detections are compared only on aotc's side (zeros): TFLM and LiteRT leave
them as the arena held them.

The cases cover ties in scores (the lower anchor first), boxes whose IoU is exactly the
threshold (kept: TFLM suppresses only above it), fewer detections than max_detections, a
background class, box encodings with more than 4 values per anchor, and the refusals.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from opcheck import run_on_boards
from tflite_builder import Net, interpret, interpret_tflm

import aotc
from aotc.errors import AotcError
from aotc.ops.image.detection import DetectionPostProcess

NAME = "TFLite_Detection_PostProcess"
OPTS = dict(max_detections=5, max_classes_per_detection=1, detections_per_class=100,
            use_regular_nms=False, nms_score_threshold=0.3, nms_iou_threshold=0.5,
            num_classes=3, y_scale=10.0, x_scale=10.0, h_scale=5.0, w_scale=5.0)


def _anchors(n: int, rng: np.random.Generator) -> np.ndarray:
    """[n, 4] (y, x, h, w): centres in [0.1, 0.9], sides in [0.1, 0.5]."""
    c = rng.uniform(0.1, 0.9, (n, 2))
    s = rng.uniform(0.1, 0.5, (n, 2))
    return np.concatenate([c, s], axis=1).astype(np.float32)


def _model(anchors: np.ndarray, n_scores: int, opts: dict[str, Any], code: int = 4,
           dtype: Any = np.float32, q: dict[str, tuple[float, int]] | None = None) -> bytes:
    """One TFLite_Detection_PostProcess: inputs box encodings [1, N, code] and scores
    [1, N, n_scores], constant anchors (float32, or ``dtype`` with ``q``'s parameters)."""
    net = Net(False)
    n = anchors.shape[0]
    if q is None:
        boxes = net.input((1, n, code))
        scores = net.input((1, n, n_scores))
        a = net._tensor((n, 4), np.float32, "anchors", anchors)
    else:
        boxes = net._tensor((1, n, code), dtype, "input0", None, *q["boxes"])
        scores = net._tensor((1, n, n_scores), dtype, "input1", None, *q["scores"])
        net.inputs += [boxes, scores]
        s, z = q["anchors"]
        aq = np.clip(np.round(anchors / s) + z, 0, 255).astype(dtype)
        a = net._tensor((n, 4), dtype, "anchors", aq, s, z)
    m = int(opts["max_detections"])
    outs = net.custom_typed(NAME, [boxes, scores, a],
                            [((1, m, 4), np.float32), ((1, m), np.float32),
                             ((1, m), np.float32), ((1,), np.float32)], opts)
    return net.build(outs)


def _compile(tmp_path: Path, model: bytes) -> aotc.Bundle:
    src = tmp_path / "model.tflite"
    src.write_bytes(model)
    return aotc.compile(src, tmp_path / "bundle", name="m")


def _run(bundle: aotc.Bundle, xs: list[np.ndarray], boards: Path | None = None
         ) -> list[np.ndarray]:
    """The host build's outputs; with ``boards`` (a build folder), also run on the QEMU boards
    of AOTC_TEST_BOARDS against the host build, as every op test."""
    feeds = {f"input{k}": x for k, x in enumerate(xs)}
    res = bundle.load().run(feeds)
    if boards is not None:
        run_on_boards(bundle, feeds, res, boards)
    return [np.asarray(v) for v in res.values()]


def _same(ours: list[np.ndarray], ref: list[np.ndarray], m: int) -> int:
    """The detections equal bit for bit; aotc's slots past them zero. The count."""
    n = int(ref[3].reshape(-1)[0])
    assert float(ours[3].reshape(-1)[0]) == n, f"{ours[3]} detections, reference {n}"
    assert 0 <= n <= m
    for k, shape in enumerate(((1, m, 4), (1, m), (1, m))):
        a, b = ours[k].reshape(shape), ref[k].reshape(shape)
        assert a.dtype == b.dtype == np.float32
        assert np.array_equal(a[0, :n].view(np.uint32), b[0, :n].view(np.uint32)), \
            f"output {k}: {a[0, :n]} != reference {b[0, :n]}"
        assert not a[0, n:].any(), f"output {k}: unused slots {a[0, n:]} are not zero"
    return n


def _float_case(tmp_path: Path, anchors: np.ndarray, boxes: np.ndarray, scores: np.ndarray,
                opts: dict[str, Any], boards: bool = False) -> int:
    model = _model(anchors, scores.shape[2], opts, boxes.shape[2])
    ref = interpret_tflm(model, [boxes, scores], 4)
    ours = _run(_compile(tmp_path, model), [boxes, scores], tmp_path / "fw" if boards else None)
    m = int(opts["max_detections"])
    got = _same(ours, ref, m)
    # The op's numpy reference (constant folding) agrees with TFLM too.
    attrs = {k: opts.get(k, v) for k, v in DetectionPostProcess.attr_defaults().items()}
    attrs["use_regular_nms"] = int(bool(opts.get("use_regular_nms", False)))
    _same(list(DetectionPostProcess().reference(boxes, scores, anchors, **attrs)), ref, m)
    return got


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("background", [False, True])
def test_float_random(tmp_path: Path, seed: int, background: bool) -> None:
    rng = np.random.default_rng(seed)
    n, c = 64, 3
    anchors = _anchors(n, rng)
    boxes = rng.normal(0, 2, (1, n, 4)).astype(np.float32)
    scores = rng.uniform(0, 1, (1, n, c + background)).astype(np.float32)
    opts = dict(OPTS, max_detections=10, nms_score_threshold=0.2 + 0.1 * seed)
    assert _float_case(tmp_path, anchors, boxes, scores, opts, boards=seed == 0) > 0


def test_float_ties_and_iou_at_threshold(tmp_path: Path) -> None:
    """Zero encodings decode to the anchors themselves. Anchors 0..3 share a score (ties:
    the lower anchor first). Anchor 1 overlaps anchor 0 with IoU exactly 0.5 (kept), anchor 2
    overlaps it by more (suppressed); anchor 3 has a tied best class (the lower class wins)."""
    # Dyadic corners: the IoU is exact in float32.
    anchors = np.array([[0.5, 0.5, 0.5, 0.5],        # [.25, .25, .75, .75], area .25
                        [0.5, 0.375, 0.5, 0.25],     # [.25, .25, .75, .5]: IoU .125/.25 = .5
                        [0.5, 0.5625, 0.5, 0.5],     # IoU .21875/.28125 with anchor 0
                        [0.125, 0.125, 0.125, 0.125],
                        [0.875, 0.875, 0.125, 0.125],
                        [0.875, 0.125, 0.125, 0.125]], np.float32)
    n = anchors.shape[0]
    boxes = np.zeros((1, n, 4), np.float32)
    scores = np.array([[0.0, 0.8, 0.1], [0.0, 0.8, 0.2], [0.8, 0.0, 0.0],
                       [0.8, 0.8, 0.0], [0.5, 0.9, 0.0], [0.1, 0.1, 0.2]], np.float32)[None]
    opts = dict(OPTS, max_detections=6, nms_score_threshold=0.5)
    got = _float_case(tmp_path, anchors, boxes, scores, opts)
    assert got == 4  # anchors 4, 0, 1, 3 (2 suppressed; 5 under the threshold)


def test_float_fewer_than_max_and_wide_encodings(tmp_path: Path) -> None:
    """Encodings of 6 values per anchor (keypoints after the box; only the first 4 read),
    a high score threshold: fewer detections than max_detections, the rest zero."""
    rng = np.random.default_rng(7)
    n = 40
    anchors = _anchors(n, rng)
    boxes = rng.normal(0, 1, (1, n, 6)).astype(np.float32)
    scores = rng.uniform(0, 1, (1, n, 2)).astype(np.float32)
    opts = dict(OPTS, num_classes=1, max_detections=20, nms_score_threshold=0.9,
                nms_iou_threshold=0.3)
    got = _float_case(tmp_path, anchors, boxes, scores, opts)
    assert 0 < got < 20


def test_float_nothing_above_threshold(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    anchors = _anchors(16, rng)
    boxes = rng.normal(0, 1, (1, 16, 4)).astype(np.float32)
    scores = rng.uniform(0, 0.5, (1, 16, 3)).astype(np.float32)
    assert _float_case(tmp_path, anchors, boxes, scores, dict(OPTS, nms_score_threshold=0.6)) \
        == 0


@pytest.mark.parametrize("seed", [0, 1])
def test_uint8_against_litert(tmp_path: Path, seed: int) -> None:
    """Quantised SSD outputs (Coral's models): LiteRT dequantises encodings, scores and
    anchors; TFLM's kernel refuses them."""
    rng = np.random.default_rng(seed)
    n = 96
    anchors = _anchors(n, rng)
    q = {"boxes": (0.0323, 117), "scores": (1 / 256, 0), "anchors": (0.00386, 0)}
    model = _model(anchors, 4, dict(OPTS, max_detections=12), q=q, dtype=np.uint8)
    boxes = rng.integers(60, 180, (1, n, 4), dtype=np.uint8)
    scores = rng.integers(0, 256, (1, n, 4), dtype=np.uint8)
    scores[0, :8, 1] = 250  # ties
    ref, _ = interpret(model, [boxes, scores])
    ours = _run(_compile(tmp_path, model), [boxes, scores], tmp_path / "fw" if seed == 0 else None)
    assert _same(ours, ref, 12) > 0


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("per_class", [2, 100])
def test_float_regular_random(tmp_path: Path, seed: int, per_class: int) -> None:
    """use_regular_nms: each class's suppression (at most detections_per_class), the best
    max_detections of all kept."""
    rng = np.random.default_rng(seed)
    n, c = 48, 4
    anchors = _anchors(n, rng)
    boxes = rng.normal(0, 2, (1, n, 4)).astype(np.float32)
    scores = rng.uniform(0, 1, (1, n, c + 1)).astype(np.float32)
    opts = dict(OPTS, use_regular_nms=True, num_classes=c, max_detections=7,
                detections_per_class=per_class, nms_score_threshold=0.5 + 0.1 * seed)
    assert _float_case(tmp_path, anchors, boxes, scores, opts, boards=seed == 0) > 0


def test_float_regular_ties_and_few(tmp_path: Path) -> None:
    """Equal scores across classes and anchors (the earlier class's and the lower anchor's
    first), IoU exactly at the threshold, and fewer detections than max_detections."""
    anchors = np.array([[0.5, 0.5, 0.5, 0.5], [0.5, 0.375, 0.5, 0.25],
                        [0.5, 0.5625, 0.5, 0.5], [0.125, 0.125, 0.125, 0.125]], np.float32)
    boxes = np.zeros((1, 4, 4), np.float32)
    scores = np.array([[0.0, 0.7, 0.7, 0.1], [0.0, 0.7, 0.2, 0.7], [0.0, 0.9, 0.7, 0.0],
                       [0.0, 0.7, 0.0, 0.7]], np.float32)[None]
    opts = dict(OPTS, use_regular_nms=True, max_detections=10, detections_per_class=3,
                nms_score_threshold=0.5)
    got = _float_case(tmp_path, anchors, boxes, scores, opts)
    assert 0 < got < 10


@pytest.mark.parametrize("change, message", [
    (dict(max_classes_per_detection=2), "max_classes_per_detection=2"),
    (dict(use_regular_nms=True, detections_per_class=0), "detections_per_class=0"),
    (dict(nms_iou_threshold=0.0), "nms_iou_threshold"),
    (dict(num_classes="3"), "'num_classes' is missing or not an integer"),
    (dict(y_scale=None), "'y_scale' is missing"),
])
def test_refusals(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    opts = {k: v for k, v in dict(OPTS, **change).items() if v is not None}
    model = _model(_anchors(8, np.random.default_rng(0)), 3, opts)
    with pytest.raises(AotcError, match=message) as e:
        _compile(tmp_path, model)
    assert NAME in str(e.value) and "\n" not in str(e.value)


def test_int8_refused(tmp_path: Path) -> None:
    q = {"boxes": (0.03, 0), "scores": (1 / 256, -128), "anchors": (0.004, 0)}
    anchors = _anchors(8, np.random.default_rng(0))
    model = _model(np.clip(anchors, 0, 0.5), 3, OPTS, q=q, dtype=np.int8)
    with pytest.raises(AotcError, match="int8 is not supported"):
        _compile(tmp_path, model)
