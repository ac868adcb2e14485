"""ranges.prune_guards: bounds checks decided by loop ranges disappear, undecided ones stay,
and the pruned kernel computes exactly what the original does (built with gcc, run via cffi)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from kernel_harness import build
from test_transforms import H, W, np_stencil, stencil

from aotc.loops.loop_ir import If, Stmt
from aotc.loops.ranges import prune_guards
from aotc.loops.transforms import unroll


def count_ifs(body: tuple[Stmt, ...]) -> int:
    from test_transforms import count

    return count(body, If)


def test_interior_taps_lose_their_guards_and_results_are_unchanged(tmp_path: Path) -> None:
    base = stencil()
    unrolled = unroll(unroll(base, "di"), "dj")
    pruned = prune_guards(unrolled)
    # 9 taps; only the centre tap (di = dj = 1) is always in bounds, so exactly one guard goes.
    assert count_ifs(unrolled.body) == 9
    assert count_ifs(pruned.body) == 8
    lib = build({"unrolled": unrolled, "pruned": pruned}, tmp_path)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((H, W)).astype(np.float32)
    w = rng.standard_normal((3, 3)).astype(np.float32)
    outs = []
    for name in ("unrolled", "pruned"):
        y = np.full((H, W), np.nan, np.float32)
        lib.run(name, {"x": x, "w": w, "y": y})
        outs.append(y)
    np.testing.assert_array_equal(outs[0], np_stencil(x, w))
    np.testing.assert_array_equal(outs[1], outs[0])


def test_guards_on_loop_variables_without_unrolling_stay() -> None:
    # Before unrolling, di and dj range over [0, 2]: no guard is decidable for every tap.
    base = stencil()
    assert count_ifs(prune_guards(base).body) == count_ifs(base.body)


def test_prune_removes_half_the_checks_of_a_border_tap() -> None:
    from aotc.loops.loop_ir import Bin

    unrolled = unroll(unroll(stencil(), "di"), "dj")
    pruned = prune_guards(unrolled)

    def comparisons(body: tuple[Stmt, ...]) -> int:
        n = 0
        for s in body:
            if isinstance(s, If):
                stack = [s.cond]
                while stack:
                    e = stack.pop()
                    if isinstance(e, Bin):
                        n += e.op in ("lt", "le", "gt", "ge")
                        stack += [e.a, e.b]
                n += comparisons(s.then)
            for attr in ("body",):
                if hasattr(s, attr):
                    n += comparisons(getattr(s, attr))
        return n

    # Each tap has 4 checks before; after pruning, a tap offset of -1 keeps only ">= 0" and +1
    # keeps only "< size": 4 corner taps x 2 + 4 edge taps x 1 + centre 0 = 12 of 36.
    assert comparisons(unrolled.body) == 36
    assert comparisons(pruned.body) == 12
