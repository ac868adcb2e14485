"""Model importers: every door (onnx/, tflite/, torch.py) ends in the same graph IR."""
