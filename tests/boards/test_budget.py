"""Budgets: --max-ram / --max-flash / --budget-board fail the compile with one line before
anything is written, and the RAM and flash estimates are within 5% of the linked ELF on
cortex-m4f (arm-none-eabi size of the firmware aotc builds), a model outside the calibration
set included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import aotc
from aotc.errors import AotcError
from aotc.targets.budget import estimate, parse_bytes
from aotc.targets.runner import BoardRunner

REPO = Path(__file__).resolve().parents[2]
MLPERF = REPO.parent / "shared" / "models" / "mlperf_tiny"
AD = MLPERF / "ad01_int8.tflite"


def _aotc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AOTC_DEBUG"}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "aotc", *args, "-q"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_parse_bytes() -> None:
    assert parse_bytes("65536") == 65536
    assert parse_bytes("64K") == parse_bytes("64k") == 65536
    assert parse_bytes("2M") == 2 * 1024 * 1024
    with pytest.raises(AotcError, match="--max-ram expects BYTES"):
        parse_bytes("lots", "--max-ram")


def test_over_budget_fails_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    # The AD model's weights alone are 270,880 B (int8).
    res = _aotc("compile", str(AD), "-o", "out", "--max-flash", "256K", cwd=tmp_path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("aotc: error: over budget"), lines[0]
    assert "flash" in lines[0] and "exceeds 262,144 B by " in lines[0]
    assert "RAM" not in lines[0]  # the RAM was not limited
    assert not (tmp_path / "out").exists()
    # a board's part: the nRF51822 of cortex-m0plus has 16 KB of RAM and 256 KB of flash
    res = _aotc("compile", str(AD), "-o", "out", "--budget-board", "cortex-m0plus",
                cwd=tmp_path)
    assert res.returncode == 2 and "board cortex-m0plus's part" in res.stderr
    assert "exceeds 262,144 B by" in res.stderr
    res = _aotc("compile", str(AD), "-o", "out", "--max-ram", "2K", cwd=tmp_path)
    assert res.returncode == 2 and "RAM" in res.stderr and "exceeds 2,048 B by" in res.stderr
    res = _aotc("compile", str(AD), "-o", "out", "--max-ram", "64K", "--max-flash", "1M",
                cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out" / "bundle.json").is_file()


def test_inspect_prints_the_estimates(tmp_path: Path) -> None:
    # cortex-m33: the weights of the matmuls of most MACs per extra byte widened to int16
    # (gemm.dsp_wide) while the estimate stays within 75% of the part's 512 KB, the others
    # packed int8 (371,232 B; all packed, as the model stores them: 270,880 B; all widened,
    # as on cortex-m4f and cortex-m7: 535,072 B).
    res = _aotc("inspect", str(AD), "--target", "cortex-m33", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "RAM estimate" in res.stdout and "flash estimate" in res.stdout
    assert "weights 371,232" in res.stdout


@pytest.mark.parametrize("model", ["kws_ref_model.tflite", "kws_ref_model_float.onnx",
                                   "str_ww_ref_model.tflite"])
def test_estimates_within_5_percent_of_the_elf(model: str, tmp_path: Path) -> None:
    """KWS int8 and float are in the calibration set; the streaming wakeword model is not."""
    bundle = aotc.compile(str(MLPERF / model), tmp_path, name="m", target="cortex-m4f")
    est = estimate(bundle.compilation, "cortex-m4f")
    runner = BoardRunner(tmp_path, "cortex-m4f", check_fit=False)
    sizes = runner.sizes()
    ram = sizes["ram"] + runner.board.stack_bytes + runner.board.heap_bytes  # as fits_check
    assert abs(est.flash / sizes["flash"] - 1) < 0.05, (est.to_json(), sizes)
    assert abs(est.ram / ram - 1) < 0.05, (est.to_json(), sizes)
    assert est.weights == bundle.compilation.weights_bytes
