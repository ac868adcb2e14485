"""Checks of a .tflite model's structure before it is converted (importer.convert calls
``validate``; ``check_shapes`` after the conversion): what TFLite's schema forbids, or what TFLM
and LiteRT read differently from each other (so that no answer is the reference), is refused
with one line naming the operator (index and builtin) or tensor and the reason; aotc never
computes a third answer. Findings of ``scripts/fuzz.py --format tflite``.

* operator codes: ``deprecated_builtin_code`` and ``builtin_code`` agree (equal; or an old
  model's 0 with a code below 127; or the placeholder 127 with a code of 127 and above);
  the version of a builtin TFLM lacks is one LiteRT's reference kernels register;
* builtin options: the union's tag is the builtin's options type; the builtins TFLM needs
  options for (NEEDS_OPTIONS) have them; padding is SAME or VALID; a fused activation is a
  TFLite activation, and NONE, RELU, RELU_N1_TO_1 or RELU6 on the operators that clamp their
  output with it (TFLM and LiteRT ignore TANH and SIGN_BIT there); PACK's, UNPACK's and
  SPLIT's counts are the operator's; depth_multiplier agrees with the channels; strides,
  dilations and filter sizes are 1 to 32767 (TFLM's kernel parameters are int16);
* STRIDED_SLICE: no negative stride on a shrunk axis; quantised ADD and SUB: an output
  multiplier below 1 (TFLM aborts otherwise);
* operands: input and output counts of the common builtins (ARITY), one input type where the
  kernels require it (SAME_INPUTS), outputs of the data input's type (SAME_TYPE);
* tensors: operator and subgraph tensor indices in range (-1 only for an optional operator
  input), buffer indices in range, a variable tensor has no constant data, a constant's data
  is as long as its shape and type say, no NaN or infinity in a float constant;
* quantisation: scales finite and positive, as many zero points as scales (the per-channel
  axis and count: Builder.quant);
* the int32 (int64) bias of a quantised CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED or
  TRANSPOSE_CONV has the scale input scale x weight scale (TFLM assumes it and never reads
  the bias's own), and its values with the products of their channel fit TFLM's int32
  accumulator;
* shapes: every operator output's declared shape is the one the operator computes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aotc.errors import AotcError

TYPE_NAMES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "string",
              6: "bool", 7: "int16", 8: "complex64", 9: "int8", 10: "float64",
              11: "complex128", 12: "uint64", 13: "resource", 14: "variant", 15: "uint32",
              16: "uint16", 17: "int4", 18: "bfloat16"}

PLACEHOLDER = 127  # BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES
# Builtins TFLM has no kernel for (LiteRT's reference kernels are the only reference): the
# highest opcode version LiteRT's reference op resolver registers; it refuses a model above.
LITERT_ONLY_MAX_VERSION = {"TILE": 2}
# Options tables whose fused activation clamps the output (TFLM's CalculateActivationRange).
CLAMPING = {"Conv2DOptions", "DepthwiseConv2DOptions", "FullyConnectedOptions",
            "Pool2DOptions", "AddOptions", "SubOptions", "MulOptions", "DivOptions",
            "TransposeConvOptions", "L2NormOptions", "Conv3DOptions"}
ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
# TFLite type code -> bytes per element (int4: two per byte, counted apart).
ITEMSIZE = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 6: 1, 7: 2, 9: 1, 10: 8, 12: 8, 15: 4, 16: 2, 18: 2}
# (builtin, bias input index, weight input index, data input index)
BIASED = {"CONV_2D": (2, 1, 0), "DEPTHWISE_CONV_2D": (2, 1, 0), "FULLY_CONNECTED": (2, 1, 0),
          "TRANSPOSE_CONV": (3, 1, 2)}


_UNARY = ("SOFTMAX", "LOGISTIC", "TANH", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1",
          "HARD_SWISH", "LEAKY_RELU", "ELU", "ABS", "NEG", "EXP", "LOG", "SQRT", "RSQRT",
          "SQUARE", "SIN", "COS", "FLOOR", "CEIL", "ROUND", "SIGN", "LOG_SOFTMAX", "QUANTIZE",
          "DEQUANTIZE", "L2_NORMALIZATION", "GELU", "AVERAGE_POOL_2D", "MAX_POOL_2D",
          "L2_POOL_2D", "SQUEEZE", "LOGICAL_NOT", "ZEROS_LIKE", "CAST", "SHAPE")
_BINARY = ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "POW",
           "FLOOR_DIV", "FLOOR_MOD", "PRELU", "MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN",
           "REDUCE_PROD", "REDUCE_ANY", "REDUCE_ALL", "TRANSPOSE", "GATHER", "GATHER_ND",
           "EXPAND_DIMS", "TILE", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "BATCH_MATMUL",
           "MIRROR_PAD", "ARG_MAX", "ARG_MIN", "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL",
           "GREATER", "GREATER_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "BROADCAST_TO", "CUMSUM",
           "EMBEDDING_LOOKUP", "FILL")
# builtin -> (fewest inputs, most inputs, outputs): TFLM's and LiteRT's kernels check these
# counts (NumInputs / NumOutputs); -1 (no tensor) only as an input past the fewest.
ARITY: dict[str, tuple[int, int, int | None]] = {
    **{k: (1, 1, 1) for k in _UNARY}, **{k: (2, 2, 1) for k in _BINARY},
    "CONV_2D": (2, 3, 1), "DEPTHWISE_CONV_2D": (2, 3, 1), "FULLY_CONNECTED": (2, 3, 1),
    "TRANSPOSE_CONV": (3, 4, 1), "RESHAPE": (1, 2, 1), "PADV2": (2, 3, 1), "PAD": (2, 3, 1),
    "SPACE_TO_BATCH_ND": (3, 3, 1), "BATCH_TO_SPACE_ND": (3, 3, 1),
    "STRIDED_SLICE": (4, 4, 1), "SLICE": (3, 3, 1), "SPLIT": (2, 2, None),
    "SPLIT_V": (3, 3, None), "SELECT_V2": (3, 3, 1), "SVDF": (4, 5, 1),
    "DEPTH_TO_SPACE": (1, 1, 1), "SPACE_TO_DEPTH": (1, 1, 1), "REVERSE_V2": (2, 2, 1),
    "VAR_HANDLE": (0, 0, 1), "READ_VARIABLE": (1, 1, 1), "ASSIGN_VARIABLE": (2, 2, 0),
    "CALL_ONCE": (0, 0, 0),
}
# The weight's per-channel dimension (the output channels) of the weighted builtins.
WEIGHT_AXIS = {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 0, "TRANSPOSE_CONV": 0}
# Builtins whose inputs all have one type.
SAME_INPUTS = {"ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE",
               "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL",
               "CONCATENATION", "PACK", "ADD_N", "FLOOR_DIV", "FLOOR_MOD", "POW", "PRELU",
               "LOGICAL_AND", "LOGICAL_OR"}
# int8/int16 builtins whose output has the input's scale and zero point: TFLM's kernels move
# or compare the integers (and refuse or ignore other parameters); aotc would requantise.
SAME_PARAMS = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS", "AVERAGE_POOL_2D", "MAX_POOL_2D", "RELU6",
               "TRANSPOSE", "SPLIT", "SPLIT_V", "PACK", "UNPACK", "SPACE_TO_DEPTH",
               "DEPTH_TO_SPACE", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "GATHER"}
# Builtins whose outputs have the type of their data input (KIND_FROM's operand): TFLM's and
# LiteRT's kernels refuse another output type.
SAME_TYPE = {"CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "FULLY_CONNECTED",
             "CONCATENATION", "ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM",
             "AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D", "RESHAPE", "SQUEEZE", "TRANSPOSE",
             "PAD", "PADV2", "MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "LOGISTIC",
             "TANH", "RELU", "RELU6", "LEAKY_RELU", "HARD_SWISH", "STRIDED_SLICE", "SLICE",
             "SPLIT", "SPLIT_V", "PACK", "UNPACK", "GATHER", "EXPAND_DIMS", "TILE",
             "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "BATCH_MATMUL", "PRELU",
             "SQUARED_DIFFERENCE", "ELU", "ABS", "NEG", "EXP", "LOG", "SQRT", "RSQRT",
             "MIRROR_PAD", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "LOG_SOFTMAX", "SVDF"}


# Builtins whose options table is not named after them (the others: CamelCase + "Options").
OPTIONS_OF = {"AVERAGE_POOL_2D": "Pool2DOptions", "MAX_POOL_2D": "Pool2DOptions",
              "L2_POOL_2D": "Pool2DOptions", "L2_NORMALIZATION": "L2NormOptions",
              "MAXIMUM": "MaximumMinimumOptions", "MINIMUM": "MaximumMinimumOptions",
              "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
              "BIDIRECTIONAL_SEQUENCE_RNN": "BidirectionalSequenceRNNOptions",
              **{k: "ReducerOptions" for k in ("MEAN", "SUM", "REDUCE_PROD", "REDUCE_MAX",
                                                "REDUCE_MIN", "REDUCE_ANY", "REDUCE_ALL")}}
# Builtins whose options TFLM needs: without the table it runs on zeros (a stride, a count, a
# softmax beta, an SVDF rank of 0: a division by zero, an empty loop) where aotc's converters
# assume other defaults.
NEEDS_OPTIONS = {"CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "AVERAGE_POOL_2D",
                 "MAX_POOL_2D", "L2_POOL_2D", "SVDF", "PACK", "UNPACK", "SPLIT", "SPLIT_V",
                 "SOFTMAX", "LEAKY_RELU", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH",
                 "UNIDIRECTIONAL_SEQUENCE_LSTM", "CONV_3D", "VAR_HANDLE", "CALL_ONCE"}
# (options class, field, what it counts): the count must be the operator's.
COUNTS = {"PACK": ("ValuesCount", "inputs"), "UNPACK": ("Num", "outputs"),
          "SPLIT": ("NumSplits", "outputs"), "SPLIT_V": ("NumSplits", "outputs")}


def expected_options(name: str) -> str | None:
    """The options class TFLite's schema gives builtin ``name`` (None: none known)."""
    if name in OPTIONS_OF:
        return OPTIONS_OF[name]
    key = name.replace("_", "")
    for cls in _option_classes().values():
        if cls.endswith("Options") and cls[:-7].upper() == key:
            return cls
    return None


