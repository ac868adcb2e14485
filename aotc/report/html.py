"""Render the report's dict (aotc.report.collect) into one self-contained HTML page through
templates/report.html.j2: the rows each table shows are built here, the markup is the
template's. No scripts, no network: inline CSS and SVG only."""

from __future__ import annotations

import functools
from typing import Any

import jinja2
from markupsafe import Markup

from aotc.paths import templates_dir
from aotc.report.graph import MAC_HEAT, backend_colours, graph_svg, mac_fill
from aotc.report.timeline import timeline
from aotc.targets.runner import OTHER_ROW

NAME_CHARS = 40  # longer ONNX names are shortened in the middle (the full name is on hover)


@functools.cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())),
                             undefined=jinja2.StrictUndefined, autoescape=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["n"] = lambda v: "" if v is None else f"{v:,}"
    return env


def short(name: str, limit: int = NAME_CHARS) -> str:
    if len(name) <= limit:
        return name
    head = limit // 3
    return name[:head] + "…" + name[len(name) - (limit - head - 1):]


def _summary(data: dict[str, Any]) -> list[dict[str, Any]]:
    """(label, shown text, data key, raw value) rows of the model summary."""
    m = data["memory"]
    io = [("inputs", data["inputs"]), ("outputs", data["outputs"])]
    offloaded = sum(r["backend"] != "native" for r in data["schedule"])
    rows = [
        ("Model", f"{data['model']} (opset {data['opset']})", "model", data["model"]),
        *((label.capitalize(), "; ".join(f"{t['name']}: {t['type']}" for t in ts), label,
           len(ts)) for label, ts in io),
        ("Parameters", f"{data['params']:,}", "params", data["params"]),
        ("MACs", f"{data['total_macs']:,}", "total_macs", data["total_macs"]),
        ("Weights in flash", f"{data['weights_bytes']:,} B (model constants "
         f"{data['model_const_bytes']:,} B)", "weights_bytes", data["weights_bytes"]),
        ("Kernels", f"{len(data['kernels'])}" + (f" ({offloaded} offloaded)" if offloaded
                                                 else ""), "kernels", len(data["kernels"])),
        ("Arena", f"{m['arena_bytes']:,} B ({m['algorithm']})", "arena_bytes", m["arena_bytes"]),
        ("Liveness lower bound", f"{m['lower_bound']:,} B ({m['arena_holds']}; arena "
         f"{m['over_bound_pct']:+.1f}%)", "lower_bound", m["lower_bound"]),
        ("Bound with inputs and outputs", f"{m['io_lower_bound']:,} B (activations + scratch + "
         "graph I/O)", "io_lower_bound", m["io_lower_bound"]),
    ]
    if m.get("state_bytes"):  # streaming: the caller's state buffer (docs/streaming.md)
        rows.append(("State between calls", f"{m['state_bytes']:,} B, the caller's buffer "
                     "outside the arena (" + "; ".join(
                         f"{t['name']}: {t['type']}" for t in data.get("state", [])) + ")",
                     "state_bytes", m["state_bytes"]))
    stack = m.get("stack_temporaries") or []
    if stack:  # in-place temporaries on the C stack (docs/memory.md): outside arena and bounds
        largest = max(t["bytes"] for t in stack)
        rows.append(("Stack temporaries", f"{largest:,} B in the largest kernel, outside the "
                     "arena and its bounds (" + ", ".join(f"{t['kernel']} {t['name']} "
                                                           f"{t['bytes']} B" for t in stack)
                     + ")", "stack_temporaries", largest))
    b = data["bench"]
    if b is not None:
        per_mac = (f" ({b['instructions'] / data['total_macs']:.2f} per MAC)"
                   if data["total_macs"] else "")
        s, st = b["sizes"], b["stack"]
        rows += [
            ("Instructions per inference", f"{b['instructions']:,} on {b['board']}{per_mac}",
             "instructions", b["instructions"]),
            ("Firmware flash", f"{s['flash']:,} B (text {s['text']:,}, rodata {s['rodata']:,},"
             f" data {s['data']:,}); kernel code {sum(b['kernel_flash'].values()):,} B",
             "flash", s["flash"]),
            ("Firmware RAM", f"{s['ram']:,} B (data + bss, arena {s['arena']:,}) + stack",
             "ram", s["ram"]),
            ("Stack", f"deepest kernel frame {st.get('max_bytes')} B ({st.get('function')}); "
             f"deepest call chain {st.get('path_bytes')} B", "stack", st.get("path_bytes")),
        ]
    return [dict(zip(("label", "text", "key", "value"), r)) for r in rows]


def _measured(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per kernel: the instructions and code bytes of the body it is in. gcc folds identical
    kernels into one body: its members share one count ("group" names them all)."""
    b = data["bench"]
    if b is None:
        return {}
    macs = {r["kernel"]: r["macs"] for r in data["schedule"]}
    out = {}
    for key, count in b["kernels"].items():
        members = key.split("=")
        group_macs = sum(macs[k] for k in members)
        for k in members:
            out[k] = {"instructions": count, "group": members if len(members) > 1 else [],
                      "per_mac": count / group_macs if group_macs else None,
                      "flash": b["kernel_flash"].get(key)}
    return out


def _kernel_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    colours = backend_colours(data["schedule"])
    measured = _measured(data)
    total = data["total_macs"]
    rows = []
    for r in data["schedule"]:
        rows.append({
            **r, "colour": colours[r["backend"]], "fill": mac_fill(r["macs"], total),
            "share": 100 * r["macs"] / total if total else 0.0,
            "fused": [{**f, "short": short(f["name"])} for f in r["fused"]],
            "output_types": ", ".join(t["type"] for t in r["outputs"]),
            "control": r.get("in", ""),  # the If branch or loop body it runs in
            "measured": measured.get(r["kernel"]),
            "tuned_text": ", ".join(f"{k}={v}" for k, v in sorted(r.get("tuned", {}).items()))
            or "default",
        })
    return rows


def _bench_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """bench's table: one row per counted body (inclusive and self counts), then the run
    function (its own instructions and its calls outside kernels)."""
    b = data["bench"]
    if b is None:
        return []
    rows = [{"key": k, "instructions": n, "self": b["self"].get(k),
             "flash": b["kernel_flash"].get(k)} for k, n in b["kernels"].items()]
    rows.append({"key": OTHER_ROW, "instructions": b["other"], "self": b.get("run"),
                 "flash": None})
    for r in rows:
        r["share"] = 100 * r["instructions"] / max(b["instructions"], 1)
    return rows


def view(data: dict[str, Any]) -> dict[str, Any]:
    """The template's context for the report dict ``data``."""
    colours = backend_colours(data["schedule"])
    return {
        "data": data, "summary": _summary(data), "kernels": _kernel_rows(data),
        "byoc": bool(data["partition"]), "bench": data["bench"],
        # a schedule column when a tuning log changed some kernel's knobs
        "tuned": any(r.get("tuned") for r in data["schedule"]),
        "bench_rows": _bench_rows(data),
        "timeline": timeline(data["memory"], data["kernels"]),
        "graph_svg": Markup(graph_svg(data)),
        "backend_legend": sorted(colours.items(), key=lambda kv: kv[0] != "native"),
        "heat_legend": MAC_HEAT,
    }


def render_html(data: dict[str, Any]) -> str:
    return _env().get_template("report.html.j2").render(**view(data))
