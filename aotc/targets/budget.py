"""RAM and flash estimates of a compiled model's firmware, before any build, and the
--max-ram / --max-flash / --budget-board checks: one line naming what exceeds and by how much.
The code-size model is calibrated per board against linked ELFs (scripts/calibrate_budget.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from aotc.errors import AotcError

# A compilation (aotc.compiler.Compilation) is typed Any here: targets/ sits below the driver.
Compilation = Any

# Per board: flash code = base + per_token x C tokens of the bundle's distinct function bodies
# (gcc folds identical kernels, so a repeated block costs once); static RAM = arena (or pools)
# + graph inputs and outputs + ram_base (the runtime's, the harness's and libc's data + bss).
# Fitted by scripts/calibrate_budget.py on the MLPerf Tiny int8 and float models (docs/firmware.md).
# Other boards use cortex-m4f's: on rv32imc the token model is up to 13% off (docs/firmware.md).
CALIBRATION: dict[str, dict[str, float]] = {
    "cortex-m4f": {"base": 9049.0, "per_token": 0.400, "ram_base": 312.0},
    "cortex-m7": {"base": 9263.0, "per_token": 0.400, "ram_base": 311.0},
    "cortex-m33": {"base": 9440.0, "per_token": 0.399, "ram_base": 312.0},
    "cortex-m55": {"base": 11413.0, "per_token": 0.392, "ram_base": 312.0},
}
DEFAULT_BOARD = "cortex-m4f"
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+|[-+*/%<>=!&|^~?:;,(){}\[\]]")
_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_FUNCTION = re.compile(r"\n(?=static AOTC_NOINLINE)")
_KERNEL_NAME = re.compile(r"\bk\d+_\w+")
_SIZE = re.compile(r"(\d+)\s*([KkMm]?)(i?[Bb])?")


def parse_bytes(text: str, option: str = "size") -> int:
    """'65536', '64K', '2M' (K = 1024, M = 1024 K) -> bytes; AotcError otherwise."""
    m = _SIZE.fullmatch(text.strip())
    if not m:
        raise AotcError(f"{option} expects BYTES with an optional K or M suffix (e.g. 256K), "
                        f"got {text!r}")
    return int(m.group(1)) * {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2).lower()]


def code_tokens(model_c: str) -> int:
    """C tokens of the distinct function bodies of a bundle's <name>.c (comments dropped,
    kernel names normalised so two kernels with the same body count once)."""
    seen: set[str] = set()
    total = 0
    for part in _FUNCTION.split(_COMMENT.sub("", model_c)):
        body = _KERNEL_NAME.sub("K", part)
        if body not in seen:
            seen.add(body)
            total += len(_TOKEN.findall(body))
    return total


@dataclass
class Estimate:
    board: str  # the board whose calibration and stack/heap reserve were used
    calibrated: str  # the board the code-size model was fitted on
    arena: int
    io: int
    ram_base: int
    stack: int
    heap: int
    weights: int
    code: int
    state: int = 0  # a streaming model's state buffer, kept between calls

    @property
    def static_ram(self) -> int:
        """data + bss of the firmware: what `size` reports."""
        return self.arena + self.io + self.state + self.ram_base

    @property
    def ram(self) -> int:
        return self.static_ram + self.stack + self.heap

    @property
    def flash(self) -> int:
        return self.weights + self.code

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "static_ram": self.static_ram, "ram": self.ram,
                "flash": self.flash}

    def lines(self) -> list[str]:
        io = f" + I/O {self.io:,}" if self.io else ""
        io += f" + state {self.state:,}" if self.state else ""
        return [f"RAM estimate {self.ram:,} B on {self.board}: arena {self.arena:,}{io} + "
                f"runtime {self.ram_base:,} + stack {self.stack:,} + heap {self.heap:,} B",
                f"flash estimate {self.flash:,} B: weights {self.weights:,} + code "
                f"{self.code:,} B (code model calibrated on {self.calibrated})"]


def _board_reserve(board: str) -> tuple[int, int, int, int]:
    """(stack, heap, ram, flash) bytes of a board's part."""
    from aotc.targets.boards import load_board

    try:
        b = load_board(board)
    except ValueError as e:
        raise AotcError(str(e)) from None
    return b.stack_bytes, b.heap_bytes, b.ram_bytes, b.flash_bytes


def estimate(comp: Compilation, board: str | None = None) -> Estimate:
    """The firmware's RAM and flash from the compilation alone (no compiler run)."""
    from aotc.codegen.jinja import render
    from aotc.codegen.render import render_context

    board = board or comp.options.target or DEFAULT_BOARD
    if board in ("host", "host-cffi"):
        board = DEFAULT_BOARD
    calibrated = board if board in CALIBRATION else DEFAULT_BOARD
    cal = CALIBRATION[calibrated]
    ctx = render_context(comp)
    stack, heap, _, _ = _board_reserve(board)
    arena = sum(comp.plan.pool_sizes.values()) if comp.pools else comp.plan.size
    meta = ctx["meta"]
    io = 0 if comp.options.io_in_arena else sum(
        t["bytes"] for t in meta["inputs"] + meta["outputs"])
    code = round(cal["base"] + cal["per_token"] * code_tokens(render("model.c.j2", **ctx)))
    return Estimate(board, calibrated, arena, io, int(cal["ram_base"]), stack, heap,
                    comp.weights_bytes, code, comp.state_bytes)


def limits(max_ram: str | None, max_flash: str | None, budget_board: str | None
           ) -> tuple[int | None, int | None, str]:
    """The RAM and flash limits (bytes or None) and where they come from."""
    ram = parse_bytes(max_ram, "--max-ram") if max_ram else None
    flash = parse_bytes(max_flash, "--max-flash") if max_flash else None
    source = "--max-ram/--max-flash"
    if budget_board:
        _, _, part_ram, part_flash = _board_reserve(budget_board)
        ram = ram if ram is not None else part_ram or None
        flash = flash if flash is not None else part_flash or None
        source = f"board {budget_board}'s part"
    return ram, flash, source


def check(comp: Compilation, max_ram: str | None, max_flash: str | None,
          budget_board: str | None) -> Estimate | None:
    """AotcError (one line: what exceeds, by how much) when the estimate exceeds a limit."""
    ram_limit, flash_limit, source = limits(max_ram, max_flash, budget_board)
    if ram_limit is None and flash_limit is None:
        return None
    est = estimate(comp, budget_board)
    over = []
    if ram_limit is not None and est.ram > ram_limit:
        over.append(f"RAM {est.ram:,} B exceeds {ram_limit:,} B by {est.ram - ram_limit:,} B "
                    f"(arena {est.arena:,}, I/O {est.io:,}, stack {est.stack:,}, heap "
                    f"{est.heap:,}, runtime {est.ram_base:,})")
    if flash_limit is not None and est.flash > flash_limit:
        over.append(f"flash {est.flash:,} B exceeds {flash_limit:,} B by "
                    f"{est.flash - flash_limit:,} B (weights {est.weights:,}, code ~{est.code:,})")
    if over:
        raise AotcError(f"over budget ({source}, estimated on {est.board}): " + "; ".join(over))
    return est
