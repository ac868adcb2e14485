"""Ordering: the passed graph as an ordered list of kernel steps (the AOT "main"), the order of
smallest liveness bound, and which convolutions may write over their input."""
