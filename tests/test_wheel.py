"""An installed aotc works like a checkout: build the wheel, install it into a fresh venv (the
dependencies at the pinned versions of requirements/test-lock.txt, from the local pip cache),
and from a directory outside the checkout compile, verify on the host, and run and bench on
an emulated Cortex-M0+. Every data file (templates, runtime, boards, the firmware
CMakeLists.txt, the QEMU plugin source) must come from the wheel. About a minute."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[1]


def _model(path: Path) -> None:
    """y = Relu(x @ W + b): small enough for the micro:bit's 16 KB of RAM."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["u"]),
         helper.make_node("Relu", ["u"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
              path)


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 300) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} -> {proc.returncode}\n{proc.stdout}{proc.stderr}"
    return proc.stdout


def test_installed_wheel_compiles_verifies_and_runs_on_a_board(tmp_path: Path) -> None:
    # The environment of a user outside the checkout: nothing points at it.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["AOTC_CACHE_DIR"] = str(tmp_path / "cache")  # no recipe or library made from the checkout
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")  # the QEMU plugin is built from the wheel's copy
    work = tmp_path / "work"
    work.mkdir()

    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
          str(REPO)], work, env)
    (wheel,) = (tmp_path / "dist").glob("aotc-*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], work, env)
    py, aotc = venv / "bin" / "python", venv / "bin" / "aotc"
    _run([str(py), "-m", "pip", "install", "-q", "-c", str(REPO / "requirements" / "test-lock.txt"),
          str(wheel)], work, env)

    # The venv's aotc is the wheel's, and it finds its data inside the installed package.
    where = _run([str(py), "-c", "import aotc, aotc.paths as p; print(aotc.__file__); "
                  "print(p.data_root()); print(p.cmake_lists())"], work, env).split()
    site = venv / "lib"
    assert all(Path(w).resolve().is_relative_to(site.resolve()) for w in where), where
    assert Path(where[1]).name == "_data" and Path(where[2]).is_file(), where

    _model(work / "tiny.onnx")
    np.savez(work / "x.npz", x=np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8))
    _run([str(aotc), "compile", "tiny.onnx", "-o", "out", "--name", "tiny"], work, env)
    assert (work / "out" / "tiny.c").is_file() and (work / "out" / "runtime").is_dir()
    _run([str(aotc), "verify", "tiny.onnx"], work, env)
    ran = _run([str(aotc), "run", "tiny.onnx", "--board", "cortex-m0plus", "--inputs", "x.npz"],
               work, env)
    assert "y" in ran, ran
    bench = _run([str(aotc), "bench", "tiny.onnx", "--board", "cortex-m0plus"], work, env)
    assert "cortex-m0plus" in bench and "instructions" in bench.lower(), bench
