"""The fold pass: lift all weight-only computation to compile time (weight transposes,
reshapes, Dequantize of constants, shape arithmetic, If with a constant condition).

Pre: a valid graph. Post: no node has only constant inputs, except Expand/Tile-like nodes whose
result would be much larger than their inputs (they stay kernels, flash stays small). The
evaluation itself is the ops' reference semantics (aotc/ops/evaluate.py), which the importer
also runs on subgraph bodies.
"""

from __future__ import annotations

from aotc.ir.graph import Graph
from aotc.ops.evaluate import fold_constants as _evaluate


def fold_constants(g: Graph) -> Graph:
    return _evaluate(g)
