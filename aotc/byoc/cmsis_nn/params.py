"""aotc's quantisation data -> CMSIS-NN's arguments, at compile time (TFLM's Prepare): the
per-channel multiplier/shift (the same qmath.quantize_multiplier aotc's ``--requant tflite``
kernels use, so both are bit-exact), offsets (negated zero points), the activation clamp,
weights re-laid out for NHWC (conv OHWI, depthwise 1HWC, fully connected [out, in]), the
``cmsis_nn_dims`` of each tensor, and the C text of a call.

Each ``*_call`` takes what a prepared QLinearConv / QLinearMatMul node holds (ONNX layouts,
``_xz``, ``_wz``, ``_real``, ``_yz``, the ``_act_lo``/``_act_hi`` clamp) and raises AotcError
with the reason when CMSIS-NN cannot compute it; ``conv_refusal`` / ``fc_refusal`` give that
reason without raising, for a backend's check.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aotc.errors import AotcError
from aotc.ops.quant import arith as qmath

INT8 = (-128, 127)
INT16 = (-32768, 32767)


# ----------------------------------------------------------------------------- structs
@dataclass(frozen=True)
class Dims:
    """cmsis_nn_dims {n, h, w, c}: NHWC activations; see each function for the filter's."""

    n: int
    h: int
    w: int
    c: int

    def c_init(self) -> str:
        return f"{{{self.n}, {self.h}, {self.w}, {self.c}}}"


@dataclass(frozen=True)
class Tile:
    """cmsis_nn_tile: note the struct's field order is {w, h}."""

    h: int
    w: int

    def c_init(self) -> str:
        return f"{{{self.w}, {self.h}}}"


@dataclass(frozen=True)
class Activation:
    """cmsis_nn_activation {min, max}: the int8 clamp (a fused Relu/Clip, or -128..127)."""

    min: int
    max: int

    def c_init(self) -> str:
        return f"{{{self.min}, {self.max}}}"


@dataclass(frozen=True)
class ConvParams:
    """cmsis_nn_conv_params {input_offset, output_offset, stride, padding, dilation,
    activation}; offsets are the negated zero points, padding the top/left pads."""

    input_offset: int
    output_offset: int
    stride: Tile
    padding: Tile
    dilation: Tile
    activation: Activation

    def c_init(self) -> str:
        return (f"{{{self.input_offset}, {self.output_offset}, {self.stride.c_init()}, "
                f"{self.padding.c_init()}, {self.dilation.c_init()}, "
                f"{self.activation.c_init()}}}")


@dataclass(frozen=True)
class DwConvParams:
    """cmsis_nn_dw_conv_params {input_offset, output_offset, ch_mult, stride, padding,
    dilation, activation}."""

    input_offset: int
    output_offset: int
    ch_mult: int
    stride: Tile
    padding: Tile
    dilation: Tile
    activation: Activation

    def c_init(self) -> str:
        return (f"{{{self.input_offset}, {self.output_offset}, {self.ch_mult}, "
                f"{self.stride.c_init()}, {self.padding.c_init()}, {self.dilation.c_init()}, "
                f"{self.activation.c_init()}}}")


@dataclass(frozen=True)
class FcParams:
    """cmsis_nn_fc_params {input_offset, filter_offset, output_offset, activation};
    filter_offset is 0 (symmetric weights)."""

    input_offset: int
    filter_offset: int
    output_offset: int
    activation: Activation

    def c_init(self) -> str:
        return (f"{{{self.input_offset}, {self.filter_offset}, {self.output_offset}, "
                f"{self.activation.c_init()}}}")


# ----------------------------------------------------------------------------- requantisation
def requant(real: np.ndarray | Sequence[float] | float) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel real multipliers (x_scale * w_scale / y_scale, float64) -> CMSIS-NN's
    output_multiplier / output_shift (int32 arrays; shift > 0 is a left shift), TFLite's
    QuantizeMultiplier as aotc's tflite requantisation computes it."""
    qm = [qmath.quantize_multiplier(float(r)) for r in np.atleast_1d(np.asarray(real, float))]
    return (np.array([m for m, _ in qm], np.int32), np.array([s for _, s in qm], np.int32))


