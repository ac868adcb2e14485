"""Int8 dot products with Helium (MVE, the M-profile Vector Extension), as loop IR.

A schedule choice for targets whose board.toml features include "mve" (Cortex-M55, M85): int8
conv and matmul kernels reduce 16 input channels per instruction. ``vldrbq_s8`` loads 16 int8
activations and 16 int8 weights, and ``vmladavaq_s8`` adds their 16 products to a scalar int32
accumulator. Weights are packed at compile time as one row per output channel, zero-padded to
a multiple of 16 (``pack_rows``); the activations' last partial chunk is a predicated load
(``vctp8q`` + ``vldrbq_z_s8``: lanes past the end are 0 and their bytes are not read). The
input zero point is folded into the bias (quant.IntArith.fold_bias), so the products are raw
int8 x int8 and the int32 sums are those of the generic kernels (which wrap alike): the same
bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.dtypes import DType
from aotc.lower.loop_ir import Const, Expr, call

I8 = dtypes.BY_NAME["int8"]
I32 = dtypes.BY_NAME["int32"]
LANES = 16  # int8 lanes of a 128-bit vector
# The type of a vldrbq result: arm_mve.h's int8x16_t (model.c.j2 defines it without MVE). Not
# a tensor type (no ONNX enum, outside dtypes' table): it only types vector loads and the
# locals that hold them.
INT8X16 = DType("int8x16", LANES, "int8x16_t", 0, False, True)


def load(x: Expr, active: int = LANES) -> Expr:
    """The 16 int8 from the Load ``x`` on: vldrbq_s8, or with ``active`` < 16 a predicated
    vldrbq_z_s8 whose lanes from ``active`` on are 0 (their bytes are not read)."""
    if active == LANES:
        return call("vldrbq_s8", x, dtype=INT8X16)
    return call("vldrbq_z_s8", x, call("vctp8q", Const(active), dtype=I32), dtype=INT8X16)


def dot(acc: Expr, a: Expr, b: Expr) -> Expr:
    """acc + the dot product of the vectors a and b (16 int8 products, int32, wrapping)."""
    return call("vmladavaq_s8", acc, a, b, dtype=I32)


def padded(n: int) -> int:
    """n rounded up to whole vectors."""
    return -(-n // LANES) * LANES


def pack_rows(w: np.ndarray) -> np.ndarray:
    """Weights (J, L) -> int8 (J, padded(L)): row j is channel j's weights, then zeros."""
    j, n = w.shape
    out = np.zeros((j, padded(n)), np.int8)
    out[:, :n] = w
    return out


def usable(kb: Any, x_dtype: Any, w: np.ndarray | None, arith: Any) -> bool:
    """Whether the MVE schedule can take an integer conv / matmul: an "mve" target, int8
    activations and int8 weights without a zero point (raw int8 x int8 products)."""
    return ("mve" in kb.features and kb.unroll_tiles and x_dtype == I8
            and arith.dsp_ok(w))


def dot_tile(kb: Any, accs: list[Any], x_at: Callable[[int, Expr], Expr],
             w_at: Callable[[int, Expr], Expr], length: int, width: int) -> None:
    """accs[p][j] += sum over i < length of x_at(p, i) * w_at(j, i), for each pixel p and
    channel j < width. x_at and w_at give the Load of element i; elements i + 1 .. i + 15
    follow it in memory (a weight row is padded to whole vectors; an activation row need not
    be: its last partial vector is a predicated load). A vector load is printed once per use
    (the loop IR has no vector locals); the C compiler keeps each in a register."""
    full, rest = divmod(length, LANES)

    def chunk(i: Expr, n: int) -> None:
        xvs = [load(x_at(p, i), n) for p in range(len(accs))]
        for j in range(width):
            wv = load(w_at(j, i))
            for acc, xv in zip(accs, xvs):
                kb.store(acc, [j], dot(acc[[j]], xv, wv))

    if full:
        with kb.loop(full, "q") as q:
            chunk(q * LANES, LANES)
    if rest:
        chunk(Const(full * LANES), rest)
