#!/usr/bin/env bash
# Run pytest with every host bundle built with AddressSanitizer + UndefinedBehaviorSanitizer
# (aotc/targets/host.py, AOTC_SANITIZE=1). The first report kills the process that loaded the bundle;
# under pytest-xdist that is a worker, which xdist reports as a failure of the test it was
# running ("worker 'gw0' crashed while running ...") and replaces. pytest captures sys.stderr
# only (--capture=sys), so the report reaches the terminal instead of a capture file that dies
# with the worker.
#
#   bash scripts/sanitize.sh                         # tests/ops, host only
#   bash scripts/sanitize.sh tests/ops/test_index.py -k gather
#
# AOTC_TEST_BOARDS is empty unless set (the QEMU re-runs do not use the sanitised build);
# AOTC_TEST_JOBS sets the xdist workers (default 2; at least 1, so a crash stays one failure).
set -euo pipefail
cd "$(dirname "$0")/.."
CC="${CC:-gcc}"
asan="$("$CC" -print-file-name=libasan.so)"
ubsan="$("$CC" -print-file-name=libubsan.so)"
for lib in "$asan" "$ubsan"; do
    if [ ! -e "$lib" ]; then
        echo "sanitize.sh: $CC has no ${lib##*/} (install its sanitizer runtimes)" >&2
        exit 2
    fi
done
export CC
export AOTC_SANITIZE=1
export AOTC_TEST_BOARDS="${AOTC_TEST_BOARDS-}"
# Python is not instrumented: the runtimes must be loaded first, and its own allocations are
# not ours to report (detect_leaks=0).
export LD_PRELOAD="$asan $ubsan${LD_PRELOAD:+ $LD_PRELOAD}"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
if [ "$#" -eq 0 ]; then
    set -- tests/ops
fi
exec python3 -m pytest -q -p no:cacheprovider --capture=sys -n "${AOTC_TEST_JOBS:-2}" "$@"
