"""State that lives between calls, as the frontends declare it: ``graph.meta["state"]``, one
slot per state (aotc/steps/state.py): the graph input that reads it, the graph output that
holds the next value, its bytes after reset.

Two sources: a TFLite model's resource variables (the importer lists them in the model's
``aotc.state`` metadata, aotc/frontend/tflite/variables.py) and ``--state IN=OUT`` for a model
that carries its state as a graph input and output (an ONNX VAD's h/c): the input and the
output then leave the API and live in the caller's state buffer, zero after reset.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import onnx

from aotc.errors import AotcError
from aotc.ir.graph import Graph

METADATA_KEY = "aotc.state"


def attach_state(g: Graph, model: onnx.ModelProto, pairs: Sequence[str]) -> Graph:
    """``g`` with ``meta["state"]`` from the model's metadata and the ``--state`` pairs."""
    slots: list[dict[str, Any]] = []
    for p in model.metadata_props:
        if p.key == METADATA_KEY:
            for e in json.loads(p.value):
                slots.append({"input": e["input"], "output": e["output"],
                              "init": bytes.fromhex(e["init"])})
    for pair in pairs:
        slots.append(_pair(g, pair))
    if not slots:
        return g
    seen_in: set[str] = set()
    seen_out: set[str] = set()
    for sl in slots:
        x, y = sl["input"], sl["output"]
        if x in seen_in or (y is not None and y in seen_out):
            raise AotcError(f"--state {x}={y}: {x if x in seen_in else y!r} is already a state")
        seen_in.add(x)
        if y is not None:
            seen_out.add(y)
    public = g.meta.get("output_names", {})
    if not {public.get(o, o) for o in g.outputs} - seen_out:
        raise AotcError("every graph output is a state: the bundle would return nothing")
    return g.replace(meta={**g.meta, "state": tuple(slots)})


def _pair(g: Graph, pair: str) -> dict[str, Any]:
    x, sep, y = pair.partition("=")
    x, y = x.strip(), y.strip()
    if not sep or not x or not y:
        raise AotcError(f"--state {pair!r}: expected INPUT=OUTPUT (a graph input and the graph "
                        f"output that holds its next value)")
    if x not in g.inputs:
        raise AotcError(f"--state {pair}: {x!r} is not a graph input (inputs: "
                        f"{', '.join(g.inputs)})")
    public = g.meta.get("output_names", {})
    outs = {public.get(o, o): o for o in g.outputs}
    if y not in outs:
        raise AotcError(f"--state {pair}: {y!r} is not a graph output (outputs: "
                        f"{', '.join(outs)})")
    tx, ty = g.type(x), g.type(outs[y])
    if tx.dtype != ty.dtype or tuple(tx.shape) != tuple(ty.shape):
        raise AotcError(f"--state {pair}: the input is {tx.dtype.name}{list(tx.shape)} but the "
                        f"output is {ty.dtype.name}{list(ty.shape)}")
    return {"input": x, "output": y, "init": bytes(tx.nbytes)}
