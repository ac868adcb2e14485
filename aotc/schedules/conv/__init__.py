"""Convolution schedules: the knobs (knobs.py), the implementations (generic register tiles,
the DSP and Helium column schedules, depthwise planes, in place by line) and the one place
that picks among them for a conv (choose.py)."""
