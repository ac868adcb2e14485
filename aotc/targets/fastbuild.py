"""The fast build path: the firmware aotc.targets.boards.build_firmware builds with CMake,
built with one compiler invocation per bundle from a per-board recipe (CMake's own flags,
startup and runtime objects), cached in aotc's cache directory."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aotc import paths
from aotc.targets.boards import (
    Board,
    FirmwareTooBig,
    ensure_toolchain,
    fit_report,
    load_board,
    render_test_main,
    run_build,
)

# A CMake configure + build costs 1.5-2.5 s per firmware. The fast path replays what the CMake
# path does with one compiler invocation per bundle: the flags come from a CMake build of a stub
# bundle (compile_commands.json and the link command), made once per board and cached together
# with its startup and runtime objects, which do not depend on the bundle.

FAST_PATH_VERSION = "1"  # part of the cache key: bump when the recipe's meaning changes
_MAP = "@AOTC_MAP@"  # where the link map goes, in a recipe's link flags


@dataclass(frozen=True)
class Recipe:
    """How the CMake path builds for one board, ready to replay."""

    compiler: str
    strict_flags: tuple[str, ...]  # the harness's compile flags (bundle and runtime get the same)
    link_flags: tuple[str, ...]  # the link line without objects, -o and libraries
    libraries: tuple[str, ...]
    objects: tuple[str, ...]  # startup and runtime objects built by CMake
    aux_files: tuple[str, ...]  # their .su and .ci files


def recipe_key(board: Board, runtime_dir: Path, build_type: str) -> str:
    """Hash of everything a recipe depends on: CMakeLists.txt, the board's files, the runtime
    and the compiler binary, by content and by place (a recipe holds absolute paths: one made
    in a checkout that has since moved or gone must not be reused)."""
    h = hashlib.sha256(f"{FAST_PATH_VERSION} {board.name} {build_type}".encode())
    files = [paths.cmake_lists(), *sorted(board.directory.iterdir()),
             *sorted(paths.boards_dir().glob("common/*")),
             *sorted(runtime_dir.glob("*.[ch]"))]
    for f in files:
        if f.is_file():
            h.update(str(f.resolve()).encode() + f.read_bytes())
    compiler = shutil.which(board.tool("gcc") if board.toolchain else os.environ.get("CC", "cc"))
    if compiler:
        st = Path(compiler).resolve().stat()
        h.update(f"{compiler} {st.st_size} {st.st_mtime_ns}".encode())
    return h.hexdigest()[:20]


def board_recipe(
    board: str | Board, runtime_dir: str | Path | None = None, build_type: str = "MinSizeRel"
) -> Recipe:
    """The board's recipe, from the cache or made now (one CMake build, ~2 s)."""
    board = load_board(board)
    runtime_dir = Path(runtime_dir or paths.runtime_dir()).resolve()
    key = recipe_key(board, runtime_dir, build_type)
    target = paths.cache_dir() / "recipes" / f"{board.name}-{key}"
    if not (target / "recipe.json").is_file():
        ensure_toolchain(board)
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".tmp-") as tmp:
            _make_recipe(board, runtime_dir, build_type, Path(tmp), target)
    return Recipe(**{k: tuple(v) if isinstance(v, list) else v
                     for k, v in json.loads((target / "recipe.json").read_text()).items()})


def _make_recipe(board: Board, runtime_dir: Path, build_type: str, tmp: Path, target: Path):
    stub, build, staged = tmp / "stub", tmp / "build", tmp / "recipe"
    for d in (stub, staged):
        d.mkdir()
    (stub / "bundle.json").write_text('{"name": "aotc_stub"}')
    main = stub / "aotc_stub_main.c"
    main.write_text("int main(void)\n{\n    return 0;\n}\n")
    configure = [
        "cmake", "-S", str(paths.cmake_lists().parent), "-B", str(build), "-G", "Unix Makefiles",
        f"-DAOTC_BOARD={board.name}", f"-DAOTC_BUNDLE={stub}", f"-DAOTC_MAIN={main}",
        f"-DAOTC_RUNTIME_DIR={runtime_dir}", f"-DCMAKE_BUILD_TYPE={build_type}",
        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
    ]  # fmt: skip
    run_build(configure, board, "cmake configure (fast-path recipe)")
    run_build(["cmake", "--build", str(build)], board, "build (fast-path recipe)")
    compiler, strict, objects, aux = "", [], [], []
    for entry in json.loads((build / "compile_commands.json").read_text()):
        tokens = shlex.split(entry["command"])
        output = Path(entry["directory"]) / tokens[tokens.index("-o") + 1]
        if Path(entry["file"]).resolve() == main.resolve():
            compiler, strict = tokens[0], _compile_flags(tokens[1:])
            continue
        # Startup and runtime: keep the objects CMake built, and their stack/call-graph files.
        objects.append(str(target / "objects" / output.name))
        for extra in (output.with_suffix(".su"), output.with_suffix(".ci")):
            if extra.is_file():
                aux.append(str(target / "objects" / extra.name))
        for f in (output, output.with_suffix(".su"), output.with_suffix(".ci")):
            if f.is_file():
                shutil.copy(f, staged / f.name)
    link = shlex.split((build / "CMakeFiles" / "aotc_app.dir" / "link.txt").read_text())
    link_flags, libraries, skip = [], [], False
    for t in link[1:]:
        if skip or t == "-o":
            skip = t == "-o"
        elif t.endswith((".obj", ".o")):
            continue  # CMake's objects: the fast path passes its own
        elif t.startswith("-l"):
            libraries.append(t)
        else:
            link_flags.append(f"-Wl,-Map={_MAP}" if t.startswith("-Wl,-Map=") else t)
    # One driver invocation compiles and links: a specs file must not be read twice (gcc
    # rejects picolibc.specs the second time), other repeated flags are harmless.
    link_flags = [f for f in link_flags if not (f.startswith("--specs=") and f in strict)]
    recipe = dict(compiler=compiler, strict_flags=strict, link_flags=link_flags,
                  libraries=libraries, objects=objects, aux_files=aux)
    if not compiler or not link_flags:
        raise RuntimeError(f"cannot read CMake's build commands for board {board.name}")
    (staged / "recipe.json").write_text(json.dumps(recipe, indent=1))
    (staged / "objects").mkdir()
    for f in staged.iterdir():
        if f.is_file() and f.name != "recipe.json":
            f.rename(staged / "objects" / f.name)
    with contextlib.suppress(OSError):  # another process made the same recipe first
        staged.rename(target)


