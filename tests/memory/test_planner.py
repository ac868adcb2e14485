"""Tests of the static memory planner: hand-computed plans, invariants under random requests,
reaching the lower bound on chains and residual CNNs, and the validity checker itself."""

from __future__ import annotations

import itertools
import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aotc.memory import (
    ALGORITHMS,
    EXACT_MAX_BUFFERS,
    BufferReq,
    Plan,
    ascii_timeline,
    check_no_overlap,
    lower_bound,
    overlaps,
    plan,
    plan_exact,
    plan_greedy_by_size,
    plan_linear,
    plan_ping_pong,
    plan_to_json,
)

# --------------------------------------------------------------------------------------------
# Helpers and strategies
# --------------------------------------------------------------------------------------------


def req(name: str, size: int, first: int, last: int, align: int = 1) -> BufferReq:
    return BufferReq(name, size, align, first, last)


def chain(sizes: list[int], align: int = 1) -> list[BufferReq]:
    """Buffer i is written by kernel i and read by kernel i + 1."""
    return [req(f"t{i:03d}", s, i, i + 1, align) for i, s in enumerate(sizes)]


def algorithms_for(reqs: list[BufferReq]) -> list[str]:
    return [a for a in ALGORITHMS if a != "exact" or len(reqs) <= EXACT_MAX_BUFFERS]


