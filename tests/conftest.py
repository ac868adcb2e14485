"""Shared fixtures: a per-session aotc build cache so repeated builds are reused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests share one cache of built libraries (content-addressed, safe across xdist workers).
os.environ.setdefault("AOTC_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".aotc-cache"))
# Every bundle built on the host (op tests, node suite, models) must also be warning-free under
# clang -std=c99 -Wall -Wextra -Werror -pedantic (aotc.targets.host.clang_check).
os.environ.setdefault("AOTC_CLANG_CHECK", "1")

SHARED_MODELS = Path(__file__).resolve().parents[2] / "shared" / "models" / "mlperf_tiny"


@pytest.fixture
def mlperf_dir() -> Path:
    if not SHARED_MODELS.is_dir():
        pytest.fail(f"MLPerf Tiny models not found at {SHARED_MODELS} (../shared/models)")
    return SHARED_MODELS


# --- the ONNX node-suite tally, printed at the end of any run that includes tests/onnx_node:
# `onnx-node: N passed, M failed, K excluded` over the static-numeric subset (excluded = listed
# in aotc/data/onnx_node_exclusions.txt). Here, not in tests/onnx_node/conftest.py: pytest only
# calls a sub-directory conftest's terminal-summary hook when run from inside that directory.
def _onnx_node_tally(terminalreporter):  # type: ignore[no-untyped-def]
    passed = failed = excluded = 0
    for key in ("passed", "failed", "error"):
        for rep in terminalreporter.stats.get(key, []):
            props = dict(getattr(rep, "user_properties", []))
            if "onnx_node" not in props or not props.get("onnx_node_static"):
                continue
            if getattr(rep, "when", "call") != "call" and key == "passed":
                continue
            if props["onnx_node"] == "excluded":
                excluded += 1
            elif key == "passed":
                passed += 1
            else:
                failed += 1
    return passed, failed, excluded


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # type: ignore[no-untyped-def]
    passed, failed, excluded = _onnx_node_tally(terminalreporter)
    if passed or failed or excluded:
        total = passed + failed + excluded
        terminalreporter.write_line(
            f"onnx-node: {passed} passed, {failed} failed, {excluded} excluded "
            f"(static-numeric subset of onnx 1.22.0: {total} tests)")
