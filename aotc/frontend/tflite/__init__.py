"""The TFLite door: a .tflite flatbuffer becomes an ONNX-semantics model (importer.py), built by
one converter per builtin (builtins.py) on a shared Builder (builder.py)."""

from aotc.frontend.tflite.flatbuffer import check_flatbuffer
from aotc.frontend.tflite.importer import computes_in_integers, convert, is_tflite, load_tflite

__all__ = ["check_flatbuffer", "computes_in_integers", "convert", "is_tflite", "load_tflite"]
