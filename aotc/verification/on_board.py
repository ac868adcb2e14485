"""Validation on a board (`aotc validate`): a compiled bundle's validation firmware driven over
a serial port (a real board's UART, or QEMU's on a TCP port), its outputs compared with the
reference `aotc verify` uses, and the per-kernel cycles the board measured.

The firmware and its protocol: aotc/targets/serialfw.py, aotc/targets/serial_link.py.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.targets import serialfw
from aotc.targets.boards import Board, load_board
from aotc.targets.serial_link import Hello, Link, LinkError, Port, Profile
from aotc.verification.run import reference_outputs

# Under `--qemu`, QEMU runs with -icount shift=0: every guest instruction advances the virtual
# clock by 1 ns, so SysTick (at the core clock) counts instructions x clock / 1 GHz, the same
# on every run. QEMU emulates no cycle timing: these are not a real core's cycles.
QEMU_ICOUNT = ("-icount", "shift=0")


def input_vectors(specs: list[dict[str, Any]], count: int, seed: int
                 ) -> list[dict[str, np.ndarray]]:
    """``count`` input sets. Vector 0 is a ramp over each integer input's full range (min to
    max, every value when the tensor is large enough); the others are uniform over the full
    range, seeded (``seed + k``). Float inputs: a ramp over [-4, 4], then standard normal."""
    vectors = []
    for k in range(count):
        rng = np.random.default_rng(seed + k)
        feeds = {}
        for s in specs:
            dt, shape = np.dtype(s["dtype"]), s["shape"]
            n = int(np.prod(shape, dtype=np.int64))
            if dt.kind == "b":
                x = (np.arange(n) % 2 if k == 0 else rng.integers(0, 2, n)).astype(dt)
            elif dt.kind == "f":
                x = (np.linspace(-4, 4, n) if k == 0 else rng.standard_normal(n)).astype(dt)
            else:
                info = np.iinfo(dt)
                if k == 0:
                    x = np.round(np.linspace(info.min, info.max, n)).astype(dt)
                else:
                    x = rng.integers(info.min, info.max, n, endpoint=True, dtype=dt)
            feeds[s["name"]] = x.reshape(shape)
        vectors.append(feeds)
    return vectors


@dataclass
class Result:
    board: str
    port: str
    hello: Hello
    vectors: int
    outputs: dict[str, dict[str, Any]]  # name -> {dtype, max_abs, lsb, ok, first_bad}
    profile: Profile
    crc_errors: int
    qemu: bool
    clock_hz: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(o["ok"] for o in self.outputs.values())


def check_board(board: str) -> Board:
    """The board, with a UART aotc drives; AotcError (one line) otherwise."""
    try:
        b = load_board(board)
        serialfw.board_serial(b)
    except ValueError as e:
        raise AotcError(str(e)) from None
    return b


def build(bundle_dir: Path, board: Board, out_dir: Path) -> tuple[Path, Path]:
    try:
        return serialfw.build(bundle_dir, board, out_dir)
    except (RuntimeError, ValueError) as e:
        raise AotcError(" ".join(str(e).split())[:600]) from None


def flash_instructions(board: Board, elf: Path, binary: Path) -> list[str]:
    origin = min((m.origin for m in board.memory if m.name == "FLASH"), default=0)
    return [
        f"firmware: {elf} ({serialfw.size_line(elf, board)})",
        f"raw image: {binary} (load at {origin:#010x})",
        f"flash with pyOCD:  pyocd flash --target <pyocd target of the part> {elf}",
        f"flash with OpenOCD: openocd -f <board .cfg> -c \"program {elf} verify reset exit\"",
        "  (or `aotc validate ... --flash --flash-target TARGET`; an MPS2/MPS3 FPGA board: "
        "copy the .bin to its SD card and name it in images.txt)",
        "in QEMU instead: "
        + " ".join(serialfw.qemu_command(board, elf, "tcp::4321,server=on,wait=off"))
        + " then --port tcp:127.0.0.1:4321 (or pass --qemu)",
    ]


def flash(elf: Path, target: str | None) -> str:
    """Flashes with pyOCD (else OpenOCD) when on PATH; returns the command run."""
    if not target:
        raise AotcError("--flash needs --flash-target: pyOCD's target name of the part (or "
                        "OpenOCD's board .cfg)")
    if shutil.which("pyocd"):
        cmd = ["pyocd", "flash", "--target", target, str(elf)]
    elif shutil.which("openocd"):
        cmd = ["openocd", "-f", target, "-c", f"program {elf} verify reset exit"]
    else:
        raise AotcError("--flash needs pyocd or openocd on PATH (pip install pyocd, or "
                        "apt-get install openocd); or flash the firmware printed above yourself")
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        raise AotcError(f"{cmd[0]} failed (exit status {proc.returncode}): {tail[0]}")
    return " ".join(cmd)


@contextlib.contextmanager
def qemu_port(board: Board, elf: Path, timeout: float) -> Iterator[Port]:
    """QEMU running the firmware, its UART connected to a TCP socket aotc listens on (QEMU
    connects as the client: no port to guess); stopped on exit."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(timeout)
        spec = f"tcp:127.0.0.1:{server.getsockname()[1]}"
        cmd = [*serialfw.qemu_command(board, elf, spec), *QEMU_ICOUNT]
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT)
        except FileNotFoundError:
            raise AotcError(f"{cmd[0]} not found (apt-get install qemu-system-arm)") from None
        try:
            try:
                conn, _ = server.accept()
            except OSError:
                proc.kill()
                log = (proc.communicate()[0] or b"").decode(errors="replace").strip()
                raise AotcError(f"QEMU ({board.machine}) did not connect its UART: "
                                f"{' '.join(log.split())[:300] or 'timeout'}") from None
            port = Port.from_socket(conn, f"{spec} (QEMU {board.machine})")
            try:
                yield port
            finally:
                port.close()
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


