"""Data-movement kernels (Transpose, Concat, Split, Slice, Gather, Pad): each output element is
one input element (or Pad's constant) at an index fixed at compile time, except Gather's
run-time indices (runtime_index, shared with index.py). Constant inputs (split sizes,
starts/ends, indices, pads) are folded into '_' attributes in prepare, so they cost no flash;
dims that move together are merged first so the loop nests stay shallow."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.ir.graph import Node, Value
from aotc.loops.builder import strides_of
from aotc.loops.loop_ir import INDEX, Cast, Const, Expr, Var, bmax, bmin, cmp, land, select
from aotc.ops import OpDef, register
from aotc.ops.common import ANY, ints, merged_perm, nest, strided_copy
from aotc.ops.common import axis as axis_of


def _shape(ins: Sequence[Value | None]) -> tuple[int, ...]:
    assert ins[0] is not None
    return ins[0].type.shape


def _outer_inner(shape: Sequence[int], axis: int) -> tuple[int, int]:
    return (int(np.prod(shape[:axis], dtype=np.int64)),
            int(np.prod(shape[axis + 1:], dtype=np.int64)))


def _copy_blocks(kb: Any, X: Any, out: int, outer: int, width: int, src: tuple[int, int],
                 dst: tuple[int, int]) -> None:
    """y[o, dst_off + j] = x[o, src_off + j] for o < outer, j < width, with (offset, row
    length) pairs src and dst: the contiguous runs Concat and Split move."""
    if outer == 0 or width == 0:
        return
    with nest(kb, [outer, width], "c") as (o, j):
        kb.store_output([], X.flat(o * src[1] + src[0] + j), out=out,
                        flat=o * dst[1] + dst[0] + j)


# ------------------------------------------------------------------------------------ Transpose
@register
class Transpose(OpDef):
    name = "Transpose"
    since = 1
    dtypes = ANY
    onnx_tests = ("test_transpose_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        rank = len(_shape(ins))
        perm = node.attrs.get("perm")
        if perm is not None and sorted(int(p) for p in perm) != list(range(rank)):
            raise AotcError(f"perm={list(perm)} is not a permutation of 0..{rank - 1}",
                            node.name, node.op)

    def reference(self, data: np.ndarray, *, perm: Sequence[int] | None = None) -> np.ndarray:
        return np.transpose(data, None if perm is None else [int(p) for p in perm])

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        perm = ints(node.attrs.get("perm")) or list(range(len(X.shape)))[::-1]
        shape, mperm = merged_perm(X.shape, perm)
        strides = strides_of(shape)
        strided_copy(kb, X, [shape[p] for p in mperm], [strides[p] for p in mperm], 0, "t")


# --------------------------------------------------------------------------------------- Concat
@register
class Concat(OpDef):
    name = "Concat"
    since = 4
    dtypes = ANY
    onnx_tests = ("test_concat_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        types = {v.type.dtype.name for v in ins if v is not None}
        if len(types) > 1:
            raise AotcError(f"inputs mix dtypes {sorted(types)}", node.name, node.op)
        axis_of(node, node.attrs["axis"], len(_shape(ins)))

    def reference(self, *inputs: np.ndarray, axis: int) -> np.ndarray:
        return np.concatenate(inputs, axis=axis)

    def lower(self, node: Node, kb: Any) -> None:
        Y = kb.outputs[0]
        axis = axis_of(node, node.attrs["axis"], len(Y.shape))
        outer, inner = _outer_inner(Y.shape, axis)
        offset = 0
        for X in kb.inputs:
            width = X.shape[axis] * inner
            _copy_blocks(kb, X, 0, outer, width, (0, width), (offset, Y.shape[axis] * inner))
            offset += width


# ---------------------------------------------------------------------------------------- Split
class _Split(OpDef):
    """Split sizes come from the `split` attribute (opset 11), a constant input (13) or
    `num_outputs` (18); without them the axis is split evenly over the node's outputs, whose
    count `reference` cannot see: folding and inference go through `run_reference`."""

    dtypes = ANY
    onnx_tests = ("test_split_equal*", "test_split_variable*", "test_split_zero*",
                  "test_split_*_uneven*")

    def split_arg(self, node: Node, split_input: np.ndarray | None) -> list[int] | None:
        return ints(split_input)

    def sizes(self, node: Node, shape: Sequence[int], split_input: np.ndarray | None
              ) -> list[int]:
        dim = shape[axis_of(node, node.attrs["axis"], len(shape))]
        n = len(node.outputs)
        split = self.split_arg(node, split_input)
        if split is not None:
            if len(split) != n or sum(split) != dim or min(split) < 0:
                raise AotcError(f"split={split} does not split dim {dim} into {n} outputs",
                                node.name, node.op)
            return split
        if node.attrs.get("num_outputs") is not None:
            if node.attrs["num_outputs"] != n:
                raise AotcError(f"num_outputs={node.attrs['num_outputs']} but the node has {n} "
                                f"outputs", node.name, node.op)
            chunk = -(-dim // n)  # ceil: the last chunk is the smaller one
            if dim - chunk * (n - 1) <= 0:
                raise AotcError(f"num_outputs={n} leaves the last output of dim {dim} empty",
                                node.name, node.op)
            return [chunk] * (n - 1) + [dim - chunk * (n - 1)]
        if dim % n:
            raise AotcError(f"dim {dim} does not split evenly into {n} outputs", node.name,
                            node.op)
        return [dim // n] * n

    def _sizes_of(self, node: Node, ins: Sequence[Value | None]) -> list[int]:
        split = ins[1] if len(ins) > 1 else None
        return self.sizes(node, _shape(ins), None if split is None else split.const)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        self._sizes_of(node, ins)

    def run_reference(self, node: Node, args: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        x = args[0]
        assert x is not None
        sizes = self.sizes(node, x.shape, args[1] if len(args) > 1 else None)
        return _split(x, axis_of(node, node.attrs["axis"], x.ndim), sizes)

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        return node.with_(inputs=node.inputs[:1],
                          attrs={**node.attrs, "_sizes": self._sizes_of(node, ins)})

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        axis = axis_of(node, node.attrs["axis"], len(X.shape))
        outer, inner = _outer_inner(X.shape, axis)
        offset = 0
        for k, size in enumerate(node.attrs["_sizes"]):
            width = size * inner
            _copy_blocks(kb, X, k, outer, width, (offset, X.shape[axis] * inner), (0, width))
            offset += width


def _split(x: np.ndarray, axis: int, sizes: Sequence[int] | None) -> list[np.ndarray]:
    if sizes is None:
        raise ValueError("an even split needs the node's output count (see run_reference)")
    return np.split(x, np.cumsum(sizes)[:-1].astype(np.int64), axis=axis)


@register
class Split11(_Split):
    name = "Split"
    since = 11

    def split_arg(self, node: Node, split_input: np.ndarray | None) -> list[int] | None:
        return ints(node.attrs.get("split"))

    def reference(self, input: np.ndarray, *, axis: int = 0,  # noqa: A002
                  split: Sequence[int] | None = None) -> list[np.ndarray]:
        return _split(input, axis, ints(split))


@register
class Split13(_Split):
    name = "Split"
    since = 13
    const_inputs = (1,)

    def reference(self, input: np.ndarray, split: np.ndarray | None = None, *,  # noqa: A002
                  axis: int = 0) -> list[np.ndarray]:
        return _split(input, axis, ints(split))


@register
class Split18(Split13):
    since = 18

    def reference(self, input: np.ndarray, split: np.ndarray | None = None, *,  # noqa: A002
                  axis: int = 0, num_outputs: int | None = None) -> list[np.ndarray]:
        return _split(input, axis, ints(split))


# ---------------------------------------------------------------------------------------- Slice
SliceDim = tuple[int, int, int]  # (start, step, count) in input elements along one dim


def _slice_plan(node: Node, shape: Sequence[int], starts: Sequence[int], ends: Sequence[int],
                axes: Sequence[int] | None, steps: Sequence[int] | None) -> list[SliceDim]:
    """ONNX Slice semantics: negative starts/ends count from the end, then clamp (to [0, dim]
    for positive steps, [-1, dim - 1] for negative ones); INT_MAX/INT_MIN ends just clamp."""
    rank = len(shape)
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = [1] * len(starts) if steps is None else list(steps)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise AotcError(f"starts/ends/axes/steps have different lengths ({len(starts)}, "
                        f"{len(ends)}, {len(axes)}, {len(steps)})", node.name, node.op)
    plan = [(0, 1, d) for d in shape]
    seen: set[int] = set()
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = axis_of(node, a, rank, "axes")
        if a in seen:
            raise AotcError(f"axis {a} is sliced twice", node.name, node.op)
        seen.add(a)
        if st == 0:
            raise AotcError("steps must be non-zero", node.name, node.op)
        dim = shape[a]
        s, e = (s + dim if s < 0 else s), (e + dim if e < 0 else e)
        if st > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
        else:
            s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
        plan[a] = (s, st, max(0, -((s - e) // st)))  # ceil((e - s) / st)
    return plan


def _merge_slice(shape: Sequence[int], plan: Sequence[SliceDim]) -> list[tuple[int, int, int, int]]:
    """(start, step, count, size) per dim, a dim taken whole merged into its left neighbour
    when that one has step 1: the same elements as fewer, longer contiguous runs."""
    out: list[tuple[int, int, int, int]] = []
    for (s, st, c), n in zip(plan, shape):
        if out and (s, st, c) == (0, 1, n) and out[-1][1] == 1:
            ls, _, lc, ln = out[-1]
            out[-1] = (ls * n, 1, lc * n, ln * n)
        else:
            out.append((s, st, c, n))
    return out


@register
class Slice(OpDef):
    name = "Slice"
    since = 10
    dtypes = ANY
    const_inputs = (1, 2, 3, 4)
    onnx_tests = ("test_slice*",)

    def _plan(self, node: Node, ins: Sequence[Value | None]) -> list[SliceDim]:
        starts, ends, axes, steps = [ints(ins[k]) if k < len(ins) else None for k in (1, 2, 3, 4)]
        return _slice_plan(node, _shape(ins), starts or [], ends or [], axes, steps)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        self._plan(node, ins)

    def reference(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                  axes: np.ndarray | None = None, steps: np.ndarray | None = None) -> np.ndarray:
        plan = _slice_plan(Node("Slice", "ref", (), ()), data.shape, ints(starts) or [],
                           ints(ends) or [], ints(axes), ints(steps))
        return data[np.ix_(*[s + st * np.arange(c, dtype=np.int64) for s, st, c in plan])]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        return node.with_(inputs=node.inputs[:1],
                          attrs={**node.attrs, "_plan": self._plan(node, ins)})

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        dims = _merge_slice(X.shape, node.attrs["_plan"])
        strides = strides_of([n for _, _, _, n in dims])
        base = sum(s * stride for (s, _, _, _), stride in zip(dims, strides))
        strided_copy(kb, X, [c for _, _, c, _ in dims],
                      [st * stride for (_, st, _, _), stride in zip(dims, strides)], base, "s")


# --------------------------------------------------------------------------------------- Gather
def runtime_index(raw: Expr, n: int, kb: Any = None) -> Expr:
    """A loaded int32/int64 index as an INDEX in [0, n): a negative one counts from the end,
    and one still outside the dim is clamped to its nearest end, so a bad run-time index can
    never address memory outside the tensor (ONNX leaves out-of-range indices undefined).
    With ``kb`` the raw index is first read into a local (it is used several times)."""
    if kb is not None and not isinstance(raw, (Var, Const)):
        raw = kb.local(raw, "ix", raw.dtype)
    wrapped = select(cmp("lt", raw, 0), raw + n, raw, raw.dtype)
    return Cast(bmin(bmax(wrapped, 0), max(n - 1, 0)), INDEX)


def clamp_indices(indices: np.ndarray, n: int) -> np.ndarray:
    """numpy twin of runtime_index (for references)."""
    raw = np.asarray(indices).astype(np.int64)
    return np.clip(np.where(raw < 0, raw + n, raw), 0, max(n - 1, 0))


def check_indices(node: Node, v: Value | None, n: int, axis: int) -> None:
    """Indices must be int32/int64; constant ones must be inside [-n, n) (the spec's range),
    and a non-empty index set cannot address an empty dim."""
    if v is None:
        return
    if v.type.dtype.name not in ("int32", "int64"):
        raise AotcError(f"indices have dtype {v.type.dtype.name}; supported: int32, int64",
                        node.name, node.op)
    if v.type.numel and n == 0:
        raise AotcError(f"indices address the empty dim {axis}", node.name, node.op)
    if v.is_const:
        raw = np.asarray(v.const).astype(np.int64)
        bad = raw[(raw < -n) | (raw >= n)]
        if bad.size:
            raise AotcError(f"index {int(bad[0])} is out of range for dim {n} (axis {axis})",
                            node.name, node.op)


@register
class Gather(OpDef):
    """Constant indices are folded into the kernel (an affine index, or a table in flash).
    Run-time indices are loaded and wrapped per element: a negative index counts from the end
    and an out-of-range one is CLAMPED to the nearest valid index (never read out of bounds)."""

    name = "Gather"
    since = 11
    dtypes = ANY
    defined = ("run-time indices: a negative one counts from the end once, one still outside "
               "the dim is clamped to the nearest end (onnxruntime refuses the run)")
    onnx_tests = ("test_gather_0", "test_gather_1", "test_gather_2d*", "test_gather_negative*")

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins[:1])
        shape = _shape(ins)
        axis = axis_of(node, node.attrs["axis"], len(shape))
        check_indices(node, ins[1], shape[axis], axis)

    def reference(self, data: np.ndarray, indices: np.ndarray, *, axis: int = 0) -> np.ndarray:
        n = data.shape[axis if axis >= 0 else axis + data.ndim]
        return np.take(data, clamp_indices(indices, n), axis=axis)

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        idx = ins[1]
        assert idx is not None
        if not idx.is_const:
            return node
        shape = _shape(ins)
        n = shape[axis_of(node, node.attrs["axis"], len(shape))]
        return node.with_(inputs=node.inputs[:1],
                          attrs={**node.attrs, "_indices": clamp_indices(idx.const, n)})

    def lower(self, node: Node, kb: Any) -> None:
        X = kb.inputs[0]
        axis = axis_of(node, node.attrs["axis"], len(X.shape))
        outer, inner = _outer_inner(X.shape, axis)
        n = X.shape[axis]
        if "_indices" not in node.attrs:  # run-time indices
            ind = kb.inputs[1]
            if 0 in (outer, inner, ind.numel):
                return
            with nest(kb, [outer, ind.numel], "g") as (o, j):
                pos = kb.local(runtime_index(ind.flat(j), n, kb), "pos")
                with nest(kb, [inner], "k") as (k,):
                    kb.store_output([], X.flat((o * n + pos) * inner + k),
                                    flat=(o * ind.numel + j) * inner + k)
            return
        flat = node.attrs["_indices"].reshape(-1)
        m = int(flat.size)
        if 0 in (outer, inner, m):
            return
        step = int(flat[1] - flat[0]) if m > 1 else 0
        table = None
        if m > 1 and np.any(np.diff(flat) != step):
            # Not an arithmetic progression (e.g. a permutation): read the indices from flash.
            table = kb.const("indices", flat.astype(np.int32), INDEX)
        with nest(kb, [outer, m], "g") as (o, j):
            pos = j * step + int(flat[0]) if table is None else kb.local(table.flat(j), "pos")
            with nest(kb, [inner], "k") as (k,):
                kb.store_output([], X.flat((o * n + pos) * inner + k),
                                flat=(o * m + j) * inner + k)


@register
class Gather1(Gather):
    """Opset 1 leaves negative indices undefined; wrapping them is a valid choice."""

    since = 1


# ------------------------------------------------------------------------------------------ Pad
class _Pad(OpDef):
    """Pad = crop by the negative pads, then pad by the positive ones (onnxruntime's order)."""

    dtypes = ANY
    const_inputs = (1, 2, 3)
    modes: tuple[str, ...] = ("constant", "reflect", "edge")
    onnx_tests = ("test_constant_pad*", "test_edge_pad*", "test_reflect_pad*", "test_wrap_pad*")

    def _pads(self, node: Node, shape: Sequence[int], pads: Sequence[int],
              axes: Sequence[int] | None) -> list[tuple[int, int]]:
        rank = len(shape)
        axes = list(range(rank)) if axes is None else [axis_of(node, a, rank, "axes") for a in axes]
        if len(pads) != 2 * len(axes) or len(set(axes)) != len(axes):
            raise AotcError(f"pads={list(pads)} do not match axes {axes} (need 2 per axis)",
                            node.name, node.op)
        out = [(0, 0)] * rank
        for k, a in enumerate(axes):
            out[a] = (pads[k], pads[k + len(axes)])
        mode = node.attrs["mode"]
        if mode not in self.modes:
            raise AotcError(f"mode={mode!r} is not supported at opset {node.version or '?'}; "
                            f"supported: {', '.join(self.modes)}", node.name, node.op)
        for d, (b, e) in enumerate(out):
            kept = shape[d] - max(-b, 0) - max(-e, 0)
            if kept < 0:
                raise AotcError(f"negative pads {b}, {e} crop more than dim {d} ({shape[d]})",
                                node.name, node.op)
            if mode == "constant" or (b <= 0 and e <= 0):
                continue
            if kept == 0:
                raise AotcError(f"mode={mode!r} cannot pad the empty dim {d}", node.name, node.op)
            if mode == "reflect" and max(b, e) > kept - 1:
                raise AotcError(f"mode='reflect' pads ({b}, {e}) exceed dim {d} size - 1 "
                                f"({kept - 1})", node.name, node.op)
        return out

    def _prep(self, node: Node, ins: Sequence[Value | None]) -> tuple[list[tuple[int, int]], Any]:
        pads = ints(ins[1])
        assert pads is not None
        axes = ints(ins[3]) if len(ins) > 3 else None
        value = ins[2].const.reshape(-1) if len(ins) > 2 and ins[2] is not None else None
        cval = value[0].item() if value is not None and value.size else 0
        return self._pads(node, _shape(ins), pads, axes), cval

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        self._prep(node, ins)

    def pad(self, data: np.ndarray, pads: np.ndarray, constant_value: np.ndarray | None,
            axes: np.ndarray | None, mode: str) -> np.ndarray:
        node = Node("Pad", "ref", (), (), {"mode": mode})
        both = self._pads(node, data.shape, ints(pads) or [], ints(axes))
        crop = tuple(slice(max(-b, 0), n - max(-e, 0)) for (b, e), n in zip(both, data.shape))
        widths = [(max(b, 0), max(e, 0)) for b, e in both]
        if mode != "constant":
            return np.pad(data[crop], widths, mode=mode)
        has_value = constant_value is not None and constant_value.size
        cval = constant_value.reshape(-1)[0] if has_value else 0  # type: ignore[union-attr]
        return np.pad(data[crop], widths, mode="constant", constant_values=cval)

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        pads, cval = self._prep(node, ins)
        return node.with_(inputs=node.inputs[:1],
                          attrs={**node.attrs, "_pads": pads, "_value": cval})

    def lower(self, node: Node, kb: Any) -> None:
        X, Y = kb.inputs[0], kb.outputs[0]
        if Y.numel == 0:
            return
        mode = node.attrs["mode"]
        with nest(kb, Y.shape, "p") as o:
            src: list[Expr] = []
            inside: list[Expr] = []
            for d, (b, e) in enumerate(node.attrs["_pads"]):
                crop = max(-b, 0)
                n = X.shape[d] - crop - max(-e, 0)  # the cropped dim that is padded
                b, e = max(b, 0), max(e, 0)
                i = o[d] - b
                if mode == "constant":
                    inside += [cmp("ge", i, 0)] if b else []
                    inside += [cmp("lt", i, n)] if e else []
                elif mode == "edge":
                    i = bmax(i, 0) if b else i
                    i = bmin(i, n - 1) if e else i
                elif mode == "reflect" and (b or e):
                    r = kb.local(i, f"r{d}")
                    if b:
                        kb.assign(r, select(cmp("lt", r, 0), -r, r, INDEX))
                    if e:
                        kb.assign(r, select(cmp("ge", r, n), 2 * (n - 1) - r, r, INDEX))
                    i = r
                elif mode == "wrap" and (b or e):
                    i = (i + n * -(-b // n)) % n  # shifted up to non-negative first
                src.append(i + crop)
            value = X[src]
            if inside:
                # C's ?: reads X only when the index is inside the input.
                value = select(land(*inside), value, node.attrs["_value"], X.dtype)
            kb.store_output(o, value)


@register
class Pad11(_Pad):
    name = "Pad"
    since = 11

    def reference(self, data: np.ndarray, pads: np.ndarray,
                  constant_value: np.ndarray | None = None, *, mode: str = "constant"
                  ) -> np.ndarray:
        return self.pad(data, pads, constant_value, None, mode)


@register
class Pad18(_Pad):
    name = "Pad"
    since = 18

    def reference(self, data: np.ndarray, pads: np.ndarray,
                  constant_value: np.ndarray | None = None, axes: np.ndarray | None = None, *,
                  mode: str = "constant") -> np.ndarray:
        return self.pad(data, pads, constant_value, axes, mode)


@register
class Pad19(Pad18):
    since = 19
    modes = ("constant", "reflect", "edge", "wrap")