def activation(lo: int | None, hi: int | None, bounds: tuple[int, int] = INT8) -> Activation:
    """The int8 (or ``bounds``: int16) clamp: aotc's act range (a fused Relu/Clip gives
    ``_act_lo``/``_act_hi``)."""
    return Activation(max(bounds[0], bounds[0] if lo is None else int(lo)),
                      min(bounds[1], bounds[1] if hi is None else int(hi)))


def nhwc_dims(shape_nchw: Sequence[int]) -> Dims:
    n, c, h, w = (int(v) for v in shape_nchw)
    return Dims(n, h, w, c)


# ----------------------------------------------------------------------------- weights
def conv_weights_ohwi(w: np.ndarray) -> np.ndarray:
    """ONNX conv weights [C_out, C_in, kh, kw] -> CMSIS-NN's [C_out, kh, kw, C_in]."""
    return np.ascontiguousarray(np.asarray(w).transpose(0, 2, 3, 1))


def depthwise_weights_1hwc(w: np.ndarray) -> np.ndarray:
    """ONNX depthwise weights [C_in * mult, 1, kh, kw] (group = C_in) -> CMSIS-NN's
    [1, kh, kw, C_in * mult]. Output channel c * mult + m reads input channel c in both."""
    w = np.asarray(w)
    if w.shape[1] != 1:
        raise AotcError(f"depthwise weights must be [C*mult, 1, kh, kw], got {w.shape}")
    return np.ascontiguousarray(w[:, 0].transpose(1, 2, 0)[None])


def fc_weights(b: np.ndarray, transposed: bool = False) -> np.ndarray:
    """MatMul's B [K, N] (or Gemm's with transB=1: [N, K], ``transposed``) -> the [N, K] rows
    arm_fully_connected_s8 reads (one row of K weights per output)."""
    b = np.asarray(b)
    if b.ndim != 2:
        raise AotcError(f"fully connected weights must be 2-D, got shape {b.shape}")
    return np.ascontiguousarray(b if transposed else b.T)


# ----------------------------------------------------------------------------- conv
@dataclass(frozen=True)
class ConvCall:
    """Everything arm_convolve_wrapper_s8 / arm_depthwise_conv_wrapper_s8 takes, but the
    context and the activation buffers. ``bias`` is None when the node has none (NULL)."""

    function: str
    params: ConvParams | DwConvParams
    input_dims: Dims
    filter_dims: Dims
    bias_dims: Dims
    output_dims: Dims
    weights: np.ndarray  # int8, OHWI or 1HWC
    bias: np.ndarray | None  # int32 [C_out] (s16: int64, or int32)
    multiplier: np.ndarray  # int32 [C_out]
    shift: np.ndarray  # int32 [C_out]

    @property
    def depthwise(self) -> bool:
        return isinstance(self.params, DwConvParams)


