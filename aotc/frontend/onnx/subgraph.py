"""Import of If, Loop and Scan: each subgraph becomes a closed Body
(aotc/ops/control/if_loop_scan.py).

Names: every value and node of a body is renamed ``<node>.<attribute>.<name>``, unique in the
whole model. Outer-scope references (a body node reading a tensor of an enclosing graph by
name, as the ONNX spec allows) resolve innermost scope first; each becomes a capture: a local
value the node's extra input stands for. An If whose condition is known while importing (an
initializer, or shape arithmetic such as Shape -> Gather -> Equal) is replaced by its taken
branch here, so the ops after it see the branch's shapes; the other branch is never imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Graph, Node, TensorType, Value
from aotc.ops.control.if_loop_scan import Body, inline
from aotc.ops.evaluate import fold_constants

CONTROL_OPS = ("If", "Loop", "Scan")
Resolver = Callable[[str], "str | None"]
# (protos, values, known, resolver, prefix) -> nodes: the frontend's node conversion.
ConvertNodes = Callable[[list[onnx.NodeProto], dict[str, Value], dict[str, np.ndarray],
                         Resolver, str], list[Node]]


@dataclass
class Context:
    opset: int
    known: dict[str, np.ndarray]
    convert_nodes: ConvertNodes
    const_value: Callable[[np.ndarray, str], Value]


def _known(name: str, values: dict[str, Value], known: dict[str, np.ndarray]
           ) -> np.ndarray | None:
    v = values.get(name)
    if v is not None and v.const is not None:
        return v.const
    return known.get(name)


def _body(gp: onnx.GraphProto, prefix: str, formal_types: list[TensorType], ctx: Context,
          outer: dict[str, Value], outer_resolve: Resolver, node: str, op: str
          ) -> tuple[Body, list[str]]:
    """The closed Body of ``gp`` and, per capture, the outer value it stands for."""
    vals: dict[str, Value] = {}
    local: dict[str, str] = {}
    taken: set[str] = set()
    caps: list[tuple[str, str]] = []

    def fresh(orig: str) -> str:
        name = prefix + orig
        while name in taken or name in outer:
            name += "_"
        taken.add(name)
        return name

    if len(gp.input) != len(formal_types):
        raise AotcError(f"body {gp.name!r} has {len(gp.input)} inputs; {op} passes it "
                        f"{len(formal_types)}", node, op)
    formals = []
    for vi, t in zip(gp.input, formal_types):
        local[vi.name] = fresh(vi.name)
        vals[local[vi.name]] = Value(local[vi.name], t)
        formals.append(local[vi.name])
    for t in gp.initializer:
        local[t.name] = fresh(t.name)
        vals[local[t.name]] = ctx.const_value(numpy_helper.to_array(t), local[t.name])

    def resolve(orig: str) -> str | None:
        if orig in local:
            return local[orig]
        name = outer_resolve(orig)
        if name is None:
            return None
        v = outer[name]
        local[orig] = fresh(orig)
        vals[local[orig]] = Value(local[orig], v.type, v.const)
        if name in ctx.known:
            ctx.known[local[orig]] = ctx.known[name]
        caps.append((local[orig], name))
        return local[orig]

    protos = []
    for pn in gp.node:
        q = onnx.NodeProto()
        q.CopyFrom(pn)
        ins = []
        for i in pn.input:
            r = resolve(i) if i else ""
            if r is None:
                raise AotcError(f"body {gp.name!r}: input {i!r} is produced by no node, "
                                f"initializer or input of this or an enclosing graph",
                                pn.name or "?", pn.op_type)
            ins.append(r)
        del q.input[:]
        q.input.extend(ins)
        outs = []
        for o in pn.output:
            if o:
                local[o] = fresh(o)
            outs.append(local[o] if o else "")
        del q.output[:]
        q.output.extend(outs)
        protos.append(q)
    nodes = ctx.convert_nodes(protos, vals, ctx.known, resolve, prefix)
    outs = []
    for o in gp.output:
        r = resolve(o.name)
        if r is None:
            raise AotcError(f"body {gp.name!r} output {o.name!r} is never produced", node, op)
        outs.append(r)
    folded = fold_constants(Graph(prefix, formals + [c for c, _ in caps], outs, vals, nodes,
                                  ctx.opset))
    body = Body(tuple(formals), tuple((c, k) for k, (c, _) in enumerate(caps)), tuple(outs),
                tuple(folded.nodes), folded.values)
    return body, [name for _, name in caps]


def _with_captures(body: Body, outer_names: list[str], inputs: list[str]) -> Body:
    """Point the body's captures at node inputs, appended to ``inputs`` (shared, deduplicated)."""
    caps = []
    for (local, _), name in zip(body.captures, outer_names):
        if name not in inputs[1:]:
            inputs.append(name)
        caps.append((local, inputs.index(name, 1)))
    return Body(body.inputs, tuple(caps), body.outputs, body.nodes, body.values)


