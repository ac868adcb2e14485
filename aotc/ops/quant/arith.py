"""Integer quantisation arithmetic, computed at compile time in Python.

Two requantisation modes (``CompileOptions.requant``):

* ``tflite``: TensorFlow Lite's fixed-point scheme (the gemmlowp primitives below, exactly as
  TFLM's reference kernels compute them): a real multiplier becomes an int32 significand and a
  power-of-two shift; run time is integer-only (no FPU needed). Bit-exact with TFLM.
* ``onnx``: the ONNX specification: the accumulator is scaled in float32 and rounded half to
  even (what onnxruntime computes).

The run-time halves of the same primitives are the ``aotc_q_*`` inline functions in
``runtime_c/aotc_runtime.h``; the Python ports here build look-up tables (softmax exp, sigmoid,
tanh) and are the reference the unit tests check the C against.
"""

from __future__ import annotations

import math

import numpy as np

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
REQUANT_MODES = ("tflite", "onnx")


def _wrap32(v: int) -> int:
    return ((v + (1 << 31)) % (1 << 32)) - (1 << 31)


def tflite_round(x: float) -> int:
    """std::round: half away from zero."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier: real = significand * 2^(shift - 31), significand in
    [2^30, 2^31). Returns (significand, shift); shift > 0 is a left shift."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = tflite_round(q * (1 << 31))
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        shift, q_fixed = 0, 0
    return int(q_fixed), int(shift)


def srdhm(a: int, b: int) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul (int32)."""
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    v = ab + nudge
    q = abs(v) >> 31  # C++ division truncates toward zero
    return q if v >= 0 else -q


