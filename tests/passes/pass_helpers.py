"""Helpers for before/after pass tests: small graphs built with onnx.helper, imported with
aotc's frontend, run through one pass with ir.verify on both sides, printed as text."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from aotc.frontend.onnx.importer import import_model
from aotc.ir.graph import Graph
from aotc.ir.printer import print_graph
from aotc.ir.verify import verify
from aotc.ops import resolve

NP_TO_ONNX = {np.dtype(np.float32): onnx.TensorProto.FLOAT,
              np.dtype(np.int64): onnx.TensorProto.INT64,
              np.dtype(np.int32): onnx.TensorProto.INT32}


def onnx_model(nodes: Sequence[onnx.NodeProto], inputs: Mapping[str, Sequence[int]],
               outputs: Sequence[str], inits: Mapping[str, np.ndarray] | None = None,
               opset: int = 17, name: str = "t") -> onnx.ModelProto:
    """float32 graph inputs of the given shapes; outputs are declared without types."""
    g = helper.make_graph(
        list(nodes), name,
        [helper.make_tensor_value_info(k, onnx.TensorProto.FLOAT, list(s))
         for k, s in inputs.items()],
        [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def build(nodes: Sequence[onnx.NodeProto], inputs: Mapping[str, Sequence[int]],
          outputs: Sequence[str], inits: Mapping[str, np.ndarray] | None = None,
          opset: int = 17, name: str = "t") -> Graph:
    g = import_model(onnx_model(nodes, inputs, outputs, inits, opset, name), name=name)
    verify(g)
    return g


def node(op: str, ins: Sequence[str], outs: Sequence[str], name: str, **attrs: Any
         ) -> onnx.NodeProto:
    return helper.make_node(op, list(ins), list(outs), name=name, **attrs)


def run_pass(fn: Callable[[Graph], Graph], g: Graph) -> Graph:
    """Apply one pass; the input graph must be untouched and both must verify."""
    before = print_graph(g)
    out = fn(g)
    verify(out)
    assert print_graph(g) == before, "the pass mutated its input graph"
    return out


def expect(g: Graph, text: str, const_values: bool = True) -> None:
    """Compare the printed graph with ``text``; ``const_values=False`` drops the values the
    printer shows for small constants (for computed weights checked numerically instead)."""
    want = textwrap.dedent(text).strip("\n")
    got = print_graph(g)
    if not const_values:
        got = re.sub(r"^(  const %[^:]+: \S+) = .*$", r"\1", got, flags=re.M)
    assert got == want, f"\n--- got ---\n{got}\n--- want ---\n{want}"


def require_ops(*ops: str, opset: int = 17) -> None:
    missing = [op for op in ops if resolve(op, opset) is None]
    if missing:
        pytest.skip(f"op(s) not registered yet: {', '.join(missing)}")
