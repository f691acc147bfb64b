#!/usr/bin/env bash
# Runs the Python package's suites (the GPU ones included) on a machine without a package
# registry, from the wheels build-device-bundle.sh made: nothing is compiled here. Uses the
# machine's python3 (torch, cupy, numpy already installed); each test is limited to
# CUDAIPC_TEST_TIMEOUT seconds (default 120). Logs and the JUnit report go to $OUT.
#   python/tests/run-on-device.sh [DIST_DIR]        (default build/python-dist)
# For the GStreamer round trip, set CUDAIPC_GST_PLUGIN_DIR to a built plugin and put
# gst-launch-1.0 on PATH (e.g. from the carried GStreamer bundle's env.sh); it skips otherwise.
set -uo pipefail
cd "$(dirname "$0")/../.."
dist=${1:-build/python-dist}
out=${OUT:-$PWD/build/python-device-out}
py=${PYTHON:-python3}
mkdir -p "$out"
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
{
  echo "== $(date -u) on $(hostname)"
  "$py" --version
  nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1 || true
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
  "$py" -c 'import cupy; print("cupy", cupy.__version__)' 2>&1
} | tee "$out/environment.txt"

wheel=$(ls "$dist"/cudaipc-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { echo "no cudaipc wheel in $dist: run build-device-bundle.sh first" >&2; exit 2; }
# A target directory rather than a venv: the system's torch and cupy stay importable. Without pip
# a wheel is a zip file, and unpacking it is its installation.
if ! "$py" -m pip install -q --no-index --no-deps --target "$site" "$wheel" 2>"$out/pip.log"; then
  "$py" -m zipfile -e "$wheel" "$site" || exit 2
fi
if ! "$py" -c 'import pytest' 2>/dev/null; then
  "$py" -m pip install -q --no-index --find-links "$dist" --target "$site" pytest \
    2>>"$out/pip.log" || { echo "pytest is neither installed nor installable from $dist" >&2; exit 2; }
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export CUDAIPC_TEST_TIMEOUT=${CUDAIPC_TEST_TIMEOUT:-120}
"$py" -c 'import cudaipc, sys; print("cudaipc from", cudaipc.__file__)' | tee -a "$out/environment.txt"
"$py" -m pytest python/tests -v -rA -p no:cacheprovider --junitxml="$out/pytest.xml" \
  2>&1 | tee "$out/pytest.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 5 ] && rc=0
exit "$rc"
