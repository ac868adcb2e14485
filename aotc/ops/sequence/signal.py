"""Signal processing: DFT, STFT, the window generators and MelWeightMatrix.

DFT and STFT are direct O(n^2) sums with compile-time cos/sin tables of the transform length
(index ``k * n mod L``), which keeps the kernel small and exact in its twiddles; an FFT would
only pay off for lengths beyond what a microcontroller model transforms. The window generators
and MelWeightMatrix take only compile-time parameters, so constant folding evaluates them with
their ``reference`` and they never reach lowering.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.builder import BufRef
from aotc.loops.loop_ir import INDEX, Const
from aotc.ops import OpDef, register

INTS = ("int32", "int64")


def _scalar(v: Value | None) -> int | None:
    if v is None or v.const is None:
        return None
    return int(np.asarray(v.const).reshape(-1)[0])


def _out_dtype(node: Node, code: int) -> np.dtype:
    dt = dtypes.BY_ONNX.get(int(code))
    if dt is None or dt.name == "bool":
        raise AotcError(f"output_datatype={code} is not supported", node.name, node.op)
    return dt.np


def _twiddles(kb: Any, L: int, f32: dtypes.DType) -> tuple[BufRef, BufRef]:
    """cos(2 pi m / L) and sin(2 pi m / L) for m < L, rounded once from float64."""
    ang = 2.0 * np.pi * np.arange(L, dtype=np.float64) / L
    return kb.const("cos", np.cos(ang), f32), kb.const("sin", np.sin(ang), f32)


# ---------------------------------------------------------------------------------- windows
class _Window(OpDef):
    dtypes = INTS
    const_inputs = (0,)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        _out_dtype(node, node.attrs.get("output_datatype", 1))
        n = _scalar(ins[0])
        if n is not None and n < 0:
            raise AotcError(f"size={n} is negative", node.name, node.op)

    def _terms(self) -> tuple[float, ...]:
        raise NotImplementedError

    def reference(self, size: np.ndarray, *, output_datatype: int = 1, periodic: int = 1
                  ) -> np.ndarray:
        n = int(np.asarray(size).reshape(-1)[0])
        denom = n if periodic else n - 1
        k = np.arange(n, dtype=np.float64)
        w = np.zeros(n)
        with np.errstate(all="ignore"):
            for m, a in enumerate(self._terms()):
                w += a * np.cos(2.0 * np.pi * m * k / denom) * (-1) ** m
        dt = dtypes.BY_ONNX[int(output_datatype)].np
        return w.astype(dt)


@register
class HannWindow(_Window):
    name = "HannWindow"
    since = 17
    onnx_tests = ("test_hannwindow*",)

    def _terms(self) -> tuple[float, ...]:
        return (0.5, 0.5)


@register
class HammingWindow(_Window):
    name = "HammingWindow"
    since = 17
    onnx_tests = ("test_hammingwindow*",)

    def _terms(self) -> tuple[float, ...]:
        return (25.0 / 46.0, 21.0 / 46.0)


@register
class BlackmanWindow(_Window):
    name = "BlackmanWindow"
    since = 17
    onnx_tests = ("test_blackmanwindow*",)

    def _terms(self) -> tuple[float, ...]:
        return (0.42, 0.5, 0.08)


@register
class MelWeightMatrix(OpDef):
    name = "MelWeightMatrix"
    since = 17
    dtypes = ("int32", "int64", "float32")
    const_inputs = (0, 1, 2, 3, 4)
    onnx_tests = ("test_melweightmatrix",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        _out_dtype(node, node.attrs.get("output_datatype", 1))
        if len(ins) < 5 or any(v is None for v in ins[:5]):
            raise AotcError("all five inputs are required", node.name, node.op)
        nb, dl, sr = (_scalar(v) for v in ins[:3])
        if nb is not None and nb <= 0 or dl is not None and dl <= 0 or sr is not None and sr <= 0:
            raise AotcError("num_mel_bins, dft_length and sample_rate must be positive",
                            node.name, node.op)

    def reference(self, num_mel_bins: np.ndarray, dft_length: np.ndarray,
                  sample_rate: np.ndarray, lower_edge_hertz: np.ndarray,
                  upper_edge_hertz: np.ndarray, *, output_datatype: int = 1) -> np.ndarray:
        nb = int(np.asarray(num_mel_bins).reshape(-1)[0])
        dl = int(np.asarray(dft_length).reshape(-1)[0])
        sr = np.asarray(sample_rate).reshape(-1)[0]
        lo = float(np.asarray(lower_edge_hertz).reshape(-1)[0])
        hi = float(np.asarray(upper_edge_hertz).reshape(-1)[0])
        lo_mel = 2595 * np.log1p(lo / 700) / np.log(10)
        hi_mel = 2595 * np.log1p(hi / 700) / np.log(10)
        step = (hi_mel - lo_mel) / (nb + 2)
        bins = np.arange(nb + 2) * step + lo_mel
        bins = 700 * np.expm1(bins / 2595 * np.log(10))
        idx = (((dl + 1) * bins) // sr).astype(np.int64)
        out = np.zeros((dl // 2 + 1, nb))
        for i in range(nb):
            left, center, right = (int(v) for v in idx[i:i + 3])
            if center == left:
                out[center, i] = 1
            else:
                for j in range(left, center + 1):
                    out[j, i] = (j - left) / (center - left)
            for j in range(center, right):
                out[j, i] = (right - j) / (right - center)
        return out.astype(dtypes.BY_ONNX[int(output_datatype)].np)


# -------------------------------------------------------------------------------------- DFT
def _np_dft(x: np.ndarray, length: int | None, axis: int, inverse: int, onesided: int
            ) -> np.ndarray:
    axis = axis % x.ndim
    sig = x[..., 0] if x.shape[-1] == 1 else x[..., 0] + 1j * x[..., 1]
    if length is None:
        length = 2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis]
    if inverse and onesided:
        return np.fft.irfft(sig, n=length, axis=axis)[..., None].astype(x.dtype)
    y = np.fft.ifft(sig, n=length, axis=axis) if inverse else np.fft.fft(sig, n=length, axis=axis)
    if onesided and not inverse:
        y = np.take(y, np.arange(length // 2 + 1), axis=axis)
    return np.stack([y.real, y.imag], axis=-1).astype(x.dtype)


class _DFT(OpDef):
    const_inputs = (1, 2)

    def _axis(self, node: Node, ins: Sequence[Value | None]) -> int:
        raise NotImplementedError

    def _params(self, node: Node, ins: Sequence[Value | None]
                ) -> tuple[int, int, int, int, int, int, int, int]:
        """(outer, n, inner, channels, length, out_len, out_channels, axis)."""
        x = ins[0]
        assert x is not None
        shape = x.type.shape
        r = len(shape)
        if r < 2 or shape[-1] not in (1, 2):
            raise AotcError(f"input shape {shape} must end in 1 (real) or 2 (complex)",
                            node.name, node.op)
        axis = self._axis(node, ins)
        if not (-r <= axis <= -2 or 0 <= axis <= r - 2):
            raise AotcError(f"axis={axis} is out of range for rank {r}", node.name, node.op)
        axis %= r
        inverse = int(node.attrs.get("inverse", 0) or 0)
        onesided = int(node.attrs.get("onesided", 0) or 0)
        n = shape[axis]
        dl = ins[1] if len(ins) > 1 else None
        length = _scalar(dl)
        if dl is not None and length is None:
            raise AotcError("dft_length must be a compile-time constant", node.name, node.op)
        if length is None:
            length = 2 * (n - 1) if inverse and onesided else n
        if length <= 0:
            raise AotcError(f"dft_length={length} must be positive", node.name, node.op)
        if onesided and not inverse and shape[-1] != 1:
            raise AotcError("onesided=1 forward DFT needs a real input", node.name, node.op)
        if onesided and inverse and shape[-1] != 2:
            raise AotcError("onesided=1 inverse DFT needs a complex input", node.name, node.op)
        out_len = length // 2 + 1 if onesided and not inverse else length
        out_c = 1 if onesided and inverse else 2
        return (math.prod(shape[:axis]), n, math.prod(shape[axis + 1:-1]), shape[-1], length,
                out_len, out_c, axis)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        self._params(node, ins)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        *_, out_len, out_c, axis = self._params(node, ins)
        shape = list(x.type.shape)
        shape[axis], shape[-1] = out_len, out_c
        return [TensorType(tuple(shape), x.type.dtype)]

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        return node.with_(inputs=node.inputs[:1],
                          attrs={**node.attrs, "_p": self._params(node, ins)})

    def lower(self, node: Node, kb: Any) -> None:
        X: BufRef = kb.inputs[0]
        f32 = X.dtype
        outer, n, inner, ch, L, m, out_c, _ = node.attrs["_p"]
        inverse = int(node.attrs.get("inverse", 0) or 0)
        cos_t, sin_t = _twiddles(kb, L, f32)
        xin = BufRef(X.buf, (outer, n, inner, ch))
        y = BufRef(kb.outputs[0].buf, (outer, m, inner, out_c))
        zero = Const(0.0, f32)
        with kb.loops((outer, m, inner), ("o", "k", "q")) as (o, k, q):
            re = kb.local(zero, "re", f32)
            if out_c == 1:
                # IRFFT: the one-sided bins stand for their conjugate pairs too (weight 2),
                # except DC and the Nyquist bin of an even length (weight 1, imaginary part
                # dropped since its sine is 0).
                half = L // 2 + 1
                wgt = np.full(half, 2.0 / L)
                wgt[0] = 1.0 / L
                if L % 2 == 0:
                    wgt[-1] = 1.0 / L
                wt = kb.const("wgt", wgt, f32)
                with kb.loop(min(n, half), "n") as nn:
                    w = kb.local((k * nn) % L, "w", INDEX)
                    term = xin[o, nn, q, 0] * cos_t[[w]] - xin[o, nn, q, 1] * sin_t[[w]]
                    kb.assign(re, re + wt[[nn]] * term)
                kb.store_output([], re, flat=y.index([o, k, q, 0]))
            else:
                im = kb.local(zero, "im", f32)
                with kb.loop(min(n, L), "n") as nn:
                    w = kb.local((k * nn) % L, "w", INDEX)
                    xr = xin[o, nn, q, 0]
                    c, s = cos_t[[w]], sin_t[[w]]
                    # forward: e^{-i theta}; inverse: e^{+i theta}, then scaled by 1/L
                    if ch == 2:
                        xi = xin[o, nn, q, 1]
                        if inverse:
                            kb.assign(re, re + (xr * c - xi * s))
                            kb.assign(im, im + (xi * c + xr * s))
                        else:
                            kb.assign(re, re + (xr * c + xi * s))
                            kb.assign(im, im + (xi * c - xr * s))
                    else:
                        kb.assign(re, re + xr * c)
                        kb.assign(im, (im + xr * s) if inverse else (im - xr * s))
                sc = 1.0 / L
                kb.store_output([], re * sc if inverse else re, flat=y.index([o, k, q, 0]))
                kb.store_output([], im * sc if inverse else im, flat=y.index([o, k, q, 1]))


@register
class DFT17(_DFT):
    name = "DFT"
    since = 17
    onnx_tests = ("test_dft*",)

    def _axis(self, node: Node, ins: Sequence[Value | None]) -> int:
        return int(node.attrs.get("axis", 1))

    def reference(self, input: np.ndarray, dft_length: np.ndarray | None = None, *,  # noqa: A002
                  axis: int = 1, inverse: int = 0, onesided: int = 0) -> np.ndarray:
        n = None if dft_length is None else int(np.asarray(dft_length).reshape(-1)[0])
        return _np_dft(input, n, axis, inverse, onesided)


@register
class DFT20(_DFT):
    name = "DFT"
    since = 20
    onnx_tests = ("test_dft*",)

    def _axis(self, node: Node, ins: Sequence[Value | None]) -> int:
        a = ins[2] if len(ins) > 2 else None
        if a is not None and a.const is None:
            raise AotcError("axis must be a compile-time constant", node.name, node.op)
        v = _scalar(a)
        return -2 if v is None else v

    def reference(self, input: np.ndarray, dft_length: np.ndarray | None = None,  # noqa: A002
                  axis: np.ndarray | None = None, *, inverse: int = 0, onesided: int = 0
                  ) -> np.ndarray:
        n = None if dft_length is None else int(np.asarray(dft_length).reshape(-1)[0])
        ax = -2 if axis is None else int(np.asarray(axis).reshape(-1)[0])
        return _np_dft(input, n, ax, inverse, onesided)


# ------------------------------------------------------------------------------------- STFT
@register
class STFT(OpDef):
    name = "STFT"
    since = 17
    const_inputs = (1, 3)
    dtypes = ("float32", "int32", "int64")
    onnx_tests = ("test_stft*",)

    def _params(self, node: Node, ins: Sequence[Value | None]
                ) -> tuple[int, int, int, int, int, int, int]:
        """(batch, signal_length, channels, frame_step, frame_length, frames, bins)."""
        x = ins[0]
        assert x is not None
        if x.type.dtype.name != "float32":
            raise AotcError(f"signal has dtype {x.type.dtype.name}; supported: float32",
                            node.name, node.op)
        shape = x.type.shape
        if len(shape) != 3 or shape[-1] not in (1, 2):
            raise AotcError(f"signal shape {shape} must be [batch, length, 1 or 2]",
                            node.name, node.op)
        step = _scalar(ins[1])
        if step is None or step <= 0:
            raise AotcError("frame_step must be a positive compile-time constant",
                            node.name, node.op)
        win = ins[2] if len(ins) > 2 else None
        fl = _scalar(ins[3] if len(ins) > 3 else None)
        if win is not None:
            if len(win.type.shape) != 1 or win.type.dtype.name != "float32":
                raise AotcError("window must be a 1-D float32 tensor", node.name, node.op)
            if fl is not None and fl != win.type.shape[0]:
                raise AotcError(f"frame_length={fl} differs from the window length "
                                f"{win.type.shape[0]}", node.name, node.op)
            fl = win.type.shape[0]
        if fl is None:
            fl = shape[1]
        if fl <= 0 or fl > shape[1]:
            raise AotcError(f"frame_length={fl} must be in 1..{shape[1]}", node.name, node.op)
        onesided = int(node.attrs.get("onesided", 1))
        if onesided and shape[-1] == 2:
            raise AotcError("onesided=1 needs a real signal", node.name, node.op)
        frames = (shape[1] - fl) // step + 1
        bins = fl // 2 + 1 if onesided else fl
        return shape[0], shape[1], shape[2], step, fl, frames, bins

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        self._params(node, ins)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        b, _, _, _, _, frames, bins = self._params(node, ins)
        x = ins[0]
        assert x is not None
        return [TensorType((b, frames, bins, 2), x.type.dtype)]

    def reference(self, signal: np.ndarray, frame_step: np.ndarray,
                  window: np.ndarray | None = None, frame_length: np.ndarray | None = None, *,
                  onesided: int = 1) -> np.ndarray:
        step = int(np.asarray(frame_step).reshape(-1)[0])
        if frame_length is not None:
            fl = int(np.asarray(frame_length).reshape(-1)[0])
        else:
            fl = window.shape[0] if window is not None else signal.shape[1]
        w = np.ones(fl) if window is None else window.astype(np.float64)
        x = signal[..., 0] if signal.shape[-1] == 1 else signal[..., 0] + 1j * signal[..., 1]
        frames = (signal.shape[1] - fl) // step + 1
        fr = np.stack([x[:, f * step:f * step + fl] * w for f in range(frames)], axis=1)
        y = np.fft.fft(fr, axis=-1)
        if onesided:
            y = y[..., :fl // 2 + 1]
        return np.stack([y.real, y.imag], axis=-1).astype(signal.dtype)

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        win = node.inputs[2] if len(node.inputs) > 2 else ""
        return node.with_(inputs=(node.inputs[0], "", win),
                          attrs={**node.attrs, "_p": self._params(node, ins)})

    def lower(self, node: Node, kb: Any) -> None:
        X: BufRef = kb.inputs[0]
        win: BufRef | None = kb.inputs[2] if len(kb.inputs) > 2 else None
        f32 = X.dtype
        b, n, ch, step, L, frames, bins = node.attrs["_p"]
        cos_t, sin_t = _twiddles(kb, L, f32)
        y = BufRef(kb.outputs[0].buf, (b, frames, bins, 2))
        zero = Const(0.0, f32)
        with kb.loops((b, frames, bins), ("b", "f", "k")) as (bb, f, k):
            re = kb.local(zero, "re", f32)
            im = kb.local(zero, "im", f32)
            with kb.loop(L, "n") as nn:
                w = kb.local((k * nn) % L, "w", INDEX)
                c, s = cos_t[[w]], sin_t[[w]]
                xr = kb.local(X[bb, f * step + nn, 0], "xr", f32)
                if win is not None:
                    kb.assign(xr, xr * win[[nn]])
                if ch == 2:
                    xi = kb.local(X[bb, f * step + nn, 1], "xi", f32)
                    if win is not None:
                        kb.assign(xi, xi * win[[nn]])
                    kb.assign(re, re + (xr * c + xi * s))
                    kb.assign(im, im + (xi * c - xr * s))
                else:
                    kb.assign(re, re + xr * c)
                    kb.assign(im, im - xr * s)
            kb.store_output([], re, flat=y.index([bb, f, k, 0]))
            kb.store_output([], im, flat=y.index([bb, f, k, 1]))
