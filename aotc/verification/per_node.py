"""Per-node verification (``aotc verify --per-node``): every kernel's output against the
reference's value of the same ONNX tensor, in schedule order, so a user sees where an error
starts and how it grows.

How the intermediates are read: the model is compiled a second time as a *probe*, a copy in
which every kernel's output tensor is also a graph output, so the generated C writes each one
to a caller buffer. A kernel's final output is where fusion stops already (aotc.passes.fuse
never fuses across a value with a second use or a graph output), so making it an output changes
no kernel; ``probe_bundle`` checks that each kernel of the real compile is in the probe with the
same loop nest and raises otherwise. Only tensors of the ONNX model are compared, like with
like: a QDQ kernel's output is the int8 output of the model's QuantizeLinear; an NHWC output of
a BYOC kernel (``X__nhwc``) is compared as the model's NCHW ``X``, which the probe materialises
with the layout transpose; tensors aotc makes up (the integer result of a shape op moved above
its DequantizeLinear, output copies, layout transposes) get a row with a note and no numbers.

The reference is onnxruntime with graph optimisations disabled, on the reference model (the
compiled one, or ``reference``) with the same tensors as outputs. Disabled, because with them
on, which DequantizeLinear -> op -> QuantizeLinear groups onnxruntime fuses into its integer
kernels depends on which tensors are graph outputs (exposing the KWS int8 model's intermediates
turns its QLinearConv back into float Conv and its float Gemm into QGemm): each probe would run
other kernels than the original model. Without them every run computes the ONNX operators as
written, whatever is exposed.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from aotc.errors import AotcError

if TYPE_CHECKING:
    from aotc.compilation import Compilation
    from aotc.compiler import Bundle
    from aotc.ir.graph import Node, TensorType
    from aotc.lower.lowering import LoweredStep

ModelLike = str | os.PathLike[str] | onnx.ModelProto
# The NHWC twin of a tensor X that aotc.passes.layout gives a BYOC kernel to write.
_NHWC = re.compile(r"(.+)__nhwc\d*")


@dataclass(frozen=True)
class Probe:
    """One row: a kernel of the real compile and the ONNX tensor its output is compared as."""

    step: int
    kernel: str  # C symbol
    node: str  # aotc node name (the anchor of a fused kernel)
    ops: str  # anchor + epilogue ops, "+"-joined
    tensor: str | None  # ONNX tensor name; None: nothing in the model to compare with
    note: str = ""


def onnx_tensors(proto: onnx.ModelProto) -> set[str]:
    """Names of the tensors the model's nodes compute."""
    return {o for n in proto.graph.node for o in n.output if o}


def kernel_probes(comp: Compilation, tensors: set[str]) -> list[Probe]:
    """A row per kernel output of the compiled model, in schedule order; a kernel none of
    whose outputs is a tensor of the model still gets one row."""
    rows: list[Probe] = []
    seen: set[str] = set()
    for ls in comp.lowered:
        n = ls.step.node
        ops = "+".join([n.op] + [e.op for e in n.epilogue])
        outs = [o for o in n.outputs if o and o not in comp.schedule.dead]
        found = []
        for o in outs:
            t = o if o in tensors else None
            m = _NHWC.fullmatch(o)
            if t is None and m and m.group(1) in tensors:
                t = m.group(1)
            if t is not None and t not in seen:
                found.append(t)
                seen.add(t)
        base = (ls.step.index, ls.kernel.name, n.name, ops)
        rows += [Probe(*base, t) for t in found]
        if not found:
            rows.append(Probe(*base, None, _internal(n, outs, seen)))
    return rows


def _internal(n: Node, outs: Sequence[str], seen: set[str]) -> str:
    if n.op == "Copy" and n.domain == "aotc":
        return "copy of a graph output, inserted by aotc"
    if "__to_nhwc_" in n.name or "__to_nchw_" in n.name:
        return "layout transpose at a BYOC region boundary"
    if any(o in seen for o in outs):
        return "writes the tensor of an earlier row"
    if any(o.endswith("__int") for o in outs):
        return "shape op moved above its DequantizeLinear: the model has this tensor in float"
    return f"aotc-internal tensor {', '.join(outs)}"


def with_outputs(proto: onnx.ModelProto, names: Sequence[str],
                 types: Mapping[str, TensorType]) -> onnx.ModelProto:
    """A copy of ``proto`` in which each of ``names`` it computes is also a graph output,
    declared with the element type aotc computed and no shape (a reference model's other shape
    is reported by run_per_node, not warned about by onnxruntime)."""
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    have = {o.name for o in out.graph.output}
    computed = onnx_tensors(proto)
    for name in names:
        if name in have or name not in computed:
            continue
        out.graph.output.append(helper.make_tensor_value_info(name, types[name].dtype.onnx,
                                                              None))
        have.add(name)
    return out


