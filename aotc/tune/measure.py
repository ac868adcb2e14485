"""One measurement run of `aotc tune`: compile the model with a schedule per workload, build it
for the board, run it once per input vector and return each kernel's cost and the outputs.

A QEMU board counts instructions with the TCG plugin (each kernel's calls from entry to return,
callees included: BoardRunner.count_instructions' "inclusive"), exact and repeatable, or (job
"cost": "cycles") the timing model's estimated cycles of the same calls. The host
times each kernel with the bundle's profiling hooks (-DAOTC_ENABLE_PROFILING, CLOCK_MONOTONIC
around each kernel call): the median over ``repeats`` inferences. ``run_job`` takes and returns
plain data (picklable, for process pools and Ray) and never raises: a failure is "error".
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

# The profiling hooks for host timing: this harness's own state, never the bundle's.
PROFILER_C = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <time.h>
#include "aotc_runtime.h"

#define AOTC_TUNE_MAX 4096
static int64_t started[AOTC_TUNE_MAX];
static int64_t spent[AOTC_TUNE_MAX];
static const char *names[AOTC_TUNE_MAX];
static int32_t seen;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}

void aotc_profile_begin(int32_t index, const char *name) {
    if (index >= 0 && index < AOTC_TUNE_MAX) {
        names[index] = name;
        seen = index + 1 > seen ? index + 1 : seen;
        started[index] = now_ns();
    }
}

void aotc_profile_end(int32_t index) {
    if (index >= 0 && index < AOTC_TUNE_MAX) {
        spent[index] += now_ns() - started[index];
    }
}

void aotc_tune_reset(void) {
    int32_t i;
    for (i = 0; i < AOTC_TUNE_MAX; i++) {
        spent[i] = 0;
    }
}

int32_t aotc_tune_count(void) { return seen; }
int64_t aotc_tune_spent(int32_t index) { return spent[index]; }
const char *aotc_tune_name(int32_t index) { return names[index] ? names[index] : ""; }
"""

PROFILER_CDEF = """
void aotc_tune_reset(void);
int32_t aotc_tune_count(void);
int64_t aotc_tune_spent(int32_t index);
const char *aotc_tune_name(int32_t index);
"""


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """``job``: "model" (a path, or {"name", "bytes"}: the file, for a remote worker),
    "options" (CompileOptions fields), "schedules" ({workload: schedule}), "board", "inputs"
    (a list of {name: array}), "timeout" (seconds per QEMU run), "repeats" (host). Returns "kernels"
    ({kernel: {"workload", "schedule", "space"}}), "costs" ({kernel or "a=b" group: cost}),
    "inlined", "outputs" (one {name: array} per input) and "error" (one line, or None). With
    board None it only compiles: "kernels" and the graph inputs' specs ("inputs")."""
    try:
        return measure(job)
    except Exception as e:  # a candidate that fails to compile, build or run: reported
        return {"error": " ".join(f"{type(e).__name__}: {e}".split())[:500]}


def measure(job: dict[str, Any]) -> dict[str, Any]:
    """run_job, raising what goes wrong."""
    with tempfile.TemporaryDirectory(prefix="aotc_tune_") as tmp:
        return _measure(job, Path(tmp))


def _measure(job: dict[str, Any], tmp: Path) -> dict[str, Any]:
    from aotc.compiler import CompileOptions, compile_model, emit

    model = job["model"]
    if isinstance(model, dict):  # {"name", "bytes"}: the file, for a worker on another machine
        (tmp / model["name"]).write_bytes(model["bytes"])
        model = str(tmp / model["name"])
    opts = CompileOptions(**job["options"], schedules=job["schedules"])
    comp = compile_model(model, opts)
    kernels = {ls.kernel.name: {"workload": ls.workload, "schedule": ls.knobs,
                                "space": ls.space}
               for ls in comp.lowered if ls.workload and not ls.backend}
    if job["board"] is None:  # compile only: the kernels' spaces (aotc/tune/space.py)
        from aotc.codegen.render import render_context

        return {"kernels": kernels, "inputs": render_context(comp)["meta"]["inputs"],
                "error": None}
    bundle = tmp / "bundle"
    emit(comp, bundle)
    if job["board"] == "host":
        costs, inlined, outputs = _host(bundle, comp.options.name, job["inputs"],
                                        int(job.get("repeats", 15)))
    else:
        costs, inlined, outputs = _board(bundle, job["board"], job["inputs"], tmp,
                                         float(job.get("timeout", 60)),
                                         job.get("cost") == "cycles")
    return {"kernels": kernels, "costs": costs, "inlined": inlined, "outputs": outputs,
            "error": None}


