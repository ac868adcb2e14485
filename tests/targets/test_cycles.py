"""The cycle model (aotc/targets/cycles) against the cycle counts the cores' manuals state.

Model level: short Thumb sequences, assembled with arm-none-eabi-gcc and decoded from objdump as
the model sees a firmware, priced per core; the expected numbers are the Technical Reference
Manuals' (M0+, M4) or the stated rule of docs/cycles.md (M7, M33, M55, whose manuals publish no
table). End to end: a loop run in QEMU through the TCG plugin (blocks=1) on each core's board;
the difference between 200 and 100 iterations is 100 times the loop's cycles.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from aotc.targets import boards, cycles, measure

_ARCH = {"cortex-m0plus": "armv6s-m", "cortex-m4": "armv7e-m", "cortex-m7": "armv7e-m",
         "cortex-m33": "armv8-m.main", "cortex-m55": "armv8.1-m.main"}
_FLAGS = {"cortex-m0plus": ["-mcpu=cortex-m0plus"],
          "cortex-m4": ["-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"],
          "cortex-m7": ["-mcpu=cortex-m7", "-mfpu=fpv5-d16", "-mfloat-abi=hard"],
          "cortex-m33": ["-mcpu=cortex-m33", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"],
          "cortex-m55": ["-mcpu=cortex-m55", "-mfloat-abi=hard"]}


def assemble(core: str, body: str, tmp: Path, *, link: list[str] | None = None) -> Path:
    src = tmp / "t.s"
    src.write_text(".syntax unified\n.thumb\n" + body + "\n")
    out = tmp / ("t.elf" if link else "t.o")
    cmd = ["arm-none-eabi-gcc", *_FLAGS[core], "-mthumb", *(link or ["-c"]), str(src), "-o",
           str(out)]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return out


def block_cycles(core: str, body: str, tmp: Path, taken: bool = False) -> float:
    """Cycles of one execution of `body` as one block; taken: its last branch is taken."""
    obj = assemble(core, ".text\n" + body, tmp)
    code = cycles.disassemble("arm-none-eabi-objdump", obj, _ARCH[core])
    insns = [code[pc] for pc in sorted(code)]
    p = cycles.price(cycles.CORES[core], insns)
    return p.cycles + (p.taken if taken else 0)


# (core, instructions, last branch taken, cycles, where the number comes from)
CASES = [
    # Cortex-M4 TRM r0p1, 3.3.1 Table 3-1 and 3.3.2 "Load/store timings".
    ("cortex-m4", "ldr r0, [r1]", False, 2, "LDR 2"),
    ("cortex-m4", "ldr r0, [r1]\nldr r2, [r3]\nldr r4, [r5, #8]", False, 4,
     "neighbouring loads pipeline: N + 1"),
    ("cortex-m4", "ldr r0, [r1]\nldr r2, [r0]", False, 4,
     "an address from the load: no pipelining"),
    ("cortex-m4", "adds r1, #4\nldr r0, [r1]", False, 4, "address from an ALU op: +1 stall"),
    ("cortex-m4", "ldr r0, [r1]\nldrd r2, r3, [r4]", False, 5,
     "LDRD 1 + N, not pipelined with the load before it"),
    ("cortex-m4", "ldrd r2, r3, [r4]\nldr r0, [r1]", False, 5,
     "nor the load after it with the LDRD"),
    ("cortex-m4", "ldrd r2, r3, [r4]\nldrd r6, r7, [r4, #8]", False, 6, "two LDRDs: 3 + 3"),
    ("cortex-m4", "str r0, [r1, #4]", False, 1, "STR Rx,[Ry,#imm] is always one cycle"),
    ("cortex-m4", "ldm r0, {r1, r2, r3, r4}", False, 5, "LDM 1 + N"),
    ("cortex-m4", "push {r4, r5, r6, r7, lr}", False, 6, "PUSH 1 + N"),
    ("cortex-m4", "pop {r4, pc}", True, 5, "POP with PC 1 + N + P, P = 2"),
    ("cortex-m4", "smlad r0, r1, r2, r0\nsmlabb r3, r4, r5, r3\nmla r6, r7, r8, r6", False, 3,
     "MAC and DSP multiplies 1"),
    ("cortex-m4", "cmp r0, #1\nbne.w .", True, 4, "branch taken 1 + P"),
    ("cortex-m4", "cmp r0, #1\nbne.w .", False, 2, "branch not taken 1"),
    ("cortex-m4", "vldmia r0, {s0-s3}\nvmla.f32 s4, s5, s6", False, 8, "VLDM 1 + N, VMLA 3"),
    ("cortex-m4", "sdiv r0, r1, r2", False, 7, "SDIV 2..12: the stated typical 7"),
    ("cortex-m4", "vmov s0, r0\nvadd.f32 s1, s2, s3", False, 3, "VMOV core to FP 2, VADD 1"),
    ("cortex-m4", "adds r0, #1\nit eq\naddeq r1, #1", False, 2, "IT folded after 16-bit"),
    # Cortex-M0+ TRM r0p1, 3.3 "Instruction set summary".
    ("cortex-m0plus", "ldr r0, [r1]\nldr r2, [r3]", False, 4, "LDR 2, no pipelining"),
    ("cortex-m0plus", "str r0, [r1]", False, 2, "STR 2"),
    ("cortex-m0plus", "muls r0, r1, r0", False, 1, "MULS 1 (fast multiplier)"),
    ("cortex-m0plus", "cmp r0, #1\nbne .", True, 3, "B taken 2"),
    ("cortex-m0plus", "bl .", True, 3, "BL 3"),
    ("cortex-m0plus", "bx lr", True, 2, "BX 2"),
    ("cortex-m0plus", "push {r4, r5, r6, lr}", False, 5, "PUSH 1 + N"),
    # Cortex-M33: M4-class table, loads 1 cycle + 1 load-use stall, 16-bit ALU pairs.
    ("cortex-m33", "ldr r0, [r1]\nldr r2, [r3]", False, 2, "loads 1 (address in decode)"),
    ("cortex-m33", "ldr r0, [r1]\nadds r2, r0, #1", False, 3, "load-use stall 1"),
    ("cortex-m33", "adds r0, #1\nadds r1, #1", False, 1, "16-bit ALU pair dual-issued"),
    ("cortex-m33", "adds r0, #1\nadds r0, #1", False, 2, "dependent pair: no dual issue"),
    ("cortex-m33", "cmp r0, #1\nbne.w .", True, 3, "branch taken 1 + P, P = 1"),
    # Cortex-M7: dual issue, one load/store and one MAC per cycle, loads' 2-cycle latency.
    ("cortex-m7", "add.w r0, r1, #1\nldr r2, [r3]", False, 1, "ALU + load pair"),
    ("cortex-m7", "ldr r0, [r1]\nldr r2, [r3]", False, 1, "two load ports"),
    ("cortex-m7", "str r0, [r1]\nstr r2, [r3]", False, 2, "one store port"),
    ("cortex-m7", "smlad r0, r1, r2, r0\nsmlad r3, r4, r5, r3", False, 2, "one MAC per cycle"),
    ("cortex-m7", "ldr r0, [r1]\nadds r2, r0, #1", False, 3, "load-use: no pair, +1 stall"),
    ("cortex-m7", "ldm r0, {r1, r2, r3, r4}", False, 3, "LDM 64 bits per cycle"),
    # Cortex-M55: a 128-bit Helium instruction holds its unit 2 cycles (4 beats, dual beat);
    # the next one, on another unit, issues the cycle after (overlap); LE is free.
    ("cortex-m55", "vldrb.u8 q0, [r0]\nvldrb.u8 q1, [r1]", False, 4, "one unit: 2 + 2"),
    ("cortex-m55", "vldrb.u8 q0, [r0]\nvmladava.u8 r2, q1, q2", False, 2, "two units overlap"),
    ("cortex-m55", "vldrb.u8 q0, [r0]\nvldrb.u8 q1, [r1]\nvmladava.u8 r4, q0, q1", False, 4,
     "two loads per MAC: the memory unit bounds"),
    ("cortex-m55", "vmladava.u8 r4, q4, q5\nadds r0, #1\nadds r1, #1", False, 3,
     "scalar work under the beats: one issue a cycle"),
    ("cortex-m55", "1: vldrb.u8 q0, [r0]\nle lr, 1b", True, 2, "LE taken: 0"),
]


@pytest.mark.parametrize("core,body,taken,expected,why", CASES,
                         ids=[f"{c[0]}-{c[4]}" for c in CASES])
def test_block_cycles(core: str, body: str, taken: bool, expected: float, why: str,
                      tmp_path: Path) -> None:
    assert block_cycles(core, body, tmp_path, taken) == expected, why


def test_wait_states_add_to_loads(tmp_path: Path) -> None:
    obj = assemble("cortex-m4", ".text\nldr r0, [r1]\nldm r2, {r3, r4}\nadds r0, #1", tmp_path)
    code = cycles.disassemble("arm-none-eabi-objdump", obj, "armv7e-m")
    insns = [code[pc] for pc in sorted(code)]
    core = cycles.CORES["cortex-m4"]
    base = cycles.price(core, insns).cycles
    slow = cycles.price(core, insns, cycles.Memory(data_wait_states=2)).cycles
    assert slow - base == 2 * 3  # three data reads
    fetch = cycles.price(core, insns, cycles.Memory(flash_wait_states=4, flash_hit_rate=0.5))
    assert fetch.cycles - base == 4 * 0.5 * sum(i.size for i in insns) / 4


def test_every_board_with_a_core_has_a_model() -> None:
    for name in boards.list_boards():
        board = boards.load_board(name)
        if board.is_host or board.arch.startswith("rv"):
            assert boards.cycle_model(board) is None
        else:
            core, memory = boards.cycle_model(board)
            assert core.name in _ARCH and memory == cycles.Memory()


# --- end to end: QEMU + the plugin -------------------------------------------------------

# A vector table, a loop of N iterations, then semihosting SYS_EXIT. The loop per core:
# (board, core, loop body, the manual's or the rule's cycles per iteration)
_LOOPS = [
    ("cortex-m0plus", "cortex-m0plus", "ldr r1, [r2]\nldr r3, [r2, #4]\nsubs r0, #1\nbne 1b",
     2 + 2 + 1 + 2),
    ("cortex-m4f", "cortex-m4", "ldr r1, [r2]\nldr r3, [r2, #4]\nsubs r0, #1\nbne 1b",
     2 + 1 + 1 + 3),
    ("cortex-m7", "cortex-m7", "ldr r1, [r2]\nldr r3, [r2, #4]\nsubs r0, #1\nbne 1b",
     1 + 1 + 1),  # ldr+ldr (two load ports) | subs+bne | taken: 1
    ("cortex-m33", "cortex-m33", "ldr r1, [r2]\nldr r3, [r2, #4]\nsubs r0, #1\nbne 1b",
     1 + 1 + 1 + 1),  # subs+bne pair (16-bit), bne taken adds P = 1
    ("cortex-m55", "cortex-m55", "vldrb.u8 q0, [r2]\nvmladava.u8 r4, q0, q0\nle lr, 1b",
     2),  # the load and the MAC overlap (each unit busy 2 cycles), LE free
]

_FPU_ON = """
    ldr r0, =0xE000ED88  @ CPACR: enable the FPU and Helium (needed on M55)
    ldr r1, [r0]
    ldr r2, =0x00F00000
    orrs r1, r2
    str r1, [r0]
    dsb
    isb
