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
  accumulator (validate_bias.py);
* shapes: every operator output's declared shape is the one the operator computes
  (validate_shapes.py, after the conversion).

The tables these checks read are in validate_tables.py; the root Model table's flatbuffer
check, which runs before any of them, in flatbuffer.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.frontend.tflite.options import _option_classes, options_table
from aotc.frontend.tflite.validate_bias import _const, check_bias
from aotc.frontend.tflite.validate_tables import (
    ACTIVATIONS,
    ARITY,
    CLAMPING,
    COUNTS,
    ITEMSIZE,
    LITERT_ONLY_MAX_VERSION,
    NEEDS_OPTIONS,
    OPTIONS_OF,
    PLACEHOLDER,
    SAME_INPUTS,
    SAME_PARAMS,
    SAME_TYPE,
    TYPE_NAMES,
    _err,
)


def expected_options(name: str) -> str | None:
    """The options class TFLite's schema gives builtin ``name`` (None: none known)."""
    if name in OPTIONS_OF:
        return OPTIONS_OF[name]
    key = name.replace("_", "")
    for cls in _option_classes().values():
        if cls.endswith("Options") and cls[:-7].upper() == key:
            return cls
    return None


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
    asym16 = _asymmetric_int16(sub, used)
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
        _check_quant(t, where, shape, const=bool(size), graph_input=j in graph_inputs,
                     zero_point_as_given=j in asym16)


def _asymmetric_int16(sub: Any, used: list[str]) -> set[int]:
    """The int16 tensors TFLM reads and writes with their zero point as given, so that one
    other than 0 is TFLM's arithmetic and not a 16x8 activation: every operator touching the
    tensor is a QUANTIZE (TFLM's Requantize / AffineQuantize take both zero points) or a
    DEQUANTIZE reading it (x - zero point, times the scale), or the SOFTMAX from int8 writing
    it (zero point -32768: _check_softmax_output)."""
    ok: dict[int, bool] = {}
    for i in range(sub.OperatorsLength()):
        op = sub.Operators(i)
        ins = [int(op.Inputs(k)) for k in range(op.InputsLength())]
        outs = [int(op.Outputs(k)) for k in range(op.OutputsLength())]
        softmax8 = used[i] == "SOFTMAX" and bool(ins) and ins[0] >= 0 \
            and sub.Tensors(ins[0]).Type() == 9
        for side, ts in (("in", ins), ("out", outs)):
            for t in ts:
                if t < 0 or sub.Tensors(t).Type() != 7:
                    continue
                fine = used[i] == "QUANTIZE" or (used[i] == "DEQUANTIZE" and side == "in") \
                    or (softmax8 and side == "out")
                ok[t] = ok.get(t, True) and fine
    return {t for t, fine in ok.items() if fine}


def _check_quant(t: Any, where: str, shape: list[int], const: bool = True,
                 graph_input: bool = False, zero_point_as_given: bool = False) -> None:
    q = t.Quantization()
    if q is None or q.ScaleLength() == 0:
        return
    if not const and not zero_point_as_given and t.Type() == 7 and q.ZeroPointLength() == 1 \
            and q.ZeroPoint(0) != 0:
        raise AotcError(f"{where}: an int16 activation with zero point {q.ZeroPoint(0)} (TFLite's "
                        f"16x8 activations are symmetric; TFLM assumes 0; only QUANTIZE and "
                        f"SOFTMAX from int8 take one)")
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


def _check_softmax_output(sub: Any, i: int, name: str, x: int, y: int) -> None:
    """SOFTMAX writes its input's type, or int16 from int8 (TFLM's Prepare refuses the other
    pairs); an int8 one scale 1/256 and zero point -128, an int16 one 1/32768 and 0, and one
    from int8 to int16 1/65536 and -32768 (TFLM and LiteRT refuse others)."""
    t = sub.Tensors(y)
    tx = sub.Tensors(x).Type()
    if t.Type() != tx and (tx, t.Type()) != (9, 7):
        raise _err(i, name, f"{TYPE_NAMES.get(tx, tx)} input, {TYPE_NAMES.get(t.Type())} "
                            f"output (TFLM's SOFTMAX writes its input's type, or int16 from "
                            f"int8)")
    q = t.Quantization()
    want = {9: (1 / 256, -128), 7: (1 / 32768, 0)}.get(t.Type())
    if t.Type() == 7 and tx == 9:
        want = (1 / 65536, -32768)
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
            _check_softmax_output(sub, i, name, ins[0], outs[0])
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
