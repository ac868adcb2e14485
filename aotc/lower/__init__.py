"""Lowering: kernels as loop nests (loop_ir), built by KernelBuilder, transformed by schedules."""
