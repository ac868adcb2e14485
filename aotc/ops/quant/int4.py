"""Packed int4 weights: TFLite's INT4 filters of CONV_2D, DEPTHWISE_CONV_2D and
FULLY_CONNECTED (int8 activations), which the QDQ pass marks ``_int4`` on the QLinearConv /
QLinearMatMul it makes. The weights stay two to a byte in the constant array, low nibble first
(TFLite's UnpackDenseInt4IntoInt8): half the flash of int8. The kernel is the int8 one, lowered
on the generic schedules (their weight reads are single-element loads; the DSP and Helium
schedules read weights as words of lanes and are not used), then every load of an int8 weight
array (the weight input, or a copy at least as large that a schedule re-laid out at compile
time) becomes a load of its byte and the nibble sign-extended:
((byte >> 4 * (i % 2)) & 15 ^ 8) - 8. TFLM unpacks the whole filter into a RAM scratch buffer
at each Eval instead; the values, and so the results, are the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.loops.loop_ir import Bin, Call, Cast, Const, Expr, Load

I8, I32, U8 = dtypes.BY_NAME["int8"], dtypes.BY_NAME["int32"], dtypes.BY_NAME["uint8"]
VECTOR_FEATURES = frozenset({"dsp", "mve"})


def pack_int4(values: np.ndarray) -> np.ndarray:
    """int8 values in [-8, 7], flattened, two to a byte, low nibble first (an odd count's
    last byte has a zero high nibble)."""
    v = np.asarray(values, np.int8).reshape(-1).astype(np.uint8) & 0xF
    if v.size % 2:
        v = np.append(v, np.uint8(0))
    return (v[0::2] | (v[1::2] << 4)).astype(np.uint8)


def _fits(a: np.ndarray | None) -> bool:
    return a is not None and a.dtype == np.int8 and a.size > 0 \
        and int(a.min()) >= -8 and int(a.max()) <= 7


def lower_packed(node: Any, kb: Any, lower: Callable[[], None]) -> None:
    """``lower()`` (the int8 kernel of ``node``) on the generic schedules, then its int8
    weight loads read the packed nibbles."""
    kb.features = kb.features - VECTOR_FEATURES
    lower()
    w = kb.input_const(1)
    if not _fits(w):
        raise AotcError("int4 weights outside [-8, 7] after the import (internal)", node.name,
                        node.op)
    assert w is not None
    sources = {kb.inputs[1].buf.name: w}
    for name, arr in kb.consts.items():  # the weights re-laid out (not a small table)
        if _fits(arr) and arr.size >= w.size:
            sources[name] = arr

    def check(e: Expr) -> Expr:  # a Load printed as an address (vector calls) cannot unpack
        if isinstance(e, Call) and any(isinstance(a, Load) and a.buf.name in sources
                                       for a in e.args):
            raise AotcError(f"int4 weights read through {e.fn} (internal)", node.name, node.op)
        return e

    kb.map_body(check)
    packed: dict[str, Any] = {}

    def unpack(e: Expr) -> Expr:
        if not isinstance(e, Load) or e.buf.name not in sources:
            return e
        name = e.buf.name
        if name not in packed:
            short = name[len(kb.name) + 1:] if name.startswith(kb.name + "_") else name
            packed[name] = kb.const(f"{short}_int4", pack_int4(sources[name]), U8).buf
        byte = Cast(Load(packed[name], e.index // 2), I32)
        shift = Cast(e.index % 2, I32) * Const(4, I32)
        nib = Bin("band", Bin("shr", byte, shift, I32), Const(15, I32), I32)
        return Cast(Bin("bxor", nib, Const(8, I32), I32) - Const(8, I32), I8)

    kb.map_body(unpack)
    for name in list(packed):
        if name in kb.consts:
            kb.drop_const(name)