def _compile_flags(tokens: list[str]) -> list[str]:
    """A compile command's flags without its input, output, dependency and include options."""
    flags, skip = [], False
    for t in tokens:
        if skip:
            skip = False
        elif t in ("-o", "-c", "-MT", "-MF", "-I"):
            skip = True
        elif t not in ("-MD", "-MMD") and not t.startswith("-I"):
            flags.append(t)
    return flags


def library_flags(strict: Sequence[str]) -> list[str]:
    """The board's code-generation flags (-mcpu, -mfloat-abi, specs, ...) for a BYOC library:
    the harness flags without warnings, -std, optimisation level and stack-usage outputs (the
    library brings its own -std and -O)."""
    out = []
    for f in strict:
        if f.startswith(("-W", "-std=", "-O", "-fstack-usage", "-fcallgraph-info")) or \
                f in ("-pedantic", "-g"):
            continue
        out.append(f)
    return out


def build_firmware_fast(
    bundle_dir: str | Path,
    board: str | Board,
    build_dir: str | Path,
    *,
    main: str | Path | None = None,
    runtime_dir: str | Path | None = None,
    build_type: str = "MinSizeRel",
) -> Path:
    """Same as build_firmware (same flags, same firmware) with one compiler invocation: the
    bundle's sources and the harness are compiled and linked with the board's cached startup
    and runtime objects. A firmware that does not fit raises FirmwareTooBig saying by how much
    and which symbols dominate."""
    board = load_board(board)
    runtime_dir = Path(runtime_dir or paths.runtime_dir()).resolve()
    recipe = board_recipe(board, runtime_dir, build_type)
    bundle_dir, build_dir = Path(bundle_dir).resolve(), Path(build_dir).resolve()
    meta = json.loads((bundle_dir / "bundle.json").read_text())
    build_dir.mkdir(parents=True, exist_ok=True)
    if main is None:
        main = build_dir / "aotc_test_main.c"
        main.write_text(render_test_main(bundle_dir))
    for f in recipe.aux_files:
        shutil.copy(f, build_dir)
    elf = build_dir / "aotc_app.elf"
    link = [f.replace(_MAP, str(build_dir / "aotc_app.map")) for f in recipe.link_flags]
    libs = meta.get("libraries", [])
    lib_flags, archives = [], []
    if libs:  # BYOC libraries (CMSIS-NN, ...) built for this board, cached by content
        from aotc.targets.libraries import archive, include_flags

        lib_flags = include_flags(libs)
        archives = [str(archive(lib, recipe.compiler, library_flags(recipe.strict_flags)))
                    for lib in libs]
    cmd = [recipe.compiler, *recipe.strict_flags, f"-I{bundle_dir}", f"-I{runtime_dir}",
           *lib_flags, "-dumpdir", f"{build_dir}/", str(Path(main).resolve()),
           *map(str, sorted(bundle_dir.glob("*.c"))), *recipe.objects, *archives,
           *link]  # fmt: skip
    (build_dir / "aotc_bundle.json").write_text(json.dumps(meta, indent=1))
    try:
        run_build([*cmd, "-o", str(elf), *recipe.libraries], board, "build")
    except FirmwareTooBig as e:
        # Link again keeping the oversized ELF (--noinhibit-exec) to measure what is too big.
        oversize = build_dir / "aotc_oversize.elf"
        proc = subprocess.run([*cmd, "-Wl,--noinhibit-exec", "-o", str(oversize),
                               *recipe.libraries], check=False, capture_output=True)
        report = fit_report(oversize, board) if proc.returncode == 0 else None
        raise FirmwareTooBig(report or str(e)) from None
    return elf
