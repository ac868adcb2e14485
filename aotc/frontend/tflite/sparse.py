"""TFLite sparse constants (a tensor's ``sparsity``: traversal order, block map, per-dimension
DENSE / SPARSE_CSR metadata) densified at compile time, as TFLite's FormatConverter does: the
weights of a pruned model become ordinary dense constants (DENSIFY then folds away)."""

from __future__ import annotations

from typing import Any

import numpy as np

from aotc.errors import AotcError


def _vector(md: Any, which: str) -> np.ndarray:
    """array_segments / array_indices of a SPARSE_CSR dimension (an Int32/Uint16/Uint8Vector
    union)."""
    import tflite

    kind = getattr(md, f"Array{which}Type")()
    table = getattr(md, f"Array{which}")()
    cls = {1: tflite.Int32Vector, 2: tflite.Uint16Vector, 3: tflite.Uint8Vector}.get(kind)
    if cls is None or table is None:
        raise AotcError(f"sparse tensor: array_{which.lower()} is missing")
    v = cls()
    v.Init(table.Bytes, table.Pos)
    return np.asarray(v.ValuesAsNumpy() if v.ValuesLength() else [], np.int64)


def densify(sp: Any, values: np.ndarray, shape: tuple[int, ...], name: str) -> np.ndarray:
    """The dense array of shape ``shape`` whose stored (non-zero) ``values`` and sparsity
    parameters ``sp`` (a tflite.SparsityParameters) TFLite wrote."""
    n = len(shape)
    order = [int(v) for v in sp.TraversalOrderAsNumpy()] if sp.TraversalOrderLength() else \
        list(range(n))
    block_map = [int(v) for v in sp.BlockMapAsNumpy()] if sp.BlockMapLength() else []
    levels = len(order)
    if levels != n + len(block_map) or sp.DimMetadataLength() != levels or \
            sorted(order) != list(range(levels)) or any(not 0 <= d < n for d in block_map):
        raise AotcError(f"tensor {name!r}: inconsistent sparsity parameters")
    meta = [sp.DimMetadata(k) for k in range(levels)]
    dense = [md.Format() == 0 for md in meta]
    sizes = [int(md.DenseSize()) for md in meta]
    segs = [None if d else _vector(md, "Segments") for d, md in zip(dense, meta)]
    idxs = [None if d else _vector(md, "Indices") for d, md in zip(dense, meta)]
    # The block sizes, by block number: traversal dims >= n are blocks in block_map order.
    block_size = {order[k] - n: sizes[k] for k in range(levels) if order[k] >= n}
    out = np.zeros(shape, values.dtype)
    flat = out.reshape(-1)
    strides = [int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(n)]
    pos = 0
    # Depth-first over the levels (an explicit stack): (level, prev_idx, indices so far).
    stack: list[tuple[int, int, tuple[int, ...]]] = [(0, 0, ())]
    while stack:
        level, prev, ind = stack.pop()
        if level == levels:
            orig = [0] * n
            for k in range(n):
                orig[order[k]] = ind[k]
            for k in range(n, levels):
                b = order[k] - n
                d = block_map[b]
                orig[d] = orig[d] * block_size[b] + ind[k]
            if pos >= values.size or any(not 0 <= o < s for o, s in zip(orig, shape)):
                raise AotcError(f"tensor {name!r}: sparse data does not fit its shape")
            flat[sum(o * s for o, s in zip(orig, strides))] = values[pos]
            pos += 1
            continue
        if dense[level]:
            kids = [(level + 1, prev * sizes[level] + i, ind + (i,))
                    for i in range(sizes[level])]
        else:
            seg, idx = segs[level], idxs[level]
            assert seg is not None and idx is not None
            if prev + 1 >= len(seg) or seg[prev + 1] > len(idx) or seg[prev] > seg[prev + 1]:
                raise AotcError(f"tensor {name!r}: array_segments out of range")
            kids = [(level + 1, i, ind + (int(idx[i]),))
                    for i in range(int(seg[prev]), int(seg[prev + 1]))]
        stack.extend(reversed(kids))  # visit in order: values are stored in traversal order
    if pos != values.size:
        raise AotcError(f"tensor {name!r}: {values.size} stored values, the sparsity "
                        f"parameters address {pos}")
    return out
