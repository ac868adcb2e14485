"""Verification: the generated C (host via cffi, or a board in QEMU) against onnxruntime."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from aotc.errors import AotcError
from aotc.progress import QUIET, Progress


def random_inputs(meta_inputs: list[dict[str, Any]], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for s in meta_inputs:
        dt = np.dtype(s["dtype"])
        if dt.kind == "f":
            out[s["name"]] = rng.standard_normal(s["shape"]).astype(dt)
        elif dt.kind == "b":
            out[s["name"]] = rng.integers(0, 2, s["shape"]).astype(dt)
        else:
            info = np.iinfo(dt)
            lo, hi = max(info.min, -100), min(info.max, 100)
            out[s["name"]] = rng.integers(lo, hi + 1, s["shape"]).astype(dt)
    return out


def default_vectors(specs: list[dict[str, Any]],
                    inputs: Sequence[Mapping[str, np.ndarray]] | None,
                    seed: int, tflite: bool = False) -> Sequence[Mapping[str, np.ndarray]]:
    """``inputs``, or two random vectors (seeds ``seed`` and ``seed + 1``); for a .tflite
    model (``tflite``) the range vectors of range_vectors()."""
    if inputs is not None:
        return inputs
    if tflite:
        return range_vectors(specs, seed)
    return [random_inputs(specs, seed + k) for k in range(2)]


RANGE_VECTORS = 8


def range_vectors(specs: list[dict[str, Any]], seed: int) -> list[dict[str, np.ndarray]]:
    """RANGE_VECTORS vectors spanning each input type's range: every element at the type's
    minimum, at its maximum, at zero, then random ones over the whole range (integers; the
    extremes and one-off errors of a requantisation show there). Float inputs: all -1, all
    +1, zero, then standard normal and, every other one, normal x 4."""
    out: list[dict[str, np.ndarray]] = []
    for k in range(RANGE_VECTORS):
        rng = np.random.default_rng(seed + k)
        vec = {}
        for s in specs:
            dt, shape = np.dtype(s["dtype"]), s["shape"]
            if dt.kind == "b":
                v = np.full(shape, k % 2 == 1, dt) if k < 3 else rng.integers(0, 2, shape)
            elif dt.kind == "f":
                fixed = {0: -1.0, 1: 1.0, 2: 0.0}
                v = np.full(shape, fixed[k], dt) if k in fixed else \
                    rng.standard_normal(shape) * (4.0 if k % 2 else 1.0)
            else:
                info = np.iinfo(dt)
                fixed = {0: info.min, 1: info.max, 2: 0}
                v = np.full(shape, fixed[k], dt) if k in fixed else \
                    rng.integers(info.min, int(info.max) + 1, shape, dtype=dt)
            vec[s["name"]] = np.asarray(v).astype(dt)
        out.append(vec)
    return out


def onnxruntime_outputs(model: str | os.PathLike[str] | onnx.ModelProto,
                        feeds: Mapping[str, np.ndarray],
                        optimize: bool = True) -> dict[str, np.ndarray]:
    """All graph outputs; ``optimize=False`` disables onnxruntime's graph optimisations (no
    QDQ fusion: each operator computed as the ONNX model writes it)."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise AotcError("onnxruntime is not installed; pass expected outputs instead") from None
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    src = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    try:
        sess = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        res = sess.run(names, dict(feeds))
    except Exception as e:
        raise AotcError(f"onnxruntime cannot run the model: {str(e).splitlines()[0]}") from None
    return dict(zip(names, res))


def tflite_outputs(path: str | os.PathLike[str], feeds: Mapping[str, np.ndarray],
                   names: Sequence[str], used: list[str] | None = None
                   ) -> dict[str, np.ndarray]:
    """A .tflite model's outputs (``names``, in the model's order): a quantised model's
    (integer activations anywhere, float inputs and outputs or not) from TensorFlow Lite Micro,
    whose integer arithmetic ``--requant tflite`` follows, a float one's from the LiteRT
    interpreter (which also runs hybrid models). When the first refuses the
    model (TFLM: uint8, an op it lacks) or is not installed, the other; ``used`` receives
    which ran and why ("TFLM", "LiteRT (TFLM refused the model: ...)")."""
    data = Path(path).read_bytes()
    xs = list(feeds.values())
    runners = [("TFLM", _tflm), ("LiteRT", _litert)]
    if not _quantised(data):
        runners.reverse()
    why = ""
    for label, run in runners:
        try:
            outs = run(data, xs, len(names))
        except ImportError:
            why = why or f" ({runners[0][0]} is not installed)"
            continue
        except Exception as e:
            text = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            if label == runners[0][0]:
                why = f" ({label} refused the model: {text[:160]})"
                continue
            raise AotcError(f"no TFLite interpreter can run the model: {why.strip(' ()')}; "
                            f"{label}: {text[:160]}") from None
        if used is not None:
            used.append(label + (why if label != runners[0][0] else ""))
        return dict(zip(names, outs))
    raise AotcError("verifying a .tflite model needs tflite-micro or ai-edge-litert "
                    "(pip install tflite-micro); or pass expected outputs")


