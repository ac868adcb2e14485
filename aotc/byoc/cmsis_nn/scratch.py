"""Scratch bytes CMSIS-NN asks for, from the library's own ``arm_*_get_buffer_size*`` for the
target's feature set, called through cffi on the host build (library.py): "none" calls the plain
function (the host build is the pure-C path), "dsp" and "mve" the ``_dsp`` / ``_mve`` variants
CMSIS-NN provides for host-side tools. No formula is copied here.

Kernels with no get_buffer_size need no scratch: arm_max_pool_s8, arm_softmax_s8,
arm_elementwise_add_s8 and arm_elementwise_mul_s8 take no context (max pool takes one it does
not use). Also here: fully connected kernel sums (arm_vector_sum_s8), which the MVE path reads
from its context instead of the bias.

Caveat from the sources: the DSP size of a fast 1x1 conv is 0 except under Arm Compiler 6
(__ARMCC_VERSION), where it is 4 * C_in bytes; aotc builds with gcc (host and
arm-none-eabi-gcc), for which 0 is right.
"""

from __future__ import annotations

import functools
from pathlib import Path

import cffi
import numpy as np

from aotc.byoc.cmsis_nn.library import FEATURES, CmsisNN
from aotc.byoc.cmsis_nn.params import ConvCall, ConvParams, Dims, DwConvParams, FcCall
from aotc.errors import AotcError

NO_SCRATCH = ("arm_max_pool_s8", "arm_softmax_s8", "arm_elementwise_add_s8",
              "arm_elementwise_mul_s8")

_CDEF = """
typedef struct { int32_t w; int32_t h; } cmsis_nn_tile;
typedef struct { int32_t n; int32_t h; int32_t w; int32_t c; } cmsis_nn_dims;
typedef struct { int32_t min; int32_t max; } cmsis_nn_activation;
typedef struct {
    int32_t input_offset; int32_t output_offset;
    cmsis_nn_tile stride; cmsis_nn_tile padding; cmsis_nn_tile dilation;
    cmsis_nn_activation activation;
} cmsis_nn_conv_params;
typedef struct {
    int32_t input_offset; int32_t output_offset; int32_t ch_mult;
    cmsis_nn_tile stride; cmsis_nn_tile padding; cmsis_nn_tile dilation;
    cmsis_nn_activation activation;
} cmsis_nn_dw_conv_params;
"""
_SIZE_FNS = {
    "arm_convolve_wrapper_s8_get_buffer_size{}":
        "(const cmsis_nn_conv_params *, const cmsis_nn_dims *, const cmsis_nn_dims *, "
        "const cmsis_nn_dims *)",
    "arm_convolve_wrapper_s16_get_buffer_size{}":
        "(const cmsis_nn_conv_params *, const cmsis_nn_dims *, const cmsis_nn_dims *, "
        "const cmsis_nn_dims *)",
    "arm_depthwise_conv_wrapper_s8_get_buffer_size{}":
        "(const cmsis_nn_dw_conv_params *, const cmsis_nn_dims *, const cmsis_nn_dims *, "
        "const cmsis_nn_dims *)",
    "arm_depthwise_conv_wrapper_s16_get_buffer_size{}":
        "(const cmsis_nn_dw_conv_params *, const cmsis_nn_dims *, const cmsis_nn_dims *, "
        "const cmsis_nn_dims *)",
    "arm_fully_connected_s8_get_buffer_size{}": "(const cmsis_nn_dims *)",
    "arm_avgpool_s8_get_buffer_size{}": "(const int, const int)",
}
_SUFFIX = {"none": "", "dsp": "_dsp", "mve": "_mve"}


@functools.cache
def _lib(so: Path) -> tuple[cffi.FFI, object]:
    ffi = cffi.FFI()
    decls = [_CDEF]
    for fn, args in _SIZE_FNS.items():
        decls += [f"int32_t {fn.format(s)}{args};" for s in _SUFFIX.values()]
    decls.append("int32_t arm_vector_sum_s8(int32_t *, const int32_t, const int32_t, "
                 "const int8_t *, const int32_t, const int32_t, const int32_t *);")
    ffi.cdef("\n".join(decls))
    return ffi, ffi.dlopen(str(so))


class Scratch:
    """The library's buffer-size functions for one CMSIS-NN tree (built for the host once)."""

    def __init__(self, lib: CmsisNN) -> None:
        self.ffi, self.lib = _lib(lib.host_shared())

    def _fn(self, name: str, feature: str):  # type: ignore[no-untyped-def]
        if feature not in FEATURES:
            raise AotcError(f"unknown CMSIS-NN feature set {feature!r}; expected one of "
                            f"{', '.join(FEATURES)}")
        return getattr(self.lib, name.format(_SUFFIX[feature]))

    def _dims(self, d: Dims):  # type: ignore[no-untyped-def]
        return self.ffi.new("cmsis_nn_dims *", [d.n, d.h, d.w, d.c])

    def _conv_params(self, p: ConvParams | DwConvParams):  # type: ignore[no-untyped-def]
        common = [[p.stride.w, p.stride.h], [p.padding.w, p.padding.h],
                  [p.dilation.w, p.dilation.h], [p.activation.min, p.activation.max]]
        if isinstance(p, DwConvParams):
            return self.ffi.new("cmsis_nn_dw_conv_params *",
                                [p.input_offset, p.output_offset, p.ch_mult, *common])
        return self.ffi.new("cmsis_nn_conv_params *", [p.input_offset, p.output_offset, *common])

    def conv(self, call: ConvCall, feature: str) -> int:
        """arm_convolve_wrapper_s8_get_buffer_size* or the depthwise wrapper's, for the
        variant (general, 1x1, 1xN; depthwise 3x3, opt, generic) the wrapper picks."""
        name = call.function + "_get_buffer_size{}"
        return int(self._fn(name, feature)(self._conv_params(call.params),
                                           self._dims(call.input_dims),
                                           self._dims(call.filter_dims),
                                           self._dims(call.output_dims)))

    def fully_connected(self, call: FcCall, feature: str) -> int:
        """arm_fully_connected_s8_get_buffer_size*: the kernel sums (MVE), else 0. The
        per-channel kernel reads the same context."""
        return int(self._fn("arm_fully_connected_s8_get_buffer_size{}", feature)(
            self._dims(call.filter_dims)))

    def avgpool(self, output_width: int, channels: int, feature: str) -> int:
        """arm_avgpool_s8_get_buffer_size*(output width, channels)."""
        return int(self._fn("arm_avgpool_s8_get_buffer_size{}", feature)(
            int(output_width), int(channels)))

    def kernel_sums(self, call: FcCall) -> np.ndarray:
        """int32 [N]: arm_vector_sum_s8(weights, input_offset, filter_offset, bias) =
        bias + input_offset * (row sum + K * filter_offset), what arm_fully_connected_s8's MVE
        path expects in its context. Compile-time constants: they can live in flash."""
        n, k = call.weights.shape
        out = np.zeros(n, np.int32)
        w = np.ascontiguousarray(call.weights, np.int8)
        bias = (self.ffi.NULL if call.bias is None else
                self.ffi.from_buffer("int32_t[]", np.ascontiguousarray(call.bias, np.int32)))
        status = self.lib.arm_vector_sum_s8(  # type: ignore[attr-defined]
            self.ffi.from_buffer("int32_t[]", out), k, n, self.ffi.from_buffer("int8_t[]", w),
            call.params.input_offset, call.params.filter_offset, bias)
        if status != 0:
            raise AotcError(f"arm_vector_sum_s8 returned {status}")
        return out
