"""The Python API: compile, inspect, verify; compile returns a Bundle (aotc/compiler.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from aotc.byoc.partition import NATIVE, Row
from aotc.compilation import Compilation, CompileOptions, memory_report
from aotc.compiler import Bundle, compile_model, emit
from aotc.errors import AotcError
from aotc.ir.graph import CHAIN, Graph, Node
from aotc.ops import resolve
from aotc.ops.control.if_loop_scan import Body
from aotc.progress import QUIET, Progress

# An ONNX file or ModelProto; a .pt2 file (torch.export.save), a torch.export.ExportedProgram
# or a torch.nn.Module (with example_inputs) go through aotc/frontend/torch.py.
ModelLike = str | os.PathLike[str] | onnx.ModelProto | Any


def _options(name: str, input_shapes: Mapping[str, Sequence[int]] | None,
             **kw: Any) -> CompileOptions:
    return CompileOptions(name=name, input_shapes=dict(input_shapes or {}), **kw)


def _from_torch(model: ModelLike, example_inputs: Sequence[Any] | Any,
                input_shapes: Mapping[str, Sequence[int]] | None) -> ModelLike:
    """A PyTorch model as ONNX (exported once, so compiling and verifying see the same
    graph); anything else as it is."""
    from aotc.frontend.torch import is_torch_model, to_onnx

    if is_torch_model(model):
        return to_onnx(model, example_inputs, bound=tuple(input_shapes or ()))
    if example_inputs is not None:
        raise AotcError("example_inputs is for PyTorch models (an nn.Module, an "
                        "ExportedProgram or a .pt2 file)")
    return model


def torch_reference(source: Any, proto: onnx.ModelProto, bundle: Bundle,
                    inputs: Sequence[Mapping[str, np.ndarray]] | None, seed: int
                    ) -> tuple[list[Mapping[str, np.ndarray]], list[dict[str, np.ndarray]]]:
    """The vectors (``inputs`` or random ones) and what torch computes for them: a PyTorch
    model is verified against torch itself, not against onnxruntime on its export."""
    import json

    from aotc.frontend.torch import torch_outputs
    from aotc.verification.run import default_vectors

    specs = json.loads((bundle.directory / "bundle.json").read_text())["inputs"]
    vectors = list(default_vectors(specs, inputs, seed))
    return vectors, torch_outputs(source, proto, vectors)


def compile(model: ModelLike, out_dir: str | os.PathLike[str], name: str = "model",  # noqa: A001
            input_shapes: Mapping[str, Sequence[int]] | None = None,
            progress: Progress = QUIET, example_inputs: Sequence[Any] | Any = None,
            **kw: Any) -> Bundle:
    """Compile ``model`` (an ONNX path or ModelProto; a torch.nn.Module with
    ``example_inputs=(x, ...)``, an ExportedProgram or a .pt2 file) into a C bundle in
    ``out_dir``. For a PyTorch model the weight-size guard's line is printed on stderr, and
    weights beyond 1.05x + 1 KB of the module's are an error unless
    ``allow_weight_growth=True``."""
    with progress.stage("compile"):
        model = _from_torch(model, example_inputs, input_shapes)
        comp = compile_model(model, _options(name, input_shapes, **kw), progress=progress)
        if comp.weight_check:
            progress.write(f"aotc: {comp.weight_check}")
        progress.detail("write")
        emit(comp, out_dir)
    return Bundle(Path(out_dir), name, comp)


def macs_of(comp: Compilation) -> dict[str, int]:
    """MACs of one run of each node of the graph; a control node (If, Loop, Scan) counts its
    bodies' (If: the larger branch; Loop and Scan: the trip count times the body, one iteration
    when the count is a run-time value)."""
    out: dict[str, int] = {}
    g = comp.schedule.graph  # holds the bodies' values too
    return {n.name: _node_macs(n, g, out) for n in comp.graph.nodes}


def _all_macs(comp: Compilation) -> dict[str, int]:
    """MACs of one run of every node, bodies' nodes included (a body node: one iteration)."""
    out: dict[str, int] = {}
    g = comp.schedule.graph
    for n in comp.graph.nodes:
        out[n.name] = _node_macs(n, g, out)
    return out


