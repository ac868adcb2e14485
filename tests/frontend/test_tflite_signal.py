"""TFLM's Signal operators (custom operators "Signal<Op>") compiled by aotc, bit-exact with
TFLite Micro's own kernels (tflite_micro's Python interpreter) on audio-like data (tones plus
noise, signal_tflite.py): every output element equal, no tolerance, over several calls; the
stateful operators over 24 consecutive calls and again after reset.

Energy writes only bins start_index .. end_index - 1 in TFLM (the others keep whatever the
arena held): only those are compared.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from signal_tflite import (
    CHANNELS,
    front_end,
    hann_q14,
    mel_config,
    pcan_lut,
    pcm,
    single,
    speech_frames,
    tflm_calls,
)

import aotc
from aotc.errors import AotcError

N_CALLS = 24
U32, U64, I16, I32 = np.uint32, np.uint64, np.int16, np.int32


def _compile(tmp_path: Path, model: bytes, **kw: object) -> aotc.Bundle:
    src = tmp_path / "model.tflite"
    src.write_bytes(model)
    return aotc.compile(src, tmp_path / "bundle", name="m", **kw)


def _run(b: aotc.Bundle, calls: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    r = b.load()
    outs = []
    for xs in calls:
        res = r.run({f"input{k}": x for k, x in enumerate(xs)})
        outs.append(list(res.values()))
    return outs


def _same(ours: list[list[np.ndarray]], ref: list[list[np.ndarray]],
          pick: slice = slice(None)) -> None:
    for k, (o, e) in enumerate(zip(ours, ref)):
        for j, (a, b) in enumerate(zip(o, e)):
            a = np.asarray(a).reshape(b.shape)
            assert a.dtype == b.dtype, f"call {k} output {j}: {a.dtype} != TFLM {b.dtype}"
            assert np.array_equal(a[pick] if j == 0 else a, b[pick] if j == 0 else b), \
                f"call {k} output {j}: {a} != TFLM {b}"


def _frames(n: int, size: int, seed: int = 0) -> list[np.ndarray]:
    x = pcm(n * size, seed)
    return [x[k * size:(k + 1) * size] for k in range(n)]


def _spectra(n: int, bins: int, seed: int = 0) -> list[np.ndarray]:
    """Complex int16 spectra (interleaved) with the magnitudes an FFT of audio has, and the
    extremes (-32768) that wrap in TFLM's arithmetic."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        mag = 3000 * np.exp(-np.arange(bins) / bins * 4)[:, None]
        z = np.round(rng.standard_normal((bins, 2)) * mag).clip(-32768, 32767).astype(I16)
        z[0] = (-32768, -32768)
        out.append(z.reshape(-1))
    return out


def _energies(n: int, bins: int, seed: int = 0, dtype: type = U32) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    hi = (1 << 31) if dtype == U32 else (1 << 40)
    return [(rng.integers(0, hi, bins, dtype=np.int64) >> rng.integers(0, 30, bins))
            .astype(dtype) for _ in range(n)]


def test_window(tmp_path: Path) -> None:
    w = hann_q14(64)
    model = single("SignalWindow", [((2, 64), I16), ((64,), I16)], [((2, 64), I16)],
                   {"shift": 14}, consts={1: w})
    xs = [[np.stack([f, -f]).astype(I16)] for f in _frames(6, 64)]
    xs[0][0][0, :3] = (-32768, 32767, -32768)
    ref = tflm_calls(model, xs)
    _same(_run(_compile(tmp_path, model), xs), ref)