def aligned_bound(reqs: list[BufferReq]) -> int:
    top = max((r.align for r in reqs), default=1)
    return -(-lower_bound(reqs) // top) * top


@st.composite
def random_requests(draw, max_buffers: int = 40) -> list[BufferReq]:
    n = draw(st.integers(0, max_buffers))
    reqs = []
    for i in range(n):
        first = draw(st.integers(0, 30))
        span = draw(st.integers(0, 8))
        size = draw(st.integers(1, 512))
        align = draw(st.sampled_from([1, 4, 8, 16]))
        reqs.append(BufferReq(f"b{i}", size, align, first, first + span))
    return reqs


def residual_cnn(seed: int, blocks: int) -> list[BufferReq]:
    """A ResNet/MobileNet-like schedule: plain convs and residual blocks (2-3 convs, then an add
    that also reads the block input, so that input lives 3-4 steps); some kernels use scratch.
    Sizes are multiples of the 16-byte alignment, as int8/float feature maps usually are."""
    rng = random.Random(seed)
    spans: dict[str, list[int]] = {"x": [0, 0]}  # name -> [first, last]
    sizes = {"x": 16 * rng.randint(25, 750)}
    step = 0
    cur = "x"

    def kernel(inputs: list[str]) -> str:
        nonlocal step
        step += 1
        for name in inputs:
            spans[name][1] = step
        out = f"t{step:03d}"
        spans[out] = [step, step]
        sizes[out] = 16 * rng.randint(25, 750)
        if rng.random() < 0.5:
            spans[f"s{step:03d}"] = [step, step]
            sizes[f"s{step:03d}"] = 16 * rng.randint(3, 125)
        return out

    for _ in range(blocks):
        if rng.random() < 0.3:
            cur = kernel([cur])
            continue
        skip = cur
        for _ in range(rng.choice([2, 2, 3])):
            cur = kernel([cur])
        cur = kernel([cur, skip])
    return [BufferReq(n, sizes[n], 16, f, last) for n, (f, last) in spans.items()]


def brute_force_optimum(reqs: list[BufferReq]) -> int:
    """Smallest arena over all placement orders, each buffer at its lowest aligned free offset.

    Written independently of the planner. Lowest-fit over all orders reaches the optimum:
    replaying an optimal plan sorted by offset puts each buffer at or below its optimal offset.
    """
    top = max((r.align for r in reqs), default=1)
    best = None
    for order in itertools.permutations(reqs):
        placed: list[tuple[BufferReq, int]] = []
        for r in order:
            live = [(o, o + q.size) for q, o in placed if overlaps(q, r)]
            # The lowest free aligned offset is 0 or the aligned end of some live buffer.
            starts = sorted({0} | {-(-hi // r.align) * r.align for _, hi in live})
            off = next(s for s in starts if all(s + r.size <= lo or s >= hi for lo, hi in live))
            placed.append((r, off))
        end = max((o + q.size for q, o in placed), default=0)
        size = -(-end // top) * top
        best = size if best is None else min(best, size)
    return best if best is not None else 0


# --------------------------------------------------------------------------------------------
# Basics: overlaps, lower bound, empty input, validation
# --------------------------------------------------------------------------------------------


def test_overlaps_is_inclusive_at_both_ends():
    a = req("a", 1, 2, 4)
    assert overlaps(a, req("b", 1, 4, 6))
    assert overlaps(a, req("b", 1, 0, 2))
    assert overlaps(a, req("b", 1, 3, 3))
    assert not overlaps(a, req("b", 1, 5, 6))
    assert not overlaps(a, req("b", 1, 0, 1))


def test_lower_bound_by_hand():
    # step 0: a=10; step 1: a+b=30; step 2: b+c=25; step 3: c=5 (d is alone at step 7)
    reqs = [req("a", 10, 0, 1), req("b", 20, 1, 2), req("c", 5, 2, 3), req("d", 7, 7, 7)]
    assert lower_bound(reqs) == 30
    assert lower_bound([]) == 0
    # Alignment is ignored by the bound.
    assert lower_bound([req("a", 3, 0, 0, align=16), req("b", 3, 0, 0, align=16)]) == 6


def test_empty_request_list():
    for name in ALGORITHMS:
        p = plan([], name)
        assert p == Plan(offsets={}, size=0, algorithm=name)
    assert plan([]).size == 0
    check_no_overlap([], plan([]))
    assert plan_to_json([], plan([]))["arena_bytes"] == 0
    assert "no buffers" in ascii_timeline([], plan([]))


@pytest.mark.parametrize(
    "bad, message",
    [
        ([req("a", 0, 0, 0)], "size"),
        ([req("a", 4, 0, 0, align=3)], "power of two"),
        ([req("a", 4, 0, 0, align=0)], "power of two"),
        ([req("a", 4, 2, 1)], "first step"),
        ([req("a", 4, 0, 0), req("a", 8, 1, 1)], "duplicate"),
    ],
)
def test_invalid_requests_are_rejected(bad, message):
    with pytest.raises(ValueError, match=message):
        plan(bad)


def test_unknown_algorithm_is_rejected():
    with pytest.raises(ValueError, match="unknown planning algorithm 'nope'"):
        plan([req("a", 4, 0, 0)], "nope")


def test_exact_refuses_large_graphs():
    with pytest.raises(ValueError, match="exact planning is limited"):
        plan_exact(chain([8] * (EXACT_MAX_BUFFERS + 1)))


# --------------------------------------------------------------------------------------------
# Hand-computed plans
# --------------------------------------------------------------------------------------------


def test_buffers_with_disjoint_lifetimes_share_memory():
    reqs = [req("a", 10, 0, 0), req("b", 20, 1, 1)]
    p = plan_greedy_by_size(reqs)
    assert p.offsets == {"a": 0, "b": 0}
    assert p.size == 20
    assert plan(reqs).size == 20


def test_linear_lays_buffers_end_to_end_in_first_use_order():
    # Order (first, last, name): b, a, c. b at 0 (ends 6); a at 6 (ends 16); c at 16 (align 4,
    # ends 20). Arena rounded up to the max align 8: 24.
    reqs = [req("a", 10, 0, 1), req("b", 6, 0, 0, align=8), req("c", 4, 1, 2, align=4)]
    p = plan_linear(reqs)
    assert p.offsets == {"b": 0, "a": 6, "c": 16}
    assert p.size == 24
    assert p.algorithm == "linear"


def test_greedy_by_size_alignment_and_rounding():
    # a (larger) goes first at 0; b needs a 16-aligned offset past a's end 10: 16. End 24,
    # rounded up to the max align 16: 32.
    reqs = [req("a", 10, 0, 1), req("b", 8, 0, 1, align=16)]
    p = plan_greedy_by_size(reqs)
    assert p.offsets == {"a": 0, "b": 16}
    assert p.size == 32


def test_greedy_by_size_fills_a_gap_between_placed_buffers():
    # Placement order by size: A100, B60, C50, D40, E30, F10.
    # A -> 0. B -> 0 (not live with A). C (steps 0-1) meets A [0,100), B [0,60) -> 100.
    # D (steps 2-3) meets B [0,60) -> 60. E (step 1) meets B [0,60), C [100,150): the gap
    # [60,100) holds 30 bytes -> 60. F (align 16, steps 1-2) meets B [0,60), E [60,90),
    # D [60,100), C [100,150): 0 -> 64 -> 96 -> 112 -> 160, so F sits at 160 and ends at 170;
    # the arena rounds up to 176.
    reqs = [
        req("A", 100, 0, 0),
        req("B", 60, 1, 2),
        req("C", 50, 0, 1),
        req("D", 40, 2, 3),
        req("E", 30, 1, 1),
        req("F", 10, 1, 2, align=16),
    ]
    p = plan_greedy_by_size(reqs)
    assert p.offsets == {"A": 0, "B": 0, "C": 100, "D": 60, "E": 60, "F": 160}
    assert p.size == 176
    # Bound: step 0 A+C=150, step 1 B+C+E+F=150, step 2 B+D+F=110, step 3 D=40.
    assert lower_bound(reqs) == 150


def test_chain_where_greedy_by_size_misses_and_ping_pong_reaches_the_bound():
    # Sizes 5, 3, 4, 6 in a chain; bound max(5, 5+3, 3+4, 4+6, 6) = 10.
    reqs = chain([5, 3, 4, 6])
    assert lower_bound(reqs) == 10
    # Greedy by size: t003(6) -> 0, t000(5) -> 0, t002(4) meets t003 -> 6, t001(3) meets
    # t000 [0,5) and t002 [6,10): the 1-byte hole is too small -> 10, ending at 13.
    greedy = plan_greedy_by_size(reqs)
    assert greedy.offsets == {"t000": 0, "t001": 10, "t002": 6, "t003": 0}
    assert greedy.size == 13
    # Ping-pong, target 10: t000 at the bottom (0); t001 at the top (10-3=7); t002 opposite
    # its input, at the bottom (0); t003 at the top (10-6=4).
    pp = plan_ping_pong(reqs)
    assert pp.offsets == {"t000": 0, "t001": 7, "t002": 0, "t003": 4}
    assert pp.size == 10
    assert plan(reqs).size == 10
    assert plan_exact(reqs).size == 10


def test_ping_pong_by_hand_with_a_flush_placement():
    # Sizes 30, 50, 20, 40; bound max(30, 80, 70, 60, 40) = 80. t000 -> 0; t001 at the top:
    # 80-50 = 30; t002 at the bottom: 0; t003 at the top: 80-40 = 40.
    reqs = chain([30, 50, 20, 40])
    p = plan_ping_pong(reqs)
    assert p.offsets == {"t000": 0, "t001": 30, "t002": 0, "t003": 40}
    assert p.size == 80 == lower_bound(reqs)


def test_residual_block_by_hand_reaches_the_bound():
    # conv0 -> s, conv1(s) -> c1, conv2(c1) -> c2, add(c2, s) -> y, conv3(y) -> out.
    # Live bytes per step: 0: 32, 1: 48, 2: 48, 3: s+c1+c2 = 64, 4: s+c2+y = 48, 5: 24, 6: 8.
    reqs = [
        req("x0", 32, 0, 1, align=16),
        req("s", 16, 1, 4, align=16),
        req("c1", 32, 2, 3, align=16),
        req("c2", 16, 3, 4, align=16),
        req("y", 16, 4, 5, align=16),
        req("out", 8, 5, 6, align=16),
    ]
    assert lower_bound(reqs) == 64
    best = plan(reqs)
    check_no_overlap(reqs, best)
    assert best.size == 64


def test_best_breaks_ties_in_algorithm_order():
    # Every algorithm but linear reaches the bound on a plain chain; greedy_size comes first.
    reqs = chain([4, 4, 4])
    assert plan_greedy_by_size(reqs).size == lower_bound(reqs) == 8
    assert plan(reqs).algorithm == "greedy_size"


# --------------------------------------------------------------------------------------------
# check_no_overlap
# --------------------------------------------------------------------------------------------


def test_check_no_overlap_accepts_a_valid_plan():
    reqs = [req("a", 8, 0, 1), req("b", 8, 1, 2), req("c", 8, 2, 3)]
    check_no_overlap(reqs, Plan({"a": 0, "b": 8, "c": 0}, 16, "hand"))


def test_check_no_overlap_rejects_live_buffers_sharing_memory():
    reqs = [req("a", 8, 0, 1), req("b", 8, 1, 2)]
    with pytest.raises(ValueError, match=r"'a'.*'b'.*overlap"):
        check_no_overlap(reqs, Plan({"a": 0, "b": 4}, 16, "bad"))


def test_check_no_overlap_rejects_misalignment_and_overflow_and_missing():
    reqs = [req("a", 8, 0, 1, align=16)]
    with pytest.raises(ValueError, match="not a multiple of 16"):
        check_no_overlap(reqs, Plan({"a": 8}, 16, "bad"))
    with pytest.raises(ValueError, match="beyond arena size"):
        check_no_overlap(reqs, Plan({"a": 16}, 16, "bad"))
    with pytest.raises(ValueError, match="negative"):
        check_no_overlap(reqs, Plan({"a": -16}, 16, "bad"))
    with pytest.raises(ValueError, match="no offset"):
        check_no_overlap(reqs, Plan({}, 16, "bad"))


@settings(max_examples=100, deadline=None)
@given(random_requests(max_buffers=20), st.data())
def test_check_no_overlap_catches_a_buffer_moved_onto_a_live_neighbour(reqs, data):
    # Keeps the property test below from passing vacuously: any real collision is reported.
    good = plan_greedy_by_size(reqs)
    pairs = [
        (a, b)
        for a, b in itertools.permutations(reqs, 2)
        if overlaps(a, b) and good.offsets[b.name] % a.align == 0
    ]
    if not pairs:
        return
    a, b = data.draw(st.sampled_from(pairs))
    offsets = dict(good.offsets)
    offsets[a.name] = offsets[b.name]  # a now starts where b starts, while both are live
    size = max(good.size, offsets[a.name] + a.size)
    with pytest.raises(ValueError, match="overlap in memory"):
        check_no_overlap(reqs, Plan(offsets, size, "moved"))


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(random_requests())
def test_every_algorithm_gives_a_valid_plan_no_smaller_than_the_bound(reqs):
    bound = aligned_bound(reqs)
    plans = {name: plan(reqs, name) for name in algorithms_for(reqs)}
    for name, p in plans.items():
        check_no_overlap(reqs, p)
        assert p.algorithm == name
        assert set(p.offsets) == {r.name for r in reqs}
        assert all(p.offsets[r.name] % r.align == 0 for r in reqs)
        assert p.size >= bound >= lower_bound(reqs)
    best = plan(reqs)
    check_no_overlap(reqs, best)
    assert best.size <= plans["linear"].size
    assert best.size <= plans["greedy_size"].size
    # "best" is the first smallest plan in ALGORITHMS order.
    assert best.size == min(p.size for p in plans.values())
    assert best.algorithm == next(n for n, p in plans.items() if p.size == best.size)
    assert plans["local_search"].size <= min(
        plans[n].size for n in ("greedy_size", "greedy_breadth", "greedy_conflicts", "ping_pong")
    )


@settings(max_examples=40, deadline=None)
@given(random_requests(max_buffers=30), st.randoms(use_true_random=False))
def test_plans_do_not_depend_on_request_order(reqs, rnd):
    # "best" runs every algorithm, so a difference in any chosen plan would show up here too.
    shuffled = list(reqs)
    rnd.shuffle(shuffled)
    for name in ["best", "linear", "greedy_size", "ping_pong"]:
        assert plan(reqs, name) == plan(shuffled, name)


@settings(max_examples=100, deadline=None)
@given(random_requests(max_buffers=6))
def test_exact_matches_brute_force_on_tiny_inputs(reqs):
    p = plan_exact(reqs)
    check_no_overlap(reqs, p)
    assert p.size == brute_force_optimum(reqs)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 10_000), min_size=1, max_size=120))
def test_best_plan_of_a_chain_equals_the_lower_bound(sizes):
    reqs = chain(sizes)
    assert plan(reqs).size == lower_bound(reqs)
    assert plan_ping_pong(reqs).size == lower_bound(reqs)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4000), st.integers(1, 1000)), min_size=1, max_size=80))