def convert(pn: onnx.NodeProto, node_name: str, ctx: Context, values: dict[str, Value],
            resolve: Resolver) -> list[Node]:
    attrs = {a.name: a for a in pn.attribute}
    if pn.op_type == "If":
        return _if(pn, node_name, ctx, values, resolve, attrs)
    if pn.op_type == "Loop":
        return [_loop(pn, node_name, ctx, values, resolve, attrs)]
    return [_scan(pn, node_name, ctx, values, resolve, attrs)]


def _graph_attr(attrs: dict[str, onnx.AttributeProto], name: str, node: str, op: str
                ) -> onnx.GraphProto:
    a = attrs.get(name)
    if a is None or a.type != onnx.AttributeProto.GRAPH:
        raise AotcError(f"attribute {name!r} must be a graph", node, op)
    return a.g


def _if(pn: onnx.NodeProto, name: str, ctx: Context, values: dict[str, Value],
        resolve: Resolver, attrs: dict[str, onnx.AttributeProto]) -> list[Node]:
    cond = pn.input[0]
    ct = values[cond].type
    if ct.numel != 1 or ct.dtype.name != "bool":
        raise AotcError(f"cond must be one bool, it is {ct}", name, "If")
    c = _known(cond, values, ctx.known)
    branches = ("then_branch", "else_branch") if c is None else \
        ("then_branch",) if bool(np.asarray(c).reshape(-1)[0]) else ("else_branch",)
    inputs = [cond]
    bodies = {}
    for br in branches:
        gp = _graph_attr(attrs, br, name, "If")
        body, outer = _body(gp, f"{name}.{br.split('_')[0]}.", [], ctx, values, resolve, name,
                            "If")
        if len(body.outputs) != len([o for o in pn.output]):
            raise AotcError(f"{br} has {len(body.outputs)} outputs, the node {len(pn.output)}",
                            name, "If")
        bodies[br] = _with_captures(body, outer, inputs)
    node = Node("If", name, tuple(inputs), tuple(pn.output), bodies, 1)
    if c is not None:
        return inline(node, bodies[branches[0]], values, ctx.opset, ctx.known)
    then, other = bodies["then_branch"], bodies["else_branch"]
    for k, (a, b) in enumerate(zip(then.outputs, other.outputs)):
        ta, tb = then.type(a), other.type(b)
        if ta != tb:
            raise AotcError(f"output {k}: then_branch gives {ta}, else_branch {tb}; an If with "
                            f"a run-time condition needs one static shape and dtype", name, "If")
        if pn.output[k]:
            values[pn.output[k]] = Value(pn.output[k], ta)
    return [node]


def _stays_true(body: Body, cond_out: str) -> bool:
    """The body's cond output is its cond input passed through (or a constant true)."""
    producer = {o: n for n in body.nodes for o in n.outputs}
    while cond_out in producer and producer[cond_out].op == "Identity":
        cond_out = producer[cond_out].inputs[0]
    v = body.values[cond_out]
    if v.const is not None:
        return bool(np.asarray(v.const).reshape(-1)[0])
    return cond_out == body.inputs[1]


