"""``aotc quantize``: post-training int8 quantisation of a float ONNX model into QDQ format
(onnxruntime's ``quantize_static``), calibrated on user data from an .npz, producing a model that
aotc compiles into integer-only kernels (its ``qdq`` pass turns DQ -> op -> Q into QLinear*).

Defaults follow what aotc's integer kernels and TFLM-style deployment expect: int8 activations
and weights (QInt8), symmetric per-channel weights, asymmetric activations, MinMax calibration.
Every problem with the user's files (missing, unreadable, keys or shapes that do not match the
model's inputs) is an AotcError with a one-line message.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_static,
)

from aotc.errors import AotcError

# Ops that mean the model is quantised already (quantising twice is never what the user wants).
_QUANT_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv",
              "QLinearMatMul", "ConvInteger", "MatMulInteger"}


@dataclass(frozen=True)
class InputSpec:
    name: str
    dtype: np.dtype
    shape: tuple[int | None, ...] | None  # None: unknown rank; a None dim: symbolic/unknown

    def shape_text(self) -> str:
        if self.shape is None:
            return "(...)"
        return "(" + ", ".join("?" if d is None else str(d) for d in self.shape) + ")"


@dataclass
class QuantizeResult:
    """What ``quantize`` wrote and how aotc compiles it."""

    output: Path
    samples: int
    per_channel: bool
    symmetric_activations: bool
    integer_ops: list[str] = field(default_factory=list)
    float_ops: list[str] = field(default_factory=list)
    kernels: int = 0


def model_inputs(model: onnx.ModelProto) -> list[InputSpec]:
    """The graph inputs that are not initializers (older IR versions list those too)."""
    inits = {t.name for t in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        if not vi.type.HasField("tensor_type"):
            raise AotcError(f"input {vi.name!r} is not a tensor; only tensor inputs can be "
                            "calibrated")
        tt = vi.type.tensor_type
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
        except Exception:
            raise AotcError(f"input {vi.name!r} has an unsupported dtype "
                            f"({tt.elem_type})") from None
        shape = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                      for d in tt.shape.dim) if tt.HasField("shape") else None
        specs.append(InputSpec(vi.name, dtype, shape))
    if not specs:
        raise AotcError("the model has no graph inputs to calibrate")
    return specs


def _read_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The arrays of an .npz (a plain .npy gives one array with key '')."""
    p = Path(path)
    if not p.is_file():
        raise AotcError(f"calibration data: no such file: {p}")
    try:
        obj = np.load(p, allow_pickle=False)
        if isinstance(obj, np.ndarray):
            return {"": obj}
        with obj:
            return {k: np.asarray(obj[k]) for k in obj.files}
    except Exception as e:
        msg = " ".join(str(e).split())[:200]
        raise AotcError(f"cannot read calibration data {p.name}: expected an .npz of numeric "
                        f"arrays ({type(e).__name__}: {msg})") from None


def _dims_match(got: Sequence[int], want: Sequence[int | None] | None) -> bool:
    if want is None:
        return True
    return len(got) == len(want) and all(w is None or g == w for g, w in zip(got, want))


def _samples(arr: np.ndarray, spec: InputSpec, key: str, fname: str) -> list[np.ndarray]:
    """Split one calibration array into per-inference tensors: first axis = samples. A batch-1
    model also takes the samples stacked without the batch axis, (N, *shape[1:])."""
    where = f"{fname}: array {key!r}" if key else fname
    if arr.dtype.kind not in "biuf":
        raise AotcError(f"{where} has dtype {arr.dtype}; calibration data must be numeric")
    if not np.can_cast(arr.dtype, spec.dtype, "same_kind"):
        raise AotcError(f"{where} has dtype {arr.dtype}, input {spec.name!r} is {spec.dtype}")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise AotcError(f"{where} contains NaN or infinite values")
    if arr.ndim >= 1 and _dims_match(arr.shape[1:], spec.shape):
        out = [arr[k] for k in range(arr.shape[0])]
    elif (spec.shape and spec.shape[0] in (1, None) and arr.ndim == len(spec.shape)
          and _dims_match(arr.shape[1:], spec.shape[1:])):
        out = [arr[k:k + 1] for k in range(arr.shape[0])]
    else:
        raise AotcError(f"{where} has shape {tuple(arr.shape)}, input {spec.name!r} has shape "
                        f"{spec.shape_text()}: expected (samples, "
                        f"{spec.shape_text()[1:-1]}) with the samples on the first axis")
    if not out:
        raise AotcError(f"{where} has no samples (its first axis is 0)")
    return [np.ascontiguousarray(x, dtype=spec.dtype) for x in out]


