"""Boards: build a compiled bundle into firmware for one board and run it under QEMU.

A board is data in ``boards/<name>/`` (board.toml, toolchain.cmake, link.ld, startup); this
module reads it and drives cmake, QEMU and binutils (aotc.targets.fastbuild builds the same firmware
without cmake). Every emulator run has a timeout, and every failure becomes one RuntimeError
naming the cause. Only stdlib, numpy and (for rendering) jinja2.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aotc import paths
from aotc.byoc.roots import roots as library_roots
from aotc.targets import measure

# Exit statuses with a meaning of their own (harness: templates/test_main.c.j2; fault handlers:
# boards/common/cortexm_startup.c and boards/rv32imc/startup.S; 124/134: timeout(1) and QEMU).
_STATUS_TEXT = {
    101: "the harness could not read an input file",
    102: "the harness could not write an output file",
    124: "the firmware hung (timeout)",
    134: "the CPU locked up (a fault with no usable handler) or QEMU aborted",
    250: "the firmware faulted",
}
_QEMU_NOISE = ("Timer with period zero, disabling",)


@dataclass(frozen=True)
class MemoryRegion:
    name: str
    origin: int
    length: int


@dataclass(frozen=True)
class Board:
    """One row of boards/: what to compile with, what to run on, what must fit."""

    name: str
    description: str
    cpu: str
    arch: str
    toolchain: str  # GNU triple such as "arm-none-eabi"; "" for the host compiler
    cflags: tuple[str, ...]
    features: frozenset[str]
    part: str  # the representative real chip that fits_check measures against
    flash_bytes: int  # 0: no limit (host)
    ram_bytes: int
    stack_bytes: int  # reserved in link.ld, counted by fits_check
    heap_bytes: int
    qemu: tuple[str, ...]  # emulator command without -kernel; empty for the host
    machine: str
    qemu_clock_hz: int  # the emulated core clock (SysTick's), 0 when board.toml does not say
    memory: tuple[MemoryRegion, ...]
    requires: dict[str, str]  # tool (program, or "specs:FILE") -> Debian package providing it
    directory: Path
    # Memory pools for the arena, fastest first: (name, bytes, linker section or None), from
    # board.toml's [[pools]]; compiling with --target for the board plans into them.
    pools: tuple[tuple[str, int, str | None], ...] = ()
    # board.toml's [cycles]: the timing model and wait states (aotc.targets.cycles.for_board).
    cycles: tuple[tuple[str, object], ...] = ()
    # board.toml's [serial]: the UART `aotc validate` talks through (aotc.targets.serialfw);
    # empty when the board has none described.
    serial: tuple[tuple[str, object], ...] = ()

    @property
    def is_host(self) -> bool:
        return not self.qemu

    @property
    def toolchain_file(self) -> Path:
        return self.directory / "toolchain.cmake"

    def tool(self, name: str) -> str:
        """A binutils program for this board: size, nm, ..."""
        return f"{self.toolchain}-{name}" if self.toolchain else name


def list_boards() -> list[str]:
    return sorted(p.parent.name for p in paths.boards_dir().glob("*/board.toml"))


def load_board(name: str | Board) -> Board:
    if isinstance(name, Board):
        return name
    path = paths.boards_dir() / name / "board.toml"
    if not path.is_file():
        raise ValueError(f"unknown board {name!r}; known boards: {', '.join(list_boards())}")
    t = tomllib.loads(path.read_text())
    part, qemu = t.get("part", {}), t.get("qemu", {})
    return Board(
        **{k: t[k] for k in ("name", "description", "cpu", "arch", "toolchain")},
        cflags=tuple(t["cflags"]),
        features=frozenset(t["features"]),
        part=part["name"],
        **{k: part.get(k, 0) for k in ("flash_bytes", "ram_bytes", "stack_bytes", "heap_bytes")},
        qemu=tuple(qemu.get("command", ())),
        machine=qemu.get("machine", ""),
        qemu_clock_hz=qemu.get("clock_hz", 0),
        memory=tuple(MemoryRegion(**m) for m in qemu.get("memory", ())),
        requires=dict(t["requires"]),
        directory=path.parent,
        pools=tuple((p["name"], p["bytes"], p.get("section")) for p in t.get("pools", ())),
        cycles=tuple(sorted(t.get("cycles", {}).items())),
        serial=tuple(sorted(t.get("serial", {}).items())),
    )


def ensure_toolchain(board: str | Board) -> None:
    """Raises RuntimeError naming the Debian package of every tool the board lacks."""
    board = load_board(board)
    missing = {tool: pkg for tool, pkg in board.requires.items() if not _have(board, tool)}
    if missing:
        packages = " ".join(sorted(set(missing.values())))
        raise RuntimeError(
            f"board {board.name}: missing {', '.join(missing)}; install with "
            f"`apt-get install -y --no-install-recommends {packages}`"
        )


def _have(board: Board, tool: str) -> bool:
    if not tool.startswith("specs:"):
        return shutil.which(tool) is not None
    gcc = board.tool("gcc")  # a specs file counts when gcc finds it
    if shutil.which(gcc) is None:
        return False
    out = subprocess.run(
        [gcc, f"-print-file-name={tool[6:]}"], check=False, capture_output=True, text=True
    )
    return os.path.isabs(out.stdout.strip())


# --- building ----------------------------------------------------------------------------


@functools.cache
def _jinja_env():  # compiling the template costs as much as compiling the C: once per process
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(paths.templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_test_main(bundle_dir: str | Path) -> str:
    """The harness C source for a bundle (templates/test_main.c.j2)."""
    meta = _load_bundle(Path(bundle_dir))

    def tensors(key: str) -> list[dict]:
        return [dict(t, count=max(1, int(np.prod(t["shape"], dtype=np.int64)))) for t in meta[key]]

    return _jinja_env().get_template("test_main.c.j2").render(
        name=meta["name"],
        NAME=meta["name"].upper(),
        arena_bytes=max(1, meta["arena_bytes"]),
        arena_align=meta.get("arena_align", 16),
        inputs=tensors("inputs"),
        outputs=tensors("outputs"),
        io_in_arena=bool(meta.get("io_in_arena")),
        pools=meta.get("pools", []),
        state_bytes=meta.get("state", {}).get("bytes", 0),
    )


def build_firmware(
    bundle_dir: str | Path,
    board: str | Board,
    build_dir: str | Path,
    *,
    main: str | Path | None = None,
    runtime_dir: str | Path | None = None,
    build_type: str = "MinSizeRel",
) -> Path:
    """Configures and builds bundle + runtime_c + harness (or `main`); returns the ELF path.

    A copy of bundle.json is kept beside the ELF so run_firmware knows the tensors.
    """
    board = load_board(board)
    ensure_toolchain(board)
    bundle_dir, build_dir = Path(bundle_dir).resolve(), Path(build_dir).resolve()
    meta = _load_bundle(bundle_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    (build_dir / "CMakeCache.txt").unlink(missing_ok=True)  # the board may have changed
    if main is None:
        main = build_dir / "aotc_test_main.c"
        main.write_text(render_test_main(bundle_dir))
    configure = [
        "cmake", "-S", str(paths.cmake_lists().parent), "-B", str(build_dir),
        f"-DAOTC_BOARD={board.name}",
        f"-DAOTC_BUNDLE={bundle_dir}",
        f"-DAOTC_MAIN={Path(main).resolve()}",
        f"-DAOTC_RUNTIME_DIR={Path(runtime_dir or paths.runtime_dir()).resolve()}",
        f"-DCMAKE_BUILD_TYPE={build_type}",
        *(f"-D{var}={path}" for var, path in library_roots().items()),  # ${VAR} in bundle.json
    ]  # fmt: skip
    run_build(configure, board, "cmake configure")
    run_build(["cmake", "--build", str(build_dir), "-j", "4"], board, "build")
    (build_dir / "aotc_bundle.json").write_text(json.dumps(meta, indent=1))
    return build_dir / "aotc_app.elf"


class FirmwareTooBig(RuntimeError):
    """The firmware does not fit the board: the link overflowed a memory region, or the ELF
    exceeds the real part's flash or RAM (fits_check)."""


