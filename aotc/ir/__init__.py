"""The static-shaped graph IR: values with concrete types, nodes in schedule order."""

from aotc.ir.graph import Graph, Node, TensorType, Value

__all__ = ["Graph", "Node", "TensorType", "Value"]
