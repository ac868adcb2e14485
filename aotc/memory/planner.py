"""Static arena planner: packs buffers with known lifetimes into one byte arena.

It knows nothing about graphs; callers hand it (size, align, lifetime) requests.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property
from typing import cast

from aotc.memory.buffers import BufferReq, Plan, lower_bound

# The exact search is exponential in the worst case, so it only runs on tiny graphs and under
# a node budget; past the budget it returns the best plan found so far.
EXACT_MAX_BUFFERS = 12
EXACT_MAX_NODES = 4000

# Budgets below count "work": conflict edges visited, about a microsecond each in CPython.
# They keep every algorithm well under 0.5 s on 200 buffers that all overlap in time.
LOCAL_SEARCH_MAX_REPLAYS = 200
LOCAL_SEARCH_MAX_WORK = 100_000
# Two-ended search: the arena targets tried, as extra 1/64ths of the lower bound, share the work.
TWO_ENDED_SLACKS = (0, 2, 4, 8)
TWO_ENDED_MAX_WORK = 60_000



# --------------------------------------------------------------------------------------------
# Alignment
# --------------------------------------------------------------------------------------------


def _align_up(value: int, align: int) -> int:
    return -(-value // align) * align


def _align_down(value: int, align: int) -> int:
    return value // align * align


# --------------------------------------------------------------------------------------------
# Placement primitives
# --------------------------------------------------------------------------------------------

Interval = tuple[int, int]  # half-open byte range [lo, hi)


def _lowest_fit(size: int, align: int, obstacles: Sequence[Interval], start: int = 0) -> int:
    """Lowest aligned offset >= start where [offset, offset + size) misses every obstacle.

    obstacles must be sorted by lo. After visiting an obstacle the candidate is either entirely
    below it (then it is below all later ones too) or at/after its end, so one pass suffices.
    """
    offset = _align_up(start, align)
    for lo, hi in obstacles:
        if offset + size <= lo:
            break
        if hi > offset:
            offset = _align_up(hi, align)
    return offset


def _canonical(reqs: Iterable[BufferReq]) -> list[BufferReq]:
    """Validate requests and sort them by name, so results never depend on input order."""
    out = sorted(reqs, key=lambda r: r.name)
    for prev, cur in itertools.pairwise(out):
        if prev.name == cur.name:
            raise ValueError(f"duplicate buffer name {cur.name!r}")
    for r in out:
        if r.size <= 0:
            raise ValueError(f"buffer {r.name!r}: size must be > 0, got {r.size}")
        if r.align <= 0 or r.align & (r.align - 1):
            raise ValueError(f"buffer {r.name!r}: align must be a power of two, got {r.align}")
        if r.first > r.last:
            raise ValueError(f"buffer {r.name!r}: first step {r.first} > last step {r.last}")
    return out


def _conflict_lists(reqs: Sequence[BufferReq]) -> list[list[int]]:
    """For each index, the indices of the other buffers whose lifetimes intersect it."""
    by_first = sorted(range(len(reqs)), key=lambda i: (reqs[i].first, i))
    conflicts: list[list[int]] = [[] for _ in reqs]
    # Sweep in order of first use: only buffers starting by i's last step can meet i.
    for pos, i in enumerate(by_first):
        last = reqs[i].last
        for j in by_first[pos + 1 :]:
            if reqs[j].first > last:
                break
            conflicts[i].append(j)
            conflicts[j].append(i)
    return conflicts


# --------------------------------------------------------------------------------------------
# Algorithms
# --------------------------------------------------------------------------------------------

Offsets = list[int]  # one offset per request, indexed like _Solver.reqs


class _Solver:
    """One planning problem. Each algorithm is a cached property giving offsets, so "best" and
    the seeded searches reuse results instead of recomputing them."""

    def __init__(self, reqs: Iterable[BufferReq]) -> None:
        self.reqs = _canonical(reqs)
        self.n = len(self.reqs)
        self.conflicts = _conflict_lists(self.reqs)
        self.max_align = max((r.align for r in self.reqs), default=1)
        self.bound = lower_bound(self.reqs)
        # No plan is smaller than this: its size is a multiple of max_align and >= the bound.
        self.target = _align_up(self.bound, self.max_align)
        self.forever = max((r.last for r in self.reqs), default=0) + 1  # after every last use

    # ---- shared helpers ----

    def size_of(self, offsets: Sequence[int]) -> int:
        end = max((off + r.size for off, r in zip(offsets, self.reqs)), default=0)
        return _align_up(end, self.max_align)

    def to_plan(self, offsets: Sequence[int], algorithm: str) -> Plan:
        named = {r.name: off for r, off in zip(self.reqs, offsets)}
        return Plan(offsets=named, size=self.size_of(offsets), algorithm=algorithm)

    def held(self, k: int, i: int) -> int:
        """Bytes from buffer k's offset that hold live data at some step where i lives: its
        size, or less for a merged in-place buffer whose profile is narrower then."""
        a, b = self.reqs[k], self.reqs[i]
        return a.bytes_during(b.first, b.last) if a.profile else a.size

    @cached_property
    def neighbours(self) -> list[list[tuple[int, int, int]]]:
        """For each buffer i, (k, held(k, i), last step of k) for every k in conflicts[i]:
        computed once, as the placement loops below ask for them over and over."""
        reqs = self.reqs
        return [[(k, self.held(k, i), reqs[k].last) for k in ks]
                for i, ks in enumerate(self.conflicts)]

    def obstacles(self, i: int, placed: Sequence[int | None]) -> list[Interval]:
        """Byte ranges of placed buffers whose lifetimes meet buffer i, sorted by offset."""
        out = []
        for k, held, _ in self.neighbours[i]:
            off = placed[k]
            if off is not None:
                out.append((off, off + held))
        out.sort()
        return out

    def replay(self, order: Sequence[int]) -> Offsets:
        """Place buffers in `order`, each at the lowest offset free of live, placed buffers."""
        placed: list[int | None] = [None] * self.n
        for i in order:
            r = self.reqs[i]
            placed[i] = _lowest_fit(r.size, r.align, self.obstacles(i, placed))
        return cast(Offsets, placed)  # every slot is filled by now

    def first_use_order(self) -> list[int]:
        reqs = self.reqs
        # Long-lived buffers (residual skips) go first within a step so they claim an arena end.
        return sorted(
            range(self.n), key=lambda i: (reqs[i].first, -reqs[i].last, -reqs[i].size, reqs[i].name)
        )

    def two_ended_candidates(
        self, i: int, placed: Sequence[int | None], target: int
    ) -> tuple[list[int], list[Interval]]:
        """Offsets below target where buffer i fits flush against a neighbour or an arena end.

        Best first: tightest free gap, and inside a gap the side that is freed last (an arena
        end never is). The other side's neighbour dies sooner; its space then merges with the
        rest of the gap instead of leaving a hole. Also returns the obstacles, sorted.
        """
        r = self.reqs[i]
        # Last live step of the placed neighbours, keyed by the offset where they end / start.
        freed_below: dict[int, int] = {0: self.forever}
        freed_above: dict[int, int] = {target: self.forever}
        obstacles: list[Interval] = []
        for k, held, last in self.neighbours[i]:
            off = placed[k]
            if off is None:
                continue
            end = off + held
            obstacles.append((off, end))
            # The later of the last steps of the buffers ending / starting there.
            below = freed_below.get(end)
            if below is None or below < last:
                freed_below[end] = last
            above = freed_above.get(off)
            if above is None or above < last:
                freed_above[off] = last
        obstacles.sort()
        preferred: list[tuple[int, int]] = []  # (gap length, offset)
        other: list[tuple[int, int]] = []
        size, align = r.size, r.align
        # The free byte ranges in [0, target) around the obstacles, of at least size bytes.
        gaps: list[Interval] = []
        cursor = 0
        for lo, hi in obstacles:
            if cursor >= target:
                break
            if lo > cursor:
                top = lo if lo < target else target
                if top - cursor >= size:
                    gaps.append((cursor, top))
            if hi > cursor:
                cursor = hi
        if target - cursor >= size:
            gaps.append((cursor, target))
        for lo, hi in gaps:
            low = -(-lo // align) * align
            high = (hi - size) // align * align
            if low + size > hi:
                continue
            first, second = (high, low) if freed_above[hi] > freed_below[lo] else (low, high)
            preferred.append((hi - lo, first))
            if second != first:
                other.append((hi - lo, second))
        candidates = [off for _, off in sorted(preferred)] + [off for _, off in sorted(other)]
        return candidates, obstacles

    # ---- the algorithms ----

    @cached_property
    def linear(self) -> Offsets:
        """Baseline without reuse: buffers laid end to end in order of first use."""
        offsets = [0] * self.n
        cursor = 0
        for i in sorted(range(self.n), key=lambda i: (self.reqs[i].first, self.reqs[i].last, i)):
            offsets[i] = _align_up(cursor, self.reqs[i].align)
            cursor = offsets[i] + self.reqs[i].size
        return offsets

    @cached_property
    def greedy_size(self) -> Offsets:
        """TFLM GreedyMemoryPlanner: largest first, each at the lowest offset that fits."""
        reqs = self.reqs
        return self.replay(sorted(range(self.n), key=lambda i: (-reqs[i].size, reqs[i].first, i)))

    @cached_property
    def greedy_breadth(self) -> Offsets:
        """TFLite GreedyByBreadth: visit steps from the widest, placing their buffers largest
        first. The widest step decides the arena size, so its buffers pick low offsets first."""
        reqs = self.reqs
        # Breadth only peaks at steps where some buffer starts, and every buffer has one.
        starts = sorted({r.first for r in reqs})
        breadth = {s: sum(r.size for r in reqs if r.first <= s <= r.last) for s in starts}
        rank = {s: k for k, s in enumerate(sorted(starts, key=lambda s: (-breadth[s], s)))}

        def key(i: int) -> tuple[int, int, int]:
            r = reqs[i]
            return (min(rank[s] for s in starts if r.first <= s <= r.last), -r.size, i)

        return self.replay(sorted(range(self.n), key=key))

    @cached_property
    def greedy_conflicts(self) -> Offsets:
        """Most constrained first: order by the bytes of buffers whose lifetimes meet this one."""
        reqs = self.reqs
        pressure = [
            r.size + sum(reqs[k].size for k in self.conflicts[i]) for i, r in enumerate(reqs)
        ]
        return self.replay(sorted(range(self.n), key=lambda i: (-pressure[i], -reqs[i].size, i)))

    @cached_property
    def ping_pong(self) -> Offsets:
        """Greedy by first use, placing from both ends of an arena sized to the lower bound.

        A kernel's output goes to the end opposite its inputs, like a ping-pong buffer pair,
        which is optimal on plain chains. Each buffer takes its first two-ended candidate, or
        the lowest free offset when nothing fits below the target.
        """
        placed: list[int | None] = [None] * self.n
        for i in self.first_use_order():
            r = self.reqs[i]
            candidates, obstacles = self.two_ended_candidates(i, placed, self.target)
            placed[i] = candidates[0] if candidates else _lowest_fit(r.size, r.align, obstacles)
        return cast(Offsets, placed)

    def two_ended_search(self, target: int, max_work: int) -> Offsets | None:
        """Depth-first search over two-ended placements that keep every buffer below target.

        Its first descent is ping-pong; on a dead end it backtracks chronologically, which
        suits CNNs, where a misplaced skip or neighbour hurts only a few steps later. Iterative,
        as graphs can be deeper than Python's recursion limit. None if the work budget runs out
        or no such placement exists.
        """
        order = self.first_use_order()
        placed: list[int | None] = [None] * self.n
        # choices[d]: candidate offsets for order[d]; tried[d]: how many of them were tried.
        choices: list[list[int]] = []
        tried: list[int] = []
        work = 0
        while len(choices) < self.n:
            i = order[len(choices)]
            work += 1 + len(self.conflicts[i])
            if work > max_work:
                return None
            choices.append(self.two_ended_candidates(i, placed, target)[0])
            tried.append(0)
            # Back up to the deepest level with an untried candidate, undoing the levels below.
            while choices and tried[-1] == len(choices[-1]):
                choices.pop()
                tried.pop()
                placed[order[len(choices)]] = None
            if not choices:
                return None  # exhausted: no two-ended placement fits under this target
            placed[order[len(choices) - 1]] = choices[-1][tried[-1]]
            tried[-1] += 1
        return cast(Offsets, placed)

    @cached_property
    def two_ended(self) -> Offsets:
        """Ping-pong with backtracking: a two-ended plan at the bound, else a little above it
        (see TWO_ENDED_SLACKS); plain ping-pong when no target is met within the budget."""
        fallback_size = self.size_of(self.ping_pong)
        for slack in TWO_ENDED_SLACKS:
            target = _align_up(self.bound + self.bound * slack // 64, self.max_align)
            if target >= fallback_size:
                break
            found = self.two_ended_search(target, TWO_ENDED_MAX_WORK // len(TWO_ENDED_SLACKS))
            if found is not None:
                return found
        return self.ping_pong

    @cached_property
    def best_heuristic(self) -> Offsets:
        """Smallest of the one-shot heuristics (first in _HEURISTICS order on ties)."""
        return min((getattr(self, name) for name in _HEURISTICS), key=self.size_of)

    @cached_property
    def local_search(self) -> Offsets:
        """Iterated greedy over placement orders, starting from the best heuristic.

        Replaying any plan in order of its offsets puts every buffer at or below where it was,
        so each step takes that order, moves one buffer touching the arena top to a random
        earlier slot and replays. The result is kept unless it is larger; keeping equal sizes
        lets the search walk across plateaus. A fixed RNG seed keeps it deterministic.
        """
        placed = self.best_heuristic
        if self.n == 0:
            return placed
        end = max(off + r.size for off, r in zip(placed, self.reqs))
        replay_work = self.n + sum(len(c) for c in self.conflicts)
        budget = min(LOCAL_SEARCH_MAX_REPLAYS, LOCAL_SEARCH_MAX_WORK // replay_work)
        rng = random.Random(0)
        for _ in range(budget):
            if _align_up(end, self.max_align) <= self.target:
                break
            order = sorted(range(self.n), key=lambda i: (placed[i], i))
            top = [i for i in order if placed[i] + self.reqs[i].size == end]
            pos = order.index(rng.choice(top))
            if pos == 0:
                continue  # already placed first, at offset 0
            order.insert(rng.randrange(pos), order.pop(pos))
            new = self.replay(order)
            new_end = max(off + r.size for off, r in zip(new, self.reqs))
            if new_end <= end:
                placed, end = new, new_end
        return placed

    @cached_property
    def exact(self) -> Offsets:
        """Branch and bound over placement orders, each buffer at its lowest free offset.

        Some order reaches the optimum: replaying an optimal plan sorted by offset puts every
        buffer at or below its optimal offset, and repeating that converges to a plan whose
        replay order has non-decreasing offsets. So only such monotone orders are searched
        (ties by index). A buffer's lowest fit only grows as more buffers are placed, which
        bounds the final arena from below at every node. Seeded with the local-search plan.
        """
        if self.n > EXACT_MAX_BUFFERS:
            raise ValueError(
                f"exact planning is limited to {EXACT_MAX_BUFFERS} buffers, got {self.n}"
            )
        best = self.local_search
        best_size = self.size_of(best)
        placed: list[int | None] = [None] * self.n
        nodes = 0

        def dfs(depth: int, last_off: int, last_idx: int, cur_end: int) -> bool:
            """Returns True when the search should stop (bound reached or budget spent)."""
            nonlocal best, best_size, nodes
            if depth == self.n:
                if _align_up(cur_end, self.max_align) < best_size:
                    best = cast(Offsets, list(placed))
                    best_size = _align_up(cur_end, self.max_align)
                return best_size <= self.target
            nodes += 1
            if nodes > EXACT_MAX_NODES:
                return True
            bound = cur_end
            children: list[tuple[int, int, int]] = []  # (end, offset, index)
            for j, r in enumerate(self.reqs):
                if placed[j] is not None:
                    continue
                obstacles = self.obstacles(j, placed)
                off = _lowest_fit(r.size, r.align, obstacles)
                if off > last_off or (off == last_off and j > last_idx):
                    children.append((off + r.size, off, j))
                else:
                    # Not placeable now; whenever it is placed, its offset will be >= last_off.
                    off = _lowest_fit(r.size, r.align, obstacles, last_off)
                bound = max(bound, off + r.size)
            if _align_up(bound, self.max_align) >= best_size:
                return False
            for end, off, j in sorted(children):
                placed[j] = off
                stop = dfs(depth + 1, off, j, max(cur_end, end))
                placed[j] = None
                if stop:
                    return True
            return False

        if best_size > self.target:
            dfs(0, 0, -1, 0)
        return best

    def plan(self, algorithm: str) -> Plan:
        return self.to_plan(getattr(self, algorithm), algorithm)


# The heuristics whose best plan seeds local search, in tie-break order.
_HEURISTICS = ("greedy_size", "greedy_breadth", "greedy_conflicts", "ping_pong", "two_ended")


def plan_linear(reqs: Iterable[BufferReq]) -> Plan:
    """Baseline without reuse (TFLM's LinearMemoryPlanner): buffers end to end by first use."""
    return _Solver(reqs).plan("linear")


def plan_greedy_by_size(reqs: Iterable[BufferReq]) -> Plan:
    """Largest first (ties: first use, name), each at the lowest aligned offset that fits."""
    return _Solver(reqs).plan("greedy_size")


def plan_greedy_by_breadth(reqs: Iterable[BufferReq]) -> Plan:
    """Steps from the widest; each step's unplaced buffers largest first, at the lowest fit."""
    return _Solver(reqs).plan("greedy_breadth")


def plan_greedy_by_conflicts(reqs: Iterable[BufferReq]) -> Plan:
    """Buffers meeting the most bytes of other live buffers first, at the lowest fit."""
    return _Solver(reqs).plan("greedy_conflicts")


def plan_ping_pong(reqs: Iterable[BufferReq]) -> Plan:
    """Greedy by first use, placed against either end of the arena; optimal on chains."""
    return _Solver(reqs).plan("ping_pong")


def plan_two_ended_search(reqs: Iterable[BufferReq]) -> Plan:
    """Ping-pong with backtracking, aiming at the lower bound; strong on residual CNNs."""
    return _Solver(reqs).plan("two_ended")


def plan_local_search(reqs: Iterable[BufferReq]) -> Plan:
    """The best heuristic plan improved by iterated greedy over placement orders."""
    return _Solver(reqs).plan("local_search")


def plan_exact(reqs: Iterable[BufferReq]) -> Plan:
    """Optimal plan by branch and bound, for at most EXACT_MAX_BUFFERS buffers (else
    ValueError). Past EXACT_MAX_NODES it returns the best plan found, never worse than local
    search."""
    return _Solver(reqs).plan("exact")


# Order matters: "best" breaks size ties in favour of the earlier entry.
ALGORITHMS: dict[str, Callable[[Iterable[BufferReq]], Plan]] = {
    "greedy_size": plan_greedy_by_size,
    "greedy_breadth": plan_greedy_by_breadth,
    "greedy_conflicts": plan_greedy_by_conflicts,
    "ping_pong": plan_ping_pong,
    "two_ended": plan_two_ended_search,
    "local_search": plan_local_search,
    "exact": plan_exact,
    "linear": plan_linear,
}


def plan(reqs: Iterable[BufferReq], algorithm: str = "best") -> Plan:
    """Plan with the named algorithm (a key of ALGORITHMS), or "best": the smallest of them
    all, first in ALGORITHMS order on ties; "exact" takes part up to EXACT_MAX_BUFFERS."""
    if algorithm != "best" and algorithm not in ALGORITHMS:
        known = ", ".join(["best", *ALGORITHMS])
        raise ValueError(f"unknown planning algorithm {algorithm!r}; known: {known}")
    solver = _Solver(reqs)
    if algorithm != "best":
        return solver.plan(algorithm)
    names = [a for a in ALGORITHMS if a != "exact" or solver.n <= EXACT_MAX_BUFFERS]
    # min() keeps the first of equal sizes, so ties go to the earlier algorithm.
    return min((solver.plan(a) for a in names), key=lambda p: p.size)


def fits(reqs: Iterable[BufferReq], limit: int, algorithm: str = "best") -> bool:
    """Whether plan(reqs, algorithm).size <= limit, without running every algorithm of "best":
    it stops at the first one that fits (the cheap heuristics come first)."""
    solver = _Solver(reqs)
    if solver.bound > limit:  # no plan is below the liveness bound
        return False
    if algorithm != "best":
        return solver.plan(algorithm).size <= limit
    names = [a for a in ALGORITHMS if a != "exact" or solver.n <= EXACT_MAX_BUFFERS]
    return any(solver.plan(a).size <= limit for a in names)
