"""Compilation -> the template context of the bundle (templates/*.j2): the public API's
tensors, the graph function's calls with arena offsets (control flow printed around them),
the kernels as C, the weights, the CMake libraries and bundle.json's metadata."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from aotc import dtypes
from aotc.byoc.backend import Library
from aotc.codegen.bundle import TensorDecl, format_array, provenance
from aotc.codegen.c import (
    F64_CALLS,
    HALF_CALLS,
    MVE_CALLS,
    CPrinter,
    acle_calls,
    vldm_sizes,
)
from aotc.loops.loop_ir import Kernel
from aotc.lower.lowering import LoweredStep
from aotc.names import Namer, c_comment
from aotc.steps.state import STATE_ALIGN, slot_of_root, state_bytes
from aotc.version import __version__

if TYPE_CHECKING:
    from aotc.compilation import Compilation


def _io_decls(c: Compilation) -> tuple[list[TensorDecl], list[TensorDecl]]:
    g = c.graph
    name = c.options.name  # <name>_... / <NAME>_... are the bundle's own symbols and macros
    pools = {n for p in c.pools for n in (p.name, f"{p.name}_size", f"a_{p.name}")}
    state = {"state", "a_state"} if c.schedule.state else set()
    namer = Namer({"a", "arena", "arena_size", *pools, *state},
                  (f"{name}_", f"{name.upper()}_"))
    # The state's inputs and outputs are in the caller's state buffer, not in the API.
    hidden = {v for slot in c.schedule.state for v in (slot.input, slot.graph_output) if v}
    ins = [TensorDecl(v, namer("in:" + v, v, "in"), g.type(v).dtype, g.type(v).shape)
           for v in g.inputs if v not in hidden]
    public = g.meta.get("output_names", {})
    outs = [TensorDecl(v, namer("out:" + v, public.get(v, v), "out"), g.type(v).dtype,
                       g.type(v).shape, public.get(v, v)) for v in g.outputs if v not in hidden]
    return ins, outs


def _pointer(c: Compilation, kind: str, key: str, ctype: str, io: dict[str, str]) -> str:
    base = _base_pointer(c, kind, key, ctype, io)
    if kind == "value" and key in c.schedule.offset:  # one slice per loop iteration
        return f"{base} + {c.schedule.offset[key]}"
    return base


def _base_pointer(c: Compilation, kind: str, key: str, ctype: str, io: dict[str, str]) -> str:
    s = c.schedule
    if kind == "scratch":
        return f"({ctype} *)(void *)({c.base(key)} + {c.plan.offsets[key]})"
    if kind == "const":
        return c.weights[key][0]
    root = s.root[key]
    k = s.kind[root]
    if k == "const":
        return c.weights[root][0]
    if k == "state":
        return f"({ctype} *)(void *)(a_state + {slot_of_root(s)[root].offset})"
    if c.options.io_in_arena:
        k = "arena"
    if k == "input":
        return io["in:" + root]
    if k == "output":
        return io["out:" + s.output_of[root]]
    if k == "local":
        return f"&{s.local[root]}"
    buf = c.liveness.buffer_of(root)
    return f"({ctype} *)(void *)({c.base(buf)} + {c.plan.offsets[buf]})"


def _memory_key(c: Compilation, kind: str, key: str) -> str:
    if kind in ("scratch", "const"):
        return f"{kind}:{key}"
    root = c.schedule.root[key]
    if c.schedule.kind[root] == "state":  # a slot's old and new state share its bytes
        return f"state:{slot_of_root(c.schedule)[root].offset}"
    kind = "arena" if c.options.io_in_arena else c.schedule.kind[root]
    return f"{kind}:{c.liveness.buffer_of(root)}"


def _with_noalias(c: Compilation, ls: LoweredStep) -> Kernel:
    keys = [_memory_key(c, kind, key) for kind, key in ls.args]
    written = {keys[i] for i, b in enumerate(ls.kernel.params) if b.role in ("out", "scratch")}
    noalias = set()
    for i, b in enumerate(ls.kernel.params):
        shared = keys.count(keys[i]) > 1
        if not (shared and keys[i] in written):
            noalias.add(b.name)
    return Kernel(ls.kernel.name, ls.kernel.params, ls.kernel.body, ls.kernel.comment,
                  frozenset(noalias))


def render_context(c: Compilation) -> dict[str, Any]:
    name = c.options.name
    ins, outs = _io_decls(c)
    io = {"in:" + t.value: t.cname for t in ins} | {"out:" + t.value: t.cname for t in outs}
    printer = CPrinter()
    kernels, calls = [], []
    includes: list[str] = []
    by_step = {ls.step.index: ls for ls in c.lowered}
    depth = 0
    for st in c.schedule.steps:
        if st.ctrl:
            lines, depth = _control_flow(c, st, io, depth)
            calls += [{"ctrl": True, "code": code, "indent": "    " * d} for d, code in lines]
            continue
        ls = by_step[st.index]
        k = _with_noalias(c, ls)
        kernels.append(ls.source if ls.source is not None else printer.kernel(k))
        includes += [i for i in ls.includes if i not in includes]
        args = [_pointer(c, kind, key, b.dtype.ctype, io)
                for (kind, key), b in zip(ls.args, k.params)]
        calls.append({"kernel": k.name, "args": args, "comment": k.comment,
                      "status": ls.source is not None, "ctrl": False,
                      "index": len(kernels) - 1, "indent": "    " * depth})
    local_decls = _locals(c)
    io_in_arena = c.options.io_in_arena
    user_io = [] if io_in_arena else ([f"const {t.dtype.ctype} *{t.cname}" for t in ins] +
                                      [f"{t.dtype.ctype} *{t.cname}" for t in outs])
    pools = [{"name": p.name, "NAME": p.name.upper(), "bytes": c.plan.pool_sizes[p.name],
              "capacity": p.size, "section": p.section} for p in c.pools]
    arenas = ([(p["name"], p["bytes"]) for p in pools] if pools
              else [("arena", c.plan.size)])
    has_state = bool(c.schedule.state)
    run_params = ", ".join(user_io + [f"{t}{n}{s}" for n, _ in arenas
                                      for t, s in (("void *", ""), ("size_t ", "_size"))]
                           + (["void *state"] if has_state else []))
    null_checks = " || ".join(([] if io_in_arena else [f"{t.cname} == NULL" for t in ins + outs])
                              + [f"{n} == NULL" for n, size in arenas if size > 0]
                              + (["state == NULL"] if has_state else [])) or "0"

    weights = []
    for key, (sym, arr) in sorted(c.weights.items(), key=lambda kv: kv[1][0]):
        if weights and weights[-1]["symbol"] == sym:
            continue  # shared by arrays with the same bytes (_collect_weights)
        dt = dtypes.from_numpy(arr.dtype)
        weights.append({"symbol": sym, "ctype": dt.ctype, "numel": max(int(arr.size), 1),
                        "data": format_array(arr, dt),
                        "comment": c_comment(f"{key}: {dt.name}{list(arr.shape)}")})
    in_ctx = [t.ctx(name) for t in ins]
    out_ctx = [t.ctx(name) for t in outs]
    if io_in_arena:
        for t, ctx in zip(ins + outs, in_ctx + out_ctx):
            ctx["offset"] = c.io_offset(t.value)
            ctx["pool"] = c.io_pool(t.value) or "arena"
    prov = provenance(__version__, c.model_name, c.model_hash, c.options.command_line)
    meta = {
        "name": name, "arena_bytes": c.plan.size, "arena_align": c.options.align,
        "lower_bound": c.lower_bound, "io_lower_bound": c.io_lower_bound,
        "weights_bytes": c.weights_bytes, "io_in_arena": io_in_arena,
        "inputs": [{"name": t.value, "c_name": t.cname, "shape": list(t.shape),
                    "dtype": t.dtype.name, "ctype": t.dtype.ctype,
                    "bytes": int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize,
                    **_io_place(c, t.value)} for t in ins],
        "outputs": [{"name": t.public, "c_name": t.cname, "shape": list(t.shape),
                     "dtype": t.dtype.name, "ctype": t.dtype.ctype,
                     "bytes": int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize,
                     **_io_place(c, t.value)} for t in outs],
        **({"pools": pools} if pools else {}),
        **({"patches": c.patches} if c.patches is not None else {}),
        **({"state": _state_meta(c)} if has_state else {}),
        "kernels": [ls.kernel.name for ls in c.lowered],
        # Temporaries kernels keep on the C stack, outside the arena (compiler.py).
        "stack_temporaries": c.stack_temporaries,
        # Per kernel aotc lowered: its workload key, the schedule it used and its space
        # ({knob: [choices, default]}): what `aotc tune` searches.
        "workloads": {ls.kernel.name: {"key": ls.workload, "schedule": ls.knobs,
                                       "space": {k: [ch, d] for k, (ch, d) in ls.space.items()}}
                      for ls in c.lowered if ls.workload and not ls.backend},
        "byoc": {ls.kernel.name: ls.backend for ls in c.lowered if ls.backend},
        "libraries": [lib.to_json() for lib in c.libraries],
        "largest_weights": [f"{sym} ({nbytes} B)" for sym, nbytes in
                            sorted({(s, a.nbytes) for s, a in c.weights.values()},
                                   key=lambda w: (-w[1], w[0]))[:3]],
        "aotc_version": __version__, "model": c.model_name, "model_sha256": c.model_hash,
    }
    return {
        "name": name, "NAME": name.upper(), "provenance": prov,
        "provenance_line": (f"Generated by aotc {__version__} from {c_comment(c.model_name)} "
                            f"(sha256 {c.model_hash[:16]})"),
        "arena_bytes": c.plan.size, "arena_align": c.options.align,
        "lower_bound": c.lower_bound, "arena_holds": c.arena_holds, "io_in_arena": io_in_arena,
        "inputs": in_ctx, "outputs": out_ctx,
        "tensor_infos": in_ctx + out_ctx, "run_params": run_params,
        "null_checks": null_checks, "kernels": kernels, "calls": calls, "weights": weights,
        "weights_bytes": c.weights_bytes, "weights_align": max(c.options.align, 4),
        "weights_section": c.options.weights_section, "meta": meta,
        "includes": includes, "libraries": _cmake_libraries(c.libraries),
        "acle": sorted(set().union(*[acle_calls(ls.kernel) for ls in c.lowered
                                     if ls.source is None])),
        "mve": sorted(set().union(*[acle_calls(ls.kernel, MVE_CALLS) for ls in c.lowered
                                    if ls.source is None])),
        "vldm": sorted(set().union(*[vldm_sizes(ls.kernel) for ls in c.lowered
                                     if ls.source is None])),
        # --keep-float16-weights (aotc/lower/half.py): model.c defines aotc_f16_f32
        "half": any(acle_calls(ls.kernel, HALF_CALLS) for ls in c.lowered
                    if ls.source is None),
        # SSD box decoding in double (aotc/ops/image/detection.py): model.c defines its helpers
        "f64": any(acle_calls(ls.kernel, F64_CALLS) for ls in c.lowered
                   if ls.source is None),
        "locals": local_decls, "pools": pools, **_state_context(c),
    }


def _state_meta(c: Compilation) -> dict[str, Any]:
    """bundle.json's state: its bytes and, per slot, where it is and what writes it."""
    g, public = c.graph, c.graph.meta.get("output_names", {})
    return {"bytes": state_bytes(c.schedule.state), "align": STATE_ALIGN,
            "slots": [{"input": sl.input, "dtype": g.type(sl.input).dtype.name,
                       "shape": list(g.type(sl.input).shape),
                       "output": (public.get(sl.graph_output, sl.graph_output)
                                  if sl.graph_output else None),
                       "offset": sl.offset, "bytes": sl.nbytes,
                       "written": "in place" if sl.direct else
                       ("copied at the end" if sl.output else "never")}
                      for sl in c.schedule.state]}


