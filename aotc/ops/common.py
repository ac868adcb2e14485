"""Helpers the op families share, each written once: attribute and constant-input reading
(axis, ints), loop skeletons over a kernel builder (nest, loop_unless_one) and the strided
copies of the re-layout kernels (strided_copy, merged_perm)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.ir.graph import Node, Value
from aotc.loops.builder import strides_of
from aotc.loops.loop_ir import Const, Expr, flat

# Every dtype a data-movement kernel accepts (it copies bytes, whatever they mean).
ANY = ("float32", "uint8", "int8", "uint16", "int16", "int32", "uint32", "int64", "uint64", "bool")


def axis(node: Node, axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` of a tensor of ``rank`` dims, negative counted from the end (AotcError outside
    [-rank, rank))."""
    if not -rank <= axis < rank:
        raise AotcError(f"{what}={axis} is out of range for rank {rank}", node.name, node.op)
    return axis + rank if axis < 0 else axis


def ints(v: Value | np.ndarray | Sequence[int] | None) -> list[int] | None:
    """A constant input (or array) as a flat list of Python ints; None when absent."""
    arr = v.const if isinstance(v, Value) else v
    return None if arr is None else [int(x) for x in np.asarray(arr).reshape(-1)]


@contextmanager
def nest(kb: Any, extents: Sequence[int], prefix: str) -> Iterator[list[Expr]]:
    """Loops over ``extents``, outermost first; a unit extent gets index 0 and no loop."""
    with ExitStack() as stack:
        yield [Const(0) if n == 1 else stack.enter_context(kb.loop(n, f"{prefix}{k}"))
               for k, n in enumerate(extents)]


@contextmanager
def loop_unless_one(kb: Any, extent: int, name: str) -> Iterator[Expr]:
    """A loop over ``extent``, or no loop (index 0) when the extent is 1."""
    if extent == 1:
        yield Const(0)
        return
    with kb.loop(extent, name) as v:
        yield v


def strided_copy(kb: Any, X: Any, counts: Sequence[int], coeffs: Sequence[int], base: int,
                 prefix: str) -> None:
    """y[i] = x[base + sum_k i_k * coeffs[k]] for every i in the index space ``counts``."""
    if 0 in counts:
        return
    with nest(kb, counts, prefix) as idx:
        src: Expr = Const(base)
        for i, c in zip(idx, coeffs):
            src = src + i * c
        kb.store_output([], X.flat(src), flat=flat(idx, strides_of(counts)))


def merged_perm(shape: Sequence[int], perm: Sequence[int]) -> tuple[list[int], list[int]]:
    """Drop unit dims and merge input dims that stay adjacent and in order in the output: the
    same data movement on fewer, larger dims."""
    perm = [p for p in perm if shape[p] != 1]
    runs: list[list[int]] = []
    for p in perm:
        if runs and p == runs[-1][-1] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    order = sorted(range(len(runs)), key=lambda r: runs[r][0])  # the runs in input order
    new_shape = [int(np.prod([shape[d] for d in runs[r]], dtype=np.int64)) for r in order]
    return new_shape, [order.index(r) for r in range(len(runs))]
