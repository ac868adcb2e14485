#!/usr/bin/env bash
# Refresh requirements/test-lock.txt, the complete pinned test environment: a fresh venv,
# `pip install ".[test]"` with the few top-level pins below, then `pip freeze`.
# Change a pin here (e.g. a new onnxruntime), run `bash scripts/lock.sh`, run the suite, commit.
set -euo pipefail
cd "$(dirname "$0")/.."

# torch: the CPU-only wheel (the default Linux wheel pulls gigabytes of CUDA libraries); pip
# must be able to find it (see scripts/setup.sh)
PINS=(onnx==1.23.2 onnxruntime==1.32.0 torch==2.13.0+cpu)   # the node-suite data is the onnx 1.22.0 wheel's (fetched by the harness); the installed onnx is 1.23.2, whose reference evaluator the op tests use
LOCK=requirements/test-lock.txt

venv="$(mktemp -d)/venv"
trap 'rm -rf "$(dirname "$venv")"' EXIT
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${PINS[@]}" ".[test]"
{
    echo "# The pinned test environment: every package of \`pip install \".[test]\"\`, transitive"
    echo "# dependencies included. Used as a constraints file by scripts/setup.sh:"
    echo "#   pip install -c requirements/test-lock.txt -e \".[test]\""
    echo "# Refresh (fresh venv, top-level pins in scripts/lock.sh, pip freeze): bash scripts/lock.sh"
    echo "# Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())'), top-level pins: ${PINS[*]}"
    "$venv/bin/python" -m pip freeze --exclude-editable --all --disable-pip-version-check \
        | grep -v -E '^(aotc|pip|setuptools|wheel)([= @]|$)'
} > "$LOCK"
echo "lock: wrote $LOCK ($(grep -c '==' "$LOCK") packages)"
