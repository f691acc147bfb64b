#!/usr/bin/env bash
# Copies what the GPU suites need to run on a machine without meson (the device machine) into one
# directory: the test binaries, their peer program, the GPU pipeline benchmark
# (tests/bench/gpu/run-mps.sh runs it) and libcudaipc under its soname.
#   bash tests/gpu/collect.sh BUILD_DIR DEST      e.g.  bash tests/gpu/collect.sh build-cuda .gpu
set -euo pipefail
build=${1:?usage: collect.sh BUILD_DIR DEST}
dest=${2:?usage: collect.sh BUILD_DIR DEST}
mkdir -p "$dest"
for f in cudaipc-gpu-backend-test cudaipc-gpu-channel-test cudaipc-gpu-peer; do
  cp -f "$build/tests/gpu/$f" "$dest/"
done
cp -f "$build/tests/bench/cudaipc-bench-gpu-pipeline" "$build/tests/bench/cudaipc-bench" "$dest/"
# Issue #8's probe of streams blocked in cuStreamWaitValue32: a bench program, not a suite; built
# only with the CUDA backend.
for probe in cudaipc-bench-blocked-streams cudaipc-bench-timeslice cudaipc-bench-join-stall; do
  if [ -f "$build/tests/bench/$probe" ]; then cp -f "$build/tests/bench/$probe" "$dest/"; fi
done
# Only the name the binaries ask for (the soname), as a plain file.
# The cudaipc command's CUDA paths (issue #21): pub in GPU memory, cat's download.
if [ -x "$build/core/cli/cudaipc" ]; then
  cp -f "$build/core/cli/cudaipc" "$(dirname "$0")/../cli/gpu_cli.sh" "$dest/"
fi
soname=$(readelf -d "$build/core/libcudaipc.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
cp -fL "$build/core/$soname" "$dest/"
# Debug info is most of their size, and what travels to the device is capped.
if command -v strip >/dev/null; then strip --strip-debug "$dest"/cudaipc-* "$dest/$soname"; fi
ls -l "$dest"