def probe_bundle(comp: Compilation, proto: onnx.ModelProto, rows: Sequence[Probe],
                 out_dir: str | Path) -> Bundle:
    """Compile the probe model into ``out_dir`` and check its kernels are the real ones."""
    from aotc.compiler import Bundle, compile_model, emit

    names = [r.tensor for r in rows if r.tensor is not None]
    types = {name: comp.graph.type(name) for name in names}
    probe = compile_model(with_outputs(proto, names, types), comp.options)
    by_node = {ls.step.node.name: ls for ls in probe.lowered}
    for ls in comp.lowered:
        n = ls.step.node
        other = by_node.get(n.name)
        if other is None or not _same_kernel(ls, other):
            raise AotcError("exposing the intermediate tensors as outputs changed this kernel, "
                            "so the per-node values would not be those of the compiled model "
                            "(please report)", n.name, n.op)
    emit(probe, out_dir)
    return Bundle(Path(out_dir), comp.options.name, probe)


def _same_kernel(a: LoweredStep, b: LoweredStep) -> bool:
    """Same loop nest (or BYOC source) and arguments up to the C symbol, which carries the step
    index (the probe may have more steps: layout transposes, output copies)."""
    def key(ls: LoweredStep) -> str:
        k = ls.kernel
        return repr((k.params, k.body, ls.args, ls.source)).replace(k.name, "@")

    return key(a) == key(b)


def quant_scales(proto: onnx.ModelProto) -> dict[str, float]:
    """The per-tensor scale of each integer tensor a QuantizeLinear writes or a
    DequantizeLinear reads: an error of k LSB there is k * scale in real units."""
    where: dict[str, str] = {}  # tensor -> its scale's name
    for n in proto.graph.node:
        if n.domain not in ("", "ai.onnx") or len(n.input) < 2:
            continue
        if n.op_type == "QuantizeLinear":
            where.setdefault(n.output[0], n.input[1])
        elif n.op_type == "DequantizeLinear":
            where.setdefault(n.input[0], n.input[1])
    wanted = set(where.values())
    consts = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer
              if t.name in wanted}
    for n in proto.graph.node:
        if n.op_type == "Constant" and n.output[0] in wanted and n.attribute \
                and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    return {t: float(consts[s].reshape(-1)[0]) for t, s in where.items()
            if s in consts and consts[s].size == 1}


@dataclass
class _Stats:
    """Errors of one tensor, accumulated over the vectors."""

    max_abs: float = 0.0
    max_rel: float = 0.0
    lsb: int = 0
    differ: int = 0
    elements: int = 0
    within: bool = True

    def add(self, got: np.ndarray, ref: np.ndarray, atol: float, rtol: float,
            scale: float | None) -> None:
        ref = np.asarray(ref).reshape(got.shape)
        self.elements += int(got.size)
        if got.dtype.kind == "f":
            g, r = got.astype(np.float64), ref.astype(np.float64)
            d = np.abs(g - r)
            d[np.isnan(g) & np.isnan(r)] = 0.0
            d[np.isnan(d)] = np.inf  # NaN on one side only
            err = float(np.max(d, initial=0.0))
            top = float(np.max(np.abs(np.nan_to_num(r)), initial=0.0))
            self.max_abs = max(self.max_abs, err)
            self.max_rel = max(self.max_rel, err / top if top > 0 else (0.0 if err == 0
                                                                           else np.inf))
            self.within &= bool(np.allclose(got, ref, atol=atol, rtol=rtol, equal_nan=True))
        else:
            d = np.abs(got.astype(np.int64) - ref.astype(np.int64))
            lsb = int(np.max(d, initial=0))
            self.lsb = max(self.lsb, lsb)
            self.differ += int(np.count_nonzero(d))
            self.max_abs = max(self.max_abs, lsb * scale if scale else float(lsb))
            self.within &= lsb <= atol