def run_build(cmd: list[str], board: Board, what: str) -> None:
    """Runs a build command; a region overflow raises FirmwareTooBig, other failures
    RuntimeError with the error lines."""
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    except FileNotFoundError:
        ensure_toolchain(board)  # raises naming the Debian package
        raise
    if proc.returncode == 0:
        return
    log = proc.stdout + proc.stderr
    overflows = re.findall(r"region `(\w+)' overflowed by (\d+) bytes", log)
    if overflows:
        regions = ", ".join(f"region {r} overflowed by {n} bytes" for r, n in overflows)
        raise FirmwareTooBig(
            f"firmware does not fit board {board.name} ({board.part}): {regions} on "
            f"{board.machine} (stack {board.stack_bytes} and heap {board.heap_bytes} bytes are "
            f"reserved in link.ld)"
        )
    errors = [ln for ln in log.splitlines() if "error" in ln.lower()] or log.splitlines()[-20:]
    raise RuntimeError(f"{what} failed for board {board.name}:\n" + "\n".join(errors[:20]))


def _load_bundle(bundle_dir: Path) -> dict:
    path = bundle_dir / "bundle.json"
    if not path.is_file():
        raise RuntimeError(f"not a bundle directory (no bundle.json): {bundle_dir}")
    return json.loads(path.read_text())


