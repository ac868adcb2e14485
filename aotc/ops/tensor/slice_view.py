"""SliceView: a box of a tensor read in place (aotc.passes.patches).

Like PermuteView (aotc/ops/tensor/shape.py), a view whose output shares its input's storage and
which only kernels that read input 0 through BufRef indexing (``reads_permuted``) may read:
they index the source's storage with its strides, from the box's first element (the
schedule's element offset, Schedule.offset)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.ir.graph import Node
from aotc.ops import OpDef, register
from aotc.ops.common import ANY


@register
class SliceView(OpDef):
    """Internal: ``x[starts[0]:starts[0] + shape[0], ...]`` with no copy; the output's shape
    is the box's (the value's type), ``starts`` its first element per dimension."""

    name = "SliceView"
    domain = "aotc"
    kind = "view"
    dtypes = ANY

    def reference(self, x: np.ndarray, *, starts: Sequence[int] = (),
                  sizes: Sequence[int] = ()) -> np.ndarray:
        return x[tuple(slice(a, a + n) for a, n in zip(starts, sizes))]

    def lower(self, node: Node, kb: Any) -> None:
        raise AotcError("a slice view cannot be materialised", node.name, node.op)


def view_offset(starts: Sequence[int], strides: Sequence[int]) -> int:
    """Element offset of a box's first element in a storage with these element strides."""
    return sum(int(a) * int(s) for a, s in zip(starts, strides))
