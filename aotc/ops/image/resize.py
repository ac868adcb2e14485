"""Resize and Upsample: every output element is a weighted sum of input elements whose positions
and weights depend only on the output index and compile-time constants (scales/sizes/roi).

Resize is separable: each resized axis is a 1-D interpolation, an (out x in) matrix. The
matrices are built at compile time in float64 (``axis_plan``); the kernel then only gathers taps
from per-axis index/weight tables and multiply-adds, and nearest mode is a pure gather."""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import INDEX, Const, Expr, cmp, land, select
from aotc.ops import OpDef, register

NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
CT_MODES_11 = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_crop_and_resize", "tf_half_pixel_for_nn")
CT_MODES_13 = CT_MODES_11[:-1]
CT_MODES_19 = (*CT_MODES_13, "half_pixel_symmetric")
RESIZE_DTYPES = ("float32", "int8", "uint8", "int16", "int32")
# The compile-time (out x in) matrix of one axis, in entries (float64): 128 MiB.
MAX_PLAN_ENTRIES = 1 << 24


@dataclass(frozen=True)
class AxisPlan:
    """One resized axis: dense interpolation matrix and the rows that extrapolate."""

    matrix: np.ndarray  # (out, in) float64
    extrapolated: np.ndarray | None  # (out,) bool, tf_crop_and_resize only


@dataclass(frozen=True)
class ResizePlan:
    out_shape: tuple[int, ...]
    axes: dict[int, AxisPlan]  # only the axes that are not the identity
    extrapolation_value: float


