"""Shared fixtures: a per-session aotc build cache so repeated builds are reused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests share one cache of built libraries (content-addressed, safe across xdist workers).
os.environ.setdefault("AOTC_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".aotc-cache"))

SHARED_MODELS = Path(__file__).resolve().parents[2] / "shared" / "models" / "mlperf_tiny"


@pytest.fixture
def mlperf_dir() -> Path:
    if not SHARED_MODELS.is_dir():
        pytest.fail(f"MLPerf Tiny models not found at {SHARED_MODELS} (../shared/models)")
    return SHARED_MODELS
