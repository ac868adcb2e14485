"""Several models in one firmware: KWS and VWW (int8, cortex-m4f) linked into one image with
both bundles' runtime copies and one arena sized for the larger, run in QEMU one after the
other, each bit-exact with TFLM's golden outputs; and no global symbol defined twice."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import aotc
from aotc.targets import boards, fastbuild

REPO = Path(__file__).resolve().parents[2]
MLPERF = REPO.parent / "shared" / "models" / "mlperf_tiny"
MODELS = {"kws": "kws_ref_model_int8_qdq", "vww": "vww_96_int8_qdq"}
VECTORS = {"kws": 4, "vww": 2}
BOARD = "cortex-m4f"

MAIN = """\
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "kws.h"
#include "vww.h"

{arrays}
#define MAX(a, b) ((a) > (b) ? (a) : (b))
/* One arena for both: the models never run at the same time. */
static uint8_t arena[MAX(KWS_ARENA_SIZE, VWW_ARENA_SIZE)] __attribute__((aligned(16)));
typedef char align_ok[(KWS_ARENA_ALIGN <= 16 && VWW_ARENA_ALIGN <= 16) ? 1 : -1];

int main(void)
{{
    int bad = 0;
    int8_t kws_out[KWS_OUTPUT_0_SIZE];
    int8_t vww_out[VWW_OUTPUT_0_SIZE];
    for (int v = 0; v < {n_kws}; v++) {{
        bad += kws_run(kws_in[v], kws_out, arena, sizeof arena) != AOTC_OK;
        bad += memcmp(kws_out, kws_want[v], sizeof kws_out) != 0;
    }}
    for (int v = 0; v < {n_vww}; v++) {{
        bad += vww_run(vww_in[v], vww_out, arena, sizeof arena) != AOTC_OK;
        bad += memcmp(vww_out, vww_want[v], sizeof vww_out) != 0;
    }}
    printf("two models: %d mismatches (%s)\\n", bad, aotc_status_str(bad ? 99 : AOTC_OK));
    return bad;
}}
"""


def _array(name: str, arr: np.ndarray) -> str:
    rows = ",\n".join("    {" + ", ".join(map(str, row.reshape(-1).tolist())) + "}" for row in arr)
    return f"static const int8_t {name}[{arr.shape[0]}][{arr[0].size}] = {{\n{rows}\n}};"


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for name, stem in MODELS.items():
        d = tmp_path_factory.mktemp(name)
        aotc.compile(str(MLPERF / f"{stem}.onnx"), d, name=name, target=BOARD)
        out[name] = d
    return out


def _link(bundles: dict[str, Path], main: Path, elf: Path) -> None:
    """The board's compile and link flags, startup objects and libraries (as aotc's firmware
    builds use), both bundles' sources and both runtime/ copies."""
    recipe = fastbuild.board_recipe(BOARD)
    sources = [main]
    for d in bundles.values():
        sources += [*sorted(d.glob("*.c")), d / "runtime" / "aotc_runtime.c"]
    includes = [f"-I{d}" for d in bundles.values()] + [f"-I{next(iter(bundles.values()))}/runtime"]
    link = [f.replace(fastbuild._MAP, str(elf.with_suffix(".map"))) for f in recipe.link_flags]
    res = subprocess.run([recipe.compiler, *recipe.strict_flags, *includes, *map(str, sources),
                          *recipe.objects, *link, "-o", str(elf), *recipe.libraries],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[:3000]


def test_kws_and_vww_in_one_image_bit_exact_in_qemu(bundles: dict[str, Path],
                                                   tmp_path: Path) -> None:
    arrays = []
    for name, stem in MODELS.items():
        vec = np.load(MLPERF / "vectors" / f"{stem}.npz")
        arrays += [_array(f"{name}_in", vec["input"][:VECTORS[name]]),
                   _array(f"{name}_want", vec["output_tflm"][:VECTORS[name]])]
    main = tmp_path / "main.c"
    main.write_text(MAIN.format(arrays="\n".join(arrays), n_kws=VECTORS["kws"],
                                n_vww=VECTORS["vww"]))
    elf = tmp_path / "two.elf"
    _link(bundles, main, elf)
    board = boards.load_board(BOARD)
    res = subprocess.run([*board.qemu, "-nographic", "-monitor", "none", "-serial", "null",
                          "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, (res.returncode, res.stdout, res.stderr)
    assert "two models: 0 mismatches (ok)" in res.stdout
    # RAM: one arena, the larger of the two
    nm = subprocess.run([board.tool("nm"), "-S", str(elf)], capture_output=True, text=True,
                        check=True).stdout
    arena = int(re.search(r"^\w+ (\w+) [bB] arena$", nm, re.M).group(1), 16)
    metas = [aotc_meta(d) for d in bundles.values()]
    assert arena == max(m["arena_bytes"] for m in metas)


def aotc_meta(d: Path) -> dict:
    import json

    return json.loads((d / "bundle.json").read_text())


def test_no_global_symbol_is_defined_twice(bundles: dict[str, Path], tmp_path: Path) -> None:
    """Every external symbol of a bundle is prefixed with its name, but the runtime's, which
    is weak (two copies link)."""
    board = boards.load_board(BOARD)
    defined: dict[str, list[str]] = {}
    for name, d in bundles.items():
        for src in [*sorted(d.glob("*.c")), d / "runtime" / "aotc_runtime.c"]:
            obj = tmp_path / f"{name}_{src.stem}.o"
            subprocess.run([board.tool("gcc"), *board.cflags, "-std=c99", "-Os", f"-I{d}",
                            f"-I{d}/runtime", "-c", str(src), "-o", str(obj)], check=True)
            nm = subprocess.run([board.tool("nm"), "-g", "--defined-only", str(obj)],
                                capture_output=True, text=True, check=True).stdout
            for line in nm.splitlines():
                kind, sym = line.split()[-2:]
                defined.setdefault(sym, []).append(kind)
                if kind != "W":
                    assert sym.startswith(f"{name}_"), f"{src.name}: {sym} is not prefixed"
    assert defined["aotc_status_str"] == ["W", "W"]
    strong = {s: k for s, k in defined.items() if len([x for x in k if x != "W"]) > 1}
    assert not strong, strong
