#!/usr/bin/env bash
# Builds, in one go, everything the GPU machine runs (it has no compiler, meson, GStreamer or
# package registry), into git-ignored folders of this checkout that a device call carries:
#   .gpu               the C++ GPU suites and GPU bench programs      (tests/gpu/collect.sh)
#   .gst-gpu           the GStreamer GPU suite and bench, 1.22 and 1.28 (tests/gst/gpu/collect.sh)
#   build/python-dist  the Python wheel for the device's Python, pytest, the 1.22 bundle and the
#                      native bench rows (python/tests/build-device-bundle.sh)
# then strips every binary and prints what each carry weighs against the 64 MiB a call takes.
#   scripts/device-bundles.sh GST128_TARBALL
# GST128_TARBALL: GStreamer 1.28 as a prefix tarball (scripts/gst-prefix.sh 1.28.6, then
# tar -C build-gst -czf gst-1.28.tar.gz gst-1.28). DEVICE_PYTHON: a Python 3.12 to build the wheel
# with (default python3.12). Builds build/ (the CUDA backend, as scripts/dev.sh) and
# build-gst128-device (against 1.28, with the device programs) where they are not yet configured.
# On the GPU machine: scripts/device-run.sh PART... (its header says which part needs which).
set -euo pipefail
tarball=$(realpath "${1:?usage: device-bundles.sh GST128_TARBALL}")
[ -f "$tarball" ] || { echo "no GStreamer 1.28 prefix tarball at $tarball" >&2; exit 2; }
cd "$(dirname "$0")/.."

[ -f build/build.ninja ] || meson setup build -Dcpp_args=-g1
ninja -C build

# Kept where build-gst128-device finds it again: its build files name the prefix's paths.
prefix=$PWD/build-gst128-device-prefix
if [ ! -f "$prefix/gst-1.28/env.sh" ] || [ "$tarball" -nt "$prefix/gst-1.28/env.sh" ]; then
  rm -rf "$prefix"
  mkdir -p "$prefix"
  tar -xf "$tarball" -C "$prefix"
fi
(
  # shellcheck disable=SC1091
  source "$prefix/gst-1.28/env.sh"
  [ -f build-gst128-device/build.ninja ] ||
    meson setup build-gst128-device -Dgst=enabled -Dcore-suites=false -Dcpp_args=-g1
  ninja -C build-gst128-device
)
# Outside 1.28's environment: the 1.22 bundle is made of the GStreamer on PATH.
rm -rf .gst-gpu
GST128_TARBALL=$tarball bash tests/gst/gpu/collect.sh build build-gst128-device .gst-gpu

rm -rf .gpu
bash tests/gpu/collect.sh build .gpu >/dev/null
# The wheel with this machine's GStreamer (1.22) in PATH, not 1.28's: its bundle is the 1.22 one.
python/tests/build-device-bundle.sh >/dev/null

# Debug info and symbol tables are most of the binaries' size, and a call carries 64 MiB.
find .gpu .gst-gpu build/python-dist -type f -exec file {} + | grep ELF | grep "not stripped" |
  cut -d: -f1 | xargs -r strip --strip-unneeded
tracked=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
size() { du -sb "$@" | awk '{s += $1} END {print s}'; }
for carry in ".gpu .gst-gpu/g128 build/python-dist" ".gpu .gst-gpu"; do
  # shellcheck disable=SC2086
  total=$(($(size $carry) + tracked))
  printf '%-40s %5d MiB with the tracked files (limit 64)\n' "$carry" $((total >> 20))
  [ "$total" -le $((64 << 20)) ] || echo "  over the limit: carry less in one call" >&2
done
