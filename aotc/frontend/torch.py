"""The PyTorch front door: an ``nn.Module`` with example inputs, or a saved ``torch.export``
program (``.pt2``), becomes an ONNX ModelProto in memory through
``torch.onnx.export(..., dynamo=True)``; the rest of aotc sees only ONNX.

The proto carries the module's parameter and buffer bytes in its metadata
(``aotc.torch_param_bytes``); the compiler compares them with the bundle's weight bytes (the
weight-size guard): an exporter that broadcasts and duplicates a weight (a Linear applied to a
batched input, say) would otherwise bloat the flash image many times over without a word.
torch is imported lazily: aotc works without it, and says which extra to install when a
PyTorch model is given.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sys
import warnings
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import onnx

from aotc.errors import AotcError

PARAM_BYTES_KEY = "aotc.torch_param_bytes"
SOURCE_HASH_KEY = "aotc.source_sha256"  # of a .pt2 file: the provenance header's model hash
# The bundle may hold this much more than the module (layout changes, a zero-point, a small
# folded constant) before the guard calls it growth.
GROWTH_RATIO = 1.05
GROWTH_SLACK_BYTES = 1024
_EXTRA = "PyTorch models need the torch extra: pip install 'aotc[torch]'"


def is_torch_model(model: object) -> bool:
    """An ``nn.Module``, an ``ExportedProgram`` or a path to a ``.pt2`` file. Never imports
    torch: an object can only be a torch module if torch is already imported."""
    if isinstance(model, str | os.PathLike):
        return Path(model).suffix == ".pt2"
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    return isinstance(model, torch.nn.Module | torch.export.ExportedProgram)


def _import_torch() -> Any:
    try:
        import onnxscript  # noqa: F401  (torch.onnx's dynamo exporter is built on it)
        import torch
    except ImportError as e:
        raise AotcError(f"{e.name or 'torch'} is not installed; {_EXTRA}") from None
    return torch


def to_onnx(model: Any, example_inputs: Sequence[Any] | Any = None,
            bound: Collection[str] = ()) -> onnx.ModelProto:
    """``model`` (an nn.Module, an ExportedProgram or a .pt2 path) as an ONNX ModelProto.

    A module is exported in eval mode (its mode is restored after); ``example_inputs`` (a
    tensor or a tuple of them; numpy arrays are accepted) fix the input shapes and take the
    branch a Python ``if`` on a shape takes. An ExportedProgram or .pt2 file uses the example
    inputs saved with it unless others are given; a dimension it declares dynamic takes the
    example's size, except in the inputs named in ``bound`` (--input-shape binds them)."""
    torch = _import_torch()
    name = type(model).__name__
    meta: dict[str, str] = {}
    if isinstance(model, str | os.PathLike):
        path = Path(model)
        name = path.name
        model = _load_pt2(torch, path)
        meta[SOURCE_HASH_KEY] = hashlib.sha256(path.read_bytes()).hexdigest()
    args = _example_args(torch, example_inputs)
    if isinstance(model, torch.export.ExportedProgram):
        if args is None:
            saved = getattr(model, "example_inputs", None)
            if saved is not None and saved[1]:
                raise AotcError(f"{name}: the program takes keyword inputs; aotc exports "
                                f"positional inputs only")
            args = saved[0] if saved is not None else None
        param_bytes = _nbytes(*model.state_dict.values(), *model.constants.values())
        with _quiet_exporter():
            # the program's own input specs give the shapes; example inputs are optional here
            program = _export(torch, model, args, name)
    elif isinstance(model, torch.nn.Module):
        if args is None:
            raise AotcError(f"{name}: a torch.nn.Module needs example_inputs=(x, ...) (the "
                            f"shapes to compile for)")
        param_bytes = _nbytes(*model.parameters(), *model.buffers())
        was_training = model.training
        model.eval()
        try:
            with _quiet_exporter():
                program = _export(torch, model, args, name)
        finally:
            model.train(was_training)
    else:
        raise AotcError(f"cannot compile a {name}: expected an ONNX model, a torch.nn.Module, "
                        f"a torch.export.ExportedProgram or a .pt2 file")
    proto = program.model_proto
    if args is not None:
        _fix_dynamic_dims(torch, proto, args, bound)
    proto.graph.name = name  # the provenance header names the model by it
    meta[PARAM_BYTES_KEY] = str(param_bytes)
    for key, value in meta.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    return proto


def _fix_dynamic_dims(torch: Any, proto: onnx.ModelProto, args: tuple[Any, ...],
                      bound: Collection[str]) -> None:
    """Symbolic input dims (torch.export.Dim) -> the example inputs' sizes."""
    leaves = [t for t in torch.utils._pytree.tree_leaves(args) if isinstance(t, torch.Tensor)]
    consts = {t.name for t in proto.graph.initializer}
    inputs = [vi for vi in proto.graph.input if vi.name not in consts]
    if len(leaves) != len(inputs):
        return  # not one tensor per input: leave the dims to --input-shape
    for vi, t in zip(inputs, leaves):
        dims = vi.type.tensor_type.shape.dim
        if vi.name in bound or len(dims) != t.dim():
            continue
        for d, size in zip(dims, t.shape):
            if not d.HasField("dim_value"):
                d.dim_value = int(size)


