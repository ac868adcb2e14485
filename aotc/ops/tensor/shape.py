"""Shape ops. View ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout) reinterpret
their input's storage and get no kernel (a flat Copy only when a graph output needs its own
buffer); Shape and Size fold away. The re-layout kernels here (Expand, Tile, DepthToSpace,
SpaceToDepth, ReverseSequence) reuse movement.py's strided copy; BitCast reinterprets bits
element by element. Transpose, Concat, Split, Slice, Gather and Pad live in movement.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.builder import strides_of
from aotc.loops.loop_ir import INDEX, Cast, bmax, bmin, call, cmp, select
from aotc.ops import OpDef, register
from aotc.ops.common import ANY, ints, merged_perm, strided_copy
from aotc.ops.math.elementwise import Elementwise


class View(OpDef):
    kind = "view"
    dtypes = ANY

    def lower(self, node: Node, kb: Any) -> None:
        # Only reached when a view must be materialised: a flat copy.
        copy_flat(kb)


def copy_flat(kb: Any) -> None:
    src, dst = kb.inputs[0], kb.outputs[0]
    with kb.loop(dst.numel, "i") as i:
        kb.store_output([], src.flat(i), flat=i)


@register
class Reshape(View):
    name = "Reshape"
    since = 5
    const_inputs = (1,)
    onnx_tests = ("test_reshape_*",)

    def reference(self, data: np.ndarray, shape: np.ndarray, *, allowzero: int = 0) -> np.ndarray:
        dims = [int(d) for d in shape.reshape(-1)]
        if not allowzero:
            dims = [data.shape[k] if d == 0 else d for k, d in enumerate(dims)]
        return data.reshape(dims)


@register
class Flatten(View):
    name = "Flatten"
    since = 1
    onnx_tests = ("test_flatten_*",)

    def reference(self, input: np.ndarray, *, axis: int = 1) -> np.ndarray:  # noqa: A002
        ax = axis + input.ndim if axis < 0 else axis
        lead = int(np.prod(input.shape[:ax], dtype=np.int64))
        return input.reshape(lead, -1) if input.size else input.reshape(lead, 0)


@register
class Squeeze11(View):
    name = "Squeeze"
    since = 11
    onnx_tests = ("test_squeeze*",)

    def reference(self, data: np.ndarray, *, axes: Sequence[int] | None = None) -> np.ndarray:
        return np.squeeze(data) if axes is None else np.squeeze(data, axis=tuple(axes))


@register
class Squeeze13(View):
    name = "Squeeze"
    since = 13
    const_inputs = (1,)
    onnx_tests = ("test_squeeze*",)

    def reference(self, data: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
        if axes is None:
            return np.squeeze(data)
        return np.squeeze(data, axis=tuple(int(a) for a in axes.reshape(-1)))


@register
class Unsqueeze11(View):
    name = "Unsqueeze"
    since = 11
    onnx_tests = ("test_unsqueeze*",)

    def reference(self, data: np.ndarray, *, axes: Sequence[int] = ()) -> np.ndarray:
        return _unsqueeze(data, [int(a) for a in axes])


@register
class Unsqueeze13(View):
    name = "Unsqueeze"
    since = 13
    const_inputs = (1,)
    onnx_tests = ("test_unsqueeze*",)

    def reference(self, data: np.ndarray, axes: np.ndarray) -> np.ndarray:
        return _unsqueeze(data, [int(a) for a in axes.reshape(-1)])


def _unsqueeze(data: np.ndarray, axes: list[int]) -> np.ndarray:
    rank = data.ndim + len(axes)
    axes = sorted(a + rank if a < 0 else a for a in axes)
    shape = list(data.shape)
    for a in axes:
        shape.insert(a, 1)
    return data.reshape(shape)


@register
class Identity(View):
    name = "Identity"
    since = 1
    onnx_tests = ("test_identity",)

    def reference(self, input: np.ndarray) -> np.ndarray:  # noqa: A002
        return input


@register
class OptionalGetElement(Identity):
    """On a plain tensor (aotc has no optional or sequence types) the identity."""

    name = "OptionalGetElement"
    since = 18
    onnx_tests = ("test_optional_get_element_tensor",)


@register
class OptionalHasElement(OpDef):
    """Known at compile time: true for a tensor input, false when the input is absent (aotc
    has no optional type, so an input is always a present tensor). Folds like Shape."""

    name = "OptionalHasElement"
    since = 18
    dtypes = ANY
    type_only_inputs = (0,)
    onnx_tests = ("test_optional_has_element_empty_no_input*",)

    def reference(self, input: np.ndarray | None = None) -> np.ndarray:  # noqa: A002
        return np.array(input is not None)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        return [TensorType((), dtypes.bool_)]


class _Dropout(View):
    name = "Dropout"
    # The mask output of inference Dropout is all true; the views pass makes it a constant.
    onnx_tests = ("test_dropout_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins[:1])


@register
class Dropout10(_Dropout):
    """Opset 10-11: `ratio` is an attribute; inference Dropout is the identity for any ratio."""

    since = 10

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        if len(node.outputs) > 1 and node.outputs[1]:
            raise AotcError("the mask output before opset 12 is not supported (onnxruntime "
                            "makes it all false, the ONNX reference all true)",
                            node.name, node.op)

    def reference(self, data: np.ndarray, *, ratio: float = 0.5) -> Any:
        return data, np.ones(data.shape, np.bool_)


@register
class Dropout12(_Dropout):
    since = 12

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        for k, what in ((1, "ratio"), (2, "training_mode")):
            v = ins[k] if len(ins) > k else None
            if v is not None and v.type.shape != ():
                raise AotcError(f"{what} must be a scalar; it has shape {list(v.type.shape)}",
                                node.name, node.op)
        if len(ins) > 2 and ins[2] is not None:
            if not ins[2].is_const or bool(ins[2].const.reshape(-1)[0]):
                raise AotcError("training_mode must be a constant false", node.name, node.op)

    def reference(self, data: np.ndarray, ratio: Any = None, training_mode: Any = None, *,
                  seed: int = 0) -> Any:
        return data, np.ones(data.shape, np.bool_)


@register
class Copy(OpDef):
    """Internal: materialise a value into a graph output's buffer."""

    name = "Copy"
    domain = "aotc"
    dtypes = ANY

    def reference(self, x: np.ndarray) -> np.ndarray:
        return x.copy()

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        assert ins[0] is not None
        return [ins[0].type]

    def lower(self, node: Node, kb: Any) -> None:
        copy_flat(kb)


