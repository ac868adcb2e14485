"""The candidates of a workload and the order they are measured in.

A workload's space is conditional: a knob such as conv.path decides which other knobs the
lowering asks for (the SIMD path's pixels and channel tile, or the scalar path's tile and
unroll). The tuner compiles the model once per value of the path knobs (discover, in
aotc/tune/tuner.py), and a workload's candidates are the union, over those values, of the grid of
the knobs the lowering asked for: every candidate is a schedule some compilation really uses.

Search: when the candidates fit the trial budget, every one is measured (a grid, in a fixed
order); otherwise a guided search: a seeded random sample of a third of the budget, then the
unmeasured neighbours (one knob changed, then two) of the best so far, random ones when none
are left.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from aotc.schedules import grid

Candidate = dict[str, Any]


def key(schedule: Mapping[str, Any]) -> str:
    return json.dumps(dict(schedule), sort_keys=True)


def candidates(spaces: list[Mapping[str, tuple[list[Any], Any]]], default: Candidate
               ) -> list[Candidate]:
    """The union of the grids of ``spaces`` (each {knob: (choices, default)} with the path
    knobs pinned to one value), in a fixed order, without ``default``."""
    seen = {key(default)}
    out = []
    for space in spaces:
        for c in grid({k: list(ch) for k, (ch, _) in space.items()}):
            if key(c) not in seen:
                seen.add(key(c))
                out.append(c)
    return out


def _distance(a: Candidate, b: Candidate) -> int:
    return sum(a.get(k) != b.get(k) for k in set(a) | set(b))


class Search:
    """Proposes a workload's candidates one at a time (``propose``) and learns their costs
    (``report``; None: invalid or unmeasurable)."""

    def __init__(self, default: Candidate, pool: list[Candidate], budget: int, seed: int = 0
                 ) -> None:
        self.default = default
        self.pool = list(pool)
        self.guided = len(self.pool) > budget
        self.rng = random.Random(seed)
        self.sample = max(1, budget // 3)
        self.proposed: set[str] = set()
        self.best: tuple[float, Candidate] | None = None

    @property
    def size(self) -> int:
        return len(self.pool) + 1  # the default is measured first, by every tuning run

    def report(self, candidate: Candidate, cost: float | None) -> None:
        self.proposed.add(key(candidate))
        if cost is not None and (self.best is None or cost < self.best[0]):
            self.best = (cost, candidate)

    def propose(self) -> Candidate | None:
        left = [c for c in self.pool if key(c) not in self.proposed]
        if not left:
            return None
        if not self.guided:
            pick = left[0]
        elif len(self.proposed) < self.sample or self.best is None:
            pick = self.rng.choice(left)
        else:
            near = min(_distance(c, self.best[1]) for c in left)
            pick = self.rng.choice([c for c in left if _distance(c, self.best[1]) == near]
                                   if near <= 2 else left)
        self.proposed.add(key(pick))
        return pick
