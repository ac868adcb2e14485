"""Where aotc's non-Python files live: in a checkout next to the package, in a wheel inside it."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    for cand in (_PKG / "_data" / name, _PKG.parent / name):
        if cand.is_dir():
            return cand
    raise FileNotFoundError(f"aotc installation is missing its {name}/ folder")


def templates_dir() -> Path:
    return _find("templates")


def runtime_dir() -> Path:
    return _find("runtime_c")


def boards_dir() -> Path:
    return _find("boards")
