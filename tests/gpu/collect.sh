#!/usr/bin/env bash
# Copies what the GPU suites need to run on a machine without meson (the device machine) into one
# directory: the test binaries, their peer program and libcudaipc (links resolved).
#   bash tests/gpu/collect.sh BUILD_DIR DEST      e.g.  bash tests/gpu/collect.sh build-cuda .gpu
set -euo pipefail
build=${1:?usage: collect.sh BUILD_DIR DEST}
dest=${2:?usage: collect.sh BUILD_DIR DEST}
mkdir -p "$dest"
for f in cudaipc-gpu-backend-test cudaipc-gpu-channel-test cudaipc-gpu-peer; do
  cp -f "$build/tests/gpu/$f" "$dest/"
done
for f in "$build"/core/libcudaipc.so*; do
  case $f in *.symbols|*.p) continue ;; esac
  cp -fL "$f" "$dest/"
done
ls -l "$dest"