def _state_context(c: Compilation) -> dict[str, Any]:
    """The template's state: its size, and its bytes after <name>_reset (None: all zero)."""
    slots = c.schedule.state
    nbytes = state_bytes(slots)
    init = bytearray(nbytes)
    for sl in slots:
        init[sl.offset:sl.offset + sl.nbytes] = sl.init
    g = c.graph
    return {"state_bytes": nbytes, "state_align": STATE_ALIGN,
            "state_init": (format_array(np.frombuffer(bytes(init), np.uint8),
                                        dtypes.BY_NAME["uint8"]) if any(init) else None),
            "state_slots": [{"offset": sl.offset, "bytes": sl.nbytes,
                             "comment": c_comment(f"{sl.input}: {g.type(sl.input).dtype.name}"
                                                  f"{list(g.type(sl.input).shape)}")}
                            for sl in slots]}


def _io_place(c: Compilation, value: str) -> dict[str, Any]:
    """bundle.json's offset (and pool) of a graph input or output in the arena."""
    if not c.options.io_in_arena:
        return {}
    pool = c.io_pool(value)
    return {"offset": c.io_offset(value), **({"pool": pool} if pool else {})}


def _locals(c: Compilation) -> list[str]:
    """C locals of the graph function: each loop's counter and condition."""
    out = []
    for st in c.schedule.steps:
        if st.ctrl == "loop":
            out.append(f"int64_t {st.node.attrs['counter']} = 0;")
            if st.node.attrs["cond"]:
                out.append(f"uint8_t {st.node.attrs['cond']} = 1u;")
    return out


