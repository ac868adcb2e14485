"""Measuring firmware, the parts that need no board: instruction counters (the QEMU TCG plugin
boards/qemu_plugin/insncount.c for emulated boards, callgrind for the host) and parsers for
`size -A`, `nm -S` and gcc's .su files. aotc.boards drives these; use it, not this module.
Counts per function are self counts (instructions inside the function's own address range).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

PLUGIN_SOURCE = Path(__file__).resolve().parent.parent / "boards" / "qemu_plugin" / "insncount.c"


def plugin_library() -> Path:
    """The plugin built with the host cc, once per source version, in the user's cache
    directory (never the source tree)."""
    source = PLUGIN_SOURCE.read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aotc"
    lib = cache / f"libinsncount-{hashlib.sha256(source).hexdigest()[:16]}.so"
    if not lib.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = lib.with_name(f"{lib.name}.{os.getpid()}.tmp")
        if shutil.which(os.environ.get("CC", "cc")) is None:
            raise RuntimeError("no host C compiler to build the QEMU plugin: install gcc")
        cmd = [os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-fvisibility=hidden",
               "-o", str(tmp), str(PLUGIN_SOURCE)]  # fmt: skip
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"building the QEMU plugin failed: {proc.stderr.strip()}")
        os.replace(tmp, lib)  # atomic: parallel runs may race here
    return lib


def symbol_ranges(nm: str, elf: Path, names: list[str]) -> list[tuple[str, int, int]]:
    """[(name, lo, hi)] of the functions in `names`, from `nm -S`. gcc's clones and splits
    (k.isra.0, k.part.0, k.cold) count for their base name; a name with no symbol was inlined."""
    proc = subprocess.run(
        [nm, "-S", "--defined-only", str(elf)], check=False, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{nm} failed on {elf}: {proc.stderr.strip()}")
    wanted, found = set(names), []
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[2] in "tTwW" and fields[3].split(".")[0] in wanted:
            lo = int(fields[0], 16) & ~1  # Thumb function symbols have bit 0 set
            found.append((fields[3].split(".")[0], lo, lo + int(fields[1], 16)))
    return found


def write_ranges(path: Path, ranges: list[tuple[str, int, int]]) -> None:
    path.write_text("".join(f"{name} {lo:#x} {hi:#x}\n" for name, lo, hi in ranges))


def parse_plugin_output(path: Path) -> tuple[int, dict[str, int]]:
    """(total, {function: count}) from the plugin's out= file; ranges of one name are summed."""
    if not path.is_file():
        raise RuntimeError("the instruction-count plugin wrote no result (did QEMU load it?)")
    total, counts = 0, {}
    for line in path.read_text().splitlines():
        fields = line.split()
        if fields[0] == "total":
            total = int(fields[1])
        else:
            counts[fields[1]] = counts.get(fields[1], 0) + int(fields[2])
    return total, counts


def callgrind_command(out: Path) -> list[str]:
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--quiet"]


def parse_callgrind(path: Path) -> tuple[int, dict[str, int]]:
    """(total, {function: self count}) from a callgrind output file (Ir events only)."""
    total, counts, names, fn, skip = 0, {}, {}, None, False
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            total = int(line.split()[1])
        elif line.startswith(("fn=", "cfn=")):  # "(id) name" the first time, then "(id)"
            ref, _, name = line.partition("=")[2].partition(" ")
            if name:
                names[ref] = name.split("'")[0].split(".")[0]
            if line.startswith("fn="):
                fn = names.get(ref, ref)
        elif line.startswith("calls="):
            skip = True  # the next cost line is the call's inclusive cost, not self cost
        elif line[:1].isdigit() or line[:1] in "+-*":
            fields = line.split()
            if not skip and fn is not None and len(fields) > 1:
                counts[fn] = counts.get(fn, 0) + int(fields[1])
            skip = False
    return total, counts


# Section name prefix -> kind. Unlisted sections (link.ld's .heap/.stack reservations, debug
# info, attributes, the host's dynamic-linking tables) are not counted.
_SECTION_KINDS = {
    **dict.fromkeys((".text", ".vectors", ".init", ".fini", ".plt"), "text"),
    **dict.fromkeys(
        (".rodata", ".srodata", ".ARM.exidx", ".init_fini_arrays", ".eh_frame"), "rodata"
    ),
    **dict.fromkeys((".data", ".sdata", ".tdata", ".got"), "data"),
    **dict.fromkeys((".bss", ".sbss", ".tbss"), "bss"),
}


def section_sizes(size_a_output: str) -> dict[str, int]:
    """{text, rodata, data, bss} bytes from the output of `size -A`."""
    sizes = dict.fromkeys(("text", "rodata", "data", "bss"), 0)
    for line in size_a_output.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1].isdigit() and fields[0] != ".tbss_space":
            prefix = next((p for p in _SECTION_KINDS if fields[0].startswith(p)), None)
            if prefix is not None:
                sizes[_SECTION_KINDS[prefix]] += int(fields[1])
    return sizes


def symbol_size(nm_s_output: str, name: str) -> int:
    """Size of symbol `name` from the output of `nm -S`; 0 when it is absent."""
    for line in nm_s_output.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[3] == name:
            return int(fields[1], 16)
    return 0


def stack_usage(build_dir: Path) -> dict:
    """Largest frame over the .su files (gcc -fstack-usage) under build_dir."""
    functions: dict[str, int] = {}
    dynamic = set()
    for su in sorted(build_dir.rglob("*.su")):
        for line in su.read_text().splitlines():
            location, size, qualifiers = line.rsplit("\t", 2)
            name = location.rsplit(":", 1)[-1]
            functions[name] = max(functions.get(name, 0), int(size))
            if "dynamic" in qualifiers:
                dynamic.add(name)
    deepest = max(functions, key=lambda f: (functions[f], f), default=None)
    return {
        "max_bytes": functions[deepest] if deepest else 0,
        "function": deepest,
        "functions": functions,
        "dynamic": sorted(dynamic),
    }
