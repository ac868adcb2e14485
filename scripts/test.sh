#!/usr/bin/env bash
# Set up (pinned Python deps, clang, cross toolchains, QEMU), then run the whole test suite, then
# (for the whole suite, i.e. without arguments) the op tests once more with every bundle built
# under AddressSanitizer + UndefinedBehaviorSanitizer (scripts/sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 -m pytest -q -n "${AOTC_TEST_JOBS:-2}" "$@"
if [ "$#" -eq 0 ]; then
    echo "test.sh: the op tests again with ASan+UBSan (scripts/sanitize.sh tests/ops)"
    bash scripts/sanitize.sh tests/ops
fi