# --- running -----------------------------------------------------------------------------


def run_firmware(
    elf: str | Path,
    board: str | Board,
    inputs: list[np.ndarray],
    workdir: str | Path | None = None,
    timeout: float = 60,
) -> list[np.ndarray]:
    """Runs the harness ELF on the board's emulator (or natively for host); returns outputs.

    Inputs go in as input_<i>.bin and outputs come back from output_<i>.bin in `workdir`
    (a fresh temporary directory when None).
    """
    board = load_board(board)
    with _workdir(workdir) as cwd:
        return _run(Path(elf), board, inputs, cwd, timeout)


def count_instructions(
    elf: str | Path,
    board: str | Board,
    inputs: list[np.ndarray],
    workdir: str | Path | None = None,
    timeout: float = 120,
    cycles: bool = False,
) -> dict:
    """Executed instructions of one run: {"total", "inference", "run", "kernels": {name: n},
    "inclusive": {name: n}, "inlined"}; with cycles, on a QEMU board with a timing model,
    also "cycles": the estimate (aotc.targets.cycles.estimate; None without a model).

    "inference" is everything from entering <name>_run until it returns, callees included
    (libm, memcpy, the soft-float helpers of FPU-less cores). "run" is <name>_run's own
    instructions. "kernels" are self counts: instructions inside the kernel function, not in
    what it calls. "inclusive" counts, with the same keys, everything from each call of the
    kernel by <name>_run until it returns, callees included: the inclusive counts and what
    <name>_run executes outside them add up to "inference". Kernels gcc folded into one body
    (identical code) share one count under "a=b=...". A kernel with no symbol was inlined and
    is listed in "inlined". QEMU boards use the TCG plugin (exact, repeatable); the host uses
    callgrind, whose total includes the dynamic loader and libc start-up.
    """
    board = load_board(board)
    elf = Path(elf).resolve()
    meta = _bundle_of(elf)
    run_fn = f"{meta['name']}_run"
    with _workdir(workdir) as cwd:
        if board.is_host:
            out = cwd / "aotc_callgrind.out"
            _run(elf, board, inputs, cwd, timeout, wrapper=measure.callgrind_command(out))
            total, counts = measure.parse_callgrind(out)
            inference = measure.parse_callgrind(out, inclusive=True)[1].get(run_fn)
            calls = measure.parse_callgrind(out, inclusive=True, caller=run_fn)[1]
        else:
            names = [*meta["kernels"], run_fn]
            ranges = measure.symbol_ranges(board.tool("nm"), elf, [*names, "main"])
            counted = measure.merge_aliases([r for r in ranges if r[0] != "main"], names)
            kinds = {key: "call" for key, _, _ in counted if key != run_fn}
            measure.write_ranges(cwd / "aotc_ranges.txt", counted, {**kinds, run_fn: "caller"})
            out = cwd / "aotc_insncount.txt"
            out.unlink(missing_ok=True)
            # Relative file names: QEMU runs in cwd and splits -plugin arguments at commas.
            plugin = f"{measure.plugin_library()},ranges=aotc_ranges.txt,out={out.name}"
            timing = cycle_model(board) if cycles else None
            if timing is not None:
                plugin += ",blocks=1"
            where = {name: (lo, hi) for name, lo, hi in ranges}
            if run_fn in where and "main" in where:  # the window: run's entry until back in main
                plugin += f",enter={where[run_fn][0]:#x},caller={where['main'][0]:#x}-" \
                          f"{where['main'][1]:#x}"
            _run(elf, board, inputs, cwd, timeout, qemu_args=["-plugin", plugin])
            total, counts, calls = measure.parse_plugin_output(out)
            inference = counts.pop("window", None)
            if timing is not None:
                estimate = _estimate_cycles(board, timing, elf, out,
                                            [key for key, kind in kinds.items() if kind == "call"])
    kernels = {}  # in kernel order; a folded group "a=b" where its first member would be
    for k in meta["kernels"]:
        kernels.update({key: n for key, n in counts.items() if k in key.split("=")})
    counted = {name for key in kernels for name in key.split("=")}
    extra = {}
    if cycles:
        extra["cycles"] = None if board.is_host or timing is None else dict(
            estimate, kernels={key: estimate["kernels"].get(key, 0) for key in kernels})
    return {
        **extra,
        "total": total,
        "inference": inference,
        "run": counts.get(run_fn),
        "kernels": kernels,
        "inclusive": {key: calls.get(key, 0) for key in kernels},
        "inlined": [k for k in meta["kernels"] if k not in counted],
    }


