"""Graph -> Schedule: the ordered kernel steps (the AOT "main") and where each value lives.

View ops (Reshape, Flatten, Squeeze, Unsqueeze, ...) get no step: their output shares the
storage root of their input. Storage kinds: "input" / "output" (user buffers), "const" (flash),
"arena" (planned), "state" (the caller's state buffer, aotc/steps/state.py). A graph output
whose producer is a view of another value takes that value's storage; when that is impossible
(a graph input, a constant, another output) a Copy is inserted.

Control flow (If, Loop, Scan with a run-time condition or a loop) is expanded here: marker
steps around the bodies' kernels, Copy steps that move branch results, loop-carried values and
scan slices into the node's outputs. Both branches of an If appear in the schedule, one after
the other, so their buffers may share space (only one runs). A loop's state and scan outputs
are its output buffers themselves; a scan input slice is its input at an offset per iteration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aotc.errors import AotcError
from aotc.ir.graph import CHAIN, Graph, Node, Value
from aotc.ops import resolve
from aotc.ops.control.if_loop_scan import Body
from aotc.steps.state import StateSlot, place_state

CONTROL_OPS = ("If", "Loop", "Scan")
CTRL_DOMAIN = "aotc.ctrl"  # marker steps: C control flow around the kernels between them


@dataclass(frozen=True)
class Step:
    index: int
    node: Node
    # "" for a kernel; else a marker the graph function prints as C control flow: "if" / "else"
    # / "endif" (node.inputs = (cond,)), "loop" / "endloop" (node.attrs: counter, cond, trip).
    ctrl: str = ""


@dataclass
class Schedule:
    graph: Graph
    steps: list[Step]
    root: dict[str, str]  # value -> storage root value
    kind: dict[str, str]  # root -> "input" | "output" | "const" | "arena"
    output_of: dict[str, str] = field(default_factory=dict)  # root -> graph output name
    # Outputs of multi-output steps that nothing reads (an unused Split piece): not stored.
    dead: set[str] = field(default_factory=set)
    # Roots held in a C local of the graph function (a loop's counter and condition) -> its name.
    local: dict[str, str] = field(default_factory=dict)
    # Values read or written one slice per loop iteration: value -> C element offset from root.
    offset: dict[str, str] = field(default_factory=dict)
    # [first, last] step of each loop (the "loop" and "endloop" markers).
    loops: list[tuple[int, int]] = field(default_factory=list)
    # Element strides in their root's storage of the values a strided view made (PermuteView,
    # SliceView): only kernels that read input 0 by indexing (reads_permuted) read them.
    strides: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # The slots of the caller's state buffer (aotc/steps/state.py), in the model's order.
    state: list[StateSlot] = field(default_factory=list)
    # Facts derived from the steps, computed once (the memory planner asks many times):
    # reads() and aotc/memory/liveness.py's lifetimes. A schedule is not changed once made.
    derived: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    def storage_kind(self, value: str) -> str:
        return self.kind[self.root[value]]

    def reads(self, index: int) -> list[tuple[str, bool]]:
        """(root, same_index) per input the step reads (its op's and its epilogue's);
        same_index: the kernel reads it only at the output element's own index (a standalone
        elementwise op, or an epilogue operand of the output's shape)."""
        if "reads" not in self.derived:
            self.derived["reads"] = [_step_reads(self, st) for st in self.steps]
        return self.derived["reads"][index]


def _step_reads(s: Schedule, st: Step) -> list[tuple[str, bool]]:
    n, g = st.node, s.graph
    opdef = resolve(n.op, g.opset, n.domain)
    out_shape = g.type(n.outputs[0]).shape if n.outputs and n.outputs[0] else None
    elementwise = bool(opdef and opdef.kind == "elementwise")
    reads = []
    for i in n.inputs:
        if i:
            reads.append((s.root[i], elementwise and g.type(i).shape == out_shape))
    for e in n.epilogue:
        for i in e.inputs:
            if i and i != CHAIN:
                reads.append((s.root[i], g.type(i).shape == out_shape))
    return reads


