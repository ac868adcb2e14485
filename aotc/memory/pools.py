"""Several memory pools: buffers spread over named pools (a small fast one, a large slow one,
...), each its own arena with its own size limit.

The data model follows TVM USMP's: each buffer may go to any pool (its pool candidates), the
algorithm returns a (pool, offset) per buffer. Pools are listed fastest first:

1. when the whole plan fits the first pool, everything goes there (the one-arena plan);
2. else buffers are assigned largest first (first-fit decreasing), each to the first pool where
   it still fits at the lowest free offset among the pool's live buffers; the large feature maps
   that carry most of a kernel's memory traffic land in the fast pool while they fit (when that
   order finds no fit, two more orders are tried: by first use, longest-lived first);
3. each pool's buffers are then planned with the requested algorithm (the assignment's own
   placement, which fits, is kept if the algorithm does worse).

A model that fits no assignment raises PoolsDoNotFit with a one-line message naming the
shortfall. Like planner.py, this sees only (size, align, lifetime) requests.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from aotc.memory.buffers import BufferReq, Plan, overlaps
from aotc.memory.planner import plan

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")
_SECTION = re.compile(r"\.?[A-Za-z_][A-Za-z0-9_.$]*")
_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1 << 20, "MB": 1 << 20,
          "MIB": 1 << 20}


@dataclass(frozen=True)
class Pool:
    """A memory region the planner may put buffers in: a C name, its capacity in bytes and
    (optionally) the linker section the firmware places its array in."""

    name: str
    size: int
    section: str | None = None

    def __str__(self) -> str:
        return f"{self.name} {self.size:,} B"


def parse_size(text: str) -> int:
    """Bytes from '4096', '0x1000', '16K', '16KiB', '1M'."""
    m = re.fullmatch(r"\s*(0[xX][0-9a-fA-F]+|\d+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise ValueError(f"not a byte count: {text!r} (e.g. 4096, 0x1000, 16K, 1M)")
    return int(m.group(1), 0) * _UNITS[m.group(2).upper()]


def parse_pool(text: str) -> Pool:
    """A pool from the command line's NAME:BYTES[:SECTION], e.g. 'dtcm:64K:.dtcm'."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"--pool expects NAME:BYTES[:SECTION] (e.g. dtcm:64K:.dtcm), got "
                         f"{text!r}")
    return make_pool(parts[0], parse_size(parts[1]), parts[2] if len(parts) == 3 else None)


def make_pool(name: str, size: int, section: str | None = None) -> Pool:
    """A checked Pool: a C identifier for a name, a positive size, a plain section name."""
    from aotc.names import is_reserved

    if (not _NAME.fullmatch(name) or name.startswith("_") or is_reserved(name)
            or re.match(r"(k\d|aotc|a$|arena)", name, re.I)):
        raise ValueError(f"pool name {name!r} must be a C identifier (letters, digits, _; not "
                         f"a keyword, not starting with _, k<digit>, aotc or arena, not 'a'; at "
                         f"most 32 characters)")
    if not isinstance(size, int) or size <= 0:
        raise ValueError(f"pool {name!r}: size must be a positive number of bytes, got {size!r}")
    if section is not None and not _SECTION.fullmatch(section):
        raise ValueError(f"pool {name!r}: {section!r} is not a linker section name")
    return Pool(name, size, section or None)


def check_pools(pools: Sequence[Pool], model: str = "") -> None:
    """Pool names are unique, also as upper-case macro names, and apart from the model's own
    <model>_ symbols."""
    seen: set[str] = set()
    for p in pools:
        if p.name.upper() in seen:
            raise ValueError(f"pool {p.name!r} is listed twice (names are compared ignoring "
                             f"case: they become {p.name.upper()} macros)")
        if model and p.name.lower().startswith(f"{model.lower()}_"):
            raise ValueError(f"pool name {p.name!r} must not start with the model's prefix "
                             f"{model}_")
        seen.add(p.name.upper())


