"""Progress bars: drawn on a terminal (a pseudo-terminal here), never in pipes, under CI or with
--quiet; the command's own output is the same either way."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from aotc import progress

KWS = "kws_ref_model_int8_qdq.onnx"


def _aotc(args: list[str], *, tty: bool, env_extra: dict[str, str] | None = None
          ) -> tuple[int, str, str]:
    """Runs the CLI with stderr on a pseudo-terminal (tty) or a pipe; (status, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "AOTC_PROGRESS")}
    env["AOTC_PROGRESS_DELAY"] = "0"  # draw at once: the commands here are short
    env.update(env_extra or {})
    cmd = [sys.executable, "-m", "aotc", *args]
    if not tty:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        return p.returncode, p.stdout, p.stderr
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        err += chunk
    out = proc.communicate(timeout=600)[0]
    os.close(master)
    return proc.returncode, out.decode(), err.decode(errors="replace")


@pytest.fixture
def inspect_args(mlperf_dir: Path) -> list[str]:
    return ["inspect", str(mlperf_dir / KWS)]


def test_bar_on_a_terminal_only(inspect_args: list[str]) -> None:
    rc, out, err = _aotc(inspect_args, tty=True)
    assert rc == 0, err
    assert "aotc inspect:" in err and "100%|" in err and "lowering kernel" in err, err[-500:]
    rc2, out2, err2 = _aotc(inspect_args, tty=False)
    assert rc2 == 0 and out2 == out  # the report itself does not change
    assert err2 == "", err2  # a pipe gets no bar


@pytest.mark.parametrize("how", ["--quiet", "CI", "AOTC_PROGRESS=0"])
def test_quiet_ci_and_off(inspect_args: list[str], how: str) -> None:
    args, env = list(inspect_args), {}
    if how == "--quiet":
        args.append("--quiet")
    else:
        k, _, v = how.partition("=")
        env[k] = v or "true"
    rc, out, err = _aotc(args, tty=True, env_extra=env)
    assert rc == 0 and "aotc: " not in err and "%|" not in err, err


def test_verify_board_stages(tmp_path: Path, mlperf_dir: Path) -> None:
    """verify --board counts compile, build and one stage per vector; a failure still ends in
    the one-line error after the bar is cleared."""
    rc, out, err = _aotc(["verify", str(mlperf_dir / KWS), "--board", "cortex-m4f", "--atol",
                          "255"], tty=True)
    assert rc == 0, err
    assert "aotc verify:" in err and "/4 [" in err and "build for cortex-m4f" in err, err[-800:]
    assert "vector 2/2" in err and out.startswith("aotc: verify OK on cortex-m4f")
    rc, out, err = _aotc(["verify", str(mlperf_dir / KWS), "--atol", "0"], tty=True)
    assert rc == 2
    last = err.replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("aotc: error: verification failed"), err[-500:]


def test_wanted_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty:
        def __init__(self, tty: bool) -> None:
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("AOTC_PROGRESS", raising=False)
    assert progress.wanted(stream=Tty(True))  # type: ignore[arg-type]
    assert not progress.wanted(stream=Tty(False))  # type: ignore[arg-type]
    assert not progress.wanted(True, stream=Tty(True))  # type: ignore[arg-type]
    monkeypatch.setenv("CI", "1")
    assert not progress.wanted(stream=Tty(True))  # type: ignore[arg-type]
    # The Python API never draws: QUIET is the default of every library function.
    assert progress.QUIET._bar is None
