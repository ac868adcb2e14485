"""Knobs every kernel has."""

from aotc.schedules import knob

UNROLL_MAX = knob(
    "unroll_max", (1, 4, 8, 16), 8,
    "loops the lowering marks as unrollable are unrolled when their trip count is at most "
    "this (the default is --unroll-max)")
