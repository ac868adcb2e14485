"""The MLPerf Tiny float models (../shared/models): compile, run the generated C through cffi
on the golden vectors, compare with onnxruntime's outputs (``output_ort``) at max abs error
1e-4, and check the memory plan and weight size."""

from __future__ import annotations

import platform

import numpy as np
import pytest

import aotc

# The host latency benches' default build flags (bench/compile_and_size.py, bench/int8.py).
BENCH_HOST_CFLAGS = "-march=native -fpeel-loops" + (
    " -mprefer-vector-width=512" if platform.machine() in ("x86_64", "AMD64") else "")

FLOAT_MODELS = ["kws_ref_model_float", "vww_96_float", "pretrainedResnet_float", "ad01_float"]
ATOL = 1e-4


def _check_vectors(bundle, mlperf_dir, stem, label):  # type: ignore[no-untyped-def]
    """Every golden vector through the bundle on the host, within ATOL of onnxruntime's."""
    runner = bundle.load()
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    in_name = runner.meta["inputs"][0]["name"]
    out_name = runner.meta["outputs"][0]["name"]
    for k in range(vec["input"].shape[0]):
        got = runner.run({in_name: vec["input"][k]})[out_name]
        want = vec["output_ort"][k].reshape(got.shape)
        err = float(np.max(np.abs(got - want)))
        assert err <= ATOL, f"{label} vector {k}: max abs error {err}"


@pytest.mark.parametrize("stem", FLOAT_MODELS)
def test_float_model_matches_golden_vectors(stem, mlperf_dir, tmp_path):
    bundle = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path, name="m")
    _check_vectors(bundle, mlperf_dir, stem, stem)

    c = bundle.compilation
    # The planner reaches the liveness lower bound (in-place reuse may go below it).
    assert c.plan.size <= c.lower_bound + 16 * len(c.liveness.reqs), (c.plan.size, c.lower_bound)
    assert c.plan.size <= c.lower_bound, f"arena {c.plan.size} above bound {c.lower_bound}"
    # No weight bloat: the bundle's constants match the model's within 2%.
    assert abs(c.weights_bytes - c.model_const_bytes) <= 0.02 * c.model_const_bytes


@pytest.mark.parametrize("target", ["cortex-m4f", "host"])
@pytest.mark.parametrize("stem", FLOAT_MODELS)
def test_float_model_target_schedules_match_golden_vectors(stem, target, mlperf_dir, tmp_path):
    # The targets' float schedules (cortex-m4f: 4 channels x 4 pixels unrolled, gemm rows in
    # pairs; host: short loops for the vectoriser): the bundle also builds on the host.
    bundle = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path, name="m", target=target)
    _check_vectors(bundle, mlperf_dir, stem, f"{stem} {target}")


@pytest.mark.parametrize("stem", FLOAT_MODELS)
def test_float_host_build_with_bench_flags_matches_golden_vectors(stem, mlperf_dir, tmp_path,
                                                                   monkeypatch):
    # The host latency benches' flags (AOTC_HOST_CFLAGS; -ffp-contract=off stays, so no FMA).
    monkeypatch.setenv("AOTC_HOST_CFLAGS", BENCH_HOST_CFLAGS)
    bundle = aotc.compile(mlperf_dir / f"{stem}.onnx", tmp_path, name="m", target="host")
    _check_vectors(bundle, mlperf_dir, stem, f"{stem} host -march=native")


def test_vww_float_arena_beats_tflm(mlperf_dir, tmp_path):
    # TFLM plans 294,912 B for VWW float; the liveness bound of the TFLite graph is 221,184 B.
    bundle = aotc.compile(mlperf_dir / "vww_96_float.onnx", tmp_path, name="vww")
    assert bundle.arena_bytes <= 221_184
