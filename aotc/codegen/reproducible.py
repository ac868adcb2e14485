"""The command line a bundle records in its provenance header, made machine-independent: the
output directory dropped and every path (the model, --tuning-log, --cmsis-nn-path, a --byoc
.py file, ...) cut to its file name, so where and by whom a bundle is compiled leaves its bytes
unchanged (the model's content hash is recorded beside it)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import PurePath

# Options whose value is a file or directory on the compiling machine.
PATH_OPTIONS = ("--tuning-log", "--cmsis-nn-path", "--vectors", "--reference", "--inputs",
                "--save", "--calibration")
OUTPUT_OPTIONS = ("-o", "--output")


def _name(path: str) -> str:
    return PurePath(path).name or path


def _byoc(value: str) -> str:
    """--byoc cmsis-nn,/home/me/backend.py -> cmsis-nn,backend.py"""
    return ",".join(_name(b) if b.strip().endswith(".py") else b for b in value.split(","))


def _split_equals(argv: Sequence[str]) -> list[str]:
    """--opt=value -> --opt value: two spellings of one option record the same bytes."""
    out: list[str] = []
    for a in argv:
        opt, eq, value = a.partition("=")
        out += [opt, value] if a.startswith("--") and eq else [a]
    return out


def recorded_command(argv: Sequence[str], model: str | None) -> str:
    """``aotc`` + argv without -o DIR, with paths reduced to their file names."""
    kept: list[str] = []
    pending: str | None = None  # the option whose value comes next
    for a in _split_equals(argv):
        if pending is not None:
            if pending not in OUTPUT_OPTIONS:
                kept.append(_byoc(a) if pending == "--byoc" else _name(a))
            pending = None
            continue
        if a in OUTPUT_OPTIONS or a in PATH_OPTIONS or a == "--byoc":
            if a not in OUTPUT_OPTIONS:
                kept.append(a)
            pending = a
        elif a.startswith("-o") and not a.startswith("--"):
            continue  # -oDIR
        elif model is not None and a == model:
            kept.append(_name(a))
        else:
            kept.append(a)
    return "aotc " + " ".join(shlex.quote(a) for a in kept)
