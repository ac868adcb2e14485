"""Measuring firmware, the parts that need no board: instruction counters (the QEMU TCG plugin
boards/qemu_plugin/insncount.c for emulated boards, callgrind for the host) and parsers for
`size -A`, `nm -S` and gcc's .su files. aotc.targets.boards drives these; use it, not this module.
Counts per function are self counts (instructions inside the function's own address range);
call counts are inclusive (from entering the function until it returns, callees included).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from aotc import paths


def plugin_library() -> Path:
    """The plugin built with the host cc, once per source version, in the user's cache
    directory (never the source tree)."""
    plugin_source = paths.qemu_plugin_source()
    source = plugin_source.read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aotc"
    lib = cache / f"libinsncount-{hashlib.sha256(source).hexdigest()[:16]}.so"
    if not lib.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = lib.with_name(f"{lib.name}.{os.getpid()}.tmp")
        if shutil.which(os.environ.get("CC", "cc")) is None:
            raise RuntimeError("no host C compiler to build the QEMU plugin: install gcc")
        cmd = [os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-fvisibility=hidden",
               "-o", str(tmp), str(plugin_source)]  # fmt: skip
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


def merge_aliases(ranges: list[tuple[str, int, int]], order: list[str]
                  ) -> list[tuple[str, int, int]]:
    """Functions gcc folded into one body (identical code, -fipa-icf) share an address range:
    one range named "a=b=c" (in `order`), so their instructions are counted once, not once each."""
    groups: dict[tuple[int, int], list[str]] = {}
    for name, lo, hi in ranges:
        members = groups.setdefault((lo, hi), [])
        if name not in members:
            members.append(name)
    rank = {name: i for i, name in enumerate(order)}
    return [("=".join(sorted(names, key=lambda n: rank.get(n, len(rank)))), lo, hi)
            for (lo, hi), names in groups.items()]


def write_ranges(path: Path, ranges: list[tuple[str, int, int]],
                 kinds: dict[str, str] | None = None) -> None:
    """The plugin's ranges= file. kinds maps a range name to "call" (also count its calls,
    callees included) or "caller" (the range those calls return to); other ranges are "self"."""
    kinds = kinds or {}
    path.write_text("".join(f"{name} {lo:#x} {hi:#x} {kinds.get(name, 'self')}\n"
                            for name, lo, hi in ranges))


def parse_plugin_output(path: Path) -> tuple[int, dict[str, int], dict[str, int]]:
    """(total, {function: self count}, {function: inclusive count of its calls}) from the
    plugin's out= file; ranges of one name are summed. With enter=/caller=, the inclusive count
    of that window is "window" in the self counts."""
    if not path.is_file():
        raise RuntimeError("the instruction-count plugin wrote no result (did QEMU load it?)")
    total, counts, calls = 0, {}, {}
    for line in path.read_text().splitlines():
        fields = line.split()
        if fields[0] == "total":
            total = int(fields[1])
        elif fields[0] == "window":  # enter=/caller= given: the inclusive count of a call
            counts["window"] = int(fields[1])
        elif fields[0] == "block":  # blocks=1: parse_blocks reads these
            continue
        elif fields[0] == "call":
            calls[fields[1]] = calls.get(fields[1], 0) + int(fields[2])
        else:
            counts[fields[1]] = counts.get(fields[1], 0) + int(fields[2])
    return total, counts, calls


def parse_blocks(path: Path) -> list[tuple[int, int, int, str, int, int]]:
    """The plugin's blocks=1 lines: (pc, instructions, end, context, executions,
    fall-throughs) per translated block and context."""
    blocks = []
    for line in path.read_text().splitlines():
        if line.startswith("block "):
            _, pc, n, end, context, count, fallthrough = line.split()
            blocks.append((int(pc, 16), int(n), int(end, 16), context, int(count),
                           int(fallthrough)))
    return blocks


def callgrind_command(out: Path) -> list[str]:
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--quiet"]


def parse_callgrind(path: Path, inclusive: bool = False, caller: str | None = None
                    ) -> tuple[int, dict[str, int]]:
    """(total, {function: self count}) from a callgrind output file (Ir events only); with
    inclusive, {callee: cost of the calls to it, its callees included} instead, only of the
    calls made by `caller` when given (so k calling its clone k.part.0 is not counted twice)."""
    total, counts, names, fn, cfn, call = 0, {}, {}, None, None, False
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            total = int(line.split()[1])
        elif line.startswith(("fn=", "cfn=")):  # "(id) name" the first time, then "(id)"
            ref, _, name = line.partition("=")[2].partition(" ")
            if name:
                names[ref] = name.split("'")[0].split(".")[0]
            if line.startswith("fn="):
                fn = names.get(ref, ref)
            else:
                cfn = names.get(ref, ref)
        elif line.startswith("calls="):
            call = True  # the next cost line is the call's inclusive cost, not self cost
        elif line[:1].isdigit() or line[:1] in "+-*":
            fields = line.split()
            key = cfn if call else fn
            by_caller = caller is None or not call or fn == caller
            if call == inclusive and by_caller and key is not None and len(fields) > 1:
                counts[key] = counts.get(key, 0) + int(fields[1])
            call = False
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


def largest_symbols(nm_s_output: str, count: int = 3) -> dict[str, list[tuple[str, int]]]:
    """The `count` largest symbols in flash (code, read-only data) and in RAM (data, bss,
    small data), from the output of `nm -S`: what dominates a firmware that does not fit."""
    found: dict[str, list[tuple[str, int]]] = {"flash": [], "ram": []}
    for line in nm_s_output.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[2] in "tTrRdDbBgGsSC":
            where = "flash" if fields[2] in "tTrR" else "ram"
            found[where].append((fields[3], int(fields[1], 16)))
    return {k: sorted(v, key=lambda s: (-s[1], s[0]))[:count] for k, v in found.items()}


def stack_usage(build_dir: Path, kernels: list[str] | None = None, root: str | None = None
                ) -> dict:
    """Frames from gcc's .su files (-fstack-usage) and the call graph from its .ci files
    (-fcallgraph-info=su) under build_dir.

    max_bytes/function: the largest frame among `kernels` (all functions when None; never the
    startup's fault handler when kernels are given). path_bytes: the deepest call chain from
    `root` over functions with a known frame; library functions without one (expf, memcpy) are
    listed in "library_calls". recursion: the call cycles found (an empty list: none).
    """
    functions: dict[str, int] = {}
    dynamic = set()
    for su in sorted(build_dir.rglob("*.su")):
        for line in su.read_text().splitlines():
            location, size, qualifiers = line.rsplit("\t", 2)
            name = location.rsplit(":", 1)[-1]
            functions[name] = max(functions.get(name, 0), int(size))
            if "dynamic" in qualifiers:
                dynamic.add(name)
    graph, frames = call_graph(build_dir)
    # gcc's clones (k.constprop.0, k.isra.0, k.part.0) count for their kernel.
    wanted = set(kernels) if kernels is not None else None
    pool = {f: n for f, n in functions.items() if wanted is None or _base(f) in wanted}
    if not pool and root in functions:  # every kernel was inlined into the run function
        pool = {root: functions[root]}
    deepest = max(pool, key=lambda f: (pool[f], f), default=None)
    depth, library = _deepest_path(graph, frames, root) if root and graph else (0, set())
    return {
        "max_bytes": pool[deepest] if deepest else 0,
        "function": _base(deepest) if deepest else None,
        "functions": functions,
        "dynamic": sorted(dynamic),
        "path_bytes": depth,
        "library_calls": sorted(library),
        "recursion": _cycles(graph),
    }


def _base(function: str) -> str:
    return function.split(".")[0]


_CI_NODE = re.compile(r'^node: \{ title: "([^"]+)" label: "([^"]*)"')
_CI_EDGE = re.compile(r'^edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')
_CI_FRAME = re.compile(r"\\n(\d+) bytes \(")


def call_graph(build_dir: Path) -> tuple[dict[str, set[str]], dict[str, int]]:
    """({caller: {callees}}, {function: frame bytes}) from gcc's .ci files (-fcallgraph-info=su).
    gcc titles static functions "file:name"; the name alone is enough here (static names do not
    clash in a bundle, and a clash would only merge two nodes, never hide a cycle). Clones keep
    their full name (k.part.0 is a callee of k, not k calling itself). Functions without a
    frame are declarations only: library code compiled elsewhere."""
    graph: dict[str, set[str]] = {}
    frames: dict[str, int] = {}
    local: dict[str, Path] = {}
    for ci in sorted(build_dir.rglob("*.ci")):
        for line in ci.read_text().splitlines():
            node, edge = _CI_NODE.match(line), _CI_EDGE.match(line)
            if node:
                name = node.group(1).rsplit(":", 1)[-1]
                graph.setdefault(name, set())
                frame = _CI_FRAME.search(node.group(2))
                if frame:
                    frames[name] = max(frames.get(name, 0), int(frame.group(1)))
            elif edge:
                caller, callee = (t.rsplit(":", 1)[-1] for t in edge.groups())
                graph.setdefault(caller, set()).add(callee)
                graph.setdefault(callee, set())
                if ":" in edge.group(2):
                    local[callee] = ci  # a static function of this file
    # A static callee without a node was folded into an identical function (gcc -fipa-icf)
    # and has that function's frame: charge the largest frame of its file, an upper bound.
    largest: dict[Path, int] = {}
    for name, ci in local.items():
        if name not in frames:
            if ci not in largest:
                largest[ci] = max(map(int, _CI_FRAME.findall(ci.read_text())), default=0)
            frames[name] = largest[ci]
    return graph, frames


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every call cycle reached by a depth-first search (self-recursion included), each once."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []
    cycles: list[list[str]] = []

    def visit(f: str) -> None:
        state[f] = 1
        path.append(f)
        for g in sorted(graph.get(f, ())):
            if state.get(g) == 1:
                cycles.append(path[path.index(g):])
            elif g not in state:
                visit(g)
        path.pop()
        state[f] = 2

    for f in sorted(graph):
        if f not in state:
            visit(f)
    return cycles


def _deepest_path(graph: dict[str, set[str]], frames: dict[str, int], root: str
                  ) -> tuple[int, set[str]]:
    """Bytes of the deepest chain from root (cycles are cut: `recursion` reports them) and the
    functions on the way whose frame is unknown (precompiled library code)."""
    memo: dict[str, int] = {}
    library: set[str] = set()

    def depth(f: str, on_path: frozenset[str]) -> int:
        if f in memo:
            return memo[f]
        if f not in frames:
            library.add(f)
            return 0
        below = [depth(g, on_path | {f}) for g in graph.get(f, ()) if g not in on_path]
        memo[f] = frames[f] + max(below, default=0)
        return memo[f]

    return depth(root, frozenset()), library
