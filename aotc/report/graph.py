"""The graph after fusion, drawn by graphviz's dot: kernels as boxes filled by their share of
the MACs and outlined by the backend that runs them, graph inputs and outputs as ellipses,
tensors as edges labelled with their type. Returns dot's SVG, ready to inline in HTML."""

from __future__ import annotations

import contextlib
import shutil
from typing import Any

import graphviz

from aotc.errors import AotcError

DOT_MISSING = "graphviz's dot is not installed (apt-get install graphviz)"
NATIVE_COLOUR = "#4d4d4d"
# BYOC backends get these outline colours in order of first appearance in the schedule.
BACKEND_COLOURS = ("#2166ac", "#1b7837", "#762a83", "#b35806")
# Fill by share of the model's MACs, light to dark (square-root scale: small shares differ).
MAC_HEAT = ("#ffffff", "#fee6ce", "#fdd0a2", "#fdae6b", "#fd8d3c", "#f16913")
IO_FILL = "#e0ecf4"


def backend_colours(schedule: list[dict[str, Any]]) -> dict[str, str]:
    """Backend name -> outline colour: native grey, each BYOC backend its own colour."""
    colours = {"native": NATIVE_COLOUR}
    for row in schedule:
        if row["backend"] not in colours:
            colours[row["backend"]] = BACKEND_COLOURS[(len(colours) - 1) % len(BACKEND_COLOURS)]
    return colours


def mac_fill(macs: int, total: int) -> str:
    if macs <= 0 or total <= 0:
        return MAC_HEAT[0]
    level = 1 + int((macs / total) ** 0.5 * (len(MAC_HEAT) - 1))
    return MAC_HEAT[min(level, len(MAC_HEAT) - 1)]


def _label(*lines: str) -> str:
    """Lines for a dot label or tooltip: each escaped (names may hold backslashes)."""
    return "\\n".join(graphviz.escape(t) for t in lines)


def require_dot() -> None:
    """Raises the one-line AotcError when dot is not on PATH."""
    if shutil.which("dot") is None:
        raise AotcError(DOT_MISSING)


def fused_graph(data: dict[str, Any]) -> graphviz.Digraph:
    """The dot description of inspect's "schedule", "inputs" and "outputs"."""
    d = graphviz.Digraph("fused", graph_attr={"rankdir": "TB", "nodesep": "0.3",
                                              "ranksep": "0.35", "fontname": "Helvetica"},
                         node_attr={"fontname": "Helvetica", "fontsize": "11"},
                         edge_attr={"fontname": "Helvetica", "fontsize": "9",
                                    "color": "#666666"})
    ids = {f"input:{t['name']}": f"in{i}" for i, t in enumerate(data["inputs"])}
    for i, t in enumerate(data["inputs"]):
        d.node(f"in{i}", label=_label(f"input {t['name']}", t["type"]),
               shape="ellipse", style="filled", fillcolor=IO_FILL)
    for i, t in enumerate(data.get("state", [])):  # streaming: read from the state buffer
        ids[f"input:{t['name']}"] = f"st{i}"
        d.node(f"st{i}", label=_label(f"state {t['name']}", t["type"]),
               shape="ellipse", style="dashed,filled", fillcolor=IO_FILL)
    colours = backend_colours(data["schedule"])
    total = data["total_macs"]
    for i, row in enumerate(data["schedule"]):
        ids[row["kernel"]] = f"k{i}"
        lines = [row["kernel"], row["ops"]]
        if row["macs"]:
            lines.append(f"{row['macs']:,} MACs ({100 * row['macs'] / total:.1f}%)")
        if row["backend"] != "native":
            lines.append(row["backend"])
        fused = [f"{f['op']}: {f['name']}" for f in row["fused"]]
        # A kernel inside an If branch or a loop body is drawn in a box named after it.
        where = d.subgraph(name=f"cluster_{row['in']}", graph_attr={
            "label": row["in"], "style": "dashed", "color": "#999999"}) if row.get("in") \
            else contextlib.nullcontext(d)
        with where as sub:
            sub.node(f"k{i}", label=_label(*lines), tooltip=_label(*fused), shape="box",
                     style="rounded,filled", fillcolor=mac_fill(row["macs"], total),
                     color=colours[row["backend"]], penwidth="2")
    for i, row in enumerate(data["schedule"]):
        for t in row["inputs"]:
            # Several writers: an If's result (one per branch), a loop-carried value.
            for w in t.get("kernels") or [t["kernel"]]:
                src = ids.get(w) if w else ids.get(f"input:{t['graph_input']}")
                if src is not None:  # None: a loop's counter, a C local of the run function
                    d.edge(src, f"k{i}", label=graphviz.escape(t["type"]))
    for i, t in enumerate(data["outputs"]):
        d.node(f"out{i}", label=_label(f"output {t['name']}", t["type"]),
               shape="ellipse", style="filled", fillcolor=IO_FILL)
        # always written by a kernel (a Copy if need be); by several: an If's result
        for w in t.get("kernels") or ([t["kernel"]] if t["kernel"] else []):
            d.edge(ids[w], f"out{i}", label=graphviz.escape(t["type"]))
    return d


def graph_svg(data: dict[str, Any]) -> str:
    """dot's SVG of the fused graph without the XML prolog and doctype (inline in HTML)."""
    try:
        svg = fused_graph(data).pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound:
        raise AotcError(DOT_MISSING) from None
    return svg[svg.index("<svg"):]