def _control_flow(c: Compilation, st: Any, io: dict[str, str], depth: int
                  ) -> tuple[list[tuple[int, str]], int]:
    """The C lines of a marker step (aotc/steps/schedule.py), each with its nesting depth, and the
    depth after it."""
    a = st.node.attrs

    def read(value: str, ctype: str) -> str:
        const = c.schedule.graph.values[c.schedule.root[value]].const
        if const is not None:  # a constant condition or trip count: its value
            return str(int(np.asarray(const).reshape(-1)[0]))
        return f"*{_pointer(c, 'value', value, ctype, io)}"

    if st.ctrl == "if":
        return [(depth, f"if ({read(st.node.inputs[0], 'uint8_t')} != 0u) {{")], depth + 1
    if st.ctrl == "else":
        return [(depth - 1, "} else {")], depth
    if st.ctrl == "endif":
        return [(depth - 1, "}")], depth - 1
    if st.ctrl == "loop":
        i = a["counter"]
        lines = []
        bound = [] if a["trip"] is None and not a["M"] else \
            [f"{i} < {a['trip'] if a['trip'] is not None else read(a['M'], 'int64_t')}"]
        if a["cond"]:
            init = f"({read(a['cond_in'], 'uint8_t')} != 0u)" if a["cond_in"] else "1u"
            lines.append((depth, f"{a['cond']} = {init};"))
            bound.append(f"{a['cond']} != 0u")
        lines.append((depth, f"for ({i} = 0; {' && '.join(bound)}; {i}++) {{"))
        return lines, depth + 1
    assert st.ctrl == "endloop"
    lines = []
    if a["cond_out"]:
        lines.append((depth, f"{a['cond']} = ({read(a['cond_out'], 'uint8_t')} != 0u);"))
    return lines + [(depth - 1, "}")], depth - 1


def _cmake_libraries(libs: list[Library]) -> list[dict[str, Any]]:
    out = []
    for lib in libs:
        out.append({"name": lib.name, "cmake": lib.cmake,
                    "sources": [lib.recorded(p) for p in lib.sources],
                    "include_dirs": [lib.recorded(p) for p in lib.include_dirs],
                    "defines": list(lib.defines), "cflags": list(lib.cflags)})
    return out
