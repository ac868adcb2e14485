"""Several memory pools on a board: cortex-m4f-pools (QEMU mps2-an386) lists a small fast pool
(dtcm: 16 KiB of block RAM at 0x01000000) and a large slow one (sram: PSRAM at 0x21000000) in
its board.toml. A model compiled for it is planned into both, each pool's array lands in its
own section and region (checked with nm), and it runs in QEMU with the same outputs as the
one-arena firmware (and onnxruntime / TFLM)."""

from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import onnxruntime as ort
import pytest
from pool_models import conv_model

import aotc
from aotc.cli import main as cli_main
from aotc.targets import boards
from aotc.targets.runner import DoesNotFit

BOARD = "cortex-m4f-pools"


def _symbols(elf) -> dict[str, tuple[int, int]]:  # type: ignore[no-untyped-def]
    out = subprocess.run([boards.load_board(BOARD).tool("nm"), "-S", str(elf)], check=True,
                         capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        m = re.fullmatch(r"([0-9a-f]+) ([0-9a-f]+) \w (\S+)", line.strip())
        if m:
            found[m.group(3)] = (int(m.group(1), 16), int(m.group(2), 16))
    return found


def _region(name: str) -> tuple[int, int]:
    r = next(r for r in boards.load_board(BOARD).memory if r.name == name)
    return r.origin, r.origin + r.length


def test_board_pools_agree_with_link_ld() -> None:
    """Every board's pools have a section its link.ld places (a NOLOAD output section)."""
    with_pools = [b for b in map(boards.load_board, boards.list_boards()) if b.pools]
    assert BOARD in [b.name for b in with_pools]
    for b in with_pools:
        ld = (b.directory / "link.ld").read_text()
        for name, size, section in b.pools:
            assert size > 0 and section, (b.name, name)
            assert re.search(rf"^\s*{re.escape(section)} \(NOLOAD\)", ld, re.M), (b.name, section)


def test_float_model_in_two_pools_on_qemu(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = conv_model()
    x = np.random.default_rng(2).normal(size=(1, 3, 16, 16)).astype(np.float32)
    pooled = aotc.compile(model, tmp_path / "pooled", name="m", target=BOARD)
    single = aotc.compile(model, tmp_path / "single", name="m", target=BOARD, pools=())
    c = pooled.compilation
    dtcm, sram = (p for p in c.pools)
    assert (dtcm.name, dtcm.size, dtcm.section) == ("dtcm", 16384, ".dtcm")
    assert single.compilation.plan.size > dtcm.size  # the model does not fit the fast pool
    assert 0 < c.plan.pool_sizes["dtcm"] <= dtcm.size
    assert 0 < c.plan.pool_sizes["sram"] <= sram.size
    assert not single.compilation.plan.pool_of  # pools=(): one arena, also on this board
    runner = pooled.load(board=BOARD)
    got = runner.run({"x": x})["y"]
    want = single.load(board=BOARD).run({"x": x})["y"]
    np.testing.assert_array_equal(got, want)
    ref = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, ref, atol=1e-5, rtol=1e-5)
    # Each pool's array is in its own region, with the planned size.
    sym = _symbols(runner.elf)
    for pool, region in (("dtcm", "DTCM"), ("sram", "SRAM")):
        addr, size = sym[f"pool_{pool}"]
        lo, hi = _region(region)
        assert lo <= addr and addr + size <= hi, (pool, hex(addr), size)
        assert size == c.plan.pool_sizes[pool]
    assert "arena" not in sym
    assert boards.elf_sizes(runner.elf, BOARD)["pools"] == c.plan.pool_sizes


def test_cli_verify_on_the_pools_board(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The CLI on the pools board: verify (compile, build, run in QEMU, compare with
    onnxruntime) uses the board's pools; the bundle's run function takes both."""
    import onnx

    path = tmp_path / "m.onnx"
    onnx.save(conv_model(), path)
    out = tmp_path / "b"
    assert cli_main(["verify", str(path), "--board", BOARD, "-o", str(out), "-q"]) == 0
    header = (out / "m.h").read_text()
    assert "void *dtcm, size_t dtcm_size, void *sram, size_t sram_size" in header


@pytest.mark.parametrize("stem,fast", [("kws_ref_model_int8_qdq", 8000),
                                       ("vww_96_int8_qdq", 16384)])
@pytest.mark.parametrize("io_in_arena", [False, True])
def test_int8_model_in_two_pools_on_qemu(stem, fast, io_in_arena, mlperf_dir, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """KWS and VWW int8 with --pool overriding the board's sizes (8,000 B of fast memory for
    KWS's 16,000 B arena, 16 KiB for VWW's 55,296 B; with --io-in-arena the input and output
    are in the pools too): bit-exact with TFLM in QEMU."""
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    bundle = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path / "b", name="net", target=BOARD,
                          pools=(f"dtcm:{fast}:.dtcm", "sram:128K:.sram"),
                          io_in_arena=io_in_arena)
    c = bundle.compilation
    assert 0 < c.plan.pool_sizes["dtcm"] <= fast and c.plan.pool_sizes["sram"] > 0
    if io_in_arena:
        runner_meta = json.loads((tmp_path / "b" / "bundle.json").read_text())
        assert {t["pool"] for t in (*runner_meta["inputs"], *runner_meta["outputs"])} <= \
            {"dtcm", "sram"}
        assert "int net_run(void *dtcm, size_t dtcm_size, void *sram, size_t sram_size);" in \
            (tmp_path / "b" / "net.h").read_text()
    runner = bundle.load(board=BOARD)
    name, out = runner.meta["inputs"][0]["name"], runner.meta["outputs"][0]["name"]
    for x, want in zip(vec["input"][:2], vec["output_tflm"][:2]):
        np.testing.assert_array_equal(runner.run({name: x})[out].reshape(want.shape), want)
    sym = _symbols(runner.elf)
    assert sym["pool_dtcm"][0] == _region("DTCM")[0]
    assert sym["pool_sram"][0] == _region("SRAM")[0]


def test_pool_larger_than_its_region_is_a_link_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The linker holds each pool to its region: a 'dtcm' pool of 24 KiB overflows the 16 KiB
    block RAM."""
    bundle = aotc.compile(conv_model(), tmp_path / "b", name="m", target=BOARD,
                          pools=("dtcm:24K:.dtcm",))
    with pytest.raises(DoesNotFit, match="region DTCM overflowed by"):
        bundle.load(board=BOARD)
