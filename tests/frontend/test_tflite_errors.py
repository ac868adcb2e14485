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
    """Every operator that cannot be converted, one line each (index, builtin, tensor types,
    what is supported), before anything is converted; exit 2."""
    net = Net(True)
    x = net.input(SHAPE)
    y = net.op("EXP", [x], SHAPE)                       # 0: a builtin, not for int8
    y = net.op("RELU", [y], SHAPE)                      # 1: fine
    y = net.op("RFFT2D", [y, net.ints([4, 4])], SHAPE)  # 2: no converter
    y = net.custom("ethos-u", [y], SHAPE)               # 3: the NPU
    y = net.custom("TFLM_DECODE", [y], SHAPE)           # 4: compressed tensors
    y = net.custom("SignalWindow", [y], SHAPE)          # 5: a Signal operator, not for int8
    y = net.custom("MyOp", [y], SHAPE)                  # 6: someone's custom op
    path = tmp_path / "m.tflite"
    path.write_bytes(net.build([y]))
    res = _cli(path, tmp_path / "o")
    assert "Traceback" not in res.stderr and res.returncode == 2, res.stderr
    lines = res.stderr.splitlines()
    assert all(ln.startswith("aotc: error: ") for ln in lines), lines
    assert "6 operator(s) cannot be converted" in lines[0], lines[0]
    body = lines[1:]
    assert len(body) == 6, lines
    want = [("operator 0 EXP (int8 -> int8)", "int8 is not supported", "for float32"),
            ("operator 2 RFFT2D (int8, int32 -> int8)", "no converter"),
            ("operator 3 CUSTOM:ethos-u", "Ethos-U"),
            ("operator 4 CUSTOM:TFLM_DECODE", "DECODE is not supported"),
            ("operator 5 CUSTOM:SignalWindow", "int8 is not supported", "for int16"),
            ("operator 6 CUSTOM:MyOp", "custom operators are not supported")]
    for line, needles in zip(body, want):
        for n in needles:
            assert n in line, f"{n!r} not in {line!r}"
    assert not any("RELU" in ln for ln in body)


def test_unsupported_type_of_a_supported_builtin(tmp_path):
    """A bool tensor into a float op: named with the types the builtin takes."""
    net = Net(False)
    x = net.input(SHAPE, np.bool_)
    y = net.op("ABS", [x], SHAPE, dtype=np.bool_)
    path = tmp_path / "m.tflite"
    path.write_bytes(net.build([y]))
    res = _cli(path, tmp_path / "o")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "operator 0 ABS (bool -> bool): bool is not supported; aotc converts ABS for " \
           "float32, int8" in res.stderr, res.stderr


def test_int8_operands_of_different_parameters_are_refused(tmp_path):
    """MAXIMUM on int8 compares the stored integers in TFLM: operands of different scales
    are refused, never computed differently."""
    net = Net(True)
    x = net.input(SHAPE)
    c = net.const(np.linspace(-3, 3, SHAPE[-1]))
    y = net.op("MAXIMUM", [x, c], SHAPE)
    path = tmp_path / "m.tflite"
    path.write_bytes(net.build([y]))
    _one_line(_cli(path, tmp_path / "o"), "(MAXIMUM)", "one scale and zero point")


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
