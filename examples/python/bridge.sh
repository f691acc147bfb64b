#!/usr/bin/env bash
# The AI bridge end to end: a camera-style pipeline publishes GPU frames (cudaipcringsink),
# infer.py runs a model on them in PyTorch and publishes the results, and a cudaipcringsrc pipeline
# plays them. cudaipcringsink and cudaipcringsrc are cudaipcsink and cudaipcsrc under names
# nvcodec, whose cudaupload and cudadownload are in these pipelines, does not also use
# (docs/coexistence.md).
#   examples/python/bridge.sh [videotestsrc|FILE.h264] [FRAMES]       (default: videotestsrc, 300)
# FILE.h264 is decoded on the GPU (nvh264dec). The result is shown (autovideosink) where there is a
# display, else counted (fakesink). Needs gst-launch-1.0 with nvcodec and the cudaipc plugin
# (GST_PLUGIN_PATH, see the README), torch, and the cudaipc package.
# Exit status: 0 when all three processes succeeded, else the first failure's status.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source=${1:-videotestsrc}
frames=${2:-300}
dir=$(mktemp -d)
# shellcheck source=examples/python/wait_all.sh
source "$(dirname "$0")/wait_all.sh"
trap 'cleanup "$dir"' EXIT
cam=$dir/cam0 out=$dir/out0
caps="video/x-raw,format=RGBA,width=640,height=480,framerate=30/1"
if [ "$source" = videotestsrc ]; then
  chain=(videotestsrc is-live=true num-buffers="$frames" ! "$caps" ! cudaupload)
else
  # NVDEC decodes into GPU memory; videoconvert makes RGBA (nvcodec's cudaconvert needs NVRTC).
  # shellcheck disable=SC2054  # the commas are in caps, not between elements
  chain=(filesrc location="$source" ! h264parse ! nvh264dec ! videoconvert
            ! video/x-raw,format=RGBA ! cudaupload)
fi
sink=fakesink
[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && sink="videoconvert ! autovideosink"
gst-launch-1.0 -q "${chain[@]}" ! cudaipcringsink socket-path="$cam" wait-for-consumer=true &
producer=$!
python3 "$here/infer.py" "$cam" "$out" --mode every-frame &
infer=$!
# The results' pipeline starts once infer.py has published its first frame (it creates the
# channel then); cudaipcringsrc waits for the producer, then plays until its end of stream.
# shellcheck disable=SC2086
gst-launch-1.0 -q cudaipcringsrc socket-path="$out" ! cudadownload ! $sink &
results=$!
# Every process's status counts (wait_all.sh): the first to fail decides the exit status.
status=0
wait_all bridge.sh "$infer" infer "$producer" producer "$results" results || status=$?
exit "$status"