def drive(link: Link, meta: dict[str, Any], reference: Any, vectors: int, seed: int,
          atol: float, rtol: float, lsb: int) -> tuple[Hello, dict[str, dict[str, Any]], Profile]:
    """HELLO (checked against the bundle), ``vectors`` RUNs compared with the reference,
    then PROFILE of the last run."""
    hello = link.hello()
    _check_hello(hello, meta, link.port.spec)
    ins, outs = meta["inputs"], meta["outputs"]
    report = {o["name"]: {"dtype": o["dtype"], "max_abs": 0.0, "lsb": 0, "ok": True,
                          "first_bad": None} for o in outs}
    for k, feeds in enumerate(input_vectors(ins, vectors, seed)):
        payload = b"".join(np.ascontiguousarray(feeds[s["name"]], np.dtype(s["dtype"])
                                                .newbyteorder("<")).tobytes() for s in ins)
        raw = link.run(payload)
        if len(raw) != sum(o["bytes"] for o in outs):
            raise LinkError(f"{link.port.spec}: RUN answered {len(raw)} bytes, the outputs are "
                            f"{sum(o['bytes'] for o in outs)}")
        ref = reference_outputs(reference, feeds, [o["name"] for o in outs])
        pos = 0
        for o in outs:
            dt = np.dtype(o["dtype"]).newbyteorder("<")
            got = np.frombuffer(raw[pos:pos + o["bytes"]], dt).astype(o["dtype"])
            pos += o["bytes"]
            want = np.asarray(ref[o["name"]]).reshape(-1)
            _compare(report[o["name"]], got, want, k, atol, rtol, lsb)
    return hello, report, link.profile()


def _check_hello(hello: Hello, meta: dict[str, Any], spec: str) -> None:
    m = hello.model

    def sig(ts: list[dict[str, Any]]) -> list[tuple[str, list[int]]]:
        return [(t["dtype"], list(t["shape"])) for t in ts]

    if (m.get("name") != meta["name"] or sig(m.get("inputs", [])) != sig(meta["inputs"])
            or sig(m.get("outputs", [])) != sig(meta["outputs"])):
        raise AotcError(f"the board on {spec} runs model {m.get('name')!r} "
                        f"({sig(m.get('inputs', []))} -> {sig(m.get('outputs', []))}), not "
                        f"{meta['name']!r}: flash the firmware just built")