def _coeffs(mode: str, ratio: np.ndarray, scale: float, attrs: dict[str, Any]) -> np.ndarray:
    """Per output position (rows) the tap weights (columns), ratio in (0, 1]."""
    a = float(attrs["cubic_coeff_a"])
    anti = bool(attrs.get("antialias", 0)) and scale < 1.0
    if mode == "nearest":
        nm = attrs["nearest_mode"]
        half = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
                "floor": np.zeros_like(ratio, bool), "ceil": np.ones_like(ratio, bool)}[nm]
        right = np.where(ratio == 1.0, True, half)
        return np.stack([~right, right], axis=1).astype(np.float64)
    if mode == "linear" and not anti:
        return np.stack([1 - ratio, ratio], axis=1)
    if mode == "linear":
        start = int(np.floor(-1 / scale) + 1)
        args = (np.arange(start, start + 2 - 2 * start)[None, :] - ratio[:, None]) * scale
        c = np.clip(1 - np.abs(args), 0, 1)
        return c / c.sum(axis=1, keepdims=True)
    if not anti:
        r = ratio
        return np.stack([((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                         ((a + 2) * r - (a + 3)) * r * r + 1,
                         ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
                         ((a * (2 - r) - 5 * a) * (2 - r) + 8 * a) * (2 - r) - 4 * a], axis=1)
    start = int(np.floor(-2 / scale) + 1)
    x = np.abs(scale * (np.arange(start, 2 - start)[None, :] - ratio[:, None]))
    c = np.where(x <= 1, (a + 2) * x**3 - (a + 3) * x**2 + 1,
                 np.where(x < 2, a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a, 0.0))
    return c / c.sum(axis=1, keepdims=True)


def axis_plan(n_in: int, n_out: int, scale: float, roi: tuple[float, float] | None,
              attrs: dict[str, Any]) -> AxisPlan:
    """The 1-D interpolation of one axis as a dense (out x in) matrix."""
    ctm, mode = attrs["coordinate_transformation_mode"], attrs["mode"]
    y = np.arange(n_out, dtype=np.float64)
    width = scale * n_in  # the real-valued output length
    extrap = None
    if ctm == "align_corners":
        x = np.zeros(n_out) if width == 1 else y * (n_in - 1) / (width - 1)
    elif ctm == "asymmetric":
        x = y / scale
    elif ctm == "tf_crop_and_resize":
        lo, hi = roi if roi is not None else (0.0, 1.0)
        if width == 1:
            x = np.full(n_out, (hi - lo) * (n_in - 1) / 2)
        else:
            x = y * (hi - lo) * (n_in - 1) / (width - 1)
        x = x + lo * (n_in - 1)
        extrap = (x < 0) | (x > n_in - 1)
    elif ctm == "pytorch_half_pixel":
        # A length-1 output samples 0, as the spec and onnxruntime say (the onnx reference
        # uses -0.5; the two agree for nearest and linear).
        x = np.zeros(n_out) if n_out == 1 else (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif ctm == "tf_half_pixel_for_nn":
        x = (y + 0.5) / scale
    else:  # half_pixel_symmetric
        x = n_in / 2 * (1 - n_out / width) + (y + 0.5) / scale - 0.5
    xi = np.floor(x)
    ratio = np.where(x == xi, 1.0, x - xi)  # prefer the left pixel: ratio in (0, 1]
    coeffs = _coeffs(mode, ratio, scale, attrs) if n_out else np.zeros((0, 2))
    n = coeffs.shape[1]
    pad = (n + 1) // 2
    xp = x + pad
    p = np.floor(xp)
    frac = xp - p
    if n % 2 == 0:
        off = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        off = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    idx = (p + off).astype(np.int64)[:, None] + np.arange(n)[None, :] - pad
    if attrs.get("exclude_outside", 0):
        coeffs = np.where((idx < 0) | (idx >= n_in), 0.0, coeffs)
        total = coeffs.sum(axis=1, keepdims=True)
        coeffs = coeffs / np.where(total == 0, 1.0, total)
    mat = np.zeros((n_out, n_in))
    rows = np.repeat(np.arange(n_out), n)
    np.add.at(mat, (rows, np.clip(idx, 0, n_in - 1).reshape(-1)), coeffs.reshape(-1))
    return AxisPlan(mat, extrap if extrap is not None and extrap.any() else None)


def _floats(a: np.ndarray | None) -> list[float] | None:
    if a is None or np.asarray(a).size == 0:
        return None
    return [float(v) for v in np.asarray(a).reshape(-1)]


def resize_plan(node: Node, shape: Sequence[int], roi: np.ndarray | None,
                scales: np.ndarray | None, sizes: np.ndarray | None) -> ResizePlan:
    """Output shape and per-axis matrices, the ONNX (and onnx reference) way. AotcError on
    invalid or unsupported parameters."""
    attrs = dict(node.attrs)

    def err(msg: str) -> AotcError:
        return AotcError(msg, node.name, node.op)

    r = len(shape)
    axes = attrs.get("axes")
    axes = list(range(r)) if axes is None else [int(a) + r if int(a) < 0 else int(a)
                                                  for a in axes]
    if len(set(axes)) != len(axes) or any(not 0 <= a < r for a in axes):
        raise err(f"axes={attrs.get('axes')} are invalid for rank {r}")
    sc, sz, rois = _floats(scales), _floats(sizes), _floats(roi)
    if (sc is None) == (sz is None):
        raise err("exactly one of scales and sizes must be given")
    given = sc if sc is not None else sz
    assert given is not None
    if len(given) != len(axes):
        raise err(f"{'scales' if sc is not None else 'sizes'} has {len(given)} values for "
                  f"{len(axes)} axes")
    scale = [1.0] * r
    out = list(shape)
    if sc is not None:
        if not all(math.isfinite(v) and v > 0 for v in sc):
            raise err(f"scales={sc} must be finite and > 0")
        for a, s in zip(axes, sc):
            scale[a], out[a] = s, int(s * shape[a])
    else:
        assert sz is not None
        if min(sz) < 0 or any(shape[a] == 0 for a in axes):
            raise err(f"sizes={[int(v) for v in sz]} are invalid for input shape {list(shape)}")
        policy = attrs.get("keep_aspect_ratio_policy", "stretch")
        ratios = [sz[k] / shape[a] for k, a in enumerate(axes)]
        if policy == "stretch":
            for a, s, n in zip(axes, ratios, sz):
                scale[a], out[a] = s, int(n)
        elif policy in ("not_larger", "not_smaller"):
            s = min(ratios) if policy == "not_larger" else max(ratios)
            for a in axes:
                scale[a], out[a] = s, int(s * shape[a] + 0.5)
        else:
            raise err(f"keep_aspect_ratio_policy={policy!r} is not valid")
    roi_of: dict[int, tuple[float, float]] = {}
    if attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        if rois is None:
            raise err("coordinate_transformation_mode='tf_crop_and_resize' needs roi")
        if len(rois) not in (2 * len(axes), 2 * r):
            raise err(f"roi has {len(rois)} values; expected {2 * len(axes)}")
        if len(rois) == 2 * len(axes):
            k = len(axes)
            roi_of = {a: (rois[i], rois[k + i]) for i, a in enumerate(axes)}
        else:
            roi_of = {a: (rois[a], rois[r + a]) for a in range(r)}
    plans: dict[int, AxisPlan] = {}
    for a in range(r):
        lo, hi = roi_of.get(a, (0.0, 1.0))
        if (math.isclose(scale[a], 1.0) and out[a] == shape[a]
                and math.isclose(lo, 0.0) and math.isclose(hi, 1.0)) or out[a] == 0:
            continue
        if shape[a] == 0:
            raise err(f"cannot resize the empty axis {a}")
        if shape[a] * out[a] > MAX_PLAN_ENTRIES:
            raise err(f"axis {a}: resizing {shape[a]} to {out[a]} needs a {out[a]}x{shape[a]} "
                      f"interpolation table at compile time; aotc supports up to "
                      f"{MAX_PLAN_ENTRIES} entries per axis")
        plans[a] = axis_plan(shape[a], out[a], scale[a], roi_of.get(a), attrs)
    return ResizePlan(tuple(out), plans, float(attrs.get("extrapolation_value", 0.0)))


def apply_plan(x: np.ndarray, plan: ResizePlan) -> np.ndarray:
    """numpy semantics of a plan (constant folding)."""
    res = x.astype(np.float64)
    if 0 in plan.out_shape:
        return np.zeros(plan.out_shape, x.dtype)
    mask = np.zeros(plan.out_shape, bool)
    for a, p in plan.axes.items():
        res = np.moveaxis(np.tensordot(p.matrix, res, axes=([1], [a])), 0, a)
    for a, p in plan.axes.items():
        if p.extrapolated is not None:
            mask |= p.extrapolated.reshape([-1 if d == a else 1 for d in range(x.ndim)])
    res = np.where(mask, plan.extrapolation_value, res)
    if x.dtype.kind != "f":
        info = np.iinfo(x.dtype)
        res = np.clip(np.rint(res), info.min, info.max)
    return res.astype(x.dtype)


def lower_plan(kb: Any, plan: ResizePlan) -> None:
    """Loops over the output; per resized axis either one gathered index (nearest: a table
    read) or a short loop over taps with weights from flash."""
    X, Y = kb.inputs[0], kb.outputs[0]
    if Y.numel == 0:
        return
    dt = X.dtype
    tables: dict[int, tuple[Any, Any, int]] = {}  # axis -> (index table, weight table, taps)
    masks = {}
    for a, p in plan.axes.items():
        m = p.matrix
        taps = max(1, int((m != 0).sum(axis=1).max()))
        idx = np.zeros((m.shape[0], taps), np.int32)
        w = np.zeros((m.shape[0], taps), np.float64)
        for o in range(m.shape[0]):
            nz = np.nonzero(m[o])[0]
            idx[o, :] = nz[0] if nz.size else 0
            idx[o, :nz.size], w[o, :nz.size] = nz, m[o, nz]
        gather = taps == 1 and bool(np.all(w == 1.0))
        if not gather and not dt.is_float:
            raise AotcError(f"{dt.name} input supports only nearest resizing", kb.name, "Resize")
        tables[a] = (kb.const(f"idx{a}", idx.reshape(-1), INDEX),
                     None if gather else kb.const(f"w{a}", w.reshape(-1), dt), taps)
        if p.extrapolated is not None:
            masks[a] = kb.const(f"in{a}", (~p.extrapolated).astype(np.int32), INDEX)
    with ExitStack() as stack:
        o: list[Expr] = []
        pos: dict[int, Expr] = {}
        for d, n in enumerate(Y.shape):
            o.append(Const(0) if n == 1 else stack.enter_context(kb.loop(n, f"o{d}")))
            if d in tables and tables[d][1] is None:
                pos[d] = kb.local(tables[d][0].flat(o[d]), f"p{d}")
        weighted = [a for a in tables if tables[a][1] is not None]
        src = [pos.get(d, o[d]) for d in range(len(Y.shape))]
        if not weighted:
            value: Expr = X[src]
        else:
            acc = kb.local(0.0, "acc", dt)
            with ExitStack() as taps_stack:
                w: Expr | None = None
                for a in weighted:
                    itab, wtab, k = tables[a]
                    t = taps_stack.enter_context(kb.loop(k, f"t{a}", unroll=k <= 4))
                    flat = o[a] * k + t
                    src[a] = itab.flat(flat)
                    w = wtab.flat(flat) if w is None else w * wtab.flat(flat)
                assert w is not None
                kb.assign(acc, acc + w * X[src])
            value = acc
        if masks:
            inside = land(*[cmp("ne", m.flat(o[a]), 0) for a, m in masks.items()])
            value = select(inside, value, plan.extrapolation_value, dt)
        kb.store_output(o, value)


class _Resize(OpDef):
    """Resize-11/13/18/19: inputs X, roi, scales, sizes (all but X compile-time constants)."""

    name = "Resize"
    dtypes = RESIZE_DTYPES
    const_inputs = (1, 2, 3)
    ct_modes: tuple[str, ...] = CT_MODES_13
    onnx_tests = ("test_resize_*",)

    def _consts(self, ins: Sequence[Value | None]) -> list[np.ndarray | None]:
        return [ins[k].const if k < len(ins) and ins[k] is not None else None  # type: ignore
                for k in (1, 2, 3)]

    def plan(self, node: Node, ins: Sequence[Value | None]) -> ResizePlan:
        x = ins[0]
        assert x is not None
        return resize_plan(node, x.type.shape, *self._consts(ins))

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        at = node.attrs
        if at["mode"] not in ("nearest", "linear", "cubic"):
            raise AotcError(f"mode={at['mode']!r} is not valid", node.name, node.op)
        if at["coordinate_transformation_mode"] not in self.ct_modes:
            raise AotcError(f"coordinate_transformation_mode="
                            f"{at['coordinate_transformation_mode']!r} is not supported at this "
                            f"opset; supported: {', '.join(self.ct_modes)}", node.name, node.op)
        if at["mode"] == "nearest" and at["nearest_mode"] not in NEAREST_MODES:
            raise AotcError(f"nearest_mode={at['nearest_mode']!r} is not valid", node.name,
                            node.op)
        x = ins[0]
        assert x is not None
        if at["mode"] != "nearest" and not x.type.dtype.is_float:
            raise AotcError(f"mode={at['mode']!r} on {x.type.dtype.name} input is not "
                            f"supported (only nearest)", node.name, node.op)
        self.plan(node, ins)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        return [TensorType(self.plan(node, ins).out_shape, x.type.dtype)]

    def run_reference(self, node: Node, args: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        x = args[0]
        assert x is not None
        consts = [args[k] if k < len(args) else None for k in (1, 2, 3)]
        return [apply_plan(x, resize_plan(node, x.shape, *consts))]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        return node.with_(inputs=node.inputs[:1],
                          attrs={**node.attrs, "_plan": self.plan(node, ins)})

    def lower(self, node: Node, kb: Any) -> None:
        lower_plan(kb, node.attrs["_plan"])


def _ref(node_attrs: dict[str, Any], x: np.ndarray, roi: Any, scales: Any, sizes: Any
         ) -> np.ndarray:
    node = Node("Resize", "reference", (), (), node_attrs)
    return apply_plan(x, resize_plan(node, x.shape, roi, scales, sizes))


@register
class Resize11(_Resize):
    since = 11
    ct_modes = CT_MODES_11

    def reference(self, X: np.ndarray, roi: np.ndarray | None = None,
                  scales: np.ndarray | None = None, sizes: np.ndarray | None = None, *,
                  coordinate_transformation_mode: str = "half_pixel",
                  cubic_coeff_a: float = -0.75, exclude_outside: int = 0,
                  extrapolation_value: float = 0.0, mode: str = "nearest",
                  nearest_mode: str = "round_prefer_floor") -> np.ndarray:
        return _ref(dict(locals()), X, roi, scales, sizes)


@register
class Resize13(_Resize):
    since = 13

    def reference(self, X: np.ndarray, roi: np.ndarray | None = None,
                  scales: np.ndarray | None = None, sizes: np.ndarray | None = None, *,
                  coordinate_transformation_mode: str = "half_pixel",
                  cubic_coeff_a: float = -0.75, exclude_outside: int = 0,
                  extrapolation_value: float = 0.0, mode: str = "nearest",
                  nearest_mode: str = "round_prefer_floor") -> np.ndarray:
        return _ref(dict(locals()), X, roi, scales, sizes)


@register
class Resize18(_Resize):
    since = 18

    def reference(self, X: np.ndarray, roi: np.ndarray | None = None,
                  scales: np.ndarray | None = None, sizes: np.ndarray | None = None, *,
                  antialias: int = 0, axes: Sequence[int] | None = None,
                  coordinate_transformation_mode: str = "half_pixel",
                  cubic_coeff_a: float = -0.75, exclude_outside: int = 0,
                  extrapolation_value: float = 0.0, keep_aspect_ratio_policy: str = "stretch",
                  mode: str = "nearest", nearest_mode: str = "round_prefer_floor"
                  ) -> np.ndarray:
        return _ref(dict(locals()), X, roi, scales, sizes)


@register
class Resize19(Resize18):
    since = 19
    ct_modes = CT_MODES_19


# ------------------------------------------------------------------------------------ Upsample
def _upsample_attrs(mode: str) -> dict[str, Any]:
    return {"mode": mode, "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor", "cubic_coeff_a": -0.75}


class _Upsample(OpDef):
    """Upsample (opset 7 scales attribute, 9 scales input; deprecated at 10): Resize with
    asymmetric coordinates and floor rounding for nearest."""

    name = "Upsample"
    dtypes = RESIZE_DTYPES
    onnx_tests = ("test_upsample_*",)

    def _scales(self, node: Node, ins: Sequence[Value | None]) -> np.ndarray | None:
        return node.attrs.get("scales")

    def plan(self, node: Node, shape: Sequence[int], scales: Any) -> ResizePlan:
        mode = node.attrs.get("mode", "nearest")
        if mode not in ("nearest", "linear"):
            raise AotcError(f"mode={mode!r} is not supported (nearest, linear)", node.name,
                            node.op)
        fake = node.with_(attrs=_upsample_attrs(mode))
        if scales is None:
            raise AotcError("scales are missing", node.name, node.op)
        return resize_plan(fake, shape, None, np.asarray(scales, np.float64), None)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x = ins[0]
        assert x is not None
        if node.attrs.get("mode", "nearest") != "nearest" and not x.type.dtype.is_float:
            raise AotcError(f"linear mode on {x.type.dtype.name} is not supported", node.name,
                            node.op)
        self.plan(node, x.type.shape, self._scales(node, ins))

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        return [TensorType(self.plan(node, x.type.shape, self._scales(node, ins)).out_shape,
                           x.type.dtype)]

    def run_reference(self, node: Node, args: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        x = args[0]
        assert x is not None
        scales = args[1] if len(args) > 1 else node.attrs.get("scales")
        return [apply_plan(x, self.plan(node, x.shape, scales))]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        x = ins[0]
        assert x is not None
        plan = self.plan(node, x.type.shape, self._scales(node, ins))
        return node.with_(inputs=node.inputs[:1], attrs={**node.attrs, "_plan": plan})

    def lower(self, node: Node, kb: Any) -> None:
        lower_plan(kb, node.attrs["_plan"])


@register
class Upsample7(_Upsample):
    since = 7

    def reference(self, X: np.ndarray, *, mode: str = "nearest",
                  scales: Sequence[float] | None = None) -> np.ndarray:
        node = Node("Upsample", "reference", (), (), {"mode": mode})
        return apply_plan(X, self.plan(node, X.shape, scales))


@register
class Upsample9(_Upsample):
    since = 9
    const_inputs = (1,)

    def _scales(self, node: Node, ins: Sequence[Value | None]) -> np.ndarray | None:
        v = ins[1] if len(ins) > 1 else None
        return None if v is None else v.const

    def reference(self, X: np.ndarray, scales: np.ndarray | None = None, *,
                  mode: str = "nearest") -> np.ndarray:
        node = Node("Upsample", "reference", (), (), {"mode": mode})
        return apply_plan(X, self.plan(node, X.shape, scales))

