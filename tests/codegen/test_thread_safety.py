"""Thread safety: a bundle's only shared data is const (no writable .data/.bss symbol in its
objects), and several instances with separate arenas run concurrently from host threads with
TFLM's exact outputs, under ThreadSanitizer (a data race fails the run)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import aotc

REPO = Path(__file__).resolve().parents[2]
MLPERF = REPO.parent / "shared" / "models" / "mlperf_tiny"
STEM = "kws_ref_model_int8_qdq"
THREADS, ROUNDS = 4, 20

DRIVER = """\
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "kws.h"

#define THREADS {threads}
#define ROUNDS {rounds}
#define VECTORS {vectors}
static const int8_t inputs[VECTORS][KWS_INPUT_0_SIZE] = {{ {inputs} }};
static const int8_t expected[VECTORS][KWS_OUTPUT_0_SIZE] = {{ {expected} }};
/* One arena per thread: the instances share nothing writable. */
static uint8_t arenas[THREADS][KWS_ARENA_SIZE] __attribute__((aligned(16)));
static int failures[THREADS];

static void *worker(void *arg)
{{
    int t = (int)(intptr_t)arg;
    int8_t out[KWS_OUTPUT_0_SIZE];
    for (int r = 0; r < ROUNDS; r++) {{
        int v = (r + t) % VECTORS; /* threads run different vectors at the same time */
        if (kws_run(inputs[v], out, arenas[t], sizeof arenas[t]) != 0 ||
            memcmp(out, expected[v], sizeof out) != 0) {{
            failures[t]++;
        }}
    }}
    return NULL;
}}

int main(void)
{{
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {{
        pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    }}
    int bad = 0;
    for (int t = 0; t < THREADS; t++) {{
        pthread_join(th[t], NULL);
        bad += failures[t];
    }}
    printf("%d threads x %d runs, %d mismatches\\n", THREADS, ROUNDS, bad);
    return bad != 0;
}}
"""


def _c_list(arr: np.ndarray) -> str:
    return ", ".join("{" + ", ".join(str(int(x)) for x in row.reshape(-1)) + "}" for row in arr)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kws")
    aotc.compile(str(MLPERF / f"{STEM}.onnx"), out, name="kws")
    return out


def test_bundle_objects_have_no_writable_data(bundle: Path, tmp_path: Path) -> None:
    """What two instances share is the weights and tables, all const (.rodata): no symbol of
    the bundle or its runtime is in .data or .bss. Checked on the MCU compiler (a PIE host
    build puts const tables of pointers in .data.rel.ro, read-only after relocation)."""
    for src in [*sorted(bundle.glob("*.c")), bundle / "runtime" / "aotc_runtime.c"]:
        obj = tmp_path / (src.stem + ".o")
        subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-std=c99", "-O2",
                        "-fno-common", "-I", str(bundle), "-I", str(bundle / "runtime"), "-c",
                        str(src), "-o", str(obj)], check=True)
        nm = subprocess.run(["arm-none-eabi-nm", str(obj)], capture_output=True, text=True,
                            check=True).stdout
        writable = [ln for ln in nm.splitlines() if ln.split()[-2:-1] in (["D"], ["d"], ["B"],
                                                                          ["b"], ["C"])]
        assert not writable, f"{src.name}: writable symbols {writable}"


def test_instances_run_concurrently_under_thread_sanitizer(bundle: Path, tmp_path: Path) -> None:
    if shutil.which("gcc") is None:
        pytest.fail("gcc is needed")
    vec = np.load(MLPERF / "vectors" / f"{STEM}.npz")
    inputs, expected = vec["input"], vec["output_tflm"]
    (tmp_path / "driver.c").write_text(DRIVER.format(
        threads=THREADS, rounds=ROUNDS, vectors=len(inputs), inputs=_c_list(inputs),
        expected=_c_list(expected)))
    exe = tmp_path / "driver"
    srcs = [tmp_path / "driver.c", *sorted(bundle.glob("*.c")),
            bundle / "runtime" / "aotc_runtime.c"]
    subprocess.run(["gcc", "-std=gnu99", "-O1", "-g", "-fsanitize=thread", "-pthread", "-I",
                    str(bundle), "-I", str(bundle / "runtime"), *map(str, srcs), "-o", str(exe),
                    "-lm"], check=True)
    env = {**os.environ, "TSAN_OPTIONS": "halt_on_error=1 exitcode=66"}
    env.pop("LD_PRELOAD", None)
    res = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr[:3000]
    assert f"{THREADS} threads x {ROUNDS} runs, 0 mismatches" in res.stdout
    assert "ThreadSanitizer" not in res.stderr
