"""Checks of a compiled MLPerf Tiny int8 bundle against TFLM's golden outputs (output_tflm in
the model's vectors file, ../shared/models): the tests of memory options share them."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def assert_tflm_bytes(bundle, mlperf_dir: Path, stem: str,  # type: ignore[no-untyped-def]
                      board: str | None = None, vectors: int | None = None) -> None:
    """The bundle run on the host (``board`` None, through cffi) or as firmware on ``board`` in
    QEMU gives exactly output_tflm on the first ``vectors`` inputs (all when None)."""
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    inputs, want = vec["input"][:vectors], vec["output_tflm"][:vectors]
    runner = bundle.load(board) if board else bundle.load()
    i, o = runner.meta["inputs"][0]["name"], runner.meta["outputs"][0]["name"]
    got = np.stack([runner.run({i: x})[o] for x in inputs])
    np.testing.assert_array_equal(got.reshape(want.shape), want)