def _err(i: int, name: str, reason: str) -> AotcError:
    return AotcError(f"operator {i} {name}: {reason}")


def _option_classes() -> dict[int, str]:
    import tflite

    return {v: k for k, v in vars(tflite.BuiltinOptions).items()
            if not k.startswith("_") and isinstance(v, int)}


def options_table(op: Any) -> tuple[str, Any] | None:
    """(class name, table) of an operator's builtin options, as its union tag says."""
    import tflite

    t = op.BuiltinOptions()
    name = _option_classes().get(op.BuiltinOptionsType())
    if t is None or name is None or not hasattr(tflite, name):
        return None
    o = getattr(tflite, name)()
    o.Init(t.Bytes, t.Pos)
    return name, o


def _raw_builtin_code(oc: Any) -> int:
    """The builtin_code field as stored (the ``tflite`` package's BuiltinCode() returns the
    deprecated code in its place when the field is below 127)."""
    import flatbuffers

    o = oc._tab.Offset(10)
    return int(oc._tab.Get(flatbuffers.number_types.Int32Flags, o + oc._tab.Pos)) if o else 0


def check_codes(model: Any, sub: Any, used: list[str]) -> None:
    from tflite.utils import BUILTIN_OPCODE2NAME

    def nm(c: int) -> str:
        return BUILTIN_OPCODE2NAME.get(c, f"code {c}")

    for i in range(sub.OperatorsLength()):
        oc = model.OperatorCodes(sub.Operators(i).OpcodeIndex())
        if oc.Version() < 1:
            raise _err(i, used[i], f"opcode version {oc.Version()} (TFLite's versions start "
                                   f"at 1)")
        top = LITERT_ONLY_MAX_VERSION.get(used[i])
        if top is not None and oc.Version() > top:
            raise _err(i, used[i], f"opcode version {oc.Version()}; TFLM has no {used[i]} and "
                                   f"LiteRT's reference kernels take versions 1 to {top}")
        dep, new = oc.DeprecatedBuiltinCode(), _raw_builtin_code(oc)
        if dep == new or (new == 0 and 0 <= dep < PLACEHOLDER) or (
                dep == PLACEHOLDER and new >= PLACEHOLDER):
            continue
        raise _err(i, used[i], f"deprecated_builtin_code {dep} ({nm(dep)}) and builtin_code {new} "
                        f"({nm(new)}) disagree (TFLite's schema: equal, or the placeholder "
                        f"127 for codes above 127)")


