"""`aotc run --board` and `aotc verify --board` through the real CLI: the example model runs in
QEMU on cortex-m4f and matches onnxruntime."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import make_example  # noqa: E402


def _aotc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aotc", *args], capture_output=True, text=True,
                          cwd=ROOT)


def test_verify_on_cortex_m4f(tmp_path):
    import onnx

    model = tmp_path / "kws_tiny.onnx"
    onnx.save(make_example.build(), model)
    res = _aotc("verify", str(model), "--board", "cortex-m4f", "--atol", "1e-5")
    assert res.returncode == 0, res.stderr
    assert "verify OK on cortex-m4f" in res.stdout


def test_run_on_board_saves_outputs_equal_to_host(tmp_path):
    import onnx

    model = tmp_path / "kws_tiny.onnx"
    onnx.save(make_example.build(), model)
    x = np.random.default_rng(3).standard_normal((1, 1, 49, 10)).astype(np.float32)
    np.savez(tmp_path / "x.npz", mfcc=x)
    outs = {}
    for board in ("cortex-m33", "host"):
        res = _aotc("run", str(model), "--board", board, "--inputs", str(tmp_path / "x.npz"),
                    "--save", str(tmp_path / f"{board}.npz"), "-o", str(tmp_path / board))
        assert res.returncode == 0, res.stderr
        outs[board] = np.load(tmp_path / f"{board}.npz")["probs"]
    # Softmax uses expf: newlib's and glibc's differ in the last bit at most.
    np.testing.assert_allclose(outs["cortex-m33"], outs["host"], rtol=1e-5, atol=1e-7)


def test_unknown_board_is_one_line_error(tmp_path):
    import onnx

    model = tmp_path / "kws_tiny.onnx"
    onnx.save(make_example.build(), model)
    res = _aotc("run", str(model), "--board", "cortex-z9", "-o", str(tmp_path / "b"))
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "cortex-z9" in res.stderr
