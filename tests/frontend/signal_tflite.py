"""TFLite models of TFLM's Signal operators (custom operators with flexbuffer options), their
configuration tables (a mel filter bank, a PCAN gain table) and audio-like input (tones plus
noise), and TFLM's outputs over consecutive calls: the references of test_tflite_signal.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from tflite_builder import Net


def pcm(n: int, seed: int = 0, rate: int = 16000, level: float = 0.3) -> np.ndarray:
    """``n`` int16 samples: two tones plus white noise, with a louder middle (a word)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / rate
    env = 0.2 + 0.8 * np.exp(-(((t - t[-1] / 2) / (t[-1] / 6 + 1e-9)) ** 2))
    x = level * env * (np.sin(2 * np.pi * 440 * t) + 0.5 * np.sin(2 * np.pi * 1870 * t + 1))
    x = x + 0.02 * rng.standard_normal(n)
    return np.clip(np.round(x * 32767), -32768, 32767).astype(np.int16)


def hann_q14(n: int) -> np.ndarray:
    """A Hann window in Q14 (TFLM's front ends use shift 14)."""
    w = 0.5 - 0.5 * np.cos(2 * np.pi * (np.arange(n) + 0.5) / n)
    return np.round(w * (1 << 14)).astype(np.int16)


def mel_config(n_channels: int, n_bins: int, lo: int = 2) -> dict[str, np.ndarray]:
    """FilterBank tables (int16): config channel i spans bins edge[i] .. edge[i + 1] with a
    rising weight (Q12) and its complement, as TFLM's filter bank generator lays them out."""
    mel = np.linspace(0, 2595 * np.log10(1 + 4000 / 700), n_channels + 2)
    hz = 700 * (10 ** (mel / 2595) - 1)
    edges = np.clip(np.round(hz / 8000 * (n_bins - 1)).astype(int), lo, n_bins - 1)
    edges = np.maximum.accumulate(edges + np.arange(n_channels + 2))  # strictly rising
    edges = np.minimum(edges, n_bins - 1)
    starts, wstarts, widths, weights = [], [], [], []
    for i in range(n_channels + 1):
        a, b = int(edges[i]), int(edges[i + 1])
        width = max(b - a, 1)
        starts.append(a)
        wstarts.append(len(weights))
        widths.append(width)
        weights += [int(round((k + 1) / (width + 1) * 4096)) for k in range(width)]
    w = np.array(weights, np.int16)
    return {"weights": w, "unweights": (4096 - w).astype(np.int16),
            "freq_starts": np.array(starts, np.int16),
            "weight_starts": np.array(wstarts, np.int16),
            "widths": np.array(widths, np.int16)}


def pcan_lut(strength: float = 0.95, offset: float = 80.0, gain_bits: int = 21,
             input_bits: int = 6) -> np.ndarray:
    """A WideDynamicFunction table (125 int16): gain (x + offset)^-strength per interval as a
    quadratic through its start, middle and end, like TFLM's PCAN table generator."""
    def gain(x: float) -> int:
        x = x / (1 << input_bits)
        return int(np.clip(round((x + offset) ** -strength * (1 << gain_bits)), -32768, 32767))

    lut = np.zeros(125, np.int64)
    lut[0], lut[1], lut[2] = gain(0), gain(1), gain(2)
    for interval in range(2, 32):
        x0 = 1 << (interval - 1)
        y0, y1, y2 = gain(x0), gain(x0 + (x0 >> 1)), gain(2 * x0)
        d1, d2 = y1 - y0, y2 - y0
        a1 = 4 * d1 - d2
        o = 4 * interval - 6
        lut[o], lut[o + 1], lut[o + 2] = y0, a1, d2 - a1
    return np.clip(lut, -32768, 32767).astype(np.int16)


