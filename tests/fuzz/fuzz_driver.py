"""Runs fuzz cases through oracle worker processes (fuzz_oracle.py --worker), one case at a
time per worker, with a time limit per case; restarts a worker that crashes or hangs; writes a
reproducer for every finding and prints a table of outcomes per mutation class.

Results are keyed by case index, so a run is deterministic for a given seed and case count
whatever ``jobs`` is (the cases are independent; each worker starts fresh after a crash).
"""

from __future__ import annotations

import json
import os
import queue
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fuzz_mutate import Case, make_case
from fuzz_oracle import FINDINGS, OUTCOMES, ort_rejected

FORMATS = ("onnx", "tflite")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@dataclass
class Result:
    seed: int
    index: int
    tag: str
    seed_model: str
    mutations: list[str]
    outcome: str
    message: str
    stage: str
    seconds: float

    @property
    def input_seed(self) -> int:
        return input_seed(self.seed, self.index)

    @property
    def finding(self) -> bool:
        return OUTCOMES[self.outcome]


def input_seed(seed: int, index: int) -> int:
    """The seed of the random inputs of case ``index`` of the run ``seed``."""
    return seed * 1_000_003 + index


def make_any_case(seed: int, index: int, fmt: str = "onnx") -> tuple[str, str, list[str], Any]:
    """Case ``index`` of the run ``seed`` of format ``fmt`` (onnx: fuzz_mutate.py; tflite:
    tflite_mutate.py)."""
    if fmt == "tflite":
        from tflite_mutate import make_case as make_tflite_case

        return make_tflite_case(seed, index)
    return make_case(seed, index)


def write_case(case: Case, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / getattr(case, "file_name", "model.onnx")).write_bytes(case.serialise())
    for name, data in case.files.items():
        (directory / name).write_bytes(data)


LIVE: set[Worker] = set()  # workers of this process, killed if a run is interrupted


