"""Where CMSIS-NN is and how to build it: the include dirs and integer sources of a CMSIS-NN
tree, a cached host build (static archive and shared library, pure-C path) for bundles' host
.so and for asking the library its scratch sizes, the target's feature set (pure C, DSP, MVE)
as the cross compiler's -mcpu selects it, and the CMake that builds it for a firmware.

aotc never copies CMSIS-NN into a bundle: a bundle names the tree through the CMSIS_NN_PATH
CMake cache variable; aotc finds it from an explicit path or the CMSIS_NN_PATH environment
variable.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aotc.errors import AotcError
from aotc.paths import cache_dir

ENV_VAR = "CMSIS_NN_PATH"
MARKER = Path("Include") / "arm_nnfunctions.h"
# CMSIS-NN's feature sets, named after the code path its sources take: "none" (pure C: the
# host, Cortex-M0/M0+/M3), "dsp" (__ARM_FEATURE_DSP: M4, M7, M33 with DSP) and "mve"
# (__ARM_FEATURE_MVE: M55, M85 Helium). The compiler's -mcpu sets the macros; CMSIS-NN's
# arm_nn_math_types.h turns them into ARM_MATH_DSP / ARM_MATH_MVEI.
FEATURES = ("none", "dsp", "mve")
# The library's own flags: C99 at -O2 (TFLM builds its kernels at -O2; -Os costs CMSIS-NN
# 13-31% more instructions, ../shared/research/cmsis_nn_anchor.md). Its sources are not held
# to aotc's -Wall -Wextra -Werror -pedantic: they are compiled without warnings enabled.
LIB_FLAGS = ("-std=c99", "-O2")
HOST_FLAGS = (*LIB_FLAGS, "-fPIC")
# The float (f16/f32) kernels need ARM_NN_ENABLE_F32/F16 and are not used: leave them out, as
# CMSIS-NN's own CMakeLists.txt does by default.
_FLOAT_SOURCE = re.compile(r"_(f16|f32|flt)\.c$")


@dataclass(frozen=True)
class CmsisNN:
    """A located CMSIS-NN tree (``root`` holds Include/ and Source/)."""

    root: Path

    @property
    def include_dirs(self) -> list[Path]:
        return [self.root / "Include"]

    def sources(self) -> list[Path]:
        """The C sources of the integer kernels: all of Source/**/*.c but the float ones,
        sorted. One static archive of them lets the linker keep only what a bundle calls."""
        return sorted(p for p in (self.root / "Source").rglob("*.c")
                      if not _FLOAT_SOURCE.search(p.name))

    def headers(self) -> list[Path]:
        return sorted((self.root / "Include").rglob("*.h"))

    def fingerprint(self, cc: str, flags: Sequence[str]) -> str:
        """The cache key of a build: the tree's path, every source and header (name and
        content), the compiler (path, size, mtime) and the flags."""
        h = hashlib.sha256()
        cc_path = Path(shutil.which(cc) or cc).resolve()
        st = cc_path.stat()
        h.update(" ".join([str(self.root), str(cc_path), str(st.st_size), str(st.st_mtime_ns),
                           *flags]).encode())
        for f in self.sources() + self.headers():
            h.update(str(f.relative_to(self.root)).encode())
            h.update(f.read_bytes())
        return h.hexdigest()[:24]

    def host_archive(self, cc: str | None = None) -> Path:
        """libcmsis-nn.a for the host (pure-C path, -fPIC so a bundle's host .so can link it),
        built once per fingerprint into aotc's cache."""
        return self._host_build(cc, "a")

    def host_shared(self, cc: str | None = None) -> Path:
        """The same objects as one shared library, for cffi (scratch sizes, kernel sums)."""
        return self._host_build(cc, "so")

    def _host_build(self, cc: str | None, kind: str) -> Path:
        cc = cc or host_cc()
        key = self.fingerprint(cc, HOST_FLAGS)
        out = cache_dir() / f"cmsis_nn_{key}.{kind}"
        if out.exists():
            return out
        objs = self._host_objects(cc, key)
        with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
            tmp_out = Path(tmp) / out.name
            if kind == "a":
                cmd = [_tool(cc, "ar"), "rcs", str(tmp_out), *map(str, objs)]
            else:
                cmd = [cc, "-shared", "-o", str(tmp_out), *map(str, objs)]
            _run(cmd, f"could not link the CMSIS-NN host {kind} library")
            os.replace(tmp_out, out)
        return out

    def _host_objects(self, cc: str, key: str) -> list[Path]:
        # Source basenames are unique in CMSIS-NN, so the objects can share one directory.
        obj_dir = cache_dir() / f"cmsis_nn_{key}.o"
        objs = [obj_dir / (s.stem + ".o") for s in self.sources()]
        if all(o.exists() for o in objs):
            return objs
        tmp = Path(tempfile.mkdtemp(dir=cache_dir()))
        try:
            _run([cc, *HOST_FLAGS, *(f"-I{d}" for d in self.include_dirs), "-c",
                  *map(str, self.sources())],
                 f"CMSIS-NN failed to compile with {cc}", cwd=tmp)
            try:
                os.replace(tmp, obj_dir)  # published whole, or not at all
            except OSError:
                if not all(o.exists() for o in objs):  # not another process's finished build
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return objs


def locate(path: str | os.PathLike[str] | None = None) -> CmsisNN:
    """The CMSIS-NN tree at ``path``, else at $CMSIS_NN_PATH; AotcError when neither is given
    or the directory is not a CMSIS-NN tree (no Include/arm_nnfunctions.h)."""
    where = "--cmsis-nn-path"
    if path is None or str(path) == "":
        path = os.environ.get(ENV_VAR) or None
        where = ENV_VAR
    if path is None:
        raise AotcError("CMSIS-NN not found: pass --cmsis-nn-path DIR or set CMSIS_NN_PATH to "
                        "a CMSIS-NN tree (the directory holding Include/ and Source/)")
    root = Path(path).expanduser()
    if not root.is_dir():
        raise AotcError(f"CMSIS-NN not found: {where} {str(path)!r} is not a directory")
    if not (root / MARKER).is_file() or not (root / "Source").is_dir():
        raise AotcError(f"{where} {str(path)!r} is not a CMSIS-NN tree (no "
                        f"Include/arm_nnfunctions.h and Source/ in it)")
    return CmsisNN(root.resolve())


def host_cc() -> str:
    """The host C compiler aotc's host builds use ($CC, else cc)."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        raise AotcError(f"no host C compiler ({cc!r}); install gcc or set CC")
    return cc


def feature_set(cc: str, cflags: Sequence[str] = ()) -> str:
    """The CMSIS-NN code path ``cc`` with ``cflags`` (a board's -mcpu, -mfpu, ...) compiles:
    "mve" if it predefines __ARM_FEATURE_MVE with integer MVE, else "dsp" if it predefines
    __ARM_FEATURE_DSP == 1, else "none". Asks the compiler (-dM -E), as CMSIS-NN's headers do,
    rather than a table of CPU names."""
    if shutil.which(cc) is None:
        raise AotcError(f"C compiler {cc!r} not found")
    res = subprocess.run([cc, *cflags, "-dM", "-E", "-x", "c", os.devnull],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise AotcError(f"{cc} {' '.join(cflags)}: {_first_error(res.stderr)}")
    macros = dict(re.findall(r"^#define (\w+) (.*)$", res.stdout, re.M))
    mve = macros.get("__ARM_FEATURE_MVE")
    if mve is not None and int(mve, 0) & 1:
        return "mve"
    if macros.get("__ARM_FEATURE_DSP", "").strip() == "1":
        return "dsp"
    return "none"


CMAKE_SNIPPET = """\
# CMSIS-NN, built from the tree CMSIS_NN_PATH names (aotc does not copy it into the bundle).
set(CMSIS_NN_PATH "{default}" CACHE PATH
    "CMSIS-NN tree (the directory holding Include/ and Source/)")
if(NOT CMSIS_NN_PATH AND DEFINED ENV{{CMSIS_NN_PATH}})
  set(CMSIS_NN_PATH "$ENV{{CMSIS_NN_PATH}}" CACHE PATH "CMSIS-NN tree" FORCE)
endif()
if(NOT EXISTS "${{CMSIS_NN_PATH}}/Include/arm_nnfunctions.h")
  message(FATAL_ERROR "CMSIS_NN_PATH='${{CMSIS_NN_PATH}}' is not a CMSIS-NN tree "
                      "(no Include/arm_nnfunctions.h): configure with -DCMSIS_NN_PATH=DIR")
endif()
file(GLOB_RECURSE {var} CONFIGURE_DEPENDS "${{CMSIS_NN_PATH}}/Source/*.c")
list(FILTER {var} EXCLUDE REGEX "_(f16|f32|flt)\\\\.c$")
add_library({target} STATIC ${{{var}}})
target_include_directories({target} PUBLIC "${{CMSIS_NN_PATH}}/Include")
# CMSIS-NN picks its pure-C, DSP or MVE path from the -mcpu in the toolchain's C flags.
target_compile_options({target} PRIVATE {options})
"""


def cmake_snippet(target: str = "cmsis-nn", default_path: str | os.PathLike[str] | None = None
                  ) -> str:
    """CMake for a bundle's CMakeLists.txt: the CMSIS_NN_PATH cache variable (default
    ``default_path``, else empty, then $ENV{CMSIS_NN_PATH}), a configure-time check that it is a
    CMSIS-NN tree, and a static library ``target`` of its integer sources with its include
    directory PUBLIC; link it with ``target_link_libraries(<bundle> PRIVATE <target>)``."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.+-]*", target):
        raise AotcError(f"not a CMake target name: {target!r}")
    default = "" if default_path is None else Path(default_path).as_posix()
    if '"' in default or "$" in default or ";" in default:
        raise AotcError(f"CMSIS-NN path {default!r} cannot be written into CMake")
    var = re.sub(r"\W", "_", target).upper() + "_SOURCES"
    return CMAKE_SNIPPET.format(default=default, target=target, var=var,
                                options=" ".join(LIB_FLAGS))


def _tool(cc: str, name: str) -> str:
    """The binutils tool next to ``cc`` (gcc -> ar, arm-none-eabi-gcc -> arm-none-eabi-ar)."""
    m = re.match(r"(.*-)?(gcc|cc|clang)(-[\d.]+)?$", Path(cc).name)
    prefix = m.group(1) or "" if m else ""
    return shutil.which(prefix + name) or name


def _run(cmd: list[str], what: str, cwd: Path | None = None) -> None:
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if res.returncode != 0:
        raise AotcError(f"{what}: {_first_error(res.stderr)}")


def _first_error(stderr: str) -> str:
    line = next((ln for ln in stderr.splitlines() if "error" in ln), stderr.strip()[:300])
    return line.strip() or "failed"
