"""Seeded structure-aware fuzzer: mutates the seed models of tests/fuzz/fuzz_seeds.py, runs
every case through the real CLI, the host build (-Werror) and onnxruntime, and prints a table
of outcomes per mutation class. Findings get a reproducer under OUT/findings/<kind>/.

    python scripts/fuzz.py --cases 5000 --seed 1 --jobs 2          # the full run
    python scripts/fuzz.py --cases 200 --seed 7 --out /tmp/fz      # a quick one
    python scripts/fuzz.py --replay out/fuzz/findings               # re-run reproducers
    python scripts/fuzz.py --format tflite --cases 5000 --seed 1    # .tflite models vs TFLM

Exit status 1 when there are findings, 0 when there are none. The oracle's rules are in
tests/fuzz/fuzz_oracle.py; the mutation classes in tests/fuzz/fuzz_mutate.py. With --format
tflite the seeds are .tflite models (tests/fuzz/tflite_seeds.py), mutated on TensorFlow Lite's
object tree (tests/fuzz/tflite_mutate.py) and checked against TFLM, LiteRT where TFLM refuses
the model (tests/fuzz/tflite_oracle.py).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
sys.path.insert(0, str(ROOT))

from fuzz_driver import replay, run  # noqa: E402


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # unwinds run(), which kills the workers it started


def main() -> int:
    signal.signal(signal.SIGTERM, _terminate)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=500, help="number of cases (default 500)")
    p.add_argument("--seed", type=int, default=1, help="run seed (default 1)")
    p.add_argument("--start", type=int, default=0, help="index of the first case (default 0)")
    p.add_argument("--jobs", type=int, default=1, help="parallel worker processes (default 1)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds per case for compile + build + run + onnxruntime (default 60)")
    p.add_argument("--out", type=Path, default=Path("out/fuzz"),
                   help="output directory: table.txt, results.jsonl, findings/ (default out/fuzz)")
    p.add_argument("--format", choices=("onnx", "tflite"), default="onnx",
                   help="seed models and mutations: onnx (default) or tflite")
    p.add_argument("--replay", type=Path, default=None, metavar="DIR",
                   help="run every case directory (holding model.onnx or model.tflite) under DIR "
                        "through the oracle and print its outcome, e.g. to check a fix of a "
                        "finding")
    args = p.parse_args()
    if args.replay is not None:
        return replay(args.replay, args.timeout)
    t0 = time.monotonic()
    results = run(args.seed, args.cases, args.jobs, args.out.resolve(), args.timeout, args.start,
                  fmt=args.format)
    print((args.out / "table.txt").read_text(), end="")
    print(f"{len(results)} cases in {time.monotonic() - t0:.0f} s with {args.jobs} job(s); "
          f"reproducers in {args.out / 'findings'}")
    return 1 if any(r.finding for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