def _board(bundle: Path, board: str, inputs: list[dict[str, np.ndarray]], tmp: Path,
           timeout: float, cycles: bool = False
           ) -> tuple[dict[str, float], list[str], list[dict[str, np.ndarray]]]:
    """Each kernel's instructions, or with cycles its estimated cycles (aotc.targets.cycles),
    from its calls' entry to return; the inlined kernels; the outputs of every input."""
    from aotc.targets import boards
    from aotc.targets.runner import BoardRunner

    runner = BoardRunner(bundle, board, build_dir=tmp / "fw")
    run_dir = tmp / "run"
    run_dir.mkdir()
    feeds = [runner._inputs(x) for x in inputs]
    counts = boards.count_instructions(runner.elf, runner.board, feeds[0], workdir=run_dir,
                                       timeout=timeout, cycles=cycles)
    kernel_costs = counts["cycles"]["kernels"] if cycles else counts["inclusive"]
    names = [s["name"] for s in runner.meta["outputs"]]
    outputs = [dict(zip(names, boards.read_outputs(run_dir, runner.meta)))]
    for x in feeds[1:]:
        outputs.append(dict(zip(names, boards.run_firmware(runner.elf, runner.board, x,
                                                           timeout=timeout))))
    return ({k: float(v) for k, v in kernel_costs.items()}, counts["inlined"], outputs)


def _host(bundle: Path, name: str, inputs: list[dict[str, np.ndarray]], repeats: int
          ) -> tuple[dict[str, float], list[str], list[dict[str, np.ndarray]]]:
    """Each kernel's median wall time (ns) over ``repeats`` inferences of the first input,
    after two warm-up inferences; the outputs of every input."""
    from aotc.paths import runtime_dir
    from aotc.targets import host
    from aotc.targets.host import Runner

    (bundle / "aotc_tune_profiler.c").write_text(PROFILER_C)
    lib = bundle / f"lib{name}_profiled.so"
    sources = sorted(bundle.glob("*.c")) + sorted(runtime_dir().glob("*.c"))
    cmd = [host._cc(), *host.WARN_FLAGS, *host.HOST_FLAGS, *host.extra_cflags(),
           "-DAOTC_ENABLE_PROFILING",
           "-I", str(bundle), "-I", str(runtime_dir()), *map(str, sources), "-o", str(lib), "-lm"]
    res = subprocess.run(cmd, capture_output=True, text=True, env=host._compiler_env())
    if res.returncode != 0:
        first = next((ln for ln in res.stderr.splitlines() if "error" in ln), res.stderr[:300])
        raise RuntimeError(f"the profiled host build failed: {first.strip()}")
    runner = Runner(bundle, library=lib, cdef=PROFILER_CDEF)
    outputs = [runner.run(x) for x in inputs]
    fn, args, _ = runner._prepare(inputs[0])
    samples: dict[str, list[int]] = {}
    for rep in range(repeats + 2):
        runner.lib.aotc_tune_reset()
        fn(*args)
        if rep < 2:
            continue
        for i in range(runner.lib.aotc_tune_count()):
            k = runner.ffi.string(runner.lib.aotc_tune_name(i)).decode()
            if k:
                samples.setdefault(k, []).append(int(runner.lib.aotc_tune_spent(i)))
    costs = {k: float(np.median(v)) for k, v in samples.items()}
    inlined = [k for k in runner.meta["kernels"] if k not in costs]
    return costs, inlined, outputs
