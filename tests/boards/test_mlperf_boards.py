"""The MLPerf Tiny float models on emulated boards: cortex-m4f, cortex-m7 (FPU) and rv32imc
(soft float) run the golden vectors and match onnxruntime's outputs (``output_ort``) within
max abs error 1e-4, and each firmware fits both the board's real part and its QEMU machine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import aotc
from aotc.targets import boards

FLOAT_MODELS = ["ad01_float", "kws_ref_model_float", "pretrainedResnet_float", "vww_96_float"]
BOARDS = ["cortex-m4f", "cortex-m7", "rv32imc"]
ATOL = 1e-4  # float32 through different libm expf (softmax) and soft-float vs FPU: ~1e-7 seen



@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Each model compiled once for all boards."""
    bundles: dict[str, aotc.Bundle] = {}

    def get(model_dir: Path, stem: str) -> aotc.Bundle:
        if stem not in bundles:
            out = tmp_path_factory.mktemp(stem)
            bundles[stem] = aotc.compile(model_dir / f"{stem}.onnx", out, name="m")
        return bundles[stem]

    return get


@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("stem", FLOAT_MODELS)
def test_float_model_on_board(stem: str, board: str, compiled, mlperf_dir: Path) -> None:
    runner = compiled(mlperf_dir, stem).load(board)  # raises DoesNotFit when the part is too small
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    in_name = runner.meta["inputs"][0]["name"]
    out_name = runner.meta["outputs"][0]["name"]
    for k in range(vec["input"].shape[0]):
        got = runner.run({in_name: vec["input"][k]})[out_name]
        want = vec["output_ort"][k].reshape(got.shape)
        err = float(np.max(np.abs(got - want)))
        assert err <= ATOL, f"{stem} on {board}, vector {k}: max abs error {err}"


@pytest.mark.parametrize("board", BOARDS)
def test_vww_fits_part_and_qemu_machine(board: str, compiled, mlperf_dir: Path, capsys) -> None:
    """VWW float: 221 KB arena + 110 KB input buffer in RAM, 843 KB of weights in flash."""
    bundle = compiled(mlperf_dir, "vww_96_float")
    runner = bundle.load(board)
    assert runner.fits() is None
    b = boards.load_board(board)
    sizes = runner.sizes()
    ram = sizes["ram"] + b.stack_bytes + b.heap_bytes
    regions = {r.name: r.length for r in b.memory}
    with capsys.disabled():
        print(f"\nvww_96_float on {board}: flash {sizes['flash']} B (part {b.flash_bytes}, "
              f"{b.machine} {regions['FLASH']}), RAM {ram} B incl. stack+heap (part "
              f"{b.ram_bytes}, {b.machine} {regions['RAM']}), arena {sizes['arena']} B")
    assert sizes["arena"] >= bundle.arena_bytes > 200_000
    assert sizes["rodata"] >= bundle.weights_bytes > 800_000
    assert sizes["flash"] <= min(b.flash_bytes, regions["FLASH"])
    assert ram <= min(b.ram_bytes, regions["RAM"])
