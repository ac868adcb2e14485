#!/usr/bin/env bash
# Install what aotc needs on a fresh Debian machine: the Python package with its test extras at
# the pinned versions of requirements/test-lock.txt (refresh: bash scripts/lock.sh), clang (every
# test bundle is also compiled with it), graphviz (aotc report) and, unless AOTC_NO_CROSS=1, the
# test tools: the cross toolchains and QEMU of the board tests, a headless Chromium for the
# report test.
set -euo pipefail
cd "$(dirname "$0")/.."

# The test extra includes aotc[torch], pinned to the CPU-only torch wheel (a local version,
# +cpu: the default Linux wheel pulls gigabytes of CUDA libraries). It is not on the default
# package index: pip must be pointed at PyTorch's CPU wheel index or a directory holding it.
torch_pin="$(grep -E '^torch==' requirements/test-lock.txt)"
if ! python3 -m pip install --quiet --disable-pip-version-check -c requirements/test-lock.txt \
        "$torch_pin"; then
    echo "setup: pip cannot install $torch_pin, the CPU-only PyTorch wheel the tests pin" \
         "(requirements/test-lock.txt). Point pip at PyTorch's CPU wheel index" \
         "(PIP_EXTRA_INDEX_URL) or at a directory holding the wheel (PIP_FIND_LINKS), then" \
         "run this again." >&2
    exit 1
fi
python3 -m pip install --quiet --disable-pip-version-check -c requirements/test-lock.txt \
    -e ".[test]"

need=()
command -v clang >/dev/null || need+=(clang)
command -v dot >/dev/null || need+=(graphviz)  # aotc report draws the fused graph with dot

if [ "${AOTC_NO_CROSS:-0}" != "1" ]; then
    command -v arm-none-eabi-gcc >/dev/null || need+=(gcc-arm-none-eabi libnewlib-arm-none-eabi)
    command -v qemu-system-arm >/dev/null || need+=(qemu-system-arm)
    command -v qemu-system-riscv32 >/dev/null || need+=(qemu-system-misc)
    command -v riscv64-unknown-elf-gcc >/dev/null || need+=(gcc-riscv64-unknown-elf)
    [ -d /usr/lib/picolibc/riscv64-unknown-elf ] || need+=(picolibc-riscv64-unknown-elf)
    command -v valgrind >/dev/null || need+=(valgrind)
    command -v cmake >/dev/null || need+=(cmake)
    # the report test renders the HTML in a headless browser
    command -v chromium-headless-shell >/dev/null || command -v chromium >/dev/null \
        || need+=(chromium-headless-shell)
fi
if [ ${#need[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" = "0" ] || SUDO="sudo"
    echo "setup: installing ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