def run_per_node(model: ModelLike, comp: Compilation,
                 inputs: Sequence[Mapping[str, np.ndarray]] | None, atol: float, rtol: float,
                 seed: int = 0, board: str | None = None,
                 reference: ModelLike | None = None) -> list[dict[str, Any]]:
    """The per-node rows of ``comp`` (the Compilation of ``model``) on ``inputs`` (default:
    the random vectors of run_verification), against ``reference`` (default: ``model``)."""
    from aotc.verification.run import default_vectors, onnxruntime_outputs

    if comp.schedule.state:
        raise AotcError("--per-node compares one call from the graph inputs; a model with "
                        "state kept between calls is not supported: verify it without "
                        "--per-node (docs/streaming.md)")
    proto = _proto(model)
    ref_proto = proto if reference is None else _proto(reference)
    rows = kernel_probes(comp, onnx_tensors(proto))
    names = [r.tensor for r in rows if r.tensor is not None]
    types = {name: comp.graph.type(name) for name in names}
    ref_model = with_outputs(ref_proto, names, types)
    stats = {name: _Stats() for name in names}
    scales = quant_scales(proto)
    with tempfile.TemporaryDirectory(prefix="aotc_per_node_") as tmp:
        runner = probe_bundle(comp, proto, rows, tmp).load(board)
        vectors = default_vectors(runner.meta["inputs"], inputs, seed)
        for feeds in vectors:
            got = runner.run(feeds)
            ref = onnxruntime_outputs(ref_model, feeds, optimize=False)
            for name in names:
                if name not in ref:
                    continue
                if np.size(ref[name]) != got[name].size:
                    raise AotcError(f"tensor {name!r} has shape {list(np.shape(ref[name]))} in "
                                    f"the reference, {list(got[name].shape)} in the model")
                stats[name].add(got[name], ref[name], atol, rtol, scales.get(name))
    ref_names = {o.name for o in ref_model.graph.output}
    return _report(rows, stats, types, scales, ref_names)


def _proto(model: ModelLike) -> onnx.ModelProto:
    from aotc.compiler import read_model

    # A .tflite model: its ONNX-semantics import (QDQ for int8), run by onnxruntime.
    return model if isinstance(model, onnx.ModelProto) else read_model(model)


def _report(rows: Sequence[Probe], stats: Mapping[str, _Stats],
            types: Mapping[str, TensorType], scales: Mapping[str, float],
            ref_names: set[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    first = True
    for r in rows:
        row: dict[str, Any] = {"step": r.step, "kernel": r.kernel, "node": r.node, "ops": r.ops,
                               "tensor": r.tensor, "note": r.note, "first_divergence": False}
        if r.tensor is not None:
            t = types[r.tensor]
            row.update(dtype=t.dtype.name, shape=list(t.shape))
            if r.tensor not in ref_names:
                row["note"] = "not computed by the reference model"
            else:
                s = stats[r.tensor]
                row.update(max_abs_error=s.max_abs, within_tolerance=s.within,
                           elements=s.elements)
                if t.dtype.is_float:
                    row["max_rel_error"] = s.max_rel
                else:
                    row.update(lsb=s.lsb, differ=s.differ, scale=scales.get(r.tensor))
                if not s.within and first:
                    row["first_divergence"], first = True, False
        out.append(row)
    return out


def format_table(rows: Sequence[Mapping[str, Any]], name_width: int = 48) -> list[str]:
    """The rows as a text table; ``>>`` marks the first row beyond the tolerance, ``!`` the
    later ones. Integer tensors: max abs error in real units (LSB x scale) when the model
    gives a scale, else in LSB."""
    wk = max([len(r["kernel"]) for r in rows] + [6])
    lines = [f"   {'step':>4}  {'kernel':<{wk}}  {'dtype':<7} {'shape':<14} {'max abs err':>11} "
             f"{'LSB':>4} {'differ':>13} {'max rel':>9}  tensor"]
    for r in rows:
        within = r.get("within_tolerance")
        mark = ">>" if r["first_divergence"] else (" !" if within is False else "  ")
        tensor = r["tensor"] or ""
        if len(tensor) > name_width:
            tensor = tensor[:name_width - 3] + "..."
        if r["note"]:
            tensor = f"{tensor} ({r['note']})" if tensor else f"({r['note']})"
        shape = "x".join(map(str, r["shape"])) if "shape" in r else "-"
        err = f"{r['max_abs_error']:.3g}" if "max_abs_error" in r else "-"
        lsb = str(r["lsb"]) if "lsb" in r else "-"
        differ = f"{r['differ']}/{r['elements']}" if "differ" in r else "-"
        rel = f"{r['max_rel_error']:.3g}" if "max_rel_error" in r else "-"
        lines.append(f"{mark} {r['step']:>4}  {r['kernel']:<{wk}}  {r.get('dtype', '-'):<7} "
                     f"{shape:<14} {err:>11} {lsb:>4} {differ:>13} {rel:>9}  {tensor}")
    first = next((r for r in rows if r["first_divergence"]), None)
    if first is None:
        lines.append("every compared tensor is within the tolerance")
    else:
        lines.append(f"first beyond the tolerance: step {first['step']}, kernel {first['kernel']} "
                     f"({first['ops']}), tensor {first['tensor']!r}")
    return lines