def resolve_pools(given: Sequence[Pool | str] | str | None, board_pools: Iterable[Any] = (),
                  model: str = "") -> list[Pool]:
    """The checked pools to plan into: `given` (Pool objects or NAME:BYTES[:SECTION] strings),
    or when it is None the target board's (board.toml [[pools]], as make_pool's arguments;
    none: one arena)."""
    if given is None:
        pools = [make_pool(*p) for p in board_pools]
    else:
        pools = [p if isinstance(p, Pool) else parse_pool(str(p))
                 for p in ((given,) if isinstance(given, str) else given)]
    check_pools(pools, model)
    return pools


class PoolsDoNotFit(ValueError):
    """No assignment of the buffers to the pools fits their sizes."""


def _align_up(value: int, align: int) -> int:
    return -(-value // align) * align


def peak(reqs: Sequence[BufferReq]) -> tuple[int, int, list[BufferReq]]:
    """(step, bytes, buffers live there, largest first) of the step with the most live bytes
    (the first such step)."""
    steps = sorted({r.first for r in reqs})  # live bytes only peak where a buffer starts
    best = (0, 0, [])
    for s in steps:
        live = [r for r in reqs if r.first <= s <= r.last]
        total = sum(r.size for r in live)
        if total > best[1]:
            best = (s, total, sorted(live, key=lambda r: (-r.size, r.name)))
    return best


# Orders the assignment tries, in turn, until one fits: largest first (first-fit decreasing),
# then by first use (the order of the ping-pong planner, tight on chains), then longest-lived
# first, then random shuffles of the buffers (fixed seed) while the work budget lasts (pairs of
# buffers compared, about a microsecond each). On random small cases (2-7 buffers, two pools),
# largest first alone misses a fit that an exhaustive search finds in 5 of 776 feasible cases
# (tests/memory/test_pools.py::test_assignment_against_exhaustive_search checks that all of
# them together miss none of its cases).
ASSIGN_MAX_TRIES = 200
ASSIGN_MAX_WORK = 200_000
_ORDERS: tuple[Callable[[BufferReq], tuple], ...] = (
    lambda r: (-r.size, r.first, r.name),
    lambda r: (r.first, -r.last, -r.size, r.name),
    lambda r: (r.first - r.last, -r.size, r.first, r.name),
)


def _assign(reqs: Sequence[BufferReq], pools: Sequence[Pool], order: Callable[[BufferReq], tuple]
            ) -> tuple[dict[str, str], dict[str, int], BufferReq | None, list[int]]:
    """Buffers in `order`, each to the first pool where it fits at its lowest free offset:
    (buffer -> pool, buffer -> offset), or the first buffer that fits no pool, with the end
    (aligned) each pool would need for it."""
    placed: dict[str, list[tuple[BufferReq, int]]] = {p.name: [] for p in pools}
    align: dict[str, int] = {p.name: 1 for p in pools}
    end: dict[str, int] = {p.name: 0 for p in pools}
    pool_of: dict[str, str] = {}
    offsets: dict[str, int] = {}
    for r in sorted(reqs, key=order):
        needs = []
        for p in pools:
            obstacles = sorted((off, off + q.size) for q, off in placed[p.name] if overlaps(q, r))
            off = _align_up(0, r.align)
            for lo, hi in obstacles:
                if off + r.size <= lo:
                    break
                if hi > off:
                    off = _align_up(hi, r.align)
            need = _align_up(max(end[p.name], off + r.size), max(align[p.name], r.align))
            if need <= p.size:
                placed[p.name].append((r, off))
                end[p.name] = max(end[p.name], off + r.size)
                align[p.name] = max(align[p.name], r.align)
                pool_of[r.name] = p.name
                offsets[r.name] = off
                break
            needs.append(need)
        else:
            return pool_of, offsets, r, needs
    return pool_of, offsets, None, []


def _shortfall(reqs: Sequence[BufferReq], pools: Sequence[Pool], stuck: BufferReq,
               needs: list[int], label: Callable[[int], str]) -> str:
    held = ", ".join(map(str, pools))
    total = sum(p.size for p in pools)
    step, live, biggest = peak(reqs)
    top = ", ".join(f"{r.name} {r.size:,} B" for r in biggest[:3])
    more = f" and {len(biggest) - 3} more" if len(biggest) > 3 else ""
    if live > total:
        return (f"buffers need {live - total:,} B more than the pools hold ({held}): the "
                f"largest live set, at step {step} ({label(step)}), is {live:,} B: "
                f"{top}{more}")
    largest = max(pools, key=lambda p: p.size)
    if stuck.size > largest.size:
        return (f"buffer {stuck.name!r} ({stuck.size:,} B, written by step {stuck.first} "
                f"({label(stuck.first)})) needs {stuck.size - largest.size:,} B more than the "
                f"largest pool holds ({held})")
    short, pool = min(zip((n - p.size for n, p in zip(needs, pools)), pools),
                      key=lambda t: t[0])
    return (f"no assignment of the buffers to the pools fits ({held}; the largest live set is "
            f"{live:,} B at step {step} ({label(step)})): buffer {stuck.name!r} ({stuck.size:,} "
            f"B, steps {stuck.first}..{stuck.last}) needs {short:,} B more in pool "
            f"{pool.name!r}")


def plan_pools(reqs: Iterable[BufferReq], pools: Sequence[Pool], algorithm: str = "best",
               label: Callable[[int], str] = lambda step: f"step {step}") -> Plan:
    """Plan the buffers into the pools (fastest first). The Plan's offsets are into each
    buffer's pool (plan.pool_of), plan.pool_sizes gives the bytes each pool needs (every pool
    listed, 0 if unused) and plan.size their sum. `label(step)` names a step in errors."""
    reqs = list(reqs)
    if not pools:
        raise ValueError("plan_pools needs at least one pool")
    check_pools(pools)
    whole = plan(reqs, algorithm)
    if whole.size <= pools[0].size:
        return _combine({pools[0].name: whole}, {r.name: pools[0].name for r in reqs}, pools,
                        whole.algorithm)
    first_miss = None
    for order in _orders(reqs):
        pool_of, offsets, stuck, needs = _assign(reqs, pools, order)
        if stuck is None:
            break
        first_miss = first_miss or (stuck, needs)
    else:
        assert first_miss is not None
        raise PoolsDoNotFit(_shortfall(reqs, pools, *first_miss, label))
    plans = {}
    for p in pools:
        mine = [r for r in reqs if pool_of[r.name] == p.name]
        sub = plan(mine, algorithm)
        if sub.size > p.size:  # the named algorithm did worse: keep the assignment's placement
            top = max((r.align for r in mine), default=1)
            sub = Plan({r.name: offsets[r.name] for r in mine},
                       _align_up(max(offsets[r.name] + r.size for r in mine), top), "assignment")
        assert sub.size <= p.size, (p, sub.size)
        plans[p.name] = sub
    return _combine(plans, pool_of, pools, f"{algorithm} per pool")


def _orders(reqs: Sequence[BufferReq]) -> Iterator[Callable[[BufferReq], tuple]]:
    """The fixed orders of _ORDERS, then seeded random ones within the work budget."""
    yield from _ORDERS
    rng = random.Random(0)
    names = sorted(r.name for r in reqs)
    for _ in range(min(ASSIGN_MAX_TRIES, ASSIGN_MAX_WORK // max(1, len(names) ** 2))):
        rank = {n: k for k, n in enumerate(rng.sample(names, len(names)))}
        yield lambda r, rank=rank: (rank[r.name],)


def _combine(plans: dict[str, Plan], pool_of: dict[str, str], pools: Sequence[Pool],
             algorithm: str) -> Plan:
    offsets = {name: plans[pool_of[name]].offsets[name] for name in sorted(pool_of)}
    sizes = {p.name: plans[p.name].size if p.name in plans else 0 for p in pools}
    return Plan(offsets, sum(sizes.values()), algorithm, dict(sorted(pool_of.items())), sizes)
