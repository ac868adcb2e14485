"""The oracle of a .tflite case (a directory holding ``model.tflite``), run by the fuzz worker
(fuzz_oracle.py dispatches on the file name).

aotc compiles the model through the real CLI. A refusal must be exactly one line
``aotc: error: ...`` (exit 2), or the importer's listing of operators it cannot convert (a
header line and one line per operator): "user-error", never a finding. A model aotc accepts
must build with -Werror and, on seeded random inputs (int8/uint8/int16 over their whole range,
floats uniform in [-3, 3], other integers in [-10, 10]), give:

* TFLM's outputs, when TFLM's Python interpreter accepts and runs the model ("ok-tflm");
  integer and bool outputs bit-exact, float outputs within rtol 1e-3, atol 1e-4 with NaN in the
  same places (the compare of fuzz_oracle.py without its 1-LSB allowance);
* otherwise (TFLM refuses it) LiteRT's reference-kernel outputs ("ok-litert"): the same rule,
  except 8-bit outputs of quantised models may differ by 1 (LiteRT's reference kernels round
  some requantisations differently from TFLM, whose arithmetic aotc follows);
* FLT_MAX_RULE: a float reference output of +-FLT_MAX where aotc gives an infinity of the same
  sign counts as equal (TFLite's float kernels clamp to the activation range, which is
  [-FLT_MAX, FLT_MAX] for NONE; aotc does not clamp, so as not to change every float kernel);
* when both references refuse the model, aotc must refuse it too: a bundle is
  "accepted-invalid" (never a third answer).

TFLM and LiteRT run in a forked child each (with a time limit): a reference that crashes or
hangs on a malformed model has refused it; it takes no worker down.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import select
import signal
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from fuzz_oracle import ATOL, MAX_RUN_BYTES, RTOL, _line, compile_and_load

REF_TIMEOUT = 20.0  # seconds for one reference interpreter on one case


def tflite_inputs(specs: list[dict[str, Any]], seed: int) -> list[np.ndarray]:
    """8/16-bit integers over their whole range, floats uniform in [-3, 3], other integers in
    [-10, 10], bools 0/1 (in the model's input order)."""
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        dt, shape = np.dtype(s["dtype"]), tuple(s["shape"])
        if dt.kind == "f":
            a = rng.uniform(-3, 3, shape)
        elif dt.kind == "b":
            a = rng.integers(0, 2, shape)
        elif dt.kind in "iu" and dt.itemsize <= 2:
            info = np.iinfo(dt)
            a = rng.integers(int(info.min), int(info.max) + 1, shape)
        else:
            a = rng.integers(-10, 11, shape)
        out.append(np.asarray(a).astype(dt))
    return out


def in_child(fn: Callable[[], Any], timeout: float = REF_TIMEOUT) -> tuple[bool, Any]:
    """``fn()`` in a forked child: (True, its result) or (False, why it failed: its exception,
    its signal or its time limit). The child's stdout and stderr go to /dev/null."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no return from here
        try:
            # A reference that crashes is an answer here ("refuses"), not news: no fault dump
            # from pytest's faulthandler (it writes to its own copy of stderr).
            faulthandler.disable()
            os.close(r)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            try:
                res: tuple[bool, Any] = (True, fn())
            except BaseException as e:  # noqa: BLE001
                text = str(e).strip().splitlines()
                res = (False, f"{type(e).__name__}: {text[-1] if text else ''}"[:200])
            data = pickle.dumps(res)
            with os.fdopen(w, "wb") as f:
                f.write(data)
        finally:
            os._exit(0)
    os.close(w)
    chunks: list[bytes] = []
    deadline = _now() + timeout
    timed_out = False
    with os.fdopen(r, "rb", buffering=0) as f:
        while True:
            left = deadline - _now()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([f], [], [], left)
            if not ready:
                continue
            chunk = f.read(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        return False, f"timed out after {timeout:g} s"
    if os.WIFSIGNALED(status):
        return False, f"crashed ({signal.Signals(os.WTERMSIG(status)).name})"
    try:
        return pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001
        return False, "died without a result"


def _now() -> float:
    import time

    return time.monotonic()


def input_positions(data: bytes, names: list[str]) -> list[int]:
    """The subgraph-input position of each of aotc's inputs (by tensor name: aotc leaves out a
    subgraph input that is a constant); positional when the model cannot be read."""
    try:
        from ai_edge_litert import schema_py_generated as S

        sg = S.ModelT.InitFromPackedBuf(data, 0).subgraphs[0]
        model_names = [sg.tensors[int(t)].name.decode() for t in sg.inputs]
        pos = [model_names.index(n) for n in names]
        return pos if len(set(pos)) == len(pos) else list(range(len(names)))
    except Exception:  # noqa: BLE001
        return list(range(len(names)))


def run_tflm(data: bytes, xs: list[np.ndarray], pos: list[int] | None = None
             ) -> list[np.ndarray]:
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(data, arena_size=16 << 20)
    for k, x in zip(pos or range(len(xs)), xs):
        it.set_input(x, k)
    it.invoke()
    outs = []
    while True:
        try:
            outs.append(np.array(it.get_output(len(outs)), copy=True))
        except Exception:  # noqa: BLE001 - past the last output
            return outs
        if len(outs) > 64:
            return outs


def run_litert(data: bytes, xs: list[np.ndarray], pos: list[int] | None = None
               ) -> list[np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    details = it.get_input_details()
    pos = pos or list(range(len(xs)))
    if max(pos, default=-1) >= len(details):
        raise ValueError(f"{len(details)} inputs, aotc has {len(xs)}")
    for k, x in zip(pos, xs):
        it.set_tensor(details[k]["index"], x)
    it.invoke()
    return [np.array(it.get_tensor(d["index"]), copy=True) for d in it.get_output_details()]


def compare_tflite(got: list[np.ndarray], want: list[np.ndarray], lsb: int, who: str) -> str:
    """'' when aotc's outputs equal the reference's under the rule of the module docstring."""
    if len(got) != len(want):
        return f"{len(got)} outputs, {who} has {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype != w.dtype or g.size != w.size or (g.shape != w.shape and w.size != 1):
            return f"output {k}: {g.dtype}{list(g.shape)} != {who}'s {w.dtype}{list(w.shape)}"
        g, w = g.reshape(-1), w.reshape(-1)
        if w.dtype.kind == "f":
            ok = np.isclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True)
            # FLT_MAX_RULE: TFLM's and LiteRT's float kernels clamp to the activation range,
            # [-FLT_MAX, FLT_MAX] for NONE, where aotc's C keeps an infinity.
            big = np.finfo(w.dtype).max
            ok |= (np.abs(w) == big) & np.isinf(g) & (np.sign(g) == np.sign(w))
        elif w.dtype.kind in "iu" and w.dtype.itemsize == 1 and lsb:
            ok = np.abs(g.astype(np.int32) - w.astype(np.int32)) <= lsb
        else:
            ok = g == w
        if not ok.all():
            i = np.flatnonzero(~ok)
            return (f"output {k}: {len(i)} of {w.size} elements differ, e.g. at {int(i[0])}: "
                    f"{g[i[0]]!r} vs {who} {w[i[0]]!r}")
    return ""


def listing(lines: list[str]) -> bool:
    """The importer's refusal of operators it cannot convert: one header line 'N operator(s)
    cannot be converted' and then exactly N lines, one per operator (aotc.errors details)."""
    import re

    m = re.match(r"aotc: error: .*: (\d+) operator\(s\) cannot be converted .*:$", lines[0]) \
        if lines else None
    return bool(m) and len(lines) == 1 + int(m.group(1)) and all(
        ln.startswith("aotc: error:   operator ") for ln in lines[1:])