@register
class Reinterpret(View):
    """Internal: the same bytes under another shape: a Transpose that moves only size-1
    dimensions (NCHW <-> NHWC of [N, C, 1, 1] or [1, 1, H, W]), made by the layout pass."""

    name = "Reinterpret"
    domain = "aotc"

    def reference(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # made after folding and shape inference; never evaluated


@register
class PermuteView(View):
    """Internal: a Transpose no kernel performs. Its output shares its input's storage and the
    kernels reading it (convolutions, pools: ``reads_permuted``) index it with the input's
    strides permuted by ``perm``: an NHWC graph input feeds an NCHW convolution or pool without
    a transpose kernel (aotc.passes.layout.permuted_views)."""

    name = "PermuteView"
    domain = "aotc"

    def reference(self, x: np.ndarray, *, perm: Sequence[int] = ()) -> np.ndarray:
        return np.transpose(x, perm)

    def lower(self, node: Node, kb: Any) -> None:
        raise AotcError("a permuted view cannot be materialised", node.name, node.op)


def permuted_strides(src_shape: Sequence[int], perm: Sequence[int]) -> tuple[int, ...]:
    """Element strides of ``transpose(x, perm)`` read in place from row-major ``x``."""
    st = strides_of(src_shape)
    return tuple(st[p] for p in perm)


class _StaticShapeOp(OpDef):
    """Shape and Size depend only on static shapes: constant folding always removes them; the
    lowering (used only if folding is switched off) writes the values from a flash table."""

    dtypes = ANY
    type_only_inputs = (0,)

    def lower(self, node: Node, kb: Any) -> None:
        x = kb.inputs[0]
        attrs = {k: v for k, v in node.attrs.items() if not k.startswith("_")}
        value = np.asarray(self.reference(np.zeros(x.shape, np.uint8), **attrs))
        table = kb.const("value", value.reshape(-1), dtypes.int64)
        with kb.loop(max(value.size, 1), "i") as i:
            kb.store_output([], table.flat(i), flat=i)


@register
class Shape1(_StaticShapeOp):
    name = "Shape"
    since = 1
    onnx_tests = ("test_shape",)

    def reference(self, data: np.ndarray) -> np.ndarray:
        return np.array(data.shape, dtype=np.int64)


@register
class Shape15(_StaticShapeOp):
    name = "Shape"
    since = 15
    onnx_tests = ("test_shape*",)

    def reference(self, data: np.ndarray, *, end: int | None = None, start: int = 0
                  ) -> np.ndarray:
        return np.array(data.shape[start:end], dtype=np.int64)


@register
class Size(_StaticShapeOp):
    name = "Size"
    since = 1
    onnx_tests = ("test_size*",)

    def reference(self, data: np.ndarray) -> np.ndarray:
        return np.array(data.size, dtype=np.int64)


# ------------------------------------------------------------------ broadcasting and re-layout
# Expand, Tile, DepthToSpace, SpaceToDepth and ReverseSequence move data without arithmetic:
# each output element is one input element at an index fixed at compile time (ReverseSequence:
# chosen by a length read at run time).
def _in(ins: Sequence[Value | None], k: int = 0) -> Value:
    v = ins[k] if k < len(ins) else None
    assert v is not None
    return v


def _bcast_strides(in_shape: Sequence[int], out_shape: Sequence[int]) -> list[int]:
    """Input element strides per output dim (right-aligned; 0 where the input broadcasts)."""
    pad = len(out_shape) - len(in_shape)
    strides = strides_of(in_shape)
    return [0 if d < pad or in_shape[d - pad] == 1 else strides[d - pad]
            for d in range(len(out_shape))]


@register
class Expand(OpDef):
    name = "Expand"
    since = 8
    dtypes = ANY
    const_inputs = (1,)
    onnx_tests = ("test_expand_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        shape = ints(_in(ins, 1).const) or []
        try:
            np.broadcast_shapes(_in(ins).type.shape, tuple(shape))
        except ValueError:
            raise AotcError(f"shape {shape} does not broadcast with the input shape "
                            f"{list(_in(ins).type.shape)}", node.name, node.op) from None
        if any(d < 0 for d in shape):
            raise AotcError(f"shape {shape} has a negative dim", node.name, node.op)

    def reference(self, input: np.ndarray, shape: np.ndarray) -> np.ndarray:  # noqa: A002
        out = np.broadcast_shapes(input.shape, tuple(ints(shape) or []))
        return np.array(np.broadcast_to(input, out))

    def lower(self, node: Node, kb: Any) -> None:

        X, Y = kb.inputs[0], kb.outputs[0]
        strided_copy(kb, X, Y.shape, _bcast_strides(X.shape, Y.shape), 0, "e")


@register
class Tile(OpDef):
    name = "Tile"
    since = 6
    dtypes = ANY
    const_inputs = (1,)
    onnx_tests = ("test_tile*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        reps = ints(_in(ins, 1).const) or []
        rank = len(_in(ins).type.shape)
        if len(reps) != rank or any(r < 0 for r in reps):
            raise AotcError(f"repeats {reps} must be {rank} non-negative counts (one per dim)",
                            node.name, node.op)

    def reference(self, input: np.ndarray, repeats: np.ndarray) -> np.ndarray:  # noqa: A002
        return np.tile(input, ints(repeats) or []) if input.ndim else input.copy()

    def lower(self, node: Node, kb: Any) -> None:
        """Output dim d of size r*n is the index pair (copy, i): read x[i] at stride s_d."""

        X, Y = kb.inputs[0], kb.outputs[0]
        reps = [y // x if x else 0 for x, y in zip(X.shape, Y.shape)]
        counts: list[int] = []
        coeffs: list[int] = []
        for r, n, s in zip(reps, X.shape, strides_of(X.shape)):
            counts += [r, n]
            coeffs += [0, s]
        strided_copy(kb, X, counts, coeffs, 0, "t")


class _Blocks(OpDef):
    """DepthToSpace and SpaceToDepth: a reshape to 6-D, a transpose, a reshape to 4-D."""

    dtypes = ANY

    def plan(self, node: Node, shape: Sequence[int]
             ) -> tuple[list[int], list[int], list[int]]:
        """(the 6-D view of the input, the permutation, the output shape)."""
        raise NotImplementedError

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        shape = _in(ins).type.shape
        b = int(node.attrs["blocksize"])
        if len(shape) != 4:
            raise AotcError(f"the input must be 4-D (NCHW), got shape {list(shape)}", node.name,
                            node.op)
        if b < 1:
            raise AotcError(f"blocksize={b} must be positive", node.name, node.op)
        self.plan(node, shape)

    def blocks(self, x: np.ndarray, node: Node) -> np.ndarray:
        view, perm, out = self.plan(node, x.shape)
        return np.transpose(x.reshape(view), perm).reshape(out)

    def lower(self, node: Node, kb: Any) -> None:

        X = kb.inputs[0]
        view, perm, _ = self.plan(node, X.shape)
        shape, mperm = merged_perm(view, perm)
        strides = strides_of(shape)
        strided_copy(kb, X, [shape[p] for p in mperm], [strides[p] for p in mperm], 0, "b")


def _ref_node(op: str, **attrs: Any) -> Node:
    return Node(op, "reference", (), (), attrs)


class _DepthToSpace(_Blocks):
    name = "DepthToSpace"
    onnx_tests = ("test_depthtospace_*",)

    def plan(self, node: Node, shape: Sequence[int]
             ) -> tuple[list[int], list[int], list[int]]:
        n, c, h, w = shape
        b = int(node.attrs["blocksize"])
        mode = node.attrs.get("mode", "DCR")
        if c % (b * b):
            raise AotcError(f"channels {c} are not a multiple of blocksize^2 = {b * b}",
                            node.name, node.op)
        out = [n, c // (b * b), h * b, w * b]
        if mode == "DCR":
            return [n, b, b, c // (b * b), h, w], [0, 3, 4, 1, 5, 2], out
        if mode == "CRD":
            return [n, c // (b * b), b, b, h, w], [0, 1, 4, 2, 5, 3], out
        raise AotcError(f"mode={mode!r} is not supported; supported: DCR, CRD", node.name,
                        node.op)


@register
class DepthToSpace(_DepthToSpace):
    since = 1

    def reference(self, input: np.ndarray, *, blocksize: int) -> np.ndarray:  # noqa: A002
        return self.blocks(input, _ref_node(self.name, blocksize=blocksize))


@register
class DepthToSpace11(_DepthToSpace):
    """Opset 11 adds mode (DCR, the old behaviour, or CRD)."""

    since = 11

    def reference(self, input: np.ndarray, *, blocksize: int,  # noqa: A002
                  mode: str = "DCR") -> np.ndarray:
        return self.blocks(input, _ref_node(self.name, blocksize=blocksize, mode=mode))


@register
class SpaceToDepth(_Blocks):
    name = "SpaceToDepth"
    since = 1
    onnx_tests = ("test_spacetodepth*",)

    def plan(self, node: Node, shape: Sequence[int]
             ) -> tuple[list[int], list[int], list[int]]:
        n, c, h, w = shape
        b = int(node.attrs["blocksize"])
        if h % b or w % b:
            raise AotcError(f"spatial dims {h}x{w} are not multiples of blocksize {b}",
                            node.name, node.op)
        return ([n, c, h // b, b, w // b, b], [0, 3, 5, 1, 2, 4],
                [n, c * b * b, h // b, w // b])

    def reference(self, input: np.ndarray, *, blocksize: int) -> np.ndarray:  # noqa: A002
        return self.blocks(input, _ref_node(self.name, blocksize=blocksize))


@register
class ReverseSequence(OpDef):
    """Reverses the first lens[b] steps along the time axis of each batch entry b. The lengths
    may be read at run time; there they are clamped to [0, T] so no read leaves the tensor."""

    name = "ReverseSequence"
    since = 10
    dtypes = ANY
    onnx_tests = ("test_reversesequence_*",)

    def _axes(self, node: Node, rank: int) -> tuple[int, int]:
        b, t = int(node.attrs["batch_axis"]), int(node.attrs["time_axis"])
        if rank < 2 or {b, t} != {0, 1}:
            raise AotcError(f"batch_axis={b} and time_axis={t} must be 0 and 1 (in either order) "
                            f"of an input of rank >= 2", node.name, node.op)
        return b, t

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins[:1])
        shape = _in(ins).type.shape
        b, t = self._axes(node, len(shape))
        lens = _in(ins, 1)
        if lens.type.dtype.name != "int64" or lens.type.shape != (shape[b],):
            raise AotcError(f"sequence_lens must be int64 of shape [{shape[b]}], got "
                            f"{lens.type}", node.name, node.op)
        if lens.is_const:
            bad = [int(v) for v in lens.const.reshape(-1) if not 0 <= v <= shape[t]]
            if bad:
                raise AotcError(f"sequence length {bad[0]} is outside [0, {shape[t]}]",
                                node.name, node.op)

    def reference(self, input: np.ndarray, sequence_lens: np.ndarray, *,  # noqa: A002
                  batch_axis: int = 1, time_axis: int = 0) -> np.ndarray:
        out = np.array(input)
        for k, n in enumerate(ints(sequence_lens) or []):
            idx: list[Any] = [slice(None)] * input.ndim
            idx[batch_axis], idx[time_axis] = k, slice(0, n)
            src = list(idx)
            src[time_axis] = slice(n - 1, None, -1) if n else slice(0, 0)
            out[tuple(idx)] = input[tuple(src)]
        return out

    def lower(self, node: Node, kb: Any) -> None:
        X, L = kb.inputs[0], kb.inputs[1]
        if X.numel == 0:
            return
        b_ax, t_ax = self._axes(node, len(X.shape))
        inner = int(np.prod(X.shape[2:], dtype=np.int64))
        nb, nt = X.shape[b_ax], X.shape[t_ax]
        with kb.loop(nb, "b") as b:
            n = kb.local(bmin(bmax(Cast(L.flat(b), INDEX), 0), nt), "n")
            with kb.loop(nt, "t") as t:
                src = kb.local(select(cmp("lt", t, n), n - 1 - t, t, INDEX), "src")
                with kb.loop(inner, "k") as k:
                    def at(tt: Any) -> Any:
                        pair = (b, tt) if b_ax == 0 else (tt, b)
                        return (pair[0] * X.shape[1] + pair[1]) * inner + k

                    kb.store_output([], X.flat(at(src)), flat=at(t))


# ---------------------------------------------------------------------------------------- BitCast
def _bitcast_target(node: Node, src: Any) -> Any:
    to = int(node.attrs["to"])
    if to not in dtypes.BY_ONNX:
        raise AotcError(f"to={to} (ONNX TensorProto enum) is not supported", node.name, node.op)
    dst = dtypes.BY_ONNX[to]
    if dst.itemsize != src.itemsize:
        raise AotcError(f"to={dst.name} has {dst.itemsize} bytes per element, the input "
                        f"({src.name}) {src.itemsize}: BitCast needs equal sizes",
                        node.name, node.op)
    return dst


@register
class BitCast(Elementwise):
    """Reinterprets each element's bits as another type of the same size. Integers of one size
    convert by a C cast (two's complement on every supported compiler); float32 goes through
    the runtime's union helpers (C99's defined way to reinterpret a float)."""

    name = "BitCast"
    since = 26
    dtypes = ANY
    onnx_tests = ("test_bitcast_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        _bitcast_target(node, _in(ins).type.dtype)

    def reference(self, input: np.ndarray, *, to: int) -> np.ndarray:  # noqa: A002
        return np.asarray(input, order="C").view(dtypes.BY_ONNX[int(to)].np)

    def scalar(self, args: list[Any], node: Node) -> Any:
        x = args[0]
        dst = _bitcast_target(node, x.dtype)
        if x.dtype == dst:
            return x
        if x.dtype.is_float:
            x = call("bits", x, dtype=dtypes.BY_NAME["uint32"])
        if dst.is_float:
            return call("float_from_bits", Cast(x, dtypes.BY_NAME["uint32"]), dtype=dst)
        return Cast(x, dst)