def is_view(g: Graph, n: Node) -> bool:
    opdef = resolve(n.op, g.opset, n.domain)
    return bool(opdef and opdef.kind == "view" and not n.epilogue)


def make_schedule(g: Graph) -> Schedule:
    g = _insert_output_copies(g)
    root: dict[str, str] = {}
    kind: dict[str, str] = {}
    for name in g.inputs:
        root[name], kind[name] = name, "input"
    for v in g.constants():
        root[v.name], kind[v.name] = v.name, "const"
    x = _Expander(g, root, kind)
    x.emit(g.nodes)
    steps = x.steps
    g = g.replace(values=x.values)
    output_of: dict[str, str] = {}
    for o in g.outputs:
        r = root[o]
        assert kind[r] == "arena" and r not in output_of, "copy insertion missed an output"
        kind[r] = "output"
        output_of[r] = o
    used = {i for st in steps for n in (st.node, *st.node.epilogue) for i in n.inputs}
    used |= set(g.outputs) | x.view_reads
    dead = {o for st in steps if len(st.node.outputs) > 1 for o in st.node.outputs
            if o and o not in used}
    s = Schedule(g, steps, root, kind, output_of, dead, x.local, x.offset, x.loops, x.strides)
    place_state(s, Step)
    return s


def _insert_output_copies(g: Graph) -> Graph:
    """Give every graph output its own kernel-written root (insert Copy where needed)."""
    root: dict[str, str] = {}
    src_kind: dict[str, str] = {name: "input" for name in g.inputs}
    src_kind.update({v.name: "const" for v in g.constants()})
    for n in g.nodes:
        for o in n.outputs:
            if o:
                root[o] = root.get(n.inputs[0], n.inputs[0]) if is_view(g, n) else o
    for name in src_kind:
        root[name] = name
    claimed: set[str] = set()
    values = dict(g.values)
    nodes = list(g.nodes)
    outputs = list(g.outputs)
    public = dict(g.meta.get("output_names", {}))
    for k, o in enumerate(g.outputs):
        r = root[o]
        if src_kind.get(r) is None and r not in claimed:
            claimed.add(r)
            continue
        # The output is a constant, a graph input, a view of one, or shares its root with an
        # earlier output: copy it into a fresh value, which keeps the model's name in the C API.
        # Nothing else is renamed, so no consumer (fused or not) can end up reading the
        # output buffer before the copy writes it.
        fresh, n = f"{o}__out", 1
        while fresh in values:
            fresh, n = f"{o}__out{n}", n + 1
        values[fresh] = Value(fresh, values[o].type)
        nodes.append(Node("Copy", f"copy_{k}", (o,), (fresh,), {}, 1, "aotc"))
        outputs[k] = fresh
        public[fresh] = public.get(o, o)
    return g.replace(values=values, nodes=nodes, outputs=outputs,
                     meta={**g.meta, "output_names": public})


