"""Build loop-IR kernels into a shared library and call them from numpy.

Each kernel is printed with aotc.codegen.c.CPrinter into one C file with an exported wrapper
``run_<name>`` per kernel, compiled with the strict flags the bundles use, and loaded with cffi.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import cffi
import numpy as np

from aotc.codegen.c import CPrinter
from aotc.loops.loop_ir import Kernel
from aotc.paths import runtime_dir

CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-shared", "-fPIC", "-O1",
          "-ffp-contract=off"]


def _wrapper(k: Kernel) -> tuple[str, str]:
    params = ", ".join(f"{'const ' if b.role in ('in', 'const') else ''}{b.dtype.ctype} *{b.name}"
                       for b in k.params)
    proto = f"void run_{k.name}({params})"
    call = ", ".join(b.name for b in k.params)
    return proto + ";", f"{proto}\n{{\n    {k.name}({call});\n}}\n"


class Library:
    """The compiled kernels; ``run(name, **arrays)`` fills the output arrays in place."""

    def __init__(self, kernels: Sequence[Kernel], build_dir: Path) -> None:
        printer = CPrinter()
        protos, parts = [], ["#include <math.h>", "#include <stdint.h>",
                             '#include "aotc_runtime.h"', ""]
        self.kernels = {k.name: k for k in kernels}
        for k in kernels:
            proto, wrapper = _wrapper(k)
            protos.append(proto)
            parts += [printer.kernel(k), "", wrapper]
        self.source = "\n".join(parts)
        digest = hashlib.sha256(self.source.encode()).hexdigest()[:16]
        src = build_dir / f"kernels_{digest}.c"
        lib = build_dir / f"kernels_{digest}.so"
        src.write_text(self.source)
        res = subprocess.run(["cc", *CFLAGS, "-I", str(runtime_dir()), str(src), "-o", str(lib),
                              "-lm"], capture_output=True, text=True)
        assert res.returncode == 0, f"{res.stderr}\n{self.source}"
        self.ffi = cffi.FFI()
        self.ffi.cdef("\n".join(protos))
        self.lib = self.ffi.dlopen(str(lib))

    def run(self, name: str, arrays: Mapping[str, np.ndarray]) -> None:
        k = self.kernels[name]
        args = []
        for b in k.params:
            a = arrays[b.name]
            assert a.dtype == b.dtype.np and a.size == b.size and a.flags.c_contiguous, b
            args.append(self.ffi.from_buffer(f"{b.dtype.ctype}[]", a, require_writable=False))
        getattr(self.lib, f"run_{name}")(*args)


def build(variants: Mapping[str, Kernel], build_dir: Path) -> Library:
    """Compile every variant under its own C name (the dict key)."""
    return Library([replace(k, name=name) for name, k in variants.items()], build_dir)
