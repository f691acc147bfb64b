#!/usr/bin/env bash
# The AI bridge end to end: a camera-style pipeline publishes GPU frames (cudaipcsink), infer.py
# runs a model on them in PyTorch and publishes the results, and a cudaipcsrc pipeline plays them.
#   examples/python/bridge.sh [videotestsrc|FILE.h264] [FRAMES]       (default: videotestsrc, 300)
# FILE.h264 is decoded on the GPU (nvh264dec). The result is shown (autovideosink) where there is a
# display, else counted (fakesink). Needs gst-launch-1.0 with nvcodec and the cudaipc plugin
# (GST_PLUGIN_PATH, see the README), torch, and the cudaipc package.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source=${1:-videotestsrc}
frames=${2:-300}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
cam=$dir/cam0 out=$dir/out0
caps="video/x-raw,format=RGBA,width=640,height=480,framerate=30/1"
if [ "$source" = videotestsrc ]; then
  producer=(videotestsrc is-live=true num-buffers="$frames" ! "$caps" ! cudaupload)
else
  # NVDEC decodes into GPU memory; videoconvert makes RGBA (nvcodec's cudaconvert needs NVRTC).
  producer=(filesrc location="$source" ! h264parse ! nvh264dec ! videoconvert
            ! video/x-raw,format=RGBA ! cudaupload)
fi
sink=fakesink
[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && sink="videoconvert ! autovideosink"
gst-launch-1.0 -q "${producer[@]}" ! cudaipcsink socket-path="$cam" wait-for-consumer=true &
python3 "$here/infer.py" "$cam" "$out" --mode every-frame &
infer=$!
# The results' pipeline starts once infer.py has published its first frame (it creates the
# channel then); cudaipcsrc waits for the producer, then plays until its end of stream.
gst-launch-1.0 -q cudaipcsrc socket-path="$out" ! cudadownload ! $sink &
wait "$infer"
