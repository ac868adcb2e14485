"""A reader that stops early (`aotc inspect model.onnx | head`) is not an error: exit 0 and
nothing on stderr, so `set -o pipefail` scripts such as scripts/demo.sh keep going."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_stdout_closed_by_the_reader(mlperf_dir: Path) -> None:
    p = subprocess.Popen([sys.executable, "-m", "aotc", "inspect",
                          str(mlperf_dir / "kws_ref_model_int8_qdq.onnx")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # no reader left: the first write gets EPIPE
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 0 and err == "", err
