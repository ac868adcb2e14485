"""Estimated cycles from what QEMU executed: the TCG plugin's executed blocks (blocks=1), each
decoded from the ELF (objdump) and priced with a per-core timing table (cores.py, model.py).
An estimate, never a measurement: docs/cycles.md lists the sources and the assumptions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aotc.targets.cycles.cores import CORES, Core, core_for
from aotc.targets.cycles.decode import Insn, block, classify, disassemble
from aotc.targets.cycles.model import Memory, Price, price

__all__ = ["CORES", "Core", "Insn", "Memory", "Price", "block", "classify", "core_for",
           "describe", "disassemble", "estimate", "for_board", "price", "price_blocks"]


def for_board(board: Any) -> tuple[Core, Memory] | None:
    """(core, memory) from a Board: board.toml's [cycles] (model, data_wait_states,
    flash_wait_states, flash_hit_rate), the model defaulting to the board's cpu. None when
    there is no model for the core (the host, RISC-V)."""
    if board.is_host:
        return None
    settings = dict(board.cycles)
    core = core_for(str(settings.pop("model", board.cpu)))
    if core is None:
        return None
    known = {"data_wait_states", "flash_wait_states", "flash_hit_rate"}
    unknown = set(settings) - known
    if unknown:
        raise ValueError(f"board {board.name}: unknown [cycles] keys {sorted(unknown)}; "
                         f"known: model, {', '.join(sorted(known))}")
    return core, Memory(**{k: float(v) for k, v in settings.items()})


def describe(core: Core, memory: Memory) -> str:
    """The one line bench prints: which model, and its memory assumption."""
    if memory.flash_wait_states and memory.flash_hit_rate < 1:
        mem = (f"{memory.data_wait_states:g} data wait states, flash {memory.flash_wait_states:g}"
               f" wait states at {100 * memory.flash_hit_rate:g}% cache hits")
    else:
        mem = f"{memory.data_wait_states:g} wait states"
    return f"{core.name} ({core.source}, {mem})"


def price_blocks(core: Core, code: dict[int, Insn], blocks: list[tuple], memory: Memory
                 ) -> dict[str, float]:
    """{context: cycles} from the plugin's block lines (pc, n, end, context, count,
    fallthrough); each distinct block is priced once."""
    cache: dict[tuple[int, int], Price] = {}
    out: dict[str, float] = {}
    for pc, n, _end, context, count, fallthrough in blocks:
        p = cache.get((pc, n))
        if p is None:
            p = cache[(pc, n)] = price(core, block(code, pc, n), memory)
        cycles = count * p.cycles + (count - fallthrough) * p.taken + fallthrough * p.fallthrough
        out[context] = out.get(context, 0.0) + cycles
    return out


def estimate(core: Core, memory: Memory, objdump: str, elf: Path, arch: str,
             blocks: list[tuple], kernels: list[str]) -> dict[str, Any]:
    """{"model", "total", "inference", "run", "kernels": {key: cycles}}: total is the whole run
    (start-up and harness included), inference everything inside <name>_run's window, run its
    own share outside kernel calls, kernels each kernel's calls (callees included), keyed as
    count_instructions keys its inclusive counts."""
    by_context = price_blocks(core, disassemble(objdump, elf, arch), blocks, memory)
    total = sum(by_context.values())
    inside = total - by_context.get("@outside", 0.0)
    return {
        "model": describe(core, memory),
        "total": round(total),
        "inference": round(inside),
        "run": round(by_context.get("@run", 0.0)),
        "kernels": {k: round(by_context.get(k, 0.0)) for k in kernels},
    }
