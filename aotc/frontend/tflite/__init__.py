"""The TFLite door: a .tflite flatbuffer becomes an ONNX-semantics model (importer.py), built by
one converter per builtin (builtins.py) on a shared Builder (builder.py)."""

from aotc.frontend.tflite.importer import convert, is_tflite, load_tflite

__all__ = ["convert", "is_tflite", "load_tflite"]