def check_options(sub: Any, used: list[str]) -> None:
    for i in range(sub.OperatorsLength()):
        op = sub.Operators(i)
        want = expected_options(used[i])
        tag = op.BuiltinOptionsType()
        if want is not None and tag != 0 and _option_classes().get(tag) != want:
            raise _err(i, used[i], f"builtin options of type "
                                   f"{_option_classes().get(tag, tag)}; {used[i]} takes {want}")
        if tag == 0 and used[i] in NEEDS_OPTIONS:
            raise _err(i, used[i], f"no builtin options ({used[i]} needs its {want})")
        try:
            got = options_table(op)
        except Exception:  # noqa: BLE001 - a malformed table is reported when converted
            continue
        if got is None:
            continue
        name, o = got
        if used[i] in COUNTS:
            field, what = COUNTS[used[i]]
            n = op.InputsLength() if what == "inputs" else op.OutputsLength()
            if getattr(o, field)() != n:
                raise _err(i, used[i], f"{name}.{field} is {getattr(o, field)()} for {n} {what}")
        for field in ("StrideW", "StrideH", "StrideD", "DilationWFactor", "DilationHFactor",
                      "DilationDFactor", "FilterWidth", "FilterHeight"):
            if hasattr(o, field) and not 1 <= getattr(o, field)() <= 32767:
                raise _err(i, used[i], f"{name}.{field} is {getattr(o, field)()} (1 to 32767: "
                                       f"TFLM keeps it in an int16)")
        if hasattr(o, "QuantizedBiasType") and o.QuantizedBiasType() not in TYPE_NAMES:
            raise _err(i, used[i], f"{name}.quantized_bias_type {o.QuantizedBiasType()} is not "
                                   f"a TFLite type")
        if name == "ConcatenationOptions":
            if o.FusedActivationFunction() != 0:
                raise _err(i, used[i], "a fused activation on CONCATENATION (TFLM and LiteRT "
                                       "take NONE only)")
            _check_axis(sub, i, op, used[i], o.Axis())
        if name == "SoftmaxOptions":
            _check_softmax(sub, i, op, o, used[i])
        if name == "DepthwiseConv2DOptions":
            _check_depth_multiplier(sub, i, op, o, used[i])
        if hasattr(o, "Padding") and o.Padding() not in (0, 1):
            raise _err(i, used[i], f"{name}.padding is {o.Padding()} (TFLite has SAME 0 and "
                                   f"VALID 1)")
        if hasattr(o, "FusedActivationFunction"):
            act = o.FusedActivationFunction()
            if act not in ACTIVATIONS:
                raise _err(i, used[i], f"{name}.fused_activation_function is {act}, not a "
                                       f"TFLite activation")
            if name in CLAMPING and act > 3:
                raise _err(i, used[i], f"fused activation {ACTIVATIONS[act]} is not supported "
                                       f"(TFLM and LiteRT ignore it; only NONE, RELU, "
                                       f"RELU_N1_TO_1 and RELU6 clamp the output)")


def _check_axis(sub: Any, i: int, op: Any, name: str, axis: int) -> None:
    if op.InputsLength() < 1 or op.Inputs(0) < 0:
        return
    rank = sub.Tensors(op.Inputs(0)).ShapeLength()
    if not -rank <= axis < max(rank, 1):
        raise _err(i, name, f"axis {axis} of a rank-{rank} input")


def _check_softmax(sub: Any, i: int, op: Any, o: Any, name: str) -> None:
    """beta finite and positive; on int8, beta x input scale x 2^26 > 1 (TFLM and LiteRT
    abort on a smaller requantisation multiplier)."""
    beta = o.Beta()
    if not (np.isfinite(beta) and beta > 0):
        raise _err(i, name, f"SoftmaxOptions.beta is {beta} (finite and positive: TFLM and "
                            f"LiteRT abort on others)")
    if op.InputsLength() < 1 or op.Inputs(0) < 0:
        return
    x = sub.Tensors(op.Inputs(0))
    q = x.Quantization()
    if x.Type() == 9 and q is not None and q.ScaleLength() == 1 and \
            beta * q.Scale(0) * 2.0 ** 26 <= 1.0:
        raise _err(i, name, f"beta {beta:g} x input scale {q.Scale(0):g} is too small for "
                            f"TFLM's int8 softmax (it aborts)")


def _check_depth_multiplier(sub: Any, i: int, op: Any, o: Any, name: str) -> None:
    """TFLM computes with depth_multiplier, LiteRT infers it from the shapes: they agree only
    when output channels = input channels x depth_multiplier."""
    if op.InputsLength() < 1 or op.OutputsLength() < 1 or min(op.Inputs(0), op.Outputs(0)) < 0:
        return
    x, y = sub.Tensors(op.Inputs(0)), sub.Tensors(op.Outputs(0))
    if x.ShapeLength() != 4 or y.ShapeLength() != 4:
        return
    cin, cout, mult = int(x.Shape(3)), int(y.Shape(3)), o.DepthMultiplier()
    if cin > 0 and cout > 0 and cin * mult != cout:
        raise _err(i, name, f"depth_multiplier {mult} with {cin} input and {cout} output "
                            f"channels")