@contextlib.contextmanager
def _captured_stderr(lines: list[str]) -> Iterator[None]:
    """The process's stderr (fd 2) into ``lines``: TFLM's C++ logs why it refuses a model
    there ("Hybrid models are not supported on TFLite Micro."), which tflite_outputs reports
    in its one line instead."""
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        try:
            os.dup2(tmp.fileno(), 2)
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            lines.extend(tmp.read().decode("utf-8", "replace").splitlines())


def tflite_reference_is_tflm(path: str | os.PathLike[str]) -> bool:
    """Whether tflite_outputs asks TFLM first for the model at ``path``."""
    return _quantised(Path(path).read_bytes())


def _quantised(data: bytes) -> bool:
    """Whether the model computes in integers somewhere: an activation (a tensor no buffer
    holds) of type int8, uint8 or int16 with a scale. Such a model's arithmetic is TFLM's
    (and ``--requant tflite``'s), float inputs and outputs or not (a QUANTIZE / DEQUANTIZE
    at each end); LiteRT's reference kernels round some int16 steps differently."""
    from aotc.frontend.tflite import check_flatbuffer, computes_in_integers

    try:
        return check_flatbuffer(data) is None and computes_in_integers(data)
    except Exception:  # noqa: BLE001 - an unreadable file: the interpreters say why
        return False


def _tflm(data: bytes, xs: Sequence[np.ndarray], n: int) -> list[np.ndarray]:
    from tflite_micro.python.tflite_micro import runtime

    log: list[str] = []
    try:
        with _captured_stderr(log):
            it = runtime.Interpreter.from_bytes(data, arena_size=16 << 20)
    except Exception as e:
        said = [ln.split(".cc ", 1)[-1].strip() for ln in log if ln.strip()]
        raise RuntimeError(f"{said[0]} ({e})" if said else str(e)) from None
    for k, x in enumerate(xs):
        it.set_input(x, k)
    it.invoke()
    return [it.get_output(k).copy() for k in range(n)]


