"""Partitioning: after fusion, each kernel goes to the first enabled backend with a pattern for
its anchor op whose checks accept it; everything else stays native (aotc's own kernels).

A claimed node carries ``_byoc`` (the backend's name) and ``_byoc_pattern`` in its attrs. The
partition table (graph.meta["partition"]) has one row per kernel: the backend or "native" and,
for a native kernel some backend had a pattern for, each refusing check's reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aotc.byoc.backend import Pattern, Subgraph
from aotc.errors import AotcError
from aotc.ir.graph import CHAIN, Graph, Node, Value
from aotc.ops import resolve

NATIVE = "native"


@dataclass(frozen=True)
class Row:
    kernel: str  # the anchor node's name
    ops: str  # anchor + epilogue ops, "+"-joined
    backend: str  # a backend's name or NATIVE
    pattern: str = ""
    reason: str = ""  # why the backends with a pattern for this op refused it

    def to_json(self) -> dict[str, str]:
        return {"kernel": self.kernel, "ops": self.ops, "backend": self.backend,
                "pattern": self.pattern, "reason": self.reason}


def _patterns(backend: Any) -> Sequence[Pattern]:
    try:
        return list(backend.patterns())
    except AotcError:
        raise
    except Exception as e:
        raise AotcError(f"BYOC backend {backend.name!r}: patterns() raised "
                        f"{type(e).__name__}: {e}") from None


def _refusal(backend: Any, p: Pattern, sub: Subgraph) -> str | None:
    try:
        return p.refusal(sub)
    except AotcError:
        raise
    except Exception as e:
        raise AotcError(f"BYOC backend {backend.name!r}: the check of pattern {p.name!r} raised "
                        f"{type(e).__name__}: {e}", sub.node.name, sub.node.op) from None


def subgraph_of(g: Graph, n: Node, requant: str) -> Subgraph | None:
    """The backend's view of node ``n`` (None for a view op, which is no kernel)."""
    opdef = resolve(n.op, g.opset, n.domain)
    if opdef is None or (opdef.kind == "view" and not n.epilogue):
        return None
    ins = [g.values[i] if i else None for i in n.inputs]
    return Subgraph(n, opdef.prepare(n, ins), g, requant)


def _claim(g: Graph, n: Node, backends: Sequence[Any], table: dict[str, Sequence[Pattern]],
           requant: str) -> tuple[tuple[str, str] | None, list[str]]:
    """(backend, pattern) of the first backend that takes ``n``, and the refusals before it."""
    sub = subgraph_of(g, n, requant)
    reasons: list[str] = []
    for b in backends:
        for p in table[b.name]:
            if not p.applies(n):
                continue
            assert sub is not None
            why = _refusal(b, p, sub)
            if why is None:
                return (b.name, p.name), reasons
            reasons.append(f"{b.name}/{p.name}: {why}")
    return None, reasons


def _split(g: Graph, n: Node, cut: int) -> tuple[Graph, Node, Node]:
    """``n`` with only epilogue[:cut], writing a fresh value, and the rest of its epilogue as a
    kernel of its own (epilogue[cut] the anchor) that reads it: (graph, head, tail)."""
    out = n.outputs[0]
    mid, k = f"{out}__pre", 1
    while mid in g.values:
        mid, k = f"{out}__pre{k}", k + 1
    g = g.replace(values={**g.values, mid: Value(mid, g.type(out))})
    head = n.with_(outputs=(mid,), epilogue=n.epilogue[:cut])
    e = n.epilogue[cut]
    tail = e.with_(inputs=tuple(mid if i == CHAIN else i for i in e.inputs), outputs=(out,),
                   epilogue=n.epilogue[cut + 1:])
    return g, head, tail


def partition(g: Graph, backends: Sequence[Any], requant: str = "tflite") -> Graph:
    if not backends:
        return g
    table = {b.name: _patterns(b) for b in backends}
    nodes: list[Node] = []
    rows: list[Row] = []
    work = list(reversed(g.nodes))
    while work:
        n = work.pop()
        if subgraph_of(g, n, requant) is None or n.domain == "aotc" and not any(
                p.applies(n) for ps in table.values() for p in ps):  # aotc's ops: by pattern
            nodes.append(n)
            continue
        claim, reasons = _claim(g, n, backends, table, requant)
        if claim is None and n.epilogue:
            # No backend takes the fused kernel: the longest head of it one does takes (e.g. a
            # conv whose residual QLinearAdd the library cannot fuse), and the rest of the
            # epilogue becomes a kernel of its own, partitioned in turn.
            for cut in range(len(n.epilogue) - 1, -1, -1):
                g2, head, tail = _split(g, n, cut)
                if _claim(g2, head, backends, table, requant)[0] is not None:
                    g = g2
                    work += [tail, head]
                    break
            else:
                head = None
            if head is not None:
                continue
        ops = "+".join([n.op] + [e.op for e in n.epilogue])
        if claim:
            nodes.append(n.with_(attrs={**n.attrs, "_byoc": claim[0], "_byoc_pattern": claim[1]}))
            rows.append(Row(n.name, ops, claim[0], claim[1]))
        else:
            nodes.append(n)
            rows.append(Row(n.name, ops, NATIVE, "", "; ".join(reasons) or "no pattern"))
    return g.replace(nodes=nodes, meta={**g.meta, "partition": rows})