def cycle_model(board: str | Board):
    """(core, memory) of the board's timing model (board.toml [cycles], else its cpu), or
    None when aotc has no model for its core."""
    from aotc.targets import cycles

    return cycles.for_board(load_board(board))


def _estimate_cycles(board: Board, timing, elf: Path, out: Path, calls: list[str]) -> dict:
    from aotc.targets import cycles

    core, memory = timing
    return cycles.estimate(core, memory, board.tool("objdump"), elf, board.arch,
                           measure.parse_blocks(out), calls)


def _run(elf: Path, board: Board, inputs, cwd: Path, timeout: float, *, qemu_args=(), wrapper=()):
    meta = _bundle_of(elf)
    if len(inputs) != len(meta["inputs"]):
        raise ValueError(f"{meta['name']} takes {len(meta['inputs'])} inputs, got {len(inputs)}")
    for i, (x, t) in enumerate(zip(inputs, meta["inputs"])):
        x = np.asarray(x)
        if x.dtype != np.dtype(t["dtype"]) or list(x.shape) != list(t["shape"]):
            raise ValueError(
                f"input {i} ({t['name']}): expected {t['dtype']}{t['shape']}, "
                f"got {x.dtype}{list(x.shape)}"
            )
        (cwd / f"input_{i}.bin").write_bytes(
            np.ascontiguousarray(x, x.dtype.newbyteorder("<")).tobytes()
        )
    for i in range(len(meta["outputs"])):
        (cwd / f"output_{i}.bin").unlink(missing_ok=True)
    program = (*wrapper, *board.qemu, str(elf))[0]
    if shutil.which(program) is None:
        ensure_toolchain(board)  # raises naming the Debian package of a board tool
        raise RuntimeError(f"{program} not found (for valgrind: apt-get install valgrind)")
    if board.is_host:
        cmd = [*wrapper, str(elf)]
    else:
        semihosting = ["-semihosting-config", "enable=on,target=native"]
        cmd = [*board.qemu, "-nographic", "-monitor", "none", "-serial", "null", *semihosting,
               *qemu_args, "-kernel", str(elf)]  # fmt: skip
    try:
        proc = subprocess.run(
            cmd, cwd=cwd, check=False, capture_output=True, text=True, timeout=timeout
        )
        rc, log = proc.returncode, proc.stderr + proc.stdout
    except subprocess.TimeoutExpired as e:  # its stderr is bytes even with text=True
        rc, log = 124, e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else ""
    if rc != 0:
        raise RuntimeError(_describe_failure(rc, log, board, meta["name"], timeout))
    return read_outputs(cwd, meta)


