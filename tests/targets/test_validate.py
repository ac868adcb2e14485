"""`aotc validate` end to end: the validation firmware (templates/validate/firmware.c.j2) built
for cortex-m4f and cortex-m55, run in QEMU with its UART on a TCP socket or a pty, driven over
the framed protocol (aotc/targets/serial_link.py).

Model: the MLPerf Tiny KWS int8 .tflite; reference: TensorFlow Lite Micro, called here
directly; outputs must be bit-exact (0 LSB). The per-kernel SysTick counts under
`-icount shift=0` are checked against the instructions the TCG plugin counts (`aotc bench`).
About 40 s.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import struct
import subprocess
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from aotc.cli.commands import main
from aotc.errors import AotcError
from aotc.targets import serial_link, serialfw
from aotc.targets.boards import load_board
from aotc.targets.runner import BoardRunner
from aotc.verification import on_board

BOARDS = ("cortex-m4f", "cortex-m55")


@pytest.fixture(scope="module")
def kws(tmp_path_factory) -> Path:
    from tests.conftest import SHARED_MODELS

    path = SHARED_MODELS / "kws_ref_model.tflite"
    if not path.is_file():
        pytest.fail(f"MLPerf Tiny KWS model not found at {path}")
    return path


@pytest.fixture(scope="module")
def bundle(kws, tmp_path_factory) -> dict[str, Path]:
    """The KWS bundle compiled for each board."""
    from aotc.api import compile as compile_bundle

    out = {}
    for b in BOARDS:
        d = tmp_path_factory.mktemp(f"kws_{b}")
        compile_bundle(str(kws), d, name="kws", target=b)
        out[b] = d
    return out


def _tflm(model: Path, x: np.ndarray) -> np.ndarray:
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(model.read_bytes(), arena_size=1 << 20)
    it.set_input(x, 0)
    it.invoke()
    return it.get_output(0).copy()


@pytest.mark.parametrize("board", BOARDS)
def test_outputs_bit_exact_vs_tflm(board, kws, bundle, tmp_path):
    b = load_board(board)
    elf, binary = serialfw.build(bundle[board], b, tmp_path)
    assert binary.stat().st_size > 0
    nm = subprocess.run([b.tool("nm"), str(elf)], capture_output=True, text=True,
                        check=True).stdout
    assert "initialise_monitor_handles" not in nm and "_swiwrite" not in nm  # no semihosting
    with on_board.qemu_port(b, elf, timeout=20) as port:
        link = serial_link.Link(port, timeout=20)
        hello = link.hello()
        assert hello.model["name"] == "kws"
        assert hello.model["inputs"][0]["shape"] == [1, 49, 10, 1]
        assert hello.model["inputs"][0]["dtype"] == "int8"
        assert hello.model["outputs"][0]["shape"] == [1, 12]
        assert hello.counter == "SysTick"  # QEMU does not emulate DWT CYCCNT: detected
        assert "not advancing" in hello.dwt
        vectors = on_board.input_vectors(hello.model["inputs"], 4, seed=3)
        assert vectors[0]["input_1"].min() == -128 and vectors[0]["input_1"].max() == 127
        for v in vectors:
            x = v["input_1"]
            got = np.frombuffer(link.run(x.tobytes()), np.int8).reshape(1, 12)
            np.testing.assert_array_equal(got, _tflm(kws, x))  # tolerance: 0 LSB
        prof = link.profile()
    meta = json.loads((bundle[board] / "bundle.json").read_text())
    assert [k for k, _, _ in prof.kernels] == meta["kernels"]  # every kernel, in order
    assert all(calls == 1 for _, _, calls in prof.kernels)
    assert prof.total >= sum(c for _, c, _ in prof.kernels) > 0


@pytest.mark.parametrize("board", BOARDS)
def test_cycles_match_counted_instructions(board, bundle, tmp_path):
    """Under -icount shift=0 a SysTick tick is 1e9 / clock instructions: the firmware's
    per-kernel ticks must match the TCG plugin's inclusive instruction counts of the same
    kernels (same flags, same code) within two ticks plus the profiling hook's own
    instructions."""
    b = load_board(board)
    elf, _ = serialfw.build(bundle[board], b, tmp_path)
    x = on_board.input_vectors([{"name": "input_1", "dtype": "int8", "shape": [1, 49, 10, 1]}],
                               2, seed=0)[1]
    with on_board.qemu_port(b, elf, timeout=20) as port:
        link = serial_link.Link(port, timeout=20)
        link.run(x["input_1"].tobytes())
        prof = link.profile()
    counted = BoardRunner(bundle[board], board).count_instructions(x)
    per_tick = 1e9 / b.qemu_clock_hz
    ticks = {name: c for name, c, _ in prof.kernels}
    n = len(ticks)
    # All kernels together: the plugin's inclusive counts against the ticks in kernels.
    in_kernels = sum(ticks.values()) * per_tick
    assert abs(in_kernels - sum(counted["inclusive"].values())) <= 2 * n * per_tick + 60 * n
    assert abs(prof.total * per_tick - counted["inference"]) <= 0.001 * counted["inference"]
    # Kernel by kernel where the plugin can tell them apart: a kernel gcc emitted as a jump
    # into another's body has no symbol of its own ("inlined"), its instructions count there.
    if board == "cortex-m4f":
        assert not counted["inlined"]
    if counted["inlined"]:
        return
    for key, insns in counted["inclusive"].items():  # "a=b": kernels gcc folded into one body
        measured = sum(ticks[k] for k in key.split("=")) * per_tick
        slack = (2 * per_tick + 60) * len(key.split("="))
        assert abs(measured - insns) <= slack, (key, measured, insns)


@pytest.mark.parametrize("board", BOARDS)
def test_cli_qemu_pass(board, kws, tmp_path, capsys):
    rc = main(["validate", str(kws), "--board", board, "--qemu", "-q", "--vectors", "4",
               "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert re.search(r"^Identity\s+int8\s+0\s+0\s+PASS$", out, re.M), out
    assert "PASS: 4 vectors on " + board in out
    assert re.search(r"^k0_qlinearconv\s+[\d,]+\s+[\d.]+%\s+1$", out, re.M), out
    assert "total (one inference)" in out and "counter: SysTick" in out
    assert "pyocd flash --target" in out and "openocd -f" in out  # how to flash it


def test_cli_over_pty(kws, tmp_path, capsys):
    """QEMU's UART on a pty (-serial pty), opened by path as a serial device."""
    b = load_board("cortex-m4f")
    assert main(["validate", str(kws), "--board", b.name, "-q", "-o", str(tmp_path)]) == 0
    elf = tmp_path / "firmware" / "aotc_validate.elf"
    capsys.readouterr()
    qemu = subprocess.Popen(serialfw.qemu_command(b, elf, "pty"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        line = qemu.stdout.readline()
        pty = re.search(r"(/dev/pts/\d+)", line)
        assert pty, line
        assert stat.S_ISCHR(os.stat(pty.group(1)).st_mode)
        rc = main(["validate", str(kws), "--board", b.name, "--port", pty.group(1), "-q",
                   "--vectors", "2", "-o", str(tmp_path)])
    finally:
        qemu.kill()
        qemu.communicate()
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"on {pty.group(1)}" in out and "PASS: 2 vectors" in out


def test_board_running_another_model_is_a_user_error(kws, bundle, tmp_path, capsys):
    """HELLO names the model the board runs: here "kws" (the fixture's bundle), while the CLI
    compiles the same file under its default name: exit 2, flash the firmware just built."""
    b = load_board("cortex-m4f")
    elf, _ = serialfw.build(bundle[b.name], b, tmp_path / "fw")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    qemu = subprocess.Popen(serialfw.qemu_command(b, elf, f"tcp:127.0.0.1:{port},server=on,"
                                                           "wait=off"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        for _ in range(100):  # until QEMU listens (it takes the next client after a probe)
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        rc = main(["validate", str(kws), "--board", b.name, "--port", f"tcp:127.0.0.1:{port}",
                   "-q", "-o", str(tmp_path / "out")])
    finally:
        qemu.kill()
        qemu.communicate()
    _one_line_error(capsys, rc, r"runs model 'kws' .* not 'kws_ref_model': flash the firmware")


class _DamagingPort:
    """Flips one payload bit in each of the first ``frames`` frames the board sends back (the
    link reads a frame as magic, 6 header bytes, payload, CRC)."""

    def __init__(self, port: serial_link.Port, frames: int = 1) -> None:
        self.port, self.spec, self.left, self.after_header = port, port.spec, frames, False

    def write(self, data: bytes) -> None:
        self.port.write(data)

    def read(self, n: int, deadline: float) -> bytes:
        data = bytearray(self.port.read(n, deadline))
        if self.after_header and self.left and data:
            data[0] ^= 0x10
            self.left -= 1
        self.after_header = n == 6
        return bytes(data)


def test_bad_crc_rejected_and_retried(bundle, tmp_path):
    b = load_board("cortex-m4f")
    elf, _ = serialfw.build(bundle[b.name], b, tmp_path)
    x = np.arange(490, dtype=np.int64).astype(np.int8)
    with on_board.qemu_port(b, elf, timeout=20) as port:
        # A request with a wrong CRC: the firmware answers ERROR bad CRC and does not run it.
        good = serial_link.frame(serial_link.RUN, 7, x.tobytes())
        port.write(good[:-4] + struct.pack("<I", zlib.crc32(good[2:-4]) ^ 1))
        link = serial_link.Link(port, timeout=20)
        kind, seq, body = link._receive()
        assert (kind, seq) == (serial_link.ERROR, 7)
        assert body[0] == serial_link.E_BAD_CRC and body[1] == serial_link.RUN
        # A reply that arrives damaged is not accepted: the request is sent again.
        expected = link.run(x.tobytes())
        damaged = serial_link.Link(_DamagingPort(port), timeout=20)  # type: ignore[arg-type]
        assert damaged.run(x.tobytes()) == expected
        assert damaged.crc_errors == 1
        # Our own request damaged on the way: the board rejects it, the link resends.
        assert link.request(serial_link.RUN, x.tobytes(), corrupt=True) == expected
        assert link.crc_errors == 1
        # A frame whose length is not the inputs' size: ERROR bad length at once; the rest of
        # the frame is skipped while the firmware looks for the next magic.
        port.write(serial_link.frame(serial_link.RUN, 9, b"\x00" * 3))
        kind, seq, body = link._receive()
        assert (kind, seq, body[0]) == (serial_link.ERROR, 9, serial_link.E_BAD_LENGTH)
        with pytest.raises(serial_link.FirmwareError, match="bad length"):
            link.request(serial_link.HELLO, b"\x01")
        assert link.run(x.tobytes()) == expected


def test_every_frame_damaged_is_reported(bundle, tmp_path):
    b = load_board("cortex-m4f")
    elf, _ = serialfw.build(bundle[b.name], b, tmp_path)

    with on_board.qemu_port(b, elf, timeout=20) as port:
        link = serial_link.Link(_DamagingPort(port, frames=99), timeout=20,  # type: ignore
                                retries=2)
        with pytest.raises(serial_link.LinkError, match="3 attempts, every frame damaged"):
            link.hello()
        assert link.crc_errors == 3


def _one_line_error(capsys, rc: int, pattern: str) -> None:
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err and re.search(pattern, err), err


def test_closed_port_is_a_user_error(kws, tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nobody listens
    rc = main(["validate", str(kws), "--board", "cortex-m4f", "--port", f"tcp:127.0.0.1:{port}",
               "-q", "-o", str(tmp_path)])
    _one_line_error(capsys, rc, r"^aotc: error: cannot connect to tcp:127\.0\.0\.1:\d+: ")


def test_silent_board_times_out(kws, tmp_path, capsys):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        rc = main(["validate", str(kws), "--board", "cortex-m4f", "--timeout", "1", "-q",
                   "--port", f"tcp:127.0.0.1:{server.getsockname()[1]}", "-o", str(tmp_path)])
    _one_line_error(capsys, rc, r"no answer from the board \(timeout\)")


@pytest.mark.parametrize("argv, pattern", [
    (["--board", "nonesuch", "--qemu"], r"unknown board 'nonesuch'"),
    (["--board", "cortex-m0plus", "--qemu"], r"cortex-m0plus has no \[serial\] UART"),
    (["--board", "cortex-m4f", "--port", "tcp:nohost"], r"expected tcp:HOST:PORT"),
    (["--board", "cortex-m4f", "--port", "/nonexistent/tty"], r"cannot open /nonexistent/tty"),
    (["--board", "cortex-m4f", "--port", "tcp:x:1", "--qemu"], r"exclude each other"),
    (["--board", "cortex-m4f", "--qemu", "--io-in-arena"], r"compile without --io-in-arena"),
])
def test_user_errors(kws, tmp_path, capsys, argv, pattern):
    rc = main(["validate", str(kws), *argv, "-q", "-o", str(tmp_path)])
    _one_line_error(capsys, rc, pattern)


def test_mismatch_exits_1(kws, tmp_path, capsys, monkeypatch):
    """A reference that differs by one LSB in one element: FAIL, exit status 1."""
    real = on_board.reference_outputs

    def off_by_one(model, feeds, names):
        ref = {k: np.array(v) for k, v in real(model, feeds, names).items()}
        ref["Identity"].reshape(-1)[3] ^= 1
        return ref

    monkeypatch.setattr(on_board, "reference_outputs", off_by_one)
    rc = main(["validate", str(kws), "--board", "cortex-m4f", "--qemu", "-q", "--vectors", "2",
               "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert re.search(r"^Identity\s+int8\s+1\s+1\s+FAIL \(first at vector 0\)$", out, re.M), out
    assert "\nFAIL: 2 vectors" in out


def test_flash_with_pyocd_from_path(kws, tmp_path, capsys, monkeypatch):
    """--flash runs pyOCD when it is on PATH (here a stand-in recording its arguments)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    log = tmp_path / "pyocd.args"
    fake = tools / "pyocd"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {log}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    rc = main(["validate", str(kws), "--board", "cortex-m4f", "--flash", "--flash-target",
               "stm32l4r5zitx", "-q", "-o", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert rc == 0, out
    elf = tmp_path / "out" / "firmware" / "aotc_validate.elf"
    assert log.read_text().split() == ["flash", "--target", "stm32l4r5zitx", str(elf)]
    assert f"flashed: pyocd flash --target stm32l4r5zitx {elf}" in out


def test_flash_without_tools_is_a_user_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(AotcError, match="needs pyocd or openocd on PATH"):
        on_board.flash(tmp_path / "fw.elf", "some_target")
    with pytest.raises(AotcError, match="--flash needs --flash-target"):
        on_board.flash(tmp_path / "fw.elf", None)
