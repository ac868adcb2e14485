"""The TFLite conformance suite: single-op .tflite models (tflite_builder's ``Net``) for every
builtin aotc converts x tensor type x attribute case, run through TensorFlow Lite Micro's Python
interpreter (the reference) and through aotc's generated C (host build, cffi).

A case is ``<builtin>/<variant>/<type>``. Types: ``float32``; ``int8`` (per-tensor activations,
per-channel symmetric int8 weights, int32 bias); ``int8_zp-128`` / ``int8_zp127`` (the same with
every input's zero point at an end of the range: all-positive or all-negative inputs);
``int16`` (16x8: symmetric int16 activations, int8 weights, int64 bias); ``int32`` / ``int64`` /
``bool`` for the typed cases. Outcomes (``run_case``):

- ``not-in-tflm``: TFLM refuses the model (no kernel for the builtin or the type): not counted;
- ``refused``: aotc refuses it with its one-line AotcError (counted apart, reason listed);
- ``pass``: integer outputs bit-exact with TFLM, float32 outputs within FLOAT_TOL
  (rtol = atol, 1e-5 unless the builtin is listed);
- ``fail``: anything else (the difference is the detail).

The cases come from FAMILIES: one entry per builtin family (a dict of attribute variants, the
types it is built in, whether the int8 zero-point-end variants are built), the base variants
from test_tflite_ops.CASES / tflite_cases.CASES (one per builtin and attribute case they cover)
and the typed cases of tflite_cases.TYPED. A new family (int16 ops, LSTM, Signal, ...) is one
more entry. The expected outcome of every case that does not pass is in
aotc/data/tflite_conformance_expected.txt with its reason.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as S
from test_tflite_int16 import Net16
from test_tflite_ops import CASES as BASE_CASES
from test_tflite_ops import SHAPE, builtin_of
from tflite_builder import Net, interpret, interpret_tflm, options
from tflite_cases import FLOAT_TOL, TYPED, reduce

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = ROOT / "aotc" / "data" / "tflite_conformance_expected.txt"
OUTCOMES = ("pass", "refused", "fail", "not-in-tflm")
QTYPES = ("float32", "int8", "int16")
Spec = Callable[[Net, int, tuple[int, ...]], int]
# A variant: a spec on the family's input shape, or (spec, input shape).
Variant = Spec | tuple[Spec, tuple[int, ...]]
# float32 tolerance (rtol = atol) of builtins whose TFLM float kernels use other libm calls or
# sum in another order; 1e-5 for the others.
TOL = {**FLOAT_TOL, "LOGISTIC": 1e-4, "TANH": 1e-4, "SOFTMAX": 1e-4, "HARD_SWISH": 1e-5,
       "MEAN": 1e-5, "AVERAGE_POOL_2D": 1e-5, "CONV_2D": 1e-5, "DEPTHWISE_CONV_2D": 1e-5,
       "FULLY_CONNECTED": 1e-5, "TRANSPOSE_CONV": 1e-5}


class Net16Conf(Net16):
    """test_tflite_int16.Net16 with constants "like" a tensor in int16 and the fixed output
    parameters TFLite requires of 16x8 LOGISTIC / TANH / SOFTMAX."""

    FIXED = {"LOGISTIC": (1 / 32768, 0), "TANH": (1 / 32768, 0), "SOFTMAX": (1 / 32768, 0)}

    def _tensor(self, shape: Sequence[int], dtype: Any, name: str, *args: Any, **kw: Any
                ) -> int:
        if np.dtype(dtype) == np.bool_:  # Net16 knows no bool tensors
            return Net._tensor(self, shape, dtype, name, *args, **kw)
        return super()._tensor(shape, dtype, name, *args, **kw)

    def const_like(self, arr: np.ndarray, like: int) -> int:
        q = self.tensors[like].quantization
        s = float(q.scale[0])
        data = np.clip(np.round(arr / s), -32768, 32767).astype(np.int16)
        return self._tensor(arr.shape, np.int16, f"c{len(self.tensors)}", data, s, 0)

    def op(self, code: str, inputs: Sequence[int], out_shape: Any, options: Any = None,
           n_out: int = 1, dtype: Any = None) -> Any:
        out = super().op(code, inputs, out_shape, options, n_out, dtype)
        if code in self.FIXED and dtype is None:
            q = self.tensors[out].quantization
            q.scale = np.array([self.FIXED[code][0]], np.float32)
            q.zeroPoint = np.array([0], np.int64)
        return out


class NetInt(Net):
    """A float Net whose float32 tensors (inputs, constants, outputs) are ``act`` (int32):
    the same graphs on integer tensors, without quantisation; float constants x 3 rounded,
    zeros made 1."""

    def __init__(self, act: Any = np.int32) -> None:
        super().__init__(False)
        self.act = act

    def _tensor(self, shape: Sequence[int], dtype: Any, name: str, data: np.ndarray | None = None,
                *args: Any, **kw: Any) -> int:
        if np.dtype(dtype) == np.float32:
            dtype = self.act
            if data is not None:  # no zero divisor for DIV / FLOOR_DIV / FLOOR_MOD
                data = np.round(np.asarray(data) * 3).astype(dtype)
                data = np.where(data == 0, 1, data).astype(dtype)
        return super()._tensor(shape, dtype, name, data, *args, **kw)


# The builtins whose base and attribute cases are also built on int32 tensors (TFLM's kernels
# that take int32; a case TFLM refuses is "not in TFLM").
INT32_OPS = {"RESHAPE", "PAD", "PADV2", "MIRROR_PAD", "STRIDED_SLICE", "CONCATENATION", "SPLIT",
             "SPLIT_V", "SLICE", "EXPAND_DIMS", "SQUEEZE", "PACK", "UNPACK", "TILE",
             "BROADCAST_TO", "GATHER", "GATHER_ND", "TRANSPOSE", "REVERSE_V2", "ADD", "SUB", "MUL",
             "MAXIMUM", "MINIMUM", "SELECT_V2", "REDUCE_MAX", "REDUCE_MIN", "SUM", "DEPTH_TO_SPACE",
             "SPACE_TO_DEPTH", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "EMBEDDING_LOOKUP",
             "CUMSUM", "ABS", "NEG", "FILL", "ZEROS_LIKE", "ARG_MAX", "ARG_MIN", "EQUAL",
             "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL", "DIV", "FLOOR_DIV",
             "FLOOR_MOD", "RESIZE_NEAREST_NEIGHBOR", "SQUARED_DIFFERENCE"}


# ------------------------------------------------------------------ attribute-grid families
def _out_hw(h: int, w: int, k: int, stride: int, padding: int, dil: int = 1) -> tuple[int, int]:
    eff = (k - 1) * dil + 1
    if padding == 0:  # SAME
        return -(-h // stride), -(-w // stride)
    return (h - eff) // stride + 1, (w - eff) // stride + 1


def conv(k: int = 3, stride: int = 1, padding: int = 0, dil: int = 1, act: int = 0,
         per_channel: bool = True, cout: int = 5) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        n, h, w, c = s
        wt = net.weight(net.rng.normal(scale=0.5, size=(cout, k, k, c)),
                        axis=0 if per_channel else None)
        b = net.bias(net.rng.normal(scale=0.1, size=cout), x, wt)
        out = (n, *_out_hw(h, w, k, stride, padding, dil), cout)
        return net.op("CONV_2D", [x, wt, b], out, options(
            "Conv2DOptions", padding=padding, strideH=stride, strideW=stride,
            fusedActivationFunction=act, dilationHFactor=dil, dilationWFactor=dil))
    return spec


def depthwise(mult: int = 1, stride: int = 1, padding: int = 0, dil: int = 1, act: int = 0,
              per_channel: bool = True, k: int = 3) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        n, h, w, c = s
        wt = net.weight(net.rng.normal(scale=0.5, size=(1, k, k, mult * c)),
                        axis=3 if per_channel else None)
        b = net.bias(net.rng.normal(scale=0.1, size=mult * c), x, wt)
        out = (n, *_out_hw(h, w, k, stride, padding, dil), mult * c)
        return net.op("DEPTHWISE_CONV_2D", [x, wt, b], out, options(
            "DepthwiseConv2DOptions", padding=padding, strideH=stride, strideW=stride,
            depthMultiplier=mult, fusedActivationFunction=act, dilationHFactor=dil,
            dilationWFactor=dil))
    return spec


def fully_connected(units: int = 6, act: int = 0, bias: bool = True, per_channel: bool = False,
                    keep: bool = False) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        k = s[-1]
        wt = net.weight(net.rng.normal(scale=0.3, size=(units, k)),
                        axis=0 if per_channel else None)
        ins = [x, wt, net.bias(net.rng.normal(scale=0.1, size=units), x, wt) if bias else -1]
        out = (*s[:-1], units) if keep else (int(np.prod(s[:-1])), units)
        return net.op("FULLY_CONNECTED", ins, out, options(
            "FullyConnectedOptions", fusedActivationFunction=act, keepNumDims=keep))
    return spec


def transpose_conv(stride: int = 2, padding: int = 0, bias: bool = False) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        n, h, w, c = s
        wt = net.weight(net.rng.normal(scale=0.5, size=(3, 3, 3, c)))
        oh, ow = (h * stride, w * stride) if padding == 0 else (
            (h - 1) * stride + 3, (w - 1) * stride + 3)
        out = (n, oh, ow, 3)
        ins = [net.ints(out), wt, x]
        if bias:
            ins.append(net.bias(net.rng.normal(scale=0.1, size=3), x, wt))
        return net.op("TRANSPOSE_CONV", ins, out, options(
            "TransposeConvOptions", padding=padding, strideH=stride, strideW=stride))
    return spec


def pool(code: str, k: int, stride: int, padding: int, act: int = 0) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        n, h, w, c = s
        out = (n, *_out_hw(h, w, k, stride, padding), c)
        return net.op(code, [x], out, options(
            "Pool2DOptions", padding=padding, strideH=stride, strideW=stride, filterHeight=k,
            filterWidth=k, fusedActivationFunction=act))
    return spec


def elementwise(code: str, other: str, act: int | None = None) -> Spec:
    """x ``code`` y, y: ``channel`` (a [C] constant), ``scalar`` (a [] constant), ``same``
    (a second input of x's shape), ``bcast`` (a second input [1, 1, W, 1]), ``rank``
    (a second input [C]: lower rank)."""
    opts = None
    if act is not None:
        opts = options(code.title() + "Options", fusedActivationFunction=act)

    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        if other == "channel":
            y = net.const(net.rng.normal(size=s[-1:]))
        elif other == "scalar":
            y = net.const(np.array(net.rng.normal() + 0.5))
        else:
            y = net.input({"same": s, "bcast": (1, 1, s[2], 1), "rank": s[-1:]}[other])
        dt = np.bool_ if code in COMPARISONS else None
        return net.op(code, [x, y], s, opts, dtype=dt)
    return spec


def like(code: str, shape: tuple[int, ...]) -> Spec:
    """x ``code`` c: c a constant of ``shape`` (broadcast) with x's type and parameters."""
    return lambda net, x, s: net.op(code, [x, net.const_like(
        net.rng.normal(size=shape) * 0.5, x)], s)


COMPARISONS = {"EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL"}


def softmax(beta: float) -> Spec:
    return lambda net, x, s: net.op("SOFTMAX", [x], s, options("SoftmaxOptions", beta=beta))


def unary(code: str, opts: Any = None) -> Spec:
    return lambda net, x, s: net.op(code, [x], s, opts)


def concat(axis: int, n: int = 2) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        out = list(s)
        out[axis % len(s)] *= n
        return net.op("CONCATENATION", [x] * n, tuple(out), options("ConcatenationOptions",
                                                                     axis=axis))
    return spec


def pad(p: list[list[int]]) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        out = tuple(d + a + b for d, (a, b) in zip(s, p))
        return net.op("PAD", [x, net.ints(p)], out)
    return spec


def strided_slice(begin: list[int], end: list[int], strides: list[int], out: tuple[int, ...],
                  **masks: int) -> Spec:
    return lambda net, x, s: net.op(
        "STRIDED_SLICE", [x, net.ints(begin), net.ints(end), net.ints(strides)], out,
        options("StridedSliceOptions", **masks))


def transpose(perm: tuple[int, ...]) -> Spec:
    return lambda net, x, s: net.op("TRANSPOSE", [x, net.ints(perm)], tuple(s[p] for p in perm))


def reshape(out: tuple[int, ...], new: tuple[int, ...]) -> Spec:
    return lambda net, x, s: net.op("RESHAPE", [x, net.ints(new)], out,
                                    options("ReshapeOptions", newShape=list(new)))


def split(axis: int, n: int, pick: int) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        out = list(s)
        out[axis % len(s)] //= n
        outs = net.op("SPLIT", [net.ints(axis), x], tuple(out), options(
            "SplitOptions", numSplits=n), n_out=n)
        return outs[pick] if n > 1 else outs
    return spec


def arg(code: str, axis: int) -> Spec:
    cls = "ArgMaxOptions" if code == "ARG_MAX" else "ArgMinOptions"

    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        out = tuple(d for k, d in enumerate(s) if k != axis % len(s))
        return net.op(code, [x, net.ints([axis])], out, options(
            cls, outputType=S.TensorType.INT32), dtype=np.int32)
    return spec


ODD = (1, 7, 5, 3)  # an edge shape: odd sizes, few channels
ONE = (1, 1, 1, 8)  # an edge shape: one pixel


@dataclass(frozen=True)
class Family:
    """Cases of one builtin: ``variants`` (attribute case -> spec), built in ``types``;
    ``zp_ends``: also int8 with the inputs' zero points at -128 and 127."""
    builtin: str
    variants: dict[str, Variant]
    types: tuple[str, ...] = QTYPES
    zp_ends: bool = False
    shape: tuple[int, ...] = SHAPE


FAMILIES: list[Family] = [
    Family("CONV_2D", {
        "same_s1": conv(), "same_s2": conv(stride=2), "valid_s1": conv(padding=1),
        "valid_s2": conv(padding=1, stride=2), "same_dil2": conv(dil=2),
        "valid_dil2": conv(padding=1, dil=2), "relu": conv(act=1), "relu6": conv(act=3),
        "relu_n1_to_1": conv(act=2), "per_tensor": conv(per_channel=False), "k1": conv(k=1),
        "k_full_valid": conv(k=6, padding=1), "odd_s2": (conv(stride=2), ODD),
        "one_pixel": (conv(k=1), ONE)}, zp_ends=True),
    Family("DEPTHWISE_CONV_2D", {
        "m1_same_s1": depthwise(), "m2_same_s2": depthwise(2, 2), "valid_s1": depthwise(
            padding=1), "valid_s2": depthwise(padding=1, stride=2), "dil2": depthwise(dil=2),
        "relu6": depthwise(act=3), "relu": depthwise(act=1), "per_tensor": depthwise(
            per_channel=False), "odd_s2": (depthwise(stride=2), ODD)}, zp_ends=True),
    Family("FULLY_CONNECTED", {
        "batch2": (fully_connected(), (2, 24)), "relu": (fully_connected(act=1), (2, 24)),
        "relu6": (fully_connected(act=3), (2, 24)),
        "no_bias": (fully_connected(bias=False), (2, 24)),
        "per_channel": (fully_connected(per_channel=True), (2, 24)),
        "keep_num_dims": (fully_connected(keep=True), (1, 3, 8)),
        "one_row": (fully_connected(units=1), (1, 7))}, zp_ends=True),
    Family("TRANSPOSE_CONV", {
        "same_s2": transpose_conv(), "valid_s2": transpose_conv(padding=1),
        "same_s1": transpose_conv(stride=1), "bias": transpose_conv(bias=True)},
           shape=(1, 4, 4, 4)),
    *[Family(code, {
        "k2_s2_valid": pool(code, 2, 2, 1), "k3_s2_same": pool(code, 3, 2, 0),
        "k3_s1_same": pool(code, 3, 1, 0), "relu6": pool(code, 2, 1, 1, act=3),
        "global": pool(code, 6, 6, 1), "odd": (pool(code, 2, 2, 0), ODD)}, zp_ends=True)
      for code in ("AVERAGE_POOL_2D", "MAX_POOL_2D")],
    *[Family(code, {
        "channel": elementwise(code, "channel"), "scalar": elementwise(code, "scalar"),
        "same": elementwise(code, "same"), "bcast": elementwise(code, "bcast"),
        "rank": elementwise(code, "rank"), "relu": elementwise(code, "same", 1),
        "relu6": elementwise(code, "bcast", 3)}, zp_ends=True)
      for code in ("ADD", "SUB", "MUL")],
    # int8 MAXIMUM / MINIMUM compare stored integers: the other operand has x's parameters.
    *[Family(code, {"bcast": like(code, (1, 1, 6, 1)), "scalar": like(code, ()),
                    "rank": like(code, (4,))}, zp_ends=True) for code in ("MAXIMUM", "MINIMUM")],
    Family("SQUARED_DIFFERENCE", {"same": elementwise("SQUARED_DIFFERENCE", "same"),
                                  "bcast": elementwise("SQUARED_DIFFERENCE", "bcast")}),
    *[Family(code, {"same": elementwise(code, "same"), "bcast": elementwise(code, "bcast")})
      for code in ("GREATER", "EQUAL", "LESS_EQUAL")],
    *[Family(code, {
        "hw_keep": reduce(code, [1, 2], True), "hw": reduce(code, [1, 2], False),
        "neg1_keep": reduce(code, [-1], True), "neg1": reduce(code, [-1], False),
        "neg3_neg2": reduce(code, [-3, -2], False), "all": reduce(code, [0, 1, 2, 3], True)},
        zp_ends=code == "MEAN") for code in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN")],
    Family("SOFTMAX", {"beta1": softmax(1.0), "beta_half": softmax(0.5),
                       "rank2": (softmax(1.0), (3, 10)), "one_pixel": (softmax(2.0), ONE)},
           zp_ends=True),
    *[Family(code, {"odd": (unary(code), ODD), "one_pixel": (unary(code), ONE)}, zp_ends=True)
      for code in ("LOGISTIC", "TANH", "RELU", "RELU6", "HARD_SWISH", "ABS", "NEG")],
    Family("LEAKY_RELU", {
        "alpha_0.01": unary("LEAKY_RELU", options("LeakyReluOptions", alpha=0.01)),
        "alpha_1.5": unary("LEAKY_RELU", options("LeakyReluOptions", alpha=1.5))},
           zp_ends=True),
    Family("CONCATENATION", {"axis0": concat(0), "axis2": concat(2), "neg1_three": concat(-1, 3),
                             "neg3": concat(-3)}, zp_ends=True),
    Family("PAD", {"channels": pad([[0, 0], [0, 0], [0, 0], [3, 1]]),
                   "wide": pad([[0, 0], [4, 4], [0, 5], [0, 0]]),
                   "batch": pad([[1, 0], [0, 0], [0, 0], [0, 0]])}, zp_ends=True),
    Family("STRIDED_SLICE", {
        "reverse_w": strided_slice([0, 0, -1, 0], [1, 6, -7, 4], [1, 1, -1, 1], SHAPE),
        "neg_indices": strided_slice([0, -4, 1, -3], [1, -1, 6, 4], [1, 1, 2, 1],
                                     (1, 3, 3, 3)),
        "masks": strided_slice([0, 2, 0, 1], [0, 0, 4, 0], [1, 1, 1, 2], (1, 4, 4, 2),
                               beginMask=5, endMask=11),
        "shrink_last": strided_slice([0, 0, 0, 2], [1, 6, 6, 3], [1, 1, 1, 1], (1, 6, 6),
                                     shrinkAxisMask=8)}),
    Family("TRANSPOSE", {"hw": transpose((0, 2, 1, 3)), "reverse": transpose((3, 2, 1, 0)),
                         "cf": transpose((0, 3, 1, 2))}),
    Family("RESHAPE", {"minus_one": reshape((6, 24), (6, -1)),
                       "rank2_to_4": (reshape((1, 2, 3, 4), (1, 2, 3, 4)), (6, 4))}),
    Family("SPLIT", {"neg1_four": split(-1, 4, 3), "h_three": split(1, 3, 1),
                     "batch_one": split(0, 1, 0)}),
    *[Family(code, {"neg1": arg(code, -1), "h": arg(code, 1), "odd_c": (arg(code, 3), ODD)})
      for code in ("ARG_MAX", "ARG_MIN")],
]


def _base_families() -> list[Family]:
    """test_tflite_ops.CASES (with tflite_cases.CASES), one variant each, on SHAPE."""
    by: dict[str, dict[str, Variant]] = {}
    for name, spec in BASE_CASES.items():
        b = builtin_of(name)
        variant = "base" if name == b else "base_" + name[len(b) + 1:]
        by.setdefault(b, {})[variant] = spec
    return [Family(b, v) for b, v in sorted(by.items())]


# Typed cases (int32 / int64 / bool operands): tflite_cases.TYPED, and more here.
def _int64_binary(code: str) -> Callable[[Net], list[int]]:
    def spec(net: Net) -> list[int]:
        x = net.input((2, 3, 4), np.int64)
        c = net.ints(np.arange(-2, 2).reshape(1, 1, 4), np.int64)
        dt = np.bool_ if code in COMPARISONS else np.int64
        return [net.op(code, [x, c], (2, 3, 4), dtype=dt)]
    return spec


def _int32_bcast(code: str) -> Callable[[Net], list[int]]:
    def spec(net: Net) -> list[int]:
        x, y = net.input((2, 3, 4), np.int32), net.input((3, 1), np.int32)
        dt = np.bool_ if code in COMPARISONS else np.int32
        return [net.op(code, [x, y], (2, 3, 4), dtype=dt)]
    return spec


def _int32_fused(code: str, act: int) -> Callable[[Net], list[int]]:
    """int32 ``code`` with fused activation ``act`` (TFLM: SUB / MUL / DIV clamp to
    CalculateActivationRange, ADD ignores it); a constant divisor without zeros."""
    def spec(net: Net) -> list[int]:
        x = net.input((2, 3, 4), np.int32)
        y = net.ints(np.array([[3, -2, 1, -1]], np.int32)) if code == "DIV" else \
            net.input((3, 4), np.int32)
        o = options(code.title() + "Options", fusedActivationFunction=act)
        return [net.op(code, [x, y], (2, 3, 4), o, dtype=np.int32)]
    return spec


def _select16(bcast: bool) -> Callable[[Net], list[int]]:
    """int16 SELECT_V2 (TFLM copies the values; every int16 tensor with one scale)."""
    def spec(net: Net) -> list[int]:
        c = net.input((2, 3, 4), np.bool_)
        ts = []
        for name, shape in (("x", (2, 3, 4)), ("y", (3, 1) if bcast else (2, 3, 4))):
            ts.append(net._tensor(shape, np.int16, name, None, 1e-3, 0))
            net.inputs.append(ts[-1])
        y = net._tensor((2, 3, 4), np.int16, "out", None, 1e-3, 0)
        net.op_into("SELECT_V2", [c, *ts], [y])
        return [y]
    return spec


def _cast(src: str, dst: str, scaled: bool = False) -> Callable[[Net], list[int]]:
    """CAST from ``src`` to ``dst``; ``scaled``: the input times 9001 first (MUL)."""
    def spec(net: Net) -> list[int]:
        x = net.input((3, 7), np.dtype(src).type)
        if scaled:
            x = net.op("MUL", [x, net.ints(np.array([9001], np.int32))], (3, 7),
                       options("MulOptions"), dtype=np.int32)
        return [net.op("CAST", [x], (3, 7), dtype=np.dtype(dst).type)]
    return spec


MORE_TYPED: dict[str, Callable[[Net], list[int]]] = {
    "SELECT_V2_int16": _select16(False),
    "SELECT_V2_int16_bcast": _select16(True),
    **{f"{c}_int32_{name}": _int32_fused(c, act) for c in ("ADD", "SUB", "MUL", "DIV")
       for name, act in (("relu_n1_to_1", 2), ("relu", 1), ("relu6", 3))},
    **{f"{c}_int64": _int64_binary(c) for c in ("ADD", "MUL", "EQUAL", "MAXIMUM")},
    **{f"{c}_int32_bcast": _int32_bcast(c) for c in ("ADD", "SUB", "MUL", "LESS", "FLOOR_DIV",
                                                      "FLOOR_MOD", "SQUARED_DIFFERENCE")},
    "CONCATENATION_int32": lambda net: [net.op(
        "CONCATENATION", [net.input((2, 3), np.int32), net.input((2, 1), np.int32)], (2, 4),
        options("ConcatenationOptions", axis=-1), dtype=np.int32)],
    "CAST_bool_int32": lambda net: [net.op("CAST", [net.input((2, 5), np.bool_)], (2, 5),
                                           dtype=np.int32)],
    # TFLM's cast.cc: static_cast between int8, int16, int32, uint32 and float32 (narrowing
    # integer casts wrap; the micro_speech audio front end casts its int16 features).
    **{f"CAST_{a}_{b}": _cast(a, b)
       for a, b in (("int16", "int32"), ("int16", "float32"), ("int8", "int32"),
                    ("int8", "int16"), ("int16", "int8"))},
    # int32 inputs are small (-6..6): scaled by 9001 first, so that the narrowing casts wrap.
    **{f"CAST_int32_{b}": _cast("int32", b, scaled=True) for b in ("int16", "int8", "uint32")},
    # (x * 9001 - y)^2 leaves int32: TFLM's int32 kernel wraps.
    "SQUARED_DIFFERENCE_int32_wrap": lambda net: [net.op("SQUARED_DIFFERENCE", [net.op(
        "MUL", [net.input((3, 7), np.int32), net.ints(np.array([9001], np.int32))], (3, 7),
        options("MulOptions"), dtype=np.int32), net.input((3, 7), np.int32)], (3, 7),
        dtype=np.int32)],
    "ARG_MAX_int32": lambda net: [net.op(
        "ARG_MAX", [net.input((3, 5), np.int32), net.ints([-1])], (3,),
        options("ArgMaxOptions", outputType=S.TensorType.INT32), dtype=np.int32)],
}


def _convert(code: str, src: Any, dst: Any, sq: tuple[float, int] | None,
             dq: tuple[float, int] | None) -> Callable[[Net], list[int]]:
    """QUANTIZE / DEQUANTIZE from a ``src`` input (parameters ``sq``) to a ``dst`` output
    (``dq``)."""
    def spec(net: Net) -> list[int]:
        x = net._tensor((2, 5, 7), src, "x", None, *(sq or (None, None)))
        net.inputs.append(x)
        y = net._tensor((2, 5, 7), dst, "y", None, *(dq or (None, None)))
        net.op_into(code, [x], [y])
        return [y]
    return spec


CONVERT: dict[str, Callable[[Net], list[int]]] = {
    "QUANTIZE_float_int8": _convert("QUANTIZE", np.float32, np.int8, None, (0.02, 3)),
    "QUANTIZE_float_int8_zp-128": _convert("QUANTIZE", np.float32, np.int8, None, (0.01, -128)),
    "QUANTIZE_float_int16": _convert("QUANTIZE", np.float32, np.int16, None, (1e-4, 0)),
    "QUANTIZE_int8_requantize": _convert("QUANTIZE", np.int8, np.int8, (0.05, -7), (0.03, 12)),
    "QUANTIZE_int16_to_int8": _convert("QUANTIZE", np.int16, np.int8, (1e-3, 0), (0.2, -2)),
    "DEQUANTIZE_int8_float": _convert("DEQUANTIZE", np.int8, np.float32, (0.05, 127), None),
    "DEQUANTIZE_int16_float": _convert("DEQUANTIZE", np.int16, np.float32, (3e-4, 0), None),
}


# TFLM's int16 tensors with a zero point other than 0 (its 16x8 activations have 0): SOFTMAX
# from int8 writes scale 1/65536 and zero point -32768 (TFLM's Prepare accepts 1/65535 too,
# within 0.1 %), QUANTIZE requantises an int16 tensor with both zero points as given and
# DEQUANTIZE subtracts its zero point (TFLM's keyword benchmark model: SOFTMAX int8 -> int16,
# then QUANTIZE int16 -> int32). Inputs (_asym16_inputs): every int8 code (shuffled, each once
# or twice) or int16 codes spanning the range, both ends and the zero point included.
def _softmax_to_int16(shape: tuple[int, ...], sx: float, zx: int, beta: float = 1.0,
                      sy: float = 1 / 65536) -> Callable[[Net], list[int]]:
    def spec(net: Net) -> list[int]:
        x = net._tensor(shape, np.int8, "x", None, sx, zx)
        net.inputs.append(x)
        y = net._tensor(shape, np.int16, "y", None, sy, -32768)
        net.op_into("SOFTMAX", [x], [y], options("SoftmaxOptions", beta=beta))
        return [y]
    return spec


def _requantize16(dst: Any, sq: tuple[float, int], dq: tuple[float | None, int | None],
                  code: str = "QUANTIZE") -> Callable[[Net], list[int]]:
    def spec(net: Net) -> list[int]:
        x = net._tensor((16, 64), np.int16, "x", None, *sq)
        net.inputs.append(x)
        y = net._tensor((16, 64), dst, "y", None, *dq)
        net.op_into(code, [x], [y])
        return [y]
    return spec


def _cast_q(src: Any, dst: Any, sq: tuple[float | None, int | None],
            dq: tuple[float | None, int | None]) -> Callable[[Net], list[int]]:
    """CAST from ``src`` (parameters ``sq``) to ``dst`` (``dq``): TFLM casts the stored
    integers, the parameters ignored."""
    def spec(net: Net) -> list[int]:
        x = net._tensor((4, 64), src, "x", None, *sq)
        net.inputs.append(x)
        y = net._tensor((4, 64), dst, "y", None, *dq)
        net.op_into("CAST", [x], [y])
        return [y]
    return spec


def _batch_matmul16(k: int, n: int, adj_y: bool, sy: float) -> Callable[[Net], list[int]]:
    """TFLM's int16 BATCH_MATMUL (16x16, int64 sums): full-range int16 activations against
    a constant full-range int16 right-hand side ([k, n], or [n, k] with adj_y)."""
    def spec(net: Net) -> list[int]:
        x = net._tensor((2, 3, k), np.int16, "x", None, 1e-3, 0)
        net.inputs.append(x)
        wv = np.random.default_rng(11).integers(-32768, 32768, (n, k) if adj_y else (k, n))
        w = net._tensor(wv.shape, np.int16, "w", wv.astype(np.int16), 1e-3, 0)
        y = net._tensor((2, 3, n), np.int16, "y", None, sy, 0)
        net.op_into("BATCH_MATMUL", [x, w], [y], options("BatchMatMulOptions", adjY=adj_y))
        return [y]
    return spec


ASYM16: dict[str, Callable[[Net], list[int]]] = {
    "BATCH_MATMUL_int16_k64": _batch_matmul16(64, 8, False, 0.2),
    "BATCH_MATMUL_int16_k64_adj_y": _batch_matmul16(64, 5, True, 0.2),
    "BATCH_MATMUL_int16_k3": _batch_matmul16(3, 7, False, 0.05),
    "CAST_int16_q_to_int8_q": _cast_q(np.int16, np.int8, (1e-3, 0), (0.05, -3)),
    "CAST_int16_q_to_float32": _cast_q(np.int16, np.float32, (1e-3, 0), (None, None)),
    "CAST_int8_q_to_int16_q": _cast_q(np.int8, np.int16, (0.02, -5), (3e-4, 0)),
    "CAST_int8_q_to_int32": _cast_q(np.int8, np.int32, (0.02, 100), (None, None)),
    "CAST_int16_q_to_uint32": _cast_q(np.int16, np.uint32, (2e-3, 0), (None, None)),
    "SOFTMAX_int8_to_int16_kws": _softmax_to_int16((128, 2), 0.06996273, 2, sy=1.5259022e-05),
    "SOFTMAX_int8_to_int16_rows32": _softmax_to_int16((8, 32), 0.5, -128),
    "SOFTMAX_int8_to_int16_row256": _softmax_to_int16((1, 256), 0.01, 0),
    "SOFTMAX_int8_to_int16_rank4": _softmax_to_int16((2, 4, 4, 16), 1 / 16, 127),
    "SOFTMAX_int8_to_int16_beta_half": _softmax_to_int16((16, 16), 0.1, -3, beta=0.5),
    "SOFTMAX_int8_to_int16_wide": _softmax_to_int16((4, 64), 2.0, 5),
    "QUANTIZE_int16_zp-32768_to_int32_kws": _requantize16(np.int32, (1.5259022e-05, -32768),
                                                          (3.051851e-05, 0)),
    "QUANTIZE_int16_zp-32768_to_int32_same": _requantize16(np.int32, (1 / 65536, -32768),
                                                           (1 / 65536, 0)),
    "QUANTIZE_int16_zp1000_to_int32_up": _requantize16(np.int32, (2e-3, 1000), (1e-5, -5)),
    "QUANTIZE_int16_to_int32": _requantize16(np.int32, (1e-3, 0), (2.5e-4, 0)),
    "QUANTIZE_int16_zp-32768_to_int8": _requantize16(np.int8, (1 / 65536, -32768),
                                                     (1 / 256, -128)),
    "QUANTIZE_int16_zp-300_to_int16": _requantize16(np.int16, (1e-3, -300), (3e-3, 12)),
    # int16 ABS (TFLM's elementwise.cc): |x| as is (scales equal; -32768 saturates to 32767)
    # or rescaled by one multiplier, down and up (saturating).
    **{f"ABS_int16_{k}": _requantize16(np.int16, (1e-3, 0), (sy, 0), "ABS")
       for k, sy in (("same", 1e-3), ("down", 3e-3), ("up", 7e-4), ("up_odd", 3.3e-4))},
    "DEQUANTIZE_int16_zp-32768_float": _requantize16(np.float32, (1 / 65536, -32768),
                                                     (None, None), "DEQUANTIZE"),
    "DEQUANTIZE_int16_zp777_float": _requantize16(np.float32, (3e-4, 777), (None, None),
                                                  "DEQUANTIZE"),
}


def _qbinary(code: str, dt: Any, x: tuple[float, int], y: tuple[float, int],
             out: tuple[float, int], y_shape: tuple[int, ...] = (16, 16), y_dt: Any = None
             ) -> Callable[[Net], list[int]]:
    """``code`` on two quantised (16, 16) inputs (the second maybe broadcast, of ``y_dt``)
    with the parameters given (inputs: _asym16_inputs, every int8 code; int16 codes over the
    range)."""
    def spec(net: Net) -> list[int]:
        a = net._tensor((16, 16), dt, "x", None, *x)
        b = net._tensor(y_shape, y_dt or dt, "y", None, *y)
        net.inputs += [a, b]
        o = net._tensor((16, 16), dt, "out", None, *out)
        net.op_into(code, [a, b], [o])
        return [o]
    return spec


def _qaddn(n: int, x: tuple[float, int], out: tuple[float, int]) -> Callable[[Net], list[int]]:
    """ADD_N of ``n`` int8 (16, 16) inputs sharing the parameters ``x`` (TFLM requires it)."""
    def spec(net: Net) -> list[int]:
        xs = [net._tensor((16, 16), np.int8, f"x{k}", None, *x) for k in range(n)]
        net.inputs += xs
        o = net._tensor((16, 16), np.int8, "out", None, *out)
        net.op_into("ADD_N", xs, [o])
        return [o]
    return spec


def _qcumsum(shape: tuple[int, ...], axis: int, x: tuple[float, int], out: tuple[float, int],
             exclusive: bool = False, reverse: bool = False) -> Callable[[Net], list[int]]:
    """CUMSUM of an int8 input along ``axis`` with the parameters given."""
    def spec(net: Net) -> list[int]:
        a = net._tensor(shape, np.int8, "x", None, *x)
        net.inputs.append(a)
        o = net._tensor(shape, np.int8, "out", None, *out)
        net.op_into("CUMSUM", [a, net.ints(axis)], [o], options(
            "CumsumOptions", exclusive=exclusive, reverse=reverse))
        return [o]
    return spec


def _ql2norm(shape: tuple[int, ...], x: tuple[float, int]) -> Callable[[Net], list[int]]:
    """L2_NORMALIZATION of an int8 input (output 1/128, zero point 0, as TFLite writes it)."""
    def spec(net: Net) -> list[int]:
        a = net._tensor(shape, np.int8, "x", None, *x)
        net.inputs.append(a)
        o = net._tensor(shape, np.int8, "out", None, 1 / 128, 0)
        net.op_into("L2_NORMALIZATION", [a], [o], options("L2NormOptions"))
        return [o]
    return spec


def _qlogsoftmax(shape: tuple[int, ...], x: tuple[float, int]) -> Callable[[Net], list[int]]:
    """LOG_SOFTMAX of an int8 input (output 16/256, zero point 127, as TFLM requires)."""
    def spec(net: Net) -> list[int]:
        a = net._tensor(shape, np.int8, "x", None, *x)
        net.inputs.append(a)
        o = net._tensor(shape, np.int8, "out", None, 16 / 256, 127)
        net.op_into("LOG_SOFTMAX", [a], [o])
        return [o]
    return spec


# Quantised binary kernels with chosen parameters: several scale pairs (either input the
# larger), zero points at the ends, outputs saturating at both ends of the type.
QBINARY: dict[str, Callable[[Net], list[int]]] = {
    "SQUARED_DIFFERENCE_int8_x_wider": _qbinary("SQUARED_DIFFERENCE", np.int8, (0.05, -7),
                                                (0.02, 10), (0.1, -128)),
    "SQUARED_DIFFERENCE_int8_y_wider": _qbinary("SQUARED_DIFFERENCE", np.int8, (0.013, 127),
                                                (0.9, -128), (1.7, -100)),
    "SQUARED_DIFFERENCE_int8_equal_scales": _qbinary("SQUARED_DIFFERENCE", np.int8, (0.25, 3),
                                                     (0.25, -3), (16.0, -128)),
    "SQUARED_DIFFERENCE_int8_out_fine": _qbinary("SQUARED_DIFFERENCE", np.int8,
                                                 (0.003, 0), (0.004, -20), (0.002, -128)),
    "SQUARED_DIFFERENCE_int8_bcast_row": _qbinary("SQUARED_DIFFERENCE", np.int8, (0.07, 5),
                                                  (0.03, -60), (0.5, -90), (1, 16)),
    "SQUARED_DIFFERENCE_int16_x_wider": _qbinary("SQUARED_DIFFERENCE", np.int16, (3e-3, 0),
                                                 (1e-3, 0), (0.5, 0)),
    "SQUARED_DIFFERENCE_int16_saturating": _qbinary("SQUARED_DIFFERENCE", np.int16, (1e-4, 0),
                                                    (2.5e-4, 0), (1e-5, 0)),
    "SQUARED_DIFFERENCE_int16_bcast_col": _qbinary("SQUARED_DIFFERENCE", np.int16, (2e-4, 0),
                                                   (2e-4, 0), (2e-3, 0), (16, 1)),
    # PRELU: alpha an activation (any sign), per-tensor; int16 x with int8 alpha
    "PRELU_int8_alpha_row": _qbinary("PRELU", np.int8, (0.05, -7), (0.01, 3), (0.04, 10),
                                     (1, 16)),
    "PRELU_int8_alpha_full": _qbinary("PRELU", np.int8, (0.1, 127), (0.02, -128), (0.4, 100)),
    "PRELU_int8_zp-128_fine_out": _qbinary("PRELU", np.int8, (0.2, -128), (0.5, 20),
                                           (0.01, 0)),
    "PRELU_int8_alpha_col_big": _qbinary("PRELU", np.int8, (0.003, 40), (0.3, -5), (0.1, -100),
                                         (16, 1)),
    "PRELU_int16_alpha_int8": _qbinary("PRELU", np.int16, (1e-3, 0), (0.01, -2), (2e-3, 0),
                                       (1, 16), np.int8),
    # ADD_N: 2 to 5 inputs, zero points at the ends, outputs finer and coarser than inputs
    "ADD_N_int8_two": _qaddn(2, (0.05, -3), (0.08, 4)),
    "ADD_N_int8_three_zp-128": _qaddn(3, (0.02, -128), (0.03, -128)),
    "ADD_N_int8_four_zp127": _qaddn(4, (0.1, 127), (0.5, 100)),
    "ADD_N_int8_five_coarse": _qaddn(5, (0.013, 9), (0.2, -17)),
    # CUMSUM: each axis, exclusive / reverse, coarse and fine outputs; a 64-long axis of
    # zero point -128 overflows TFLM's int32 accumulator (both wrap)
    "CUMSUM_int8_axis0": _qcumsum((4, 8, 8), 0, (0.05, -3), (0.1, 5)),
    "CUMSUM_int8_axis1_exclusive": _qcumsum((4, 8, 8), 1, (0.02, 10), (0.05, -20), True),
    "CUMSUM_int8_axis2_reverse": _qcumsum((4, 8, 8), -1, (0.1, 127), (0.3, 100), False, True),
    "CUMSUM_int8_excl_rev_fine": _qcumsum((2, 3, 6, 5), 2, (0.01, 0), (0.004, -1), True, True),
    "CUMSUM_int8_long_axis_wraps": _qcumsum((4, 64), 1, (0.01, -128), (0.5, -128)),
    # L2_NORMALIZATION: rows of 1 (sums 0, 1, 4, ...: the small-sum branch and the negative
    # shift), 3, 64 and 4128 values (the longest TFLM computes defined), zero points at the ends
    "L2_NORMALIZATION_int8_rows1": _ql2norm((256, 1), (0.1, 3)),
    "L2_NORMALIZATION_int8_rows3_zp-128": _ql2norm((4, 5, 3), (0.02, -128)),
    "L2_NORMALIZATION_int8_rows64_zp127": _ql2norm((8, 64), (0.05, 127)),
    "L2_NORMALIZATION_int8_row4128": _ql2norm((1, 4128), (0.3, 0)),
    # LOG_SOFTMAX: input scales fine to coarse (diff_min cutting the row or not), rows of 1
    # to 256 values
    "LOG_SOFTMAX_int8_rows16": _qlogsoftmax((16, 16), (0.1, 3)),
    "LOG_SOFTMAX_int8_fine": _qlogsoftmax((4, 64), (0.01, -128)),
    "LOG_SOFTMAX_int8_coarse": _qlogsoftmax((8, 32), (0.5, 127)),
    "LOG_SOFTMAX_int8_row256": _qlogsoftmax((1, 256), (0.05, 0)),
    "LOG_SOFTMAX_int8_rows1": _qlogsoftmax((64, 1), (0.2, 0)),
    "LOG_SOFTMAX_int8_rank4": _qlogsoftmax((2, 3, 4, 10), (1.7, -20)),
}


def _asym16_inputs(net: Net) -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    xs = []
    for t in net.inputs:
        ts = net.tensors[t]
        shape = tuple(int(d) for d in ts.shape)
        n = int(np.prod(shape))
        if ts.type == S.TensorType.INT8:
            codes = np.arange(-128, 128)
            v = np.concatenate([rng.permutation(codes) for _ in range(-(-n // 256))])[:n]
            xs.append(v.astype(np.int8).reshape(shape))
        else:
            zp = int(ts.quantization.zeroPoint[0])
            v = np.round(np.linspace(-32768, 32767, n)).astype(np.int64)
            v[1] = zp
            xs.append(rng.permutation(v).astype(np.int16).reshape(shape))
    return xs


def _asym16_builder(spec: Callable[[Net], list[int]]
                    ) -> Callable[[], tuple[bytes, list[np.ndarray]]]:
    def build() -> tuple[bytes, list[np.ndarray]]:
        net = Net(False)
        model = net.build(spec(net))
        return model, _asym16_inputs(net)
    return build


def _typed_type(name: str) -> str:
    m = re.search(r"_(int8|int16|int32|int64|bool)", name)
    return m.group(1) if m else "int32"


# ------------------------------------------------------------------ cases
@dataclass(frozen=True)
class Case:
    id: str
    builtin: str
    type: str
    build: Callable[[], tuple[bytes, list[np.ndarray]]] = field(compare=False, repr=False)


def _spec_of(v: Variant) -> tuple[Spec, tuple[int, ...] | None]:
    return (v[0], v[1]) if isinstance(v, tuple) else (v, None)


def cases() -> list[Case]:
    out: list[Case] = []
    for fam in _base_families() + FAMILIES:
        for variant, v in fam.variants.items():
            spec, shape = _spec_of(v)
            shape = shape or fam.shape
            kinds = list(fam.types)
            if fam.zp_ends and "int8" in kinds:
                kinds += ["int8_zp-128", "int8_zp127"]
            if fam.builtin in INT32_OPS:
                kinds.append("int32")
            for kind in kinds:
                out.append(Case(f"{fam.builtin}/{variant}/{kind}", fam.builtin, kind.split("_")[0],
                                _builder(spec, shape, kind)))
    for name, tspec in {**TYPED, **MORE_TYPED, **CONVERT}.items():
        b = builtin_of(name)
        t = _typed_type(name)
        out.append(Case(f"{b}/{name[len(b) + 1:] or 'base'}/{t}", b, t, _typed_builder(tspec)))
    for name, tspec in {**ASYM16, **QBINARY}.items():
        b = builtin_of(name)
        t = _typed_type(name)
        out.append(Case(f"{b}/{name[len(b) + 1:]}/{t}", b, t, _asym16_builder(tspec)))
    ids = [c.id for c in out]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    return sorted(out, key=lambda c: c.id)


def _inputs(net: Net, rng: np.random.Generator, dist: str) -> list[np.ndarray]:
    xs = []
    for t in net.inputs:
        ts = net.tensors[t]
        shape = tuple(int(d) for d in ts.shape)
        if ts.type == S.TensorType.BOOL:
            xs.append(rng.integers(0, 2, size=shape).astype(np.bool_))
        elif ts.type in (S.TensorType.INT32, S.TensorType.INT64):
            dt = np.int32 if ts.type == S.TensorType.INT32 else np.int64
            xs.append(rng.integers(-6, 7, size=shape).astype(dt))
        elif ts.type in (S.TensorType.INT8, S.TensorType.INT16):  # every code of the type
            dt = np.int8 if ts.type == S.TensorType.INT8 else np.int16
            xs.append(rng.integers(np.iinfo(dt).min, np.iinfo(dt).max + 1, size=shape,
                                   endpoint=False).astype(dt))
        else:
            x = rng.normal(size=shape).astype(np.float32) * (4 if dist == "wide" else 1)
            xs.append(np.abs(x) if dist == "pos" else -np.abs(x) if dist == "neg" else x)
    return xs


def _builder(spec: Spec, shape: tuple[int, ...], kind: str
             ) -> Callable[[], tuple[bytes, list[np.ndarray]]]:
    def graph(net: Net) -> list[int]:
        return [spec(net, net.input(shape), shape)]

    def build() -> tuple[bytes, list[np.ndarray]]:
        dist = {"int8_zp-128": "pos", "int8_zp127": "neg"}.get(kind, "normal")
        fnet = Net(False)
        fmodel = fnet.build(graph(fnet))
        xs = _inputs(fnet, np.random.default_rng(0), dist)
        if kind == "float32":
            return fmodel, xs
        if kind == "int32":
            inet = NetInt()
            return inet.build(graph(inet)), _inputs(inet, np.random.default_rng(0), dist)
        _, named = interpret(fmodel, xs, all_tensors=True)
        ranges = {k: (float(v.min()), float(v.max())) for k, v in named.items()
                  if v.dtype == np.float32 and v.size}
        qnet: Net = Net16Conf(ranges) if kind == "int16" else Net(True, ranges)
        model = qnet.build(graph(qnet))
        lo, hi, dt = (-32768, 32767, np.int16) if kind == "int16" else (-128, 127, np.int8)
        qxs = []
        for t, x in zip(qnet.inputs, xs):
            q = qnet.tensors[t].quantization
            qxs.append(x if q is None else np.clip(
                np.round(x / q.scale[0]) + q.zeroPoint[0], lo, hi).astype(dt))
        return model, qxs
    return build


def _typed_builder(spec: Callable[[Net], list[int]]
                   ) -> Callable[[], tuple[bytes, list[np.ndarray]]]:
    def build() -> tuple[bytes, list[np.ndarray]]:
        net = Net(False)
        model = net.build(spec(net))
        return model, _inputs(net, np.random.default_rng(3), "wide")
    return build


# ------------------------------------------------------------------ running one case
@dataclass
class Result:
    outcome: str
    detail: str = ""


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


def reference(model: bytes, xs: list[np.ndarray]) -> list[np.ndarray] | str:
    """TFLM's outputs, or the reason TFLM refuses the model."""
    n = len(_output_count(model))
    with tempfile.TemporaryFile() as log:  # TFLM reports why on the C stderr: kept as reason
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)
        try:
            return interpret_tflm(model, xs, n)
        except Exception as e:  # noqa: BLE001 - TFLM raises RuntimeError/ValueError
            os.dup2(saved, 2)
            log.seek(0)
            lines = [ln.strip() for ln in log.read().decode(errors="replace").splitlines()
                     if ln.strip() and not ln.startswith(("Node ", "Failed", "Invoke"))]
            return "TFLM: " + (lines[0][:150] if lines else _one_line(e))
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _output_count(model: bytes) -> list[int]:
    m = S.Model.GetRootAs(model, 0)
    sg = m.Subgraphs(0)
    return [sg.Outputs(k) for k in range(sg.OutputsLength())]


def compare(case: Case, got: list[np.ndarray], want: list[np.ndarray]) -> str:
    """'' when the outputs agree (integers bit-exact, float32 within TOL), else the
    difference."""
    for g, w in zip(got, want):
        if g.dtype != w.dtype or g.shape != w.shape:
            return f"output {g.dtype}{list(g.shape)}, TFLM {w.dtype}{list(w.shape)}"
        if w.dtype.kind == "f":
            tol = TOL.get(case.builtin, 1e-5)
            bad = ~np.isclose(g, w, rtol=tol, atol=tol, equal_nan=True)
            if bad.any():
                d = float(np.nanmax(np.abs(g.astype(np.float64) - w)))
                return f"{int(bad.sum())} of {w.size} values beyond {tol:g}, max |diff| {d:.3g}"
        else:
            bad = g != w
            if bad.any():
                d = int(np.abs(g.astype(np.int64) - w.astype(np.int64)).max())
                return f"{int(bad.sum())} of {w.size} values differ, max {d} LSB"
    return ""


def compile_case(model: bytes, tmp: Path) -> Any:
    import aotc

    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "m.tflite").write_bytes(model)
    return aotc.compile(tmp / "m.tflite", tmp / "out", name="m")


def run_bundle(bundle: Any, xs: list[np.ndarray], runner: Any = None) -> list[np.ndarray]:
    runner = runner or bundle.load()
    meta = runner.meta
    got = runner.run({t["name"]: x for t, x in zip(meta["inputs"], xs)})
    return [got[t["name"]] for t in meta["outputs"]]


def merge(models: Sequence[bytes]) -> bytes:
    """One model holding the graphs of ``models`` side by side (inputs and outputs in order,
    tensor names prefixed ``c<k>_``): one aotc compile and one host build for a batch."""
    out = S.ModelT()
    out.version = 3
    out.buffers = [S.BufferT()]
    out.operatorCodes = []
    sg = S.SubGraphT()
    sg.tensors, sg.operators, ins, outs = [], [], [], []
    for k, blob in enumerate(models):
        m = S.ModelT.InitFromPackedBuf(blob, 0)
        g = m.subgraphs[0]
        t0, b0 = len(sg.tensors), len(out.buffers) - 1
        for t in g.tensors:
            t.name = f"c{k}_" + (t.name.decode() if isinstance(t.name, bytes) else t.name)
            t.buffer = t.buffer + b0 if t.buffer else 0
            sg.tensors.append(t)
        out.buffers += m.buffers[1:]
        codes = []
        for oc in m.operatorCodes:
            key = (oc.builtinCode, oc.customCode, oc.version)
            have = [(c.builtinCode, c.customCode, c.version) for c in out.operatorCodes]
            if key not in have:
                out.operatorCodes.append(oc)
                have.append(key)
            codes.append(have.index(key))
        for op in g.operators:
            op.opcodeIndex = codes[op.opcodeIndex]
            op.inputs = np.array([i + t0 if i >= 0 else i for i in op.inputs], np.int32)
            op.outputs = np.array([i + t0 for i in op.outputs], np.int32)
            sg.operators.append(op)
        ins += [i + t0 for i in g.inputs]
        outs += [i + t0 for i in g.outputs]
    sg.inputs, sg.outputs = np.array(ins, np.int32), np.array(outs, np.int32)
    out.subgraphs = [sg]
    b = flatbuffers.Builder(1024)
    b.Finish(out.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def run_batch(batch: Sequence[Case], tmp: Path) -> dict[str, Result]:
    """Every case of ``batch``: the ones TFLM runs compiled together as one model (merge);
    when aotc refuses that model, each case on its own (to tell which one it refuses)."""
    from aotc.errors import AotcError

    res: dict[str, Result] = {}
    todo = []
    for c in batch:
        model, xs = c.build()
        want = reference(model, xs)
        if isinstance(want, str):
            res[c.id] = Result("not-in-tflm", want)
        else:
            todo.append((c, model, xs, want))
    if len(todo) > 1:
        try:
            bundle = compile_case(merge([t[1] for t in todo]), tmp / "batch")
            got = run_bundle(bundle, [x for t in todo for x in t[2]])
        except AotcError:
            pass
        else:
            for c, _, _, want in todo:
                mine, got = got[:len(want)], got[len(want):]
                diff = compare(c, mine, want)
                res[c.id] = Result("fail", diff) if diff else Result("pass")
            return res
    for k, (c, model, xs, want) in enumerate(todo):
        try:
            got = run_bundle(compile_case(model, tmp / str(k)), xs)
        except AotcError as e:
            res[c.id] = Result("refused", _one_line(e))
            continue
        diff = compare(c, got, want)
        res[c.id] = Result("fail", diff) if diff else Result("pass")
    return res


def batches(all_cases: Sequence[Case], size: int = 8) -> dict[str, list[Case]]:
    """The cases in batches of at most ``size`` (in id order), named by their first case;
    cases expected to be refused are alone in theirs."""
    exp = expected()
    out: dict[str, list[Case]] = {}
    group: list[Case] = []

    def flush() -> None:
        if group:
            out[group[0].id] = list(group)
            group.clear()

    for c in all_cases:
        if exp.get(c.id, ("",))[0] == "refused":
            out[c.id] = [c]
            continue
        if len(group) == size:
            flush()
        group.append(c)
    flush()
    return out


def run_case(case: Case, tmp: Path) -> Result:
    from aotc.errors import AotcError

    model, xs = case.build()
    want = reference(model, xs)
    if isinstance(want, str):
        return Result("not-in-tflm", want)
    try:
        got = run_bundle(compile_case(model, tmp), xs)
    except AotcError as e:
        return Result("refused", _one_line(e))
    diff = compare(case, got, want)
    return Result("fail", diff) if diff else Result("pass")


# ------------------------------------------------------------------ expectations and table
def expected() -> dict[str, tuple[str, str]]:
    """case id -> (outcome, reason) for every case that does not pass."""
    out = {}
    for ln in EXPECTED.read_text().splitlines():
        if not ln.strip() or ln.startswith("#"):
            continue
        cid, outcome, reason = ln.split("\t", 2)
        out[cid] = (outcome, reason)
    return out


def table(all_cases: Sequence[Case], exp: dict[str, tuple[str, str]]) -> str:
    """The conformance table (markdown) from the case list and the expected outcomes."""
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for c in all_cases:
        o = exp.get(c.id, ("pass", ""))[0]
        counts.setdefault((c.builtin, c.type), dict.fromkeys(OUTCOMES, 0))[o] += 1
    types = ["float32", "int8", "int16", "int32", "int64", "bool"]
    rows = ["| builtin | " + " | ".join(types) + " |", "| --- |" + " --- |" * len(types)]
    for b in sorted({k[0] for k in counts}):
        cells = []
        for t in types:
            n = counts.get((b, t))
            if n is None:
                cells.append("")
                continue
            tflm = n["pass"] + n["refused"] + n["fail"]
            cell = f"{n['pass']}/{tflm}" if tflm else "-"
            if n["refused"]:
                cell += f" ({n['refused']} ref.)"
            if n["fail"]:
                cell += f" **{n['fail']} fail**"
            cells.append(cell)
        rows.append(f"| {b} | " + " | ".join(cells) + " |")
    tot = {o: sum(n[o] for n in counts.values()) for o in OUTCOMES}
    in_tflm = tot["pass"] + tot["refused"] + tot["fail"]
    pairs = [k for k, n in counts.items() if n["pass"] + n["refused"] + n["fail"]]
    supported = [k for k in pairs if counts[k]["pass"] and not counts[k]["fail"]]
    summary = (f"{tot['pass']} of {in_tflm} cases pass ({tot['refused']} refused, "
               f"{tot['fail']} fail; {tot['not-in-tflm']} more built but not in TFLM); "
               f"{len(supported)} builtins x types supported of TFLM's {len(pairs)}.")
    common = "m.tflite: 1 operator(s) cannot be converted (see `aotc ops` and docs/frontends.md): "
    listed = [f"- `{cid}`: {o}: {r.replace(common, '')}" for cid, (o, r) in sorted(exp.items())
              if o in ("refused", "fail")]
    return "\n".join([summary, "", *rows, "", "Cases that are refused or fail, with the reason:",
                      "", *listed]) + "\n"

