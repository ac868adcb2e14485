"""Reproducible output: the same model bytes and options give byte-identical bundles wherever
they are compiled: other working directory, other absolute model path, other output directory,
another copy of CMSIS-NN; and the relocatable library paths still resolve for a build."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aotc.byoc import roots
from aotc.codegen.reproducible import recorded_command
from aotc.errors import AotcError
from aotc.targets import libraries

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
MODEL = SHARED / "models" / "mlperf_tiny" / "ad01_int8_qdq.onnx"
CMSIS_NN = SHARED / "third_party" / "cmsis-nn"


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _compile(cwd: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("AOTC_DEBUG", "CMSIS_NN_PATH")}
    env["PYTHONPATH"] = str(REPO)
    res = subprocess.run([sys.executable, "-m", "aotc", "compile", *args, "-q"], cwd=cwd,
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr


def _copy_cmsis_nn(dst: Path) -> Path:
    for sub in ("Include", "Source"):
        shutil.copytree(CMSIS_NN / sub, dst / sub)
    return dst


def test_two_machines_give_byte_identical_bundles(tmp_path: Path) -> None:
    """One compile from a/ with relative paths, one from elsewhere with absolute paths to other
    copies of the model, the tuning log and CMSIS-NN, writing to another output directory."""
    a, b = tmp_path / "alice" / "proj", tmp_path / "bob"
    for d, model_dir, lib_dir in ((a, a / "models", a / "third_party"), (b, b, b / "deps")):
        model_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(MODEL, model_dir / "ad.onnx")
        (d / "tune.jsonl").write_text("")
        _copy_cmsis_nn(lib_dir / "cmsis-nn")
    opts = ["--name", "ad", "--byoc", "cmsis-nn", "--target", "cortex-m4f"]
    _compile(a, "models/ad.onnx", "-o", "out", "--cmsis-nn-path", "third_party/cmsis-nn",
             "--tuning-log", "tune.jsonl", *opts)
    _compile(tmp_path, str(b / "ad.onnx"), "--output", str(tmp_path / "x" / "y" / "bundle"),
             f"--cmsis-nn-path={b / 'deps' / 'cmsis-nn'}", "--tuning-log",
             str(b / "tune.jsonl"), *opts)
    one, two = _files(a / "out"), _files(tmp_path / "x" / "y" / "bundle")
    assert set(one) == set(two) and "bundle.json" in one and "CMakeLists.txt" in one
    for name in one:
        assert one[name] == two[name], f"{name} differs between the two compiles"
    for name, data in one.items():  # no absolute path of either machine anywhere
        assert str(tmp_path).encode() not in data, name
    assert b"${CMSIS_NN_PATH}/Source/" in one["bundle.json"]
    assert b"Command: aotc compile ad.onnx -o" not in one["ad.c"]
    assert b"--cmsis-nn-path cmsis-nn" in one["ad.c"]


def test_recorded_command_keeps_options_and_file_names_only() -> None:
    argv = ["compile", "/home/u/m/kws.onnx", "-o", "/tmp/out", "--tuning-log", "/h/log.jsonl",
            "--byoc=cmsis-nn,/h/be/backend.py", "--cmsis-nn-path=/opt/cmsis-nn", "-o/tmp/o2",
            "--output=/tmp/o3", "--pool", "dtcm:64K:.dtcm", "--name", "kws"]
    assert recorded_command(argv, "/home/u/m/kws.onnx") == (
        "aotc compile kws.onnx --tuning-log log.jsonl --byoc cmsis-nn,backend.py "
        "--cmsis-nn-path cmsis-nn --pool dtcm:64K:.dtcm --name kws")
    assert recorded_command(["compile", "m.onnx", "--byoc", "./x/my.py,cmsis-nn"], "m.onnx") == (
        "aotc compile m.onnx --byoc my.py,cmsis-nn")


def test_relocatable_library_paths_expand_from_the_registry_or_environment(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lib = {"name": "cmsis-nn", "sources": ["${CMSIS_NN_PATH}/Source/a.c"],
           "include_dirs": ["${CMSIS_NN_PATH}/Include"], "defines": [], "cflags": []}
    monkeypatch.setattr(roots, "_ROOTS", {})
    monkeypatch.delenv("CMSIS_NN_PATH", raising=False)
    with pytest.raises(AotcError, match="set the CMSIS_NN_PATH environment variable"):
        roots.expand(lib)
    monkeypatch.setenv("CMSIS_NN_PATH", str(tmp_path / "env"))
    assert roots.expand(lib)["sources"] == [f"{tmp_path}/env/Source/a.c"]
    roots.register_root("CMSIS_NN_PATH", tmp_path / "reg")  # the compile's own tree first
    assert libraries.include_flags([lib]) == ["-isystem", f"{tmp_path}/reg/Include"]


def test_relocated_bundle_configures_against_another_cmsis_nn_copy(tmp_path: Path) -> None:
    """The bundle's CMakeLists.txt names no path of the compiling machine, and configures
    against a copy of CMSIS-NN given by -DCMSIS_NN_PATH (the build itself: test_cmsis_nn_lib)."""
    if shutil.which("cmake") is None:
        pytest.fail("cmake is needed (scripts/setup.sh installs it)")
    _compile(tmp_path, str(MODEL), "-o", "bundle", "--name", "ad", "--byoc", "cmsis-nn",
             "--cmsis-nn-path", str(CMSIS_NN))
    text = (tmp_path / "bundle" / "CMakeLists.txt").read_text()
    assert str(CMSIS_NN) not in text
    other = _copy_cmsis_nn(tmp_path / "moved" / "cmsis-nn")
    res = subprocess.run(["cmake", "-S", str(tmp_path / "bundle"), "-B", str(tmp_path / "b"),
                          f"-DCMSIS_NN_PATH={other}"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    cache = (tmp_path / "b" / "CMakeCache.txt").read_text()
    assert f"CMSIS_NN_PATH:PATH={other}" in cache


def test_board_cmake_expands_the_library_root(tmp_path: Path) -> None:
    """aotc's firmware CMakeLists.txt (boards) reads bundle.json's ${CMSIS_NN_PATH}/... paths
    and expands them from -DCMSIS_NN_PATH (or the environment); without either it stops with
    one message naming the variable."""
    _compile(tmp_path, str(MODEL), "-o", "bundle", "--name", "ad", "--byoc", "cmsis-nn",
             "--cmsis-nn-path", str(CMSIS_NN), "--target", "cortex-m4f")
    other = _copy_cmsis_nn(tmp_path / "moved" / "cmsis-nn")
    env = {k: v for k, v in os.environ.items() if k != "CMSIS_NN_PATH"}
    main = tmp_path / "main.c"  # configure only: any main
    main.write_text("int main(void)\n{\n    return 0;\n}\n")
    base = ["cmake", "-S", str(REPO), "-DAOTC_BOARD=cortex-m4f",
            f"-DAOTC_BUNDLE={tmp_path / 'bundle'}", f"-DAOTC_MAIN={main}"]
    res = subprocess.run([*base, "-B", str(tmp_path / "b1"), f"-DCMSIS_NN_PATH={other}"],
                         capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    build_files = "".join(p.read_text(errors="replace")
                          for p in (tmp_path / "b1").rglob("*.make"))
    assert f"{other}/Source/" in build_files and str(CMSIS_NN) not in build_files
    res = subprocess.run([*base, "-B", str(tmp_path / "b2")], capture_output=True, text=True,
                         env=env)
    assert res.returncode != 0
    assert "library paths need CMSIS_NN_PATH" in " ".join(res.stderr.split())
