"""Buffer requests and plans: the planner's whole view of a model (sizes, alignments,
lifetimes), the liveness lower bound, and the validity check every plan must pass."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class BufferReq:
    name: str
    size: int  # bytes, > 0
    align: int  # power of two, e.g. 16
    first: int  # first step (kernel index) where the buffer is live
    last: int  # last step where it is live (inclusive); scratch has first == last
    # A merged in-place buffer (merge_inplace) holds tensors of different sizes over its
    # lifetime: (first, last, bytes) segments, covering [first, last] in order, give the bytes
    # from its offset that hold live data at those steps. The rest of the buffer (up to size)
    # is free at those steps, and other buffers may use it. Empty: size bytes at every step.
    profile: tuple[tuple[int, int, int], ...] = ()

    def segments(self) -> tuple[tuple[int, int, int], ...]:
        """(first, last, bytes live from the offset) over the lifetime, in step order."""
        return self.profile or ((self.first, self.last, self.size),)

    def bytes_during(self, lo: int, hi: int) -> int:
        """The most bytes from the offset live at any step of [lo, hi] (0 if none)."""
        return max((b for f, la, b in self.segments() if f <= hi and lo <= la), default=0)


@dataclass(frozen=True)
class Plan:
    offsets: dict[str, int]  # byte offset per buffer name (each a multiple of its align)
    size: int  # arena bytes = max(offset + size), rounded up to max align (0 if no buffers)
    algorithm: str  # name of the algorithm that produced it
    # Several memory pools (aotc/memory/pools.py): the pool of each buffer, its offset then
    # being into that pool, and each pool's bytes (size is their sum). Empty: one arena.
    pool_of: dict[str, str] = field(default_factory=dict)
    pool_sizes: dict[str, int] = field(default_factory=dict)

    def pool_size(self, buffer: str) -> int:
        """Bytes of the arena or pool the buffer is in."""
        return self.pool_sizes[self.pool_of[buffer]] if self.pool_of else self.size


def overlaps(a: BufferReq, b: BufferReq) -> bool:
    """True if the lifetimes of a and b share at least one step."""
    return a.first <= b.last and b.first <= a.last


def lower_bound(reqs: Iterable[BufferReq]) -> int:
    """Max over steps of the bytes live at that step; no arena can be smaller (alignment aside)."""
    deltas: dict[int, int] = {}
    for r in reqs:
        for first, last, nbytes in r.segments():
            deltas[first] = deltas.get(first, 0) + nbytes
            deltas[last + 1] = deltas.get(last + 1, 0) - nbytes
    live = best = 0
    for step in sorted(deltas):
        live += deltas[step]
        best = max(best, live)
    return best


def merge_inplace(reqs: Iterable[BufferReq], pairs: Iterable[tuple[str, str]]
                  ) -> tuple[list[BufferReq], dict[str, str]]:
    """The planner's view of in-place steps: each (input, output) pair, where the output is
    written over the input as it dies, becomes one buffer named after the first of its chain,
    of the larger size, live over both lifetimes. Returns the requests and root -> buffer."""
    by_name = {r.name: r for r in reqs}
    buffer_of = {name: name for name in by_name}
    for x, y in pairs:
        buffer_of[y] = buffer_of[x]
    members: dict[str, list[BufferReq]] = {}
    for name, r in by_name.items():
        members.setdefault(buffer_of[name], []).append(r)
    return [merged_req(b, rs) for b, rs in members.items()], buffer_of


def merged_req(name: str, members: list[BufferReq]) -> BufferReq:
    """One buffer holding the members (tensors written over each other in place, each from
    offset 0): the larger size over both lifetimes, with a profile of the bytes live at each
    step (the largest member live there) when that is not the size throughout."""
    if len(members) == 1:
        return dataclasses.replace(members[0], name=name)
    first = min(r.first for r in members)
    last = max(r.last for r in members)
    size = max(r.size for r in members)
    align = max(r.align for r in members)
    # Breakpoints where the set of live members changes.
    cuts = sorted({first, last + 1} | {r.first for r in members} | {r.last + 1 for r in members})
    profile: list[tuple[int, int, int]] = []
    for lo, nxt in itertools.pairwise(cuts):
        nbytes = max((r.size for r in members if r.first <= lo <= r.last), default=size)
        if profile and profile[-1][2] == nbytes:
            profile[-1] = (profile[-1][0], nxt - 1, nbytes)
        else:
            profile.append((lo, nxt - 1, nbytes))
    flat = len(profile) == 1 and profile[0][2] == size
    return BufferReq(name, size, align, first, last, () if flat else tuple(profile))


def expand_plan(plan: Plan, buffer_of: dict[str, str]) -> Plan:
    """A plan of merged buffers as offsets of the roots they hold."""
    return Plan({root: plan.offsets[b] for root, b in buffer_of.items()}, plan.size,
                plan.algorithm,
                {root: plan.pool_of[b] for root, b in buffer_of.items()} if plan.pool_of else {},
                plan.pool_sizes)


def check_no_overlap(reqs: Iterable[BufferReq], plan: Plan,
                     allowed: Iterable[tuple[str, str]] = ()) -> None:
    """Raise ValueError if the plan is invalid for these requests.

    Invalid means: a buffer has no offset, an offset is negative or misaligned, a buffer ends
    past plan.size (or its pool's size), or two buffers live at the same step share a byte of
    the same arena or pool. A buffer with a profile (BufferReq.profile) holds, at each step,
    only the bytes its profile gives from its offset; the rest may hold other buffers then.
    ``allowed`` lists the
    (input, output) pairs of in-place steps: such a pair may share bytes, but only at the one
    step where the input dies and the output is born (the kernel's own business).
    """
    reqs = list(reqs)
    inplace = set(allowed)
    for r in reqs:
        if r.name not in plan.offsets:
            raise ValueError(f"buffer {r.name!r} has no offset in the plan")
        off = plan.offsets[r.name]
        if off < 0:
            raise ValueError(f"buffer {r.name!r} has negative offset {off}")
        if off % r.align:
            raise ValueError(f"buffer {r.name!r} offset {off} is not a multiple of {r.align}")
        if plan.pool_of and plan.pool_of.get(r.name) not in plan.pool_sizes:
            raise ValueError(f"buffer {r.name!r} is in no pool of the plan")
        if off + r.size > plan.pool_size(r.name):
            where = f"pool {plan.pool_of[r.name]!r}" if plan.pool_of else "arena"
            raise ValueError(
                f"buffer {r.name!r} ends at {off + r.size}, beyond {where} size "
                f"{plan.pool_size(r.name)}"
            )
    if plan.pool_of and sum(plan.pool_sizes.values()) != plan.size:
        raise ValueError(f"plan size {plan.size} is not the sum of its pools' sizes")
    for i, a in enumerate(reqs):
        a_lo = plan.offsets[a.name]
        for b in reqs[i + 1 :]:
            if not overlaps(a, b) or plan.pool_of.get(a.name) != plan.pool_of.get(b.name):
                continue
            pair = (a, b) if (a.name, b.name) in inplace else (b, a)
            if (pair[0].name, pair[1].name) in inplace and pair[0].last == pair[1].first:
                continue
            b_lo = plan.offsets[b.name]
            for fa, la, na in a.segments():
                for fb, lb, nb in b.segments():
                    if fa <= lb and fb <= la and a_lo < b_lo + nb and b_lo < a_lo + na:
                        raise ValueError(
                            f"buffers {a.name!r} [{a_lo}, {a_lo + na}) and {b.name!r} "
                            f"[{b_lo}, {b_lo + nb}) are live together (steps "
                            f"{max(fa, fb)}..{min(la, lb)}) and overlap in memory"
                        )