def _load_pt2(torch: Any, path: Path) -> Any:
    if not path.is_file():
        raise AotcError(f"no such file: {path}")
    try:
        return torch.export.load(str(path))
    except Exception as e:
        raise AotcError(f"cannot load {path.name} as a torch.export program (torch.export.save "
                        f"writes one): {_first_line(e)}") from None


def _example_args(torch: Any, example_inputs: Any) -> tuple[Any, ...] | None:
    if example_inputs is None:
        return None
    if not isinstance(example_inputs, tuple | list):
        example_inputs = (example_inputs,)
    return tuple(torch.from_numpy(x) if type(x).__module__ == "numpy" else x
                 for x in example_inputs)


def _export(torch: Any, model: Any, args: tuple[Any, ...] | None, name: str) -> Any:
    try:
        return torch.onnx.export(model, args, dynamo=True, verbose=False, report=False)
    except Exception as e:
        root: BaseException = e  # the exporter wraps the error that says what went wrong
        while root.__cause__ is not None:
            root = root.__cause__
        raise AotcError(f"{name}: torch.onnx.export(dynamo=True) failed: "
                        f"{type(root).__name__}: {_first_line(root)}") from None


def _nbytes(*tensors: Any) -> int:
    """Bytes of the distinct tensors (a tied weight counts once)."""
    seen = {(t.data_ptr(), t.numel(), t.dtype): t for t in tensors if t is not None}
    return sum(int(t.numel()) * int(t.element_size()) for t in seen.values())


def _first_line(e: BaseException) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e))  # the exporter colours its messages
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0][:300] if lines else type(e).__name__


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """The exporter logs progress and notes (e.g. that torchvision's ops are skipped), warns
    about its own internals and prints its steps; aotc's stdout and stderr stay its own."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._export",
                                               "onnxscript")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with (open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink),
              warnings.catch_warnings()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def param_bytes_of(proto: onnx.ModelProto) -> int | None:
    """The parameter and buffer bytes of the module a proto was exported from (None: not from
    torch)."""
    value = _meta(proto, PARAM_BYTES_KEY)
    return int(value) if value is not None else None


def source_hash_of(proto: onnx.ModelProto) -> str | None:
    """The sha256 of the .pt2 file a proto was exported from."""
    return _meta(proto, SOURCE_HASH_KEY)


def _meta(proto: onnx.ModelProto, key: str) -> str | None:
    return next((e.value for e in proto.metadata_props if e.key == key), None)


def weight_check(bundle_bytes: int, param_bytes: int, allow_growth: bool) -> str:
    """The weight-size guard: one line comparing the bundle's weights with the module's
    parameters and buffers; an AotcError beyond 1.05x + 1 KB unless ``allow_growth``."""
    ratio = f"{bundle_bytes / param_bytes:.2f}x" if param_bytes else "no parameters"
    line = (f"weights: {bundle_bytes:,} B in the bundle vs {param_bytes:,} B of parameters and "
            f"buffers ({ratio})")
    if bundle_bytes > GROWTH_RATIO * param_bytes + GROWTH_SLACK_BYTES and not allow_growth:
        raise AotcError(f"{line}: more than {GROWTH_RATIO}x + 1 KB: the export duplicated a "
                        f"weight (e.g. broadcast a Linear weight over a batch); fix the model "
                        f"or pass --allow-weight-growth (allow_weight_growth=True)")
    return line


def torch_outputs(model: Any, proto: onnx.ModelProto,
                  vectors: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """What torch itself computes for each input vector (by the exported graph's input names),
    by the exported graph's output names: the reference ``verify`` compares the C with."""
    torch = _import_torch()
    if isinstance(model, str | os.PathLike):
        model = _load_pt2(torch, Path(model))
    exported = isinstance(model, torch.export.ExportedProgram)
    # an exported program's module runs as it was exported (it has no eval mode to switch)
    fn = model.module() if exported else model
    in_names = [i.name for i in proto.graph.input
                if i.name not in {t.name for t in proto.graph.initializer}]
    out_names = [o.name for o in proto.graph.output]
    results = []
    was_training = fn.training
    if not exported:
        fn.eval()
    try:
        with torch.no_grad():
            for v in vectors:
                got = fn(*(torch.from_numpy(v[n].copy()) for n in in_names))
                flat = torch.utils._pytree.tree_leaves(got)
                if len(flat) != len(out_names):
                    raise AotcError(f"torch returned {len(flat)} tensors, the exported graph has "
                                    f"{len(out_names)} outputs")
                results.append({n: t.numpy() for n, t in zip(out_names, flat)})
    finally:
        if not exported:
            fn.train(was_training)
    return results
