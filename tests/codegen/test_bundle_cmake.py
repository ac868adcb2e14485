"""The bundle's own CMakeLists.txt builds it as a static library, warning-free under
-std=c99 -Wall -Wextra -Werror -pedantic, with the host cc and with arm-none-eabi-gcc."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import aotc

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import make_example  # noqa: E402

STRICT = "-Wall -Wextra -Werror -pedantic"


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("kws")
    aotc.compile(make_example.build(), out, name="kws")
    return out


@pytest.mark.parametrize("toolchain", [None, "cortex-m4f", "cortex-m0plus", "rv32imc"])
def test_bundle_cmake_builds_static_library(bundle_dir, tmp_path, toolchain):
    import os

    # CFLAGS (not -DCMAKE_C_FLAGS) so the toolchain file's own flags are kept.
    env = dict(os.environ, CFLAGS=STRICT)
    args = ["cmake", "-S", str(bundle_dir), "-B", str(tmp_path)]
    if toolchain:
        args.append(f"-DCMAKE_TOOLCHAIN_FILE={ROOT / 'boards' / toolchain / 'toolchain.cmake'}")
    cfg = subprocess.run(args, capture_output=True, text=True, env=env)
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr
    build = subprocess.run(["cmake", "--build", str(tmp_path)], capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    assert "warning" not in (build.stdout + build.stderr).lower()
    assert (tmp_path / "libkws.a").is_file()


def test_generated_sources_have_no_heap_or_stdio(bundle_dir):
    import re

    for f in list(bundle_dir.glob("*.c")) + list((bundle_dir / "runtime").glob("*.c")):
        text = f.read_text()
        assert not re.search(r"\b(malloc|calloc|realloc|free|printf|fprintf)\s*\(", text), f
        # no mutable globals: every file-scope object is const
        for line in text.splitlines():
            if re.match(r"^(static\s+)?(float|int\d*_t|uint\d*_t)\s+\w+\s*\[", line):
                raise AssertionError(f"{f.name}: non-const global: {line}")