def load_calibration(path: str | os.PathLike[str], specs: Sequence[InputSpec]
                     ) -> list[dict[str, np.ndarray]]:
    """Calibration feeds, one dict per sample. Keys are the graph input names; an .npz with a
    single array for a one-input model is used whatever its key."""
    data = _read_npz(path)
    fname = Path(path).name
    names = [s.name for s in specs]
    if len(data) == 1 and len(specs) == 1:
        ((key, arr),) = data.items()
        arrays = {names[0]: (key, arr)}
    else:
        missing = [n for n in names if n not in data]
        extra = sorted(set(data) - set(names))
        if missing or extra:
            raise AotcError(f"{fname}: keys {sorted(data)} do not match the model inputs {names}"
                            + (f" (missing {missing}" if missing else " (")
                            + (f"{', ' if missing else ''}unexpected {extra}" if extra else "")
                            + ")")
        arrays = {n: (n, data[n]) for n in names}
    per_input = {s.name: _samples(arrays[s.name][1], s, arrays[s.name][0], fname)
                 for s in specs}
    counts = {n: len(v) for n, v in per_input.items()}
    if len(set(counts.values())) != 1:
        raise AotcError(f"{fname}: inputs have different sample counts {counts}")
    n = next(iter(counts.values()))
    return [{k: v[i] for k, v in per_input.items()} for i in range(n)]


class _Reader(CalibrationDataReader):  # type: ignore[misc]
    """Feeds the calibration samples to onnxruntime, one inference at a time."""

    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self.feeds = feeds
        self._it: Iterator[dict[str, np.ndarray]] = iter(feeds)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._it, None)

    def rewind(self) -> None:
        self._it = iter(self.feeds)


def quantize(model: str | os.PathLike[str], calibration: str | os.PathLike[str],
             output: str | os.PathLike[str], per_channel: bool = True,
             symmetric_activations: bool = False, check: bool = True) -> QuantizeResult:
    """Quantise ``model`` to int8 QDQ calibrated on ``calibration`` (.npz) and write ``output``;
    with ``check``, compile the result with aotc to list integer and remaining float ops."""
    from aotc.frontend.onnx.file import load_model

    proto = load_model(model)
    present = sorted({n.op_type for n in proto.graph.node} & _QUANT_OPS)
    if present:
        raise AotcError(f"{Path(model).name} is already quantised (has {', '.join(present)}); "
                        "quantize the float model")
    specs = model_inputs(proto)
    feeds = load_calibration(calibration, specs)
    out = Path(output)
    if not out.parent.is_dir():
        raise AotcError(f"cannot write {out}: directory {out.parent} does not exist")
    _run_ort(proto, feeds, out, per_channel, symmetric_activations)
    res = QuantizeResult(out, len(feeds), per_channel, symmetric_activations)
    if check:
        _check_compiles(res, {k: tuple(v.shape) for k, v in feeds[0].items()})
    return res


def _run_ort(proto: onnx.ModelProto, feeds: list[dict[str, np.ndarray]], out: Path,
             per_channel: bool, symmetric_activations: bool) -> None:
    try:
        proto = onnx.shape_inference.infer_shapes(proto)
    except Exception as e:
        raise AotcError(f"shape inference failed before quantisation: "
                        f"{' '.join(str(e).split())[:200]}") from None
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # onnxruntime logs "consider pre-processing" warnings
    try:
        with tempfile.TemporaryDirectory(prefix="aotc_quant_") as tmp:
            tmp_out = Path(tmp) / "quant.onnx"
            quantize_static(proto, tmp_out, _Reader(feeds), quant_format=QuantFormat.QDQ,
                            per_channel=per_channel, activation_type=QuantType.QInt8,
                            weight_type=QuantType.QInt8,
                            calibrate_method=CalibrationMethod.MinMax,
                            extra_options={"ActivationSymmetric": symmetric_activations,
                                           "WeightSymmetric": True})
            try:
                out.write_bytes(tmp_out.read_bytes())
            except OSError as e:
                raise AotcError(f"cannot write {out}: {e.strerror or e}") from None
    except AotcError:
        raise
    except Exception as e:  # onnxruntime rejects the model or the calibration data
        msg = " ".join(f"{type(e).__name__}: {e}".split())[:300]
        raise AotcError(f"onnxruntime quantize_static failed: {msg}") from None
    finally:
        root.setLevel(level)


def _check_compiles(res: QuantizeResult, shapes: dict[str, tuple[int, ...]]) -> None:
    """Compile the quantised model (no files written) and sort its kernels into integer and
    float ones; a model aotc cannot compile is an error naming the reason."""
    from aotc.compiler import CompileOptions, compile_model

    try:
        comp = compile_model(res.output, CompileOptions(name="model", input_shapes=shapes))
    except AotcError as e:
        raise AotcError(f"wrote {res.output}, but aotc cannot compile it: "
                        f"{e.one_line()}") from None
    g = comp.graph
    ints, floats = set(), set()
    for n in g.nodes:
        if n.op in ("QuantizeLinear", "DequantizeLinear"):
            continue
        # Activations decide: scales and zero points are float/int constants of any kernel.
        vals = [v for s in (n, *n.epilogue) for v in (*s.inputs, *s.outputs)
                if v and not (v in g.values and g.values[v].is_const)]
        (floats if any(g.type(v).dtype.is_float for v in vals) else ints).add(n.op)
    res.integer_ops, res.float_ops = sorted(ints), sorted(floats)
    res.kernels = len(comp.lowered)
