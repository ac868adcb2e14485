"""The fuzz oracle, run in a child process (``python fuzz_oracle.py``) that handles one
case at a time: JSON requests on stdin, JSON progress lines on stdout.

A case is a directory holding ``model.onnx`` (and any external-data files). The worker runs the
real CLI entry point (``aotc.cli.main(["compile", ...])``), builds the bundle with the host cc
(-Werror, aotc.targets.host), runs it on seeded random inputs, checks the model with the ONNX
checker, runs onnxruntime (ORT_DISABLE_ALL, one thread) and compares. It reports its stage
before each step, so the parent (fuzz_driver) can tell a crash or hang of the compiler from one
of the generated C or of onnxruntime. Outcomes are listed in OUTCOMES.

Comparison rule (the oracle's tolerances): float outputs rtol 1e-3, atol 1e-4, NaN in the same
places, infinities equal; integer and bool outputs exact, except 8-bit integer outputs of models
that contain quantisation ops, which may differ by 1 (onnxruntime runs QDQ graphs in float,
aotc in integer arithmetic; the README promises 1 LSB).

Where onnxruntime is at fault (NONFINITE_RULE): when the outputs differ, the ONNX reference
evaluator (numpy, IEEE arithmetic) is run too. If aotc agrees with it and onnxruntime differs
only in elements where the reference's value is NaN or infinite, the case is "ok-ort-nonfinite",
not a finding: onnxruntime's GRU/LSTM kernels, for one, give finite outputs where an infinite
weight meets a zero state (inf * 0 is NaN in IEEE arithmetic, in the ONNX formulas as written).

Where onnxruntime alone differs (REFERENCE_RULE): if the outputs differ from onnxruntime's but
match the ONNX reference evaluator's (the same tolerances), the case is "ok-ref-agrees": the
reference is the specification's own evaluation. The run's table shows these in their own column
(a few per 10,000 cases, e.g. LayerNormalization, whose statistics ONNX computes in float32
(stash_type=1) and onnxruntime in double; docs/floating-point.md).

Fused multiply-add (FMA_RULE): onnxruntime's and numpy's matrix kernels fuse a * b + c on CPUs
that have FMA; aotc's C99 rounds each product (the same result on every board). Where a product
overflows float32 and meets an infinity, the unfused sum is NaN and the fused one +-inf. When the
outputs differ and the same bundle, built again with fused multiply-add (AOTC_HOST_FMA=1), matches
onnxruntime, the case is "ok-fp-contract", not a finding (docs/floating-point.md).

Stale declared shapes (STALE_SHAPE_RULE): the checker rejects a graph output or value_info whose
declared dims differ from the inferred ones; onnxruntime and aotc use the computed shape (aotc
refuses only a declared non-zero dim computed as 0). Such a model counts as valid when the checker
accepts it with those dims dropped.

Models onnxruntime refuses: when aotc builds a bundle for a model onnxruntime rejects (at load or
at run time), that is fine only if ``onnx.checker.check_model(full_check=True)`` accepts the
model (onnxruntime lacks a kernel or a type, say); otherwise aotc "accepted an invalid model".
The same rule applies when onnxruntime or the checker crashes or hangs on the model: that is
their bug, never counted against aotc unless the model is invalid.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

RTOL, ATOL = 1e-3, 1e-4
QUANT_OPS = {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul",
             "DynamicQuantizeLinear", "QLinearAdd", "QLinearMul", "QLinearAveragePool",
             "QLinearGlobalAveragePool", "QLinearConcat", "QLinearLeakyRelu", "QLinearSigmoid",
             "QLinearSoftmax", "ConvInteger", "MatMulInteger"}
# Inputs or arenas beyond these are not materialised on the host (the bundle is still built).
MAX_RUN_BYTES = 256 << 20
MEMORY_LIMIT = 4 << 30  # address-space limit of a worker (and the cc it starts)

# Outcome -> is it a finding?
OUTCOMES = {
    "user-error": False,       # exit 2 with one line 'aotc: error: ...'
    "ok-verified": False,      # built with -Werror and matched onnxruntime
    "ok-ort-rejects": False,   # built; onnxruntime rejects (or crashes on) a checker-valid model
    "ok-unrun": False,         # built; inputs or arena too large to run on the host
    "ok-ort-nonfinite": False,  # matches the ONNX reference; onnxruntime differs only at NaN/inf
    "ok-fp-contract": False,   # differs only as fused multiply-add would (FMA_RULE)
    "ok-ref-agrees": False,    # onnxruntime differs; the ONNX reference agrees with aotc
    "ok-tflm": False,          # .tflite: built with -Werror and matched TFLM (tflite_oracle.py)
    "ok-litert": False,        # .tflite: TFLM refuses the model; matched LiteRT
    "traceback": True,         # exit 3 (internal error) or any other exit status
    "multi-line-error": True,  # exit 2 but not exactly one 'aotc: error:' line
    "crash": True,             # a signal in the compiler or in the generated C
    "hang": True,              # compile + build + run exceeded the time limit
    "build-failure": True,     # the bundle does not build with -Werror (or cffi rejects it)
    "wrong-result": True,      # outputs differ from onnxruntime's
    "accepted-invalid": True,  # compiled a model onnxruntime and the ONNX checker reject
    "fuzzer-error": True,      # the oracle itself failed: a bug in tests/fuzz, fix it there
}
FINDINGS = [k for k, v in OUTCOMES.items() if v]


def _cli(argv: list[str]) -> tuple[int, str]:
    from aotc.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("always")  # a warning is printed every time, in every worker
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
    return rc, err.getvalue()


def _where(model: Path, bundle: Path) -> str:
    """The innermost aotc frame of an internal error: the compile again with AOTC_DEBUG=1 (the
    CLI then lets the exception through)."""
    import traceback

    os.environ["AOTC_DEBUG"] = "1"
    try:
        _cli(["compile", str(model), "-o", str(bundle), "--name", "m"])
    except Exception as e:  # noqa: BLE001
        frames = [f for f in traceback.extract_tb(e.__traceback__) if "/aotc/" in f.filename]
        if frames:
            f = frames[-1]
            return f"at {f.filename[f.filename.rindex('/aotc/') + 1:]}:{f.lineno} in {f.name}"
        return "outside aotc"
    finally:
        del os.environ["AOTC_DEBUG"]
    return "not raised again"


def random_inputs(specs: list[dict[str, Any]], seed: int) -> dict[str, np.ndarray]:
    """Floats uniform in [-3, 3]; signed integers in [-10, 10]; unsigned in [0, 20]."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for s in specs:
        dt, shape = np.dtype(s["dtype"]), tuple(s["shape"])
        if dt.kind == "f":
            a = rng.uniform(-3, 3, shape)
        elif dt.kind == "b":
            a = rng.integers(0, 2, shape)
        elif dt.kind == "u":
            a = rng.integers(0, 21, shape)
        else:
            a = rng.integers(-10, 11, shape)
        feeds[s["name"]] = a.astype(dt)
    return feeds


