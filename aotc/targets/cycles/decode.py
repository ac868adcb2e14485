"""Decoding for the cycle model: the executed Thumb instructions of a firmware, read from
`objdump -d`, each sorted into a timing class with the registers it writes and reads.
The classes are core-independent; aotc.targets.cycles.cores prices them per core.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

CONDITIONS = frozenset("eq ne cs hs cc lo mi pl vs vc hi ls ge lt gt le al".split())

# Mnemonic (condition, flag-setting "s", width and data-type suffixes removed) -> class.
_CLASSES: dict[str, str] = {
    **dict.fromkeys("ldr ldrb ldrh ldrsb ldrsh ldrex ldrexb ldrexh ldrt ldrbt ldrht lda "
                    "ldab ldah ldaex".split(), "load"),
    **dict.fromkeys("str strb strh strex strexb strexh strt strbt strht stl stlb stlh".split(),
                    "store"),
    "ldrd": "load", "strd": "store",
    **dict.fromkeys("ldm ldmia ldmfd ldmdb ldmea pop".split(), "ldm"),
    **dict.fromkeys("stm stmia stmea stmdb stmfd push".split(), "stm"),
    **dict.fromkeys("b bl blx bx cbz cbnz".split(), "branch"),
    "tbb": "tb", "tbh": "tb",
    **dict.fromkeys("le letp".split(), "loop_end"),
    **dict.fromkeys("dls dlstp wls wlstp lctp".split(), "loop_start"),
    "mul": "mul",
    **dict.fromkeys("mla mls smull umull smlal umlal umaal smmul smmulr smmla smmlar smmls "
                    "smmlsr smuad smuadx smusd smusdx smlad smladx smlsd smlsdx smlald "
                    "smlaldx smlsld smlsldx smulbb smulbt smultb smultt smulwb smulwt smlabb "
                    "smlabt smlatb smlatt smlawb smlawt smlalbb smlalbt smlaltb smlaltt".split(),
                    "mac"),
    "sdiv": "div", "udiv": "div",
    **dict.fromkeys("vldr vldm vldmia vldmdb vpop".split(), "fp_load"),
    **dict.fromkeys("vstr vstm vstmia vstmdb vpush".split(), "fp_store"),
    **dict.fromkeys("vmla vmls vnmla vnmls vfma vfms vfnma vfnms".split(), "fp_mac"),
    "vdiv": "fp_div", "vsqrt": "fp_div",
    **dict.fromkeys("nop yield".split(), "nop"),
    # Single-cycle data processing on every core (named so that their condition suffix, in an
    # IT block, is stripped the same way as the others').
    **dict.fromkeys("add adc sub sbc rsb and orr eor bic orn mov mvn movw movt lsl lsr asr ror "
                    "rrx cmp cmn tst teq adr neg sxtb sxth uxtb uxth sxtab sxtah uxtab uxtah "
                    "sxtb16 uxtb16 sxtab16 uxtab16 ssat usat ssat16 usat16 sel qadd qsub qdadd "
                    "qdsub qadd8 qadd16 qsub8 qsub16 sadd8 sadd16 ssub8 ssub16 uadd8 uadd16 "
                    "usub8 usub16 shadd8 shadd16 uqadd8 uqsub8 pkhbt pkhtb rev rev16 revsh rbit "
                    "clz bfi bfc ubfx sbfx mrs msr cpsid cpsie svc bkpt udf csel csinc csinv "
                    "csneg cset csetm cinc cinv cneg vctp".split(), "alu"),
    **dict.fromkeys("dmb dsb isb".split(), "barrier"),
}
_MVE_LOADS = re.compile(r"^vld(r[bhwd]|[24][0-3])$")
_MVE_STORES = re.compile(r"^vst(r[bhwd]|[24][0-3])$")
# MVE multiplies and multiply-accumulates (the MAC resource), by mnemonic prefix.
_MVE_MACS = ("vmla", "vmls", "vmul", "vqdmul", "vqrdmul", "vrmul", "vqdml", "vqrdml", "vfma",
             "vfms", "vrmlal", "vrmlsl", "vmlal", "vmlsl", "vmladav", "vmlsdav", "vrmulh")
# Two-operand forms that do not read their destination ("mov r0, r1"; "adds r0, r1" does).
_UNARY = frozenset("mov mvn movw movt adr neg sxtb sxth uxtb uxth sxtb16 uxtb16 rev rev16 revsh "
                   "rbit clz mrs msr vmov vcvt vneg vabs vsqrt vmrs vmsr vcmp vcmpe vctp "
                   "vdup vrintz vrintr vrinta vrintn vrintp vrintm".split())
_REG = re.compile(r"\b(r1[0-5]|r\d|sp|lr|pc|ip|fp|sl|sb|[sdq]\d{1,2})\b")
_ALIASES = {"ip": "r12", "fp": "r11", "sl": "r10", "sb": "r9", "r13": "sp", "r14": "lr",
            "r15": "pc"}


@dataclass(frozen=True)
class Insn:
    """One instruction: its class, size in bytes, the registers it writes and reads (the
    address registers apart), and the register count of a load/store multiple."""

    pc: int
    size: int
    mnemonic: str  # without condition, "s", width or data-type suffix
    kind: str
    writes: frozenset[str]
    reads: frozenset[str]
    address: frozenset[str]  # registers inside [...]: the address of a load or store
    registers: int = 1  # registers transferred (LDM/STM/VLDM/PUSH/POP, LDRD)
    vector: bool = False  # an MVE (Helium) instruction on 128-bit Q registers
    register_offset: bool = False  # a load/store addressed by [Rn, Rm]


def base_mnemonic(text: str) -> str:
    """"addseq.w" -> "add", "vldrb.u8" -> "vldrb", "bls" -> "b", "itte" -> "it"."""
    m = text.lower().split(".")[0]
    if re.fullmatch(r"it[te]{0,3}", m) or re.fullmatch(r"vp(st|t)[te]{0,3}", m):
        return "it" if m.startswith("it") else "vpst"
    candidates = [m]
    if m[-2:] in CONDITIONS:
        candidates.append(m[:-2])
    if m.endswith("s"):
        candidates.append(m[:-1])
    if m[-2:] in CONDITIONS and m[-3:-2] == "s":
        candidates.append(m[:-3])
    return next((c for c in candidates if c in _CLASSES or _MVE_LOADS.match(c)
                 or _MVE_STORES.match(c)), m)


def _registers(text: str) -> list[str]:
    return [_ALIASES.get(r, r) for r in _REG.findall(text)]


def classify(pc: int, size: int, mnemonic: str, operands: str) -> Insn:
    """The timing class of one disassembled instruction."""
    base = base_mnemonic(mnemonic)
    operands = operands.split("@")[0].split(";")[0].strip()
    regs = _registers(operands)
    inside = re.findall(r"\[([^\]]*)\]", operands)
    address = frozenset(r for part in inside for r in _registers(part))
    listed = re.search(r"\{([^}]*)\}", operands)
    reglist = _registers(listed.group(1)) if listed else []
    outside = _registers(re.sub(r"\[[^\]]*\]|\{[^}]*\}", "", operands))
    vector = any(r.startswith("q") for r in regs)  # VCTP: scalar in, predicate out
    kind = _CLASSES.get(base, "alu")
    if base.startswith("v") and kind == "alu":
        kind = "fp"
    core_reg = any(r.startswith("r") or r == "lr" for r in regs)
    fpu_reg = any(r[0] in "sd" and r[1:].isdigit() for r in regs)
    if base == "vmov" and core_reg and fpu_reg:
        kind = "fp_move"  # between a core register and the FPU
    if _MVE_LOADS.match(base):
        kind, vector = "vec_load", True
    elif _MVE_STORES.match(base):
        kind, vector = "vec_store", True
    elif vector and kind in ("fp", "fp_mac", "alu", "mul"):
        kind = "vec_mac" if base.startswith(_MVE_MACS) or kind == "fp_mac" else "vec_alu"
    elif base in ("it", "vpst"):
        kind = "it"
    writes: list[str] = []
    reads = list(outside)
    if kind in ("load", "fp_load", "vec_load"):
        writes = outside[:2] if base == "ldrd" else outside[:1]
        reads = []
    elif kind in ("ldm", "fp_ldm") or base in ("vldm", "vldmia", "vldmdb", "vpop"):
        writes, reads = reglist, []
    elif kind in ("store", "stm", "fp_store", "vec_store", "branch", "tb", "loop_end", "it"):
        writes = []
        reads = outside + reglist
    elif base in ("cmp", "cmn", "tst", "teq", "vcmp", "vcmpe"):
        writes = []
    elif outside:
        long_mul = base in ("smull", "umull")
        long_mac = base in ("umlal", "umaal", "smlald", "smlaldx", "smlsld", "smlsldx") \
            or base.startswith("smlal")  # RdLo, RdHi are read and written
        writes = outside[:2] if long_mul or long_mac else outside[:1]
        reads = outside if long_mac else outside[2:] if long_mul else outside[1:]
        if len(operands.split(",")) == 2 and base not in _UNARY:  # "adds r0, #1": Rdn
            reads = outside
    if kind == "vec_mac" and ("mla" in base or base.startswith(("vfma", "vfms"))
                              or base.endswith("a")):  # accumulates into its destination
        reads += writes
    if "!" in operands or re.search(r"\],\s*#", operands):  # base register write-back
        writes += [r for r in _registers(inside[0])[:1]] if inside else []
    if kind in ("ldm", "stm", "fp_load", "fp_store") and listed:
        count = len(reglist)
        if re.search(r"[sd]\d+-[sd]\d+", listed.group(1)):
            lo, hi = (int(x) for x in re.findall(r"[sd](\d+)", listed.group(1))[:2])
            count = hi - lo + 1
        registers = max(count, 1)
        kind = {"fp_load": "fp_ldm", "fp_store": "fp_stm"}.get(kind, kind)
    else:
        registers = 2 if base in ("ldrd", "strd") else 1
    if kind in ("ldm", "load") and "pc" in writes:
        kind = "pop_pc"
    elif kind == "alu" and "pc" in writes:
        kind = "branch"
    register_offset = bool(inside) and len(_registers(inside[0])) > 1
    return Insn(pc, size, base, kind, frozenset(writes), frozenset(reads), address,
                registers, vector, register_offset)


_LINE = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f ]+?)\s*\t(\S+)(?:\t(.*))?$")


def disassemble(objdump: str, elf: Path, arch: str) -> dict[int, Insn]:
    """{address: Insn} of every instruction in the ELF's code sections. The architecture is
    given (-m) so that objdump decodes MVE on Armv8.1-M."""
    cmd = [objdump, "-d", f"-m{arch}" if arch else "", str(elf)]
    proc = subprocess.run([c for c in cmd if c], check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{objdump} failed on {elf}: {proc.stderr.strip()[:300]}")
    found: dict[int, Insn] = {}
    for line in proc.stdout.splitlines():
        m = _LINE.match(line)
        if m is None or m.group(3).startswith("."):  # .word, .short: data in the code
            continue
        pc = int(m.group(1), 16)
        size = sum(len(word) // 2 for word in m.group(2).split())
        found[pc] = classify(pc, size, m.group(3), m.group(4) or "")
    return found


def block(code: dict[int, Insn], pc: int, count: int) -> list[Insn]:
    """The `count` instructions from pc on (a translation block), in order."""
    insns = []
    for _ in range(count):
        insn = code.get(pc)
        if insn is None:  # not in the disassembly (code copied to RAM): priced as an ALU op
            insn = Insn(pc, 2, "?", "alu", frozenset(), frozenset(), frozenset())
        insns.append(insn)
        pc += insn.size
    return insns
