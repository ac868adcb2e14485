"""View ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout) reinterpret their input's
storage and get no kernel (a flat Copy only when a graph output needs its own buffer). The
data-movement kernels (Transpose, Concat, Split, Slice, Gather, Pad) live in movement.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.ops import OpDef, register

ANY = ("float32", "uint8", "int8", "uint16", "int16", "int32", "uint32", "int64", "uint64", "bool")


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


class _Dropout(View):
    name = "Dropout"
    # The *_mask tests ask for the mask output, which inference does not produce.
    onnx_tests = ("test_dropout_default", "test_dropout_default_ratio", "test_dropout_*_old")

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins[:1])
        if len([o for o in node.outputs if o]) > 1:
            raise AotcError("the mask output is not supported (inference only)",
                            node.name, node.op)


@register
class Dropout10(_Dropout):
    """Opset 10-11: `ratio` is an attribute; inference Dropout is the identity for any ratio."""

    since = 10

    def reference(self, data: np.ndarray, *, ratio: float = 0.5) -> np.ndarray:
        return data


@register
class Dropout12(_Dropout):
    since = 12

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        if len(ins) > 2 and ins[2] is not None:
            if not ins[2].is_const or bool(ins[2].const.reshape(-1)[0]):
                raise AotcError("training_mode must be a constant false", node.name, node.op)

    def reference(self, data: np.ndarray, ratio: Any = None, training_mode: Any = None, *,
                  seed: int = 0) -> np.ndarray:
        return data


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


class _StaticShapeOp(OpDef):
    """Shape and Size depend only on static shapes: constant folding always removes them; the
    lowering (used only if folding is switched off) writes the values from a flash table."""

    dtypes = ANY

    def lower(self, node: Node, kb: Any) -> None:
        x = kb.inputs[0]
        attrs = {k: v for k, v in node.attrs.items() if not k.startswith("_")}
        value = np.asarray(self.reference(np.zeros(x.shape, np.uint8), **attrs))
        from aotc import dtypes

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