def checker_verdict(model_path: Path) -> str:
    """'' when ``onnx.checker.check_model(full_check=True)`` accepts the file, else why not."""
    import onnx

    try:
        # By path first: that validates the external-data entries (locations inside the
        # model's directory, files present); then the loaded model, external data in place,
        # so that shape inference sees constant inputs stored outside the file.
        onnx.checker.check_model(str(model_path))
        model = onnx.load(str(model_path))
        onnx.checker.check_model(model, full_check=True)
        return ""
    except Exception as e:  # noqa: BLE001 - any failure means invalid
        why = _line(f"{type(e).__name__}: {e}")
    if "Inferred shape and existing shape differ" not in why:
        return why
    # STALE_SHAPE_RULE: a declared graph output / value_info dim that differs from the
    # computed one is tolerated by onnxruntime (a warning, then the computed shape) and by aotc
    # (its header and bundle.json give the computed shape). The model is valid if the checker
    # accepts it with those declarations' dims dropped.
    try:
        for vi in model.graph.output:
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
                for k, d in enumerate(vi.type.tensor_type.shape.dim):
                    d.dim_param = f"stale_{k}"  # the rank stays declared
        del model.graph.value_info[:]
        onnx.checker.check_model(model, full_check=True)
        return ""
    except Exception:  # noqa: BLE001
        return why


