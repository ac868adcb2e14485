"""OpDef and the operator registry: one OpDef subclass per ONNX op (version), registered with
@register, resolved by opset with resolve().

An OpDef holds everything about its op: attribute schema and defaults (the keyword-only
parameters of ``reference``), dtype rules, shape inference, numpy reference semantics (used for
constant folding, never as a test oracle) and the lowering to loop IR.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value

REQUIRED = object()  # default of an attribute the model must set


class AtLeast:
    """Allowed values of an integer attribute with a lower bound (``v in AtLeast(1)``)."""

    def __init__(self, low: int) -> None:
        self.low = low

    def __contains__(self, v: object) -> bool:
        return isinstance(v, int) and v >= self.low

    def __str__(self) -> str:
        return f"an integer >= {self.low}"


_FLAG = (0, 1)
# Allowed values of the enum-like attributes that mean the same in every ONNX op that has them;
# an op adds its own (mode, direction, reduction, ...) in OpDef.attr_choices. The frontend checks
# every attribute the model sets against these, before any op's check sees it.
ATTR_CHOICES: dict[str, Any] = {
    **dict.fromkeys(("align_corners", "allowzero", "antialias", "ceil_mode", "channels_last",
                     "count_include_pad", "detect_negative", "detect_positive",
                     "exclude_outside", "exclusive", "fmod", "input_forget", "interleaved",
                     "inverse", "is_causal", "keepdims", "largest", "layout",
                     "linear_before_reset", "noop_with_empty_axes", "onesided", "periodic",
                     "reverse", "saturate", "select_last_index", "sorted", "storage_order",
                     "training_mode", "transA", "transB", "upper"), _FLAG),
    **dict.fromkeys(("group", "offset_group", "blocksize", "num_groups", "size"), AtLeast(1)),
    "auto_pad": ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"),
    "nearest_mode": ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"),
    "keep_aspect_ratio_policy": ("stretch", "not_larger", "not_smaller"),
    "padding_mode": ("zeros", "border", "reflection"),
    "approximate": ("none", "tanh"),
}


class OpDef:
    name: ClassVar[str] = ""
    since: ClassVar[int] = 1
    domain: ClassVar[str] = ""
    # "elementwise" (fusible epilogue, scalar()), "anchor" (may take an epilogue),
    # "view" (zero-copy reinterpretation of input 0), "control" (If/Loop/Scan: subgraphs the
    # schedule expands, aotc/ops/control/if_loop_scan.py), or "kernel".
    kind: ClassVar[str] = "kernel"
    dtypes: ClassVar[tuple[str, ...]] = ("float32",)  # accepted dtypes of the data inputs
    # Inputs that must be compile-time constants (shape, axes, pads, ...).
    const_inputs: ClassVar[tuple[int, ...]] = ()
    onnx_tests: ClassVar[tuple[str, ...]] = ()
    # Inputs whose values the op never reads, only their type and shape (Shape, Size, CastLike's
    # target): the result is known at compile time once the other inputs are constants.
    type_only_inputs: ClassVar[tuple[int, ...]] = ()
    # Allowed values of this op's enum-like attributes, beyond the shared ATTR_CHOICES.
    attr_choices: ClassVar[dict[str, Any]] = {}
    # The result aotc defines where ONNX or C leaves it undefined (division by zero, an index
    # outside the tensor, ...), and whose behaviour it follows; docs/operators.md lists these.
    defined: ClassVar[str] = ""
    # Input 0 may be a permuted view (PermuteView): the lowering reads it only through BufRef
    # indexing, which follows the view's strides.
    reads_permuted: ClassVar[bool] = False

    # ------------------------------------------------------------------ schema
    @classmethod
    def attr_defaults(cls) -> dict[str, Any]:
        sig = inspect.signature(cls.reference)
        return {p.name: (REQUIRED if p.default is inspect.Parameter.empty else p.default)
                for p in sig.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY}

    def check_attrs(self, node: Node, given: Sequence[str]) -> None:
        """The attributes the model sets (``given``) have allowed values (ATTR_CHOICES and the
        op's attr_choices)."""
        for name in given:
            allowed = self.attr_choices.get(name, ATTR_CHOICES.get(name))
            v = node.attrs.get(name)
            if allowed is None or v in allowed:
                continue
            text = str(allowed) if isinstance(allowed, AtLeast) else \
                "one of " + ", ".join(map(repr, allowed))
            raise AotcError(f"attribute {name}={v!r} is not valid; it must be {text}",
                            node.name, node.op)

    @classmethod
    @functools.cache
    def quant_params(cls) -> dict[int, str]:
        """Input index -> "scale" or "zero_point" for the quantisation parameters, read off the
        reference's signature: in an op that takes a zero point, ``scale``/``zero_point`` and
        ``<x>_scale``/``<x>_zero_point`` (BatchNormalization's ``scale`` is no quantisation
        scale: that op has no zero point)."""
        names = _input_names(cls)
        if not any(n == "zero_point" or n.endswith("_zero_point") for n in names):
            return {}
        return {k: kind for k, n in enumerate(names) for kind in ("scale", "zero_point")
                if n == kind or n.endswith("_" + kind)}

    def check_quant_params(self, node: Node, ins: Sequence[Value | None]) -> None:
        """Constant scales and zero points are not empty, and scales are positive, finite and
        normal float32 (a negative or subnormal scale has no integer requantisation; onnxruntime
        computes with a negative scale, aotc refuses it)."""
        names = _input_names(type(self))
        for k, kind in self.quant_params().items():
            v = ins[k] if k < len(ins) else None
            if v is None or not v.is_const:
                continue
            a = np.asarray(v.const)
            if a.size == 0:
                raise AotcError(f"{names[k]} is empty; a {kind.replace('_', ' ')} needs one value "
                                f"(or one per channel)", node.name, node.op)
            if kind != "scale":
                continue
            f = a.astype(np.float64).ravel()
            bad = f[~(np.isfinite(f) & (f >= np.finfo(np.float32).tiny))]
            if bad.size:
                raise AotcError(f"{names[k]} has {bad.size} of {f.size} values that are not "
                                f"positive normal floats (e.g. {bad[0]:g}); a quantisation scale "
                                f"must be positive, finite and not subnormal", node.name, node.op)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        """Reject what the lowering cannot do (dtype, attribute values). Raise AotcError."""
        for i, v in enumerate(ins):
            if v is None or i in self.const_inputs:
                continue
            if v.type.dtype.name not in self.dtypes:
                raise AotcError(f"input {i} has dtype {v.type.dtype.name}; supported: "
                                f"{', '.join(self.dtypes)}", node.name, node.op)
        for i in self.const_inputs:
            if i < len(ins) and ins[i] is not None and not ins[i].is_const:  # type: ignore[union-attr]
                raise AotcError(f"input {i} must be a compile-time constant (freeze it into an "
                                f"initializer)", node.name, node.op)

    def prepare(self, node: Node, ins: Sequence[Value | None]) -> Node:
        """Compile-time work on constant inputs (TFLM's Prepare), run just before lowering: may
        fold them into attributes (names starting with '_') and drop them from the inputs.
        The graph IR keeps the ONNX form, so folding and printing see the real node."""
        return node

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        """Output types. Default: run the reference on constants or zeros of the input shapes
        (cheap ops only; heavy ops override) -- but only when the inputs and the outputs are
        small: ONNX's own shape inference, which needs no data, predicts the outputs first, and
        its answer is used instead when anything is large (a mutated dim must not become a
        terabyte allocation)."""
        big = any(v is not None and not v.is_const and _numel(v.type.shape) > INFER_BY_RUNNING_MAX
                  for v in ins)
        predicted = onnx_infer(node, ins)
        if predicted is not None and (big or any(_numel(t.shape) > INFER_BY_RUNNING_MAX
                                                 for t in predicted)):
            return predicted
        if big:
            raise AotcError(f"cannot infer the output shape without running the op on more than "
                            f"{INFER_BY_RUNNING_MAX} elements", node.name, node.op)
        args = [None if v is None else
                (v.const if v.is_const else np.zeros(v.type.shape, v.type.dtype.np)) for v in ins]
        outs = self.run_reference(node, args)
        return [TensorType(tuple(int(d) for d in o.shape), dtypes.from_numpy(o.dtype))
                for o in outs]

    def run_reference(self, node: Node, args: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        while args and args[-1] is None:
            args = list(args[:-1])
        attrs = {k: v for k, v in node.attrs.items() if not k.startswith("_")}
        # IEEE results (overflow to inf, 0/0, log(0)) are the answer, at folding time and on the
        # zero placeholders of shape inference alike: no numpy warnings.
        with np.errstate(all="ignore"):
            out = self.reference(*args, **attrs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        return [np.asarray(o) for o in outs]

    def reference(self, *inputs: Any, **attrs: Any) -> Any:
        raise NotImplementedError

    def lower(self, node: Node, kb: Any) -> None:
        raise NotImplementedError

    def scalar(self, args: list[Any], node: Node) -> Any:
        """Elementwise ops: the output element as an expression of the input elements."""
        raise NotImplementedError


@functools.cache
def _input_names(cls: type[OpDef]) -> tuple[str, ...]:
    """The op's inputs as its reference names them (the positional parameters)."""
    return tuple(p.name for p in inspect.signature(cls.reference).parameters.values()
                 if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and p.name != "self")


# The default OpDef.infer runs the reference only on tensors up to this many elements.
INFER_BY_RUNNING_MAX = 1 << 22


def _numel(shape: Sequence[int]) -> int:
    return math.prod(int(d) for d in shape)  # exact: np.prod wraps around on mutated dims


def onnx_infer(node: Node, ins: Sequence[Value | None]) -> list[TensorType] | None:
    """The output types from ONNX's shape inference for the node (constant inputs of up to
    INFER_BY_RUNNING_MAX elements passed as data), or None when it cannot say, fully."""
    import onnx
    from onnx import helper, numpy_helper

    try:
        schema = onnx.defs.get_schema(node.op, node.version, node.domain)
        attrs = {k: (numpy_helper.from_array(np.asarray(v)) if isinstance(v, np.ndarray) else v)
                 for k, v in node.attrs.items()
                 if not k.startswith("_") and v is not None and v is not REQUIRED
                 and not (isinstance(v, (tuple, list)) and not v)
                 and k in schema.attributes}  # (Cast-13 has no "saturate": a later one's)
        proto = helper.make_node(node.op, list(node.inputs), list(node.outputs),
                                 domain=node.domain, **attrs)
        types = {}
        data = {}
        for name, v in zip(node.inputs, ins):
            if v is None:
                continue
            types[name] = helper.make_tensor_type_proto(v.type.dtype.onnx, list(v.type.shape))
            if v.is_const and _numel(v.type.shape) <= INFER_BY_RUNNING_MAX:
                data[name] = numpy_helper.from_array(np.asarray(v.const), name)
        out = onnx.shape_inference.infer_node_outputs(
            schema, proto, types, data,
            opset_imports=[helper.make_opsetid(node.domain, node.version)])
        result = []
        for o in node.outputs:
            if not o:
                result.append(None)
                continue
            tt = out[o].tensor_type
            if not tt.HasField("shape") or tt.elem_type not in dtypes.BY_ONNX or any(
                    not d.HasField("dim_value") for d in tt.shape.dim):
                return None
            result.append(TensorType(tuple(int(d.dim_value) for d in tt.shape.dim),
                                     dtypes.BY_ONNX[tt.elem_type]))
    except Exception:
        return None
    while result and result[-1] is None:
        result.pop()
    if any(t is None for t in result):
        return None
    return result  # type: ignore[return-value]


def values_known(opdef: OpDef, ins: Sequence[Value | None]) -> bool:
    """Every input the op reads the values of is a compile-time constant."""
    return all(v is None or v.is_const or k in opdef.type_only_inputs
               for k, v in enumerate(ins))


_REGISTRY: dict[tuple[str, str], list[type[OpDef]]] = {}


def register(cls: type[OpDef]) -> type[OpDef]:
    versions = _REGISTRY.setdefault((cls.domain, cls.name), [])
    if any(c.since == cls.since for c in versions):
        raise ValueError(f"{cls.name} since {cls.since} registered twice")
    versions.append(cls)
    versions.sort(key=lambda c: c.since)
    return cls


def resolve(op: str, opset: int, domain: str = "") -> OpDef | None:
    """The implementation in force: the highest since-version <= the model's opset."""
    _load_all()
    best = None
    for cls in _REGISTRY.get((domain, op), []):
        if cls.since <= opset:
            best = cls
    return best() if best else None


def all_ops() -> dict[tuple[str, str], list[type[OpDef]]]:
    _load_all()
    return dict(_REGISTRY)


# The modules that register ops, by family (aotc/ops/<family>/<module>.py): importing one runs
# its @register decorators. A new op module is added here.
FAMILIES: dict[str, tuple[str, ...]] = {
    "nn": ("conv", "gemm", "pool", "lp_pool_unpool", "norm", "norm_rms_group_lrn", "softmax",
           "loss"),
    "tensor": ("shape", "movement", "index", "generate", "slice_view"),
    "math": ("elementwise", "logic", "reduce", "linalg", "topk_cumsum_trilu"),
    "image": ("resize", "sample", "roi_align_deform", "detection"),
    "sequence": ("recurrent", "qrecurrent", "attention", "linear_attention", "signal", "svdf",
                 "audio_frontend", "audio_stream", "audio_fft"),
    "quant": ("conv_matmul", "matmul", "qlinear", "tflm_kernels", "tables", "quantize_linear",
              "rescale", "conv_transpose", "reduce", "act16"),
    "control": ("if_loop_scan",),
}


@functools.cache
def _load_all() -> None:
    for family, modules in FAMILIES.items():
        for module in modules:
            importlib.import_module(f"aotc.ops.{family}.{module}")
