"""Control flow with subgraphs: If, Loop, Scan.

Each subgraph attribute is imported as a closed ``Body`` (aotc/frontend/onnx/subgraph.py): its
values carry names unique in the whole model, and every outer-scope tensor it reads is an explicit
input of the node (a capture), so graph passes see the dependency and never look inside. An If whose
condition is known at compile time is replaced by its taken branch (at import, or by fold_constants
once folding makes the condition constant); the others are expanded into the schedule as C control
flow around the bodies' kernels (aotc/steps/schedule.py). """

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from aotc.ir.graph import Node, TensorType, Value
from aotc.ops import REQUIRED, OpDef, register


@dataclass(frozen=True)
class Body:
    """A subgraph. ``inputs``: its formal inputs (Loop: iteration, cond, states; Scan: states,
    scan slices; If: none). ``captures``: (local value, index of the node input it stands for).
    ``values`` holds every value the body defines or reads."""

    inputs: tuple[str, ...]
    captures: tuple[tuple[str, int], ...]
    outputs: tuple[str, ...]
    nodes: tuple[Node, ...]
    values: Mapping[str, Value]

    def type(self, name: str) -> TensorType:
        return self.values[name].type


def inline(node: Node, body: Body, values: dict[str, Value], opset: int,
           known: dict[str, np.ndarray] | None = None) -> list[Node]:
    """The nodes that replace ``node`` by ``body`` (an If's taken branch); adds the body's
    values to ``values``. Captures and results are joined with Identity, which the views pass
    removes; a constant result becomes a constant."""
    version = onnx.defs.get_schema("Identity", opset).since_version
    values.update(body.values)
    nodes = []
    for local, k in body.captures:
        if not body.values[local].is_const:
            nodes.append(Node("Identity", f"{local}.capture", (node.inputs[k],), (local,), {},
                              version))
    nodes += body.nodes
    for b, o in zip(body.outputs, node.outputs):
        if not o:
            continue
        v = values[b]
        if v.const is not None:
            values[o] = Value(o, v.type, v.const)
        else:
            nodes.append(Node("Identity", f"{node.name}.result.{o}", (b,), (o,), {}, version))
            values[o] = Value(o, v.type)
            if known is not None and b in known:
                known[o] = known[b]
    return nodes


class _ControlOp(OpDef):
    kind = "control"
    dtypes = ("float32", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
              "uint64", "bool")

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        raise NotImplementedError  # the frontend infers control flow from the bodies

    def run_reference(self, node: Node, args: Sequence[Any]) -> list[Any]:
        raise NotImplementedError  # never folded: an If with a known condition is inlined


@register
class If(_ControlOp):
    name = "If"
    since = 1
    onnx_tests = ("test_if",)

    def reference(self, cond: Any, *, then_branch: Any = REQUIRED,
                  else_branch: Any = REQUIRED) -> Any:
        raise NotImplementedError


@register
class Loop(_ControlOp):
    name = "Loop"
    since = 1

    def reference(self, M: Any = None, cond: Any = None, *, body: Any = REQUIRED) -> Any:
        raise NotImplementedError


@register
class Scan(_ControlOp):
    name = "Scan"
    since = 9
    onnx_tests = ("test_scan9_sum", "test_scan9_multi_state", "test_scan9_scalar")

    def reference(self, *inputs: Any, body: Any = REQUIRED, num_scan_inputs: int = REQUIRED,
                  scan_input_axes: tuple[int, ...] = (),
                  scan_input_directions: tuple[int, ...] = (),
                  scan_output_axes: tuple[int, ...] = (),
                  scan_output_directions: tuple[int, ...] = ()) -> Any:
        raise NotImplementedError