class Worker:
    """One oracle child process (its own process group, so a hung cc dies with it)."""

    def __init__(self, log: Path) -> None:
        env = dict(os.environ)
        env.pop("AOTC_DEBUG", None)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT), str(HERE), *filter(None, [env.get("PYTHONPATH")])])
        env.setdefault("AOTC_CACHE_DIR", str(ROOT / ".aotc-cache"))
        env["OMP_NUM_THREADS"] = "1"
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "fuzz_oracle.py")], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, env=env, start_new_session=True)
        LIVE.add(self)
        self.buf = b""
        self.sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        first = self.read_line(time.monotonic() + 120)
        if not isinstance(first, dict) or not first.get("ready"):
            raise RuntimeError(f"fuzz worker did not start ({first!r}); see {log}")

    def read_line(self, deadline: float) -> dict[str, Any] | str:
        """The next JSON message, or 'eof' (the worker died) or 'timeout'."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sel.select(left):
                return "timeout"
            chunk = os.read(fd, 65536)
            if not chunk:
                return "eof"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def send(self, req: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()

    def kill(self) -> None:
        LIVE.discard(self)
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        self.sel.close()
        self.log.close()


def _died(stage: str, invalid: str, what: str, sig: str) -> tuple[str, str]:
    """Outcome of a worker that died (crash) or ran out of time (hang) in ``stage``."""
    if stage in ("checker", "ort"):  # onnxruntime's or onnx's problem, not aotc's
        res = ort_rejected(invalid or ("checker " + what if stage == "checker" else ""),
                           f"onnxruntime {what} ({sig})")
        return res["outcome"], res["message"]
    if stage == "reference":  # the outputs already differed from onnxruntime's
        return "wrong-result", f"outputs differ from onnxruntime (the ONNX reference evaluator " \
                               f"{what}, {sig})"
    if stage == "fma":
        return "wrong-result", f"outputs differ from onnxruntime (the fused multiply-add " \
                               f"build {what}, {sig})"
    where = {"compile": "in the compiler", "build": "building or loading the bundle",
             "run": "in the generated C"}.get(stage, stage)
    return ("hang" if what == "timed out" else "crash"), f"{what} {where} ({sig})"


def run_one(worker: Worker | None, index: int, seed: int, work: Path, timeout: float,
            log: Path, fmt: str = "onnx") -> tuple[Result, Worker | None, Path]:
    """Case ``index`` of the run ``seed``; returns the result, the worker (None when it had to
    be killed) and the case directory."""
    tag, seed_name, muts, case = make_any_case(seed, index, fmt)
    case_dir = work / f"case-{index:06d}"
    write_case(case, case_dir)
    outcome, message, stage, secs, worker = execute(worker, case_dir, input_seed(seed, index),
                                                    timeout, log)
    res = Result(seed, index, tag, seed_name, muts, outcome, message, stage, secs)
    return res, worker, case_dir


def execute(worker: Worker | None, case_dir: Path, input_seed: int, timeout: float, log: Path
            ) -> tuple[str, str, str, float, Worker | None]:
    """Runs the case in ``case_dir`` through the oracle: (outcome, message, last stage,
    seconds, worker or None)."""
    if worker is None or worker.proc.poll() is not None:
        worker = Worker(log)
    start = time.monotonic()
    worker.send({"dir": str(case_dir), "input_seed": input_seed})
    stage, invalid = "start", ""
    while True:
        msg = worker.read_line(start + timeout)
        if isinstance(msg, dict) and "stage" in msg:
            stage = msg["stage"]
            invalid = msg.get("invalid", invalid)
            continue
        if isinstance(msg, dict):
            outcome, message = msg["outcome"], msg["message"]
            break
        if msg == "timeout":
            worker.kill()
            outcome, message = _died(stage, invalid, "timed out", f"{timeout:g} s")
        else:
            rc = worker.proc.wait()
            sig = (signal.Signals(-rc).name if rc < 0 and -rc in signal.Signals._value2member_map_
                   else f"exit {rc}")
            worker.kill()
            outcome, message = _died(stage, invalid, "crashed", sig)
        worker = None
        break
    return outcome, message, stage, round(time.monotonic() - start, 2), worker


def save_reproducer(res: Result, case_dir: Path, out: Path) -> Path:
    dest = out / "findings" / res.outcome / f"case-{res.index:06d}-{res.tag}"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for f in case_dir.iterdir():
        if f.is_file():
            shutil.copy2(f, dest / f.name)
    (dest / "case.json").write_text(json.dumps({**asdict(res), "input_seed": res.input_seed},
                                                indent=1, ensure_ascii=True) + "\n")
    model = "model.tflite" if (case_dir / "model.tflite").exists() else "model.onnx"
    line = (f"{res.outcome}: {res.message} | seed model {res.seed_model}; "
            f"{'; '.join(res.mutations)} | reproduce: python -m aotc verify {model}\n")
    (dest / "README.txt").write_text(line.encode("utf-8", "backslashreplace").decode())
    return dest


def run(seed: int, cases: int, jobs: int, out: Path, timeout: float = 60.0, start: int = 0,
        progress: bool = True, fmt: str = "onnx") -> list[Result]:
    """Runs cases ``start .. start+cases-1`` of the run ``seed``; writes ``out/results.jsonl``,
    ``out/table.txt`` and ``out/findings/<kind>/case-N-<class>/`` (model + README.txt)."""
    out.mkdir(parents=True, exist_ok=True)
    if (out / "findings").exists():
        shutil.rmtree(out / "findings")
    todo: queue.Queue[int] = queue.Queue()
    for i in range(start, start + cases):
        todo.put(i)
    results: dict[int, Result] = {}
    lock = threading.Lock()
    errors: list[BaseException] = []
    t0 = time.monotonic()

    def job(k: int) -> None:
        worker: Worker | None = None
        log = out / f"worker-{k}.log"
        try:
            with tempfile.TemporaryDirectory(prefix="aotc_fuzz_") as tmp:
                while True:
                    try:
                        i = todo.get_nowait()
                    except queue.Empty:
                        break
                    res, worker, case_dir = run_one(worker, i, seed, Path(tmp), timeout, log,
                                                        fmt)
                    if res.finding:
                        save_reproducer(res, case_dir, out)
                    shutil.rmtree(case_dir, ignore_errors=True)
                    with lock:
                        results[i] = res
                        if progress and (len(results) % 50 == 0 or res.finding):
                            mark = f"  {res.outcome}: {res.message[:90]}" if res.finding else ""
                            print(f"[{len(results)}/{cases} {time.monotonic() - t0:.0f}s] "
                                  f"case {i} {res.tag}{mark}", file=sys.stderr, flush=True)
        except BaseException as e:  # noqa: BLE001 - surfaced after join
            errors.append(e)
        finally:
            if worker is not None:
                worker.kill()

    threads = [threading.Thread(target=job, args=(k,), daemon=True)
               for k in range(max(1, jobs))]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    finally:  # interrupted: no new cases; the workers we started end with their process group
        while not todo.empty():
            todo.get_nowait()
        for w in list(LIVE):
            w.kill()
    if errors:
        raise errors[0]
    ordered = [results[i] for i in sorted(results)]
    with open(out / "results.jsonl", "w") as f:
        for r in ordered:
            f.write(json.dumps(asdict(r), ensure_ascii=True) + "\n")
    table = format_table(ordered, TFLITE_COLUMNS if fmt == "tflite" else COLUMNS)
    (out / "table.txt").write_text(table + "\n")
    return ordered


COLUMNS = ["user-error", "ok-verified", "ok-ort-rejects", "ok-ort-nonfinite", "ok-fp-contract",
           "ok-ref-agrees", "ok-unrun", *FINDINGS]
SHORT = {"user-error": "user-err", "ok-verified": "ok-verif", "ok-ort-rejects": "ok-ortrej",
         "ok-unrun": "ok-unrun", "ok-ort-nonfinite": "ok-ortnan", "ok-fp-contract": "ok-fma",
         "ok-ref-agrees": "ok-ref", "ok-tflm": "ok-tflm", "ok-litert": "ok-litert",
         "traceback": "traceback",
         "multi-line-error": "multiline",
         "crash": "crash", "hang": "hang", "build-failure": "build", "wrong-result": "wrong",
         "accepted-invalid": "acc-inval", "fuzzer-error": "fuzz-err"}


# The .tflite oracle's outcomes (tflite_oracle.py): no onnxruntime columns.
TFLITE_COLUMNS = ["user-error", "ok-tflm", "ok-litert", "ok-unrun", *FINDINGS]


def format_table(results: list[Result], columns: list[str] | None = None) -> str:
    columns = columns or COLUMNS
    by_tag: dict[str, Counter[str]] = {}
    for r in results:
        by_tag.setdefault(r.tag, Counter())[r.outcome] += 1
    total: Counter[str] = Counter(r.outcome for r in results)
    head = ["class", "cases", *(SHORT[c] for c in columns)]
    rows = [[t, str(sum(c.values())), *(str(c[k]) for k in columns)]
            for t, c in sorted(by_tag.items())]
    rows.append(["total", str(len(results)), *(str(total[k]) for k in columns)])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(x.rjust(w) if i else x.ljust(w) for i, (x, w) in
                       enumerate(zip(r, widths))) for r in [head, *rows]]
    n_find = sum(total[k] for k in FINDINGS)
    lines.append(f"findings: {n_find} of {len(results)} cases "
                 f"({100 * n_find / max(len(results), 1):.2f}%)")
    return "\n".join(lines)


def replay(root: Path, timeout: float = 60.0) -> int:
    """Runs each case directory under ``root`` (reproducers) through the oracle; prints one
    line per case; returns 1 if any is still a finding."""
    worker: Worker | None = None
    still = 0
    with tempfile.TemporaryDirectory(prefix="aotc_fuzz_replay_") as tmp:
        for model in sorted([*root.rglob("model.onnx"), *root.rglob("model.tflite")]):
            case_dir = Path(tmp) / model.parent.name
            shutil.copytree(model.parent, case_dir)
            shutil.rmtree(case_dir / "bundle", ignore_errors=True)
            meta = model.parent / "case.json"
            seed = json.loads(meta.read_text())["input_seed"] if meta.exists() else 0
            outcome, message, _, secs, worker = execute(worker, case_dir, seed, timeout,
                                                        Path(tmp) / "worker.log")
            still += OUTCOMES[outcome]
            print(f"{model.parent}: {outcome} ({secs:.1f} s) {message}", flush=True)
            shutil.rmtree(case_dir, ignore_errors=True)
    if worker is not None:
        worker.kill()
    return 1 if still else 0
