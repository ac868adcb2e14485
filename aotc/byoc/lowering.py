"""A claimed kernel -> a step of the graph function: ask the backend for its C (``codegen``),
then describe the call the way native kernels are described (parameters as Buffers, arguments
as values, constants and scratch), so memory planning, weights and emission treat both alike.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.byoc.backend import Emitted, Subgraph
from aotc.errors import AotcError
from aotc.loops.loop_ir import Buffer, Kernel
from aotc.lower.lowering import LoweredStep
from aotc.names import c_comment, c_ident
from aotc.ops import resolve
from aotc.steps.schedule import Schedule, Step


def symbol_for(step: Step, backend: str) -> str:
    n = step.node
    return f"k{step.index}_" + c_ident(f"{backend}_{n.op}".lower().replace("-", "_"))


def lower_external(s: Schedule, step: Step, backends: Mapping[str, Any],
                   requant: str) -> LoweredStep:
    g = s.graph
    n = step.node
    backend = backends[n.attrs["_byoc"]]
    opdef = resolve(n.op, g.opset, n.domain)
    assert opdef is not None
    ins = [g.values[i] if i else None for i in n.inputs]
    sub = Subgraph(n, opdef.prepare(n, ins), g, requant, n.attrs.get("_layout", "NCHW"))
    symbol = symbol_for(step, backend.name)
    try:
        em = backend.codegen(sub, symbol)
    except AotcError as e:
        raise AotcError(f"BYOC backend {backend.name!r}: {e.reason}", n.name, n.op) from None
    except Exception as e:
        raise AotcError(f"BYOC backend {backend.name!r}: codegen raised {type(e).__name__}: {e}",
                        n.name, n.op) from None
    _check_emitted(em, symbol, backend.name, n.name, n.op)
    params: list[Buffer] = []
    args: list[tuple[str, str]] = []
    for k, v in enumerate(sub.activations):
        t = g.type(v)
        params.append(Buffer(f"x{k}", t.dtype, max(t.numel, 1), "in"))
        args.append(("value", v))
    for k, o in enumerate(sub.outputs):
        t = g.type(o)
        params.append(Buffer(f"y{k}", t.dtype, max(t.numel, 1), "out"))
        args.append(("value", o))
    consts: dict[str, np.ndarray] = {}
    for k, c in enumerate(em.constants):
        arr = np.ascontiguousarray(c.data)
        dt = dtypes.from_numpy(arr.dtype)
        key = f"{symbol}_{c_ident(c.name, 'c')}"
        if key in consts:
            key = f"{key}_{k}"
        consts[key] = arr
        params.append(Buffer(key, dt, max(int(arr.size), 1), "const"))
        args.append(("const", key))
    scratch: list[tuple[str, int]] = []
    if em.scratch_bytes > 0:
        name = f"{symbol}_scratch"
        params.append(Buffer(name, dtypes.uint8, int(em.scratch_bytes), "scratch"))
        args.append(("scratch", name))
        scratch.append((name, int(em.scratch_bytes)))
    comment = c_comment(f"{n.label} -> {backend.name}" + (f": {em.comment}" if em.comment
                                                          else ""))
    kernel = Kernel(symbol, tuple(params), (), comment)
    return LoweredStep(step, kernel, args, consts, scratch, source=em.source,
                       includes=tuple(em.includes), backend=backend.name)


def _check_emitted(em: Any, symbol: str, backend: str, node: str, op: str) -> None:
    def fail(why: str) -> None:
        raise AotcError(f"BYOC backend {backend!r}: codegen {why}", node, op)

    if not isinstance(em, Emitted):
        fail(f"returned {type(em).__name__}, not aotc.byoc.Emitted")
    if not isinstance(em.source, str) or not re.search(rf"\b{re.escape(symbol)}\s*\(",
                                                       em.source):
        fail(f"source does not define the function {symbol}")
    if not isinstance(em.scratch_bytes, (int, np.integer)) or em.scratch_bytes < 0:
        fail(f"scratch_bytes must be a non-negative int, got {em.scratch_bytes!r}")
    for inc in em.includes:
        if not re.fullmatch(r"[A-Za-z0-9_./+-]+\.h", inc):
            fail(f"include {inc!r} is not a header file name")
    for c in em.constants:
        try:
            dtypes.from_numpy(np.asarray(c.data).dtype)
        except Exception:
            fail(f"constant {c.name!r} has an unsupported dtype {np.asarray(c.data).dtype}")
