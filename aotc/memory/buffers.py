"""Buffer requests and plans: the planner's whole view of a model (sizes, alignments,
lifetimes), the liveness lower bound, and the validity check every plan must pass."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class BufferReq:
    name: str
    size: int  # bytes, > 0
    align: int  # power of two, e.g. 16
    first: int  # first step (kernel index) where the buffer is live
    last: int  # last step where it is live (inclusive); scratch has first == last


@dataclass(frozen=True)
class Plan:
    offsets: dict[str, int]  # byte offset per buffer name (each a multiple of its align)
    size: int  # arena bytes = max(offset + size), rounded up to max align (0 if no buffers)
    algorithm: str  # name of the algorithm that produced it


def overlaps(a: BufferReq, b: BufferReq) -> bool:
    """True if the lifetimes of a and b share at least one step."""
    return a.first <= b.last and b.first <= a.last


def lower_bound(reqs: Iterable[BufferReq]) -> int:
    """Max over steps of the bytes live at that step; no arena can be smaller (alignment aside)."""
    deltas: dict[int, int] = {}
    for r in reqs:
        deltas[r.first] = deltas.get(r.first, 0) + r.size
        deltas[r.last + 1] = deltas.get(r.last + 1, 0) - r.size
    live = best = 0
    for step in sorted(deltas):
        live += deltas[step]
        best = max(best, live)
    return best


def check_no_overlap(reqs: Iterable[BufferReq], plan: Plan) -> None:
    """Raise ValueError if the plan is invalid for these requests.

    Invalid means: a buffer has no offset, an offset is negative or misaligned, a buffer ends
    past plan.size, or two buffers live at the same step share a byte.
    """
    reqs = list(reqs)
    for r in reqs:
        if r.name not in plan.offsets:
            raise ValueError(f"buffer {r.name!r} has no offset in the plan")
        off = plan.offsets[r.name]
        if off < 0:
            raise ValueError(f"buffer {r.name!r} has negative offset {off}")
        if off % r.align:
            raise ValueError(f"buffer {r.name!r} offset {off} is not a multiple of {r.align}")
        if off + r.size > plan.size:
            raise ValueError(
                f"buffer {r.name!r} ends at {off + r.size}, beyond arena size {plan.size}"
            )
    for i, a in enumerate(reqs):
        a_lo = plan.offsets[a.name]
        for b in reqs[i + 1 :]:
            if not overlaps(a, b):
                continue
            b_lo = plan.offsets[b.name]
            if a_lo < b_lo + b.size and b_lo < a_lo + a.size:
                raise ValueError(
                    f"buffers {a.name!r} [{a_lo}, {a_lo + a.size}) and {b.name!r} "
                    f"[{b_lo}, {b_lo + b.size}) are live together (steps "
                    f"{max(a.first, b.first)}..{min(a.last, b.last)}) and overlap in memory"
                )
