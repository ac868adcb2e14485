"""KernelBuilder: how op lowerings write loop nests.

An op's ``lower`` receives a builder whose ``inputs``/``outputs`` are BufRefs with the ONNX
shapes, opens loops with ``with kb.loop(n) as i:``, and writes results with ``kb.store_output``,
which applies the fused elementwise epilogue (bias, activation, residual add) before storing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from aotc.dtypes import DType
from aotc.loops.loop_ir import (
    INDEX,
    Assign,
    Block,
    Buffer,
    Cast,
    Const,
    Decl,
    DeclArray,
    Expr,
    If,
    Kernel,
    Load,
    Loop,
    Outline,
    Stmt,
    Store,
    Var,
    as_expr,
    map_stmts,
)
from aotc.loops.simplify import simplify
from aotc.schedules import Context, Knob, Schedule


def strides_of(shape: Sequence[int]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


@dataclass(frozen=True)
class BufRef:
    """A buffer seen with an N-d row-major shape, or with ``strides`` (elements per step of
    each dimension) when it is a permuted view (aotc.ops.tensor.shape.PermuteView): only kernels
    that read it through ``index``/``[]`` are given one."""

    buf: Buffer
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None = None

    @property
    def dtype(self) -> DType:
        return self.buf.dtype

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def index(self, idx: Sequence[Expr | int]) -> Expr:
        if len(idx) != len(self.shape):
            raise ValueError(f"{self.buf.name}: {len(idx)} indices for shape {self.shape}")
        flat: Expr = Const(0)
        for i, s, d in zip(idx, self.strides or strides_of(self.shape), self.shape):
            if d == 1:
                continue  # the index of a unit dim is always 0
            flat = flat + as_expr(i) * s
        return flat

    def __getitem__(self, idx: Sequence[Expr | int] | Expr | int) -> Load:
        if not isinstance(idx, (tuple, list)):
            idx = (idx,)
        return Load(self.buf, self.index(list(idx)))

    def bcast(self, out_idx: Sequence[Expr]) -> Load:
        """Load with numpy broadcasting against an output index (right-aligned dims)."""
        k = len(self.shape)
        tail = list(out_idx)[len(out_idx) - k:] if k else []
        idx = [Const(0) if d == 1 else i for d, i in zip(self.shape, tail)]
        return self[idx] if k else Load(self.buf, Const(0))

    def flat(self, i: Expr | int) -> Load:
        assert self.strides is None, f"{self.buf.name}: a permuted view has no flat index"
        return Load(self.buf, as_expr(i))


# An epilogue step turns the running value into the next one, given the output index (and the
# flat output index when the caller has one), and the output shape.
EpilogueFn = Callable[[Expr, Sequence[Expr], "Expr | None", tuple[int, ...]], Expr]


# The most bytes a kernel's temporary may take on the C stack (temporary()): small enough for
# any MCU's stack, like a spilled accumulator tile; larger ones are arena scratch.
STACK_TEMP_MAX = 64


class KernelBuilder:
    def __init__(self, name: str, comment: str, inputs: Sequence[BufRef | None],
                 outputs: Sequence[BufRef], epilogue: Sequence[EpilogueFn] = (),
                 extra_params: Sequence[BufRef] = (),
                 input_consts: Sequence[np.ndarray | None] = (),
                 features: frozenset[str] = frozenset(),
                 dead_outputs: frozenset[int] = frozenset(),
                 schedule: Schedule | None = None, stack_temps: bool = False,
                 cpu: str = "", defaults: Schedule | None = None) -> None:
        self.name = name
        self.comment = comment
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self._epilogue = list(epilogue)
        self._params: list[Buffer] = []
        for r in [*inputs, *extra_params, *outputs]:
            if r is not None and r.buf not in self._params:
                self._params.append(r.buf)
        self._stack: list[list[Stmt]] = [[]]
        self._names: dict[str, int] = {}
        self.consts: dict[str, np.ndarray] = {}  # compile-time arrays this kernel adds
        self._input_consts = list(input_consts)  # compile-time value per input, or None
        self.dead_outputs = dead_outputs  # outputs nothing reads: their stores are dropped
        # Target features (board.toml) that steer lowering choices, e.g. "autovec".
        self.features = features
        self.cpu = cpu  # the target's core (board.toml cpu), "" without --target
        self.scratch: list[Buffer] = []
        # temporary(): small temporaries as local arrays instead of scratch (when allowed).
        self.stack_temps_ok = stack_temps
        self.stack_temps: list[Buffer] = []
        # The schedule chosen for this kernel's workload ({knob: value}, aotc/schedules), and
        # the knobs the lowering asked for: name -> (choices, default), the kernel's space.
        self.schedule = dict(schedule or {})
        self.space: dict[str, tuple[list[Any], Any]] = {}
        # Defaults the compiler chose for this kernel over the knobs' own ({knob: value}),
        # e.g. the flash-aware int16 weights (aotc/schedules/flash.py); a schedule still wins.
        self.defaults = dict(defaults or {})

    # ------------------------------------------------------------------ names and emission
    def fresh(self, base: str) -> str:
        n = self._names.get(base, 0)
        self._names[base] = n + 1
        return base if n == 0 else f"{base}{n}"

    def emit(self, s: Stmt) -> None:
        self._stack[-1].append(s)

    # ------------------------------------------------------------------ control flow
    @contextmanager
    def loop(self, extent: int | Expr, name: str = "i", start: int | Expr = 0,
             unroll: bool = False) -> Iterator[Var]:
        var = Var(self.fresh(name))
        self._stack.append([])
        yield var
        body = tuple(self._stack.pop())
        self.emit(Loop(var.name, as_expr(start), as_expr(extent), body, 1, unroll))

    @contextmanager
    def loops(self, shape: Sequence[int], names: Sequence[str] | None = None
              ) -> Iterator[list[Var]]:
        names = list(names) if names else [f"i{d}" for d in range(len(shape))]
        vars_ = [Var(self.fresh(n)) for n in names[:len(shape)]]
        self._stack.extend([] for _ in vars_)
        yield vars_
        for var, d in zip(reversed(vars_), reversed(list(shape))):
            body = tuple(self._stack.pop())
            self.emit(Loop(var.name, Const(0), Const(int(d)), body))

    @contextmanager
    def if_(self, cond: Expr) -> Iterator[None]:
        self._stack.append([])
        yield
        body = tuple(self._stack.pop())
        self.emit(If(cond, body))

    @contextmanager
    def outline(self, opaque: bool = False) -> Iterator[None]:
        """A block printed as a function of its own and a call (loop_ir.Outline): for a hot
        loop nest whose accumulators should not compete for registers with the kernel's
        other live values. It may read outer variables but must not assign them."""
        self._stack.append([])
        yield
        self.emit(Outline(tuple(self._stack.pop()), opaque))

    @contextmanager
    def block(self) -> Iterator[None]:
        self._stack.append([])
        yield
        self.emit(Block(tuple(self._stack.pop())))

    # ------------------------------------------------------------------ scalars
    def local(self, init: Expr | float | int, name: str = "acc", dtype: DType | None = None) -> Var:
        init_e = as_expr(init, dtype or INDEX) if not isinstance(init, Expr) else init
        dt = dtype or init_e.dtype
        if not isinstance(init, Expr):
            init_e = as_expr(init, dt)
        var = Var(self.fresh(name), dt)
        self.emit(Decl(var.name, dt, init_e))
        return var

    def knob(self, k: Knob, default: Any = None, integer: bool = False) -> Any:
        """The value of schedule knob ``k`` for this kernel: the schedule's, else ``default``,
        else the knob's default for this target (``integer``: integer arithmetic); a default the
        compiler set for this kernel (``defaults``) replaces the other two."""
        if k.name in self.defaults:
            default = self.defaults[k.name]
        elif default is None:
            default = k.default(Context(self.features, integer, self.cpu))
        self.space[k.name] = (list(k.choices), default)
        return self.schedule.get(k.name, default)

    @property
    def unroll_tiles(self) -> bool:
        """Unroll accumulator tiles into constant indices (registers on scalar MCUs), or keep
        them as short loops that an auto-vectorising compiler turns into SIMD."""
        return "autovec" not in self.features

    def local_array(self, size: int, name: str, dtype: DType) -> BufRef:
        """A local array (e.g. a tile of accumulators the C compiler can vectorise)."""
        buf = Buffer(self.fresh(name), dtype, size, "local")
        self.emit(DeclArray(buf))
        return BufRef(buf, (size,))

    def temporary(self, name: str, dtype: DType, shape: Sequence[int]) -> BufRef:
        """An in-place kernel's temporary: arena scratch, or a local array on the C stack when
        the compiler allows it for this step (the arena is then smaller, aotc/compiler.py
        _stack_temporaries) and it takes at most STACK_TEMP_MAX bytes. The kernel reports the
        stack ones (LoweredStep.stack): the arena does not hold them."""
        size = int(np.prod(shape, dtype=np.int64))
        if not self.stack_temps_ok or size * dtype.itemsize > STACK_TEMP_MAX:
            return self.scratch_buffer(name, dtype, shape)
        ref = self.local_array(size, name, dtype)
        self.stack_temps.append(ref.buf)
        return BufRef(ref.buf, tuple(shape))

    def assign(self, var: Var, value: Expr) -> None:
        self.emit(Assign(var.name, value))

    # ------------------------------------------------------------------ memory
    def store(self, ref: BufRef, idx: Sequence[Expr | int], value: Expr) -> None:
        self.emit(Store(ref.buf, ref.index(list(idx)), value))

    def store_output(self, idx: Sequence[Expr], value: Expr, out: int = 0,
                     flat: Expr | None = None,
                     into: tuple[BufRef, Sequence[Expr]] | None = None) -> None:
        """Store ``value`` at ``idx`` (or the flat index ``flat``) of output ``out``, after the
        fused epilogue. ``into`` (buffer, index) stores the finished value there instead: an
        in-place kernel's temporary, copied to the output once its input is dead."""
        if out in self.dead_outputs:
            return
        ref = self.outputs[out]
        if out == 0:
            for step in self._epilogue:
                # Each step reads the running value as an operand, maybe more than once
                # (HardSwish, Elu): bind it to a local so the expression stays one op deep
                # instead of doubling with every link of the chain.
                if not isinstance(value, (Var, Const, Load)):
                    value = self.local(value, name="v")
                value = step(value, idx, flat, ref.shape)
        if value.dtype != ref.dtype:
            value = Cast(value, ref.dtype)
        if into is not None:
            self.store(into[0], into[1], value)
        elif flat is not None:
            self.emit(Store(ref.buf, flat, value))
        else:
            self.store(ref, idx, value)

    @property
    def epilogue_steps(self) -> list[tuple[Any, Any, int, Any]] | None:
        """The fused epilogue as (op, prepared node, position of the running value, input
        refs) per step, for schedules that compute it themselves (vectors); None when a step
        does not say (or output 0 is dead)."""
        steps = [getattr(f, "step", None) for f in self._epilogue]
        return None if None in steps or 0 in self.dead_outputs else steps  # type: ignore

    def input_const(self, i: int) -> np.ndarray | None:
        """The compile-time value of input ``i`` if it is a constant."""
        return self._input_consts[i] if i < len(self._input_consts) else None

    def const(self, name: str, array: np.ndarray, dtype: DType) -> BufRef:
        """Add a compile-time constant array (e.g. a look-up table) as a kernel parameter."""
        cname = f"{self.name}_{name}"
        buf = Buffer(cname, dtype, int(array.size), "const")
        self.consts[cname] = np.ascontiguousarray(array).astype(dtype.np)
        self._params.append(buf)
        return BufRef(buf, tuple(array.shape))

    def drop_const(self, name: str) -> None:
        """Remove a constant const() added (a rewrite replaced its every load)."""
        del self.consts[name]
        self._params = [b for b in self._params if b.name != name]

    def map_body(self, fe: Callable[[Expr], Expr]) -> None:
        """Rewrite every expression emitted so far with ``fe`` (loop_ir.map_stmts), after
        the lowering: e.g. a buffer's loads read from another storage."""
        assert len(self._stack) == 1, "unclosed loop"
        self._stack[0] = list(map_stmts(tuple(self._stack[0]), fe))

    def scratch_buffer(self, name: str, dtype: DType, shape: Sequence[int]) -> BufRef:
        """Request a scratch buffer; the memory planner places it (first == last step)."""
        size = int(np.prod(shape, dtype=np.int64))
        buf = Buffer(f"{self.name}_{name}", dtype, size, "scratch")
        self.scratch.append(buf)
        self._params.append(buf)
        return BufRef(buf, tuple(shape))

    # ------------------------------------------------------------------ result
    def build(self) -> Kernel:
        assert len(self._stack) == 1, "unclosed loop"
        return simplify(Kernel(self.name, tuple(self._params), tuple(self._stack[0]),
                               self.comment))