def test_fft_auto_scale(tmp_path: Path) -> None:
    model = single("SignalFftAutoScale", [((64,), I16)], [((64,), I16), ((), I32)], {})
    xs = [[f // (1 << k)] for k, f in enumerate(_frames(8, 64))]
    xs.append([np.zeros(64, I16)])
    xs.append([np.full(64, -32768, I16)])
    ref = tflm_calls(model, xs, 2)
    assert len({int(r[1]) for r in ref}) > 3, "the shifts differ between frames"
    _same(_run(_compile(tmp_path, model), xs), ref)


def test_energy(tmp_path: Path) -> None:
    bins = 33
    model = single("SignalEnergy", [((2 * bins,), I16)], [((bins,), U32)],
                   {"end_index": 30, "start_index": 2})
    xs = [[s] for s in _spectra(5, bins)]
    ref = tflm_calls(model, xs)
    _same(_run(_compile(tmp_path, model), xs), ref, slice(2, 30))


def test_filter_bank(tmp_path: Path) -> None:
    bins, ch = 129, 16
    cfg = mel_config(ch, bins)
    tabs = [cfg[k] for k in ("weights", "unweights", "freq_starts", "weight_starts", "widths")]
    model = single("SignalFilterBank", [((bins,), U32)] + [(t.shape, I16) for t in tabs],
                   [((ch,), U64)], {"num_channels": ch},
                   consts={k + 1: t for k, t in enumerate(tabs)})
    xs = [[e] for e in _energies(5, bins)]
    ref = tflm_calls(model, xs)
    _same(_run(_compile(tmp_path, model), xs), ref)


def test_filter_bank_square_root(tmp_path: Path) -> None:
    ch = 40
    model = single("SignalFilterBankSquareRoot", [((ch,), U64), ((), I32)], [((ch,), U32)], {})
    rng = np.random.default_rng(1)
    xs = []
    for k, e in enumerate(_energies(6, ch, dtype=U64)):
        e[:4] = (0, 1, (1 << 32) - 1, (1 << 64) - 1)
        e[4:8] = rng.integers(0, 1 << 62, 4, dtype=np.int64).astype(U64)
        xs.append([e, np.array(k % 4, I32)])
    ref = tflm_calls(model, xs)
    _same(_run(_compile(tmp_path, model), xs), ref)


@pytest.mark.parametrize("corr,scale", [(3, 1600), (0, 1 << 6)])
def test_filter_bank_log(tmp_path: Path, corr: int, scale: int) -> None:
    ch = 40
    model = single("SignalFilterBankLog", [((ch,), U32)], [((ch,), I16)],
                   {"input_correction_bits": corr, "output_scale": scale})
    xs = [[e] for e in _energies(5, ch)]
    xs[0][0][:4] = (0, 1, 2, (1 << 32) - 1)
    ref = tflm_calls(model, xs)
    _same(_run(_compile(tmp_path, model), xs), ref)


def test_pcan(tmp_path: Path) -> None:
    ch = 40
    model = single("SignalPCAN", [((ch,), U32), ((ch,), U32), ((125,), I16)], [((ch,), U32)],
                   {"snr_shift": 6}, consts={2: pcan_lut()})
    rng = np.random.default_rng(2)
    xs = []
    for e in _energies(5, ch):
        noise = (rng.integers(0, 1 << 20, ch) >> rng.integers(0, 20, ch)).astype(U32)
        noise[:3] = (0, 1, 2)
        xs.append([(e >> 12).astype(U32), noise])
    ref = tflm_calls(model, xs)
    _same(_run(_compile(tmp_path, model), xs), ref)


SPECTRAL = {"alternate_one_minus_smoothing": 15565, "alternate_smoothing": 819,
            "clamping": False, "min_signal_remaining": 1638, "num_channels": 40,
            "one_minus_smoothing": 15974, "smoothing": 410, "smoothing_bits": 10,
            "spectral_subtraction_bits": 14}


@pytest.mark.parametrize("clamping", [False, True])
def test_spectral_subtraction_state(tmp_path: Path, clamping: bool) -> None:
    """The noise estimate lives between calls: 24 calls, then reset and 3 more."""
    ch = 40
    opts = dict(SPECTRAL, clamping=clamping)
    model = single("SignalFilterBankSpectralSubtraction", [((ch,), U32)],
                   [((ch,), U32), ((ch,), U32)], opts)
    es = _energies(N_CALLS, ch, seed=3)
    for k in range(8, 12):  # a quiet stretch: the estimate exceeds the signal
        es[k] = (es[k] >> 12).astype(U32)
    xs = [[(e >> 8).astype(U32)] for e in es]
    ref = tflm_calls(model, xs + xs[:3], 2, reset_at=N_CALLS)
    b = _compile(tmp_path, model)
    assert b.compilation.state_bytes == ch * 4
    r = b.load()
    ours = [list(r.run({"input0": x[0]}).values()) for x in xs]
    r.reset()
    ours += [list(r.run({"input0": x[0]}).values()) for x in xs[:3]]
    assert not all(np.array_equal(ref[0][1], e[1]) for e in ref[1:]), "no state"
    _same(ours, ref)


TFL_T = {I16: 7, I32: 2, np.float32: 0}


def _scaled(frames: list[np.ndarray], dtype: type) -> list[np.ndarray]:
    if dtype == I16:
        return frames
    if dtype == I32:
        return [(f.astype(np.int64) << 15).astype(I32) for f in frames]
    return [(f / 32768).astype(np.float32) for f in frames]


def _fft_same(ours: list[list[np.ndarray]], ref: list[list[np.ndarray]]) -> None:
    """Bit-exact for every type: float32 too (the same float operations in the same order,
    no contraction into fused multiply-adds on the host)."""
    for k, (o, e) in enumerate(zip(ours, ref)):
        a, want = np.asarray(o[0]).reshape(e[0].shape), e[0]
        assert a.dtype == want.dtype
        assert np.array_equal(a, want), f"call {k}: differs at {np.flatnonzero(a != want)[:8]}"


@pytest.mark.parametrize("dtype", [I16, I32, np.float32], ids=["int16", "int32", "float32"])
@pytest.mark.parametrize("n,width", [(64, 64), (512, 480), (32, 20)])
def test_rfft(tmp_path: Path, dtype: type, n: int, width: int) -> None:
    model = single("SignalRfft", [((2, width), dtype)], [((2, n + 2), dtype)],
                   {"T": TFL_T[dtype], "fft_length": n})
    frames = _scaled(_frames(8, 2 * width), dtype)
    xs = [[f.reshape(2, width)] for f in frames]
    xs[0][0][0, :4] = np.iinfo(dtype).min if dtype != np.float32 else -1.0
    ref = tflm_calls(model, xs)
    _fft_same(_run(_compile(tmp_path, model), xs), ref)


@pytest.mark.parametrize("dtype", [I16, I32, np.float32], ids=["int16", "int32", "float32"])
@pytest.mark.parametrize("n", [64, 256])
def test_irfft(tmp_path: Path, dtype: type, n: int) -> None:
    """The inverse of TFLM's own forward transform of audio (spectra a front end meets)."""
    fwd = single("SignalRfft", [((n,), dtype)], [((n + 2,), dtype)],
                 {"T": TFL_T[dtype], "fft_length": n})
    frames = _scaled(_frames(6, n), dtype)
    specs = [r[0] for r in tflm_calls(fwd, [[f] for f in frames])]
    if dtype != np.float32:  # louder spectra: the fixed-point inverse scales down by n
        specs = [np.clip(s.astype(np.int64) * 64, np.iinfo(dtype).min,
                         np.iinfo(dtype).max).astype(dtype) for s in specs]
    model = single("SignalIrfft", [((n + 2,), dtype)], [((n,), dtype)],
                   {"T": TFL_T[dtype], "fft_length": n})
    xs = [[s] for s in specs]
    ref = tflm_calls(model, xs)
    assert any(np.abs(r[0]).max() > 0 for r in ref)
    _fft_same(_run(_compile(tmp_path, model), xs), ref)


def test_unsupported_fft_length_is_refused(tmp_path: Path) -> None:
    model = single("SignalRfft", [((48,), I16)], [((50,), I16)], {"T": 7, "fft_length": 48})
    with pytest.raises(AotcError, match="fft_length=48 is not supported"):
        _compile(tmp_path, model)


def _stateful(tmp_path: Path, model: bytes, xs: list[list[np.ndarray]], n_out: int,
              state_bytes: int, valid_at: int | None = None) -> list[list[np.ndarray]]:
    """24 calls and 3 more after reset, in the bundle and in TFLM (which resets too); output
    0 compared only where output ``valid_at`` (TFLM's valid flag) is true: TFLM leaves the
    frame unwritten otherwise."""
    ref = tflm_calls(model, xs + xs[:3], n_out, reset_at=len(xs))
    b = _compile(tmp_path, model)
    assert b.compilation.state_bytes == state_bytes
    # Each kernel writes its next state over the old one: no copy per call.
    slots = json.loads((b.directory / "bundle.json").read_text()).get("state", {"slots": []})
    assert all(sl["written"] == "in place" for sl in slots["slots"])
    r = b.load()
    ours = [list(r.run({"input0": x[0]}).values()) for x in xs]
    r.reset()
    ours += [list(r.run({"input0": x[0]}).values()) for x in xs[:3]]
    for k, (o, e) in enumerate(zip(ours, ref)):
        for j, (a, want) in enumerate(zip(o, e)):
            a = np.asarray(a).reshape(want.shape)
            assert a.dtype == want.dtype, f"call {k} output {j}: {a.dtype} != {want.dtype}"
            if j == 0 and valid_at is not None and not bool(e[valid_at]):
                continue
            assert np.array_equal(a, want), f"call {k} output {j}: {a} != TFLM {want}"
    return ref


@pytest.mark.parametrize("d", [3, 10, 0])
def test_delay(tmp_path: Path, d: int) -> None:
    model = single("SignalDelay", [((2, 6), I16)], [((2, 6), I16)], {"delay_length": d})
    xs = [[f.reshape(2, 6)] for f in _frames(N_CALLS, 12)]
    _stateful(tmp_path, model, xs, 1, 2 * d * 2)  # a [2, d] int16 slot


@pytest.mark.parametrize("dtype", [I16, np.float32])
def test_overlap_add(tmp_path: Path, dtype: type) -> None:
    model = single("SignalOverlapAdd", [((3, 16), dtype)], [((3 * 4,), dtype)],
                   {"T": 7 if dtype == I16 else 0, "frame_step": 4})
    xs = [[f.reshape(3, 16).astype(dtype) * (4 if dtype == I16 else 1)]
          for f in _frames(N_CALLS, 48)]
    if dtype == np.float32:
        xs = [[x[0] / 32768] for x in xs]
    _stateful(tmp_path, model, xs, 1, 16 * np.dtype(dtype).itemsize)


@pytest.mark.parametrize("size,step,prefill", [(10, 4, False), (10, 4, True), (8, 8, False),
                                               (12, 4, True)])
def test_framer(tmp_path: Path, size: int, step: int, prefill: bool) -> None:
    n = 2
    model = single("SignalFramer", [((2, n * step), I16)],
                   [((2, n, size), I16), ((), np.bool_)],
                   {"frame_size": size, "frame_step": step, "prefill": prefill})
    xs = [[f.reshape(2, n * step)] for f in _frames(N_CALLS, 2 * n * step)]
    cap = -(-size // step) * step
    ref = _stateful(tmp_path, model, xs, 2, -(-2 * cap * 2 // 16) * 16 + 4, valid_at=1)
    assert any(bool(r[1]) for r in ref)


@pytest.mark.parametrize("left,right,step", [(2, 1, 1), (0, 0, 1), (3, 0, 2)])
def test_stacker(tmp_path: Path, left: int, right: int, step: int) -> None:
    c = 5
    n = left + right + 1
    model = single("SignalStacker", [((c,), I16)], [((c * n,), I16), ((), np.bool_)],
                   {"num_channels": c, "stacker_left_context": left,
                    "stacker_right_context": right, "stacker_step": step})
    xs = [[f] for f in _frames(N_CALLS, c)]
    ref = _stateful(tmp_path, model, xs, 2, -(-2 * c * n // 16) * 16 + 8, valid_at=1)
    assert any(bool(r[1]) for r in ref) and (right == 0 or not bool(ref[0][1]))


def test_front_end_matches_tflm(tmp_path: Path) -> None:
    """Raw int16 PCM to 40 log-mel PCAN features in one bundle, bit-exact with TFLM for 24
    consecutive frames (the noise estimate carried between them) and after reset."""
    model = front_end()
    xs = [[f] for f in speech_frames(N_CALLS)]
    ref = tflm_calls(model, xs + xs[:3], reset_at=N_CALLS)
    assert len({r[0].tobytes() for r in ref}) > N_CALLS // 2 and np.abs(ref[5][0]).max() > 0
    b = _compile(tmp_path, model)
    assert b.compilation.state_bytes == CHANNELS * 4  # the noise estimate
    r = b.load()
    ours = [list(r.run({"input0": x[0]}).values()) for x in xs]
    r.reset()
    ours += [list(r.run({"input0": x[0]}).values()) for x in xs[:3]]
    _same(ours, ref)


@pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="needs qemu-system-arm")
def test_front_end_on_cortex_m4f(tmp_path: Path) -> None:
    model = front_end()
    xs = [[f] for f in speech_frames(4)]
    ref = tflm_calls(model, xs)
    b = _compile(tmp_path, model, target="cortex-m4f")
    board = b.load(board="cortex-m4f")
    ours = [list(board.run({"input0": x[0]}).values()) for x in xs]
    _same(ours, ref)


def test_every_signal_operator_is_converted_and_tested() -> None:
    """The 14 operators TFLM registers for its Signal library (micro_mutable_op_resolver.h):
    each has a converter and a test of its own in this file."""
    from aotc.frontend.tflite.builtins import CONVERTERS

    tflm = {"Delay", "Energy", "FftAutoScale", "FilterBank", "FilterBankLog",
            "FilterBankSpectralSubtraction", "FilterBankSquareRoot", "Framer", "Irfft",
            "OverlapAdd", "PCAN", "Rfft", "Stacker", "Window"}
    assert {k[len("CUSTOM:Signal"):] for k in CONVERTERS if k.startswith("CUSTOM:Signal")} \
        == tflm
    src = Path(__file__).read_text()
    assert all(f'single("Signal{n}"' in src for n in tflm)


@pytest.mark.parametrize("case", ["weights_not_const", "stacker_step", "energy_range", "rfft_T"])
def test_misuse_is_one_line_error(tmp_path: Path, case: str) -> None:
    """A model the Signal operators cannot run as TFLM would: an AotcError naming the
    operator and the reason (no traceback)."""
    if case == "weights_not_const":
        model = single("SignalFilterBank", [((9,), U32)] + [((3,), I16)] * 5, [((2,), U64)],
                       {"num_channels": 2})
        want = "must be a constant"
    elif case == "stacker_step":
        model = single("SignalStacker", [((4,), I16)], [((8,), I16), ((), np.bool_)],
                       {"num_channels": 4, "stacker_left_context": 1,
                        "stacker_right_context": 0, "stacker_step": 3})
        want = "stacker_step=3"
    elif case == "energy_range":
        model = single("SignalEnergy", [((8,), I16)], [((4,), U32)],
                       {"end_index": 9, "start_index": 0})
        want = "end_index"
    else:
        model = single("SignalRfft", [((16,), I16)], [((18,), I16)], {"T": 0, "fft_length": 16})
        want = "T=0 does not name the input's type int16"
    with pytest.raises(AotcError, match=want) as e:
        _compile(tmp_path, model)
    assert "\n" not in str(e.value).strip()


def _reference(op: str, *args: np.ndarray, **attrs: object) -> list[np.ndarray]:
    from aotc.ops import resolve

    opdef = resolve(op, 17, "aotc")
    assert opdef is not None
    out = opdef.reference(*args, **attrs)
    return list(out) if isinstance(out, tuple) else [out]


def test_numpy_references_match_tflm() -> None:
    """The ops' numpy references (constant folding, shape inference) compute TFLM's answer
    too: the stateless operators on the data of the tests above, and the spectral
    subtraction's noise estimate threaded through 24 calls."""
    w = hann_q14(64)
    cases: list[tuple[str, bytes, list[list[np.ndarray]], list[np.ndarray], dict]] = []
    frames = _frames(4, 64)
    cases.append(("SignalWindow", single("SignalWindow", [((64,), I16), ((64,), I16)],
                                         [((64,), I16)], {"shift": 14}, consts={1: w}),
                  [[f] for f in frames], [w], {"shift": 14}))
    scaled = [f // (1 << k) for k, f in enumerate(_frames(6, 64))] + [np.full(64, -32768, I16)]
    cases.append(("SignalFftAutoScale", single("SignalFftAutoScale", [((64,), I16)],
                                               [((64,), I16), ((), I32)], {}),
                  [[f] for f in scaled], [], {}))
    for dt in (I16, I32, np.float32):
        xs = _scaled(_frames(3, 64), dt)
        opts = {"T": TFL_T[dt], "fft_length": 64}
        fwd = single("SignalRfft", [((64,), dt)], [((66,), dt)], opts)
        cases.append(("SignalRfft", fwd, [[x] for x in xs], [], {"fft_length": 64}))
        specs = [r[0] for r in tflm_calls(fwd, [[x] for x in xs])]
        cases.append(("SignalIrfft", single("SignalIrfft", [((66,), dt)], [((64,), dt)], opts),
                      [[s] for s in specs], [], {"fft_length": 64}))
    cfg = mel_config(16, 129)
    tabs = [cfg[k] for k in ("weights", "unweights", "freq_starts", "weight_starts", "widths")]
    cases.append(("SignalFilterBank", single(
        "SignalFilterBank", [((129,), U32)] + [(t.shape, I16) for t in tabs], [((16,), U64)],
        {"num_channels": 16}, consts={k + 1: t for k, t in enumerate(tabs)}),
        [[e] for e in _energies(3, 129)], tabs, {"num_channels": 16}))
    roots = _energies(3, 40, dtype=U64)
    roots[0][:4] = (0, 1, (1 << 32) - 1, (1 << 64) - 1)
    cases.append(("SignalFilterBankSquareRoot", single(
        "SignalFilterBankSquareRoot", [((40,), U64), ((), I32)], [((40,), U32)], {}),
        [[e, np.array(2, I32)] for e in roots], [], {}))
    log_opts = {"input_correction_bits": 3, "output_scale": 1600}
    cases.append(("SignalFilterBankLog", single("SignalFilterBankLog", [((40,), U32)],
                                                [((40,), I16)], log_opts),
                  [[e] for e in _energies(3, 40)], [], log_opts))
    for op, model, calls, consts, attrs in cases:
        ref = tflm_calls(model, calls, 2 if op == "SignalFftAutoScale" else 1)
        for xs, want in zip(calls, ref):
            got = _reference(op, *xs, *consts, **attrs)
            assert all(np.array_equal(g, e) for g, e in zip(got, want)), op
    # The spectral subtraction, its estimate carried from call to call.
    model = single("SignalFilterBankSpectralSubtraction", [((40,), U32)],
                   [((40,), U32), ((40,), U32)], SPECTRAL)
    xs = [(e >> 8).astype(U32) for e in _energies(N_CALLS, 40, seed=3)]
    ref = tflm_calls(model, [[x] for x in xs], 2)
    attrs = {k: int(v) for k, v in SPECTRAL.items() if k != "num_channels"}
    noise = np.zeros(40, U32)
    for x, want in zip(xs, ref):
        y, noise = _reference("SignalFilterBankSpectralSubtraction", x, noise, **attrs)
        assert np.array_equal(y, want[0]) and np.array_equal(noise, want[1])