def _compare(row: dict[str, Any], got: np.ndarray, want: np.ndarray, k: int, atol: float,
             rtol: float, lsb: int) -> None:
    if got.dtype.kind == "f":
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        err = float(np.max(diff, initial=0.0))
        ok = bool(np.allclose(got, want, atol=atol, rtol=rtol, equal_nan=True))
    else:
        err = float(np.max(np.abs(got.astype(np.int64) - want.astype(np.int64)), initial=0))
        row["lsb"] = max(row["lsb"], int(err))
        ok = err <= lsb
    row["max_abs"] = max(row["max_abs"], err)
    if not ok and row["ok"]:
        row["ok"], row["first_bad"] = False, k


def format_result(r: Result, reference_name: str) -> str:
    m = r.hello.model
    io = ", ".join(f"{t['name']} {t['dtype']}{t['shape']}" for t in m["inputs"])
    oo = ", ".join(f"{t['name']} {t['dtype']}{t['shape']}" for t in m["outputs"])
    lines = [f"board {r.board} on {r.port}: model {m['name']} (protocol {r.hello.protocol}), "
             f"inputs {io}, outputs {oo}, arena {m['arena_bytes']:,} B",
             f"{r.vectors} vectors (vector 0 a ramp over each input's range, the others "
             f"seeded random over it) vs {reference_name}" + (f"; {r.crc_errors} damaged frames "
                                                        "resent" if r.crc_errors else "")]
    w = max(12, *(len(n) for n in r.outputs))
    lines.append(f"{'output':<{w}} {'dtype':<8} {'max abs diff':>12} {'LSB':>5}  result")
    for name, o in r.outputs.items():
        lsb = f"{o['lsb']:>5}" if np.dtype(o["dtype"]).kind != "f" else f"{'-':>5}"
        verdict = "PASS" if o["ok"] else f"FAIL (first at vector {o['first_bad']})"
        lines.append(f"{name:<{w}} {o['dtype']:<8} {o['max_abs']:>12.6g} {lsb}  {verdict}")
    p = r.profile
    unit = "cycles" if p.counter == "DWT CYCCNT" else "ticks"
    other = "(run function, outside kernels)"
    kw = max(len(other), *(len(n) for n, _, _ in p.kernels))
    in_kernels = sum(c for _, c, _ in p.kernels)
    lines.append(f"{'kernel':<{kw}} {unit:>12} {'share':>7} {'calls':>6}")
    for name, cycles, calls in p.kernels:
        lines.append(f"{name:<{kw}} {cycles:>12,} {100.0 * cycles / max(p.total, 1):>6.1f}% "
                     f"{calls:>6}")
    lines.append(f"{other:<{kw}} {p.total - in_kernels:>12,} "
                 f"{100.0 * (p.total - in_kernels) / max(p.total, 1):>6.1f}%")
    lines.append(f"{'total (one inference)':<{kw}} {p.total:>12,}")
    counter = f"counter: {p.counter}"
    if p.counter == "SysTick":
        counter += f" at the core clock ({p.dwt})"
    if r.qemu and r.clock_hz:
        counter += (f"; under QEMU -icount shift=0 a tick is {1e9 / r.clock_hz:g} guest "
                    f"instructions (core clock {r.clock_hz / 1e6:g} MHz, 1 ns per "
                    f"instruction): ~{p.total * 1e9 / r.clock_hz:,.0f} instructions per "
                    "inference, not a real core's cycles")
    lines.append(counter)
    lines.extend(r.notes)
    lines.append(("PASS" if r.passed else "FAIL") + f": {r.vectors} vectors on {r.board}, "
                 + ", ".join(f"{n} max abs diff {o['max_abs']:g}" for n, o in r.outputs.items()))
    return "\n".join(lines)
