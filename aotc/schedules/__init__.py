"""Schedules: how a kernel runs, kept apart from what it computes.

An op's lowering states the loop nest of what it computes. Every choice of *how* (the width of
an accumulator tile, whether a tile is unrolled into registers, which instruction-set path, how
many output pixels share an im2col column, how far loops are unrolled) is a knob declared in
this package, one module per kernel family (common, conv, gemm), with its choices and its
default. The lowering asks the KernelBuilder for a knob's value (``kb.knob(CONV_TILE)``): that
is the default for the target (today's hand-picked choice) unless the compilation was given a
schedule for the kernel's workload, e.g. the best one a tuning log recorded (aotc/tune/).

A schedule is data: ``{knob name: value}``. Knobs a lowering never asks for are ignored, and a
value outside a knob's choices is refused. A kernel's *space* is the set of knobs its lowering
asked for, with their choices: the tuner reads it back from the compiled bundle (bundle.json,
"workloads") and searches it. Every schedule computes the same values: integer kernels give the
same bytes, float kernels the same sums in the same order (tests/schedules).

A *workload* is what a kernel computes, independent of names and weight values: the op and its
fused epilogue, attributes, input and output shapes and dtypes, which inputs are compile-time
constants. Kernels with the same workload key share a schedule.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import product
from typing import Any

from aotc.errors import AotcError

Schedule = Mapping[str, Any]  # knob name -> value


@dataclass(frozen=True)
class Context:
    """What a knob's default may depend on: the target's features (board.toml), whether
    the kernel's arithmetic is integer, and the target's core (board.toml cpu, e.g.
    "cortex-m4"; "" without --target) where cores of the same features differ in timing."""

    features: frozenset[str] = frozenset()
    integer: bool = False
    cpu: str = ""


@dataclass(frozen=True)
class Knob:
    name: str  # "<family>.<knob>", e.g. "conv.tile"
    choices: tuple[Any, ...]
    default: Callable[[Context], Any]
    doc: str

    def check(self, value: Any) -> Any:
        if value not in self.choices:
            raise AotcError(f"schedule knob {self.name} = {value!r} is not one of "
                            f"{list(self.choices)}")
        return value


KNOBS: dict[str, Knob] = {}


def knob(name: str, choices: tuple[Any, ...], default: Callable[[Context], Any] | Any,
         doc: str) -> Knob:
    """Declare a knob (once, at import of its family's module)."""
    fn = default if callable(default) else (lambda ctx, v=default: v)
    k = Knob(name, tuple(choices), fn, doc)
    assert name not in KNOBS, f"knob {name} declared twice"
    KNOBS[name] = k
    return k


def space_size(space: Mapping[str, list[Any]]) -> int:
    n = 1
    for choices in space.values():
        n *= len(choices)
    return n


def grid(space: Mapping[str, list[Any]]) -> Iterator[dict[str, Any]]:
    """Every schedule of a space, in a fixed order (knobs sorted by name)."""
    names = sorted(space)
    for values in product(*(space[n] for n in names)):
        yield dict(zip(names, values))


def _plain(v: Any) -> Any:
    """An attribute as JSON (tuples as lists, arrays as lists, subgraphs by their repr's
    hash); only for hashing."""
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if hasattr(v, "tolist"):
        return v.tolist()
    return type(v).__name__


def workload_key(g: Any, node: Any) -> str:
    """``<ops>-<12 hex digits>``: the kernel's op chain and a hash of what it computes."""
    def attrs(n: Any) -> dict[str, Any]:
        return {k: _plain(v) for k, v in sorted(n.attrs.items())}

    def tensor(name: str) -> Any:
        if not name or name not in g.values:
            return None
        v = g.values[name]
        return [list(v.type.shape), v.type.dtype.name, bool(v.is_const)]

    desc = {
        "op": [node.domain, node.op, attrs(node)],
        "in": [tensor(i) for i in node.inputs],
        "out": [tensor(o) for o in node.outputs],
        "epilogue": [[e.domain, e.op, attrs(e), [tensor(i) for i in e.inputs]]
                     for e in node.epilogue],
    }
    digest = hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()[:12]
    ops = "_".join([node.op] + [e.op for e in node.epilogue])
    return f"{ops}-{digest}"


def checked(schedule: Schedule) -> dict[str, Any]:
    """A schedule whose knob names and values are known (AotcError otherwise)."""
    out = {}
    for name, value in schedule.items():
        if name not in KNOBS:
            raise AotcError(f"unknown schedule knob {name!r}; known: {', '.join(sorted(KNOBS))}")
        out[name] = KNOBS[name].check(value)
    return out


# The families' knobs register on import.
from aotc.schedules import common  # noqa: E402,F401
from aotc.schedules.conv import knobs as conv_knobs  # noqa: E402,F401
from aotc.schedules.gemm import knobs as gemm_knobs  # noqa: E402,F401
