"""Fits check through aotc's API and CLI (a big Gemm on the 16 KB micro:bit), the size of the C
runtime on cortex-m4f, and `aotc bench`'s report (instructions, sizes, stack, recursion)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from opcheck import make_model, rand

import aotc
from aotc.errors import AotcError
from aotc.targets import fastbuild
from aotc.targets.runner import DoesNotFit

RUNTIME_TEXT_LIMIT = 1024


def big_gemm(path: Path) -> Path:
    """y[16,256] = a[16,512] @ W[512,256] + b: 512 KB of weights (flash: 256 KB) and 32 KB of
    input plus 16 KB of output buffer (RAM: 16 KB) on the nRF51822."""
    node = helper.make_node("Gemm", ["a", "w", "b"], ["y"], name="big_gemm")
    model = make_model([node], {"a": rand(16, 512)}, {"y": (np.float32, [16, 256])},
                       {"w": rand(512, 256, seed=1), "b": rand(256, seed=2)})
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def big_model(tmp_path_factory) -> Path:
    return big_gemm(tmp_path_factory.mktemp("gemm") / "big_gemm.onnx")


def _check_message(message: str) -> None:
    assert "\n" not in message
    assert "nRF51822" in message and "cortex-m0plus" in message
    ram = re.search(r"RAM needs (\d+) bytes .* 16384 available: exceeded by (\d+) bytes", message)
    flash = re.search(r"flash needs (\d+) bytes .* 262144 available: exceeded by (\d+) bytes",
                      message)
    assert ram and int(ram.group(2)) == int(ram.group(1)) - 16384 > 32768 - 16384, message
    assert flash and int(flash.group(2)) == int(flash.group(1)) - 262144 > 0, message
    # What dominates: the weight matrix in flash, the input buffer in RAM.
    assert re.search(r"largest in flash: \w+ 524288 B", message), message
    assert "largest in RAM: input buffer 'a' 32768 B, output buffer 'y' 16384 B" in message


def test_bundle_load_fails_with_fits_message(big_model: Path, tmp_path: Path) -> None:
    bundle = aotc.compile(big_model, tmp_path / "b", name="m")
    with pytest.raises(DoesNotFit) as info:
        bundle.load(board="cortex-m0plus")
    assert isinstance(info.value, AotcError)
    _check_message(str(info.value))
    # The same bundle fits the STM32L4R5 (2 MB / 640 KB) and runs there like on the host.
    feeds = {"a": rand(16, 512, seed=5)}
    got = bundle.load(board="cortex-m4f").run(feeds)["y"]
    np.testing.assert_array_equal(got, bundle.load().run(feeds)["y"])


def test_cli_bench_fails_with_one_line(big_model: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "aotc", "bench", str(big_model), "--board", "cortex-m0plus",
         "-o", str(tmp_path / "out")], capture_output=True, text=True, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aotc: error: "), proc.stderr
    _check_message(lines[0])
    assert proc.stdout == ""


def test_fits_check_of_the_real_part_not_the_emulator(tmp_path: Path) -> None:
    """x[1,180000] -> Relu: 720 KB of input buffer links in QEMU's 4 MB but the STM32L4R5 has
    640 KB of RAM; bundle.load says so instead of running."""
    node = helper.make_node("Relu", ["x"], ["y"])
    model = make_model([node], {"x": rand(1, 180000)}, {"y": (np.float32, [1, 180000])})
    bundle = aotc.compile(model, tmp_path / "b", name="m")
    with pytest.raises(DoesNotFit, match=r"STM32L4R5.*RAM needs \d+ bytes.*exceeded by \d+ "
                                         r"bytes; largest in RAM: input buffer 'x' 720000 B"):
        bundle.load(board="cortex-m4f")


def test_runtime_text_on_cortex_m4f(capsys) -> None:
    """runtime_c compiled by the board's CMake recipe (-Os, the board's flags): .text <= 1 KB."""
    recipe = fastbuild.board_recipe("cortex-m4f")
    objects = [Path(o) for o in recipe.objects if Path(o).name.startswith("aotc_runtime")]
    assert objects, recipe.objects
    text = rodata = 0
    for obj in objects:
        out = subprocess.run(["arm-none-eabi-size", "-A", str(obj)], capture_output=True,
                             text=True, check=True).stdout
        for section, size in re.findall(r"^(\.\S+)\s+(\d+)", out, re.M):
            text += int(size) if section.startswith(".text") else 0
            rodata += int(size) if section.startswith(".rodata") else 0
    with capsys.disabled():
        print(f"\nruntime_c on cortex-m4f: .text {text} B, .rodata {rodata} B "
              f"(limit {RUNTIME_TEXT_LIMIT} B of .text)")
    assert 0 < text <= RUNTIME_TEXT_LIMIT


def test_cli_bench_report(tmp_path: Path) -> None:
    """Instructions per inference and per MAC, per-kernel table, flash/RAM, the deepest kernel
    frame (not the startup's fault reporter) and no recursion."""
    node = helper.make_node("Gemm", ["a", "w"], ["y"], name="fc")
    model = make_model([node], {"a": rand(4, 32)}, {"y": (np.float32, [4, 16])},
                       {"w": rand(32, 16, seed=1)})
    onnx.save(model, tmp_path / "fc.onnx")
    proc = subprocess.run(
        [sys.executable, "-m", "aotc", "bench", str(tmp_path / "fc.onnx"), "--board",
         "cortex-m4f", "-o", str(tmp_path / "out")], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    m = re.search(r"([\d,]+) instructions per inference \(([\d.]+) per MAC, 2,048 MACs\)", out)
    assert m, out
    assert 2048 <= int(m.group(1).replace(",", "")) < 2048 * 20
    assert re.search(r"flash [\d,]+ B \(text [\d,]+, rodata [\d,]+, data [\d,]+\); RAM", out)
    frame = re.search(r"deepest kernel frame (\d+) B \((\w+)\).*recursion: none", out)
    assert frame and frame.group(2).startswith("k0_"), out
    assert "fault" not in out.lower()