def conv_refusal(x_shape: Sequence[int], w: np.ndarray, bias: np.ndarray | None, *,
                 x_dtype: str = "int8", y_dtype: str = "int8",
                 w_zp: np.ndarray | Sequence[int] | int = 0, group: int = 1,
                 strides: Sequence[int] = (1, 1), pads: Sequence[int] = (0, 0, 0, 0),
                 dilations: Sequence[int] = (1, 1), y_shape: Sequence[int] | None = None
                 ) -> str | None:
    """Why CMSIS-NN's s8 conv wrappers (or, for TFLite's 16x8, arm_convolve_wrapper_s16)
    cannot compute this QLinearConv, or None. ``pads`` are ONNX's [top, left, bottom, right]
    (auto_pad resolved)."""
    w = np.asarray(w)
    if len(x_shape) != 4 or w.ndim != 4:
        return f"only 2-D convolutions (NCHW input), got input rank {len(x_shape)}"
    if x_dtype == "int16":
        return _s16_refusal(x_shape, w, bias, y_dtype, w_zp, group, dilations, pads)
    if x_dtype != "int8" or y_dtype != "int8" or w.dtype != np.int8:
        return (f"activations and weights must be int8 (TFLite int8 spec), got x {x_dtype}, "
                f"w {w.dtype}, y {y_dtype}")
    if np.any(np.asarray(w_zp) != 0):
        return "weights must be symmetric (zero point 0)"
    if any(int(d) != 1 for d in dilations):
        return f"dilations {list(dilations)} are not supported (only 1)"
    if any(int(p) < 0 for p in pads):
        return f"negative pads {list(pads)} are not supported"
    if any(int(s) < 1 for s in strides):
        return f"strides {list(strides)} must be >= 1"
    c_in, c_out = int(x_shape[1]), int(w.shape[0])
    if group != 1 and not (group == c_in and w.shape[1] == 1 and c_out % c_in == 0):
        return f"group={group} is neither 1 nor depthwise (group = input channels)"
    if y_shape is not None and int(x_shape[2]) == 1 and int(w.shape[2]) == 1:
        # The 1xN kernel (MVE) fails unless the width padding is TFLite's SAME/VALID split:
        # 2 * left + (total % 2) == total, total = left + the right pad the output reaches.
        left = int(pads[1])
        total = (int(y_shape[3]) - 1) * int(strides[1]) + int(w.shape[3]) - int(x_shape[3])
        if 2 * left + int(math.fmod(total, 2)) != total:
            return f"pads {list(pads)} are not TFLite-style (right = left or left + 1)"
    if bias is not None:
        # CMSIS-NN's int32 accumulator wraps; aotc's kernels clamp such a bias instead.
        bound = np.abs(w.reshape(c_out, -1).astype(np.int64)).sum(axis=1) * 255
        if (np.abs(np.asarray(bias, np.int64).reshape(-1)) + bound >= 2 ** 31).any():
            return "the bias is so large that the int32 accumulator could overflow"
    return None


def _s16_refusal(x_shape: Sequence[int], w: np.ndarray, bias: np.ndarray | None, y_dtype: str,
                 w_zp: np.ndarray | Sequence[int] | int, group: int,
                 dilations: Sequence[int], pads: Sequence[int]) -> str | None:
    if y_dtype != "int16" or w.dtype != np.int8:
        return f"16x8 takes int8 weights and an int16 output, got w {w.dtype}, y {y_dtype}"
    if np.any(np.asarray(w_zp) != 0):
        return "weights must be symmetric (zero point 0)"
    if group != 1:
        c_in = int(x_shape[1])
        if not (group == c_in and w.shape[1] == 1 and w.shape[0] % c_in == 0):
            return "16x8 grouped convolutions are not claimed (depthwise only)"
        if bias is not None and np.asarray(bias).dtype != np.int64:
            return ("arm_depthwise_conv_wrapper_s16 takes an int64 bias (TFLM's 16x8 depthwise "
                    "reads int64 only)")
    if any(int(d) != 1 for d in dilations):
        return f"dilations {list(dilations)} are not supported (only 1)"
    if any(int(p) < 0 for p in pads):
        return f"negative pads {list(pads)} are not supported"
    # arm_convolve_s16 (and arm_depthwise_conv_fast_s16) sums the products in int32 before it
    # adds the (int64) bias; TFLM sums in int64: equal only while no partial sum can leave
    # int32.
    bound = np.abs(w.reshape(w.shape[0], -1).astype(np.int64)).sum(axis=1) * 32768
    if bias is not None and np.asarray(bias).dtype == np.int32:
        bound = bound + np.abs(np.asarray(bias, np.int64).reshape(-1))
    if (bound >= 2 ** 31).any():
        return "the int32 sum of products in CMSIS-NN's s16 kernel could overflow"
    return None


