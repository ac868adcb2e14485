"""TFLite Micro's Signal library, the streaming half: Delay, Framer, Stacker and OverlapAdd,
whose circular buffers live between calls. Each is an aotc-domain op that takes its state as
inputs and gives the next state as outputs (the TFLite importer makes them slots of the
caller's state buffer, aotc/frontend/tflite/signal.py); each kernel may write the next state
over the old one (``writes_over``): it copies the old state into the output at the same
index first, or reads an element before any write to it.

A TFLM circular buffer here is a plain array holding the pending samples oldest first, and
(Framer, Stacker) the count of them: a read takes the front, a discard shifts the rest down.
The samples and the count follow TFLM's Write / Extend / Get / Discard, so the outputs are
TFLM's (tests/frontend/test_tflite_signal.py); an output TFLM leaves unwritten (a frame that
is not ready, ``valid`` false) is left unwritten here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import Cast, Const, cmp, select
from aotc.ops import OpDef, register

I16, I32, F32 = (dtypes.BY_NAME[n] for n in ("int16", "int32", "float32"))
BOOL = dtypes.BY_NAME["bool"]


def _types(ins: Sequence[Value | None]) -> list[TensorType]:
    return [v.type for v in ins if v is not None]


class _Stream(OpDef):
    domain = "aotc"


# --------------------------------------------------------------------------------- Delay
@register
class SignalDelay(_Stream):
    """Each row of the last axis delayed by the state's length D: y = (state ++ x)[:F],
    next state = (state ++ x)[F:]."""

    name = "SignalDelay"
    dtypes = ("int16",)
    writes_over: ClassVar[dict[int, int]] = {1: 1}

    def reference(self, x: np.ndarray, st: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        f = x.shape[-1]
        both = np.concatenate([st.reshape(-1, st.shape[-1]), x.reshape(-1, f)], axis=1)
        return both[:, :f].reshape(x.shape), both[:, f:].reshape(st.shape)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x, st = _types(ins)
        if st.shape[0] * x.shape[-1] != x.numel:
            raise AotcError("the state must have a row per row of the input", node.name,
                            node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        return _types(ins)

    def lower(self, node: Node, kb: Any) -> None:
        x, st = kb.inputs[:2]
        new = kb.outputs[1]
        rows, d = st.shape
        f = x.numel // rows
        with kb.loop(rows, "r") as r:
            # The output first: it reads the old state, which the next state may overwrite.
            with kb.loop(min(d, f), "i") as i:
                kb.store_output([r, i], st[r, i], flat=r * f + i)
            if f > d:
                with kb.loop(f, "i", start=d) as i:
                    kb.store_output([r, i], x.flat(r * f + i - d), flat=r * f + i)
            if d > f:  # ascending: reads element j + f before writing element j
                with kb.loop(d - f, "j") as j:
                    kb.store(new, [r, j], st[r, j + f])
            with kb.loop(d, "j", start=max(d - f, 0)) as j:
                kb.store(new, [r, j], x.flat(r * f + j + f - d))


# ---------------------------------------------------------------------------- OverlapAdd
@register
class SignalOverlapAdd(_Stream):
    """Frames [..., n, size] added into a running buffer (int16 saturating, float plain); each
    frame emits the buffer's first frame_step samples and shifts it down by that."""

    name = "SignalOverlapAdd"
    dtypes = ("int16", "float32")
    writes_over: ClassVar[dict[int, int]] = {1: 1}

    def reference(self, x: np.ndarray, st: np.ndarray, *, frame_step: int = 1
                  ) -> tuple[np.ndarray, np.ndarray]:
        n, size = x.shape[-2:]
        frames = x.reshape(-1, n, size)
        buf = st.reshape(-1, size).copy()
        out = np.zeros((frames.shape[0], n * frame_step), x.dtype)
        for o in range(frames.shape[0]):
            for f in range(n):
                if x.dtype == np.int16:
                    buf[o] = np.clip(buf[o].astype(np.int32) + frames[o, f], -32768, 32767)
                else:
                    buf[o] = buf[o] + frames[o, f]
                out[o, f * frame_step:(f + 1) * frame_step] = buf[o, :frame_step]
                buf[o, :size - frame_step] = buf[o, frame_step:].copy()
                buf[o, size - frame_step:] = 0
        return out.reshape(*x.shape[:-2], n * frame_step), buf.reshape(st.shape)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x, st = _types(ins)
        step = int(node.attrs.get("frame_step", 1))
        if len(x.shape) < 2 or not 0 < step <= x.shape[-1] or st.shape[-1] != x.shape[-1]:
            raise AotcError(f"needs frames [..., n, size] with 0 < frame_step={step} <= size",
                            node.name, node.op)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x, st = _types(ins)
        step = int(node.attrs.get("frame_step", 1))
        return [TensorType((*x.shape[:-2], x.shape[-2] * step), x.dtype), st]

    def lower(self, node: Node, kb: Any) -> None:
        x, st = kb.inputs[:2]
        new = kb.outputs[1]
        step = int(node.attrs.get("frame_step", 1))
        n, size = x.shape[-2:]
        rows = x.numel // (n * size)
        integer = x.dtype.name == "int16"
        with kb.loop(rows, "r") as r:
            with kb.loop(size, "i") as i:
                kb.store(new, [r, i], st[r, i])
            with kb.loop(n, "f") as f:
                with kb.loop(size, "i") as i:
                    v = new[r, i]
                    xv = x.flat((r * n + f) * size + i)
                    if integer:
                        s = Cast(v, I32) + Cast(xv, I32)
                        s = select(cmp("lt", s, -32768), -32768,
                                   select(cmp("gt", s, 32767), 32767, s, I32), I32)
                        kb.store(new, [r, i], Cast(s, I16))
                    else:
                        kb.store(new, [r, i], v + xv)
                with kb.loop(step, "i") as i:
                    kb.store_output([r, f * step + i], new[r, i],
                                    flat=(r * n + f) * step + i)
                with kb.loop(size - step, "i") as i:
                    kb.store(new, [r, i], new[r, i + step])
                with kb.loop(size, "i", start=size - step) as i:
                    kb.store(new, [r, i], Const(0.0 if not integer else 0, new.dtype))


