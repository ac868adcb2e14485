"""Board tests: build the hand-written fake bundle for every board, run it under QEMU (or
natively for host) and compare with numpy; count instructions, sizes, fits and failure decoding.

No test skips when a tool is missing: a missing cross compiler or QEMU is a failure that names
the Debian package (CI installs them). The fake bundle computes y = 2*x + 1, e = expf(x) and
m = -n; y and m must be bit-exact (-ffp-contract=off), e within 2 ulp (libm expf differs from
numpy's by up to 1 ulp: expf(1.25f) is 0x405f61c8 in newlib and picolibc, 0x405f61c7 in numpy).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from aotc import paths
from aotc.targets import boards

FIXTURES = Path(__file__).parent / "fixtures"
FAKE = FIXTURES / "fake_bundle"
# The real runtime once the core provides it, else the stand-in header of the fixtures.
RUNTIME = (
    paths.runtime_dir()
    if (paths.runtime_dir() / "aotc_runtime.h").is_file()
    else FIXTURES / "runtime_stub"
)
ALL_BOARDS = boards.list_boards()
EMULATED = [b for b in ALL_BOARDS if b != "host"]


def fake_inputs(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 3, size=(1, 8)).astype(np.float32)
    x[0, :3] = [0.0, -0.0, 1.25]
    n = np.array([1, -2, 127, -127], dtype=np.int8)
    return [x, n]


def check_outputs(outputs: list[np.ndarray], inputs: list[np.ndarray]) -> None:
    x, n = inputs
    y, e, m = outputs
    assert y.dtype == np.float32 and y.shape == (1, 8)
    np.testing.assert_array_equal(
        y.view(np.uint32), (x * np.float32(2) + np.float32(1)).view(np.uint32)
    )
    np.testing.assert_array_max_ulp(e, np.exp(x), maxulp=2)
    np.testing.assert_array_equal(m, -n)


def build(board: str, build_dir: Path, bundle: Path = FAKE, **kwargs) -> Path:
    return boards.build_firmware(bundle, board, build_dir, runtime_dir=RUNTIME, **kwargs)


@pytest.fixture(scope="module", params=ALL_BOARDS)
def built(request, tmp_path_factory) -> tuple[str, Path]:
    board = request.param
    build_dir = tmp_path_factory.mktemp(f"build-{board}")
    return board, build(board, build_dir)


# --- board definitions ---------------------------------------------------------------------


def _ld_number(text: str) -> int:
    text = text.strip()
    scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1], 1)
    return int(text.rstrip("KM"), 0) * scale


@pytest.mark.parametrize("name", ALL_BOARDS)
def test_board_files_agree(name: str) -> None:
    """board.toml, toolchain.cmake and link.ld describe the same board."""
    board = boards.load_board(name)
    assert board.name == name and board.part
    toolchain = board.toolchain_file.read_text()
    # Follow include("${CMAKE_CURRENT_LIST_DIR}/...") of shared toolchain parts.
    for inc in re.findall(r'include\("\$\{CMAKE_CURRENT_LIST_DIR\}/([^"]+)"\)', toolchain):
        toolchain += (board.toolchain_file.parent / inc).read_text()
    for flag in board.cflags:
        assert flag in toolchain, f"{flag} of board.toml missing in toolchain.cmake"
    assert "-ffp-contract=off" in toolchain
    if board.is_host:
        return
    assert board.flash_bytes > 0 and board.ram_bytes > 0
    assert "CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY" in toolchain
    assert "-Wl,--gc-sections" in toolchain and "-ffunction-sections" in toolchain
    ld = (board.directory / "link.ld").read_text()
    assert _ld_number(re.search(r"__stack_size\s*=\s*(\w+);", ld).group(1)) == board.stack_bytes
    assert _ld_number(re.search(r"__heap_size\s*=\s*(\w+);", ld).group(1)) == board.heap_bytes
    regions = {
        m.group(1): (_ld_number(m.group(2)), _ld_number(m.group(3)))
        for m in re.finditer(r"(\w+)\s*\(\w+\)\s*:\s*ORIGIN\s*=\s*(\w+),\s*LENGTH\s*=\s*(\w+)", ld)
    }
    assert regions == {r.name: (r.origin, r.length) for r in board.memory}
    assert any(board.directory.glob("startup.*"))


def test_list_boards() -> None:
    expected = {"cortex-m0plus", "rp2040", "cortex-m4f", "cortex-m7", "cortex-m33", "cortex-m55", "rv32imc"}
    assert expected | {"host"} <= set(ALL_BOARDS)
    with pytest.raises(ValueError, match="unknown board"):
        boards.load_board("no-such-board")


@pytest.mark.parametrize("name", ALL_BOARDS)
def test_toolchain_present(name: str) -> None:
    boards.ensure_toolchain(name)


def test_missing_tool_names_package() -> None:
    board = boards.load_board("cortex-m4f")
    broken = dataclasses.replace(
        board, requires={"aotc-no-such-gcc": "gcc-aotc-test", "specs:no-such.specs": "libaotc-x"}
    )
    with pytest.raises(RuntimeError, match=r"apt-get install .*gcc-aotc-test libaotc-x"):
        boards.ensure_toolchain(broken)


# --- build, run, measure -------------------------------------------------------------------


def test_run_matches_numpy(built) -> None:
    board, elf = built
    for seed in (0, 1):
        inputs = fake_inputs(seed)
        check_outputs(boards.run_firmware(elf, board, inputs), inputs)


def test_instruction_count_repeatable(built, tmp_path: Path) -> None:
    board, elf = built
    first = boards.count_instructions(elf, board, fake_inputs(), tmp_path / "a")
    second = boards.count_instructions(elf, board, fake_inputs(), tmp_path / "b")
    assert first == second
    assert first["total"] > 0 and first["inlined"] == []
    assert set(first["kernels"]) == {"k0_scale", "k1_bias", "k2_exp", "k3_neg"}
    assert all(n > 0 for n in first["kernels"].values()) and first["run"] > 0
    assert first["total"] > sum(first["kernels"].values()) + first["run"]


def test_elf_sizes_and_fit(built) -> None:
    board, elf = built
    sizes = boards.elf_sizes(elf, board)
    assert sizes["text"] > 500 and sizes["rodata"] > 0
    assert sizes["flash"] == sizes["text"] + sizes["rodata"] + sizes["data"]
    assert sizes["ram"] == sizes["data"] + sizes["bss"]
    assert sizes["arena"] == 32 and sizes["bss"] >= sizes["arena"]
    assert boards.fits_check(sizes, board) is None
    b = boards.load_board(board)
    if not b.is_host:  # the code lands in the emulator's FLASH region
        assert sizes["flash"] < next(r.length for r in b.memory if r.name == "FLASH")
        assert sizes["flash"] < 64 * 1024  # newlib-nano/picolibc stdio + expf, no printf


def test_stack_usage(built) -> None:
    _, elf = built
    usage = boards.stack_usage(elf.parent)
    assert "main" in usage["functions"] and "fake_run" in usage["functions"]
    assert 0 < usage["max_bytes"] < 1024
    assert usage["functions"][usage["function"]] == usage["max_bytes"]


def test_inputs_are_checked(built) -> None:
    board, elf = built
    x, n = fake_inputs()
    with pytest.raises(ValueError, match="expected float32"):
        boards.run_firmware(elf, board, [x.astype(np.float64), n])
    with pytest.raises(ValueError, match="takes 2 inputs"):
        boards.run_firmware(elf, board, [x])


# --- fitting -------------------------------------------------------------------------------


def _bundle_with_arena(tmp_path: Path, arena_bytes: int) -> Path:
    bundle = tmp_path / "big_bundle"
    shutil.copytree(FAKE, bundle)
    meta = json.loads((bundle / "bundle.json").read_text())
    meta["arena_bytes"] = arena_bytes
    (bundle / "bundle.json").write_text(json.dumps(meta))
    return bundle


def test_microbit_ram_overflow(tmp_path: Path) -> None:
    """A 20 KB arena cannot fit the micro:bit's 16 KB: the link fails with the overflow, and
    the fits check on the same firmware built for a roomier board says by how much."""
    bundle = _bundle_with_arena(tmp_path, 20000)
    with pytest.raises(
        RuntimeError, match=r"does not fit .*nRF51822.*region RAM .*overflowed by \d+ bytes"
    ):
        build("cortex-m0plus", tmp_path / "m0", bundle)
    elf = build("cortex-m4f", tmp_path / "m4", bundle)
    message = boards.fits_check(boards.elf_sizes(elf, "cortex-m4f"), "cortex-m0plus")
    assert message is not None
    assert re.search(
        r"nRF51822.*RAM needs \d+ bytes.*arena 20000.*16384 available: exceeded", message
    )


def test_fits_check_real_part_smaller_than_emulator(tmp_path: Path) -> None:
    """700 KB of arena runs in QEMU's 4 MB but not in the STM32L4R5's 640 KB."""
    elf = build("cortex-m4f", tmp_path / "b", _bundle_with_arena(tmp_path, 700 * 1024))
    inputs = fake_inputs()
    check_outputs(boards.run_firmware(elf, "cortex-m4f", inputs), inputs)
    message = boards.fits_check(boards.elf_sizes(elf, "cortex-m4f"), "cortex-m4f")
    assert message is not None and "STM32L4R5" in message
    over = int(re.search(r"exceeded by (\d+) bytes", message).group(1))
    assert 700 * 1024 + 8192 + 2048 - 640 * 1024 <= over < 700 * 1024 - 640 * 1024 + 12 * 1024
    assert "flash" not in message


# --- harness and failure decoding ----------------------------------------------------------


@pytest.mark.parametrize(
    "cc",
    [
        ["gcc"],
        [
            "arm-none-eabi-gcc",
            "-mcpu=cortex-m4",
            "-mthumb",
            "-mfpu=fpv4-sp-d16",
            "-mfloat-abi=hard",
        ],
        ["arm-none-eabi-gcc", "-mcpu=cortex-m0plus", "-mthumb"],
        ["riscv64-unknown-elf-gcc", "--specs=picolibc.specs", "-march=rv32imc", "-mabi=ilp32"],
    ],
    ids=["host", "arm-m4f", "arm-m0plus", "rv32imc"],
)
def test_harness_is_warning_free(cc: list[str], tmp_path: Path) -> None:
    source = tmp_path / "main.c"
    source.write_text(boards.render_test_main(FAKE))
    flags = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Os", "-c"]
    cmd = [*cc, *flags, f"-I{FAKE}", f"-I{RUNTIME}", str(source), "-o", str(tmp_path / "main.o")]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


FAILING_MAINS = {
    "fault": ("int main(void) { __builtin_trap(); return 0; }\n", r"faulted \(exit status 250\)"),
    "hang": ("int main(void) { for (;;) { } }\n", r"hung \(timeout\): no exit within 2 s"),
    "status": ("int main(void) { return 7; }\n", r"returned status 7"),
}


@pytest.mark.parametrize("board", ["cortex-m4f", "cortex-m0plus", "rv32imc"])
@pytest.mark.parametrize("kind", sorted(FAILING_MAINS))
def test_failures_are_decoded(board: str, kind: str, tmp_path: Path) -> None:
    source, pattern = FAILING_MAINS[kind]
    (tmp_path / "main.c").write_text(source)
    elf = build(board, tmp_path / "build", main=tmp_path / "main.c")
    with pytest.raises(RuntimeError, match=f"{board} .*{pattern}"):
        boards.run_firmware(elf, board, fake_inputs(), timeout=2)


def _cmake_files() -> set[Path]:
    """CMake files in the source tree (not the build cache, which other workers change)."""
    out = set()
    for root, dirs, files in os.walk(paths.data_root()):
        dirs[:] = [d for d in dirs if d not in (".aotc-cache", ".git")]
        out |= {Path(root) / f for f in files + dirs if "CMake" in f}
    return out


def test_cmake_alone_renders_harness(tmp_path: Path) -> None:
    """The top-level CMakeLists.txt works without Python driving it and writes nothing into
    the source tree."""
    before = _cmake_files()
    build_dir = tmp_path / "build"
    for cmd in (
        ["cmake", "-S", str(paths.cmake_lists().parent), "-B", str(build_dir), "-DAOTC_BOARD=host",
         f"-DAOTC_BUNDLE={FAKE}", f"-DAOTC_RUNTIME_DIR={RUNTIME}"],
        ["cmake", "--build", str(build_dir)],
    ):  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (build_dir / "aotc_app.elf").is_file() and (build_dir / "aotc_app.map").is_file()
    assert list(build_dir.rglob("*.su"))
    assert _cmake_files() == before
