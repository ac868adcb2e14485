"""Quantised ops and their integer arithmetic: requantisation (arith.py, bit-exact with TFLM or
onnxruntime), integer conv and matmul, QLinear element ops, table ops, Quantize/Dequantize."""
