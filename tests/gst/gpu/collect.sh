#!/usr/bin/env bash
# Gathers what the GStreamer GPU suite and benchmark need on the device machine (which has no
# GStreamer and no meson) into DEST:
#   DEST/g122   a GStreamer 1.22 runtime bundle (Debian's nvcodec) with the plugin built here
#   DEST/g128   the GStreamer 1.28 prefix tarball plus the plugin built against it
#   DEST/clip.h264, clip.frames   a short H.264 clip for the NVDEC case (x264enc or openh264enc)
#   bash tests/gst/gpu/collect.sh BUILD_122 BUILD_128 DEST
set -euo pipefail
b122=$(cd "${1:?usage: collect.sh BUILD_122 BUILD_128 DEST}" && pwd)
b128=$(cd "${2:?usage: collect.sh BUILD_122 BUILD_128 DEST}" && pwd)
dest=${3:?usage: collect.sh BUILD_122 BUILD_128 DEST}
here=$(cd "$(dirname "$0")" && pwd)
# The 1.28 prefix as a tarball: GST128_TARBALL, else a cached copy beside the checkout (CI's),
# else make one: scripts/gst-prefix.sh 1.28.6 && tar -C build-gst -czf gst-1.28.tar.gz gst-1.28
tarball=${GST128_TARBALL:-$here/../../../../shared/gst-1.28/gst-1.28-prefix.tar.gz}
[ -f "$tarball" ] || {
  echo "no GStreamer 1.28 prefix tarball at $tarball: build one with scripts/gst-prefix.sh 1.28.6," \
    "pack it (tar -C build-gst -czf gst-1.28.tar.gz gst-1.28) and set GST128_TARBALL" >&2
  exit 1
}
# g122 bundles the GStreamer on PATH (gst-bundle.sh): it must be the one BUILD_122 was built
# against, not a 1.28 prefix's environment sourced in this shell.
built=$(python3 -c 'import json, sys
print(next(d["version"] for d in json.load(open(sys.argv[1])) if d["name"] == "gstreamer-1.0"))' \
  "$b122/meson-info/intro-dependencies.json")
onpath=$(gst-launch-1.0 --version | sed -n 's/^GStreamer \([0-9.]*\).*/\1/p')
[ "${built%.*}" = "${onpath%.*}" ] || {
  echo "collect.sh: $b122 was built against GStreamer $built, but gst-launch-1.0 on PATH is" \
    "$onpath: run it without the 1.28 prefix's env.sh sourced" >&2
  exit 1
}
rm -rf "$dest/g122" "$dest/g128"
mkdir -p "$dest/g128/plugins" "$dest/g128/bin" "$dest/g128/lib"
cp -f "$here/run-gst-gpu.sh" "$here/device-all.sh" "$dest/"

# libcudaipc by its soname: the plugin finds it through an $ORIGIN run path that a copy loses.
soname=$(readelf -d "$b122/core/libcudaipc.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
progs=("$b122/tests/gst/gpu/cudaipc-gst-verify" "$b122/core/$soname")
for prog in cudaipc-gst-bench cudaipc-gst-streams cudaipc-gst-meta-bench cudaipc-gst-filter-bench; do
  [ -x "$b122/tests/gst/bench/$prog" ] && progs+=("$b122/tests/gst/bench/$prog")
done
[ -x "$b122/tests/gst/mp/cudaipc-gst-meta-peer" ] && progs+=("$b122/tests/gst/mp/cudaipc-gst-meta-peer")
GST_BUNDLE_PLUGINS="coreelements videotestsrc videoconvertscale app shm nvcodec videoparsersbad" \
  "$here/../../../scripts/gst-bundle.sh" "$dest/g122" -p "$b122/gst/libgstcudaipc.so" "${progs[@]}"

cp -f "$tarball" "$dest/g128/gst-1.28-prefix.tar.gz"
cp -f "$b128/gst/libgstcudaipc.so" "$dest/g128/plugins/"
cp -f "$b128/tests/gst/gpu/cudaipc-gst-verify" "$dest/g128/bin/"
for prog in cudaipc-gst-bench cudaipc-gst-streams cudaipc-gst-meta-bench cudaipc-gst-filter-bench; do
  [ -x "$b128/tests/gst/bench/$prog" ] && cp -f "$b128/tests/gst/bench/$prog" "$dest/g128/bin/"
done
[ -x "$b128/tests/gst/mp/cudaipc-gst-meta-peer" ] && cp -f "$b128/tests/gst/mp/cudaipc-gst-meta-peer" "$dest/g128/bin/"
soname=$(readelf -d "$b128/core/libcudaipc.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
cp -fL "$b128/core/$soname" "$dest/g128/lib/"

# The clips: x264enc where this machine has it (gstreamer1.0-plugins-ugly), else openh264enc;
# I420 in, so the stream is 4:2:0 (NVDEC decodes no 4:4:4).
enc=()
if gst-inspect-1.0 x264enc >/dev/null 2>&1; then
  enc=(x264enc ! "video/x-h264,profile=high")
  enc1080=(x264enc speed-preset=ultrafast bitrate=4000 key-int-max=30 ! "video/x-h264,profile=high")
elif gst-inspect-1.0 openh264enc >/dev/null 2>&1 && gst-inspect-1.0 h264parse >/dev/null 2>&1; then
  enc=(openh264enc ! h264parse)
  enc1080=(openh264enc bitrate=4000000 gop-size=30 ! h264parse)
fi
if [ ${#enc[@]} -gt 0 ]; then
  gst-launch-1.0 -q videotestsrc pattern=ball animation-mode=frames num-buffers=60 \
    ! video/x-raw,format=I420,width=320,height=240,framerate=30/1 ! "${enc[@]}" \
    ! video/x-h264,stream-format=byte-stream ! filesink location="$dest/clip.h264"
  echo 60 >"$dest/clip.frames"
  # The benchmark's decoder rows: 1080p, more frames than a run's warm-up and measured frames.
  gst-launch-1.0 -q videotestsrc pattern=ball animation-mode=frames num-buffers=400 \
    ! video/x-raw,format=I420,width=1920,height=1080,framerate=30/1 ! "${enc1080[@]}" \
    ! video/x-h264,stream-format=byte-stream ! filesink location="$dest/clip-1080p.h264"
else
  echo "no H.264 encoder here (x264enc, or openh264enc with h264parse): the NVDEC case will be" \
    "skipped" >&2
fi
# Debug info is most of the project's binaries, and what travels to the device is capped.
if command -v strip >/dev/null; then
  strip --strip-debug "$dest"/g122/bin/cudaipc-* "$dest"/g122/plugins/libgstcudaipc.so \
    "$dest"/g122/lib/libcudaipc.so.* "$dest"/g128/bin/* "$dest"/g128/plugins/* "$dest"/g128/lib/*
fi
du -sh "$dest"
