"""TFLite Micro's Signal library custom operators (custom_code "Signal<Op>", parameters in a
flexbuffer map, read by key) -> aotc's Signal ops (aotc/ops/sequence/audio_frontend.py,
audio_fft.py, audio_stream.py).

What TFLM keeps between calls (FilterBankSpectralSubtraction's noise estimate, the circular
buffers of Delay, Framer, Stacker and OverlapAdd) becomes slots of the caller's state buffer
(variables.py's mechanism: a graph input with its bytes after reset, and the next value as a
graph output), which each op writes in place.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.frontend.tflite.variables import Variable, _state

Builder = Any


def options(op: Any) -> dict[str, Any]:
    """The custom operator's flexbuffer map."""
    from flatbuffers import flexbuffers

    if op.CustomOptionsLength() == 0:
        return {}
    raw = op.CustomOptionsAsNumpy().tobytes()
    try:
        m = flexbuffers.Loads(raw)
    except Exception as e:
        raise AotcError(f"unreadable flexbuffer options ({type(e).__name__})") from None
    if not isinstance(m, dict):
        raise AotcError("the flexbuffer options are not a map")
    return m


def _int(opts: dict[str, Any], key: str, default: int | None = None) -> int:
    v = opts.get(key, default)
    if v is None:
        raise AotcError(f"the options have no {key!r}")
    return int(v)


def _ins(op: Any) -> list[int]:
    return [int(op.Inputs(i)) for i in range(op.InputsLength())]


def _outs(op: Any) -> list[int]:
    return [int(op.Outputs(i)) for i in range(op.OutputsLength())]


def _const(b: Builder, t: int, what: str) -> str:
    c = b.const(t)
    if c is None:
        raise AotcError(f"the {what} ({b.tname(t)!r}) must be a constant")
    return str(b.init(c, what.replace(" ", "_")))


def _define(b: Builder, t: int, value: str, shape: tuple[int, ...]) -> None:
    """TFLite tensor ``t`` is ``value`` (of ``shape``), reshaped to its declared shape."""
    if tuple(shape) != b.shape(t):
        value = b.add("Reshape", [value, b.init(np.array(b.shape(t), np.int64), "shape")],
                      "shape")[0]
    b.define(t, value)


def state(b: Builder, suffix: str, init: np.ndarray) -> Variable:
    """A new slot of the caller's state buffer, holding ``init`` after reset."""
    name = b._claim(f"{b.tname(b.cur_out)}/{suffix}")
    var = Variable(f"signal:{name}", name, name, init.dtype, tuple(init.shape), init.tobytes())
    _state(b)["vars"][var.key] = var
    return var