def _node_macs(n: Node, g: Graph, out: dict[str, int]) -> int:
    bodies = _bodies(n)
    if bodies:
        per = []
        for _, body in bodies:
            total = 0
            for b in body.nodes:
                out[b.name] = _node_macs(b, g, out)
                total += out[b.name]
            per.append(total)
        if n.op == "If":
            return max(per)
        trip = n.attrs.get("_trip")
        return (1 if trip is None else int(trip)) * sum(per)
    opdef = resolve(n.op, g.opset, n.domain)
    f = getattr(opdef, "macs", None)
    return int(f(n, g)) if f else 0


def _bodies(n: Node) -> list[tuple[str, Body]]:
    """A control node's subgraphs by attribute name (then_branch, else_branch, body)."""
    if n.domain or n.op not in ("If", "Loop", "Scan"):
        return []
    return [(k, v) for k, v in n.attrs.items() if isinstance(v, Body)]


def inspect(model: ModelLike, name: str = "model",
            input_shapes: Mapping[str, Sequence[int]] | None = None,
            progress: Progress = QUIET, example_inputs: Sequence[Any] | Any = None,
            **kw: Any) -> dict[str, Any]:
    """Ops, shapes, parameters, MACs per node, and the arena plan against its lower bound."""
    with progress.stage("compile"):
        model = _from_torch(model, example_inputs, input_shapes)
        comp = compile_model(model, _options(name, input_shapes, **kw), progress=progress)
    return describe(comp)


def describe(comp: Compilation) -> dict[str, Any]:
    """The dict ``inspect`` returns, for a compilation already made (``aotc report`` renders it).

    "nodes" lists the graph's nodes (views included), "schedule" the kernels in call order with
    the tensors each reads and writes, "memory" the arena plan, one entry per buffer."""
    g, sg = comp.graph, comp.schedule.graph  # sg also holds the values of If/Loop/Scan bodies
    macs = _all_macs(comp)
    # A streaming model's state (aotc/steps/state.py): its slots, not graph inputs and outputs.
    state = [sl.input for sl in comp.schedule.state]
    public = g.meta.get("output_names", {})
    state_out = {public.get(sl.graph_output, sl.graph_output)
                 for sl in comp.schedule.state if sl.graph_output}
    kernel_of = {ls.step.node.name: ls.kernel.name for ls in comp.lowered}
    nodes = []

    def add(n: Node, inside: str) -> None:
        nodes.append({
            "name": n.name, "op": "+".join([n.op] + [e.op for e in n.epilogue]),
            "inputs": [str(sg.type(i)) for i in n.inputs if i],
            "outputs": [str(sg.type(o)) for o in n.outputs if o],
            "params": 0 if _bodies(n) else _params(sg, n), "macs": macs[n.name],
            "kernel": kernel_of.get(n.name, "(control flow)" if _bodies(n) else
                                    "(view: no kernel)"),
            **({"in": inside} if inside else {}),
        })
        for attr, body in _bodies(n):
            for b in body.nodes:
                add(b, f"{n.name}.{attr}")

    for n in g.nodes:
        add(n, "")
    return {
        "model": comp.model_name, "opset": g.opset, "nodes": nodes,
        "kernels": [ls.kernel.name for ls in comp.lowered],
        "inputs": [_tensor(g, v) for v in g.inputs if v not in state],
        "outputs": [t for t in _graph_outputs(comp) if t["name"] not in state_out],
        **({"state": [_tensor(g, v) for v in state]} if state else {}),
        "schedule": _schedule_rows(comp, macs),
        "total_macs": sum(macs[n.name] for n in g.nodes),
        "params": sum(n["params"] for n in nodes),
        "weights_bytes": comp.weights_bytes,
        "model_const_bytes": comp.model_const_bytes, "memory": _memory(comp),
        "weight_check": comp.weight_check,
        "partition": _partition_rows(comp),
        "patches": comp.patches,
        "budget": _budget(comp),
    }


def _budget(comp: Compilation) -> dict[str, Any]:
    from aotc.targets.budget import estimate

    return estimate(comp).to_json()


