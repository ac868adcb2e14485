"""Write a small keyword-spotting-style DS-CNN as ONNX (random weights, fixed seed).

    python examples/make_example.py build/example/kws_tiny.onnx

Input 1x1x49x10 (MFCC), Conv 10x4 s2 + BatchNorm + Relu, a depthwise-separable block, global
average pool, Gemm, Softmax: the shape of the MLPerf Tiny KWS model at a tenth of its size.
Only onnx and numpy are needed, so the README example works without ../shared/models.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)

    def w(name: str, *shape: int, scale: float = 0.3) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                       name)

    c = 16
    inits = [
        w("conv1_w", c, 1, 10, 4), w("conv1_b", c),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np.float32), "bn_scale"),
        w("bn_bias", c), w("bn_mean", c),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np.float32), "bn_var"),
        w("dw_w", c, 1, 3, 3), w("dw_b", c), w("pw_w", c, c, 1, 1), w("pw_b", c),
        w("fc_w", c, 12), w("fc_b", 12),
    ]
    nodes = [
        helper.make_node("Conv", ["mfcc", "conv1_w", "conv1_b"], ["c1"], name="conv1",
                         strides=[2, 2], pads=[4, 1, 5, 2]),
        helper.make_node("BatchNormalization", ["c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"],
                         ["b1"], name="bn1"),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "dw_w", "dw_b"], ["c2"], name="dw_conv", group=c,
                         pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "pw_w", "pw_b"], ["c3"], name="pw_conv"),
        helper.make_node("Relu", ["c3"], ["r3"], name="relu3"),
        helper.make_node("GlobalAveragePool", ["r3"], ["gap"], name="pool"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="fc"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "kws_tiny",
        [helper.make_tensor_value_info("mfcc", TensorProto.FLOAT, [1, 1, 49, 10])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 12])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="aotc-example", ir_version=9)
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "build/example/kws_tiny.onnx")
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(build(), out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
