"""Spatial sampling: GridSample (run-time grid), AffineGrid, CenterCropPad and Col2Im.

GridSample computes the taps (indices and weights, padding resolved) once per output position
and reuses them for every channel. AffineGrid's base grid, CenterCropPad's crop/pad offsets and
Col2Im's scatter pattern are fixed at compile time."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import (
    INDEX,
    Bin,
    Cast,
    Const,
    Expr,
    bmax,
    bmin,
    call,
    cmp,
    land,
    lor,
    select,
)
from aotc.ops import OpDef, register
from aotc.ops.common import ANY, ints

CUBIC_A = -0.75


# ------------------------------------------------------------------------------------ GridSample
def _cubic_weights(t: Any) -> list[Any]:
    """Keys' cubic convolution weights for taps -1, 0, 1, 2 at fraction t (expr or array)."""
    a = CUBIC_A
    return [((t + 1) * a - 5 * a) * (t + 1) * (t + 1) + (t + 1) * (8 * a) - 4 * a,
            ((t * (a + 2)) - (a + 3)) * t * t + 1,
            (((1 - t) * (a + 2)) - (a + 3)) * (1 - t) * (1 - t) + 1,
            ((2 - t) * a - 5 * a) * (2 - t) * (2 - t) + (2 - t) * (8 * a) - 4 * a]


def _borders(n: int, align: bool) -> tuple[float, float]:
    return (0.0, n - 1.0) if align else (-0.5, n - 0.5)


