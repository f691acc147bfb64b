#!/usr/bin/env bash
# detect.py end to end: videotestsrc pattern=ball publishes frames (cudaipcringsink), detect.py
# finds the ball in each and publishes the frame again with its detection, and a cudaipcringsrc
# pipeline draws the boxes with objectdetectionoverlay (GStreamer 1.24+, gst-plugins-bad's
# analyticsoverlay).
#   examples/python/detect.sh [host|cuda] [FRAMES] [-- detect.py options, e.g. --model ...]
# host (the default) needs neither a GPU nor nvcodec: the channels are in host memory
# (ipc-mode=host). cuda needs nvcodec (cudaupload, cudadownload) and torch with a GPU. The result
# is shown (autovideosink) where there is a display, else counted (fakesink). Needs
# gst-launch-1.0 with the cudaipc plugin (GST_PLUGIN_PATH, see the README) and the cudaipc
# package. cudaipcringsink and cudaipcringsrc are cudaipcsink and cudaipcsrc under names nvcodec
# does not also use (docs/coexistence.md).
# Exit status: 0 when all three processes succeeded, else the first failure's status.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
memory=${1:-host}
frames=${2:-300}
shift $(($# > 2 ? 2 : $#))
[ "${1:-}" = "--" ] && shift
case "$memory" in
  host) upload="" download="" sink_props="ipc-mode=host" ;;
  cuda) upload="cudaupload !" download="cudadownload !" sink_props="" ;;
  *)
    echo "usage: $0 [host|cuda] [FRAMES] [-- detect.py options]" >&2
    exit 2
    ;;
esac
dir=$(mktemp -d)
# shellcheck source=examples/python/wait_all.sh
source "$(dirname "$0")/wait_all.sh"
trap 'cleanup "$dir"' EXIT
cam=$dir/cam0 out=$dir/det0
caps="video/x-raw,format=RGBA,width=640,height=480,framerate=30/1"
sink=fakesink
[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && sink=autovideosink
# shellcheck disable=SC2086
gst-launch-1.0 -q videotestsrc pattern=ball is-live=true num-buffers="$frames" ! "$caps" \
  ! $upload cudaipcringsink $sink_props socket-path="$cam" wait-for-consumer=true &
producer=$!
python3 "$here/detect.py" "$cam" "$out" "$@" &
detect=$!
# The overlay's pipeline starts once detect.py has published its first frame (it creates the
# channel then); cudaipcringsrc waits for the producer, then plays until its end of stream.
# shellcheck disable=SC2086
gst-launch-1.0 -q cudaipcringsrc socket-path="$out" ! $download videoconvert \
  ! objectdetectionoverlay ! videoconvert ! $sink &
overlay=$!
# Every process's status counts (wait_all.sh): the first to fail decides the exit status.
status=0
wait_all detect.sh "$detect" detect "$producer" producer "$overlay" overlay || status=$?
exit "$status"
