"""``--byoc cmsis-nn``: int8 kernels of a ``--requant tflite`` model handed to Arm's CMSIS-NN.

Each pattern's check refuses, with the reason, what CMSIS-NN cannot compute exactly as aotc's
own tflite kernels do (params.py's ``*_refusal``: uint8 activations, asymmetric weights,
dilation, ...); the claimed kernel's codegen emits one small C function per kernel that fills
CMSIS-NN's structs and calls the library, with the weights re-laid out for NHWC (OHWI, 1HWC,
[N, K]) and the per-channel multipliers/shifts as flash constants, and the scratch bytes the
library's own ``arm_*_get_buffer_size*`` asks for (scratch.py) planned in the arena.

Scratch size and the fully connected MVE context depend on the code path the library is built
for (pure C, DSP, MVE). With ``--target BOARD`` the board's features decide it; without a
target the bundle must run on any board, so it takes the largest size over the three, and
carries the fully connected kernel sums the MVE path reads (4 bytes per output, flash).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from aotc.byoc.backend import Backend, Constant, Emitted, Library, Pattern, Subgraph
from aotc.byoc.cmsis_nn import library, params
from aotc.byoc.cmsis_nn.library import FEATURES
from aotc.byoc.roots import register_root
from aotc.errors import AotcError
from aotc.ops.quant import arith as qmath

INCLUDES = ("arm_nnfunctions.h",)


def _int8(sub: Subgraph) -> bool:
    return sub.attr("_out") == "int8"


def _requant(sub: Subgraph) -> str | None:
    if sub.requant != "tflite":
        return ("--requant onnx rounds with float scales; CMSIS-NN implements TFLite's fixed "
                "point (--requant tflite)")
    return None


def _act(sub: Subgraph) -> tuple[int | None, int | None]:
    return sub.attr("_act_lo"), sub.attr("_act_hi")


# ------------------------------------------------------------------------------ conv
def _conv_args(sub: Subgraph) -> dict:
    from aotc.ops.nn.conv import conv_pads

    x, y = sub.input_type(0), sub.output_type(0)
    w = sub.const(3)
    assert x is not None and y is not None
    if w is None:
        raise AotcError("the weights are not a compile-time constant")
    nd = len(x.shape) - 2
    pb, pe = conv_pads(sub.node, x.shape[2:], w.shape[2:])
    return dict(x_shape=x.shape, w=w, bias=sub.const(8), y_shape=y.shape,
                strides=list(sub.node.attrs.get("strides") or [1] * nd), pads=pb + pe,
                dilations=list(sub.node.attrs.get("dilations") or [1] * nd),
                group=int(sub.node.attrs.get("group", 1)), w_zp=sub.attr("_wz"),
                x_dtype=x.dtype.name, y_dtype=y.dtype.name)


def _conv_check(sub: Subgraph) -> str | None:
    why = _requant(sub)
    if why:
        return why
    if sub.const(3) is None or (len(sub.inputs) > 8 and sub.inputs[8] and sub.const(8) is None):
        return "the weights and bias must be compile-time constants"
    a = _conv_args(sub)
    return params.conv_refusal(a["x_shape"], a["w"], a["bias"], x_dtype=a["x_dtype"],
                               y_dtype=a["y_dtype"], w_zp=a["w_zp"], group=a["group"],
                               strides=a["strides"], pads=a["pads"], dilations=a["dilations"],
                               y_shape=a["y_shape"])


# ------------------------------------------------------------------------------ fully connected
def _fc_check(sub: Subgraph) -> str | None:
    why = _requant(sub)
    if why:
        return why
    a, y, b = sub.input_type(0), sub.output_type(0), sub.const(3)
    assert a is not None and y is not None
    if b is None:
        return "B must be a compile-time constant"
    if len(a.shape) != 2:
        return f"A must be 2-D (rows x features), got {list(a.shape)}"
    if len(sub.inputs) > 8 and sub.inputs[8] and sub.const(8) is None:
        return "the bias must be a compile-time constant"
    why = params.fc_refusal(a.shape, b, sub.const(8), a_dtype=a.dtype.name,
                            y_dtype=y.dtype.name, b_zp=sub.attr("_wz"))
    real = np.atleast_1d(np.asarray(sub.attr("_real"), float))
    if why is None and a.dtype.name == "int16" and np.any(real != real[0]):
        return "per-channel 16x8 weights: arm_fully_connected_s16 takes one multiplier"
    return why


# ------------------------------------------------------------------------------ pooling
MS = "com.microsoft"


def _pool_geometry(sub: Subgraph):  # type: ignore[no-untyped-def]
    from aotc.ops.nn.pool import global_geometry, pool_geometry

    x = sub.input_type(0)
    assert x is not None
    if sub.op == "QLinearGlobalAveragePool":
        return global_geometry(x.shape[2:])
    return pool_geometry(sub.node, x.shape[2:])


def _pool_check(sub: Subgraph) -> str | None:
    x = sub.input_type(0)
    assert x is not None
    if len(x.shape) != 4:
        return f"only 2-D pooling (NCHW input), got input rank {len(x.shape)}"
    if sub.node.attrs.get("channels_last", 0):
        return "channels_last=1 is not supported"
    geo = _pool_geometry(sub)
    if any(int(d) != 1 for d in geo.dilations):
        return f"dilations {list(geo.dilations)} are not supported (only 1)"
    if sub.op == "MaxPool":
        if len([o for o in sub.node.outputs if o]) > 1:
            return "the Indices output is not supported"
        return None
    why = _requant(sub)
    if why:
        return why
    p = sub.attr("_p")
    if (p["sx"], p["zx"]) != (p["sy"], p["zy"]):
        return ("input and output scale and zero point differ: arm_avgpool_s8 does not "
                "requantise")
    if sub.node.attrs.get("count_include_pad", 0) and any(geo.pads_begin + geo.pads_end):
        return "count_include_pad=1 with padding is not supported (TFLite counts valid taps)"
    return None


# ------------------------------------------------------------------------------ softmax, add, mul
def _softmax_check(sub: Subgraph) -> str | None:
    from aotc.ops.quant.tables import QLinearSoftmax

    why = _requant(sub)
    if why:
        return why
    x = sub.input_type(0)
    assert x is not None
    if len(x.shape) == 4:
        return "4-D input: in NHWC the last axis would be the channels, not ONNX's last axis"
    if not QLinearSoftmax.fixed_point(sub.prepared, sub.attr("_p"), x.dtype.np):
        return ("the output must be int8 with scale 1/256 and zero point -128, the input scale "
                "above 2^-26 (TFLite's softmax)")
    _, shift, _ = qmath.softmax_params(sub.attr("_p")["sx"])
    if shift >= 31:
        return (f"input scale {sub.attr('_p')['sx']:g} needs a left shift of 31: "
                "arm_softmax_s8 computes 1 << 31 in int")
    return None


def _binary_check(sub: Subgraph) -> str | None:
    why = _requant(sub)
    if why:
        return why
    a, b = sub.input_type(0), sub.input_type(3)
    assert a is not None and b is not None
    if a.shape != b.shape:
        return f"broadcasting {list(a.shape)} with {list(b.shape)} is not supported"
    if b.dtype.name != "int8":
        return f"input B dtype {b.dtype.name} is not supported (int8)"
    return None


# ------------------------------------------------------------------------------ C text
# ------------------------------------------------------------------------------ LSTM
def _lstm_check(sub: Subgraph) -> str | None:
    why = _requant(sub)
    if why:
        return why
    if any(sub.const(i) is None for i in (1, 2, 3)):
        return "the weights and biases must be compile-time constants"
    return None


def _function(symbol: str, args: Sequence[str], body: Sequence[str]) -> str:
    return "\n".join([f"static AOTC_NOINLINE int {symbol}({', '.join(args)})", "{",
                      *(f"    {line}" for line in body), "}", ""])


def _dims(name: str, d: params.Dims) -> str:
    return f"const cmsis_nn_dims {name} = {d.c_init()};"


class CmsisNNBackend(Backend):
    name = "cmsis-nn"
    layout = "NHWC"

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.lib = library.locate(path)
        register_root(library.ENV_VAR, self.lib.root)  # builds in this process expand it
        self.features: tuple[str, ...] = FEATURES  # code paths the bundle may be built for
        self._scratch = None

    def configure(self, target: str | None, features: frozenset[str]) -> None:
        if target is None:
            self.features = FEATURES
        elif "mve" in features:
            self.features = ("mve",)
        elif "dsp" in features:
            self.features = ("dsp",)
        else:
            self.features = ("none",)  # the host, Cortex-M0+/M3, RISC-V: CMSIS-NN's pure C

    @property
    def scratch(self):  # type: ignore[no-untyped-def]
        if self._scratch is None:
            from aotc.byoc.cmsis_nn.scratch import Scratch

            self._scratch = Scratch(self.lib)  # type: ignore[assignment]
        return self._scratch

    def patterns(self) -> Sequence[Pattern]:
        return [
            Pattern("conv2d", "QLinearConv", dtypes=("int8", "int16"), check=_conv_check),
            Pattern("fully_connected", "QLinearMatMul", dtypes=("int8", "int16"),
                    check=_fc_check),
            Pattern("avgpool", "QLinearAveragePool", MS, dtypes=("int8",), check=_pool_check),
            Pattern("avgpool", "QLinearGlobalAveragePool", MS, dtypes=("int8",),
                    check=_pool_check),
            Pattern("maxpool", "MaxPool", dtypes=("int8",), check=_pool_check),
            Pattern("softmax", "QLinearSoftmax", MS, dtypes=("int8",), check=_softmax_check),
            Pattern("add", "QLinearAdd", MS, dtypes=("int8",), check=_binary_check),
            Pattern("mul", "QLinearMul", MS, dtypes=("int8",), check=_binary_check),
            Pattern("lstm", "QLstm", "aotc", dtypes=("int8",), check=_lstm_check),
        ]

    def libraries(self) -> Sequence[Library]:
        return [Library("cmsis-nn", tuple(self.lib.include_dirs), tuple(self.lib.sources()),
                        cflags=tuple(library.LIB_FLAGS),
                        cmake=library.cmake_snippet("cmsis-nn"),
                        root=(library.ENV_VAR, self.lib.root))]

    def codegen(self, sub: Subgraph, symbol: str) -> Emitted:
        if sub.op == "QLinearConv":
            return self._conv(sub, symbol)
        if sub.op == "QLinearMatMul":
            return self._fc(sub, symbol)
        if sub.op in ("QLinearAveragePool", "QLinearGlobalAveragePool", "MaxPool"):
            return self._pool(sub, symbol)
        if sub.op == "QLinearSoftmax":
            return self._softmax(sub, symbol)
        if sub.op in ("QLinearAdd", "QLinearMul"):
            return self._binary(sub, symbol)
        if sub.op == "QLstm":
            return self._lstm(sub, symbol)
        raise AotcError(f"no code generator for {sub.op}")

    # -------------------------------------------------------------------- pooling
    def _pool(self, sub: Subgraph, symbol: str) -> Emitted:
        x, y = sub.input_type(0), sub.output_type(0)
        assert x is not None and y is not None
        geo = _pool_geometry(sub)
        lo, hi = _act(sub)
        pool = (f"{{{{{geo.strides[1]}, {geo.strides[0]}}}, "
                f"{{{geo.pads_begin[1]}, {geo.pads_begin[0]}}}, "
                f"{params.activation(lo, hi).c_init()}}}")
        avg = sub.op != "MaxPool"
        fn = "arm_avgpool_s8" if avg else "arm_max_pool_s8"
        size = max(self.scratch.avgpool(y.shape[3], y.shape[1], f) for f in self.features) \
            if avg else 0
        body = [
            f"const cmsis_nn_context ctx = {{{'scratch' if size else 'NULL'}, {size}}};",
            f"const cmsis_nn_pool_params pool_params = {pool};",
            _dims("input_dims", params.nhwc_dims(x.shape)),
            _dims("filter_dims", params.Dims(1, geo.kernel[0], geo.kernel[1], 1)),
            _dims("output_dims", params.nhwc_dims(y.shape)),
            f"return (int){fn}(&ctx, &pool_params, &input_dims, input, &filter_dims, "
            f"&output_dims, output);",
        ]
        args = ["const int8_t *input", "int8_t *output"] + (["void *scratch"] if size else [])
        return Emitted(_function(symbol, args, body), (), size, INCLUDES,
                       f"{fn} (scratch {size} B)" if size else fn)

    # -------------------------------------------------------------------- softmax
    def _softmax(self, sub: Subgraph, symbol: str) -> Emitted:
        x = sub.input_type(0)
        assert x is not None
        mult, shift, diff_min = qmath.softmax_params(sub.attr("_p")["sx"])
        depth = x.shape[-1]
        rows = x.numel // depth
        body = [f"arm_softmax_s8(input, {rows}, {depth}, {mult}, {shift}, {diff_min}, output);",
                "return 0;"]
        return Emitted(_function(symbol, ["const int8_t *input", "int8_t *output"], body), (),
                       0, INCLUDES, "arm_softmax_s8")

    # -------------------------------------------------------------------- add, mul
    def _binary(self, sub: Subgraph, symbol: str) -> Emitted:

        from aotc.ops.quant.qlinear import QLinearAdd

        y = sub.output_type(0)
        assert y is not None
        p = sub.attr("_p")
        lo, hi = _act(sub)
        act = params.activation(lo, hi)
        ins = ["const int8_t *a", "const int8_t *b"] if len(sub.activations) == 2 else \
            ["const int8_t *a"]
        second = "b" if len(sub.activations) == 2 else "a"
        if sub.op == "QLinearAdd":
            (m1, s1), (m2, s2), (mo, so) = QLinearAdd._tfl(p)
            call = (f"return (int)arm_elementwise_add_s8(a, {second}, {-p['za']}, {m1}, {s1}, "
                    f"{-p['zb']}, {m2}, {s2}, {QLinearAdd.LEFT_SHIFT}, output, {p['zy']}, "
                    f"{mo}, {so}, {act.min}, {act.max}, {y.numel});")
            fn = "arm_elementwise_add_s8"
        else:
            m, sh = qmath.quantize_multiplier(p["sa"] * p["sb"] / p["sy"])
            call = (f"return (int)arm_elementwise_mul_s8(a, {second}, {-p['za']}, {-p['zb']}, "
                    f"output, {p['zy']}, {m}, {sh}, {act.min}, {act.max}, {y.numel});")
            fn = "arm_elementwise_mul_s8"
        return Emitted(_function(symbol, [*ins, "int8_t *output"], [call]), (), 0, INCLUDES, fn)

    # -------------------------------------------------------------------- conv
    def _conv(self, sub: Subgraph, symbol: str) -> Emitted:
        a = _conv_args(sub)
        lo, hi = _act(sub)
        call = params.conv_call(a["x_shape"], a["w"], a["bias"], a["y_shape"],
                                x_zp=sub.attr("_xz"), real=sub.attr("_real"), y_zp=sub.attr("_yz"),
                                w_zp=a["w_zp"], act_lo=lo, act_hi=hi, group=a["group"],
                                strides=a["strides"], pads=a["pads"], dilations=a["dilations"],
                                x_dtype=a["x_dtype"])
        size = max(self.scratch.conv(call, f) for f in self.features)
        consts = [Constant("weights", call.weights)]
        s16 = call.function.endswith("_s16")
        act_t = "int16_t" if s16 else "int8_t"
        args = [f"const {act_t} *input", f"{act_t} *output", "const int8_t *weights"]
        bias_arg = "bias" if call.bias is not None else "NULL"
        if call.bias is not None:
            consts.append(Constant("bias", call.bias))
            args.append(f"const {'int64_t' if call.bias.dtype == np.int64 else 'int32_t'} *bias")
        consts += [Constant("multiplier", call.multiplier), Constant("shift", call.shift)]
        args += ["const int32_t *multiplier", "const int32_t *shift"]
        if size > 0:
            args.append("void *scratch")
        ptype = "cmsis_nn_dw_conv_params" if call.depthwise else "cmsis_nn_conv_params"
        body = [
            f"const cmsis_nn_context ctx = {{{'scratch' if size else 'NULL'}, {size}}};",
            f"const {ptype} conv_params = {call.params.c_init()};",
            "const cmsis_nn_per_channel_quant_params quant = {(int32_t *)multiplier, "
            "(int32_t *)shift};",
            _dims("input_dims", call.input_dims), _dims("filter_dims", call.filter_dims),
            _dims("bias_dims", call.bias_dims), _dims("output_dims", call.output_dims),
        ]
        if s16 and not call.depthwise:  # the bias as a cmsis_nn_bias_data: int64 or int32
            is32 = call.bias is not None and call.bias.dtype == np.int32
            body.append(f"const cmsis_nn_bias_data bias_data = {{{bias_arg}, "
                        f"{'true' if is32 else 'false'}}};")
            bias_arg = "&bias_data"
        body += [
            f"return (int){call.function}(&ctx, &conv_params, &quant, &input_dims, input, "
            f"&filter_dims, weights,",
            f"    &bias_dims, {bias_arg}, &output_dims, output);",
        ]
        kind = "depthwise" if call.depthwise else "conv"
        return Emitted(_function(symbol, args, body), consts, size, INCLUDES,
                       f"{call.function} ({kind}, scratch {size} B)")

    # -------------------------------------------------------------------- fully connected
    def _fc(self, sub: Subgraph, symbol: str) -> Emitted:
        a, b = sub.input_type(0), sub.const(3)
        assert a is not None and b is not None
        lo, hi = _act(sub)
        call = params.fc_call(a.shape, b, sub.const(8), x_zp=sub.attr("_xz"),
                              real=sub.attr("_real"), y_zp=sub.attr("_yz"), w_zp=sub.attr("_wz"),
                              act_lo=lo, act_hi=hi, a_dtype=a.dtype.name)
        s16 = call.function.endswith("_s16")  # no context: no scratch, no kernel sums
        act_t = "int16_t" if s16 else "int8_t"
        consts = [Constant("weights", call.weights)]
        args = [f"const {act_t} *input", f"{act_t} *output", "const int8_t *weights"]
        if call.bias is not None:
            consts.append(Constant("bias", call.bias))
            args.append(f"const {'int64_t' if s16 else 'int32_t'} *bias")
        consts += [Constant("multiplier", call.multiplier), Constant("shift", call.shift)]
        args += ["const int32_t *multiplier", "const int32_t *shift"]
        mve = "mve" in self.features and not s16
        n_out = call.output_dims.c
        if mve:
            consts.append(Constant("kernel_sums", self.scratch.kernel_sums(call)))
            args.append("const int32_t *kernel_sums")
        if call.per_channel:
            quant = ("const cmsis_nn_per_channel_quant_params quant = {(int32_t *)multiplier, "
                     "(int32_t *)shift};")
        else:
            quant = "const cmsis_nn_per_tensor_quant_params quant = {multiplier[0], shift[0]};"
        if mve and len(self.features) == 1:
            ctx = [f"const cmsis_nn_context ctx = {{(void *)kernel_sums, {4 * n_out}}};"]
        elif mve:  # any board: the MVE path reads the kernel sums, the others nothing
            ctx = ["#if defined(ARM_MATH_MVEI)",
                   f"const cmsis_nn_context ctx = {{(void *)kernel_sums, {4 * n_out}}};",
                   "#else",
                   "const cmsis_nn_context ctx = {NULL, 0};",
                   "(void)kernel_sums;",
                   "#endif"]
        else:
            ctx = ["const cmsis_nn_context ctx = {NULL, 0};"]
        body = [*ctx,
                f"const cmsis_nn_fc_params fc_params = {call.params.c_init()};", quant,
                _dims("input_dims", call.input_dims), _dims("filter_dims", call.filter_dims),
                _dims("bias_dims", call.bias_dims), _dims("output_dims", call.output_dims),
                f"return (int){call.function}(&ctx, &fc_params, &quant, &input_dims, input, "
                f"&filter_dims, weights,",
                f"    &bias_dims, {'bias' if call.bias is not None else 'NULL'}, &output_dims, "
                f"output);"]
        text = _function(symbol, args, body).replace("    #", "#")
        return Emitted(text, consts, 0, INCLUDES, f"{call.function}")


    # -------------------------------------------------------------------- LSTM
    def _lstm(self, sub: Subgraph, symbol: str) -> Emitted:
        """TFLM's integer LSTM (aotc.QLstm, int8) as arm_lstm_unidirectional_s8, its
        parameters filled as TFLM's CMSIS-NN kernel fills them (kernel sums with the input and
        hidden offsets folded in), the states in aotc's state buffer: copied to the next
        state's buffer first when the planner did not place them over each other, then the
        library updates them (its own memcpy of the hidden state included)."""
        x = sub.input_type(0)
        assert x is not None
        wi, wr, bias = (np.asarray(sub.const(i)) for i in (1, 2, 3))
        a = sub.attr
        tm = int(a("time_major", 0))
        steps, batch = (x.shape[0], x.shape[1]) if tm else (x.shape[1], x.shape[0])
        n_in, hid = x.shape[2], wr.shape[-1]
        xz, hz = int(a("x_zero_point", 0)), int(a("h_zero_point", 0))
        sums_in = (bias.astype(np.int64) - xz * wi.astype(np.int64).sum(axis=2)).astype(np.int32)
        sums_rec = (-hz * wr.astype(np.int64).sum(axis=2)).astype(np.int32)
        consts = [Constant("w_in", wi.astype(np.int8)), Constant("w_rec", wr.astype(np.int8)),
                  Constant("sums_in", sums_in), Constant("sums_rec", sums_rec),
                  Constant("bias", bias.astype(np.int32))]
        size = 2 * batch * hid * 2  # temp1, temp2: int16 [batch, hidden] each
        args = ["const int8_t *input", "const int8_t *h_in", "const int16_t *c_in",
                "int8_t *output", "int8_t *h_out", "int16_t *c_out", "const int8_t *w_in",
                "const int8_t *w_rec", "const int32_t *sums_in", "const int32_t *sums_rec",
                "const int32_t *bias", "void *scratch"]

        def gate(g: int, act: str) -> str:
            return (f"{{{a('in_mult')[g]}, {a('in_shift')[g]}, w_in + {g * hid * n_in}, "
                    f"sums_in + {g * hid}, {a('rec_mult')[g]}, {a('rec_shift')[g]}, "
                    f"w_rec + {g * hid * hid}, sums_rec + {g * hid}, bias + {g * hid}, {act}}}")

        clip = int(a("cell_clip", 0)) or 32767  # no clip: int16's saturation
        body = [
            f"if (h_out != h_in) memcpy(h_out, h_in, {batch * hid});",
            f"if (c_out != c_in) memcpy(c_out, c_in, {batch * hid * 2});",
            "{",
            f"    const cmsis_nn_lstm_params p = {{{tm}, {batch}, {steps}, {n_in}, {hid}, "
            f"{-xz}, {a('fc_mult')}, {a('fc_shift')}, {a('ic_mult')}, {a('ic_shift')}, {clip}, "
            f"{a('cell_power')}, {a('out_mult')}, {a('out_shift')}, {hz},",
            f"        {gate(1, 'ARM_SIGMOID')},",
            f"        {gate(0, 'ARM_SIGMOID')},",
            f"        {gate(2, 'ARM_TANH')},",
            f"        {gate(3, 'ARM_SIGMOID')}}};",
            f"    cmsis_nn_lstm_context ctx = {{scratch, (int16_t *)scratch + {batch * hid}, "
            f"c_out, h_out}};",
            "    return (int)arm_lstm_unidirectional_s8(input, output, &p, &ctx);",
            "}",
        ]
        return Emitted(_function(symbol, args, body), consts, size, (*INCLUDES, "string.h"),
                       f"arm_lstm_unidirectional_s8 (scratch {size} B)")