def run_case(case_dir: Path, input_seed: int, emit: Any) -> dict[str, Any]:
    """One .tflite case; ``emit(dict)`` reports progress."""
    from aotc.errors import AotcError

    model = case_dir / "model.tflite"
    bundle = case_dir / "bundle"
    ended, runner = compile_and_load(model, bundle, emit, listing)
    if ended is not None:
        return ended
    specs = runner.meta["inputs"]
    sizes = [int(np.prod(s["shape"], dtype=np.float64)) * np.dtype(s["dtype"]).itemsize
             for s in [*specs, *runner.meta["outputs"]]]
    if max([*sizes, runner.arena_bytes]) > MAX_RUN_BYTES:
        return {"outcome": "ok-unrun", "message": f"arena {runner.arena_bytes} B"}
    xs = tflite_inputs(specs, input_seed)
    emit({"stage": "run"})
    try:
        res = runner.run({s["name"]: x for s, x in zip(specs, xs)})
    except AotcError as e:
        return {"outcome": "wrong-result", "message": _line("run failed: " + e.one_line())}
    got = [np.asarray(res[s["name"]]) for s in runner.meta["outputs"]]
    data = model.read_bytes()
    pos = input_positions(data, [s["name"] for s in specs])
    emit({"stage": "tflm"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ok, tflm = in_child(lambda: run_tflm(data, xs, pos))
    if ok and tflm:
        diff = compare_tflite(got, tflm, 0, "TFLM")
        if not diff:
            return {"outcome": "ok-tflm", "message": ""}
        emit({"stage": "litert"})
        lok, lit = in_child(lambda: run_litert(data, xs, pos))
        side = ("LiteRT refuses the model" if not lok else
                "LiteRT agrees with aotc" if not compare_tflite(got, lit, 1, "LiteRT") else
                "LiteRT agrees with TFLM" if not compare_tflite(tflm, lit, 1, "LiteRT") else
                "LiteRT agrees with neither")
        return {"outcome": "wrong-result", "message": _line(f"{diff}; {side}")}
    why_tflm = tflm if not ok else "no outputs"
    emit({"stage": "litert"})
    ok, lit = in_child(lambda: run_litert(data, xs, pos))
    if not ok:
        return {"outcome": "accepted-invalid", "message": _line(
            f"TFLM refuses ({why_tflm}); LiteRT refuses ({lit})")}
    diff = compare_tflite(got, lit, 1, "LiteRT")
    if diff:
        return {"outcome": "wrong-result", "message": _line(
            f"{diff} (TFLM refuses the model: {why_tflm})")}
    return {"outcome": "ok-litert", "message": _line(f"TFLM refuses: {why_tflm}", 200)}
