"""Pricing a translation block on a core: the cycles of one execution of its straight-line
instructions, plus what its last branch adds when taken. Pipeline state does not cross block
boundaries (a block starts with an empty pipeline), which loses a little pairing and
pipelining at the edges and never invents any.
"""

from __future__ import annotations

from dataclasses import dataclass

from aotc.targets.cycles.cores import Core
from aotc.targets.cycles.decode import Insn

_MEMORY = ("load", "store", "fp_load", "fp_store", "vec_load", "vec_store")
_LOADS = ("load", "ldm", "pop_pc", "fp_load", "fp_ldm", "vec_load")
_BRANCHES = ("branch", "pop_pc", "tb", "loop_end", "loop_start")
_MULTI = ("ldm", "stm", "fp_ldm", "fp_stm", "pop_pc")
# M55 units (one instruction issues per cycle; a Helium instruction holds its unit for its
# beats): loads and stores, scalar and vector, share one; vector multiplies share the FPU's.
_UNIT = {"vec_load": "memory", "vec_store": "memory", "load": "memory", "store": "memory",
         "ldm": "memory", "stm": "memory", "pop_pc": "memory", "fp_load": "memory",
         "fp_store": "memory", "fp_ldm": "memory", "fp_stm": "memory", "vec_mac": "multiply",
         "fp": "multiply", "fp_mac": "multiply", "fp_div": "multiply", "vec_alu": "vector"}


@dataclass(frozen=True)
class Memory:
    """Wait states (board.toml [cycles]): every data read waits data_wait_states; instruction
    fetch from flash waits flash_wait_states per 32-bit fetch that misses the cache or
    accelerator (hit rate flash_hit_rate)."""

    data_wait_states: float = 0.0
    flash_wait_states: float = 0.0
    flash_hit_rate: float = 1.0


@dataclass(frozen=True)
class Price:
    """Cycles of one execution, and what a taken / not-taken last branch adds."""

    cycles: float
    taken: float = 0.0
    fallthrough: float = 0.0


def cost(core: Core, insn: Insn) -> float:
    """An instruction's base cost on the core, before the neighbour rules."""
    c = core.costs.get(insn.kind, 1)
    if insn.kind in _MULTI:
        c += core.per_register * insn.registers
    elif insn.kind in ("load", "store") and insn.registers == 2:  # LDRD/STRD: 1 + N
        c = 1 + core.per_register * 2 if core.per_register == 1 else c + 1
    if insn.kind == "store" and insn.register_offset and core.load_pipelining:
        c = max(c, 2)  # M4: STR with a register offset is not single-cycle
    return c


def price(core: Core, insns: list[Insn], memory: Memory = Memory()) -> Price:
    """The cycles of one execution of a block (its instructions in order)."""
    if core.dual_issue == "m7":
        cycles = _dual_issue(core, insns)
    elif core.vector_overlap:
        cycles = _beats(core, insns)
    else:
        cycles = _single_issue(core, insns)
    for insn in insns:
        if insn.kind in _LOADS:
            cycles += memory.data_wait_states * insn.registers
        cycles += memory.flash_wait_states * (1 - memory.flash_hit_rate) * insn.size / 4
    last = insns[-1] if insns else None
    if last is None or last.kind not in _BRANCHES:
        return Price(cycles)
    if last.kind == "loop_end":
        return Price(cycles, taken=core.taken_loop_end)
    call = last.mnemonic in ("bl", "blx")
    refill = core.call_refill if call and core.call_refill is not None else core.refill
    return Price(cycles, taken=refill)


def _single_issue(core: Core, insns: list[Insn]) -> float:
    """An in-order scalar pipeline (M0+, M4, M33, M55): the table plus neighbour rules."""
    total = 0.0
    prev: Insn | None = None
    paired = False  # prev was the second of a dual-issued pair
    for insn in insns:
        c = cost(core, insn)
        if prev is not None:
            c += _stalls(core, prev, insn)
            if core.load_pipelining and insn.kind in ("load", "store") \
                    and prev.kind in ("load", "store") and not insn.address & prev.writes \
                    and insn.registers == 1 and prev.registers == 1:
                # M4 TRM 3.3.2: neighbouring single loads/stores pipeline; "LDRD and STRD
                # cannot be pipelined with preceding or following instructions".
                c = min(c, 1)
            if insn.kind == "it" and core.it_folding and prev.size == 2:
                c = 0
            if core.dual_issue == "16bit" and not paired and _pairs_16bit(prev, insn):
                c, paired = 0, True
            else:
                paired = False
        total += c
        prev = insn
    return total