def test_chain_with_per_kernel_scratch_reaches_the_bound(steps):
    # Kernel i reads t(i-1), writes t(i) and uses scratch s(i) during step i only.
    reqs = []
    for i, (out, scratch) in enumerate(steps):
        reqs.append(req(f"t{i:03d}", 16 * out, i, i + 1, align=16))
        reqs.append(req(f"s{i:03d}", 16 * scratch, i, i, align=16))
    best = plan(reqs)
    check_no_overlap(reqs, best)
    assert best.size == lower_bound(reqs)


@pytest.mark.parametrize("seed", range(40))
def test_residual_cnn_reaches_the_bound(seed):
    reqs = residual_cnn(seed, blocks=1 + seed % 4 if seed < 20 else 5 + seed)
    best = plan(reqs)
    check_no_overlap(reqs, best)
    assert best.size == lower_bound(reqs)


# --------------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------------


def test_ascii_timeline_by_hand():
    # The ping-pong plan of chain [30, 50, 20, 40]: t000 [0,30) t001 [30,80) t002 [0,20)
    # t003 [40,80), 80 bytes shown as 8 columns of 10 bytes.
    reqs = chain([30, 50, 20, 40])
    text = ascii_timeline(reqs, plan_ping_pong(reqs), width=8)
    lines = text.splitlines()
    assert lines[0] == ("arena 80 B, bound of these buffers 80 B, algorithm ping_pong, "
                        "10 B per column")
    assert lines[1:6] == [
        "step 0 |AAA.....| 30 B live",
        "step 1 |AAABBBBB| 80 B live",
        "step 2 |CC.BBBBB| 70 B live",
        "step 3 |CC..DDDD| 60 B live",
        "step 4 |....DDDD| 40 B live",
    ]
    assert lines[6] == "legend:"
    assert lines[7].split() == "A t000 [0, 30) size 30 align 1 steps 0..1".split()


