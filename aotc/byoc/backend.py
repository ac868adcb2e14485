"""The BYOC interface: what an external code generator implements to take kernels from aotc.

A backend is a small object (docs/byoc.md walks through one):

- ``name``: what ``--byoc NAME`` enables, and the partition table shows;
- ``layout``: the activation layout its kernels read and write, "NCHW" (ONNX's, the default) or
  "NHWC"; the layout pass gives claimed kernels that layout and folds or cancels the transposes;
- ``patterns()``: which fused kernels it can take (``Pattern``: the anchor op, the epilogue ops it
  accepts, the dtypes), each with a ``check`` that accepts (None) or refuses with a reason;
- ``codegen(sub, symbol)``: the C of one claimed kernel (``Emitted``): a function ``symbol``
  returning int (0: success), the constants it needs (placed in flash like every weight) and
  the scratch bytes it needs (planned in the arena, like every buffer);
- ``libraries()``: what the bundle needs at build time (``Library``: include dirs, sources,
  defines, a CMake snippet), used by the bundle's CMakeLists.txt, the host build and the
  board builds;
- ``configure(target)``: called once per compilation with the board it is for (None: any).

Everything not claimed stays with aotc's own kernels. The calling convention of an emitted
function: ``int symbol(<activation inputs>, <outputs>, <constants>, [void *scratch])`` with
``const T *`` inputs and constants and ``T *`` outputs, in the order ``Subgraph.activations``,
``Subgraph.outputs``, ``Emitted.constants``; ``scratch`` only when ``Emitted.scratch_bytes`` > 0
(aligned to the bundle's arena alignment).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aotc.ir.graph import CHAIN, Graph, Node, TensorType

LAYOUTS = ("NCHW", "NHWC")


@dataclass(frozen=True)
class Pattern:
    """Fused kernels a backend may take: anchor ``op`` (in ``domain``: "" is ONNX,
    "com.microsoft" the QLinear* contrib ops aotc's QDQ pass builds), carrying only epilogue
    ops named in ``epilogue``, with input 0 and output 0 of one of ``dtypes`` (None: any).
    ``check(sub)`` returns None to accept, or the reason it refuses."""

    name: str
    op: str
    domain: str = ""
    epilogue: tuple[str, ...] = ()
    dtypes: tuple[str, ...] | None = None
    check: Callable[[Subgraph], str | None] | None = None

    def applies(self, node: Node) -> bool:
        return node.op == self.op and node.domain == self.domain

    def refusal(self, sub: Subgraph) -> str | None:
        extra = [e.op for e in sub.epilogue if e.op not in self.epilogue]
        if extra:
            return f"fused {', '.join(extra)} is not supported"
        if self.dtypes is not None:
            for what, t in (("input", sub.input_type(0)), ("output", sub.output_type(0))):
                if t is not None and t.dtype.name not in self.dtypes:
                    return (f"{what} dtype {t.dtype.name} is not supported "
                            f"({', '.join(self.dtypes)})")
        return self.check(sub) if self.check is not None else None


@dataclass(frozen=True)
class Constant:
    """A compile-time array an emitted kernel takes as a ``const T *`` argument (flash)."""

    name: str  # for comments and symbol names; need not be unique
    data: np.ndarray


@dataclass
class Emitted:
    """One claimed kernel's C: ``source`` defines ``int <symbol>(...)`` (see the module doc for
    the argument order) and any ``static`` helpers, all named with the ``symbol`` prefix."""

    source: str
    constants: Sequence[Constant] = ()
    scratch_bytes: int = 0
    includes: Sequence[str] = ()  # headers the source needs, e.g. "arm_nnfunctions.h"
    comment: str = ""  # shown in the graph function next to the call


@dataclass(frozen=True)
class Library:
    """What a bundle using a backend needs at build time. ``sources`` are compiled (with
    ``cflags`` and ``defines``, not aotc's warning flags) into a static library named ``name``;
    ``cmake``, if given, is CMake that defines that target (for example from a path cache
    variable, so the bundle does not hard-code where the library lives); otherwise the
    bundle's CMakeLists.txt lists ``sources`` by absolute path. ``root`` (a CMake/environment
    variable name and the directory it stands for) makes the recorded paths relocatable:
    bundle.json and CMakeLists.txt then name files under it as ``${VAR}/relative/path``
    (aotc/targets/libraries.py expands them for a build), so where the library lives on the
    compiling machine does not change the bundle's bytes."""

    name: str
    include_dirs: tuple[Path, ...] = ()
    sources: tuple[Path, ...] = ()
    defines: tuple[str, ...] = ()
    cflags: tuple[str, ...] = ()
    cmake: str | None = None
    root: tuple[str, Path] | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.+-]*", self.name):
            raise ValueError(f"library name {self.name!r} is not a CMake target name")

    def recorded(self, p: Path) -> str:
        """``p`` as the bundle records it: ``${VAR}/rel`` under ``root``, else absolute."""
        if self.root is not None:
            var, base = self.root
            try:
                return "${" + var + "}/" + Path(p).relative_to(base).as_posix()
            except ValueError:
                pass
        return Path(p).as_posix()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "include_dirs": [self.recorded(p) for p in self.include_dirs],
                "sources": [self.recorded(p) for p in self.sources],
                "defines": list(self.defines), "cflags": list(self.cflags)}