def _op(b: Builder, name: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> list[str]:
    return b.add(name, inputs, name.removeprefix("Signal").lower(), n_out=n_out, domain="aotc",
                 **attrs)


# ------------------------------------------------------------------------- stateless ops
def _one_d(b: Builder, x: int, op_name: str) -> None:
    """TFLM's kernel reads dims[0] elements: only a 1-D input means the whole tensor."""
    if len(b.shape(x)) != 1:
        raise AotcError(f"{op_name} takes a 1-D input (TFLM's kernel reads its first "
                        f"dimension only), got {list(b.shape(x))}")


def window(b: Builder, op: Any) -> None:
    x, w = _ins(op)[:2]
    y = _op(b, "SignalWindow", [b.get(x), _const(b, w, "window")],
            shift=_int(options(op), "shift"))[0]
    _define(b, _outs(op)[0], y, b.shape(x))


def fft_auto_scale(b: Builder, op: Any) -> None:
    x = _ins(op)[0]
    _one_d(b, x, "FftAutoScale")
    ys = _op(b, "SignalFftAutoScale", [b.get(x)], n_out=2)
    outs = _outs(op)
    _define(b, outs[0], ys[0], b.shape(x))
    _define(b, outs[1], ys[1], ())


def energy(b: Builder, op: Any) -> None:
    x = _ins(op)[0]
    o = options(op)
    _one_d(b, x, "Energy")
    y = _op(b, "SignalEnergy", [b.get(x)], start_index=_int(o, "start_index"),
            end_index=_int(o, "end_index"))[0]
    _define(b, _outs(op)[0], y, (b.shape(x)[0] // 2,))


def filter_bank(b: Builder, op: Any) -> None:
    ins = _ins(op)
    if len(ins) != 6:
        raise AotcError(f"SignalFilterBank takes 6 inputs, got {len(ins)}")
    names = ("weights", "unweights", "channel frequency starts", "channel weight starts",
             "channel widths")
    n = _int(options(op), "num_channels")
    y = _op(b, "SignalFilterBank", [b.get(ins[0]), *(_const(b, t, w) for t, w in
                                                      zip(ins[1:], names))],
            num_channels=n)[0]
    _define(b, _outs(op)[0], y, (n,))


def filter_bank_square_root(b: Builder, op: Any) -> None:
    x, s = _ins(op)[:2]
    _one_d(b, x, "FilterBankSquareRoot")
    y = _op(b, "SignalFilterBankSquareRoot", [b.get(x), b.get(s)])[0]
    _define(b, _outs(op)[0], y, b.shape(x))


def filter_bank_log(b: Builder, op: Any) -> None:
    x = _ins(op)[0]
    _one_d(b, x, "FilterBankLog")
    o = options(op)
    y = _op(b, "SignalFilterBankLog", [b.get(x)],
            input_correction_bits=_int(o, "input_correction_bits"),
            output_scale=_int(o, "output_scale"))[0]
    _define(b, _outs(op)[0], y, b.shape(x))


def pcan(b: Builder, op: Any) -> None:
    x, noise, lut = _ins(op)[:3]
    _one_d(b, x, "PCAN")
    y = _op(b, "SignalPCAN", [b.get(x), b.get(noise), _const(b, lut, "gain lut")],
            snr_shift=_int(options(op), "snr_shift"))[0]
    _define(b, _outs(op)[0], y, b.shape(x))


# -------------------------------------------------------------------------- stateful ops
def spectral_subtraction(b: Builder, op: Any) -> None:
    x = _ins(op)[0]
    o = options(op)
    n = _int(o, "num_channels")
    if int(np.prod(b.shape(x))) != n:
        raise AotcError(f"num_channels={n} but the input has shape {list(b.shape(x))}")
    keys = ("smoothing", "one_minus_smoothing", "alternate_smoothing",
            "alternate_one_minus_smoothing", "smoothing_bits", "min_signal_remaining",
            "spectral_subtraction_bits")
    attrs = {k: _int(o, k) for k in keys}
    attrs["clamping"] = int(bool(o.get("clamping", False)))
    var = state(b, "noise_estimate", np.zeros(b.shape(x), np.uint32))
    ys = _op(b, "SignalFilterBankSpectralSubtraction", [b.get(x), var.current], n_out=2,
             **attrs)
    outs = _outs(op)
    _define(b, outs[0], ys[0], b.shape(x))
    if len(outs) > 1:  # TFLM's copy of the estimate (a graph output may be renamed)
        _define(b, outs[1], b.add("Identity", [ys[1]], "noise_estimate")[0], b.shape(x))
    var.current = ys[1]


def _rows(b: Builder, x: int) -> tuple[int, int]:
    """(the rows of the last axis, its length) of tensor ``x``."""
    shape = b.shape(x)
    if not shape:
        raise AotcError(f"{b.tname(x)!r} is a scalar; a signal has a last axis")
    return int(np.prod(shape[:-1], dtype=np.int64)), int(shape[-1])


def delay(b: Builder, op: Any) -> None:
    x = _ins(op)[0]
    d = _int(options(op), "delay_length")
    if d < 0:
        raise AotcError(f"delay_length={d} is negative")
    if d == 0:
        _define(b, _outs(op)[0], b.add("Identity", [b.get(x)], "delay")[0], b.shape(x))
        return
    rows, _ = _rows(b, x)
    var = state(b, "delay", np.zeros((rows, d), np.int16))
    ys = _op(b, "SignalDelay", [b.get(x), var.current], n_out=2)
    _define(b, _outs(op)[0], ys[0], b.shape(x))
    var.current = ys[1]


def overlap_add(b: Builder, op: Any) -> None:
    x = _ins(op)[0]
    step = _int(options(op), "frame_step")
    shape = b.shape(x)
    if len(shape) < 2 or not 0 < step <= shape[-1]:
        raise AotcError(f"needs frames [..., n, size] and 0 < frame_step={step} <= size, got "
                        f"{list(shape)}")
    rows = int(np.prod(shape[:-2], dtype=np.int64))
    var = state(b, "overlap", np.zeros((rows, shape[-1]), b.dtype(x)))
    ys = _op(b, "SignalOverlapAdd", [b.get(x), var.current], n_out=2, frame_step=step)
    _define(b, _outs(op)[0], ys[0], (*shape[:-2], shape[-2] * step))
    var.current = ys[1]


def framer(b: Builder, op: Any) -> None:
    x = _ins(op)[0]
    o = options(op)
    size, step = _int(o, "frame_size"), _int(o, "frame_step")
    rows, width = _rows(b, x)
    if size < 1 or step < 1 or width % step:
        raise AotcError(f"frame_size={size}, frame_step={step}: both must be positive and the "
                        f"input's last axis ({width}) a multiple of frame_step")
    cap = -(-size // step) * step
    prefill = size - step if o.get("prefill", False) and size > step else 0
    buf = state(b, "frames", np.zeros((rows, cap), np.int16))
    count = state(b, "pending", np.array([prefill], np.int32))
    ys = _op(b, "SignalFramer", [b.get(x), buf.current, count.current], n_out=4,
             frame_size=size, frame_step=step)
    outs = _outs(op)
    _define(b, outs[0], ys[0], (*b.shape(x)[:-1], width // step, size))
    if len(outs) > 1:
        _define(b, outs[1], ys[1], ())
    buf.current, count.current = ys[2], ys[3]


def stacker(b: Builder, op: Any) -> None:
    x = _ins(op)[0]
    o = options(op)
    c, left = _int(o, "num_channels"), _int(o, "stacker_left_context")
    right, step = _int(o, "stacker_right_context"), _int(o, "stacker_step")
    n = left + right + 1
    if c != int(np.prod(b.shape(x), dtype=np.int64)) or min(left, right) < 0 or \
            not 0 < step <= n:
        raise AotcError(f"num_channels={c} must be the input's size and 0 < stacker_step="
                        f"{step} <= left + right + 1 = {n} (TFLM discards no more than it holds)")
    buf = state(b, "stack", np.zeros(c * n, np.int16))
    meta = state(b, "stack_count", np.zeros(2, np.int32))
    ys = _op(b, "SignalStacker", [b.get(x), buf.current, meta.current], n_out=4,
             num_channels=c, stacker_left_context=left, stacker_right_context=right,
             stacker_step=step)
    outs = _outs(op)
    _define(b, outs[0], ys[0], (c * n,))
    if len(outs) > 1:
        _define(b, outs[1], ys[1], ())
    buf.current, meta.current = ys[2], ys[3]


_TFLITE_TYPES = {0: np.float32, 2: np.int32, 7: np.int16}  # options "T": TFLite type codes


def _fft(b: Builder, op: Any, name: str, out_len: int) -> None:
    x = _ins(op)[0]
    o = options(op)
    n = _int(o, "fft_length")
    t = _TFLITE_TYPES.get(_int(o, "T", 7))
    if t is None or np.dtype(t) != b.dtype(x):
        raise AotcError(f"T={o.get('T')} does not name the input's type {b.dtype(x).name}")
    y = _op(b, name, [b.get(x)], fft_length=n)[0]
    _define(b, _outs(op)[0], y, (*b.shape(x)[:-1], out_len if out_len else n))


def rfft(b: Builder, op: Any) -> None:
    _fft(b, op, "SignalRfft", _int(options(op), "fft_length") + 2)


def irfft(b: Builder, op: Any) -> None:
    _fft(b, op, "SignalIrfft", 0)


CONVERTERS = {
    "CUSTOM:SignalWindow": window,
    "CUSTOM:SignalFftAutoScale": fft_auto_scale,
    "CUSTOM:SignalEnergy": energy,
    "CUSTOM:SignalFilterBank": filter_bank,
    "CUSTOM:SignalFilterBankSquareRoot": filter_bank_square_root,
    "CUSTOM:SignalFilterBankLog": filter_bank_log,
    "CUSTOM:SignalPCAN": pcan,
    "CUSTOM:SignalFilterBankSpectralSubtraction": spectral_subtraction,
    "CUSTOM:SignalDelay": delay,
    "CUSTOM:SignalOverlapAdd": overlap_add,
    "CUSTOM:SignalFramer": framer,
    "CUSTOM:SignalStacker": stacker,
    "CUSTOM:SignalRfft": rfft,
    "CUSTOM:SignalIrfft": irfft,
}
# The type of each one's data operand (input 0).
TYPES: dict[str, tuple[str, ...]] = {
    "CUSTOM:SignalWindow": ("int16",),
    "CUSTOM:SignalFftAutoScale": ("int16",),
    "CUSTOM:SignalEnergy": ("int16",),
    "CUSTOM:SignalFilterBank": ("uint32",),
    "CUSTOM:SignalFilterBankSquareRoot": ("uint64",),
    "CUSTOM:SignalFilterBankLog": ("uint32",),
    "CUSTOM:SignalPCAN": ("uint32",),
    "CUSTOM:SignalFilterBankSpectralSubtraction": ("uint32",),
    "CUSTOM:SignalDelay": ("int16",),
    "CUSTOM:SignalOverlapAdd": ("int16", "float32"),
    "CUSTOM:SignalFramer": ("int16",),
    "CUSTOM:SignalStacker": ("int16",),
    "CUSTOM:SignalRfft": ("int16", "int32", "float32"),
    "CUSTOM:SignalIrfft": ("int16", "int32", "float32"),
}
# The aotc op each one becomes (the TFLite column of `aotc ops`).
ONNX_OPS = {k: ("aotc." + k.removeprefix("CUSTOM:"),) for k in CONVERTERS}
