"""Human- and machine-readable views of a plan: an ASCII arena timeline (like TFLM's
PrintMemoryPlan) and a JSON summary."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import replace

from aotc.memory.buffers import BufferReq, Plan, lower_bound

# Legend letters for ascii_timeline; they repeat past 62 buffers (the legend disambiguates).
_GLYPHS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _report_order(reqs: Iterable[BufferReq]) -> list[BufferReq]:
    return sorted(reqs, key=lambda r: (r.first, r.last, r.name))


def _column_glyph(
    live: Sequence[BufferReq], plan: Plan, glyph: dict[str, str], c_lo: int, c_hi: int
) -> str:
    """Letter of the live buffer covering most of bytes [c_lo, c_hi); '!' if two overlap."""
    hits = []  # (bytes covered, offset, buffer)
    for r in live:
        lo = plan.offsets[r.name]
        cover = min(c_hi, lo + r.size) - max(c_lo, lo)
        if cover > 0:
            hits.append((cover, lo, r))
    for (_, a_lo, a), (_, b_lo, b) in itertools.combinations(hits, 2):
        if a_lo < b_lo + b.size and b_lo < a_lo + a.size:
            return "!"
    if not hits:
        return "."
    _, _, best = max(hits, key=lambda h: (h[0], -h[1]))  # ties: the lower buffer
    return glyph[best.name]


def split_pools(reqs: Iterable[BufferReq], plan: Plan) -> list[tuple[str, list[BufferReq], Plan]]:
    """A plan over several pools as one (pool name, its buffers, its own plan) per pool."""
    reqs = list(reqs)
    out = []
    for pool, size in plan.pool_sizes.items():
        mine = [r for r in reqs if plan.pool_of[r.name] == pool]
        out.append((pool, mine, Plan({r.name: plan.offsets[r.name] for r in mine}, size,
                                     plan.algorithm)))
    return out


def ascii_timeline(reqs: Iterable[BufferReq], plan: Plan, width: int = 64) -> str:
    """Picture of the plan like TFLM's PrintMemoryPlan: one row per step, arena left to right
    (one picture per pool for a plan over several pools).

    Each column covers plan.size / width bytes and shows the letter of the live buffer covering
    most of it, '.' if free, '!' if two live buffers overlap there (an invalid plan). A buffer
    with a profile covers, at each step, only the bytes its profile gives.
    """
    if plan.pool_of:
        return "\n".join(f"pool {pool}: " + ascii_timeline(mine, sub, width)
                         for pool, mine, sub in split_pools(reqs, plan))
    ordered = _report_order(reqs)
    header = (
        f"arena {plan.size} B, bound of these buffers {lower_bound(ordered)} B, "
        f"algorithm {plan.algorithm}"
    )
    if not ordered or plan.size == 0:
        return header + "\n(no buffers)"
    cols = max(1, min(width, plan.size))
    glyph = {r.name: _GLYPHS[k % len(_GLYPHS)] for k, r in enumerate(ordered)}
    step_lo = min(r.first for r in ordered)
    step_hi = max(r.last for r in ordered)
    label_w = max(len(str(step_lo)), len(str(step_hi)))
    lines = [f"{header}, {plan.size / cols:.4g} B per column"]
    for step in range(step_lo, step_hi + 1):
        # A merged in-place buffer with a profile holds fewer bytes at some steps.
        live = [replace(r, size=r.bytes_during(step, step), profile=())
                for r in ordered if r.first <= step <= r.last]
        row = [
            _column_glyph(live, plan, glyph, c * plan.size // cols, (c + 1) * plan.size // cols)
            for c in range(cols)
        ]
        live_bytes = sum(r.size for r in live)
        lines.append(f"step {step:>{label_w}} |{''.join(row)}| {live_bytes} B live")
    lines.append("legend:")
    name_w = max(len(r.name) for r in ordered)
    for r in ordered:
        off = plan.offsets[r.name]
        lines.append(
            f"  {glyph[r.name]} {r.name:<{name_w}}  [{off}, {off + r.size})  size {r.size}"
            f"  align {r.align}  steps {r.first}..{r.last}"
        )
    return "\n".join(lines)


def plan_to_json(reqs: Iterable[BufferReq], plan: Plan) -> dict:
    """JSON-ready summary of a plan; buffers listed by first use, then last use, then name."""
    ordered = _report_order(reqs)
    bound = lower_bound(ordered)
    over = 0.0 if bound == 0 else round(100.0 * (plan.size - bound) / bound, 2)
    pools = {}
    if plan.pool_of:
        pools = {"pools": [{"name": pool, "bytes": sub.size, "lower_bound": lower_bound(mine)}
                           for pool, mine, sub in split_pools(ordered, plan)]}
    return {
        **pools,
        "arena_bytes": plan.size,
        "lower_bound": bound,
        "over_bound_pct": over,
        "algorithm": plan.algorithm,
        "buffers": [
            {
                "name": r.name,
                "offset": plan.offsets[r.name],
                "size": r.size,
                "align": r.align,
                "first": r.first,
                "last": r.last,
                **({"profile": [list(seg) for seg in r.profile]} if r.profile else {}),
                **({"pool": plan.pool_of[r.name]} if plan.pool_of else {}),
            }
            for r in ordered
        ],
    }

