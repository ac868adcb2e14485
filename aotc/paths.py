"""Where aotc's non-Python files live: in a checkout next to the package, in a wheel inside it
(pyproject.toml force-includes them under aotc/_data). The one way to find them: every module
asks here, never relative to its own __file__."""

from __future__ import annotations

import functools
import os
from pathlib import Path

_PKG = Path(__file__).resolve().parent
_DATA = ("templates", "runtime_c", "boards", "CMakeLists.txt")


@functools.cache
def data_root() -> Path:
    """The directory holding templates/, runtime_c/, boards/ and the firmware CMakeLists.txt:
    aotc/_data in an installed wheel, the checkout's top level otherwise."""
    for cand in (_PKG / "_data", _PKG.parent):
        if all((cand / name).exists() for name in _DATA):
            return cand
    raise FileNotFoundError(
        f"aotc installation is incomplete: no directory with {', '.join(_DATA)} "
        f"(looked in {_PKG / '_data'} and {_PKG.parent})")


def templates_dir() -> Path:
    return data_root() / "templates"


def runtime_dir() -> Path:
    return data_root() / "runtime_c"


def boards_dir() -> Path:
    return data_root() / "boards"


def cmake_lists() -> Path:
    """The top-level CMakeLists.txt that builds a bundle into firmware for a board."""
    return data_root() / "CMakeLists.txt"


def qemu_plugin_source() -> Path:
    """The instruction-counting QEMU TCG plugin's C source."""
    return boards_dir() / "qemu_plugin" / "insncount.c"


def package_data_dir() -> Path:
    """aotc/data: the ONNX node-suite table and its exclusions (inside the package everywhere)."""
    return _PKG / "data"


def cache_dir() -> Path:
    """aotc's cache (AOTC_CACHE_DIR, else ~/.cache/aotc): host builds, library archives,
    firmware recipes and cached firmware."""
    d = Path(os.environ.get("AOTC_CACHE_DIR") or Path.home() / ".cache" / "aotc")
    d.mkdir(parents=True, exist_ok=True)
    return d
