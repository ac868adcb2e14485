"""The memory timeline as geometry: schedule steps across, arena offsets upwards, one rectangle
per buffer over its lifetime [first, last] at [offset, offset + size). Numbers in SVG user
units; templates/report.html.j2 draws them."""

from __future__ import annotations

import math
from typing import Any

# The plot area and the margins around it (axis labels left and below, line labels right).
PLOT_W, PLOT_H = 1000, 320
LEFT, RIGHT, TOP, BOTTOM = 70, 190, 14, 40
MAX_STEP_LABELS = 40
SCRATCH_FILL = "#c8c8c8"


def buffer_fill(step: int) -> str:
    """A colour per writing step, spread around the hue circle (golden angle), so neighbours
    in time differ."""
    return f"hsl({step * 137.508 % 360:.0f}, 55%, 65%)"


def _nice_step(top: int, ticks: int = 5) -> int:
    """1, 2 or 5 times a power of ten, giving about `ticks` ticks up to `top`."""
    raw = max(top / ticks, 1)
    base = 10 ** math.floor(math.log10(raw))
    return int(next(m * base for m in (1, 2, 5, 10) if m * base >= raw))


def _hover(b: dict[str, Any]) -> str:
    held = ", ".join(b["tensors"])
    what = f"scratch of {b['kernel']}" if b["kind"] == "scratch" else f"written by {b['kernel']}"
    return (f"{held}\n{b['size']:,} B at [{b['offset']:,}, {b['offset'] + b['size']:,})\n"
            f"steps {b['first']}..{b['last']}, {what}")


def timeline(memory: dict[str, Any], kernels: list[str]) -> dict[str, Any]:
    """Rectangles, axis ticks and the arena / lower-bound lines for inspect's "memory". A plan
    over several pools stacks them, fastest at the bottom, each topped by a line."""
    arena, bound = memory["arena_bytes"], memory["lower_bound"]
    base, pool_lines, end = {}, [], 0
    for p in memory.get("pools", []):
        base[p["name"]] = end
        end += p["bytes"]
        pool_lines.append((end, f"pool {p['name']} {p['bytes']:,} B"))
    top_bytes = max(arena, bound, 1)
    step_w = PLOT_W / max(len(kernels), 1)

    def y(offset: float) -> float:
        return TOP + PLOT_H * (1 - offset / top_bytes)

    rects = []
    for b in memory["buffers"]:
        low = base.get(b.get("pool", ""), 0) + b["offset"]
        # A merged in-place buffer: one rectangle per profile segment (the bytes live then).
        for first, last, size in b.get("profile") or [(b["first"], b["last"], b["size"])]:
            rects.append({
                "x": LEFT + first * step_w, "w": (last - first + 1) * step_w,
                "y": y(low + size), "h": max(PLOT_H * size / top_bytes, 1.0),
                "fill": SCRATCH_FILL if b["kind"] == "scratch" else buffer_fill(b["first"]),
                "kind": b["kind"], "name": b["name"], "title": _hover(b),
            })
    every = math.ceil(len(kernels) / MAX_STEP_LABELS) or 1
    x_ticks = [{"x": LEFT + (i + 0.5) * step_w, "label": str(i), "title": k}
               for i, k in enumerate(kernels) if i % every == 0]
    tick = _nice_step(top_bytes)
    y_ticks = [{"y": y(v), "label": f"{v:,}"} for v in range(0, top_bytes + 1, tick)]
    # Equal values would print one label over the other: the bound's goes below its line.
    lines = [{"y": y(arena), "cls": "arena", "label": f"arena {arena:,} B", "dy": -4},
             {"y": y(bound), "cls": "bound", "label": f"liveness bound {bound:,} B", "dy": 12}]
    lines += [{"y": y(top), "cls": "arena", "label": label, "dy": -4}
              for top, label in pool_lines[:-1]]
    return {
        "width": LEFT + PLOT_W + RIGHT, "height": TOP + PLOT_H + BOTTOM,
        "left": LEFT, "top": TOP, "plot_w": PLOT_W, "plot_h": PLOT_H, "right": LEFT + PLOT_W,
        "bottom": TOP + PLOT_H, "rects": rects, "x_ticks": x_ticks, "y_ticks": y_ticks,
        "lines": lines,
    }
