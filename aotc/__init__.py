"""aotc: compile ONNX models into dependency-free C for microcontrollers.

Public API: ``compile(model, out_dir, name=...) -> Bundle``; ``Bundle.load()`` gives a host
runner (cffi); every user error is an ``AotcError``.
"""

from __future__ import annotations

from aotc.api import Bundle, compile, inspect, verify  # noqa: E402
from aotc.compilation import CompileOptions  # noqa: E402
from aotc.errors import AotcError  # noqa: E402
from aotc.version import __version__  # noqa: E402

__all__ = ["AotcError", "Bundle", "CompileOptions", "compile", "inspect", "verify",
           "__version__"]
