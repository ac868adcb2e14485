"""Gemm / MatMul schedules: the knobs (knobs.py) and the implementations of the tiled dot
product (generic register tiles, DSP dual MAC, Helium)."""
