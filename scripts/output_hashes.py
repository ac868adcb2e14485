"""Hash every file of the bundles aotc writes for the MLPerf Tiny models under a set of options,
to show that a change of the compiler's code (a refactor) leaves its output byte-identical.

    python scripts/output_hashes.py --record before.json     # before the change
    python scripts/output_hashes.py --check before.json      # after: lists what differs

Each case runs ``python -m aotc compile`` in a scratch folder holding links to the models, with
relative paths, so the command line the bundle records is the same on every run. A case that
fails records its one-line error instead of hashes (and must fail the same way after).
Needs ../shared/models/mlperf_tiny (or --models DIR) and, for --byoc cmsis-nn, CMSIS-NN
(../shared/third_party/cmsis-nn or $CMSIS_NN_PATH).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"

MODELS = [
    # the five int8 models, as .tflite and as ONNX QDQ
    "kws_ref_model.tflite", "vww_96_int8.tflite", "pretrainedResnet_quant.tflite",
    "ad01_int8.tflite", "str_ww_ref_model.tflite",
    "kws_ref_model_int8_qdq.onnx", "vww_96_int8_qdq.onnx", "pretrainedResnet_int8_qdq.onnx",
    "ad01_int8_qdq.onnx", "str_ww_ref_model_int8_qdq.onnx",
    # the four float models, as ONNX and as .tflite
    "kws_ref_model_float.onnx", "vww_96_float.onnx", "pretrainedResnet_float.onnx",
    "ad01_float.onnx",
    "kws_ref_model_float32_from_savedmodel.tflite", "vww_96_float.tflite",
    "pretrainedResnet.tflite", "ad01_fp32.tflite",
]

OPTIONS: dict[str, list[str]] = {
    "default": [],
    "host": ["--target", "host"],
    "m0plus": ["--target", "cortex-m0plus"],
    "m4f": ["--target", "cortex-m4f"],
    "m55": ["--target", "cortex-m55"],
    "cmsis-nn": ["--target", "cortex-m4f", "--byoc", "cmsis-nn"],
    "inplace-conv": ["--inplace-conv"],
    "patches3": ["--patches", "3"],
    "io-in-arena": ["--io-in-arena"],
}


def _case(models: Path, work: Path, model: str, opt: str) -> tuple[str, dict[str, str]]:
    key = f"{model} {opt}"
    out = f"out/{model.replace('.', '_')}-{opt}"
    cmd = [sys.executable, "-m", "aotc", "compile", model, "-o", out, "--name", "m", "-q",
           *OPTIONS[opt]]
    # This checkout's aotc, whatever is installed: the check compares two trees' code.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    r = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        return key, {"error": f"rc {r.returncode}: {lines[-1] if lines else ''}"}
    hashes = {}
    for f in sorted((work / out).rglob("*")):
        if f.is_file():
            hashes[str(f.relative_to(work / out))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return key, hashes


def run(models: Path, jobs: int, only: list[str]) -> dict[str, dict[str, str]]:
    env_cmsis = os.environ.get("CMSIS_NN_PATH") or str(SHARED / "third_party" / "cmsis-nn")
    os.environ["CMSIS_NN_PATH"] = env_cmsis
    with tempfile.TemporaryDirectory(prefix="aotc-hashes-") as tmp:
        work = Path(tmp)
        for m in MODELS:
            (work / m).symlink_to(models / m)
        cases = [(m, o) for m in MODELS for o in OPTIONS
                 if not only or any(s in f"{m} {o}" for s in only)]
        with ThreadPoolExecutor(jobs) as ex:
            results = dict(ex.map(lambda c: _case(models, work, *c), cases))
    return dict(sorted(results.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--record", metavar="FILE", help="write the hashes to FILE")
    g.add_argument("--check", metavar="FILE", help="compare with the hashes in FILE")
    ap.add_argument("--models", type=Path, default=SHARED / "models" / "mlperf_tiny")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--only", action="append", default=[],
                    help="only the cases whose 'model option' contains this (repeatable)")
    args = ap.parse_args()
    results = run(args.models.resolve(), args.jobs, args.only)
    if args.record:
        Path(args.record).write_text(json.dumps(results, indent=1) + "\n")
        errors = sum("error" in h for h in results.values())
        print(f"recorded {len(results)} cases ({errors} refused) in {args.record}")
        return 0
    before = json.loads(Path(args.check).read_text())
    diff = 0
    for key, hashes in results.items():
        if key not in before:
            print(f"{key}: not recorded")
            continue
        old = before[key]
        if old == hashes:
            continue
        diff += 1
        files = sorted(set(old) | set(hashes))
        changed = [f for f in files if old.get(f) != hashes.get(f)]
        print(f"{key}: differs in {', '.join(changed)}")
        if "error" in old or "error" in hashes:
            print(f"    before: {old.get('error', 'compiled')}\n    after:  "
                  f"{hashes.get('error', 'compiled')}")
    print(f"{len(results) - diff} of {len(results)} cases byte-identical")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
