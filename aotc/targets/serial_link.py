"""The host side of the validation protocol (docs/firmware.md, "Validation on a board"): frames
with a CRC-32 over a TCP socket (QEMU's ``-serial tcp:...``) or a serial device / pty, and the
requests HELLO, RUN and PROFILE, retried when a frame arrives damaged.

Frame: magic A7 C0 | type u8 | seq u8 | length u32 LE | payload | CRC-32 u32 LE (zlib's CRC-32
over type, seq, length and payload). Only the standard library: a pty or a serial device is
opened with os.open and set raw with termios.
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import time
import zlib
from dataclasses import dataclass

from aotc.errors import AotcError

MAGIC = b"\xa7\xc0"
HELLO, RUN, PROFILE, ERROR, REPLY = 0x01, 0x02, 0x03, 0x7F, 0x80
E_BAD_CRC, E_BAD_LENGTH, E_UNKNOWN_TYPE, E_RUN_FAILED, E_FAULT = 1, 2, 3, 4, 5
ERROR_TEXT = {E_BAD_CRC: "bad CRC", E_BAD_LENGTH: "bad length", E_UNKNOWN_TYPE: "unknown type",
              E_RUN_FAILED: "the run function returned an error status",
              E_FAULT: "the firmware faulted"}
COUNTERS = {0: "none", 1: "DWT CYCCNT", 2: "SysTick"}
DWT_STATES = {0: "the core has no DWT cycle counter",
              1: "DWT_CTRL.NOCYCCNT is set: this DWT has no cycle counter",
              2: "DWT CYCCNT enabled but not advancing, as under QEMU, which does not "
                 "emulate it",
              3: "DWT CYCCNT used"}
MAX_FRAME = 64 << 20


class LinkError(AotcError):
    """The board cannot be reached or does not answer as the protocol says."""


class FirmwareError(LinkError):
    """The firmware answered a request with an ERROR frame."""

    def __init__(self, code: int, request: int, detail: int) -> None:
        self.code, self.request, self.detail = code, request, detail
        what = ERROR_TEXT.get(code, f"error {code}")
        if code == E_FAULT:
            what += f" (exception {request}, stacked pc {detail:#010x})"
        elif code == E_RUN_FAILED:
            what += f" ({detail})"
        super().__init__(f"the board answered: {what}")


def frame(kind: int, seq: int, payload: bytes = b"") -> bytes:
    body = struct.pack("<BBI", kind, seq & 0xFF, len(payload)) + payload
    return MAGIC + body + struct.pack("<I", zlib.crc32(body))


# --- ports -------------------------------------------------------------------------------------


class Port:
    """A byte stream with a deadline: tcp:HOST:PORT or a serial device / pty path."""

    def __init__(self, spec: str, baud: int = 115200, timeout: float = 10.0) -> None:
        self.spec = spec
        self._sock: socket.socket | None = None
        self._fd: int | None = None
        if spec.startswith("tcp:"):
            host, _, port = spec[4:].rpartition(":")
            if not host or not port.isdigit():
                raise LinkError(f"--port {spec}: expected tcp:HOST:PORT")
            try:
                self._sock = socket.create_connection((host, int(port)), timeout=timeout)
            except OSError as e:
                raise LinkError(f"cannot connect to {spec}: {e.strerror or e}") from None
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        else:
            self._fd = _open_device(spec, baud)

    @classmethod
    def from_socket(cls, sock: socket.socket, spec: str) -> Port:
        port = cls.__new__(cls)
        port.spec, port._sock, port._fd = spec, sock, None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return port

    def fileno(self) -> int:
        return self._sock.fileno() if self._sock is not None else int(self._fd)  # type: ignore

    def write(self, data: bytes) -> None:
        try:
            if self._sock is not None:
                self._sock.sendall(data)
                return
            view = memoryview(data)
            while view:
                _, ready, _ = select.select([], [self.fileno()], [], 10.0)
                if not ready:
                    raise LinkError(f"{self.spec}: cannot write (timeout)")
                view = view[os.write(self.fileno(), view):]
        except OSError as e:
            raise LinkError(f"{self.spec}: write failed: {e.strerror or e}") from None

    def read(self, n: int, deadline: float) -> bytes:
        """Exactly n bytes, or LinkError at the deadline or when the other end closes."""
        out = bytearray()
        while len(out) < n:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fileno()], [], [], max(left, 0))
            if not ready:
                raise LinkError(f"{self.spec}: no answer from the board (timeout)")
            try:
                chunk = (self._sock.recv(n - len(out)) if self._sock is not None
                         else os.read(self.fileno(), n - len(out)))
            except OSError as e:
                raise LinkError(f"{self.spec}: read failed: {e.strerror or e}") from None
            if not chunk:
                raise LinkError(f"{self.spec}: the board closed the connection")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        elif self._fd is not None:
            os.close(self._fd)
        self._sock = self._fd = None


def _open_device(path: str, baud: int) -> int:
    import termios
    import tty

    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as e:
        raise LinkError(f"cannot open {path}: {e.strerror or e}") from None
    try:
        tty.setraw(fd)
        attrs = termios.tcgetattr(fd)
        speed = getattr(termios, f"B{baud}", None)
        if speed is None:
            raise LinkError(f"--baud {baud}: not a standard baud rate")
        attrs[4] = attrs[5] = speed
        attrs[2] |= termios.CLOCAL | termios.CREAD
        termios.tcsetattr(fd, termios.TCSANOW, attrs)
    except termios.error as e:
        os.close(fd)
        raise LinkError(f"{path} is not a serial device or pty: {e}") from None
    return fd


# --- requests ----------------------------------------------------------------------------------


@dataclass
class Hello:
    protocol: int
    counter: str
    dwt: str
    model: dict


@dataclass
class Profile:
    counter: str
    dwt: str
    total: int
    kernels: list[tuple[str, int, int]]  # (name, cycles, calls) in schedule order


class Link:
    """Requests over a Port; a damaged frame (bad CRC either way) is sent again, up to
    ``retries`` times, and counted in ``crc_errors``."""

    def __init__(self, port: Port, timeout: float = 30.0, retries: int = 3) -> None:
        self.port, self.timeout, self.retries = port, timeout, retries
        self.seq = 0
        self.crc_errors = 0

    def request(self, kind: int, payload: bytes = b"", corrupt: bool = False) -> bytes:
        """The reply's payload. ``corrupt`` flips one bit of the first attempt's CRC (tests)."""
        for attempt in range(self.retries + 1):
            self.seq = (self.seq + 1) & 0xFF
            data = bytearray(frame(kind, self.seq, payload))
            if corrupt and attempt == 0:
                data[-1] ^= 0x01
            self.port.write(bytes(data))
            try:
                rkind, rseq, body = self._receive()
                while rseq != self.seq and not _is_fault(rkind, body):  # a stale reply
                    rkind, rseq, body = self._receive()
            except _DamagedFrame:
                self.crc_errors += 1
                continue
            if rkind == ERROR:
                code, request, detail = struct.unpack("<BBI", body[:6])
                if code == E_BAD_CRC:
                    self.crc_errors += 1
                    continue
                raise FirmwareError(code, request, detail)
            if rkind != kind | REPLY:
                raise LinkError(f"{self.port.spec}: unexpected reply type {rkind:#04x} seq "
                                f"{rseq} to request {kind:#04x} seq {self.seq}")
            return body
        raise LinkError(f"{self.port.spec}: {self.retries + 1} attempts, every frame damaged "
                        f"(bad CRC): check the baud rate and the cable")

    def _receive(self) -> tuple[int, int, bytes]:
        deadline = time.monotonic() + self.timeout
        window = b""
        while window != MAGIC:  # skip anything before the magic (a board's boot chatter)
            window = (window + self.port.read(1, deadline))[-2:]
        header = self.port.read(6, deadline)
        kind, seq, length = struct.unpack("<BBI", header)
        if length > MAX_FRAME:
            raise _DamagedFrame
        body = self.port.read(length, deadline)
        (crc,) = struct.unpack("<I", self.port.read(4, deadline))
        if zlib.crc32(header + body) != crc:
            raise _DamagedFrame
        return kind, seq, body

    def hello(self) -> Hello:
        body = self.request(HELLO)
        version, counter, dwt = body[0], body[1], body[2]
        try:
            model = json.loads(body[4:].decode())
        except ValueError:
            raise LinkError(f"{self.port.spec}: HELLO's model description is not JSON") from None
        return Hello(version, COUNTERS.get(counter, str(counter)), DWT_STATES.get(dwt, str(dwt)),
                     model)

    def run(self, inputs: bytes) -> bytes:
        return self.request(RUN, inputs)

    def profile(self) -> Profile:
        body = self.request(PROFILE)
        counter, dwt = body[0], body[1]
        n, total = struct.unpack_from("<IQ", body, 4)
        pos, kernels = 16, []
        for _ in range(n):
            cycles, calls, length = struct.unpack_from("<QIB", body, pos)
            pos += 13
            kernels.append((body[pos:pos + length].decode(errors="replace"), cycles, calls))
            pos += length
        return Profile(COUNTERS.get(counter, str(counter)), DWT_STATES.get(dwt, str(dwt)), total,
                       kernels)


class _DamagedFrame(Exception):
    pass


def _is_fault(kind: int, body: bytes) -> bool:
    return kind == ERROR and body[:1] == bytes([E_FAULT])
