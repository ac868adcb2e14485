"""Graph passes: each a small named pure function Graph -> Graph; a pipeline is a list.

Contract (xDSL's): a pass may assume a valid graph and must leave one; tests run ir.verify after
every pass. ``run_pipeline(..., dump_after=NAME)`` hands the graph after NAME to a callback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aotc.ir.graph import Graph


@dataclass(frozen=True)
class Pass:
    name: str
    fn: Callable[[Graph], Graph]
    doc: str = ""

    def __call__(self, g: Graph) -> Graph:
        return self.fn(g)


def default_pipeline(requant: str = "tflite") -> list[Pass]:
    from functools import partial

    from aotc.passes.bodies import in_bodies
    from aotc.passes.dce import dce
    from aotc.passes.fold_batchnorm import fold_batchnorm
    from aotc.passes.fold_constants import fold_constants
    from aotc.passes.fuse import fuse
    from aotc.passes.qdq import qdq
    from aotc.passes.qrecurrent import qrecurrent
    from aotc.passes.views import views

    return [
        Pass("qdq", in_bodies(partial(qdq, mode=requant)),
             "DequantizeLinear -> op -> QuantizeLinear into integer kernels"),
        Pass("qrecurrent", qrecurrent,
             "RNN/GRU/LSTM with DequantizeLinear int8 W and R into int8-weight kernels"),
        Pass("fold", fold_constants, "evaluate every weight-only subgraph at compile time"),
        Pass("fold-bn", fold_batchnorm, "fold BatchNormalization into the preceding Conv/Gemm"),
        Pass("views", views, "drop Identity/Dropout; collapse chains of reshapes"),
        Pass("dce", in_bodies(dce), "remove nodes and constants nothing uses"),
        Pass("fuse", fuse, "fuse anchors with their elementwise epilogue"),
    ]


PASS_NAMES = ("qdq", "qrecurrent", "fold", "fold-bn", "views", "dce", "fuse")


def run_pipeline(g: Graph, passes: list[Pass], verify: bool = False,
                 on_pass: Callable[[str, Graph], None] | None = None) -> Graph:
    from aotc.ir.verify import verify as verify_graph

    for p in passes:
        g = p(g)
        if verify:
            verify_graph(g)
        if on_pass is not None:
            on_pass(p.name, g)
    return g
