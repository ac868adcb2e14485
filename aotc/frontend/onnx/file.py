"""Reading an ONNX file: the protobuf, its names, external tensor data (inside the model's
folder, offsets and lengths checked) and the size of every declared tensor, before anything is
allocated. Each problem is one AotcError line."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

import onnx

from aotc.errors import AotcError


def load_model(path: str | os.PathLike[str]) -> onnx.ModelProto:
    p = Path(path)
    if not p.is_file():
        raise AotcError(f"no such file: {p}")
    data = p.read_bytes()
    try:
        model = onnx.ModelProto()
        model.ParseFromString(data)
    except Exception as e:  # protobuf raises DecodeError (and others on garbage)
        raise AotcError(f"{p.name} is not a valid ONNX file (truncated or not a protobuf: "
                        f"{type(e).__name__})") from None
    if model.ir_version <= 0 or not model.HasField("graph") or not model.graph.output:
        raise AotcError(f"{p.name} is not an ONNX model (no IR version or graph outputs)")
    if model.ir_version > onnx.IR_VERSION:
        raise AotcError(f"{p.name} has IR version {model.ir_version}, newer than the "
                        f"{onnx.IR_VERSION} this aotc's onnx library knows")
    _check_strings(model, p.name)
    _load_external(model, p.parent.resolve())
    return model


def _check_strings(model: onnx.ModelProto, fname: str) -> None:
    """ONNX names are UTF-8; protobuf hands back bytes for a corrupted one."""
    g = model.graph
    fields: list[object] = [g.name]
    for n in g.node:
        fields += [n.name, n.op_type, n.domain, *n.input, *n.output]
        fields += [a.name for a in n.attribute]
    for vi in (*g.input, *g.output, *g.value_info):
        fields.append(vi.name)
    fields += [t.name for t in g.initializer]
    if any(isinstance(f, bytes) for f in fields):
        raise AotcError(f"{fname} is corrupt: a name is not valid UTF-8")


def _load_external(model: onnx.ModelProto, base: Path) -> None:
    """Reads external tensor data, checking every field first: a location inside the model's
    folder, decimal offset and length that lie inside the file, and exactly the bytes the
    tensor's declared shape and dtype need."""
    for t in _all_tensors(model.graph):
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        what = f"tensor {t.name!r}"
        nbytes = declared_nbytes(t)
        info = {e.key: e.value for e in t.external_data}
        if any(not isinstance(k, str) or not isinstance(v, str) for k, v in info.items()):
            raise AotcError(f"{what}: an external data entry is not valid UTF-8 text")
        loc = info.get("location", "")
        if not loc or "\0" in loc:
            raise AotcError(f"{what}: external data location {loc!r} is not a file name")
        try:
            target = (base / loc).resolve()
            inside = not os.path.isabs(loc) and target.is_relative_to(base)
            size = target.stat().st_size if inside and target.is_file() else None
        except (OSError, ValueError) as e:
            raise AotcError(f"{what}: external data location {loc!r} cannot be used: "
                            f"{type(e).__name__}") from None
        if not inside:
            raise AotcError(f"{what}: external data {loc!r} is outside the model's "
                            f"folder; refusing to read it")
        if size is None:
            raise AotcError(f"{what}: external data file {loc!r} not found")
        offset = _external_int(info, "offset", what)
        length = _external_int(info, "length", what)
        offset = 0 if offset is None else offset
        if offset > size:
            raise AotcError(f"{what}: external data offset {offset} is past the end of {loc!r} "
                            f"({size} bytes)")
        length = size - offset if length is None else length
        if offset + length > size:
            raise AotcError(f"{what}: external data needs bytes {offset} to {offset + length} "
                            f"of {loc!r}, which has {size} bytes")
        if nbytes is not None and length != nbytes:
            raise AotcError(f"{what}: external data has {length} bytes; its shape and dtype "
                            f"need {nbytes}")
        try:
            with open(target, "rb") as f:
                f.seek(offset)
                t.raw_data = f.read(length)
        except OSError as e:
            raise AotcError(f"{what}: cannot read external data {loc!r}: {e.strerror or e}") \
                from None
        t.data_location = onnx.TensorProto.DEFAULT
        del t.external_data[:]


def _external_int(info: Mapping[str, str], key: str, what: str) -> int | None:
    if key not in info:
        return None
    text = info[key]
    if not (text.isascii() and text.isdigit()):
        raise AotcError(f"{what}: external data {key} {text!r} is not a non-negative integer")
    return int(text)


# The largest tensor aotc accepts (weights, inputs and every intermediate value), checked from
# declared shapes before anything is read or allocated. Far beyond any microcontroller; it keeps
# a mutated dim from turning into a multi-terabyte allocation, and every index within int32.
MAX_TENSOR_BYTES = 1 << 30


def check_size(what: str, shape: tuple[int, ...], dtype_name: str, itemsize: int,
                node: str | None = None, op: str | None = None) -> int:
    nbytes = math.prod(shape) * itemsize
    if nbytes > MAX_TENSOR_BYTES:
        raise AotcError(f"{what} would take {_human(nbytes)} ({nbytes} bytes; shape "
                        f"{tuple(shape)}, {dtype_name}); aotc's limit per tensor is "
                        f"{_human(MAX_TENSOR_BYTES)}", node, op)
    return nbytes


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 or unit == "EiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def onnx_dtype_name(num: int) -> str:
    try:
        return onnx.TensorProto.DataType.Name(num)
    except ValueError:
        return f"{num} (not an ONNX data type)"


_VALUE_FIELDS = ("raw_data", "float_data", "int32_data", "string_data", "int64_data",
                 "double_data", "uint64_data")


def declared_nbytes(t: onnx.TensorProto) -> int | None:
    """Checks a TensorProto's dtype number, dims and size before its data is read; its byte size
    (None for strings, whose size is not fixed)."""
    what = f"tensor {t.name!r}"
    try:
        npdt = onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
    except Exception:
        raise AotcError(f"{what} has data type {onnx_dtype_name(t.data_type)}, which aotc "
                        f"cannot read") from None
    dims = tuple(int(d) for d in t.dims)
    if any(d < 0 for d in dims):
        raise AotcError(f"{what} has a negative dim {dims}")
    fields = [f for f in _VALUE_FIELDS if len(getattr(t, f))]
    if len(fields) > 1:
        raise AotcError(f"{what} holds data in {', '.join(fields[:-1])} and {fields[-1]}; a "
                        f"tensor has one data field")
    if npdt.kind in "OUS":
        return None
    return check_size(what, dims, npdt.name, max(1, npdt.itemsize))


def _all_tensors(g: onnx.GraphProto) -> list[onnx.TensorProto]:
    out = list(g.initializer)
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                out.append(a.t)
    return out