def _litert(data: bytes, xs: Sequence[np.ndarray], n: int) -> list[np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    lit = Interpreter(model_content=data,  # reference kernels: no delegate, no log line
                      experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    lit.allocate_tensors()
    for d, x in zip(lit.get_input_details(), xs):
        lit.set_tensor(d["index"], x)
    lit.invoke()
    return [lit.get_tensor(d["index"]).copy() for d in lit.get_output_details()]


def _is_tflite(model: Any) -> bool:
    from aotc.frontend.tflite import is_tflite

    return isinstance(model, (str, os.PathLike)) and is_tflite(model)


def reference_outputs(model: Any, feeds: Mapping[str, np.ndarray], names: Sequence[str],
                      used: list[str] | None = None) -> dict[str, np.ndarray]:
    """The reference's outputs for one input set: TFLM (or LiteRT) for a .tflite model,
    onnxruntime for ONNX; what `aotc verify` and `aotc validate` compare with. ``used``
    receives which reference ran (and why the other did not)."""
    if _is_tflite(model):
        return tflite_outputs(model, feeds, names, used)
    if used is not None:
        used.append("onnxruntime")
    return onnxruntime_outputs(model, feeds)


class _StatefulReference:
    """A streaming model's reference, fed the vectors as consecutive frames from the initial
    state: onnxruntime with each state input fed by hand (the previous frame's state output,
    the slot's initial bytes first), or one TFLite Micro interpreter invoked once per frame
    (it keeps its variables between invokes)."""

    def __init__(self, model: Any, bundle: Any) -> None:
        from aotc.frontend.tflite import is_tflite

        self.model = model
        self.tflite = not isinstance(model, onnx.ModelProto) and is_tflite(model)
        g = bundle.compilation.graph
        public = g.meta.get("output_names", {})
        self.slots = [(sl.input, public.get(sl.graph_output, sl.graph_output)
                       if sl.graph_output else None,
                       np.frombuffer(sl.init, g.type(sl.input).dtype.np)
                       .reshape(g.type(sl.input).shape))
                      for sl in bundle.compilation.schedule.state]
        self.state = {x: init.copy() for x, _, init in self.slots}
        self.interpreter: Any = None

    def __call__(self, feeds: Mapping[str, np.ndarray], names: Sequence[str]
                 ) -> dict[str, np.ndarray]:
        if self.tflite:
            from tflite_micro.python.tflite_micro import runtime

            if self.interpreter is None:
                self.interpreter = runtime.Interpreter.from_bytes(
                    Path(self.model).read_bytes(), arena_size=16 << 20)
            for k, x in enumerate(feeds.values()):
                self.interpreter.set_input(x, k)
            self.interpreter.invoke()
            return {n: self.interpreter.get_output(k).copy() for k, n in enumerate(names)}
        res = onnxruntime_outputs(self.model, {**feeds, **self.state})
        for x, y, _ in self.slots:
            if y is not None:
                self.state[x] = res[y]
        return res


def first_mismatch(name: str, got: np.ndarray, ref: np.ndarray, bad: np.ndarray) -> str:
    """The first differing element of output ``name`` (``bad``: where they differ): flat and
    multi-index, both values and, for integers, the distance in LSB."""
    flat = np.flatnonzero(bad)
    i = int(flat[0])
    idx = tuple(int(v) for v in np.unravel_index(i, got.shape)) if got.ndim else ()
    g, r = got.reshape(-1)[i].item(), ref.reshape(-1)[i].item()
    if got.dtype.kind in "iub" and ref.dtype.kind in "iub":
        dist = f"{abs(int(g) - int(r))} LSB"
    else:
        dist = f"abs error {abs(float(g) - float(r)):.3g}"
    return (f"{flat.size} of {got.size} elements differ; the first is {name}[{i}] (index "
            f"{idx}): {g!r} vs {r!r} from the reference, {dist}")


def run_verification(model: Any, bundle: Any, inputs: Sequence[Mapping[str, np.ndarray]] | None,
                     expected: Sequence[Mapping[str, np.ndarray]] | None, atol: float,
                     rtol: float, seed: int, board: str | None,
                     input_shapes: Any = None, progress: Progress = QUIET) -> dict[str, Any]:
    """Stages for ``progress``: one build, then one per vector (two random ones by default)."""
    with progress.stage(f"build for {board or 'the host'}"):
        runner = bundle.load(board)
    tflite = expected is None and _is_tflite(model)
    if tflite and inputs is None:
        progress.set_total(2 + RANGE_VECTORS)
    inputs = default_vectors(runner.meta["inputs"], inputs, seed, tflite)
    # A streaming model (bundle.json "state"): the vectors are consecutive frames.
    stateful = _StatefulReference(model, bundle) if "state" in runner.meta else None
    worst: dict[str, float] = {}
    used: list[str] = []
    if stateful is not None:
        used.append("TFLM, the vectors as consecutive frames" if stateful.tflite else
                    "onnxruntime, the vectors as consecutive frames")
    for k, feeds in enumerate(inputs):
        with progress.stage(f"vector {k + 1}/{len(inputs)}"):
            got = runner.run(feeds)
            names = [o["name"] for o in runner.meta["outputs"]]
            ref = (expected[k] if expected is not None else
                   stateful(feeds, names) if stateful is not None else
                   reference_outputs(model, feeds, names, used))
        for name, g in got.items():
            if name not in ref:
                raise AotcError(f"no reference value for output {name!r}")
            r = np.asarray(ref[name])
            if r.shape != g.shape:
                r = r.reshape(g.shape)
            if g.dtype.kind == "f":
                err = float(np.max(np.abs(g.astype(np.float64) - r), initial=0.0))
                bad = ~np.isclose(g, r, atol=atol, rtol=rtol, equal_nan=True)
            else:
                diff = np.abs(g.astype(np.int64) - r.astype(np.int64))
                err = float(np.max(diff, initial=0))
                bad = diff > atol
            worst[name] = max(worst.get(name, 0.0), err)
            if bad.any():
                against = f", reference {used[-1]}" if used else ""
                raise AotcError(f"verification failed on output {name!r} (vector {k + 1} of "
                                f"{len(inputs)}{against}): max abs error {err:.3g} > atol "
                                f"{atol:g} + rtol {rtol:g}; {first_mismatch(name, g, r, bad)}")
    return {"vectors": len(inputs), "max_abs_error": worst, "arena_bytes": bundle.arena_bytes,
            "board": board or "host", "reference": used[-1] if used else None}
