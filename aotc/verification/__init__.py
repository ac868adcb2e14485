"""Verification: the generated C (on the host or a board) against a reference runtime, kernel
by kernel (per node), and the operator coverage of the ONNX node suite."""
