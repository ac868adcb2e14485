"""The timing tables of the cores, as data: cycles per instruction class and the pipeline rules
each core has (load pipelining, load-use stalls, dual issue, Helium beats). docs/cycles.md names
the manual section behind every number; model.py applies them to executed blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Classes every table prices (aotc.targets.cycles.decode): an instruction's base cost before
# the pipeline rules. "ldm"/"stm"/"fp_ldm"/"fp_stm"/"pop_pc" add per_register per register.
_COMMON = {"alu": 1, "nop": 1, "it": 1, "barrier": 3, "fp": 1, "fp_move": 1, "fp_load": 2,
           "fp_store": 2,
           "fp_ldm": 1, "fp_stm": 1, "fp_mac": 3, "fp_div": 14, "mul": 1, "mac": 1, "div": 7,
           "load": 2, "store": 1, "ldm": 1, "stm": 1, "pop_pc": 1, "branch": 1, "tb": 3,
           "loop_start": 1, "loop_end": 1, "vec_load": 2, "vec_store": 2, "vec_mac": 2,
           "vec_alu": 2}


@dataclass(frozen=True)
class Core:
    """One core's timing. Cycles of a block = the sum of its instructions' costs after the
    rules; a taken branch at its end adds refill (call_refill for BL/BLX); LE's taken_loop_end
    replaces it for low-overhead loops."""

    name: str
    source: str  # the manual and revision the numbers come from, for the bench line
    costs: dict[str, float]
    per_register: float = 1.0  # LDM/STM/PUSH/POP/VLDM: cost + per_register * registers
    refill: float = 2.0  # P: the pipeline refill of a taken branch
    call_refill: float | None = None  # BL/BLX when it differs from refill
    taken_loop_end: float = 0.0  # extra cycles of a taken LE (0: the loop branch is free)
    load_pipelining: bool = False  # M4: a load or store after one costs 1 (TRM 3.3.2)
    address_stall: bool = False  # M4: an address just computed by an ALU op stalls 1 cycle
    load_use_stall: float = 0.0  # a load's result read by the next instruction
    mac_use_stall: float = 0.0  # a multiply's result read by the next non-MAC instruction
    it_folding: bool = True  # IT after a 16-bit instruction is folded (free)
    dual_issue: str = "none"  # "none", "16bit" (M33: pairs of 16-bit ALU ops), "m7"
    vector_overlap: bool = False  # M55: Helium instructions hold their unit for their beats
    notes: tuple[str, ...] = field(default=())


CORES: dict[str, Core] = {
    "cortex-m0plus": Core(
        "cortex-m0plus", "Cortex-M0+ TRM r0p1 timings",
        {**_COMMON, "load": 2, "store": 2, "div": 0, "it": 1, "barrier": 3},
        refill=1.0, call_refill=2.0, it_folding=False,
        notes=("MULS 1 cycle (the fast multiplier option)",
               "POP {..., PC} 3 + N, B taken 2, BL 3, BX/BLX 2")),
    "cortex-m4": Core(
        "cortex-m4", "Cortex-M4 TRM r0p1 timings",
        {**_COMMON, "fp_move": 2}, refill=2.0, load_pipelining=True, address_stall=True,
        notes=("P = 2 of 1..3", "SDIV/UDIV 7 of 2..12", "VMLA/VFMA 3, VDIV/VSQRT 14",
               "VMOV between a core and an FP register 2")),
    "cortex-m7": Core(
        "cortex-m7", "Cortex-M7 dual issue approximated",
        {**_COMMON, "load": 1, "store": 1, "fp_load": 1, "fp_store": 1, "fp_mac": 1,
         "fp_div": 16, "tb": 2}, per_register=0.5, refill=1.0, load_use_stall=1.0,
        mac_use_stall=1.0, dual_issue="m7",
        notes=("taken branches predicted (1-cycle bubble), mispredicts not modelled",
               "LDM/STM 64 bits per cycle")),
    "cortex-m33": Core(
        "cortex-m33", "Cortex-M33 r0p4, M4-class table with early address generation",
        {**_COMMON, "load": 1, "store": 1, "fp_load": 1, "fp_store": 1},
        refill=1.0, load_use_stall=1.0, dual_issue="16bit",
        notes=("branches resolved in decode: P = 1", "16-bit ALU pairs dual-issued")),
    "cortex-m55": Core(
        "cortex-m55", "Cortex-M55 r1p0, dual-beat Helium",
        {**_COMMON, "load": 1, "store": 1, "fp_load": 1, "fp_store": 1, "loop_end": 0},
        refill=2.0, vector_overlap=True,
        notes=("a 128-bit Helium instruction: 4 beats, holds its unit (memory, vector "
               "integer, multiply/FP) 2 cycles; the next instruction on another unit issues "
               "the cycle after", "LE taken: free (loop cache)")),
}


def core_for(cpu: str) -> Core | None:
    """The timing model of a board's cpu (board.toml "cpu", or [cycles] model), if any."""
    return CORES.get({"cortex-m4f": "cortex-m4"}.get(cpu, cpu))
