#!/usr/bin/env bash
# Set up (Python deps, cross toolchains, QEMU), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 -m pytest -q -n "${AOTC_TEST_JOBS:-2}" "$@"