class _Expander:
    """Appends the steps of a node list, expanding control flow (see the module docstring)."""

    def __init__(self, g: Graph, root: dict[str, str], kind: dict[str, str]) -> None:
        self.g, self.root, self.kind = g, root, kind
        self.values = dict(g.values)
        self.steps: list[Step] = []
        self.local: dict[str, str] = {}
        self.offset: dict[str, str] = {}
        self.loops: list[tuple[int, int]] = []
        self.n_loops = 0
        self.view_reads: set[str] = set()
        self.strides: dict[str, tuple[int, ...]] = {}

    def add(self, n: Node, ctrl: str = "") -> int:
        self.steps.append(Step(len(self.steps), n, ctrl))
        return len(self.steps) - 1

    def emit(self, nodes: tuple[Node, ...] | list[Node]) -> None:
        for n in nodes:
            if n.op in CONTROL_OPS and not n.domain:
                getattr(self, "_" + n.op.lower())(n)
                continue
            if is_view(self.g, n):
                self.view_reads.add(n.inputs[0])
                self.root[n.outputs[0]] = self.root[n.inputs[0]]
                if n.inputs[0] in self.offset:
                    self.offset[n.outputs[0]] = self.offset[n.inputs[0]]
                if n.domain == "aotc" and n.op in ("PermuteView", "SliceView"):
                    self._strided_view(n)
                continue
            for o in n.outputs:
                if o:
                    self.root[o], self.kind[o] = o, "arena"
            self.add(n)

    def _strided_view(self, n: Node) -> None:
        """A PermuteView's strides are its source's permuted; a SliceView keeps its source's
        and starts at the box's first element."""
        from aotc.loops.builder import strides_of
        from aotc.ops.tensor.shape import permuted_strides
        from aotc.ops.tensor.slice_view import view_offset

        x, y = n.inputs[0], n.outputs[0]
        src = self.strides.get(x) or strides_of(self.values[x].type.shape)
        if n.op == "PermuteView":
            assert x not in self.strides, "a permuted view of a strided view"
            self.strides[y] = permuted_strides(self.values[x].type.shape, n.attrs["perm"])
            return
        self.strides[y] = tuple(src)
        at = view_offset(n.attrs["starts"], src)
        if at:
            self.offset[y] = " + ".join(v for v in (self.offset.get(x), str(at)) if v)

    def _bind(self, node: Node, body: Body) -> None:
        self.values.update(body.values)
        for v in body.values.values():
            if v.is_const:
                self.root[v.name], self.kind[v.name] = v.name, "const"
        for local, k in body.captures:
            self.alias(local, node.inputs[k])

    def alias(self, value: str, of: str, offset: str = "") -> None:
        self.root[value] = self.root[of]
        inner = self.offset.get(of)
        if inner or offset:
            self.offset[value] = " + ".join(x for x in (inner, offset) if x)

    def _copy(self, src: str, dst_root: str, name: str, offset: str = "") -> None:
        fresh = f"{name}.copy"
        while fresh in self.values:
            fresh += "_"
        self.values[fresh] = Value(fresh, self.values[src].type)
        self.root[fresh] = self.root[dst_root]
        if offset:
            self.offset[fresh] = offset
        self.add(Node("Copy", fresh, (src,), (fresh,), {}, 1, "aotc"))

    def _marker(self, n: Node, inputs: tuple[str, ...], ctrl: str, **attrs: object) -> int:
        return self.add(Node(n.op, n.name, inputs, (), attrs, 0, CTRL_DOMAIN), ctrl)

    def _new_root(self, name: str, like: str) -> str:
        if name not in self.values:
            self.values[name] = Value(name, self.values[like].type)
        self.root[name], self.kind[name] = name, "arena"
        return name

    def _if(self, n: Node) -> None:
        for o in n.outputs:
            if o:
                self._new_root(o, o)
        self._marker(n, (n.inputs[0],), "if")
        for br, ctrl in (("then_branch", "else"), ("else_branch", "endif")):
            body: Body = n.attrs[br]
            self._bind(n, body)
            self.emit(body.nodes)
            for k, (b, o) in enumerate(zip(body.outputs, n.outputs)):
                if o:
                    self._copy(b, o, f"{n.name}.{br.split('_')[0]}.result{k}")
            self._marker(n, (), ctrl)

    def _loop_vars(self) -> tuple[str, str]:
        k, self.n_loops = self.n_loops, self.n_loops + 1
        return f"aotc_i{k}", f"aotc_c{k}"

    def _states(self, n: Node, inits: list[str], body: Body, formals: tuple[str, ...]
                ) -> list[str]:
        """Loop-carried values live in the node's outputs (or fresh roots for unused ones),
        initialised by a Copy before the loop; the body's formal state inputs alias them."""
        roots = []
        for k, (src, formal) in enumerate(zip(inits, formals)):
            out = n.outputs[k] if k < len(n.outputs) and n.outputs[k] else f"{n.name}.state{k}"
            if out not in self.values:
                self.values[out] = Value(out, body.type(formal))
            self.root[out], self.kind[out] = out, "arena"
            self.add(Node("Copy", f"{n.name}.init{k}", (src,), (out,), {}, 1, "aotc"))
            self.alias(formal, out)
            roots.append(out)
        return roots

    def _carry(self, n: Node, body: Body, results: tuple[str, ...], roots: list[str]) -> None:
        for k, (b, r) in enumerate(zip(results, roots)):
            src_root = self.root[b]
            if src_root in roots and src_root != r:
                raise AotcError(f"loop-carried value {k} is another loop-carried input passed "
                                f"through; aotc copies states in place and cannot swap them",
                                n.name, n.op)
            if src_root != r:
                self._copy(b, r, f"{n.name}.carry{k}")

    def _loop(self, n: Node) -> None:
        body: Body = n.attrs["body"]
        self._bind(n, body)
        counter, cond = self._loop_vars()
        n_state = len(n.inputs) - 2 - len(body.captures)
        roots = self._states(n, list(n.inputs[2:2 + n_state]), body,
                             body.inputs[2:2 + n_state])
        for formal, var in zip(body.inputs[:2], (counter, cond)):
            self.root[formal], self.kind[formal] = formal, "local"
            self.local[formal] = var
        first = self._marker(n, tuple(i for i in n.inputs[:2] if i), "loop", counter=counter,
                             cond=cond, M=n.inputs[0], cond_in=n.inputs[1], trip=n.attrs["_trip"])
        self.emit(body.nodes)
        # Scan slices first: a scan output may read a state the carry then overwrites.
        for k, o in enumerate(n.outputs[n_state:]):
            if o:
                b = body.outputs[1 + n_state + k]
                self._new_root(o, o)
                self._copy(b, o, f"{n.name}.scan{k}",
                           f"{counter} * {self.values[b].type.numel}")
        self._carry(n, body, body.outputs[1:1 + n_state], roots)
        cond_out = body.outputs[0] if n.attrs["_breaks"] else ""
        last = self._marker(n, (cond_out,) if cond_out else (), "endloop", cond=cond,
                            cond_out=cond_out)
        self.loops.append((first, last))

    def _scan(self, n: Node) -> None:
        body: Body = n.attrs["body"]
        self._bind(n, body)
        counter, _ = self._loop_vars()
        n_in = n.attrs["num_scan_inputs"]
        n_state = len(body.inputs) - n_in
        trip = n.attrs["_trip"]
        roots = self._states(n, list(n.inputs[:n_state]), body, body.inputs[:n_state])

        def at(reverse: int, numel: int) -> str:
            return f"({trip - 1} - {counter}) * {numel}" if reverse else f"{counter} * {numel}"

        for k, formal in enumerate(body.inputs[n_state:]):
            rev = n.attrs["scan_input_directions"][k]
            self.alias(formal, n.inputs[n_state + k], at(rev, self.values[formal].type.numel))
        first = self._marker(n, (), "loop", counter=counter, cond="", M="", cond_in="",
                             trip=trip)
        self.emit(body.nodes)
        for k, o in enumerate(n.outputs[n_state:]):
            if o:
                b = body.outputs[n_state + k]
                rev = n.attrs["scan_output_directions"][k]
                self._new_root(o, o)
                self._copy(b, o, f"{n.name}.scan{k}", at(rev, self.values[b].type.numel))
        self._carry(n, body, body.outputs[:n_state], roots)
        last = self._marker(n, (), "endloop", cond="", cond_out="")
        self.loops.append((first, last))