def _params(g: Graph, n: Node) -> int:
    """Elements of the constants an anchor and its epilogue read."""
    return int(sum(g.values[i].type.numel for s in (n, *n.epilogue) for i in s.inputs
                   if i in g.values and g.values[i].is_const))


def _tensor(g: Graph, value: str) -> dict[str, Any]:
    t = g.type(value)
    return {"name": value, "dtype": t.dtype.name, "shape": list(t.shape), "type": str(t)}


def _writers(comp: Compilation) -> dict[str, list[str]]:
    """Storage root -> the kernels that write it, in call order: one, or more for the result of
    a run-time If (a copy in each branch) and a loop-carried value (a copy before the loop and
    one in its body)."""
    root = comp.schedule.root
    out: dict[str, list[str]] = {}
    for ls in comp.lowered:
        for o in ls.step.node.outputs:
            if o:
                out.setdefault(root.get(o, o), []).append(ls.kernel.name)
    return out


def _written(writer: Mapping[str, list[str]], root: str) -> dict[str, Any]:
    """"kernel": the last writer of ``root`` (None for a graph input, a constant or a loop
    counter); "kernels": all of them when there are several."""
    ws = writer.get(root, [])
    return {"kernel": ws[-1] if ws else None, **({"kernels": ws} if len(ws) > 1 else {})}


def _graph_outputs(comp: Compilation) -> list[dict[str, Any]]:
    g, s = comp.graph, comp.schedule
    public = g.meta.get("output_names", {})
    writer = _writers(comp)
    return [{**_tensor(g, o), "name": public.get(o, o), "tensor": o,
             **_written(writer, s.root[o])} for o in g.outputs]


def _schedule_rows(comp: Compilation, macs: Mapping[str, int]) -> list[dict[str, Any]]:
    """One row per kernel in call order: the fused ONNX nodes, who runs it, its cost, and
    where each tensor it reads comes from: "kernel" (its writer) or "graph_input".
    A view (Reshape, ...) has no kernel: its reader is linked to the view's storage root."""
    s = comp.schedule
    g = s.graph  # with the values of If/Loop/Scan bodies
    writer = _writers(comp)
    inside = _control_context(s)
    rows = []
    for ls in comp.lowered:
        n = ls.step.node
        reads = [i for node in (n, *n.epilogue) for i in node.inputs
                 if i and i != CHAIN and not g.values[i].is_const]
        rows.append({
            "step": ls.step.index, "kernel": ls.kernel.name, "node": n.name, "op": n.op,
            "in": inside.get(ls.step.index, ""),
            "ops": "+".join([n.op] + [e.op for e in n.epilogue]),
            "fused": [{"name": f.name, "op": f.op} for f in (n, *n.epilogue)],
            "backend": ls.backend or NATIVE, "macs": macs.get(n.name, 0),  # 0: a copy aotc made
            "params": _params(g, n),
            "inputs": [{**_tensor(g, i), **_written(writer, s.root[i]),
                        "graph_input": (s.root[i] if s.storage_kind(i) in ("input", "state")
                                        else None),
                        **({"local": s.local[s.root[i]]} if s.root[i] in s.local else {})}
                       for i in dict.fromkeys(reads)],
            "outputs": [_tensor(g, o) for o in n.outputs if o and o not in s.dead],
            "scratch_bytes": sum(nbytes for _, nbytes in ls.scratch),
            # aotc/schedules: the knobs the kernel used, and those that differ from the
            # target's default (a schedule from --tuning-log)
            "workload": ls.workload or None, "knobs": dict(ls.knobs),
            "tuned": {k: v for k, v in ls.knobs.items() if v != ls.space[k][1]},
        })
    return rows


def _control_context(s: Any) -> dict[int, str]:
    """Step index -> the control flow it runs inside, innermost last ("If_0 then", "Loop_0
    body (at most 10 iterations)"); steps outside control flow are left out."""
    out: dict[int, str] = {}
    stack: list[str] = []
    for st in s.steps:
        n = st.node
        if st.ctrl == "if":
            stack.append(f"{n.name} then")
        elif st.ctrl == "else":
            stack[-1] = f"{n.name} else"
        elif st.ctrl == "loop":
            trip = n.attrs.get("trip")
            bound = f"{trip} iterations" if trip is not None else "a run-time trip count"
            if n.attrs.get("cond"):
                bound = "at most " + bound
            stack.append(f"{n.name} body ({bound})")
        elif st.ctrl in ("endif", "endloop"):
            stack.pop()
        elif stack:
            out[st.index] = " > ".join(stack)
    return out


