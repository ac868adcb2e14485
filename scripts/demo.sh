#!/usr/bin/env bash
# Set up, then compile and verify the example model end to end:
# ONNX -> C bundle -> host build (cffi) -> compare with onnxruntime; then show the plan.
set -euo pipefail
cd "$(dirname "$0")/.."
AOTC_NO_CROSS=1 bash scripts/setup.sh
python3 examples/make_example.py build/example/kws_tiny.onnx
python3 -m aotc compile build/example/kws_tiny.onnx -o build/example/kws_tiny --name kws
python3 -m aotc verify build/example/kws_tiny.onnx --name kws --atol 1e-5 --rtol 1e-4
python3 -m aotc inspect build/example/kws_tiny.onnx --name kws | head -n 24
