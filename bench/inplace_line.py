"""The arena of two synthetic float models where convs by line (--inplace-conv, docs/memory.md)
pay off, with and without --inplace-conv:

    python bench/inplace_line.py

  dw   3x3 stem (3 -> 16) at 48x48, then a stride-1 3x3 depthwise, a 1x1 conv and a stride-1
       3x3 depthwise (16 channels), each with a Relu, and a 1x1 head to 2 channels: the
       depthwise convs' ring is 2 rows (384 B) where a channel temporary is 9,216 B.
  conv 3x3 stem (3 -> 16) and three stride-1 3x3 convs (16 -> 16) at 32x32 with Relus, and a
       1x1 head: plain convs had no in-place schedule; by line each needs 2 rows of its 16
       output channels (4,096 B) beside the one feature map (65,536 B).

Columns: the arena (bytes) with the default options and with --inplace-conv, the in-place
modes chosen per step, and the in-place temporaries in the arena / on the C stack.
Only aotc.compiler.compile_model runs (no C compiler)."""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from aotc.compiler import CompileOptions, compile_model


def chain(layers: list[tuple[str, int, int]], hw: int) -> onnx.ModelProto:
    """x -> 3x3 stem to 16 channels -> (kind, channels, kernel) per layer, each with a Relu
    ("dw": depthwise; same padding) -> 1x1 conv to 2 channels."""
    rng = np.random.default_rng(0)
    inits, nodes, x, c = [], [], "x", 3
    for k, (kind, m, kk) in enumerate([("conv", 16, 3), *layers]):
        dw = kind == "dw"
        m = c if dw else m
        w = (rng.standard_normal((m, 1 if dw else c, kk, kk)) * 0.3).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{k}"))
        nodes += [helper.make_node("Conv", [x, f"w{k}"], [f"c{k}"], group=c if dw else 1,
                                   pads=[kk // 2] * 4),
                  helper.make_node("Relu", [f"c{k}"], [f"t{k}"])]
        x, c = f"t{k}", m
    inits.append(numpy_helper.from_array(rng.standard_normal((2, c, 1, 1)).astype(np.float32),
                                         "head"))
    nodes.append(helper.make_node("Conv", [x, "head"], ["y"]))
    g = helper.make_graph(
        nodes, "synthetic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


MODELS = {"dw": chain([("dw", 16, 3), ("conv", 16, 1), ("dw", 16, 3)], 48),
          "conv": chain([("conv", 16, 3)] * 3, 32)}


def main() -> int:
    for name, model in MODELS.items():
        plain = compile_model(model, CompileOptions()).plan.size
        c = compile_model(model, CompileOptions(inplace_conv=True))
        modes = " ".join(f"{i}:{m}" for i, m in sorted(c.liveness.modes.items()))
        arena = sum(n for ls in c.lowered for _, n in ls.scratch)
        stack = sum(t["bytes"] for t in c.stack_temporaries)
        print(f"{name:<5} default {plain:>8,}  inplace {c.plan.size:>8,}  ({modes}; "
              f"temporaries: arena {arena:,} B, stack {stack:,} B)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