def ort_outputs(model_path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 4
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(model_path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def compare(got: dict[str, np.ndarray], want: dict[str, np.ndarray], quantised: bool) -> str:
    """'' when the outputs agree under the rule in the module docstring, else the first
    difference."""
    if sorted(got) != sorted(want):
        return f"output names {sorted(got)} != onnxruntime's {sorted(want)}"
    for k in sorted(want):
        g, w = np.asarray(got[k]), np.asarray(want[k])
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"{k!r}: {g.dtype}{list(g.shape)} != onnxruntime's {w.dtype}{list(w.shape)}"
        if w.dtype.kind == "f":
            ok = np.isclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True)
        elif quantised and w.dtype.itemsize == 1 and w.dtype.kind in "iu":
            ok = np.abs(g.astype(np.int32) - w.astype(np.int32)) <= 1
        else:
            ok = g == w
        if not ok.all():
            i = np.flatnonzero(~ok.reshape(-1))
            return (f"{k!r}: {len(i)} of {w.size} elements differ, e.g. at {int(i[0])}: "
                    f"{g.reshape(-1)[i[0]]!r} vs onnxruntime {w.reshape(-1)[i[0]]!r}")
    return ""


def _line(text: str, limit: int = 300) -> str:
    return " ".join(text.split())[:limit]


def compile_and_load(model: Path, bundle: Path, emit: Any,
                     listing: Any = None) -> tuple[dict[str, Any] | None, Any]:
    """Compile ``model`` with the CLI and load the bundle on the host: (the case's outcome,
    None) when that ends the case (a one-line refusal, a multi-line error, a traceback, a
    failed build), else (None, the runner). ``listing(lines)``: whether a multi-line exit 2 is
    a refusal in another accepted form (the TFLite importer's operator list)."""
    from aotc.errors import AotcError
    from aotc.targets.host import Runner

    emit({"stage": "compile"})
    rc, err = _cli(["compile", str(model), "-o", str(bundle), "--name", "m"])
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if rc == 2:
        if len(lines) == 1 and lines[0].startswith("aotc: error: "):
            return {"outcome": "user-error", "message": lines[0]}, None
        if listing is not None and listing(lines):
            return {"outcome": "user-error", "message": _line(" | ".join(lines[:3]))}, None
        return {"outcome": "multi-line-error", "message": _line(" | ".join(lines[:4]))}, None
    if rc != 0:
        # the CLI's own line first (a RuntimeWarning may precede it), then where it was raised
        lines.sort(key=lambda ln: not ln.startswith("aotc: "))
        text = f"exit {rc}: {lines[0] if lines else ''} [{_where(model, bundle)}]"
        return {"outcome": "traceback", "message": _line(" | ".join([text, *lines[1:]]))}, None
    emit({"stage": "build"})
    try:
        return None, Runner(bundle)
    except AotcError as e:
        return {"outcome": "build-failure", "message": _line(e.one_line())}, None
    except Exception as e:  # noqa: BLE001 - cffi rejecting the header is a broken bundle too
        return {"outcome": "build-failure", "message": _line(f"{type(e).__name__}: {e}")}, None


def run_case(case_dir: Path, input_seed: int, emit: Any) -> dict[str, Any]:
    """One case; ``emit(dict)`` reports progress. Returns {'outcome': ..., 'message': ...}."""
    from aotc.errors import AotcError

    model = case_dir / "model.onnx"
    bundle = case_dir / "bundle"
    ended, runner = compile_and_load(model, bundle, emit)
    if ended is not None:
        return ended
    specs = runner.meta["inputs"]
    in_bytes = sum(int(np.prod(s["shape"], dtype=np.float64)) * np.dtype(s["dtype"]).itemsize
                   for s in specs)
    out_bytes = sum(int(np.prod(s["shape"], dtype=np.float64)) * np.dtype(s["dtype"]).itemsize
                    for s in runner.meta["outputs"])
    if max(in_bytes, out_bytes, runner.arena_bytes) > MAX_RUN_BYTES:
        return {"outcome": "ok-unrun", "message": f"inputs {in_bytes} B, arena "
                                                  f"{runner.arena_bytes} B"}
    feeds = random_inputs(specs, input_seed)
    emit({"stage": "run"})
    try:
        got = runner.run(feeds)
    except AotcError as e:
        return {"outcome": "wrong-result", "message": _line("run failed: " + e.one_line())}
    emit({"stage": "checker"})
    invalid = checker_verdict(model)
    quantised = any(n.op_type in QUANT_OPS for n in _nodes(model))
    emit({"stage": "ort", "invalid": invalid})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = ort_outputs(model, feeds)
    except Exception as e:  # noqa: BLE001 - onnxruntime refusing the model
        why = f"{type(e).__name__}: {e}".replace(str(case_dir), "<case>")
        return ort_rejected(invalid, _line(why, 200))
    diff = compare(got, want, quantised)
    if diff:
        emit({"stage": "reference"})
        side, ort_fault = second_opinion(model, feeds, got, want, quantised)
        if ort_fault:
            return {"outcome": "ok-ort-nonfinite", "message": _line(f"{diff}; {side}")}
        if side.endswith("agrees with aotc"):
            return {"outcome": "ok-ref-agrees", "message": _line(f"{diff}; {side}")}
        emit({"stage": "fma"})
        if fused_build_matches(bundle, feeds, want, quantised):
            return {"outcome": "ok-fp-contract", "message": _line(
                f"{diff}; {side}; the same C built with fused multiply-add matches")}
        return {"outcome": "wrong-result", "message": _line(f"{diff}; {side}")}
    return {"outcome": "ok-verified", "message": ""}


def fused_build_matches(bundle: Path, feeds: dict[str, np.ndarray],
                        want: dict[str, np.ndarray], quantised: bool) -> bool:
    """FMA_RULE: the bundle built again with fused multiply-add (AOTC_HOST_FMA=1) matches
    onnxruntime. Only on a CPU with FMA, and only when the unfused result has a NaN or an
    infinity the fused one does not: the difference is then contraction alone (a product that
    overflows float32 and meets an infinity), not a wrong kernel."""
    from aotc.targets.host import Runner

    if not _cpu_has_fma():
        return False
    old = os.environ.get("AOTC_HOST_FMA")
    os.environ["AOTC_HOST_FMA"] = "1"
    try:
        fused = Runner(bundle).run(feeds)
    except Exception:  # noqa: BLE001 - no verdict from this build
        return False
    finally:
        if old is None:
            del os.environ["AOTC_HOST_FMA"]
        else:
            os.environ["AOTC_HOST_FMA"] = old
    return compare(fused, want, quantised) == ""


def _cpu_has_fma() -> bool:
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        return platform.machine() in ("aarch64", "arm64")
    try:
        return " fma " in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def second_opinion(model_path: Path, feeds: dict[str, np.ndarray], got: dict[str, np.ndarray],
                   want: dict[str, np.ndarray], quantised: bool) -> tuple[str, bool]:
    """Which side the ONNX reference evaluator takes in a difference, and whether it is
    onnxruntime's (see NONFINITE_RULE)."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            ref = ReferenceEvaluator(onnx.load(str(model_path)))
            outs = ref.run(None, feeds)
        ref_out = {k: np.asarray(v) for k, v in zip(ref.output_names, outs)}
    except Exception as e:  # noqa: BLE001
        return f"the ONNX reference evaluator fails ({type(e).__name__})", False
    aotc_ok = compare(got, ref_out, quantised) == ""
    ort_ok = compare(want, ref_out, quantised) == ""
    side = {(True, True): "both", (True, False): "aotc", (False, True): "onnxruntime",
            (False, False): "neither"}[aotc_ok, ort_ok]
    ort_fault = aotc_ok and not ort_ok and all(
        _differ_only_where_nonfinite(got[k], want[k], ref_out[k]) for k in want)
    return f"the ONNX reference evaluator agrees with {side}", ort_fault


def _differ_only_where_nonfinite(got: np.ndarray, want: np.ndarray, ref: np.ndarray) -> bool:
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if got.dtype.kind != "f" or ref.shape != got.shape:
        return bool(np.array_equal(got, want))
    same = np.isclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)
    return bool(np.all(same | ~np.isfinite(ref.astype(got.dtype))))


def ort_rejected(invalid: str, why: str) -> dict[str, Any]:
    """aotc built a bundle that onnxruntime refuses: fine if the model is valid per the ONNX
    checker (onnxruntime lacks a kernel, say), otherwise aotc accepted an invalid model."""
    if invalid:
        return {"outcome": "accepted-invalid", "message": _line(f"checker: {invalid}; "
                                                                f"onnxruntime: {why}")}
    return {"outcome": "ok-ort-rejects", "message": why}


def _nodes(model: Path) -> list[Any]:
    import onnx

    try:
        return list(onnx.load(str(model), load_external_data=False).graph.node)
    except Exception:  # noqa: BLE001
        return []


def worker() -> None:
    """Serve cases: one JSON request per stdin line, progress and result lines on a private
    copy of stdout (fd 1 itself goes to stderr, so nothing else can corrupt the protocol)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = MEMORY_LIMIT if hard == resource.RLIM_INFINITY else min(MEMORY_LIMIT, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))

    def emit(msg: dict[str, Any]) -> None:
        proto.write(json.dumps(msg) + "\n")
        proto.flush()

    import onnxruntime  # noqa: F401

    import aotc.cli  # noqa: F401 - import once, before the first case's clock starts

    emit({"ready": True})
    for line in sys.stdin:
        req = json.loads(line)
        try:
            case_dir = Path(req["dir"])
            if (case_dir / "model.tflite").exists():
                from tflite_oracle import run_case as run_tflite_case

                res = run_tflite_case(case_dir, int(req["input_seed"]), emit)
            else:
                res = run_case(case_dir, int(req["input_seed"]), emit)
            # the case's temporary directory out of the message: same text in every run
            res["message"] = res["message"].replace(req["dir"], "<case>")
        except Exception as e:  # noqa: BLE001 - the oracle itself failed: report, keep serving
            res = {"outcome": "fuzzer-error", "message": _line(f"{type(e).__name__}: {e}")}
        emit({"done": True, **res})


if __name__ == "__main__":
    worker()
