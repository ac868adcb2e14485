"""The arena of a kernel schedule: liveness, the checked plan (one arena or the memory pools),
and which in-place kernels' small temporaries go on the C stack instead.

The driver (aotc/compiler.py) decides what is lowered; this module only plans the buffers the
lowered steps ask for: `scratch` maps a step index to its scratch buffers (name, bytes), as the
lowered kernels report them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aotc.errors import AotcError
from aotc.loops.builder import STACK_TEMP_MAX
from aotc.memory.buffers import BufferReq, Plan, check_no_overlap
from aotc.memory.liveness import Liveness, analyse
from aotc.memory.planner import fits, plan
from aotc.memory.pools import Pool, PoolsDoNotFit, plan_pools
from aotc.steps.schedule import Schedule

Scratch = dict[int, list[tuple[str, int]]]


@dataclass(frozen=True)
class ArenaRules:
    """How buffers are placed: their alignment, in-place reuse, the graph's inputs and
    outputs in the arena or not, the planner algorithm, and the pools (none: one arena)."""

    align: int
    inplace: bool
    io_in_arena: bool
    planner: str
    pools: Sequence[Pool] = ()

    def liveness(self, sched: Schedule, scratch: Scratch, modes: dict[int, str]) -> Liveness:
        return analyse(sched, scratch, self.align, self.inplace, self.io_in_arena, modes)


def plan_arena(sched: Schedule, scratch: Scratch, rules: ArenaRules, modes: dict[int, str],
               label: Callable[[int], str] = str) -> tuple[Liveness, Plan]:
    """Liveness and the checked plan: one arena, or the pools (PoolsDoNotFit if they are too
    small; `label` names a step in that message)."""
    live = rules.liveness(sched, scratch, modes)
    try:
        the_plan = (plan_pools(live.reqs, rules.pools, rules.planner, label) if rules.pools
                    else plan(live.reqs, rules.planner))
    except PoolsDoNotFit:
        raise
    except ValueError as e:
        raise AotcError(str(e)) from None
    check_no_overlap(live.reqs, the_plan)
    # Again as the kernels see it: every root at its offset, overlapping only in place.
    check_no_overlap(*live.root_view(the_plan))
    return live, the_plan


def stack_temporaries(sched: Schedule, scratch: Scratch, rules: ArenaRules,
                      modes: dict[int, str], arena: int) -> set[int]:
    """The in-place steps whose temporary (their one scratch buffer, at most STACK_TEMP_MAX
    bytes) goes on the C stack instead (KernelBuilder.temporary): only where that makes the
    arena (now `arena` bytes) smaller, since the stack then grows by it. All of them on the
    stack gives the smallest arena; then, largest first, each goes back to the arena if it
    stays that small."""
    small = {i: e[0][1] for i, e in scratch.items()
             if i in modes and len(e) == 1 and e[0][1] <= STACK_TEMP_MAX}

    def reqs(on_stack: set[int]) -> list[BufferReq]:
        rest = {i: e for i, e in scratch.items() if i not in on_stack}
        return rules.liveness(sched, rest, modes).reqs

    def size(on_stack: set[int]) -> int | None:
        try:
            return (plan_pools(reqs(on_stack), rules.pools, rules.planner) if rules.pools
                    else plan(reqs(on_stack), rules.planner)).size
        except (PoolsDoNotFit, ValueError):
            return None

    def fits_in(on_stack: set[int], limit: int) -> bool:
        if rules.pools:
            smaller = size(on_stack)
            return smaller is not None and smaller <= limit
        try:
            return fits(reqs(on_stack), limit, rules.planner)
        except ValueError:
            return False

    stack = set(small)
    best = size(stack)
    if not small or best is None or best >= arena:
        return set()
    for i in sorted(small, key=lambda i: (-small[i], i)):
        if fits_in(stack - {i}, best):
            stack.discard(i)
    return stack