"""

_PROGRAM = """
.section .vectors, "a"
.word {stack}
.word reset + 1
.text
.thumb_func
reset:
{fpu}
    ldr r2, ={ram}
    ldr r0, ={n}
    mov lr, r0
    b 1f
.balign 4
1:
{body}
    movs r0, #0x18       @ SYS_EXIT, ADP_Stopped_ApplicationExit
    ldr r1, =0x20026
    bkpt 0xab
"""


def _run_loop(board: boards.Board, core: str, body: str, n: int, tmp: Path) -> float:
    flash, ram = board.memory[0].origin, board.memory[1].origin
    src = _PROGRAM.format(stack=hex(ram + 0x1000), ram=hex(ram), n=n, body=body,
                          fpu=_FPU_ON if core == "cortex-m55" else "")
    work = tmp / str(n)
    work.mkdir()
    link = ["-nostdlib", "-nostartfiles", f"-Wl,--section-start=.vectors={flash:#x}",
            f"-Wl,-Ttext={flash + 0x400:#x}", "-Wl,-e,reset"]
    elf = assemble(core, src, work, link=link)
    out = work / "blocks.txt"
    cmd = [*board.qemu, "-nographic", "-monitor", "none", "-serial", "null",
           "-semihosting-config", "enable=on,target=native",
           "-plugin", f"{measure.plugin_library()},out={out.name},blocks=1", "-kernel", str(elf)]
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    code = cycles.disassemble("arm-none-eabi-objdump", elf, _ARCH[core])
    priced = cycles.price_blocks(cycles.CORES[core], code, measure.parse_blocks(out),
                                 cycles.Memory())
    return sum(priced.values())


@pytest.mark.parametrize("board,core,body,per_iteration", _LOOPS, ids=[c[0] for c in _LOOPS])
def test_qemu_loop_cycles(board: str, core: str, body: str, per_iteration: int,
                          tmp_path: Path) -> None:
    b = boards.load_board(board)
    boards.ensure_toolchain(b)
    short, long = (_run_loop(b, core, body, n, tmp_path) for n in (100, 200))
    assert long - short == 100 * per_iteration
