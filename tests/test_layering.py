"""The layering of aotc/, read from the code's imports (the AST, every import statement,
TYPE_CHECKING and function-local ones included): no module imports one of a later layer, and
no two modules import each other, directly or around a circle.

LAYERS is the one statement of the allowed direction: bottom first, each entry a list of module
prefixes; a module belongs to the entry of its longest matching prefix and may import modules of
its own layer and of the layers below. docs/architecture.md shows the same list (checked below).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "aotc"

LAYERS: list[tuple[str, list[str]]] = [
    ("base", ["aotc.errors", "aotc.dtypes", "aotc.paths", "aotc.progress", "aotc.names",
              "aotc.version"]),
    ("graph IR", ["aotc.ir"]),
    ("knobs", ["aotc.schedules", "aotc.schedules.common", "aotc.schedules.conv.knobs",
               "aotc.schedules.gemm.knobs"]),
    ("loop IR", ["aotc.loops"]),
    ("schedules", ["aotc.schedules.conv", "aotc.schedules.gemm"]),
    ("ops", ["aotc.ops"]),
    ("frontend", ["aotc.frontend"]),
    ("passes", ["aotc.passes"]),
    ("ordering", ["aotc.steps"]),
    ("memory", ["aotc.memory"]),
    ("lowering", ["aotc.lower"]),
    ("byoc", ["aotc.byoc"]),
    ("compilation", ["aotc.compilation"]),
    ("codegen", ["aotc.codegen"]),
    ("targets", ["aotc.targets"]),
    ("driver", ["aotc.compiler"]),
    ("verification", ["aotc.verification"]),
    ("tools", ["aotc.tune", "aotc.quantize", "aotc.package"]),
    ("api", ["aotc.api"]),
    ("report", ["aotc.report"]),
    ("cli", ["aotc.cli", "aotc.__main__", "aotc"]),
]


# Narrow interfaces the order alone would allow: (importer prefix, imported prefix) never.
NARROW: list[tuple[str, str]] = [
    ("aotc.memory", "aotc.ops"),  # the planner sees sizes and lifetimes, no op geometry
    ("aotc.schedules", "aotc.ops"),  # a schedule gets the op's geometry as arguments
    ("aotc.ir", "aotc.ops"),  # the graph IR knows no operator
]


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module(p): p for p in sorted(PKG.rglob("*.py"))}


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The aotc modules ``name`` imports (``from aotc.x import y`` counts aotc.x.y when that is
    a module, else aotc.x)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "aotc"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            if base.split(".")[0] != "aotc":
                continue
            for a in node.names:
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base)
    return out - {name}


def _layer(module: str) -> int:
    best, rank = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            inside = module.startswith(p + ".") and p != "aotc"  # the face is itself only
            if (module == p or inside) and len(p) > best:
                best, rank = len(p), i
    assert rank >= 0, f"{module} is in no layer: add it to LAYERS (and docs/architecture.md)"
    return rank


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(p, m, set(mods)) for m, p in mods.items()}


def test_every_module_has_a_layer() -> None:
    for m in _modules():
        _layer(m)


def test_no_import_of_a_later_layer() -> None:
    bad = []
    for m, deps in sorted(_graph().items()):
        for d in sorted(deps):
            if _layer(d) > _layer(m):
                bad.append(f"{m} ({LAYERS[_layer(m)][0]}) imports {d} "
                           f"({LAYERS[_layer(d)][0]})")
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_narrow_interfaces() -> None:
    def under(m: str, p: str) -> bool:
        return m == p or m.startswith(p + ".")

    bad = [f"{m} imports {d}" for m, deps in sorted(_graph().items()) for d in sorted(deps)
           for a, b in NARROW if under(m, a) and under(d, b)]
    assert not bad, "imports across a narrow interface:\n" + "\n".join(bad)


def test_no_import_circle() -> None:
    graph = _graph()
    # Tarjan's strongly connected components; a component of two or more is a circle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    # A package's face (__init__) importing its own submodules while they import it back (for
    # names it defines first) is how a Python package is put together, not a circle of design.
    circles = [c for c in circles if not _only_face_and_children(c)]
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def _only_face_and_children(comp: list[str]) -> bool:
    faces = [m for m in comp if all(o == m or o.startswith(m + ".") for o in comp)]
    return bool(faces)


def test_architecture_doc_lists_the_layers() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| (\d+) \| ([^|]+) \| ([^|]+) \|", text, re.M)
    assert [(int(i), n.strip(), sorted(x.strip(" `") for x in m.split(",")))
            for i, n, m in rows] == [(i, n, sorted(p)) for i, (n, p) in enumerate(LAYERS)], \
        "docs/architecture.md's layer table differs from tests/test_layering.py LAYERS"
