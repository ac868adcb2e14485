"""The fast build path (aotc.targets.boards.build_firmware_fast) against the CMake path: the same
flags and the same firmware on every board; its report when a firmware does not fit; stack usage,
call chains and recursion from gcc's .su/.ci files; the inclusive instruction window.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from test_boards import ALL_BOARDS, FAKE, RUNTIME, check_outputs, fake_inputs

from aotc.targets import boards, fastbuild

STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-ffp-contract=off", "-Os"]


def _symbol_sizes(elf: Path, board: str) -> dict[str, int]:
    out = subprocess.run([boards.load_board(board).tool("nm"), "-S", str(elf)],
                         capture_output=True, text=True, check=True).stdout
    return {f[3]: int(f[1], 16) for f in (ln.split() for ln in out.splitlines()) if len(f) == 4}


@pytest.mark.parametrize("board", ALL_BOARDS)
def test_fast_path_builds_the_cmake_firmware(board: str, tmp_path: Path) -> None:
    """Same sections, same symbols of the same sizes, same outputs as the CMake build."""
    cmake_elf = boards.build_firmware(FAKE, board, tmp_path / "cmake", runtime_dir=RUNTIME)
    fast_elf = fastbuild.build_firmware_fast(FAKE, board, tmp_path / "fast", runtime_dir=RUNTIME)
    assert boards.elf_sizes(fast_elf, board) == boards.elf_sizes(cmake_elf, board)
    fast, cmake = _symbol_sizes(fast_elf, board), _symbol_sizes(cmake_elf, board)
    for name in ("k0_scale", "k1_bias", "k2_exp", "k3_neg", "fake_run", "main"):
        assert fast.get(name) == cmake.get(name), name
    recipe = fastbuild.board_recipe(board, RUNTIME)
    for flag in [*STRICT, *boards.load_board(board).cflags]:
        assert flag in recipe.strict_flags, flag
    assert "-Wl,--gc-sections" in recipe.link_flags or boards.load_board(board).is_host
    inputs = fake_inputs(3)
    check_outputs(boards.run_firmware(fast_elf, board, inputs), inputs)
    # Both leave frame sizes and call graphs of the same functions behind.
    assert set(boards.stack_usage(fast_elf.parent)["functions"]) == set(
        boards.stack_usage(cmake_elf.parent)["functions"])


def test_recipe_is_made_once(tmp_path: Path) -> None:
    first = fastbuild.board_recipe("cortex-m4f", RUNTIME)
    start = time.monotonic()
    again = fastbuild.board_recipe("cortex-m4f", RUNTIME)
    assert again == first and time.monotonic() - start < 0.5
    assert all(Path(f).is_file() for f in [*first.objects, *first.aux_files])
    assert any("startup" in Path(f).name for f in first.objects)


def test_recipe_of_a_moved_board_is_not_reused(tmp_path: Path) -> None:
    """A recipe holds absolute paths (linker script, includes): the same files in another
    place (a checkout moved, a worktree deleted) get a recipe of their own."""
    import dataclasses

    board = boards.load_board("cortex-m4f")
    moved = tmp_path / "cortex-m4f"
    shutil.copytree(board.directory, moved)
    key = fastbuild.recipe_key(board, RUNTIME, "MinSizeRel")
    assert fastbuild.recipe_key(dataclasses.replace(board, directory=moved), RUNTIME,
                                "MinSizeRel") != key
    assert fastbuild.recipe_key(board, RUNTIME, "MinSizeRel") == key  # and stable


def test_fast_path_is_strict(tmp_path: Path) -> None:
    """Bundle sources get -Werror -pedantic like on the CMake path."""
    bundle = tmp_path / "warns"
    shutil.copytree(FAKE, bundle)
    (bundle / "extra.c").write_text("int aotc_extra(int x);\nint aotc_extra(int x)\n{\n"
                                    "    int unused;\n    return x;\n}\n")
    with pytest.raises(RuntimeError, match="unused"):
        fastbuild.build_firmware_fast(bundle, "cortex-m4f", tmp_path / "b", runtime_dir=RUNTIME)


def test_fast_path_says_what_does_not_fit(tmp_path: Path) -> None:
    """A 20 KB arena on the micro:bit's 16 KB: by how much, and the arena dominates."""
    bundle = tmp_path / "big"
    shutil.copytree(FAKE, bundle)
    meta = json.loads((bundle / "bundle.json").read_text())
    meta["arena_bytes"] = 20000
    (bundle / "bundle.json").write_text(json.dumps(meta))
    with pytest.raises(boards.FirmwareTooBig) as info:
        fastbuild.build_firmware_fast(bundle, "cortex-m0plus", tmp_path / "b", runtime_dir=RUNTIME)
    message = str(info.value)
    assert "\n" not in message
    assert "nRF51822" in message
    over = int(message.split("RAM needs ")[1].split(" bytes")[0]) - 16384
    assert f"exceeded by {over} bytes" in message and over > 20000 - 16384
    assert "largest in RAM: arena 20000 B" in message
    assert "flash needs" not in message