def _loop(pn: onnx.NodeProto, name: str, ctx: Context, values: dict[str, Value],
          resolve: Resolver, attrs: dict[str, onnx.AttributeProto]) -> Node:
    m_name = pn.input[0] if len(pn.input) > 0 else ""
    c_name = pn.input[1] if len(pn.input) > 1 else ""
    states = list(pn.input[2:])
    if any(not s for s in states):
        raise AotcError("a loop-carried input is empty", name, "Loop")
    state_types = [values[s].type for s in states]
    formal = [TensorType((), dtypes.BY_NAME["int64"]), TensorType((), dtypes.bool_)]
    body, outer = _body(_graph_attr(attrs, "body", name, "Loop"), f"{name}.body.",
                        formal + state_types, ctx, values, resolve, name, "Loop")
    n_scan = len(pn.output) - len(states)
    if len(body.outputs) != 1 + len(states) + n_scan or n_scan < 0:
        raise AotcError(f"the body has {len(body.outputs)} outputs; with {len(states)} "
                        f"loop-carried values and {len(pn.output)} node outputs it needs "
                        f"{1 + len(pn.output)}", name, "Loop")
    for k, (s, t) in enumerate(zip(body.outputs[1:], state_types)):
        if body.type(s) != t:
            raise AotcError(f"loop-carried value {k} enters as {t} but the body gives "
                            f"{body.type(s)}; aotc needs a static shape", name, "Loop")
    m = _known(m_name, values, ctx.known) if m_name else None
    c0 = _known(c_name, values, ctx.known) if c_name else np.array(True)
    breaks = not _stays_true(body, body.outputs[0])
    if m is not None:
        trip: int | None = max(int(np.asarray(m).reshape(-1)[0]), 0)
    else:
        trip = None
    if c0 is not None and not bool(np.asarray(c0).reshape(-1)[0]):
        trip = 0
    elif c0 is None and not breaks:
        breaks = True  # the initial condition is a run-time value: it may skip the loop
    if not m_name and not breaks:
        raise AotcError("the loop has neither a trip count M nor a stop condition", name,
                        "Loop")
    if n_scan and (trip is None or (breaks and trip)):
        why = "the trip count M is not known at compile time" if trip is None else \
            "the loop may stop early (a data-dependent condition)"
        raise AotcError(f"{why}, so the length of its scan outputs is not static", name, "Loop")
    inputs = [m_name, c_name, *states]
    body = _with_captures(body, outer, inputs)
    for k, o in enumerate(pn.output):
        if not o:
            continue
        if k < len(states):
            values[o] = Value(o, state_types[k])
        else:
            t = body.type(body.outputs[1 + k])
            values[o] = Value(o, TensorType((trip or 0, *t.shape), t.dtype))
    return Node("Loop", name, tuple(inputs), tuple(pn.output),
                {"body": body, "_trip": trip, "_breaks": breaks}, 1)


def _ints(attrs: dict[str, onnx.AttributeProto], key: str, n: int) -> list[int]:
    a = attrs.get(key)
    return list(a.ints) if a is not None else [0] * n


def _scan(pn: onnx.NodeProto, name: str, ctx: Context, values: dict[str, Value],
          resolve: Resolver, attrs: dict[str, onnx.AttributeProto]) -> Node:
    a = attrs.get("num_scan_inputs")
    if a is None:
        raise AotcError("required attribute 'num_scan_inputs' is missing", name, "Scan")
    n_in = int(a.i)
    n_state = len(pn.input) - n_in
    if n_in < 1 or n_state < 0 or any(not i for i in pn.input):
        raise AotcError(f"num_scan_inputs = {n_in} does not fit {len(pn.input)} inputs", name,
                        "Scan")
    scans = list(pn.input[n_state:])
    n_out = len(pn.output) - n_state
    for key, n in (("scan_input_axes", n_in), ("scan_output_axes", n_out)):
        for ax in _ints(attrs, key, n):
            if ax != 0:
                raise AotcError(f"{key} = {ax}: aotc scans along axis 0 only (transpose the "
                                f"input first)", name, "Scan")
    in_dirs = _ints(attrs, "scan_input_directions", n_in)
    out_dirs = _ints(attrs, "scan_output_directions", n_out)
    if any(d not in (0, 1) for d in in_dirs + out_dirs) or len(in_dirs) != n_in or \
            len(out_dirs) != n_out:
        raise AotcError("scan directions must be 0 or 1, one per scan input/output", name,
                        "Scan")
    lengths = {values[s].type.shape[0] if values[s].type.shape else -1 for s in scans}
    if len(lengths) != 1 or -1 in lengths:
        raise AotcError(f"the scan inputs need one common length along axis 0, they have "
                        f"{sorted(lengths)}", name, "Scan")
    trip = lengths.pop()
    state_types = [values[s].type for s in pn.input[:n_state]]
    slice_types = [TensorType(values[s].type.shape[1:], values[s].type.dtype) for s in scans]
    body, outer = _body(_graph_attr(attrs, "body", name, "Scan"), f"{name}.body.",
                        state_types + slice_types, ctx, values, resolve, name, "Scan")
    if len(body.outputs) != len(pn.output):
        raise AotcError(f"the body has {len(body.outputs)} outputs, the node "
                        f"{len(pn.output)}", name, "Scan")
    for k, (s, t) in enumerate(zip(body.outputs, state_types)):
        if body.type(s) != t:
            raise AotcError(f"state {k} enters as {t} but the body gives {body.type(s)}", name,
                            "Scan")
    inputs = list(pn.input)
    body = _with_captures(body, outer, inputs)
    for k, o in enumerate(pn.output):
        t = body.type(body.outputs[k])
        if o:
            values[o] = Value(o, t if k < n_state else TensorType((trip, *t.shape), t.dtype))
    attrs_out: dict[str, Any] = {"body": body, "num_scan_inputs": n_in, "_trip": trip,
                                 "scan_input_directions": tuple(in_dirs),
                                 "scan_output_directions": tuple(out_dirs)}
    return Node("Scan", name, tuple(inputs), tuple(pn.output), attrs_out, 9)