def conv_call(x_shape: Sequence[int], w: np.ndarray, bias: np.ndarray | None,
              y_shape: Sequence[int], *, x_zp: int, real: np.ndarray | Sequence[float],
              y_zp: int, w_zp: np.ndarray | Sequence[int] | int = 0,
              act_lo: int | None = None, act_hi: int | None = None, group: int = 1,
              strides: Sequence[int] = (1, 1), pads: Sequence[int] = (0, 0, 0, 0),
              dilations: Sequence[int] = (1, 1), x_dtype: str = "int8") -> ConvCall:
    """A QLinearConv (NCHW shapes, ONNX OIHW weights) as a CMSIS-NN s8 conv call on NHWC data:
    arm_depthwise_conv_wrapper_s8 when group = C_in (and C_in > 1), else
    arm_convolve_wrapper_s8. ``real`` is one multiplier per output channel (or one)."""
    w = np.asarray(w)
    s16 = x_dtype == "int16"
    why = conv_refusal(x_shape, w, bias, w_zp=w_zp, group=group, strides=strides, pads=pads,
                       dilations=dilations, y_shape=y_shape, x_dtype=x_dtype,
                       y_dtype="int16" if s16 else "int8")
    if why is not None:
        raise AotcError(f"CMSIS-NN conv: {why}")
    c_out = int(w.shape[0])
    mult, shift = requant(np.broadcast_to(np.atleast_1d(np.asarray(real, float)), (c_out,)))
    stride = Tile(int(strides[0]), int(strides[1]))
    padding = Tile(int(pads[0]), int(pads[1]))
    dil = Tile(int(dilations[0]), int(dilations[1]))
    act = activation(act_lo, act_hi, INT16 if s16 else INT8)
    x_dims, y_dims = nhwc_dims(x_shape), nhwc_dims(y_shape)
    b_dt = np.asarray(bias).dtype if s16 and bias is not None else np.int32
    b = None if bias is None else np.ascontiguousarray(np.asarray(bias).reshape(-1), b_dt)
    kh, kw = int(w.shape[2]), int(w.shape[3])
    if group > 1:
        params: ConvParams | DwConvParams = DwConvParams(
            -int(x_zp), int(y_zp), c_out // group, stride, padding, dil, act)
        fn = "arm_depthwise_conv_wrapper_s16" if s16 else "arm_depthwise_conv_wrapper_s8"
        return ConvCall(fn, params, x_dims, Dims(1, kh, kw, c_out),
                        Dims(1, 1, 1, c_out), y_dims, depthwise_weights_1hwc(w), b, mult, shift)
    params = ConvParams(-int(x_zp), int(y_zp), stride, padding, dil, act)
    fn = "arm_convolve_wrapper_s16" if s16 else "arm_convolve_wrapper_s8"
    return ConvCall(fn, params, x_dims, Dims(c_out, kh, kw, x_dims.c),
                    Dims(1, 1, 1, c_out), y_dims, conv_weights_ohwi(w), b, mult, shift)


# ----------------------------------------------------------------------------- fully connected
@dataclass(frozen=True)
class FcCall:
    """Everything arm_fully_connected_s8 (per-tensor multiplier) or
    arm_fully_connected_per_channel_s8 takes, but the context and the activation buffers."""

    function: str
    params: FcParams
    input_dims: Dims
    filter_dims: Dims
    bias_dims: Dims
    output_dims: Dims
    weights: np.ndarray  # int8 [N, K]
    bias: np.ndarray | None  # int32 [N]
    multiplier: np.ndarray  # int32 [1] per tensor, [N] per channel
    shift: np.ndarray

    @property
    def per_channel(self) -> bool:
        return self.multiplier.size > 1


def fc_refusal(a_shape: Sequence[int], b: np.ndarray, bias: np.ndarray | None, *,
               a_dtype: str = "int8", y_dtype: str = "int8",
               b_zp: np.ndarray | Sequence[int] | int = 0, transposed: bool = False
               ) -> str | None:
    """Why arm_fully_connected_s8 cannot compute this QLinearMatMul (A [.., M, K] x B [K, N],
    or B [N, K] with ``transposed``), or None."""
    b = np.asarray(b)
    if b.ndim != 2:
        return f"B must be a 2-D constant, got shape {b.shape}"
    if a_dtype == "int16":
        return _fc_s16_refusal(a_shape, b, bias, y_dtype, b_zp, transposed)
    if a_dtype != "int8" or y_dtype != "int8" or b.dtype != np.int8:
        return (f"activations and weights must be int8 (TFLite int8 spec), got a {a_dtype}, "
                f"b {b.dtype}, y {y_dtype}")
    if np.any(np.asarray(b_zp) != 0):
        return "weights must be symmetric (zero point 0)"
    k = int(b.shape[1] if transposed else b.shape[0])
    if not a_shape or int(a_shape[-1]) != k:
        return f"A {list(a_shape)} does not match B {list(b.shape)}"
    if bias is not None:
        rows = fc_weights(b, transposed).astype(np.int64)
        bound = np.abs(rows).sum(axis=1) * 255
        if (np.abs(np.asarray(bias, np.int64).reshape(-1)) + bound >= 2 ** 31).any():
            return "the bias is so large that the int32 accumulator could overflow"
    return None


def _fc_s16_refusal(a_shape: Sequence[int], b: np.ndarray, bias: np.ndarray | None,
                    y_dtype: str, b_zp: np.ndarray | Sequence[int] | int, transposed: bool
                    ) -> str | None:
    """TFLite's 16x8 FULLY_CONNECTED as arm_fully_connected_s16 (int64 bias, one multiplier:
    fc_call checks that)."""
    if y_dtype != "int16" or b.dtype != np.int8:
        return f"16x8 takes int8 weights and an int16 output, got b {b.dtype}, y {y_dtype}"
    if np.any(np.asarray(b_zp) != 0):
        return "weights must be symmetric (zero point 0)"
    k = int(b.shape[1] if transposed else b.shape[0])
    if not a_shape or int(a_shape[-1]) != k:
        return f"A {list(a_shape)} does not match B {list(b.shape)}"
    if bias is not None and np.asarray(bias).dtype != np.int64:
        return "arm_fully_connected_s16 takes an int64 bias (TFLite's 16x8 with an int32 bias)"
    # arm_nn_vec_mat_mult_t_s16 sums up to 512 products in int32 before int64 (TFLM: int64).
    rows = np.abs(fc_weights(b, transposed).astype(np.int64)).sum(axis=1)
    if (rows * 32768 >= 2 ** 31).any():
        return "the int32 sum of products in arm_nn_vec_mat_mult_t_s16 could overflow"
    return None


def fc_call(a_shape: Sequence[int], b: np.ndarray, bias: np.ndarray | None, *, x_zp: int,
            real: np.ndarray | Sequence[float], y_zp: int,
            w_zp: np.ndarray | Sequence[int] | int = 0, act_lo: int | None = None,
            act_hi: int | None = None, transposed: bool = False, a_dtype: str = "int8"
            ) -> FcCall:
    """A QLinearMatMul (+ int32 bias, as aotc's QDQ pass builds it) with a constant 2-D B as a
    CMSIS-NN fully connected call: the rows of A (all leading dims are batches) times B.
    One multiplier: arm_fully_connected_s8; one per column: arm_fully_connected_per_channel_s8."""
    s16 = a_dtype == "int16"
    why = fc_refusal(a_shape, b, bias, b_zp=w_zp, transposed=transposed, a_dtype=a_dtype,
                     y_dtype=a_dtype)
    if why is not None:
        raise AotcError(f"CMSIS-NN fully connected: {why}")
    w = fc_weights(b, transposed)
    n_out, k = int(w.shape[0]), int(w.shape[1])
    r = np.atleast_1d(np.asarray(real, float))
    if r.size > 1 and np.all(r == r[0]):
        r = r[:1]
    mult, shift = requant(r)
    batches = int(np.prod([int(d) for d in a_shape[:-1]], dtype=np.int64))
    params = FcParams(-int(x_zp), 0, int(y_zp),
                      activation(act_lo, act_hi, INT16 if s16 else INT8))
    fn = "arm_fully_connected_per_channel_s8" if mult.size > 1 else "arm_fully_connected_s8"
    if s16 and mult.size > 1:
        raise AotcError("CMSIS-NN fully connected: arm_fully_connected_s16 takes one "
                        "multiplier (per-tensor weights)")
    if s16:
        fn = "arm_fully_connected_s16"
    b32 = None if bias is None else np.ascontiguousarray(np.asarray(bias).reshape(-1),
                                                         np.int64 if s16 else np.int32)
    # filter_dims: n = accumulation depth K, c = output depth N (h, w unused).
    return FcCall(fn, params, Dims(batches, 1, 1, k), Dims(k, 1, 1, n_out), Dims(1, 1, 1, n_out),
                  Dims(batches, 1, 1, n_out), w, b32, mult, shift)


# ----------------------------------------------------------------------------- C text
def c_array(name: str, values: np.ndarray, ctype: str) -> str:
    """``static const <ctype> name[n] = {...};`` (the backend may place constants elsewhere;
    this is the plain form, used by tests)."""
    vals = np.asarray(values).reshape(-1)
    body = ", ".join(str(int(v)) for v in vals) if vals.size else "0"
    return f"static const {ctype} {name}[{max(vals.size, 1)}] = {{{body}}};\n"


def _ptr(name: str | None) -> str:
    return "NULL" if name is None else name


def conv_function(call: ConvCall, fn_name: str, *, weights: str, bias: str | None,
                  multiplier: str, shift: str, scratch_bytes: int) -> str:
    """A C99 ``static arm_cmsis_nn_status fn_name(const int8_t *input, int8_t *output,
    int8_t *scratch)`` that declares the structs and calls ``call.function``. ``weights``,
    ``bias`` (None: NULL), ``multiplier`` and ``shift`` name const arrays in scope; the
    context is ``{scratch, scratch_bytes}`` (NULL when 0). The quant struct's fields are
    non-const int32_t pointers the library only reads, hence the casts."""
    p = call.params
    ptype = "cmsis_nn_dw_conv_params" if call.depthwise else "cmsis_nn_conv_params"
    return _function(fn_name, call.function, scratch_bytes, [
        f"const {ptype} params = {p.c_init()};",
        f"const cmsis_nn_per_channel_quant_params quant = {{(int32_t *){multiplier}, "
        f"(int32_t *){shift}}};",
    ], call.input_dims, call.filter_dims, call.bias_dims, call.output_dims, weights,
        _ptr(bias))


def fc_function(call: FcCall, fn_name: str, *, weights: str, bias: str | None,
                multiplier: str, shift: str, kernel_sums: str | None = None) -> str:
    """A C99 ``static arm_cmsis_nn_status fn_name(const int8_t *input, int8_t *output,
    int8_t *scratch)`` calling arm_fully_connected_s8 (or _per_channel_s8). The MVE path reads
    its context as precomputed kernel sums (arm_vector_sum_s8: bias + input_offset * row sums,
    4 bytes per output; constants, see kernel_sums() in scratch.py): name them in
    ``kernel_sums`` and the context points at them; other paths ignore the context, and
    ``scratch`` is unused."""
    p = call.params
    if call.per_channel:
        quant = (f"const cmsis_nn_per_channel_quant_params quant = {{(int32_t *){multiplier}, "
                 f"(int32_t *){shift}}};")
    else:
        quant = (f"const cmsis_nn_per_tensor_quant_params quant = {{{multiplier}[0], "
                 f"{shift}[0]}};")
    size = 4 * call.output_dims.c if kernel_sums is not None else 0
    ctx_buf = f"(void *){kernel_sums}" if kernel_sums is not None else None
    return _function(fn_name, call.function, size, [
        f"const cmsis_nn_fc_params params = {p.c_init()};", quant,
    ], call.input_dims, call.filter_dims, call.bias_dims, call.output_dims, weights,
        _ptr(bias), ctx_buf=ctx_buf)


def _function(fn_name: str, callee: str, ctx_bytes: int, decls: list[str], x: Dims, f: Dims,
              b: Dims, y: Dims, weights: str, bias: str, ctx_buf: str | None = None) -> str:
    if ctx_buf is None:
        ctx_buf = "scratch" if ctx_bytes > 0 else "NULL"
    uses_scratch = ctx_buf == "scratch"
    lines = [
        f"static arm_cmsis_nn_status {fn_name}(const int8_t *input, int8_t *output, "
        f"int8_t *scratch)",
        "{",
        *([] if uses_scratch else ["    (void)scratch;"]),
        f"    const cmsis_nn_context ctx = {{{ctx_buf}, {int(ctx_bytes)}}};",
        *(f"    {d}" for d in decls),
        f"    const cmsis_nn_dims input_dims = {x.c_init()};",
        f"    const cmsis_nn_dims filter_dims = {f.c_init()};",
        f"    const cmsis_nn_dims bias_dims = {b.c_init()};",
        f"    const cmsis_nn_dims output_dims = {y.c_init()};",
        f"    return {callee}(&ctx, &params, &quant, &input_dims, input, &filter_dims, "
        f"{weights},",
        f"        &bias_dims, {bias}, &output_dims, output);",
        "}",
    ]
    return "\n".join(lines) + "\n"
