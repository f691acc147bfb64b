#!/usr/bin/env bash
# Gathers what tests/deploy/device.sh needs on the GPU machine (no meson, no GStreamer there) into
# DEST, building what is missing first:
#   DEST/gpu    cudaipc-gpu-namespace-test, cudaipc-gpu-peer, cudaipc-test-container and libcudaipc
#               from BUILD (default ./build, configured with the CUDA toolkit's nvcc)
#   DEST/b128   a small build tree for examples/bridge.sh against GStreamer 1.28: the plugin
#               (gst/), libcudaipc (core/) and the tensor examples (examples/), built in
#               ./build-deploy128 against ../shared/gst-1.28 (unpacked in ./build-deploy128-gst),
#               plus that GStreamer's prefix tarball
#   bash tests/deploy/collect.sh DEST [BUILD]        e.g.  bash tests/deploy/collect.sh .deploy
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: collect.sh DEST [BUILD]}
build=${2:-build}
prefix=$(cd .. && pwd)/shared/gst-1.28/gst-1.28-prefix.tar.gz
[ -f "$prefix" ] || { echo "no $prefix" >&2; exit 1; }
[ -f "$build/build.ninja" ] || meson setup "$build"
ninja -C "$build" tests/gpu/cudaipc-gpu-namespace-test tests/gpu/cudaipc-gpu-peer \
  tests/peers/cudaipc-test-container

# The prefix stays unpacked beside the build that was configured against it.
g=$PWD/build-deploy128-gst
[ -f "$g/gst-1.28/env.sh" ] || { mkdir -p "$g" && tar -xf "$prefix" -C "$g"; }
(
  # shellcheck disable=SC1091
  source "$g/gst-1.28/env.sh"
  [ -f build-deploy128/build.ninja ] || meson setup build-deploy128 -Dgst=enabled -Dtests=disabled
  ninja -C build-deploy128
)

rm -rf "$dest/gpu" "$dest/b128"
mkdir -p "$dest/gpu" "$dest/b128/gst" "$dest/b128/core" "$dest/b128/examples"
# Only the name the binaries ask for (the soname), as a plain file, without debug sections.
soname() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }
copy() { cp -fL "$1" "$2" && strip --strip-debug "$2/$(basename "$1")"; }
for f in tests/gpu/cudaipc-gpu-namespace-test tests/gpu/cudaipc-gpu-peer \
  tests/peers/cudaipc-test-container "core/$(soname "$build/core/libcudaipc.so")"; do
  copy "$build/$f" "$dest/gpu"
done
copy build-deploy128/gst/libgstcudaipc.so "$dest/b128/gst"
copy "build-deploy128/core/$(soname build-deploy128/core/libcudaipc.so)" "$dest/b128/core"
for f in cudaipc-appsrc-tensor-producer cudaipc-appsink-tensor-reader; do
  copy "build-deploy128/examples/$f" "$dest/b128/examples"
done
cp -f "$prefix" "$dest/b128/"
du -sh "$dest"
