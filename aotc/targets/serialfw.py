"""The validation firmware: a bundle with the serial protocol of `aotc validate` for a board's
UART (templates/validate/firmware.c.j2), built without semihosting, and the QEMU command that
puts that UART on a TCP or pty serial port.

The firmware is compiled with the board's flags (the fast-build recipe, CMake's own), the
bundle and runtime with -DAOTC_ENABLE_PROFILING so the runtime's per-kernel hook reads the
cycle counter, and linked with the board's link.ld, newlib-nano and nosys (no semihosting,
no start files: the firmware brings its own vector table and reset handler).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aotc import paths
from aotc.targets.boards import Board, _jinja_env, load_board, run_build
from aotc.targets.fastbuild import board_recipe, library_flags

UARTS = ("cmsdk-apb",)  # UART kinds the firmware template drives


@dataclass(frozen=True)
class Serial:
    """board.toml's [serial]: which UART, where, at what clock and baud rate."""

    uart: str
    base: int
    clock_hz: int
    baud: int


def board_serial(board: Board) -> Serial:
    """The board's UART; ValueError (one line) when board.toml describes none aotc drives."""
    s = dict(board.serial)
    if not s:
        raise ValueError(f"board {board.name} has no [serial] UART in its board.toml; "
                         f"aotc validate needs one (boards with one: {', '.join(serial_boards())})")
    if s.get("uart") not in UARTS:
        raise ValueError(f"board {board.name}: [serial] uart {s.get('uart')!r} is not one aotc "
                         f"drives ({', '.join(UARTS)})")
    return Serial(uart=str(s["uart"]), base=int(s["base"]), clock_hz=int(s["clock_hz"]),
                  baud=int(s.get("baud", 115200)))


def serial_boards() -> list[str]:
    from aotc.targets.boards import list_boards

    return [b for b in list_boards() if load_board(b).serial]


def render_firmware(bundle_dir: str | Path, board: str | Board) -> str:
    """The firmware's C source for a bundle (plain arena, user-owned I/O buffers)."""
    board = load_board(board)
    serial = board_serial(board)
    meta = json.loads((Path(bundle_dir) / "bundle.json").read_text())
    if meta.get("io_in_arena") or meta.get("pools"):
        raise ValueError("aotc validate builds bundles with one arena and their own input and "
                         "output buffers: compile without --io-in-arena and memory pools")

    def tensors(key: str) -> list[dict]:
        return [dict(t, count=max(1, int(np.prod(t["shape"], dtype=np.int64)))) for t in meta[key]]

    hello = {"name": meta["name"], "board": board.name, "arena_bytes": meta["arena_bytes"],
             "inputs": [{k: t[k] for k in ("name", "dtype", "shape", "bytes")}
                        for t in meta["inputs"]],
             "outputs": [{k: t[k] for k in ("name", "dtype", "shape", "bytes")}
                         for t in meta["outputs"]],
             "kernels": len(meta["kernels"])}
    return _jinja_env().get_template("validate/firmware.c.j2").render(
        name=meta["name"], board=board.name, uart_kind=serial.uart, uart_base=serial.base,
        baud=serial.baud, uart_clock_hz=serial.clock_hz,
        bauddiv=max(16, round(serial.clock_hz / serial.baud)),
        n_kernels=len(meta["kernels"]), arena_bytes=max(1, meta["arena_bytes"]),
        arena_align=meta.get("arena_align", 16), inputs=tensors("inputs"),
        outputs=tensors("outputs"), in_bytes=sum(t["bytes"] for t in meta["inputs"]),
        out_bytes=sum(t["bytes"] for t in meta["outputs"]),
        hello=json.dumps(hello, sort_keys=True, separators=(",", ":")).encode(),
        fpu=bool({"fpu", "mve"} & board.features),
    )


def build(bundle_dir: str | Path, board: str | Board, build_dir: str | Path) -> tuple[Path, Path]:
    """Builds the validation firmware; returns (ELF, raw binary) in ``build_dir``."""
    board = load_board(board)
    if board.is_host:
        raise ValueError("aotc validate drives a board over a serial port: pick a "
                         f"microcontroller board ({', '.join(serial_boards())})")
    bundle_dir, build_dir = Path(bundle_dir).resolve(), Path(build_dir).resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    main = build_dir / "aotc_validate_main.c"
    main.write_text(render_firmware(bundle_dir, board))
    recipe = board_recipe(board)
    runtime = paths.runtime_dir().resolve()
    # The recipe links for the semihosting harness: swap rdimon for nosys; no startup object.
    link = [f for f in recipe.link_flags if not f.startswith("-Wl,-Map=")]
    link = ["--specs=nosys.specs" if f == "--specs=rdimon.specs" else f for f in link]
    meta = json.loads((bundle_dir / "bundle.json").read_text())
    lib_flags, archives = [], []
    if meta.get("libraries"):  # BYOC libraries (CMSIS-NN, ...), as the fast build links them
        from aotc.targets.libraries import archive, include_flags

        lib_flags = include_flags(meta["libraries"])
        archives = [str(archive(lib, recipe.compiler, library_flags(recipe.strict_flags)))
                    for lib in meta["libraries"]]
    strict = [f for f in recipe.strict_flags
              if not f.startswith(("-fstack-usage", "-fcallgraph-info"))]
    elf = build_dir / "aotc_validate.elf"
    cmd = [recipe.compiler, *strict, "-DAOTC_ENABLE_PROFILING", f"-I{bundle_dir}",
           f"-I{runtime}", *lib_flags, str(main), *map(str, sorted(bundle_dir.glob("*.c"))),
           *map(str, sorted(runtime.glob("*.c"))), *archives, *link,
           f"-Wl,-Map={build_dir / 'aotc_validate.map'}", "-o", str(elf), *recipe.libraries]
    run_build(cmd, board, "validation firmware build")
    binary = elf.with_suffix(".bin")
    run_build([board.tool("objcopy"), "-O", "binary", str(elf), str(binary)], board, "objcopy")
    return elf, binary


def qemu_command(board: str | Board, elf: str | Path, serial: str) -> list[str]:
    """QEMU running the firmware with the board's UART on ``serial`` (a QEMU chardev such as
    ``tcp:127.0.0.1:4321`` or ``pty``); no semihosting, no monitor."""
    board = load_board(board)
    return [*board.qemu, "-nographic", "-monitor", "none", "-serial", serial,
            "-kernel", str(elf)]


def size_line(elf: str | Path, board: str | Board) -> str:
    """text/data/bss of the firmware, as `size` prints them."""
    board = load_board(board)
    out = subprocess.run([board.tool("size"), str(elf)], check=False, capture_output=True,
                         text=True).stdout.splitlines()
    if len(out) < 2:
        return ""
    text, data, bss = (int(x) for x in out[1].split()[:3])
    return f"flash {text + data} B (text {text}, data {data}), RAM {data + bss} B (bss {bss})"
