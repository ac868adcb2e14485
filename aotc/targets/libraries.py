"""Building a BYOC library for the host or a board outside CMake: its sources compiled with a
given compiler and flags into a static archive, cached by content (sources, headers, compiler,
flags), so the host .so and the fast board builds link the same library the bundle's
CMakeLists.txt builds. Library sources are compiled without aotc's warning flags (they are not
aotc's code); their headers are included with -isystem, so a bundle that includes them still
builds with -Wall -Wextra -Werror -pedantic.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from aotc.byoc.roots import expand
from aotc.errors import AotcError
from aotc.paths import cache_dir


def include_flags(libs: Iterable[dict[str, Any]]) -> list[str]:
    """-isystem DIR and -DNAME for a bundle's own sources (bundle.json "libraries")."""
    out: list[str] = []
    for lib in map(expand, libs):
        for d in lib.get("include_dirs", []):
            out += ["-isystem", str(d)]
        out += [f"-D{d}" for d in lib.get("defines", [])]
    return out


def _tool(cc: str, name: str) -> str:
    m = re.match(r"(.*-)?(gcc|cc|clang)(-[\d.]+)?$", Path(cc).name)
    prefix = (m.group(1) or "") if m else ""
    return shutil.which(prefix + name) or name


def archive(lib: dict[str, Any], cc: str, flags: Sequence[str]) -> Path:
    """The library's static archive built with ``cc`` and ``flags`` (a board's -mcpu ...,
    or -fPIC for the host) plus its own cflags and defines; cached."""
    lib = expand(lib)
    sources = [Path(s) for s in lib.get("sources", [])]
    incs = [Path(d) for d in lib.get("include_dirs", [])]
    missing = [s for s in sources if not s.is_file()]
    if missing:
        raise AotcError(f"library {lib['name']!r}: source {str(missing[0])!r} not found (was the "
                        f"library moved since the bundle was generated?)")
    all_flags = [*flags, *lib.get("cflags", []), *(f"-D{d}" for d in lib.get("defines", [])),
                 *(f"-I{d}" for d in incs)]
    h = hashlib.sha256()
    cc_path = Path(shutil.which(cc) or cc).resolve()
    st = cc_path.stat() if cc_path.exists() else None
    h.update(" ".join([lib["name"], str(cc_path), str(st.st_size if st else 0),
                       str(st.st_mtime_ns if st else 0), *all_flags]).encode())
    for f in sources + sorted(p for d in incs if d.is_dir() for p in d.rglob("*.h")):
        h.update(str(f).encode())
        h.update(f.read_bytes())
    name = re.sub(r"\W", "_", lib["name"])
    out = cache_dir() / f"lib{name}_{h.hexdigest()[:24]}.a"
    if out.exists():
        return out
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        objs = []
        jobs = []
        for k, src in enumerate(sources):
            obj = Path(tmp) / f"{k:04d}_{src.stem}.o"
            objs.append(obj)
            jobs.append([cc, *all_flags, "-c", str(src), "-o", str(obj)])
        _run_parallel(jobs, f"library {lib['name']!r} failed to compile with {cc}")
        tmp_out = Path(tmp) / out.name
        res = subprocess.run([_tool(cc, "ar"), "rcs", str(tmp_out), *map(str, objs)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise AotcError(f"library {lib['name']!r}: ar failed: {res.stderr.strip()[:300]}")
        os.replace(tmp_out, out)
    return out


def _run_parallel(jobs: list[list[str]], what: str) -> None:
    width = max(1, os.cpu_count() or 1)
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    for start in range(0, len(jobs), width):
        procs = [subprocess.Popen(j, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  env=env) for j in jobs[start:start + width]]
        for p in procs:
            _, err = p.communicate()
            if p.returncode != 0:
                first = next((ln for ln in err.splitlines() if "error" in ln), err[:300])
                raise AotcError(f"{what}: {first.strip()}")