def read_outputs(cwd: Path, meta: dict) -> list[np.ndarray]:
    """The outputs a run left in ``cwd`` (output_<i>.bin), as the bundle's metadata shapes them
    (e.g. after count_instructions with a workdir: the counted run's outputs)."""
    outputs = []
    for i, t in enumerate(meta["outputs"]):
        path = Path(cwd) / f"output_{i}.bin"
        raw = path.read_bytes() if path.is_file() else b""
        if len(raw) != t["bytes"]:
            raise RuntimeError(f"{path.name} ({t['name']}): {len(raw)} bytes, not {t['bytes']}")
        dtype = np.dtype(t["dtype"]).newbyteorder("<")
        outputs.append(np.frombuffer(raw, dtype=dtype).astype(t["dtype"]).reshape(t["shape"]))
    return outputs


def _describe_failure(rc: int, log: str, board: Board, name: str, timeout: float) -> str:
    if rc < 0 and not board.is_host:  # QEMU aborts (SIGABRT) on a lockup: shell status 134
        rc = 128 - rc
    if rc < 0:
        what = f"the program was killed by {signal.Signals(-rc).name}"
    elif rc == 124:
        what = f"{_STATUS_TEXT[124]}: no exit within {timeout:g} s"
    else:
        what = _STATUS_TEXT.get(rc, f"{name}_run (or the harness) returned status {rc}")
    lines = [ln for ln in log.splitlines() if ln.strip() and not ln.startswith(_QEMU_NOISE)]
    detail = "; ".join(lines[:3])
    where = board.machine or "host"
    return f"{board.name} ({where}): {what} (exit status {rc})" + (f": {detail}" if detail else "")


def _bundle_of(elf: Path) -> dict:
    path = Path(elf).parent / "aotc_bundle.json"
    if not path.is_file():
        raise RuntimeError(f"{path} is missing: build the ELF with "
                           f"aotc.targets.boards.build_firmware")
    return json.loads(path.read_text())


# --- measuring -----------------------------------------------------------------------------


def elf_sizes(elf: str | Path, board: str | Board) -> dict:
    """Bytes from `size -A` and `nm`: text, rodata, data, bss; flash = text + rodata + data;
    ram = data + bss (the arena is in bss; link.ld's stack and heap reservations are not);
    arena = the size of the harness's `arena` symbol (0 without one); with memory pools,
    "pools" gives the size of each `pool_<name>` array (in their own sections: not in ram)."""
    board = load_board(board)
    sizes = measure.section_sizes(_check_output([board.tool("size"), "-A", str(elf)]))
    sizes["flash"] = sizes["text"] + sizes["rodata"] + sizes["data"]
    sizes["ram"] = sizes["data"] + sizes["bss"]
    nm = _check_output([board.tool("nm"), "-S", str(elf)])
    sizes["arena"] = measure.symbol_size(nm, "arena")
    pools = {}
    for line in nm.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[3].startswith("pool_") and fields[2] in "bBdD":
            pools[fields[3][5:]] = int(fields[1], 16)
    if pools:
        sizes["pools"] = pools
    return sizes


def kernel_flash(elf: str | Path, board: str | Board, kernels: list[str]) -> dict[str, int]:
    """Code bytes of each kernel function, from `nm -S`, keyed as count_instructions keys its
    counts: gcc's clones and .cold parts count for their kernel, kernels folded into one body
    share one entry "a=b", an inlined kernel has none. In kernel order."""
    board = load_board(board)
    ranges = measure.symbol_ranges(board.tool("nm"), Path(elf), kernels)
    sizes: dict[str, int] = {}
    for key, lo, hi in measure.merge_aliases(ranges, kernels):
        sizes[key] = sizes.get(key, 0) + hi - lo
    rank = {k: i for i, k in enumerate(kernels)}
    return dict(sorted(sizes.items(), key=lambda kv: rank[kv[0].split("=")[0]]))