def _elements(shape: list[int]) -> int | None:
    if any(d < 0 for d in shape):
        return None
    return int(np.prod(shape, dtype=np.int64))


def check_tensors(model: Any, sub: Any, used: list[str]) -> None:
    n_t, n_b = sub.TensorsLength(), model.BuffersLength()
    for side, get, count in (("input", sub.Inputs, sub.InputsLength()),
                             ("output", sub.Outputs, sub.OutputsLength())):
        for k in range(count):
            if not 0 <= get(k) < n_t:
                raise AotcError(f"subgraph {side} {k} is tensor {get(k)}, beyond the "
                                f"{n_t} tensors")
    for i in range(sub.OperatorsLength()):
        op = sub.Operators(i)
        for side, get, count in (("input", op.Inputs, op.InputsLength()),
                                 ("output", op.Outputs, op.OutputsLength())):
            for k in range(count):
                t = get(k)
                if (t == -1 and side == "input") or 0 <= t < n_t:
                    continue
                raise _err(i, used[i], f"{side} {k} is tensor {t}, beyond the {n_t} tensors")
    graph_inputs = {int(sub.Inputs(k)) for k in range(sub.InputsLength())}
    for j in range(n_t):
        t = sub.Tensors(j)
        name = (t.Name() or b"").decode("utf-8", "replace")
        where = f"tensor {j} {name!r}"
        if not 0 <= t.Buffer() < n_b:
            raise AotcError(f"{where}: buffer {t.Buffer()} beyond the {n_b} buffers")
        buf = model.Buffers(t.Buffer())
        size = buf.DataLength() if buf is not None else 0
        if size == 0 and buf is not None and buf.Offset() > 1:
            size = int(buf.Size())
        if size and t.IsVariable():
            raise AotcError(f"{where}: a variable tensor with constant data (TFLM and LiteRT "
                            f"differ on which value it starts from)")
        shape = [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else []
        n = _elements(shape)
        if size and n is not None and t.Type() in ITEMSIZE and t.Sparsity() is None \
                and n * ITEMSIZE[t.Type()] != size:
            raise AotcError(f"{where}: {size} bytes of data for shape {shape} of "
                            f"{n * ITEMSIZE[t.Type()]} bytes")
        if size and t.Type() == 0 and buf.DataLength() == size and size % 4 == 0 \
                and not np.isfinite(buf.DataAsNumpy().view(np.float32)).all():
            raise AotcError(f"{where}: a float constant holding NaN or infinity (TFLite's "
                            f"kernels compare and clamp them differently from aotc's)")
        _check_quant(t, where, shape, const=bool(size), graph_input=j in graph_inputs)


def _check_quant(t: Any, where: str, shape: list[int], const: bool = True,
                 graph_input: bool = False) -> None:
    q = t.Quantization()
    if q is None or q.ScaleLength() == 0:
        return
    if not const and t.Type() == 7 and q.ZeroPointLength() == 1 and q.ZeroPoint(0) != 0:
        raise AotcError(f"{where}: an int16 activation with zero point {q.ZeroPoint(0)} (TFLite's "
                        f"16x8 activations are symmetric; TFLM assumes 0)")
    if graph_input and q.ScaleLength() > 1:  # an operator's output: Builder.fout names it
        raise AotcError(f"{where}: per-channel quantisation of a graph input "
                        f"({q.ScaleLength()} scales; TFLM's kernels read one)")
    scale = q.ScaleAsNumpy()
    zps = q.ZeroPointLength()
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        bad = scale[~(np.isfinite(scale) & (scale > 0))][0]
        raise AotcError(f"{where}: quantisation scale {bad} (must be finite and positive)")
    if zps != len(scale):
        raise AotcError(f"{where}: {len(scale)} quantisation scales and {zps} zero points")
    # per-channel axis and count: Builder.quant (a 1-D bias is read along its only axis)


def _check_softmax_output(sub: Any, i: int, name: str, y: int) -> None:
    """An int8 SOFTMAX writes scale 1/256 and zero point -128, an int16 one 1/32768 and 0
    (TFLM and LiteRT refuse others)."""
    t = sub.Tensors(y)
    q = t.Quantization()
    want = {9: (1 / 256, -128), 7: (1 / 32768, 0)}.get(t.Type())
    if want is None or q is None or q.ScaleLength() != 1 or q.ZeroPointLength() != 1:
        return
    if abs(q.Scale(0) - want[0]) > 1e-3 * want[0] or q.ZeroPoint(0) != want[1]:
        raise _err(i, name, f"output scale {q.Scale(0):.6g} and zero point {q.ZeroPoint(0)}; "
                            f"an {TYPE_NAMES[t.Type()]} SOFTMAX writes {want[0]:.6g} and "
                            f"{want[1]}")


def _check_same_params(sub: Any, i: int, name: str, ins: list[int], y: int) -> None:
    """An int8 or int16 CONCATENATION or SAME_PARAMS builtin: every input has the output's
    scale and zero point (TFLM refuses or ignores others)."""
    ty = sub.Tensors(y)
    qy = ty.Quantization()
    if ty.Type() not in (9, 7) or qy is None or qy.ScaleLength() != 1 or qy.ZeroPointLength() != 1:
        return
    for k, t in enumerate(ins):
        q = sub.Tensors(t).Quantization()
        if q is None or q.ScaleLength() != 1 or q.ZeroPointLength() != 1:
            continue
        if np.float32(q.Scale(0)) != np.float32(qy.Scale(0)) or q.ZeroPoint(0) != qy.ZeroPoint(0):
            raise _err(i, name, f"input {k} has scale {q.Scale(0):.6g} and zero point "
                                f"{q.ZeroPoint(0)}, the output {qy.Scale(0):.6g} and "
                                f"{qy.ZeroPoint(0)} (TFLM requires them equal)")


def _check_divisor(sub: Any, i: int, name: str, t: int, model: Any) -> None:
    """A constant integer divisor holding zero (its zero point when quantised): TFLM's integer
    kernels and aotc's saturate the infinity differently."""
    tt = sub.Tensors(t)
    if tt.Type() not in (9, 7, 2, 3) or not 0 <= tt.Buffer() < model.BuffersLength():
        return
    buf = model.Buffers(tt.Buffer())
    if buf is None or not buf.DataLength():
        return
    dt = {9: np.int8, 7: np.int16, 2: np.int32, 3: np.uint8}[tt.Type()]
    raw = buf.DataAsNumpy()
    if raw.size % np.dtype(dt).itemsize:
        return
    q = tt.Quantization()
    zero = q.ZeroPoint(0) if q is not None and q.ZeroPointLength() == 1 else 0
    if (raw.view(dt) == zero).any():
        raise _err(i, name, f"the constant divisor {tt.Name().decode('utf-8', 'replace')!r} "
                            f"holds zero")


def _check_shrink_stride(sub: Any, i: int, name: str, op: Any, t: int, model: Any) -> None:
    """A negative stride on a shrunk axis: TFLM and LiteRT stop the axis at begin + 1, so the
    slice is empty and they return uninitialised memory (each its own)."""
    got = options_table(op)
    if got is None or got[0] != "StridedSliceOptions":
        return
    shrink = got[1].ShrinkAxisMask()
    strides = _const(model, sub.Tensors(t), np.int32) if sub.Tensors(t).Type() == 2 else None
    if strides is None or not shrink:
        return
    for ax, st in enumerate(strides):
        if shrink >> ax & 1 and st < 0:
            raise _err(i, name, f"stride {int(st)} on axis {ax} of shrink_axis_mask {shrink} "
                                f"(TFLM and LiteRT slice nothing and return uninitialised "
                                f"memory)")


def _check_add_multiplier(sub: Any, i: int, name: str, ins: list[int], y: int) -> None:
    """Quantised ADD and SUB: TFLM's (and LiteRT's) output multiplier 2 x the larger input
    scale / (2^left_shift x the output scale), left shift 20 (8-bit) or 15 (int16), must be
    below 1 (QuantizeMultiplierSmallerThanOneExp aborts otherwise)."""
    ts = [sub.Tensors(t) for t in ins + [y]]
    if any(t.Type() not in (9, 3, 7) for t in ts):
        return
    qs = [t.Quantization() for t in ts]
    if any(q is None or q.ScaleLength() != 1 for q in qs):
        return
    sc = [float(np.float32(q.Scale(0))) for q in qs]
    shift = 15 if ts[-1].Type() == 7 else 20
    ratio = 2 * max(sc[:-1]) / (2.0 ** shift * sc[-1])
    if not ratio < 1:
        raise _err(i, name, f"input scale {max(sc[:-1]):.6g} with output scale {sc[-1]:.6g}: "
                            f"output multiplier {ratio:.6g} is not below 1 (TFLM and LiteRT "
                            f"abort)")


def check_operands(sub: Any, used: list[str], model: Any,
                   kind_from: dict[str, tuple[str, int]]) -> None:
    for i in range(sub.OperatorsLength()):
        name = used[i]
        op = sub.Operators(i)
        ins = [int(op.Inputs(k)) for k in range(op.InputsLength())]
        outs = [int(op.Outputs(k)) for k in range(op.OutputsLength())]
        if name in ARITY:
            lo, hi, n_out = ARITY[name]
            if not lo <= len(ins) <= hi:
                raise _err(i, name, f"{len(ins)} inputs; {name} takes "
                                    f"{lo if lo == hi else f'{lo} to {hi}'}")
            if -1 in ins[:lo]:
                raise _err(i, name, f"input {ins.index(-1)} is missing (-1)")
            if n_out is not None and len(outs) != n_out:
                raise _err(i, name, f"{len(outs)} outputs; {name} has {n_out}")
        if name in SAME_INPUTS:
            types = {sub.Tensors(t).Type() for t in ins if t >= 0}
            if len(types) > 1:
                names = ", ".join(TYPE_NAMES.get(t, str(t)) for t in sorted(types))
                raise _err(i, name, f"inputs of types {names} (TFLM and LiteRT require one "
                                    f"type)")
        if name in ("DIV", "FLOOR_DIV", "FLOOR_MOD") and len(ins) == 2 and ins[1] >= 0:
            _check_divisor(sub, i, name, ins[1], model)
        if name == "PRELU" and len(ins) == 2 and min(ins) >= 0:
            xs, al = ([int(d) for d in sub.Tensors(t).ShapeAsNumpy()]
                      if sub.Tensors(t).ShapeLength() else [] for t in ins)
            try:
                ok = list(np.broadcast_shapes(tuple(xs), tuple(al))) == xs
            except ValueError:
                ok = False
            if not ok:
                raise _err(i, name, f"alpha of shape {al} does not broadcast to the input's "
                                    f"{xs}")
        if name in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR") and len(ins) > 1 \
                and ins[1] >= 0:
            size = [int(d) for d in sub.Tensors(ins[1]).ShapeAsNumpy()] \
                if sub.Tensors(ins[1]).ShapeLength() else []
            if size != [2]:
                raise _err(i, name, f"size of shape {size} (TFLM and LiteRT take [2])")
        if name == "STRIDED_SLICE" and len(ins) == 4 and ins[3] >= 0:
            _check_shrink_stride(sub, i, name, op, ins[3], model)
        if name in ("ADD", "SUB") and len(ins) == 2 and min(ins) >= 0 and outs and \
                outs[0] >= 0:
            _check_add_multiplier(sub, i, name, ins, outs[0])
        if name in SAME_PARAMS:
            side, k = kind_from.get(name, ("in", 0))
            if side == "in" and k < len(ins) and ins[k] >= 0:
                for y in outs:
                    if y >= 0:
                        _check_same_params(sub, i, name, [ins[k]], y)
        if name == "SOFTMAX" and ins and outs and min(ins[0], outs[0]) >= 0:
            _check_softmax_output(sub, i, name, outs[0])
        if name == "CONCATENATION" and outs and outs[0] >= 0:
            _check_same_params(sub, i, name, [t for t in ins if t >= 0], outs[0])
        if name in SAME_TYPE:
            side, k = kind_from.get(name, ("in", 0))
            if side != "in" or k >= len(ins) or ins[k] < 0:
                continue
            want = sub.Tensors(ins[k]).Type()
            for j, t in enumerate(outs):
                if t >= 0 and sub.Tensors(t).Type() != want:
                    got = sub.Tensors(t).Type()
                    raise _err(i, name, f"output {j} is {TYPE_NAMES.get(got, got)}, its input "
                                        f"{k} {TYPE_NAMES.get(want, want)} (TFLM and LiteRT "
                                        f"require the same type)")


def _check_weight(i: int, name: str, w: Any, x: Any) -> None:
    """An int8 or int16 data input takes int8 (or int4) weights, quantised per tensor or per
    output channel (TFLM's and LiteRT's kernels refuse other weights or read one scale)."""
    if x.Type() in (9, 7) and w.Type() not in (9, 17):
        raise _err(i, name, f"{TYPE_NAMES.get(w.Type(), w.Type())} weights for an "
                            f"{TYPE_NAMES[x.Type()]} input (int8 or int4 weights)")
    if x.Type() == 3 and w.Type() != 3:
        raise _err(i, name, f"{TYPE_NAMES.get(w.Type(), w.Type())} weights for a uint8 input "
                            f"(uint8 weights)")
    q = w.Quantization()
    if q is not None and q.ScaleLength() > 1 and q.QuantizedDimension() != WEIGHT_AXIS[name] \
            and 0 <= q.QuantizedDimension() < w.ShapeLength():  # others: Builder.quant
        raise _err(i, name, f"per-channel weight scales along dimension "
                            f"{q.QuantizedDimension()}; {name} takes them along dimension "
                            f"{WEIGHT_AXIS[name]} (its output channels)")


def _check_transpose_conv(i: int, name: str, xs: list[int], ws: list[int], ys: list[int],
                          got: Any) -> None:
    """The declared output height and width are the ones TFLite's converter writes for the
    stride and padding (SAME: input x stride; VALID: (input - 1) x stride + kernel): TFLM
    and aotc place other output sizes differently."""
    if got is None or got[0] != "TransposeConvOptions" or len(xs) != 4 or len(ws) != 4 \
            or len(ys) != 4:
        return
    o = got[1]
    for k, (n_in, kk, st, n_out) in enumerate(zip(xs[1:3], ws[1:3], (o.StrideH(), o.StrideW()),
                                                  ys[1:3])):
        want = n_in * st if o.Padding() == 0 else (n_in - 1) * st + kk
        if n_out != want:
            raise _err(i, name, f"output {'height' if k == 0 else 'width'} {n_out}; stride "
                                f"{st} and {'SAME' if o.Padding() == 0 else 'VALID'} padding "
                                f"on {n_in} give {want}")


def check_declared(sub: Any, used: list[str]) -> None:
    """The output shapes of the builtins whose converters take the declared shape (a Reshape
    to it): FULLY_CONNECTED [batch, units] (or the input's leading dims with keep_num_dims),
    SQUEEZE the input without the squeezed dims. TFLM and LiteRT differ on others."""
    for i in range(sub.OperatorsLength()):
        name = used[i]
        if name not in ("FULLY_CONNECTED", "SQUEEZE", "TRANSPOSE_CONV", "SVDF"):
            continue
        op = sub.Operators(i)
        ins = [int(op.Inputs(k)) for k in range(op.InputsLength())]
        outs = [int(op.Outputs(k)) for k in range(op.OutputsLength())]
        if not ins or not outs or min(ins[:2] + outs[:1]) < 0:
            continue

        def shape(t: int) -> list[int]:
            tt = sub.Tensors(t)
            return [int(d) for d in tt.ShapeAsNumpy()] if tt.ShapeLength() else []

        xs, ys = shape(ins[0]), shape(outs[0])
        if any(d < 0 for d in xs + ys):
            continue
        got = options_table(op)
        if name == "TRANSPOSE_CONV":  # inputs: output shape, filter, data
            _check_transpose_conv(i, name, shape(ins[2]) if len(ins) > 2 and ins[2] >= 0
                                  else [], shape(ins[1]), ys, got)
            continue
        if name == "SVDF":
            if len(ins) > 4 and ins[4] >= 0 and got is not None and len(xs) == 2:
                st, ws = shape(ins[4]), shape(ins[1])
                mem = shape(ins[2])[1] if len(shape(ins[2])) == 2 else -1
                if ws and mem > 0 and st != [xs[0], ws[0] * mem]:
                    raise _err(i, name, f"activation state of shape {st}; SVDF with batch "
                                        f"{xs[0]}, {ws[0]} filters and memory {mem} takes "
                                        f"{[xs[0], ws[0] * mem]}")
            continue
        if name == "SQUEEZE":
            dims = [int(d) for d in got[1].SqueezeDimsAsNumpy()] \
                if got is not None and got[1].SqueezeDimsLength() else []
            dims = [d + len(xs) if d < 0 else d for d in dims]
            if any(not 0 <= d < len(xs) or xs[d] != 1 for d in dims):
                raise _err(i, name, f"squeeze_dims {dims} of an input of shape {xs}")
            want = [d for k, d in enumerate(xs) if (k not in dims if dims else d != 1)]
        else:
            ws = shape(ins[1])
            if len(ws) != 2 or not xs or xs[-1] == 0 or int(np.prod(xs)) % ws[1]:
                continue
            keep = got is not None and got[0] == "FullyConnectedOptions" and \
                bool(got[1].KeepNumDims())
            want = xs[:-1] + [ws[0]] if keep else [int(np.prod(xs)) // ws[1], ws[0]]
        if ys != want:
            raise _err(i, name, f"output declared {ys}; {name} computes {want}")


def _const(model: Any, t: Any, dt: Any) -> np.ndarray | None:
    """The constant data of tensor ``t`` as ``dt`` (None: no data, or not a whole number of
    elements)."""
    if not 0 <= t.Buffer() < model.BuffersLength():
        return None
    buf = model.Buffers(t.Buffer())
    if buf is None or not buf.DataLength():
        return None
    raw = buf.DataAsNumpy()
    return None if raw.size % np.dtype(dt).itemsize else raw.view(dt)


def _check_accumulator(i: int, name: str, model: Any, b: Any, w: Any, x: Any) -> None:
    """An int32 bias plus the largest product sum of its output channel must fit in int32:
    TFLM's int8 kernels add them in an int32 that wraps; aotc's accumulator does not."""
    if b.Type() != 2 or w.Type() != 9 or x.Type() not in (9, 3):
        return
    bias, wts = _const(model, b, np.int32), _const(model, w, np.int8)
    if bias is None or wts is None or not bias.size or wts.size % bias.size:
        return
    ax = WEIGHT_AXIS[name] if name in WEIGHT_AXIS else 0
    shape = [int(d) for d in w.ShapeAsNumpy()] if w.ShapeLength() else []
    if int(np.prod(shape)) != wts.size or not 0 <= ax < len(shape) or \
            shape[ax] != bias.size:
        return
    per = np.abs(np.moveaxis(wts.reshape(shape).astype(np.int64), ax, 0)).reshape(
        bias.size, -1).sum(axis=1)
    worst = np.abs(bias.astype(np.int64)) + 255 * per  # |x - zero point| <= 255
    if (worst > 2**31 - 1).any():
        c = int(np.argmax(worst))
        raise _err(i, name, f"bias {int(bias[c])} of output channel {c} with its products can "
                            f"overflow TFLM's int32 accumulator")


def check_bias(sub: Any, used: list[str], model: Any = None) -> None:
    """TFLM's int8 kernels requantise with input scale x weight scale and never read the bias
    scale: a bias of another scale would give a third answer."""
    for i in range(sub.OperatorsLength()):
        if used[i] not in BIASED:
            continue
        op = sub.Operators(i)
        bi, wi, xi = BIASED[used[i]]
        if op.InputsLength() <= max(wi, xi) or min(op.Inputs(wi), op.Inputs(xi)) < 0:
            continue
        _check_weight(i, used[i], sub.Tensors(op.Inputs(wi)), sub.Tensors(op.Inputs(xi)))
        if op.InputsLength() <= bi:
            continue
        tb, tw, tx = (op.Inputs(bi), op.Inputs(wi), op.Inputs(xi))
        if min(tb, tw, tx) < 0:
            continue
        b, w, x = (sub.Tensors(tb), sub.Tensors(tw), sub.Tensors(tx))
        if model is not None and used[i] != "TRANSPOSE_CONV":
            _check_accumulator(i, used[i], model, b, w, x)
        qs = [t.Quantization() for t in (b, w, x)]
        if any(q is None or q.ScaleLength() == 0 for q in qs) or b.Type() not in (2, 4):
            continue
        sb, sw, sx = (q.ScaleAsNumpy().astype(np.float64) for q in qs)
        if len(sx) != 1 or (len(sb) not in (1, len(sw)) and len(sw) != 1):
            continue  # counts that disagree with the channels: Builder.quant names them
        sb, want = np.broadcast_arrays(sb, sx[0] * sw)
        if not np.allclose(sb, want, rtol=1e-3, atol=0):
            raise _err(i, used[i], "the bias scale is not input scale x weight scale (TFLM "
                                   "assumes it is)")


# The Model table's fields (schema.fbs order): "u" a scalar, "t" a vector of tables, "i" a
# vector of int32, "s" a string.
MODEL_FIELDS = ("u", "t", "t", "s", "t", "i", "t", "t")


def check_flatbuffer(data: bytes) -> str | None:
    """What flatbuffers' verifier (LiteRT runs it, TFLM's reader fails on it) finds wrong in the
    root Model table of ``data``, or None: the table and its vtable inside the buffer, every
    field inside the table, every vector, string and table a field leads to inside the buffer
    and aligned, the vtable of each table of a vector inside the buffer. A partial verifier:
    aotc reads the fields it uses with bounds checks; this covers the fields it skips."""
    n = len(data)

    def u32(p: int) -> int:
        return int.from_bytes(data[p:p + 4], "little")

    def table(pos: int) -> str | None:
        if pos % 4 or pos + 4 > n:
            return f"a table at byte {pos} outside the buffer or misaligned"
        vt = pos - int.from_bytes(data[pos:pos + 4], "little", signed=True)
        if vt < 0 or vt % 2 or vt + 4 > n:
            return f"the vtable of the table at byte {pos} is outside the buffer"
        vsize, tsize = (int.from_bytes(data[vt + k:vt + k + 2], "little") for k in (0, 2))
        if vsize < 4 or vsize % 2 or vt + vsize > n or tsize < 4 or pos + tsize > n:
            return f"the vtable of the table at byte {pos} has sizes {vsize}, {tsize}"
        return None

    def field(pos: int, k: int) -> int:
        vt = pos - int.from_bytes(data[pos:pos + 4], "little", signed=True)
        vsize = int.from_bytes(data[vt:vt + 2], "little")
        return int.from_bytes(data[vt + 4 + 2 * k:vt + 6 + 2 * k], "little") \
            if 4 + 2 * k < vsize else 0

    if n < 8:
        return "shorter than a flatbuffer header"
    root = u32(0)
    bad = table(root)
    if bad:
        return bad
    tsize = int.from_bytes(data[root - int.from_bytes(data[root:root + 4], "little",
                                                       signed=True) + 2:][:2], "little")
    for k, kind in enumerate(MODEL_FIELDS):
        off = field(root, k)
        if not off:
            continue
        size = 4
        if off + size > tsize or (root + off) % 4:
            return (f"Model field {k} at table offset {off}: outside its table of {tsize} "
                    f"bytes or misaligned")
        if kind == "u":
            continue
        at = root + off + u32(root + off)
        if at % 4 or at + 4 > n:
            return f"Model field {k} points outside the buffer (byte {at})"
        count = u32(at)
        if at + 4 + count * (1 if kind == "s" else 4) + (kind == "s") > n:
            return f"Model field {k}: a vector of {count} elements past the buffer's end"
        if kind == "t":
            for e in range(count):
                p = at + 4 + 4 * e
                bad = table(p + u32(p))
                if bad:
                    return f"Model field {k} element {e}: {bad}"
    return None


def validate(model: Any, sub: Any, used: list[str],
             kind_from: dict[str, tuple[str, int]]) -> None:
    """All the checks of the module docstring before conversion; ``kind_from``: where each
    builtin's data operand is (importer.KIND_FROM)."""
    if model.Version() != 3:
        raise AotcError(f"schema version {model.Version()}; TFLM and LiteRT read version 3")
    check_codes(model, sub, used)
    check_tensors(model, sub, used)
    check_options(sub, used)
    check_operands(sub, used, model, kind_from)
    check_declared(sub, used)
    check_bias(sub, used, model)


def check_shapes(b: Any, sub: Any, m: Any, used: list[str]) -> None:
    """Every operator output's declared shape is the one its operator computes (ONNX shape
    inference of the converted graph, strict, with the declared shapes as value_info): TFLM
    uses the declared shape of an intermediate tensor, LiteRT recomputes it, so a model where
    the two differ has no single answer."""
    import onnx
    from onnx import helper, shape_inference

    from aotc.frontend.tflite.builder import TO_NCHW

    producer = {int(sub.Operators(i).Outputs(k)): i for i in range(sub.OperatorsLength())
                for k in range(sub.Operators(i).OutputsLength())}
    outs = set(producer)
    graph_names = {o for n in m.graph.node for o in n.output}
    known = {o.name for o in m.graph.output}
    extra = []
    for (t, layout), name in b.names.items():
        if t not in outs or layout not in ("nhwc", "nchw") or name not in graph_names \
                or name in known:
            continue
        shape = list(b.shape(t))
        if any(d <= 0 for d in shape):
            continue
        if layout == "nchw":
            if len(shape) != 4:
                continue
            shape = [shape[p] for p in TO_NCHW]
        dt = helper.np_dtype_to_tensor_dtype(b.declared(t))
        extra.append(helper.make_tensor_value_info(name, dt, shape))
    probe = onnx.ModelProto()
    probe.CopyFrom(m)
    probe.graph.value_info.extend(extra)
    # A graph output's declared shape is checked through an Identity to a declared copy (ONNX
    # does not compare a graph output's own declaration with the inferred shape).
    for o in probe.graph.output:
        if not o.type.tensor_type.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else 0
                for d in o.type.tensor_type.shape.dim]
        if any(d <= 0 for d in dims):
            continue
        probe.graph.node.append(helper.make_node("Identity", [o.name], [o.name + "/declared"],
                                                 name=o.name))
        probe.graph.value_info.append(helper.make_tensor_value_info(
            o.name + "/declared", o.type.tensor_type.elem_type, dims))
        o.type.tensor_type.ClearField("shape")
    _standard_domain(probe)
    try:
        shape_inference.infer_shapes(probe, strict_mode=True)
    except shape_inference.InferenceError as e:
        text = " ".join(str(e).split())
        if "existing shape differ" not in text and "rank" not in text.lower():
            return  # an operator ONNX cannot infer: no verdict
        import re

        if re.search(r"op_type:(Loop|If|Scan)\b", text):
            return  # ONNX's inference through a body (IF, WHILE): no verdict; control.py
            # checks the branches' and the body's shapes against the operator's

        node = re.search(r"node name: ([^)]*)\)", text)
        detail = text.split("): ", 1)[-1][:200]
        value_of = {b.tname(t): t for t in producer}  # a graph output keeps its tensor's name
        value_of.update({v: t for (t, _), v in b.names.items()})
        for n in probe.graph.node:
            if node is None or n.name != node.group(1):
                continue
            for o in n.output:
                t = value_of.get(o)
                if t in producer:
                    i = producer[t]
                    raise _err(i, used[i], f"output {b.tname(t)!r} is declared "
                                           f"{list(b.shape(t))}, the operator computes another "
                                           f"shape ({detail})") from None
        raise AotcError(f"a tensor's declared shape differs from the one its operator "
                        f"computes ({text[:240]})") from None


def _standard_domain(m: Any) -> None:
    """aotc's own int16/int64 QuantizeLinear and DequantizeLinear (domain "aotc") as a Cast to
    their output type, which ONNX shape inference knows (the same shape); other nodes of
    aotc's domain stay (their outputs get no inferred shape)."""
    from onnx import TensorProto, helper

    types = {i.name: i.data_type for i in m.graph.initializer}
    for k, n in enumerate(m.graph.node):
        if n.domain != "aotc" or n.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            continue
        to = TensorProto.FLOAT if n.op_type == "DequantizeLinear" else types.get(
            n.input[2] if len(n.input) > 2 else "", TensorProto.INT16)
        m.graph.node[k].CopyFrom(helper.make_node("Cast", [n.input[0]], list(n.output),
                                                  name=n.name, to=to))