def _np_reflect(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    rng = hi - lo
    if rng == 0:
        return np.full_like(v, lo)
    below, above = v < lo, v > hi
    dx = np.where(below, lo - v, v - hi)
    k = np.floor(dx / rng)
    r = dx - k * rng
    odd = (k % 2) == 1
    res = np.where((below & ~odd) | (above & odd), lo + r, hi - r)
    return np.where(below | above, res, v)


def _np_taps(x: np.ndarray, n: int, mode: str, pad: str, align: bool
             ) -> list[tuple[np.ndarray, np.ndarray]]:
    """numpy version of the kernel's tap computation: (index, weight) per tap."""
    lo, hi = _borders(n, align)
    if mode == "nearest":
        x = np.rint(x)
    out = (x < lo) | (x > hi)
    if pad == "border" and mode != "cubic":
        # Cubic clamps each tap instead (onnxruntime and PyTorch; the onnx reference clamps
        # the coordinate too, which no node test covers).
        x = np.where(out, np.clip(x, 0, n - 1), x)
    elif pad == "reflection":
        x = _np_reflect(x, lo, hi)
    if mode == "nearest":
        taps = [(np.trunc(x), np.ones_like(x))]
    else:
        x0 = np.floor(x)
        t = x - x0
        if mode == "linear":
            taps = [(x0, 1 - t), (x0 + 1, t)]
        else:
            taps = [(x0 + k - 1, w) for k, w in enumerate(_cubic_weights(t))]
    res = []
    for i, w in taps:
        if pad == "zeros":
            w = np.where((i >= 0) & (i < n), w, 0.0)
        elif pad == "reflection":
            i = np.trunc(_np_reflect(i, lo, hi))
        res.append((np.clip(i, 0, n - 1).astype(np.int64), w))
    return res


def grid_sample_ref(X: np.ndarray, grid: np.ndarray, mode: str, pad: str, align: bool
                    ) -> np.ndarray:
    N, C, *sp = X.shape
    D = len(sp)
    out_sp = grid.shape[1:-1]
    g = grid.reshape(N, -1, D).astype(np.float64)
    Y = np.zeros((N, C, g.shape[1]))
    per_dim = []
    for d, n in enumerate(sp):
        v = g[:, :, D - 1 - d]
        x = (v + 1) / 2 * (n - 1) if align else ((v + 1) * n - 1) / 2
        per_dim.append(_np_taps(x, n, mode, pad, align))
    strides = [int(np.prod(sp[d + 1:])) for d in range(D)]
    flatX = X.reshape(N, C, -1).astype(np.float64)
    for combo in itertools.product(*per_dim):
        off = sum(i * s for (i, _), s in zip(combo, strides))
        w = np.prod([w for _, w in combo], axis=0)
        Y += w[:, None, :] * np.take_along_axis(flatX, off[:, None, :].repeat(C, 1), axis=2)
    return Y.reshape(N, C, *out_sp).astype(X.dtype)


class _GridSample(OpDef):
    name = "GridSample"
    modes: dict[str, str] = {"linear": "linear", "nearest": "nearest", "cubic": "cubic"}
    max_dims: int = 3
    onnx_tests = ("test_gridsample*",)
    defined = ("a NaN grid coordinate becomes tap index 0 (the saturating float -> integer "
               "conversion), so it reads inside X: linear and cubic give NaN, nearest reads "
               "index 0 along that dimension (onnxruntime: whatever its index arithmetic "
               "gives)")

    def _mode(self, node: Node) -> str:
        m = node.attrs["mode"]
        if m not in self.modes:
            raise AotcError(f"mode={m!r} is not valid at this opset; supported: "
                            f"{', '.join(self.modes)}", node.name, node.op)
        return self.modes[m]

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x, g = ins[0], ins[1]
        assert x is not None and g is not None
        D = len(x.type.shape) - 2
        if not 1 <= D <= self.max_dims:
            raise AotcError(f"X of rank {D + 2} is not supported (2..{self.max_dims} spatial "
                            f"dims)", node.name, node.op)
        gs = g.type.shape
        if len(gs) != D + 2 or gs[0] != x.type.shape[0] or gs[-1] != D:
            raise AotcError(f"grid shape {list(gs)} does not match X shape "
                            f"{list(x.type.shape)}", node.name, node.op)
        self._mode(node)
        if node.attrs["padding_mode"] not in ("zeros", "border", "reflection"):
            raise AotcError(f"padding_mode={node.attrs['padding_mode']!r} is not valid",
                            node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x, g = ins[0], ins[1]
        assert x is not None and g is not None
        return [TensorType((*x.type.shape[:2], *g.type.shape[1:-1]), x.type.dtype)]

    def run_reference(self, node: Node, args: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        X, grid = args[0], args[1]
        assert X is not None and grid is not None
        return [grid_sample_ref(X, grid, self._mode(node), node.attrs["padding_mode"],
                                bool(node.attrs["align_corners"]))]

    def reference(self, X: np.ndarray, grid: np.ndarray, *, align_corners: int = 0,
                  mode: str = "linear", padding_mode: str = "zeros") -> np.ndarray:
        return grid_sample_ref(X, grid, mode, padding_mode, bool(align_corners))

    def _reflect(self, kb: Any, v: Expr, lo: float, hi: float) -> Expr:
        dt = v.dtype
        rng = hi - lo
        if rng == 0:
            return Const(lo, dt)
        below = kb.local(cmp("lt", v, lo), "below", cmp("lt", v, lo).dtype)
        above = cmp("gt", v, hi)
        dx = kb.local(select(below, Const(lo, dt) - v, v - hi, dt), "dx", dt)
        k = kb.local(call("floor", dx / rng), "k", dt)
        r = kb.local(dx - k * rng, "r", dt)
        # k is a non-negative whole float: fmod gives its parity without an int overflow.
        odd = cmp("eq", Bin("fmod", k, Const(2.0, dt), dt), 1.0)
        even = cmp("eq", Bin("fmod", k, Const(2.0, dt), dt), 0.0)
        low_side = lor(land(below, even), land(above, odd))
        res = select(low_side, r + lo, Const(hi, dt) - r, dt)
        return kb.local(select(lor(below, above), res, v, dt), "refl", dt)

    def _taps(self, kb: Any, v: Expr, n: int, mode: str, pad: str, align: bool, d: int
              ) -> list[tuple[Expr, Expr | None]]:
        """Per tap of spatial dim d: (input index, weight or None for 1), padding resolved."""
        dt = v.dtype
        lo, hi = _borders(n, align)
        x = (v + 1) * ((n - 1) / 2) if align else ((v + 1) * n - 1) / 2
        if mode == "nearest":
            x = call("rint", x)
        x = kb.local(x, f"u{d}", dt)
        # Cubic + border clamps each tap, not the coordinate (onnxruntime, PyTorch).
        if pad == "border" and mode != "cubic":
            clamped = bmin(bmax(x, 0.0), float(n - 1))
            x = kb.local(select(lor(cmp("lt", x, lo), cmp("gt", x, hi)), clamped, x, dt),
                         f"ub{d}", dt)
        elif pad == "reflection":
            x = self._reflect(kb, x, lo, hi)
        taps: list[tuple[Expr, Expr | None]]
        if mode == "nearest":
            # Clamped before the cast (no overflow): a clamped index is still outside.
            taps = [(Cast(bmin(bmax(x, -1.0), float(n)), INDEX), None)]
        else:
            x0f = kb.local(call("floor", x), f"fl{d}", dt)
            t = kb.local(x - x0f, f"t{d}", dt)
            x0 = kb.local(Cast(bmin(bmax(x0f, -3.0), n + 1.0), INDEX), f"lo{d}")
            if mode == "linear":
                taps = [(x0, 1 - t), (x0 + 1, t)]
            else:
                taps = [(x0 + (k - 1), w) for k, w in enumerate(_cubic_weights(t))]
        out: list[tuple[Expr, Expr | None]] = []
        for k, (i, w) in enumerate(taps):
            if pad == "zeros":
                inside = land(cmp("ge", i, 0), cmp("lt", i, n))
                w = select(inside, Const(1.0, dt) if w is None else w, 0.0, dt)
            elif pad == "reflection" and mode != "nearest":
                i = Cast(self._reflect(kb, Cast(i, dt), lo, hi), INDEX)
            idx = kb.local(bmin(bmax(i, 0), n - 1), f"i{d}_{k}")
            out.append((idx, None if w is None else kb.local(w, f"w{d}_{k}", dt)))
        return out

    def lower(self, node: Node, kb: Any) -> None:
        X, G, Y = kb.inputs[0], kb.inputs[1], kb.outputs[0]
        if Y.numel == 0:
            return
        dt = X.dtype
        N, C, *sp = X.shape
        D, P, S = len(sp), int(np.prod(Y.shape[2:])), int(np.prod(sp))
        mode, pad = self._mode(node), node.attrs["padding_mode"]
        align = bool(node.attrs["align_corners"])
        strides = [int(np.prod(sp[d + 1:])) for d in range(D)]
        with kb.loop(N, "n") as n, kb.loop(P, "p") as p:
            per_dim = []
            for d in range(D):
                v = kb.local(G.flat((n * P + p) * D + (D - 1 - d)), f"g{d}", dt)
                per_dim.append(self._taps(kb, v, sp[d], mode, pad, align, d))
            combos: list[tuple[Expr, Expr | None]] = []
            for k, combo in enumerate(itertools.product(*per_dim)):
                off: Expr = Const(0)
                w: Expr | None = None
                for (i, wi), s in zip(combo, strides):
                    off = off + i * s
                    if wi is not None:
                        w = wi if w is None else w * wi
                cw = None if w is None else kb.local(w, f"cw{k}", dt)
                combos.append((kb.local(off, f"off{k}"), cw))
            with kb.loop(C, "c") as c:
                base = (n * C + c) * S
                value: Expr | None = None
                for off, w in combos:
                    term = X.flat(base + off)
                    term = term if w is None else w * term
                    value = term if value is None else value + term
                assert value is not None
                kb.store_output([], value, flat=(n * C + c) * P + p)


@register
class GridSample16(_GridSample):
    since = 16
    modes = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}
    max_dims = 2

    def reference(self, X: np.ndarray, grid: np.ndarray, *, align_corners: int = 0,
                  mode: str = "bilinear", padding_mode: str = "zeros") -> np.ndarray:
        return grid_sample_ref(X, grid, self.modes.get(mode, mode), padding_mode,
                               bool(align_corners))


@register
class GridSample20(_GridSample):
    since = 20


@register
class GridSample22(_GridSample):
    since = 22


# ------------------------------------------------------------------------------------ AffineGrid
def affine_base_grid(spatial: Sequence[int], align: bool) -> np.ndarray:
    """Homogeneous base points (x, y[, z], 1) per output position, x along the last dim."""
    axes = []
    for n in spatial:
        i = np.arange(n, dtype=np.float64)
        if align:
            axes.append(-1 + i * (2.0 / (n - 1)) if n > 1 else np.full(n, -1.0))
        else:
            axes.append(-1 + (2 * i + 1) / n)
    mesh = np.meshgrid(*axes, indexing="ij")
    cols = [m.reshape(-1) for m in reversed(mesh)]
    return np.stack([*cols, np.ones_like(cols[0])], axis=1)


@register
class AffineGrid(OpDef):
    name = "AffineGrid"
    since = 20
    const_inputs = (1,)
    onnx_tests = ("test_affine_grid_*",)

    def _size(self, node: Node, ins: Sequence[Value | None]) -> list[int]:
        size = ints(ins[1])
        theta = ins[0]
        assert size is not None and theta is not None
        ts = theta.type.shape
        if len(size) not in (4, 5) or min(size) < 1:
            raise AotcError(f"size={size} must be (N, C, H, W) or (N, C, D, H, W)", node.name,
                            node.op)
        D = len(size) - 2
        if tuple(ts) != (size[0], D, D + 1):
            raise AotcError(f"theta shape {list(ts)} does not match size {size} (expected "
                            f"{[size[0], D, D + 1]})", node.name, node.op)
        return size

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        self._size(node, ins)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        size = self._size(node, ins)
        theta = ins[0]
        assert theta is not None
        return [TensorType((size[0], *size[2:], len(size) - 2), theta.type.dtype)]

    def reference(self, theta: np.ndarray, size: np.ndarray, *, align_corners: int = 0
                  ) -> np.ndarray:
        s = [int(v) for v in size]
        base = affine_base_grid(s[2:], bool(align_corners))
        grid = np.einsum("nij,pj->npi", theta.astype(np.float64), base)
        return grid.reshape(s[0], *s[2:], len(s) - 2).astype(theta.dtype)

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        return node.with_(inputs=node.inputs[:1],
                          attrs={**node.attrs, "_size": self._size(node, ins)})

    def lower(self, node: Node, kb: Any) -> None:
        T = kb.inputs[0]
        size = node.attrs["_size"]
        N, D = size[0], len(size) - 2
        base = affine_base_grid(size[2:], bool(node.attrs["align_corners"]))
        P = base.shape[0]
        B = kb.const("base", base.reshape(-1), T.dtype)
        with kb.loop(N, "n") as n, kb.loop(P, "p") as p:
            for i in range(D):
                value: Expr = T.flat(n * (D * (D + 1)) + i * (D + 1) + D)
                for j in range(D):
                    value = value + T.flat(n * (D * (D + 1)) + i * (D + 1) + j) * B.flat(
                        p * (D + 1) + j)
                kb.store_output([], value, flat=(n * P + p) * D + i)


# --------------------------------------------------------------------------------- CenterCropPad
@register
class CenterCropPad(OpDef):
    name = "CenterCropPad"
    since = 18
    dtypes = ANY
    const_inputs = (1,)
    onnx_tests = ("test_center_crop_pad_*",)

    @staticmethod
    def plan(node: Node, shape: Sequence[int], target: Sequence[int] | None,
             axes: Sequence[int] | None) -> list[tuple[int, int, int]]:
        """Per dim: (crop start, pad start, output size)."""
        r = len(shape)
        axes = list(range(r)) if axes is None else [int(a) for a in axes]
        if target is None or len(target) != len(axes):
            raise AotcError(f"shape has {0 if target is None else len(target)} values for "
                            f"{len(axes)} axes", node.name, node.op)
        if any(not -r <= a < r for a in axes) or len({a % r for a in axes}) != len(axes):
            raise AotcError(f"axes={axes} are invalid for rank {r}", node.name, node.op)
        out = [(0, 0, n) for n in shape]
        for a, s in zip(axes, target):
            a, n = a % r, shape[a % r]
            if s < 0:
                raise AotcError(f"shape value {s} must be >= 0", node.name, node.op)
            out[a] = ((n - s) // 2, 0, s) if s < n else (0, (s - n) // 2, s)
        return out

    def _plan(self, node: Node, ins: Sequence[Value | None]) -> list[tuple[int, int, int]]:
        x = ins[0]
        assert x is not None
        return self.plan(node, x.type.shape, ints(ins[1]), node.attrs.get("axes"))

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        self._plan(node, ins)

    def reference(self, input_data: np.ndarray, shape: np.ndarray, *,
                  axes: Sequence[int] | None = None) -> np.ndarray:
        node = Node("CenterCropPad", "reference", (), ())
        plan = self.plan(node, input_data.shape, ints(shape), axes)
        res = np.zeros([m for _, _, m in plan], input_data.dtype)
        src = tuple(slice(c, c + min(n, m)) for (c, _, m), n in zip(plan, input_data.shape))
        dst = tuple(slice(p, p + min(n, m)) for (_, p, m), n in zip(plan, input_data.shape))
        res[dst] = input_data[src]
        return res

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        return node.with_(inputs=node.inputs[:1],
                          attrs={**node.attrs, "_plan": self._plan(node, ins)})

    def lower(self, node: Node, kb: Any) -> None:
        X, Y = kb.inputs[0], kb.outputs[0]
        if Y.numel == 0:
            return
        with kb.loops(Y.shape, [f"o{d}" for d in range(len(Y.shape))]) as o:
            src: list[Expr] = []
            inside: list[Expr] = []
            for d, ((c, p, m), n) in enumerate(zip(node.attrs["_plan"], X.shape)):
                src.append(o[d] + (c - p))
                if m > n:
                    inside += [cmp("ge", o[d], p), cmp("lt", o[d], p + n)]
            value = X[src]
            if inside:
                value = select(land(*inside), value, 0, X.dtype)
            kb.store_output(o, value)


# ---------------------------------------------------------------------------------------- Col2Im
@register
class Col2Im(OpDef):
    name = "Col2Im"
    since = 18
    const_inputs = (1, 2)
    onnx_tests = ("test_col2im*",)

    def geometry(self, node: Node, xshape: Sequence[int], image: list[int] | None,
                 block: list[int] | None) -> dict[str, list[int]]:
        def err(msg: str) -> AotcError:
            return AotcError(msg, node.name, node.op)

        if image is None or block is None or len(image) != len(block) or not image:
            raise err("image_shape and block_shape must have the same, non-zero length")
        nd = len(image)
        dil = [int(v) for v in node.attrs.get("dilations") or [1] * nd]
        st = [int(v) for v in node.attrs.get("strides") or [1] * nd]
        pads = [int(v) for v in node.attrs.get("pads") or [0] * (2 * nd)]
        if len(dil) != nd or len(st) != nd or len(pads) != 2 * nd:
            raise err(f"dilations/strides/pads do not match {nd} spatial dims")
        if len(xshape) != 3:
            raise err(f"input must be (N, C*prod(block_shape), L), got {list(xshape)}")
        kprod = int(np.prod(block))
        if min(block) < 1 or xshape[1] % kprod:
            raise err(f"input dim 1 ({xshape[1]}) is not a multiple of prod(block_shape) "
                      f"({kprod})")
        cols = [(image[i] + pads[i] + pads[i + nd] - dil[i] * (block[i] - 1) - 1) // st[i] + 1
                for i in range(nd)]
        if min(cols) < 1 or int(np.prod(cols)) != xshape[2]:
            raise err(f"input dim 2 ({xshape[2]}) does not match the {cols} sliding blocks")
        return {"image": image, "block": block, "dil": dil, "st": st, "pads": pads,
                "cols": cols}

    def _geo(self, node: Node, ins: Sequence[Value | None]) -> dict[str, list[int]]:
        x = ins[0]
        assert x is not None
        return self.geometry(node, x.type.shape, ints(ins[1]), ints(ins[2]))

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        self._geo(node, ins)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        g = self._geo(node, ins)
        c = x.type.shape[1] // int(np.prod(g["block"]))
        return [TensorType((x.type.shape[0], c, *g["image"]), x.type.dtype)]

    @staticmethod
    def contributions(g: dict[str, list[int]], d: int) -> list[list[tuple[int, int]]]:
        """Per image position along dim d: the (kernel index, block index) pairs that land
        there."""
        out: list[list[tuple[int, int]]] = [[] for _ in range(g["image"][d])]
        for k in range(g["block"][d]):
            for b in range(g["cols"][d]):
                y = b * g["st"][d] - g["pads"][d] + k * g["dil"][d]
                if 0 <= y < g["image"][d]:
                    out[y].append((k, b))
        return out

    def reference(self, input: np.ndarray, image_shape: np.ndarray,  # noqa: A002
                  block_shape: np.ndarray, *, dilations: Sequence[int] | None = None,
                  pads: Sequence[int] | None = None, strides: Sequence[int] | None = None
                  ) -> np.ndarray:
        node = Node("Col2Im", "reference", (), (),
                    {"dilations": dilations, "pads": pads, "strides": strides})
        g = self.geometry(node, input.shape, ints(image_shape), ints(block_shape))
        N, CK, _ = input.shape
        block, cols = g["block"], g["cols"]
        x = input.reshape(N, CK // int(np.prod(block)), *block, *cols)
        out = np.zeros((N, x.shape[1], *g["image"]), np.float64)
        per = [self.contributions(g, d) for d in range(len(block))]
        for pos in np.ndindex(*g["image"]):
            for combo in itertools.product(*[per[d][p] for d, p in enumerate(pos)]):
                ks = tuple(k for k, _ in combo)
                bs = tuple(b for _, b in combo)
                out[(slice(None), slice(None), *pos)] += x[(slice(None), slice(None), *ks, *bs)]
        return out.astype(input.dtype)

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        return node.with_(inputs=node.inputs[:1],
                          attrs={**node.attrs, "_geo": self._geo(node, ins)})

    def lower(self, node: Node, kb: Any) -> None:
        X, Y = kb.inputs[0], kb.outputs[0]
        if Y.numel == 0:
            return
        g = node.attrs["_geo"]
        nd = len(g["image"])
        N, C = Y.shape[:2]
        kstr = [int(np.prod(g["block"][d + 1:])) for d in range(nd)]
        bstr = [int(np.prod(g["cols"][d + 1:])) for d in range(nd)]
        L, KP = int(np.prod(g["cols"])), int(np.prod(g["block"]))
        # Per dim a CSR table: image position y owns entries beg[y] .. beg[y+1] - 1, each the
        # kernel-row offset and block-column offset of one contribution.
        tabs = []
        for d in range(nd):
            per = self.contributions(g, d)
            beg = np.cumsum([0] + [len(c) for c in per]).astype(np.int32)
            koff = np.array([k * kstr[d] for c in per for k, _ in c] or [0], np.int32)
            boff = np.array([b * bstr[d] for c in per for _, b in c] or [0], np.int32)
            tabs.append((kb.const(f"beg{d}", beg, INDEX), kb.const(f"koff{d}", koff, INDEX),
                         kb.const(f"boff{d}", boff, INDEX)))
        with kb.loops(Y.shape, ["n", "c"] + [f"o{d}" for d in range(nd)]) as (n, c, *o):
            acc = kb.local(0.0, "acc", X.dtype)
            kofs: Expr = Const(0)
            bofs: Expr = Const(0)
            with ExitStack() as stack:
                for d, (beg, koff, boff) in enumerate(tabs):
                    e = stack.enter_context(kb.loop(beg.flat(o[d] + 1), f"e{d}",
                                                    start=beg.flat(o[d])))
                    kofs = kofs + koff.flat(e)
                    bofs = bofs + boff.flat(e)
                kb.assign(acc, acc + X.flat((n * (C * KP) + c * KP + kofs) * L + bofs))
            kb.store_output([n, c, *o], acc)
