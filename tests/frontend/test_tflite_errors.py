"""TFLite user errors: each is one line, exit 2 through the CLI, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from tflite_builder import Net, options

SHAPE = (1, 4, 4, 3)


def _cli(model: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aotc", "compile", str(model), "-o", str(out)],
                          capture_output=True, text=True, timeout=300)


def _one_line(res: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert "Traceback" not in res.stderr + res.stdout, res.stderr
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("aotc: error: "), res.stderr
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"
    return lines[0]


def test_unsupported_ops_are_listed_in_one_error(tmp_path):
    net = Net(False)
    x = net.input(SHAPE)
    y = net.op("EXP", [x], SHAPE)
    y = net.op("SQRT", [y], SHAPE)
    y = net.op("RELU", [y], SHAPE)
    y = net.op("EXP", [y], SHAPE)
    path = tmp_path / "m.tflite"
    path.write_bytes(net.build([y]))
    line = _one_line(_cli(path, tmp_path / "o"), "unsupported TFLite operator(s): EXP, SQRT")
    assert "RELU" not in line


def test_not_a_tflite_file(tmp_path):
    path = tmp_path / "m.tflite"
    path.write_bytes(b"\x00" * 64)
    _one_line(_cli(path, tmp_path / "o"), "not a TFLite model")


def test_truncated_flatbuffer(tmp_path):
    net = Net(False)
    x = net.input(SHAPE)
    data = net.build([net.op("RELU", [x], SHAPE)])
    for cut in (16, len(data) // 2, len(data) - 8):
        path = tmp_path / f"m{cut}.tflite"
        path.write_bytes(data[:cut])
        _one_line(_cli(path, tmp_path / f"o{cut}"))


def test_dynamic_filter_names_the_node(tmp_path):
    net = Net(False)
    x = net.input(SHAPE)
    w = net.input((2, 1, 1, 3))
    y = net.op("CONV_2D", [x, w], (1, 4, 4, 2), options("Conv2DOptions", strideH=1, strideW=1))
    path = tmp_path / "m.tflite"
    path.write_bytes(net.build([y]))
    _one_line(_cli(path, tmp_path / "o"), "(CONV_2D)", "filter", "must be a constant")


def test_per_channel_activation_is_refused(tmp_path):
    net = Net(True)
    x = net.input(SHAPE)
    y = net.op("RELU", [x], SHAPE)
    q = net.tensors[y].quantization
    q.scale, q.zeroPoint, q.quantizedDimension = (np.array([0.1, 0.2, 0.3], np.float32),
                                                  np.zeros(3, np.int64), 3)
    path = tmp_path / "m.tflite"
    path.write_bytes(net.build([y]))
    _one_line(_cli(path, tmp_path / "o"), "(RELU)", "per-channel")