def test_ascii_timeline_marks_collisions():
    reqs = [req("a", 8, 0, 1), req("b", 8, 1, 2)]
    text = ascii_timeline(reqs, Plan({"a": 0, "b": 0}, 8, "bad"), width=8)
    assert "step 1 |!!!!!!!!|" in text
    assert "step 0 |AAAAAAAA|" in text


def test_plan_to_json():
    reqs = [req("b", 8, 1, 1, align=8), req("a", 10, 0, 1)]
    p = Plan({"a": 0, "b": 16}, 24, "hand")
    assert plan_to_json(reqs, p) == {
        "arena_bytes": 24,
        "lower_bound": 18,
        "over_bound_pct": 33.33,
        "algorithm": "hand",
        "buffers": [
            {"name": "a", "offset": 0, "size": 10, "align": 1, "first": 0, "last": 1},
            {"name": "b", "offset": 16, "size": 8, "align": 8, "first": 1, "last": 1},
        ],
    }


# --------------------------------------------------------------------------------------------
# Runtime
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("span", [3, 40, 1000])
def test_two_hundred_buffers_plan_quickly(span):
    # span 1000: every buffer overlaps every other, the worst case for all algorithms. The
    # limit is loose against slow CI machines; a planner gone exponential takes far longer.
    rng = random.Random(span)
    reqs = []
    for i in range(200):
        first = rng.randint(0, 100)
        reqs.append(req(f"b{i}", rng.randint(1, 5000), first, first + rng.randint(0, span), 16))
    start = time.perf_counter()
    p = plan(reqs)
    elapsed = time.perf_counter() - start
    check_no_overlap(reqs, p)
    assert elapsed < 2.0


def test_exact_search_on_twelve_buffers_stays_fast():
    # Twelve mutually overlapping buffers of awkward sizes and alignments, where the bound is
    # out of reach, so the search runs until its node budget.
    reqs = [
        req(f"b{i:02d}", 7 + 13 * i, 0, 1 + i % 3, align=[1, 4, 8, 16][i % 4]) for i in range(12)
    ]
    start = time.perf_counter()
    p = plan_exact(reqs)
    elapsed = time.perf_counter() - start
    check_no_overlap(reqs, p)
    assert elapsed < 2.0