def _memory(comp: Compilation) -> dict[str, Any]:
    """memory_report with, per buffer, its kind, the kernel that first writes it and the
    tensors it holds (more than one when an output was written in place over an input)."""
    rep = memory_report(comp)
    scratch = {name for ls in comp.lowered for name, _ in ls.scratch}
    held: dict[str, list[str]] = {}
    for root, buf in comp.liveness.alias.items():
        held.setdefault(buf, []).append(root)
    for b in rep["buffers"]:
        b["kind"] = "scratch" if b["name"] in scratch else "tensor"
        b["kernel"] = comp.lowered[b["first"]].kernel.name
        b["tensors"] = [b["name"], *sorted(held.get(b["name"], []))]
    return rep


def _partition_rows(comp: Compilation) -> list[dict[str, str]]:
    """The BYOC partition, by kernel symbol (empty without --byoc)."""
    if not comp.backends:
        return []
    by_node = {r.kernel: r for r in comp.partition}
    rows = []
    for ls in comp.lowered:
        n = ls.step.node
        r = by_node.get(n.name)
        if r is None:  # made after partitioning: a layout transpose or an output copy
            why = ("layout transpose at a region boundary" if n.op == "Transpose"
                   else "inserted by aotc")
            r = Row(n.name, "+".join([n.op] + [e.op for e in n.epilogue]), NATIVE, "", why)
        rows.append({**r.to_json(), "node": n.name, "kernel": ls.kernel.name})
    return rows


def verify(model: ModelLike, out_dir: str | os.PathLike[str] | None = None, name: str = "model",
           inputs: Sequence[Mapping[str, np.ndarray]] | None = None,
           expected: Sequence[Mapping[str, np.ndarray]] | None = None, atol: float = 1e-4,
           rtol: float = 1e-4, seed: int = 0, board: str | None = None,
           input_shapes: Mapping[str, Sequence[int]] | None = None, per_node: bool = False,
           reference: ModelLike | None = None, example_inputs: Sequence[Any] | Any = None,
           **kw: Any) -> dict[str, Any]:
    """Compile, build, run the generated C and compare with onnxruntime (or ``expected``; a
    PyTorch model with torch itself, on the same vectors).

    Returns a report with the max abs error per output; raises AotcError when it is beyond
    ``atol + rtol * |reference|``. ``reference``: take onnxruntime's values from this model
    instead (same tensor names, e.g. the original of a model whose weights were edited).
    ``per_node``: also compare every kernel's output with the reference's value of the same
    ONNX tensor (aotc.verification.per_node; onnxruntime with graph optimisations off), in
    schedule order,
    under ``report["per_node"]``; when the outputs fail, the AotcError carries them in
    ``error.report["per_node"]``."""
    import tempfile

    from aotc.errors import AotcError
    from aotc.verification.per_node import run_per_node
    from aotc.verification.run import run_verification

    source = model
    model = _from_torch(model, example_inputs, input_shapes)
    tmp = None
    if out_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="aotc_verify_")
        out_dir = tmp.name
    try:
        bundle = compile(model, out_dir, name=name, input_shapes=input_shapes, **kw)
        if model is not source and expected is None and reference is None:
            inputs, expected = torch_reference(source, model, bundle, inputs, seed)
        rows = None
        if per_node:
            rows = run_per_node(model, bundle.compilation, inputs, atol, rtol, seed, board,
                                reference)
        try:
            rep = run_verification(model if reference is None else reference, bundle, inputs,
                                   expected, atol, rtol, seed, board, input_shapes)
        except AotcError as e:
            if rows is not None:
                e.report = {"per_node": rows}
            raise
        if rows is not None:
            rep["per_node"] = rows
        return rep
    finally:
        if tmp is not None:
            tmp.cleanup()
