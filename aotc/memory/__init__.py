"""Static memory planning: byte offsets in one arena for buffers with known lifetimes."""

from aotc.memory.buffers import (
    BufferReq,
    Plan,
    check_no_overlap,
    expand_plan,
    lower_bound,
    merge_inplace,
    overlaps,
)
from aotc.memory.planner import (
    ALGORITHMS,
    EXACT_MAX_BUFFERS,
    plan,
    plan_exact,
    plan_greedy_by_breadth,
    plan_greedy_by_conflicts,
    plan_greedy_by_size,
    plan_linear,
    plan_local_search,
    plan_ping_pong,
    plan_two_ended_search,
)
from aotc.memory.report import ascii_timeline, plan_to_json

__all__ = [
    "ALGORITHMS",
    "EXACT_MAX_BUFFERS",
    "BufferReq",
    "Plan",
    "ascii_timeline",
    "check_no_overlap",
    "expand_plan",
    "lower_bound",
    "merge_inplace",
    "overlaps",
    "plan",
    "plan_exact",
    "plan_greedy_by_breadth",
    "plan_greedy_by_conflicts",
    "plan_greedy_by_size",
    "plan_linear",
    "plan_local_search",
    "plan_ping_pong",
    "plan_to_json",
    "plan_two_ended_search",
]