class Backend:
    """Base class of a BYOC backend (subclass it, or any object with these attributes)."""

    name: str = ""
    layout: str = "NCHW"

    def configure(self, target: str | None, features: frozenset[str]) -> None:
        """The board the bundle is compiled for (``--target``; None: any board) and its
        features (boards/<name>/board.toml: "dsp", "mve", "fpu", ...)."""

    def patterns(self) -> Sequence[Pattern]:
        raise NotImplementedError

    def codegen(self, sub: Subgraph, symbol: str) -> Emitted:
        raise NotImplementedError

    def libraries(self) -> Sequence[Library]:
        return ()


# --------------------------------------------------------------------------------- the view
@dataclass
class Subgraph:
    """A fused kernel as a backend sees it: the anchor ``node`` (ONNX attributes and inputs,
    scales and zero points included), its ``prepared`` form (what aotc's op implementation
    derives at compile time: for QLinearConv ``_xz``, ``_wz``, ``_real`` (per-channel real
    multipliers), ``_yz``, ``_act_lo``/``_act_hi``; see aotc/ops), the fused ``epilogue``
    nodes, and the graph for types and constants. Shapes are always in ONNX's layout (NCHW),
    whatever layout the data is stored in (``layout``)."""

    node: Node
    prepared: Node
    graph: Graph
    requant: str = "tflite"
    layout: str = "NCHW"  # how the kernel's 4-D activations are stored

    @property
    def op(self) -> str:
        return self.node.op

    @property
    def epilogue(self) -> tuple[Node, ...]:
        return self.node.epilogue

    @property
    def inputs(self) -> tuple[str, ...]:
        return self.node.inputs

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(o for o in self.node.outputs if o)

    @property
    def activations(self) -> tuple[str, ...]:
        """The values computed at run time that the kernel reads, in the order the emitted
        function takes them: the anchor's inputs, then its epilogue's, each once."""
        out: list[str] = []
        for n in (self.node, *self.node.epilogue):
            for i in n.inputs:
                if i and i != CHAIN and i not in out and not self.graph.values[i].is_const:
                    out.append(i)
        return tuple(out)

    def type(self, value: str) -> TensorType:
        """The value's type as ONNX defines it (a 4-D activation stored NHWC reads NCHW)."""
        v = self.graph.values[value]
        t = v.type
        if self.layout == "NHWC" and len(t.shape) == 4 and not v.is_const:
            n, h, w, c = t.shape
            return TensorType((n, c, h, w), t.dtype)
        return t

    def stored_type(self, value: str) -> TensorType:
        """The value's type as the kernel's buffers hold it (NHWC for an NHWC backend)."""
        return self.graph.type(value)

    def input_type(self, i: int) -> TensorType | None:
        if i >= len(self.node.inputs) or not self.node.inputs[i]:
            return None
        return self.type(self.node.inputs[i])

    def output_type(self, i: int) -> TensorType | None:
        outs = self.outputs
        return self.type(outs[i]) if i < len(outs) else None

    def const(self, i: int) -> np.ndarray | None:
        """Input ``i`` of the anchor as an array if it is a compile-time constant."""
        if i >= len(self.node.inputs) or not self.node.inputs[i]:
            return None
        return self.graph.values[self.node.inputs[i]].const

    def attr(self, name: str, default: Any = None) -> Any:
        """A prepared attribute (the node's own, or one its op derived)."""
        return self.prepared.attrs.get(name, default)


def validate(backend: Any) -> None:
    """A clear error for a backend object missing part of the interface."""
    from aotc.errors import AotcError

    name = getattr(backend, "name", None)
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", name):
        raise AotcError(f"BYOC backend {backend!r}: name must be a lower-case word "
                        f"(letters, digits, '-', '_', '.'), got {name!r}")
    for attr in ("patterns", "codegen"):
        if not callable(getattr(backend, attr, None)):
            raise AotcError(f"BYOC backend {name!r} has no {attr}() method")
    if getattr(backend, "layout", "NCHW") not in LAYOUTS:
        raise AotcError(f"BYOC backend {name!r}: layout must be one of {', '.join(LAYOUTS)}, "
                        f"got {getattr(backend, 'layout', None)!r}")