def rdbpot(x: int, exponent: int) -> int:
    """gemmlowp RoundingDivideByPOT: x / 2^exponent rounded to nearest, ties away from 0."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def sat_shl(x: int, exponent: int) -> int:
    """gemmlowp SaturatingRoundingMultiplyByPOT with a positive exponent."""
    threshold = (1 << (31 - exponent)) - 1
    if x > threshold:
        return INT32_MAX
    if x < -threshold:
        return INT32_MIN
    return _wrap32(x << exponent)


def mbqm(x: int, multiplier: int, shift: int) -> int:
    """TFLite MultiplyByQuantizedMultiplier (double rounding, TFLM's default)."""
    left = shift if shift > 0 else 0
    right = 0 if shift > 0 else -shift
    return rdbpot(srdhm(_wrap32(x * (1 << left)), multiplier), right)


def mbqm64_params(multiplier: int, shift: int) -> tuple[int, int]:
    """TFLM's MultiplyByQuantizedMultiplier for an int64 accumulator (16x8 conv, transpose
    conv) keeps 16 bits of the multiplier and rounds once: (reduced multiplier, total right
    shift) of ``(x * reduced + 2^(total - 1)) >> total``."""
    reduced = (multiplier + (1 << 15)) >> 16 if multiplier < 0x7FFF0000 else 0x7FFF
    return reduced, 15 - shift


def mbqm64(x: int, multiplier: int, shift: int) -> int:
    """TFLM's MultiplyByQuantizedMultiplier(int64_t x, ...) (common.cc), truncated to int32
    as its result is."""
    reduced, total = mbqm64_params(multiplier, shift)
    return _wrap32((x * reduced + (1 << (total - 1))) >> total)


# ----------------------------------------------------------------------------- softmax (int8)
def _exp_on_interval_between_negative_one_quarter_and_0_excl(a: int) -> int:
    constant_term = 1895147668  # exp(-1/8) in Q0.31
    constant_1_over_3 = 715827883
    x = _wrap32(a + (1 << 28))
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rdbpot(x4, 2)
    poly = rdbpot(_wrap32(srdhm(_wrap32(x4_over_4 + x3), constant_1_over_3) + x2), 1)
    return _wrap32(constant_term + srdhm(constant_term, _wrap32(x + poly)))


def exp_on_negative_values(a: int, integer_bits: int = 5) -> int:
    """gemmlowp exp_on_negative_values: a is Q(integer_bits).(31-integer_bits) <= 0; returns
    exp(a) in Q0.31."""
    frac = 31 - integer_bits
    one_quarter = 1 << (frac - 2)
    mask = one_quarter - 1
    a_mod_quarter_minus_one_quarter = _wrap32((a & mask) - one_quarter)
    result = _exp_on_interval_between_negative_one_quarter_and_0_excl(
        sat_shl(a_mod_quarter_minus_one_quarter, integer_bits))
    remainder = _wrap32(a_mod_quarter_minus_one_quarter - a)
    for exponent, multiplier in ((-2, 1672461947), (-1, 1302514674), (0, 790015084),
                                 (1, 290630308), (2, 39332535), (3, 720401), (4, 242)):
        if integer_bits > exponent and remainder & (1 << (frac + exponent)):
            result = srdhm(result, multiplier)
    if integer_bits > 5 and a < -(1 << (36 - integer_bits)):
        result = 0
    if a == 0:
        result = INT32_MAX
    return result


def _input_radius(integer_bits: int, left_shift: int) -> int:
    return math.floor(((1 << integer_bits) - 1) * (1 << (31 - integer_bits)) / (1 << left_shift))


def softmax_params(input_scale: float, beta: float = 1.0) -> tuple[int, int, int]:
    """TFLM's int8 softmax Prepare: (input multiplier, left shift, diff_min) for
    kScaledDiffIntegerBits = 5 (PreprocessSoftmaxScaling, CalculateInputRadius)."""
    real = min(beta * input_scale * (1 << (31 - 5)), (1 << 31) - 1.0)
    multiplier, left_shift = quantize_multiplier(real)
    assert left_shift >= 0
    return multiplier, left_shift, -_input_radius(5, left_shift)


def softmax_table(input_scale: float, beta: float = 1.0) -> np.ndarray:
    """TFLM's int8 softmax with the per-element exp taken from a table indexed by
    d = max_in_row - x (0..255): exp[d] in Q0.31 (0 when d is beyond diff_min, which TFLM
    skips; a zero entry gives the same result)."""
    multiplier, left_shift, diff_min = softmax_params(input_scale, beta)
    exp = np.zeros(256, np.int32)
    for d in range(256):
        diff = -d
        if diff >= diff_min:
            rescaled = srdhm(_wrap32(diff * (1 << left_shift)), multiplier)
            exp[d] = exp_on_negative_values(rescaled)
    return exp


def _newton_two_over_one_plus_x(a: int) -> int:
    """gemmlowp's Newton-Raphson division shared by one_over_one_plus_x and
    one_minus_x_over_one_plus_x: 2 / (1 + a) in Q2.29 for a in [0, 1) in Q0.31."""
    s = a + INT32_MAX  # RoundingHalfSum(a, One): (sum + sign) / 2, truncating
    v = s + (1 if s >= 0 else -1)
    half_den = abs(v) // 2 * (1 if v >= 0 else -1)
    x = _wrap32(1515870810 + srdhm(half_den, -1010580540))
    for _ in range(3):
        one_minus = _wrap32((1 << 29) - srdhm(half_den, x))
        x = _wrap32(x + sat_shl(srdhm(x, one_minus), 2))
    return x


def one_over_one_plus_x(a: int) -> int:
    """gemmlowp one_over_one_plus_x_for_x_in_0_1 (Q0.31 in and out)."""
    return sat_shl(_newton_two_over_one_plus_x(a), 1)


def clz32(x: int) -> int:
    x &= 0xFFFFFFFF
    return 32 - x.bit_length()


def softmax_int8_row(row: np.ndarray, exp: np.ndarray, out_bits: int = 8) -> np.ndarray:
    """One row of TFLM's softmax from int8 (reference_ops::Softmax), from the table: int8
    out (``out_bits`` 8: scale 1/256, zero point -128) or int16 out (16: 1/65536, -32768)."""
    d = int(row.max()) - row.astype(np.int64)
    total = sum(rdbpot(int(exp[k]), 12) for k in d)  # Rescale<12>: Q12.19
    headroom = clz32(total)
    nbou = 12 - headroom
    shifted = _wrap32(((total << headroom) & 0xFFFFFFFF) - (1 << 31))
    scale = one_over_one_plus_x(shifted)
    lo, hi = -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1
    out = [rdbpot(srdhm(scale, int(exp[k])), nbou + 31 - out_bits) + lo for k in d]
    return np.clip(out, lo, hi).astype(np.int8 if out_bits == 8 else np.int16)


# ----------------------------------------------------------------------------- helpers
def activation_range(qmin: int, qmax: int, scale: float, zero_point: int, act: str,
                     lo: float | None = None, hi: float | None = None) -> tuple[int, int]:
    """The quantised clamp of a fused activation (TFLite CalculateActivationRangeQuantized:
    its Quantize divides in float32, which rounds 1 / scale differently at ties)."""
    def q(v: float) -> int:
        with np.errstate(over="ignore"):
            r = float(np.float32(v) / np.float32(scale))
        if not math.isfinite(r):  # beyond float range: beyond every integer type's range too
            return zero_point + (2**62 if r > 0 else -2**62)
        return zero_point + tflite_round(r)

    if act == "relu":
        return max(qmin, q(0.0)), qmax
    if act == "clip":
        a = qmin if lo is None else max(qmin, q(lo))
        b = qmax if hi is None else min(qmax, q(hi))
        return a, b
    return qmin, qmax


# ----------------------------------------------------------------------------- numpy twins
def mbqm_np(acc: np.ndarray, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Vectorised mbqm (reference semantics for constant folding and tests)."""
    acc = np.asarray(acc, np.int64)
    m = np.broadcast_to(np.asarray(multiplier, np.int64), acc.shape)
    s = np.broadcast_to(np.asarray(shift, np.int64), acc.shape)
    out = np.empty(acc.shape, np.int64)
    for i, (a, mm, ss) in enumerate(zip(acc.ravel(), m.ravel(), s.ravel())):
        out.ravel()[i] = mbqm(int(a), int(mm), int(ss))
    return out


def requantize_np(acc: np.ndarray, real: np.ndarray, zero_point: int, lo: int, hi: int,
                  mode: str, channel_axis: int | None = None, wide: bool = False) -> np.ndarray:
    """acc (int) -> clamp(requant(acc) + zero_point) in the given mode; ``real`` is the
    per-channel (along ``channel_axis``) or scalar multiplier; ``wide``: an int64
    accumulator (TFLM's 16x8 kernels: mbqm64)."""
    acc = np.asarray(acc, np.int64)
    real = np.asarray(real, np.float64)
    shape = [1] * acc.ndim
    if real.size > 1 and channel_axis is not None:
        shape[channel_axis] = real.size
    if mode == "tflite":
        qm = [quantize_multiplier(float(r)) for r in real.ravel()]
        mult = np.array([m for m, _ in qm], np.int64).reshape(shape if real.size > 1 else ())
        shift = np.array([s for _, s in qm], np.int64).reshape(shape if real.size > 1 else ())
        if wide:
            m = np.broadcast_to(mult, acc.shape)
            sh = np.broadcast_to(shift, acc.shape)
            v = np.array([mbqm64(int(a), int(mm), int(ss)) for a, mm, ss in
                          zip(acc.ravel(), m.ravel(), sh.ravel())], np.int64).reshape(acc.shape)
            v = v + zero_point
        else:
            v = mbqm_np(acc, mult, shift) + zero_point
    else:
        sc = real.astype(np.float32).reshape(shape if real.size > 1 else ())
        v = np.rint(acc.astype(np.float32) * sc).astype(np.int64) + zero_point
    return np.clip(v, lo, hi)


# ----------------------------------------------------------------------------- logistic / tanh
def _frexp_multiplier(real: float) -> tuple[int, int]:
    """TFLM's LOGISTIC/TANH prepare: frexp and round, without QuantizeMultiplier's fix-ups."""
    q, shift = math.frexp(real)
    return tflite_round(q * (1 << 31)), shift


def _one_minus_x_over_one_plus_x(a: int) -> int:
    return sat_shl(_wrap32(_newton_two_over_one_plus_x(a) - (1 << 29)), 2)


def _logistic_q4(a: int) -> int:
    """gemmlowp logistic of a Q4.27 value, in Q0.31."""
    if a == 0:
        return 1 << 30
    pos = one_over_one_plus_x(exp_on_negative_values(-abs(a), 4))
    return pos if a > 0 else _wrap32(INT32_MAX - pos)


def _tanh_q4(a: int) -> int:
    """gemmlowp tanh of a Q4.27 value, in Q0.31."""
    if a == 0:
        return 0
    n = a if a < 0 else -a
    t = _one_minus_x_over_one_plus_x(exp_on_negative_values(n, 5))  # ExactMulByPot<1>
    return -t if a < 0 else t


def int8_activation_table(kind: str, input_scale: float, input_zero_point: int) -> np.ndarray:
    """TFLM's int8 LOGISTIC (output scale 1/256, zero point -128) or TANH (1/128, 0) for each of
    the 256 inputs: table[x + 128]."""
    multiplier, left_shift = _frexp_multiplier(float(np.float32(input_scale)) * (1 << 27))
    radius = _input_radius(4, left_shift)
    out = np.empty(256, np.int8)
    for k, x in enumerate(range(-128, 128)):
        v = x - input_zero_point
        if v <= -radius:
            out[k] = -128
        elif v >= radius:
            out[k] = 127
        elif kind == "sigmoid":
            q0 = _logistic_q4(mbqm(v, multiplier, left_shift))
            out[k] = min(max(rdbpot(q0, 23) - 128, -128), 127)
        else:
            q0 = _tanh_q4(mbqm(v, multiplier, left_shift))
            out[k] = min(max(rdbpot(q0, 24), -128), 127)
    return out