# -------------------------------------------------------------------------------- Framer
@register
class SignalFramer(_Stream):
    """Frames of frame_size samples every frame_step along the last axis: each call appends
    its samples to the buffer and emits a frame whenever frame_size are pending. Inputs: x,
    the buffer [rows, capacity], the pending count [1]; outputs: the frames, valid (every
    frame of the call was emitted), the next buffer and count."""

    name = "SignalFramer"
    dtypes = ("int16", "int32")
    writes_over: ClassVar[dict[int, int]] = {2: 1, 3: 2}

    def reference(self, x: np.ndarray, buf: np.ndarray, count: np.ndarray, *,
                  frame_size: int = 1, frame_step: int = 1) -> tuple[np.ndarray, ...]:
        rows, cap = buf.shape
        n = x.shape[-1] // frame_step
        xs = x.reshape(rows, -1)
        b = buf.copy()
        cnt = int(count[0])
        y = np.zeros((rows, n, frame_size), np.int16)
        valid = True
        for f in range(n):
            b[:, cnt:cnt + frame_step] = xs[:, f * frame_step:(f + 1) * frame_step]
            cnt += frame_step
            if cnt >= frame_size:
                y[:, f] = b[:, :frame_size]
                b[:, :cap - frame_step] = b[:, frame_step:].copy()
                cnt -= frame_step
            else:
                valid = False
        return (y.reshape(*x.shape[:-1], n, frame_size), np.array(valid), b,
                np.array([cnt], np.int32))

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x, buf, count = _types(ins)
        size, step = int(node.attrs["frame_size"]), int(node.attrs["frame_step"])
        return [TensorType((*x.shape[:-1], x.shape[-1] // step, size), I16),
                TensorType((), BOOL), buf, count]

    def lower(self, node: Node, kb: Any) -> None:
        x, buf, count = kb.inputs[:3]
        new, new_count = kb.outputs[2], kb.outputs[3]
        size, step = int(node.attrs["frame_size"]), int(node.attrs["frame_step"])
        rows, cap = buf.shape
        width = x.numel // rows
        n = width // step
        cnt = kb.local(count.flat(0), "cnt", I32)
        valid = kb.local(1, "valid", I32)
        with kb.loops((rows, cap), ("r", "i")) as (r, i):
            kb.store(new, [r, i], buf[r, i])
        with kb.loop(n, "f") as f:
            with kb.loops((rows, step), ("r", "i")) as (r, i):
                kb.store(new, [r, cnt + i], x.flat(r * width + f * step + i))
            kb.assign(cnt, cnt + step)
            ready = kb.local(Cast(cmp("ge", cnt, size), I32), "ready", I32)
            with kb.if_(cmp("ne", ready, 0)):
                with kb.loops((rows, size), ("r", "i")) as (r, i):
                    kb.store_output([r, f, i], new[r, i], flat=(r * n + f) * size + i)
                with kb.loops((rows, cap - step), ("r", "i")) as (r, i):
                    kb.store(new, [r, i], new[r, i + step])
                kb.assign(cnt, cnt - step)
            with kb.if_(cmp("eq", ready, 0)):
                kb.assign(valid, Const(0))
        kb.store_output([], Cast(cmp("ne", valid, 0), BOOL), out=1, flat=Const(0))
        kb.store(new_count, [0], cnt)


# ------------------------------------------------------------------------------- Stacker
@register
class SignalStacker(_Stream):
    """Stacks left + 1 + right frames of num_channels, advancing stacker_step frames per
    output; the first frame is repeated left times (TFLM's Extend). Inputs: x [channels],
    the buffer [channels * (left + right + 1)], [pending count, has first frame]; outputs:
    the stack, valid, the next buffer and counters."""

    name = "SignalStacker"
    dtypes = ("int16", "int32")
    writes_over: ClassVar[dict[int, int]] = {2: 1, 3: 2}

    def reference(self, x: np.ndarray, buf: np.ndarray, meta: np.ndarray, *,
                  num_channels: int = 1, stacker_left_context: int = 0,
                  stacker_right_context: int = 0, stacker_step: int = 1
                  ) -> tuple[np.ndarray, ...]:
        c, left = num_channels, stacker_left_context
        bs = buf.size
        b = buf.copy()
        cnt, first = int(meta[0]), int(meta[1])
        b[cnt:cnt + c] = x.reshape(-1)
        cnt += c
        if not first:
            for _ in range(left):
                b[cnt:cnt + c] = x.reshape(-1)
                cnt += c
            first = 1
        y = np.zeros(bs, np.int16)
        valid = cnt >= bs
        if valid:
            y[:] = b[:bs]
            k = stacker_step * c
            b[:bs - k] = b[k:].copy()
            cnt -= k
        return y, np.array(valid), b, np.array([cnt, first], np.int32)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        _, buf, meta = _types(ins)
        return [TensorType(buf.shape, I16), TensorType((), BOOL), buf, meta]

    def lower(self, node: Node, kb: Any) -> None:
        x, buf, meta = kb.inputs[:3]
        new, new_meta = kb.outputs[2], kb.outputs[3]
        c = int(node.attrs["num_channels"])
        left = int(node.attrs.get("stacker_left_context", 0))
        k = int(node.attrs.get("stacker_step", 1)) * c
        bs = buf.numel
        cnt = kb.local(meta.flat(0), "cnt", I32)
        first = kb.local(meta.flat(1), "first", I32)
        with kb.loop(bs, "i") as i:
            kb.store(new, [i], buf.flat(i))
        with kb.loop(c, "i") as i:
            kb.store(new, [cnt + i], x.flat(i))
        kb.assign(cnt, cnt + c)
        if left:
            with kb.if_(cmp("eq", first, 0)):
                with kb.loops((left, c), ("l", "i")) as (lft, i):
                    kb.store(new, [cnt + lft * c + i], x.flat(i))
                kb.assign(cnt, cnt + left * c)
        kb.assign(first, Const(1))
        valid = kb.local(Cast(cmp("ge", cnt, bs), I32), "valid", I32)
        with kb.if_(cmp("ne", valid, 0)):
            with kb.loop(bs, "i") as i:
                kb.store_output([i], new.flat(i), flat=i)
            with kb.loop(bs - k, "i") as i:
                kb.store(new, [i], new.flat(i + k))
            kb.assign(cnt, cnt - k)
        kb.store_output([], Cast(cmp("ne", valid, 0), BOOL), out=1, flat=Const(0))
        kb.store(new_meta, [0], cnt)
        kb.store(new_meta, [1], first)
