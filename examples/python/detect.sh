#!/usr/bin/env bash
# detect.py end to end: videotestsrc pattern=ball publishes frames (cudaipcsink), detect.py finds
# the ball in each and publishes the frame again with its detection, and a cudaipcsrc pipeline
# draws the boxes with objectdetectionoverlay (GStreamer 1.24+, gst-plugins-bad's analyticsoverlay).
#   examples/python/detect.sh [host|cuda] [FRAMES] [-- detect.py options, e.g. --model ...]
# cuda needs nvcodec (cudaupload, cudadownload) and torch with a GPU; host needs neither. The
# result is shown (autovideosink) where there is a display, else counted (fakesink). Needs
# gst-launch-1.0 with the cudaipc plugin (GST_PLUGIN_PATH, see the README) and the cudaipc package.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
memory=${1:-host}
frames=${2:-300}
shift $(($# > 2 ? 2 : $#))
[ "${1:-}" = "--" ] && shift
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
cam=$dir/cam0 out=$dir/det0
caps="video/x-raw,format=RGBA,width=640,height=480,framerate=30/1"
upload="" download=""
if [ "$memory" = cuda ]; then
  upload="cudaupload !" download="cudadownload !"
fi
sink=fakesink
[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && sink=autovideosink
# shellcheck disable=SC2086
gst-launch-1.0 -q videotestsrc pattern=ball is-live=true num-buffers="$frames" ! "$caps" \
  ! $upload cudaipcsink socket-path="$cam" wait-for-consumer=true &
python3 "$here/detect.py" "$cam" "$out" "$@" &
detect=$!
# The overlay's pipeline starts once detect.py has published its first frame (it creates the
# channel then); cudaipcsrc waits for the producer, then plays until its end of stream.
# shellcheck disable=SC2086
gst-launch-1.0 -q cudaipcsrc socket-path="$out" ! $download videoconvert \
  ! objectdetectionoverlay ! videoconvert ! $sink &
wait "$detect"
