"""Model importers. Only ONNX so far (frontend/onnx.py)."""
