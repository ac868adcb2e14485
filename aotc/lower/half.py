"""--keep-float16-weights: a lowered kernel's float32 constants that are float16 numbers
(every element converts to float16 and back to the same bits), kept in flash as their float16
bit patterns (uint16) and converted to float32 where the kernel loads them (aotc_f16_f32,
which model.c defines where a kernel calls it: branch-free and exact, subnormals, infinities
and NaNs included). The kernel computes on the same float32 values as with the constants stored
float32, so its outputs are bit-identical; only its constants are half the bytes.

It applies to the constants a kernel reads as its own (the graph's constants it takes as
parameters and those its lowering builds, e.g. re-laid-out weights): float16 weights of a
.tflite model (behind DEQUANTIZE or DENSIFY) and of an ONNX model (float16 initializers cast to
float32), and any other float32 constant whose values all are float16 numbers.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from aotc.dtypes import BY_NAME, float32
from aotc.ir.graph import Graph
from aotc.loops.loop_ir import Buffer, Call, Expr, Load, map_stmts
from aotc.lower.lowering import LoweredStep

UINT16 = BY_NAME["uint16"]
SUFFIX = "_f16"  # the key of a graph constant's float16 copy in LoweredStep.consts


def float16_bits(arr: np.ndarray) -> np.ndarray | None:
    """``arr``'s float16 bit patterns (uint16) when every element of the float32 array is a
    float16 number (bit-exact round trip, NaN payloads included), else None."""
    a = np.ascontiguousarray(arr, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        h = a.astype(np.float16)
    if not np.array_equal(h.astype(np.float32).view(np.uint32), a.view(np.uint32)):
        return None
    return h.view(np.uint16)


def keep_float16(ls: LoweredStep, graph: Graph) -> LoweredStep:
    """``ls`` with its float16-valued float32 constants stored as float16 bits and converted
    on load. A BYOC kernel (its own C source) is left as it is."""
    if ls.source is not None:
        return ls
    consts = dict(ls.consts)
    args = list(ls.args)
    swap: dict[str, Buffer] = {}  # parameter name -> its uint16 buffer
    for k, (b, (kind, key)) in enumerate(zip(ls.kernel.params, ls.args)):
        if kind != "const" or b.dtype != float32:
            continue
        arr = consts[key] if key in ls.consts else graph.values[key].const
        if arr is None or arr.dtype != np.float32:
            continue
        bits = float16_bits(arr)
        if bits is None:
            continue
        new_key = key if key in ls.consts else key + SUFFIX
        consts[new_key] = bits.reshape(arr.shape)
        args[k] = (kind, new_key)
        swap[b.name] = replace(b, dtype=UINT16)
    if not swap:
        return ls

    def fe(e: Expr) -> Expr:
        if isinstance(e, Load) and e.buf.name in swap:
            return Call("f16_to_f32", (Load(swap[e.buf.name], e.index),), float32)
        if isinstance(e, Call) and e.fn == "vldm" and not isinstance(e.args[0], Load):
            return e.args[0]  # a run of float loads no more: each converts on its own
        return e

    kernel = replace(ls.kernel, body=map_stmts(ls.kernel.body, fe),
                     params=tuple(swap.get(b.name, b) for b in ls.kernel.params))
    return replace(ls, kernel=kernel, args=args, consts=consts)
