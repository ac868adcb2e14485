"""Graph, Node, Value, TensorType.

Invariants (checked by ir.verify): every value has a concrete shape and dtype; nodes are in a
valid topological order; a value is produced by exactly one node, or is a graph input, or is a
constant. Nodes are frozen; passes build new Graphs with ``Graph.replace``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from aotc.dtypes import DType


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: DType

    @functools.cached_property
    def numel(self) -> int:
        return math.prod(int(d) for d in self.shape)  # exact (np.prod wraps around)

    @functools.cached_property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize

    def __str__(self) -> str:
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class Value:
    name: str
    type: TensorType
    const: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def is_const(self) -> bool:
        return self.const is not None


CHAIN = "@"


@dataclass(frozen=True)
class Node:
    op: str
    name: str
    inputs: tuple[str, ...]  # "" marks an omitted optional input
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict, compare=False)
    version: int = 0  # the op's since-version in force for the model's opset
    domain: str = ""
    # Elementwise nodes fused into this anchor, in order. Each reads the running result through
    # the input name CHAIN ("@"); their outputs are not materialised (outputs == ()).
    epilogue: tuple[Node, ...] = ()

    @property
    def label(self) -> str:
        names = [self.name] + [e.name for e in self.epilogue]
        ops = [self.op] + [e.op for e in self.epilogue]
        return "+".join(ops) + " (" + ", ".join(names) + ")"

    def with_(self, **kw: Any) -> Node:
        return replace(self, **kw)


@dataclass
class Graph:
    name: str
    inputs: list[str]
    outputs: list[str]
    values: dict[str, Value]
    nodes: list[Node]
    opset: int
    meta: dict[str, Any] = field(default_factory=dict)

    def replace(self, **kw: Any) -> Graph:
        g = replace(self, **kw)
        g.values = dict(g.values)
        g.nodes = list(g.nodes)
        return g

    def type(self, name: str) -> TensorType:
        return self.values[name].type

    def producers(self) -> dict[str, Node]:
        return {o: n for n in self.nodes for o in n.outputs if o}

    def consumers(self) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {}
        for n in self.nodes:
            for node in (n, *n.epilogue):
                for i in node.inputs:
                    if i and i != CHAIN:
                        out.setdefault(i, []).append(n)
        return out

    def constants(self) -> Iterable[Value]:
        return (v for v in self.values.values() if v.is_const)

    def const_bytes(self) -> int:
        """Bytes of constants the graph's nodes use."""
        used = {i for n in self.nodes for node in (n, *n.epilogue) for i in node.inputs}
        return sum(v.type.nbytes for v in self.constants() if v.name in used)
