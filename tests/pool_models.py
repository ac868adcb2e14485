"""A float model for the memory-pool tests (tests/memory/test_pools.py and
tests/boards/test_pools_board.py): its arena (24,576 B at the defaults) is larger than a 16 KiB
fast pool."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_model(channels: int = 12, hw: int = 16, blocks: int = 4) -> onnx.ModelProto:
    """Conv+Relu blocks with residual Adds, then a global average pool (float)."""
    rng = np.random.default_rng(0)
    vi = helper.make_tensor_value_info
    nodes, inits, cur, cin = [], [], "x", 3
    for i in range(blocks):
        inits += [numpy_helper.from_array(rng.normal(0, .3, (channels, cin, 3, 3))
                                          .astype(np.float32), f"w{i}"),
                  numpy_helper.from_array(rng.normal(0, .1, channels).astype(np.float32),
                                          f"b{i}")]
        nodes += [helper.make_node("Conv", [cur, f"w{i}", f"b{i}"], [f"c{i}"],
                                   pads=[1, 1, 1, 1], name=f"conv{i}"),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}")]
        if i:
            nodes.append(helper.make_node("Add", [f"r{i}", cur], [f"s{i}"], name=f"add{i}"))
        cur, cin = (f"s{i}" if i else f"r{i}"), channels
    nodes.append(helper.make_node("GlobalAveragePool", [cur], ["y"], name="gap"))
    g = helper.make_graph(nodes, "pools", [vi("x", TensorProto.FLOAT, [1, 3, hw, hw])],
                          [vi("y", TensorProto.FLOAT, [1, channels, 1, 1])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
