"""Lower each scheduled step to a loop-IR Kernel and record what the graph function passes.

The driver builds the KernelBuilder for a step: one parameter per distinct value the op and its
epilogue read or write, compile-time constants the op adds in Prepare, and scratch. It then
applies the default schedule transformations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.ir.graph import CHAIN, Graph, Node
from aotc.loops import ranges, transforms
from aotc.loops.builder import BufRef, KernelBuilder
from aotc.loops.loop_ir import Buffer, Expr, Kernel, used_buffers
from aotc.names import c_comment, c_ident
from aotc.ops import OpDef, resolve
from aotc.schedules import common as COMMON
from aotc.schedules import workload_key
from aotc.steps.schedule import Schedule, Step


@dataclass
class LoweredStep:
    step: Step
    kernel: Kernel
    args: list[tuple[str, str]]  # per kernel param: ("value"|"const"|"scratch", name)
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    scratch: list[tuple[str, int]] = field(default_factory=list)  # (name, bytes)
    # Temporaries the kernel keeps on the C stack instead of the arena (KernelBuilder.
    # stack_temp): (name, bytes).
    stack: list[tuple[str, int]] = field(default_factory=list)
    # A kernel a BYOC backend emitted (aotc/byoc/lowering.py): its C source replaces the
    # printed loop nest (``kernel`` then has the parameters and an empty body), and the call
    # returns a status.
    source: str | None = None
    includes: tuple[str, ...] = ()
    backend: str | None = None
    # aotc/schedules: the kernel's workload key, the knobs its lowering asked for (name ->
    # (choices, default)) and the values it used.
    workload: str = ""
    space: dict[str, tuple[list[Any], Any]] = field(default_factory=dict)
    knobs: dict[str, Any] = field(default_factory=dict)


def _opdef(g: Graph, n: Node) -> OpDef:
    opdef = resolve(n.op, g.opset, n.domain)
    if opdef is None:
        raise AotcError("no implementation", n.name, n.op)
    return opdef


def lower_step(s: Schedule, step: Step, unroll_max: int = 8,
               features: frozenset[str] = frozenset(),
               schedules: Mapping[str, Mapping[str, Any]] | None = None, cpu: str = "",
               defaults: Mapping[str, Any] | None = None) -> LoweredStep:
    """``schedules``: workload key -> schedule ({knob: value}) for the kernels that have one
    (e.g. from a tuning log); the others get their knobs' defaults, or ``defaults`` ({knob:
    value}, this step's defaults chosen by the compiler) where it names the knob."""
    g = s.graph
    n = step.node
    key = workload_key(g, n)
    opdef = _opdef(g, n)
    ins = [g.values[i] if i else None for i in n.inputs]
    node = opdef.prepare(n, ins)
    params: dict[str, tuple[BufRef, tuple[str, str]]] = {}
    permuted = s.strides

    def ref_for(value: str, pname: str) -> BufRef:
        if value in params:
            return params[value][0]
        v = g.values[value]
        role = "const" if v.is_const else "in"
        ref = BufRef(Buffer(pname, v.type.dtype, max(v.type.numel, 1), role), v.type.shape,
                     permuted.get(value))
        params[value] = (ref, ("const" if v.is_const else "value", value))
        return ref

    in_refs = [ref_for(i, f"x{k}") if i else None for k, i in enumerate(node.inputs)]
    epilogue = []
    extra: list[BufRef] = []
    for j, e in enumerate(n.epilogue):
        eop = _opdef(g, e)
        e_ins = [g.values[i] if i and i != CHAIN else None for i in e.inputs]
        e_prep = eop.prepare(e, e_ins)
        pos = list(e_prep.inputs).index(CHAIN)
        refs = [None if i == CHAIN or not i else ref_for(i, f"e{j}_{k}")
                for k, i in enumerate(e_prep.inputs)]
        extra += [r for r in refs if r is not None]
        epilogue.append(_epilogue_fn(eop, e_prep, pos, refs))
    out_refs: list[BufRef | None] = []
    for k, o in enumerate(n.outputs):
        if not o:
            out_refs.append(None)  # an omitted optional output ("") has no buffer
            continue
        t = g.type(o)
        buf = Buffer(f"y{k}", t.dtype, max(t.numel, 1), "out")
        out_refs.append(BufRef(buf, t.shape))
    name = f"k{step.index}_" + c_ident("_".join([n.op] + [e.op for e in n.epilogue]).lower())
    comment = c_comment(f"{n.label}")
    kb = KernelBuilder(
        name, comment, in_refs, out_refs, epilogue, extra,
        input_consts=[g.values[i].const if i else None for i in node.inputs],
        features=features,
        dead_outputs=frozenset(k for k, o in enumerate(n.outputs) if o in s.dead),
        schedule=(schedules or {}).get(key), stack_temps=bool(n.attrs.get("_stack_temp")),
        cpu=cpu, defaults=defaults)
    try:
        opdef.lower(node, kb)
    except AotcError:
        raise
    except NotImplementedError:
        raise AotcError("has no lowering", n.name, n.op) from None
    kernel = kb.build()
    unroll_max = kb.knob(COMMON.UNROLL_MAX, default=unroll_max)
    kernel = ranges.prune_guards(transforms.unroll_hinted(kernel, unroll_max))
    kernel = transforms.scalarize_locals(kernel)
    overflow = ranges.index_overflow(kernel)
    if overflow is not None:
        raise AotcError(f"{overflow}, beyond the int32_t indexing of the generated C: a "
                        f"tensor, shape or attribute (stride, pad, dilation) is too large",
                        n.name, n.op)
    # Drop inputs the lowering replaced (e.g. a weight it re-laid out at compile time).
    used = used_buffers(kernel.body)
    kernel = replace(kernel, params=tuple(b for b in kernel.params
                                          if b.name in used))
    args: list[tuple[str, str]] = []
    by_pname = {ref.buf.name: arg for ref, arg in params.values()}
    for b in kernel.params:
        if b.role == "out":
            args.append(("value", n.outputs[int(b.name[1:])]))
        elif b.role == "scratch":
            args.append(("scratch", b.name))
        elif b.name in kb.consts:
            args.append(("const", b.name))
        else:
            args.append(by_pname[b.name])
    scratch = [(b.name, b.size * b.dtype.itemsize) for b in kb.scratch]
    knobs = {k: kb.schedule.get(k, default) for k, (_, default) in kb.space.items()}
    stack = [(b.name, b.size * b.dtype.itemsize) for b in kb.stack_temps]
    return LoweredStep(step, kernel, args, dict(kb.consts), scratch, stack, workload=key,
                       space=dict(kb.space), knobs=knobs)


def _epilogue_fn(eop: OpDef, e: Node, pos: int, refs: Sequence[BufRef | None]):  # type: ignore[no-untyped-def]
    def fn(value: Expr, idx: Sequence[Expr], flat: Expr | None, out_shape: tuple[int, ...]
           ) -> Expr:
        args: list[Expr] = []
        for k, r in enumerate(refs):
            if k == pos:
                args.append(value)
            elif r is not None:
                if flat is not None and r.shape == out_shape:
                    args.append(r.flat(flat))
                elif flat is not None and r.numel == 1:
                    args.append(r.flat(0))
                else:
                    args.append(r.bcast(idx))
        return eop.scalar(args, e)

    fn.step = (eop, e, pos, refs)  # type: ignore[attr-defined]  # KernelBuilder.epilogue_steps
    return fn