def single(name: str, in_specs: Sequence[tuple[Sequence[int], Any]],
           out_specs: Sequence[tuple[Sequence[int], Any]], opts: dict[str, Any],
           consts: dict[int, np.ndarray] | None = None) -> bytes:
    """A model of one Signal operator: graph inputs (shape, dtype) in order, except the
    positions ``consts`` fills with constant tensors."""
    net = Net(False)
    ins = []
    for k, (shape, dt) in enumerate(in_specs):
        if consts and k in consts:
            ins.append(net.ints(consts[k], consts[k].dtype))
        else:
            ins.append(net.input(shape, dt))
    ys = net.custom_typed(name, ins, out_specs, opts)
    return net.build(ys)


def tflm_calls(model: bytes, calls: Sequence[Sequence[np.ndarray]], n_outputs: int = 1,
               reset_at: int | None = None) -> list[list[np.ndarray]]:
    """TFLM's outputs for consecutive calls of one interpreter (its state lives between
    them); ``reset_at``: its reset() before that call."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(model, arena_size=1 << 20)
    outs = []
    for k, xs in enumerate(calls):
        if k == reset_at:
            it.reset()
        for i, x in enumerate(xs):
            it.set_input(x, i)
        it.invoke()
        outs.append([it.get_output(i).copy() for i in range(n_outputs)])
    return outs


FRAME, HOP, FFT, CHANNELS = 480, 320, 512, 40


def front_end() -> bytes:
    """An audio front end of Signal operators, as TFLM's micro_speech feature generator
    chains them: 30 ms of int16 PCM -> Window (Hann, Q14) -> FftAutoScale -> Rfft (512) ->
    Energy -> FilterBank (40 mel channels) -> FilterBankSquareRoot (by the auto-scale shift)
    -> FilterBankSpectralSubtraction -> PCAN (its noise estimate) -> FilterBankLog: 40 int16
    features."""
    net = Net(False)
    x = net.input([FRAME], np.int16)
    w = net.ints(hann_q14(FRAME), np.int16)
    (xw,) = net.custom_typed("SignalWindow", [x, w], [([FRAME], np.int16)], {"shift": 14})
    xs, scale = net.custom_typed("SignalFftAutoScale", [xw],
                                 [([FRAME], np.int16), ([], np.int32)], {})
    (spec,) = net.custom_typed("SignalRfft", [xs], [([FFT + 2], np.int16)],
                               {"T": 7, "fft_length": FFT})
    bins = FFT // 2 + 1
    (energy,) = net.custom_typed("SignalEnergy", [spec], [([bins], np.uint32)],
                                 {"end_index": bins, "start_index": 4})
    cfg = mel_config(CHANNELS, bins, lo=4)
    tabs = [net.ints(cfg[k], np.int16) for k in ("weights", "unweights", "freq_starts",
                                                 "weight_starts", "widths")]
    (fb,) = net.custom_typed("SignalFilterBank", [energy, *tabs], [([CHANNELS], np.uint64)],
                             {"num_channels": CHANNELS})
    (root,) = net.custom_typed("SignalFilterBankSquareRoot", [fb, scale],
                               [([CHANNELS], np.uint32)], {})
    sub, noise = net.custom_typed(
        "SignalFilterBankSpectralSubtraction", [root],
        [([CHANNELS], np.uint32), ([CHANNELS], np.uint32)],
        {"alternate_one_minus_smoothing": 15565, "alternate_smoothing": 819,
         "clamping": False, "min_signal_remaining": 819, "num_channels": CHANNELS,
         "one_minus_smoothing": 15974, "smoothing": 410, "smoothing_bits": 10,
         "spectral_subtraction_bits": 14})
    lut = net.ints(pcan_lut(), np.int16)
    (gain,) = net.custom_typed("SignalPCAN", [sub, noise, lut], [([CHANNELS], np.uint32)],
                               {"snr_shift": 6})
    (feat,) = net.custom_typed("SignalFilterBankLog", [gain], [([CHANNELS], np.int16)],
                               {"input_correction_bits": 3, "output_scale": 1600})
    return net.build([feat])


def speech_frames(n: int, seed: int = 0) -> list[np.ndarray]:
    """``n`` overlapping 30 ms frames (20 ms hop) of tones plus noise."""
    x = pcm(HOP * (n - 1) + FRAME, seed)
    return [x[k * HOP:k * HOP + FRAME] for k in range(n)]
