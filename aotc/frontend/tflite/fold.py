"""Builtins whose inputs are all constants, computed at compile time (numpy, TFLite's
semantics): the shape arithmetic of Keras exports (SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE,
REDUCE_PROD of a shape, ...) leaves no node behind, and a later operator that needs a constant
(a RESHAPE's shape, a PAD's paddings) finds it. Movement ops fold on any type (a quantised
output keeps its input's parameters); arithmetic folds only on values that are not quantised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from aotc.frontend.tflite.builder import Builder
from aotc.frontend.tflite.helpers import _ins, _outs, _same_q, strided_slice_params
from aotc.frontend.tflite.options import _opts

Fold = Callable[[Builder, Any, list[np.ndarray]], list[np.ndarray]]


def _out_shapes(b: Builder, op: Any) -> list[tuple[int, ...]]:
    return [b.shape(y) for y in _outs(op)]


def _reshape(b: Builder, op: Any, v: list[np.ndarray]) -> list[np.ndarray]:
    return [v[0].reshape(_out_shapes(b, op)[0])]


def _concat(b: Builder, op: Any, v: list[np.ndarray]) -> list[np.ndarray]:
    o = _opts(op, "ConcatenationOptions")
    return [np.concatenate([np.atleast_1d(a) for a in v], axis=int(o.Axis()) if o else 0)]


def _pack(b: Builder, op: Any, v: list[np.ndarray]) -> list[np.ndarray]:
    o = _opts(op, "PackOptions")
    return [np.stack(v, axis=int(o.Axis()) if o else 0)]


def _unpack(b: Builder, op: Any, v: list[np.ndarray]) -> list[np.ndarray]:
    o = _opts(op, "UnpackOptions")
    axis = int(o.Axis()) if o else 0
    return [np.take(v[0], k, axis=axis) for k in range(v[0].shape[axis])]


def _strided_slice(b: Builder, op: Any, v: list[np.ndarray]) -> list[np.ndarray]:
    starts, ends, steps, _ = strided_slice_params(b, op)
    idx = tuple(slice(s, e, k) for s, e, k in zip(starts, ends, steps))
    return [v[0][idx].reshape(_out_shapes(b, op)[0])]


def _slice(b: Builder, op: Any, v: list[np.ndarray]) -> list[np.ndarray]:
    idx = tuple(slice(int(s), None if int(n) == -1 else int(s) + int(n))
                for s, n in zip(v[1].reshape(-1), v[2].reshape(-1)))
    return [v[0][idx]]


def _gather(b: Builder, op: Any, v: list[np.ndarray]) -> list[np.ndarray]:
    o = _opts(op, "GatherOptions")
    if o is not None and o.BatchDims():
        raise ValueError("batch_dims")
    return [np.take(v[0], v[1].astype(np.int64), axis=int(o.Axis()) if o else 0)]


def _transpose(b: Builder, op: Any, v: list[np.ndarray]) -> list[np.ndarray]:
    return [v[0].transpose([int(p) for p in v[1].reshape(-1)])]


def _tile(b: Builder, op: Any, v: list[np.ndarray]) -> list[np.ndarray]:
    return [np.tile(v[0], [int(k) for k in v[1].reshape(-1)])]


def _cast(b: Builder, op: Any, v: list[np.ndarray]) -> list[np.ndarray]:
    dt = b.dtype(_outs(op)[0])
    x = v[0]
    if x.dtype.kind == "f" and dt.kind in "iu":
        x = np.trunc(x)
    return [x.astype(dt)]


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], options: str | None = None
            ) -> Fold:
    def f(b: Builder, op: Any, v: list[np.ndarray]) -> list[np.ndarray]:
        o = _opts(op, options) if options else None
        if o is not None and o.FusedActivationFunction():
            raise ValueError("fused activation")
        return [fn(v[0], v[1])]
    return f


def _int_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f":
        return x / y
    if not np.all(y):
        raise ValueError("division by zero")
    return np.trunc(x / y).astype(x.dtype)  # C integer division


def _reduce(fn: Callable[..., np.ndarray]) -> Fold:
    def f(b: Builder, op: Any, v: list[np.ndarray]) -> list[np.ndarray]:
        o = _opts(op, "ReducerOptions")
        axes = tuple(sorted({int(a) % max(v[0].ndim, 1) for a in v[1].reshape(-1)}))
        return [fn(v[0], axis=axes, keepdims=bool(o and o.KeepDims())).astype(v[0].dtype)]
    return f


# Only move values: fold on every type, a quantised result keeping its input's parameters.
MOVES: dict[str, Fold] = {
    "RESHAPE": _reshape, "SQUEEZE": _reshape, "EXPAND_DIMS": _reshape,
    "CONCATENATION": _concat, "PACK": _pack, "UNPACK": _unpack,
    "STRIDED_SLICE": _strided_slice, "SLICE": _slice, "GATHER": _gather,
    "TRANSPOSE": _transpose, "TILE": _tile,
    "BROADCAST_TO": lambda b, op, v: [np.broadcast_to(v[0], _out_shapes(b, op)[0])],
}
# Compute: fold only on values that are not quantised.
ARITH: dict[str, Fold] = {
    "CAST": _cast,
    "ADD": _binary(np.add, "AddOptions"), "SUB": _binary(np.subtract, "SubOptions"),
    "MUL": _binary(np.multiply, "MulOptions"), "DIV": _binary(_int_div, "DivOptions"),
    "FLOOR_DIV": _binary(np.floor_divide), "FLOOR_MOD": _binary(np.mod),
    "MAXIMUM": _binary(np.maximum), "MINIMUM": _binary(np.minimum),
    "REDUCE_PROD": _reduce(np.prod), "SUM": _reduce(np.sum),
    "REDUCE_MAX": _reduce(np.max), "REDUCE_MIN": _reduce(np.min),
}


def try_fold(b: Builder, name: str, op: Any) -> bool:
    """Compute ``op`` now if its inputs are constants and it folds; True when done."""
    fn = MOVES.get(name) or ARITH.get(name)
    if fn is None:
        return False
    ins = [t for t in _ins(op) if t >= 0]
    vals = [b.const(t) for t in ins]
    if not ins or any(v is None for v in vals):
        return False
    ys = _outs(op)
    quantised = [t for t in ins[:1] + ys if b.quant(t) is not None and b.dtype(t) != np.int32]
    if quantised:
        if name not in MOVES or not all(_same_q(b, ins[0], y) for y in ys):
            return False
        if name in ("CONCATENATION", "PACK") and not all(_same_q(b, ins[0], t) for t in ins):
            return False
    try:
        outs = fn(b, op, [np.asarray(v) for v in vals])  # type: ignore[misc]
    except (ValueError, IndexError, TypeError):
        return False  # the converter reports it
    if len(outs) != len(ys):
        return False
    for y, v in zip(ys, outs):
        b.fold(y, v)
    return True
