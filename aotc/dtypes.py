"""The dtype table: one row per element type aotc handles (numpy, C and ONNX spellings)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    name: str  # numpy name, also used in bundle.json
    itemsize: int
    ctype: str
    onnx: int  # onnx.TensorProto enum value
    is_float: bool
    is_signed: bool

    @property
    def np(self) -> np.dtype:
        return np.dtype(self.name)

    def __str__(self) -> str:
        return self.name


_TABLE = [
    DType("float32", 4, "float", 1, True, True),
    DType("uint8", 1, "uint8_t", 2, False, False),
    DType("int8", 1, "int8_t", 3, False, True),
    DType("uint16", 2, "uint16_t", 4, False, False),
    DType("int16", 2, "int16_t", 5, False, True),
    DType("int32", 4, "int32_t", 6, False, True),
    DType("int64", 8, "int64_t", 7, False, True),
    DType("bool", 1, "uint8_t", 9, False, False),
    DType("uint32", 4, "uint32_t", 12, False, False),
    DType("uint64", 8, "uint64_t", 13, False, False),
]

BY_NAME = {d.name: d for d in _TABLE}
BY_ONNX = {d.onnx: d for d in _TABLE}

float32 = BY_NAME["float32"]
int8 = BY_NAME["int8"]
uint8 = BY_NAME["uint8"]
int32 = BY_NAME["int32"]
int64 = BY_NAME["int64"]
bool_ = BY_NAME["bool"]


def from_numpy(dt: np.dtype | type) -> DType:
    name = np.dtype(dt).name
    if name not in BY_NAME:
        raise KeyError(name)
    return BY_NAME[name]


def saturating_cast(x: np.ndarray, dt: np.dtype | type) -> np.ndarray:
    """float -> integer as the generated C converts (runtime_c/aotc_runtime.h aotc_sat_*):
    truncation toward zero, NaN -> 0, values beyond the type -> its minimum or maximum."""
    dt = np.dtype(dt)
    x = np.asarray(x)
    if x.dtype.kind != "f" or dt.kind not in "iu":
        return x.astype(dt)
    info = np.iinfo(dt)
    t = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=np.inf, neginf=-np.inf))
    hi, lo = t >= float(info.max), t <= float(info.min)  # float(max) may round up to 2^N
    mid = np.where(hi | lo, 0, t).astype(dt)
    return np.where(hi, info.max, np.where(lo, info.min, mid)).astype(dt)
