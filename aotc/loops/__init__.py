"""The loop-nest IR kernels are written in: loops, loads, stores and expressions over buffers
(loop_ir.py), the KernelBuilder ops lower through (builder.py), its transforms (unrolling,
simplification, value ranges) and the DSP / Helium intrinsic vocabulary (dsp.py, mve.py)."""