def fits_check(sizes: dict, board: str | Board) -> str | None:
    """None when the firmware fits the board's real part, else what is exceeded and by how much.
    RAM needed = data + bss + the stack and heap reserved in the board's link.ld."""
    board = load_board(board)
    problems = []
    if board.flash_bytes and sizes["flash"] > board.flash_bytes:
        problems.append(
            f"flash needs {sizes['flash']} bytes (text {sizes['text']} + rodata "
            f"{sizes['rodata']} + data {sizes['data']}), {board.flash_bytes} available: "
            f"exceeded by {sizes['flash'] - board.flash_bytes} bytes"
        )
    ram = sizes["ram"] + board.stack_bytes + board.heap_bytes
    if board.ram_bytes and ram > board.ram_bytes:
        problems.append(
            f"RAM needs {ram} bytes (data {sizes['data']} + bss {sizes['bss']}, of which arena "
            f"{sizes.get('arena', 0)}, + stack {board.stack_bytes} + heap {board.heap_bytes}), "
            f"{board.ram_bytes} available: exceeded by {ram - board.ram_bytes} bytes"
        )
    if not problems:
        return None
    return f"does not fit {board.part} ({board.name}): " + "; ".join(problems)


def fit_report(elf: str | Path, board: str | Board) -> str | None:
    """fits_check on the ELF, plus the largest symbols of each region that does not fit,
    with the harness's buffers named after the bundle's tensors. None when it fits."""
    board = load_board(board)
    elf = Path(elf)
    message = fits_check(elf_sizes(elf, board), board)
    if message is None:
        return None
    meta = _bundle_of(elf)
    largest = measure.largest_symbols(_check_output([board.tool("nm"), "-S", str(elf)]))
    for region, label in (("flash", "flash"), ("ram", "RAM")):
        if f"{label} needs" in message and largest[region]:
            names = ", ".join(f"{_symbol_label(n, meta)} {b} B" for n, b in largest[region])
            message += f"; largest in {label}: {names}"
    return message


def _symbol_label(symbol: str, meta: dict) -> str:
    """The harness's static buffers in<i>/out<i> by the tensor they hold."""
    m = re.fullmatch(r"(in|out)(\d+)", symbol)
    tensors = meta["inputs" if m and m.group(1) == "in" else "outputs"]
    if m and int(m.group(2)) < len(tensors):
        kind = "input" if m.group(1) == "in" else "output"
        return f"{kind} buffer {tensors[int(m.group(2))]['name']!r}"
    return symbol


def stack_usage(build_dir: str | Path, kernels: list[str] | None = None,
                root: str | None = None) -> dict:
    """Frames from gcc's .su files and the call graph from its .ci files: {"max_bytes",
    "function" (the largest frame, among `kernels` when given), "functions", "dynamic",
    "path_bytes" (deepest chain from `root`), "library_calls", "recursion" (cycles)}."""
    return measure.stack_usage(Path(build_dir), kernels, root)


# --- helpers -------------------------------------------------------------------------------


@contextlib.contextmanager
def _workdir(path: str | Path | None) -> Iterator[Path]:
    """The given directory, or a temporary one removed afterwards."""
    if path is None:
        with tempfile.TemporaryDirectory(prefix="aotc-run-") as tmp:
            yield Path(tmp)
    else:
        Path(path).mkdir(parents=True, exist_ok=True)
        yield Path(path).resolve()


def _check_output(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
    return proc.stdout


if __name__ == "__main__":
    # CMakeLists.txt without AOTC_MAIN: python -m aotc.targets.boards render-main BUNDLE_DIR OUT.c
    if len(sys.argv) != 4 or sys.argv[1] != "render-main":
        sys.exit("usage: python -m aotc.targets.boards render-main BUNDLE_DIR OUT.c")
    Path(sys.argv[3]).write_text(render_test_main(sys.argv[2]))
