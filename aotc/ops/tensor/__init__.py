"""Tensor ops: shapes and views, data movement (transpose, concat, slice, gather, pad),
indexing with run-time indices, generators, and the in-place slice view."""
