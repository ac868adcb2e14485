"""BYOC: hand fused kernels to external code generators (a vendor library, an accelerator).

backend.py is the interface a backend implements; partition.py decides which backend takes
each kernel; passes/layout.py gives claimed kernels the layout their backend wants; lowering.py
turns a claimed kernel into a step of the graph function. Built-in backends: ``cmsis-nn``
(cmsis_nn/). Third-party backends register under the ``aotc.byoc`` entry point group, or are
named by a Python file (``--byoc ./my_backend.py``, which defines ``BACKEND`` or
``backend()``), or passed as objects through the Python API.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from aotc.byoc.backend import Backend, Constant, Emitted, Library, Pattern, Subgraph, validate
from aotc.errors import AotcError

__all__ = ["Backend", "Constant", "Emitted", "Library", "Pattern", "Subgraph", "load_backends",
           "available"]

ENTRY_POINT_GROUP = "aotc.byoc"


def _cmsis_nn(options: dict[str, Any]) -> Backend:
    from aotc.byoc.cmsis_nn.backend import CmsisNNBackend

    return CmsisNNBackend(options.get("cmsis_nn_path"))


BUILTIN: dict[str, Callable[[dict[str, Any]], Backend]] = {"cmsis-nn": _cmsis_nn}


def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def available() -> list[str]:
    """Backend names ``--byoc`` accepts (built-in and installed entry points)."""
    return sorted(set(BUILTIN) | set(_entry_points()))


def _instantiate(obj: Any, what: str) -> Any:
    if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "patterns")):
        try:
            obj = obj()
        except Exception as e:  # a user's backend: one line, not a traceback
            raise AotcError(f"BYOC backend {what}: creating it failed: "
                            f"{type(e).__name__}: {e}") from None
    return obj


def _from_file(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"aotc_byoc_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise AotcError(f"BYOC backend file {str(path)!r} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise AotcError(f"BYOC backend file {str(path)!r} failed to import: "
                        f"{type(e).__name__}: {e}") from None
    for attr in ("BACKEND", "backend"):
        if hasattr(module, attr):
            return _instantiate(getattr(module, attr), repr(str(path)))
    raise AotcError(f"BYOC backend file {str(path)!r} defines neither BACKEND nor backend()")


def load_backends(specs: Iterable[str | Any], **options: Any) -> list[Any]:
    """Backends from ``--byoc`` names (built-in, entry point, or a path to a .py file) or
    objects, in priority order. ``options`` go to built-in backends (``cmsis_nn_path``)."""
    out: list[Any] = []
    for spec in specs:
        if isinstance(spec, str):
            name = spec.strip()
            if not name:
                continue
            if name.endswith(".py") or os.sep in name:
                path = Path(name).expanduser()
                if not path.is_file():
                    raise AotcError(f"--byoc {name!r}: no such file")
                b = _from_file(path)
            elif name in BUILTIN:
                b = BUILTIN[name](options)
            else:
                eps = _entry_points()
                if name not in eps:
                    raise AotcError(f"unknown BYOC backend {name!r}; available: "
                                    f"{', '.join(available()) or 'none'} (or a path to a .py "
                                    f"file defining BACKEND)")
                try:
                    loaded = eps[name].load()
                except Exception as e:
                    raise AotcError(f"BYOC backend {name!r} (entry point) failed to load: "
                                    f"{type(e).__name__}: {e}") from None
                b = _instantiate(loaded, repr(name))
        else:
            b = _instantiate(spec, repr(spec))
        validate(b)
        if any(o.name == b.name for o in out):
            raise AotcError(f"BYOC backend {b.name!r} is enabled twice")
        out.append(b)
    return out