def test_stack_reports_the_deepest_kernel(tmp_path: Path) -> None:
    elf = fastbuild.build_firmware_fast(FAKE, "cortex-m4f", tmp_path / "b", runtime_dir=RUNTIME)
    kernels = ["k0_scale", "k1_bias", "k2_exp", "k3_neg"]
    everything = boards.stack_usage(elf.parent)
    usage = boards.stack_usage(elf.parent, kernels, "fake_run")
    # The startup's fault reporter has the largest frame of the firmware, not a kernel.
    assert everything["function"] not in kernels
    assert usage["function"] in kernels
    assert usage["max_bytes"] == max(everything["functions"][k] for k in kernels)
    frames = everything["functions"]
    assert usage["path_bytes"] == frames["fake_run"] + usage["max_bytes"]
    assert usage["library_calls"] == ["expf"] and usage["recursion"] == []


def test_recursion_is_found(tmp_path: Path) -> None:
    main = tmp_path / "main.c"
    main.write_text(
        "static unsigned depth(unsigned n)\n{\n"
        "    return n < 2 ? n : depth(n - 1) + depth(n - 2);\n}\n"
        "int main(void)\n{\n    return depth(3) == 2 ? 0 : 1;\n}\n")
    elf = fastbuild.build_firmware_fast(FAKE, "cortex-m4f", tmp_path / "b", main=main,
                                     runtime_dir=RUNTIME)
    usage = boards.stack_usage(elf.parent, root="main")
    assert ["depth"] in [[f.split(".")[0] for f in c] for c in usage["recursion"]]


@pytest.mark.parametrize("board", ["cortex-m4f", "cortex-m0plus", "rv32imc", "host"])
def test_inference_window_includes_callees(board: str, tmp_path: Path) -> None:
    """"inference" counts fake_run with its kernels and their expf calls (and the soft-float
    helpers where there is no FPU), nothing of the harness."""
    elf = fastbuild.build_firmware_fast(FAKE, board, tmp_path / "b", runtime_dir=RUNTIME)
    counts = boards.count_instructions(elf, board, fake_inputs(), tmp_path / "run")
    own = counts["run"] + sum(counts["kernels"].values())
    assert own < counts["inference"] < counts["total"]
    assert counts["inference"] >= own + 8 * 10  # eight expf calls of 10+ instructions


@pytest.mark.parametrize("board", ["cortex-m4f", "cortex-m0plus", "rv32imc", "host"])
def test_kernel_counts_include_callees(board: str, tmp_path: Path) -> None:
    """A kernel's inclusive count runs from its entry to its return: k2_exp's includes expf,
    and without an FPU every float kernel's includes the soft-float helpers; k3_neg calls
    nothing. fake_run calls nothing but kernels, so its own instructions and the inclusive
    kernel counts add up to the inference exactly."""
    elf = fastbuild.build_firmware_fast(FAKE, board, tmp_path / "b", runtime_dir=RUNTIME)
    counts = boards.count_instructions(elf, board, fake_inputs(), tmp_path / "run")
    own, inclusive = counts["kernels"], counts["inclusive"]
    assert set(inclusive) == set(own) == {"k0_scale", "k1_bias", "k2_exp", "k3_neg"}
    assert inclusive["k2_exp"] >= own["k2_exp"] + 8 * 10  # eight expf calls of 10+ instructions
    assert inclusive["k3_neg"] == own["k3_neg"]
    soft_float = board in ("cortex-m0plus", "rv32imc")
    for k in ("k0_scale", "k1_bias"):
        assert (inclusive[k] > own[k]) if soft_float else (inclusive[k] == own[k]), k
    assert counts["run"] + sum(inclusive.values()) == counts["inference"]
    again = boards.count_instructions(elf, board, fake_inputs(), tmp_path / "again")
    if board == "host":  # callgrind's whole-process total includes the loader, libc startup and
        counts.pop("total"), again.pop("total")  # file paths: only the window is the model's
    assert again == counts
