"""The ONNX door: a model file read with its size checks (file.py), imported into the graph IR
with concrete shapes (importer.py), subgraphs of If / Loop / Scan as closed bodies
(subgraph.py)."""

from aotc.frontend.onnx.file import load_model
from aotc.frontend.onnx.importer import import_model

__all__ = ["import_model", "load_model"]
