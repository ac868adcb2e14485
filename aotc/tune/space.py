"""Each workload's space, found by compiling: a kernel's space is the knobs its lowering asked
for, and some knobs decide which others are asked (conv.path=scalar asks conv.tile and
conv.unroll instead of conv.pixels and conv.simd_tile; conv.depthwise picks between schedules
with knobs of their own). Such knobs are found by trying them: the model is compiled with every
value of every knob any kernel asked for (one knob at a time, the same schedule for every
workload), then with every value of each knob that only appeared under such a change, and so on.
A knob *branches* for a workload when changing it changes the set of knobs the workload's
kernel asks for. The workload's candidates are then the union, over the compilations, of the
grid of the knobs asked, its branching knobs pinned to the values that compilation used: every
candidate is a schedule the lowering really uses. The compilations are jobs for the executor
(plain data in and out), so they run in parallel like the measurements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aotc.errors import AotcError
from aotc.schedules import KNOBS
from aotc.tune.search import key

Space = dict[str, tuple[list[Any], Any]]  # knob -> (choices, default)
MAX_COMPILES = 200  # a bound on the search for branching knobs


def discover(first: Mapping[str, Any], run: Callable[[Sequence[dict[str, Any]]],
                                                     list[dict[str, Any]]],
             ) -> dict[str, list[Space]]:
    """Per workload of ``first`` (a compile-only result: {"kernels": {name: {"workload",
    "space", "schedule"}}}), its spaces. ``run`` compiles a list of schedules (each given to
    every workload) and returns their compile-only results."""
    firsts = _by_workload(first)
    seen: dict[str, dict[str, tuple[Space, dict[str, Any]]]] = {"{}": firsts}
    bases: dict[str, dict[str, Any]] = {"{}": {}}
    parent: dict[str, str] = {}
    frontier = ["{}"]
    while frontier and len(seen) < MAX_COMPILES:
        todo: dict[str, dict[str, Any]] = {}
        for bk in frontier:
            asked = _asked(seen[bk])
            new = asked - (_asked(seen[parent[bk]]) if bk in parent else set())
            for k in sorted(new):
                for v in KNOBS[k].choices:
                    ext = {**bases[bk], k: v}
                    if key(ext) not in seen and key(ext) not in todo:
                        todo[key(ext)] = ext
                        parent[key(ext)] = bk
        todo = dict(list(todo.items())[:MAX_COMPILES - len(seen)])
        results = run(list(todo.values()))
        for (ek, ext), res in zip(todo.items(), results):
            if res.get("error"):
                # a knob value that fails to compile the default's way: the measurement will
                # record it invalid per candidate; here it only gives no space
                seen[ek] = {}
            else:
                seen[ek] = _by_workload(res)
            bases[ek] = ext
        frontier = list(todo)
    spaces: dict[str, list[Space]] = {}
    for w in firsts:
        branching = set()
        for bk, obs in seen.items():
            if bk in parent and w in obs and w in seen[parent[bk]]:
                if set(obs[w][0]) != set(seen[parent[bk]][w][0]):
                    branching |= set(bases[bk]) - set(bases[parent[bk]])
        out: list[Space] = []
        for obs in seen.values():
            if w in obs:
                space, used = obs[w]
                pinned = {k: ([used[k]], d) if k in branching else (list(ch), d)
                          for k, (ch, d) in space.items()}
                if pinned not in out:
                    out.append(pinned)
        spaces[w] = out
    return spaces


def _by_workload(res: Mapping[str, Any]) -> dict[str, tuple[Space, dict[str, Any]]]:
    """Workload -> (space, used values) of its first kernel."""
    if res.get("error"):
        raise AotcError(f"the default schedules do not compile: {res['error']}")
    out: dict[str, tuple[Space, dict[str, Any]]] = {}
    for k in res["kernels"].values():
        out.setdefault(k["workload"], ({n: (list(c), d) for n, (c, d) in k["space"].items()},
                                       dict(k["schedule"])))
    return out


def _asked(obs: Mapping[str, tuple[Space, dict[str, Any]]]) -> set[str]:
    return {k for space, _ in obs.values() for k in space}