def _beats(core: Core, insns: list[Insn]) -> float:
    """M55: in order, one instruction issued per cycle; a Helium instruction occupies its unit
    (memory, vector integer, multiply/FP) for its beats (2 cycles for 4 beats on a dual-beat
    core) while the next instruction, if it needs another unit, issues the cycle after: the
    beat-wise overlap. A scalar instruction of several cycles holds the pipeline. A block
    costs what its issue takes, and at least its busiest unit's occupancy (a loop of it
    cannot run faster)."""
    t = 0.0  # the cycle the next instruction may issue
    free: dict[str, float] = {}
    busy: dict[str, float] = {}
    prev: Insn | None = None
    for insn in insns:
        unit = _UNIT.get(insn.kind, "scalar")
        c = cost(core, insn)
        start = max(t + (_stalls(core, prev, insn) if prev is not None else 0),
                    free.get(unit, 0.0))
        if insn.kind == "it" and core.it_folding and prev is not None and prev.size == 2:
            c = 0
        free[unit] = start + c
        busy[unit] = busy.get(unit, 0.0) + c
        t = start + (min(c, 1) if insn.vector else c)
        prev = insn
    return max(t, *busy.values()) if busy else t


def _stalls(core: Core, prev: Insn, insn: Insn) -> float:
    uses = insn.reads | insn.address
    stall = 0.0
    if core.address_stall and prev.kind in ("alu", "mul", "mac") and insn.address & prev.writes \
            and insn.kind in ("load", "store", "ldm", "stm", "fp_load", "fp_store"):
        stall += 1
    if prev.kind in ("load", "fp_load", "ldm", "fp_ldm") and uses & prev.writes:
        stall += core.load_use_stall
    if prev.kind in ("mul", "mac") and insn.kind not in ("mac",) and uses & prev.writes:
        stall += core.mac_use_stall
    return stall


def _pairs_16bit(a: Insn, b: Insn) -> bool:
    """M33: two 16-bit instructions, the first a data-processing op, the second one too or a
    branch, the second not reading what the first writes."""
    return (a.size == 2 and b.size == 2 and a.kind == "alu" and b.kind in ("alu", "branch")
            and not (b.reads | b.address) & a.writes)


def _dual_issue(core: Core, insns: list[Insn]) -> float:
    """M7: two neighbouring instructions issue together unless they compete for one unit (two
    loads but one store, one MAC, one FP op per cycle), the second reads the first's result, or
    either takes several cycles; a MAC or DSP op pairs only as the first of the two."""
    total = 0.0
    i = 0
    prev: Insn | None = None  # the last instruction of the previous issue group
    while i < len(insns):
        a = insns[i]
        c = cost(core, a) + (_stalls(core, prev, a) if prev is not None else 0)
        if i + 1 < len(insns) and _pairs_m7(core, a, insns[i + 1]):
            b = insns[i + 1]  # issues with a: waits for whichever operand is later
            c = max(c, 1 + (_stalls(core, prev, b) if prev is not None else 0))
            total += c
            prev = b
            i += 2
            continue
        total += c
        prev = a
        i += 1
    return total


def _pairs_m7(core: Core, a: Insn, b: Insn) -> bool:
    single = ("alu", "load", "store", "mul", "mac", "fp", "fp_move", "fp_load", "fp_store", "nop",
              "it", "branch")
    if a.kind not in single or b.kind not in single or cost(core, a) > 1 or cost(core, b) > 1:
        return False
    if a.kind in _BRANCHES:
        return False
    stores = ("store", "fp_store")
    if a.kind in stores and b.kind in stores:  # one store port; loads have two
        return False
    if "fp" in a.kind and "fp" in b.kind and a.kind in _MEMORY and b.kind in _MEMORY:
        return False
    if b.kind in ("mul", "mac"):  # DSP and multiplies: only the first of a pair
        return False
    if a.kind.startswith("fp") and b.kind.startswith("fp") and "load" not in a.kind + b.kind:
        return False
    return not (b.reads | b.address | b.writes) & a.writes
