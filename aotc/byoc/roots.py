"""Library roots: a BYOC library's files are recorded relative to a variable
(``${CMSIS_NN_PATH}/Source/...``) so a bundle's bytes do not depend on where the library lives;
builds expand the variable to the tree this process's compile located, else from the
environment variable of that name."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from aotc.errors import AotcError

# ${VAR} -> directory, registered by the backends that located a library in this process.
_ROOTS: dict[str, Path] = {}
_VAR = re.compile(r"\$\{(\w+)\}")


def register_root(var: str, path: Path) -> None:
    _ROOTS[var] = Path(path)


def roots() -> dict[str, str]:
    """The registered roots, for ``cmake -DVAR=DIR``."""
    return {k: str(v) for k, v in sorted(_ROOTS.items())}


def expand_path(text: str, what: str = "library") -> str:
    """``${VAR}/rel`` -> ``DIR/rel`` (registered root, else $VAR); AotcError when unknown."""
    def sub(m: re.Match[str]) -> str:
        var = m.group(1)
        if var in _ROOTS:
            return str(_ROOTS[var])
        if os.environ.get(var):
            return os.environ[var]
        raise AotcError(f"{what} path {text!r} needs {var}: set the {var} environment variable "
                        f"to the directory the bundle was compiled against")
    return _VAR.sub(sub, text)


def expand(lib: dict[str, Any]) -> dict[str, Any]:
    """A bundle.json library with its ``${VAR}`` paths expanded for a build."""
    name = f"library {lib.get('name')!r}"
    return {**lib, **{key: [expand_path(str(p), name) for p in lib.get(key, [])]
                      for key in ("sources", "include_dirs")}}
