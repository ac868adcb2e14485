"""Graph invariants, checked after every pass in tests (``verify(g)`` raises VerifyError).

Checked: every value has a static shape and constants match their type; nodes are in a valid
order (a value is read only after it is defined, and defined once); node names are unique; every
epilogue step reads the running value (CHAIN) exactly once and defines nothing; every graph
output is defined.
"""

from __future__ import annotations

from aotc.ir.graph import CHAIN, Graph


class VerifyError(AssertionError):
    pass


def verify(g: Graph) -> None:
    defined = set(g.inputs) | {v.name for v in g.constants()}
    for name in g.inputs:
        if name not in g.values:
            raise VerifyError(f"input {name} has no value")
        if g.values[name].is_const:
            raise VerifyError(f"input {name} is also a constant")
    for v in g.values.values():
        if any(not isinstance(d, int) or d < 0 for d in v.type.shape):
            raise VerifyError(f"value {v.name} has a non-static shape {v.type.shape}")
        if v.const is not None:
            if tuple(v.const.shape) != v.type.shape or v.const.dtype != v.type.dtype.np:
                raise VerifyError(f"constant {v.name} data does not match {v.type}")
    seen_nodes: set[str] = set()
    for n in g.nodes:
        for step in (n, *n.epilogue):
            if step.name in seen_nodes:
                raise VerifyError(f"duplicate node name {step.name}")
            seen_nodes.add(step.name)
        for i in n.inputs:
            if i == CHAIN:
                raise VerifyError(f"node {n.name} reads {CHAIN} outside an epilogue")
            if i and i not in defined:
                raise VerifyError(f"node {n.name} reads {i} before it is defined")
        for e in n.epilogue:
            if e.outputs or list(e.inputs).count(CHAIN) != 1:
                raise VerifyError(f"epilogue {e.name} of {n.name} must read {CHAIN} once and "
                                  f"define nothing")
            if e.epilogue:
                raise VerifyError(f"epilogue {e.name} of {n.name} has an epilogue itself")
            for i in e.inputs:
                if i and i != CHAIN and i not in defined:
                    raise VerifyError(f"epilogue {e.name} reads {i} before it is defined")
        if n.epilogue and len([o for o in n.outputs if o]) != 1:
            raise VerifyError(f"node {n.name} has an epilogue but not exactly one output")
        for o in n.outputs:
            if not o:
                continue
            if o in defined:
                raise VerifyError(f"value {o} is defined twice")
            if o not in g.values:
                raise VerifyError(f"node {n.name} output {o} has no type")
            if g.values[o].is_const:
                raise VerifyError(f"node {n.name} output {o} is also a constant")
            defined.add(o)
    for o in g.outputs:
        if o not in defined:
            raise VerifyError(f"graph output {o} is never produced")
