"""The planner with in-place steps: an (input, output) pair merged into one buffer
(merge_inplace), planned, and expanded back to one offset per tensor (expand_plan). No two
simultaneously live bytes share an address except an allowed pair at its one in-place step,
which check_no_overlap(..., allowed) accepts and a byte-level replay confirms."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aotc.memory import (
    BufferReq,
    Plan,
    check_no_overlap,
    expand_plan,
    merge_inplace,
    plan,
)


@st.composite
def schedules(draw):  # type: ignore[no-untyped-def]
    """Step i writes t_i (read up to a later step); some steps write t_i over an input that
    dies there, with a temporary (scratch) of that step."""
    n = draw(st.integers(1, 14))
    reqs: list[BufferReq] = []
    pairs: list[tuple[str, str]] = []
    taken: set[str] = set()  # inputs already written over
    for i in range(n):
        last = draw(st.integers(i, min(n, i + 4)))
        reqs.append(BufferReq(f"t{i:02d}", draw(st.integers(1, 64)), draw(st.sampled_from(
            [1, 4, 16])), i, last))
        dying = [r for r in reqs[:-1] if r.last == i and r.name not in taken]
        if dying and draw(st.booleans()):
            x = draw(st.sampled_from(dying))
            pairs.append((x.name, reqs[-1].name))
            taken.add(x.name)
            reqs.append(BufferReq(f"tmp{i:02d}", draw(st.integers(1, 8)), 1, i, i))
        elif draw(st.booleans()):
            reqs.append(BufferReq(f"s{i:02d}", draw(st.integers(1, 32)), 4, i, i))
    return reqs, pairs


def _replay(reqs: list[BufferReq], placed: Plan, pairs: list[tuple[str, str]]) -> None:
    """Byte by byte, step by step: who holds each address."""
    allowed = set(pairs)
    by_name = {r.name: r for r in reqs}
    for step in range(max(r.last for r in reqs) + 1):
        owner: dict[int, str] = {}
        for r in reqs:
            if not r.first <= step <= r.last:
                continue
            for byte in range(placed.offsets[r.name], placed.offsets[r.name] + r.size):
                other = owner.setdefault(byte, r.name)
                if other == r.name:
                    continue
                a, b = by_name[other], r
                pair = (a.name, b.name) if (a.name, b.name) in allowed else (b.name, a.name)
                assert pair in allowed, f"{a.name} and {b.name} share byte {byte} at {step}"
                assert by_name[pair[0]].last == step == by_name[pair[1]].first


@settings(max_examples=150, deadline=None)
@given(schedules(), st.sampled_from(["best", "greedy_size", "ping_pong", "two_ended"]))
def test_inplace_plans_overlap_only_where_allowed(case, algorithm):
    reqs, pairs = case
    merged, buffer_of = merge_inplace(reqs, pairs)
    p = plan(merged, algorithm)
    check_no_overlap(merged, p)
    placed = expand_plan(p, buffer_of)
    check_no_overlap(reqs, placed, pairs)
    _replay(reqs, placed, pairs)
    for x, y in pairs:
        assert placed.offsets[x] == placed.offsets[y]


def test_allowed_pair_only_at_its_step():
    x = BufferReq("x", 16, 1, 0, 2)
    y = BufferReq("y", 16, 1, 1, 3)  # meets x at steps 1 and 2: not an in-place step
    same = Plan({"x": 0, "y": 0}, 16, "test")
    with pytest.raises(ValueError, match="overlap"):
        check_no_overlap([x, y], same, [("x", "y")])
    y2 = BufferReq("y", 16, 1, 2, 3)
    check_no_overlap([x, y2], same, [("x", "y")])
    with pytest.raises(ValueError, match="overlap"):
        check_no_overlap([x, y2], same)  # not declared in place


def test_merge_takes_the_larger_size_and_the_union():
    reqs = [BufferReq("a", 8, 4, 0, 1), BufferReq("b", 24, 16, 1, 2),
            BufferReq("c", 4, 1, 2, 5)]
    merged, buffer_of = merge_inplace(reqs, [("a", "b"), ("b", "c")])
    # Live bytes per step: a's 8 at step 0, b's 24 at steps 1-2, c's 4 at steps 3-5.
    assert merged == [BufferReq("a", 24, 16, 0, 5, ((0, 0, 8), (1, 2, 24), (3, 5, 4)))]
    assert buffer_of == {"a": "a", "b": "a", "c": "a"}
    same = merge_inplace(reqs[:1] + [BufferReq("b", 8, 4, 1, 2)], [("a", "b")])[0]
    assert same == [BufferReq("a", 8, 4, 0, 2)]  # no profile when the size never changes


def test_the_free_tail_of_a_merged_buffer_holds_other_buffers():
    """A 1x1 conv widening 16 -> 32 B over its input at step 2: the merged buffer is 32 B, but
    at step 1 only its first 16 B are live, so step 1's temporary fits above them."""
    reqs = [BufferReq("x", 16, 1, 0, 1), BufferReq("tmp1", 8, 1, 1, 1),
            BufferReq("y", 16, 1, 1, 2), BufferReq("z", 32, 1, 2, 3)]
    merged, buffer_of = merge_inplace(reqs, [("x", "y"), ("y", "z")])
    p = plan(merged, "greedy_size")
    assert p.size == 32 and p.offsets["tmp1"] == 16
    check_no_overlap(merged, p)
    check_no_overlap(reqs, expand_plan(p, buffer_of), [("x", "y"), ("y", "z")])
    late = BufferReq("late", 8, 1, 2, 2)  # at step 2 all 32 B are live
    with pytest.raises(ValueError, match=r"steps 2\.\.2\) and overlap"):
        check_no_overlap([*merged, late], Plan({**p.offsets, "late": 16}, 32, "test"))


def _replay_ok(reqs: list[BufferReq], placed: Plan, pairs: list[tuple[str, str]]) -> bool:
    try:
        _replay(reqs, placed, pairs)
    except AssertionError:
        return False
    return True


@settings(max_examples=300, deadline=None)
@given(schedules(), st.data())
def test_profile_check_agrees_with_the_byte_replay(case, data):
    """check_no_overlap on merged buffers with profiles accepts a plan exactly when the
    byte-level replay of the tensors and temporaries they hold does. The plans: a planned one
    with one buffer moved to where some buffer's live bytes end at some step (in a free tail,
    or onto live bytes), so the check must reject as well as accept."""
    reqs, pairs = case
    merged, buffer_of = merge_inplace(reqs, pairs)
    offsets = dict(plan(merged, "greedy_size").offsets)
    ends = sorted({offsets[r.name] + r.bytes_during(t, t)
                   for r in merged for t in range(r.first, r.last + 1)})
    moved = data.draw(st.sampled_from(merged))
    offsets[moved.name] = -(-data.draw(st.sampled_from(ends)) // moved.align) * moved.align
    p = Plan(offsets, max(offsets[r.name] + r.size for r in merged), "moved")
    try:
        check_no_overlap(merged, p)
        ok = True
    except ValueError:
        ok = False
    assert ok == _replay_ok(reqs, expand_plan(p, buffer_of), pairs)
