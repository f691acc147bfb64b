#!/usr/bin/env bash
# detect.py end to end: videotestsrc pattern=ball publishes frames (cudaipcringsink), detect.py
# finds the ball in each and publishes the frame again with its detection, and a cudaipcringsrc
# pipeline draws the boxes with objectdetectionoverlay (GStreamer 1.24+, gst-plugins-bad's
# analyticsoverlay). Where GStreamer has no objectdetectionoverlay (1.22, Debian 12), the third
# process is cudaipc-appsink-detections instead (on PATH after `source build/env.sh`), printing
# every frame's boxes as the pipeline receives them.
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
overlay=draw
if ! gst-inspect-1.0 --exists objectdetectionoverlay; then
  overlay=print
  if ! command -v cudaipc-appsink-detections >/dev/null; then
    echo "detect.sh: this GStreamer has no objectdetectionoverlay (it came in 1.24), and" \
      "cudaipc-appsink-detections, which prints the boxes instead, is not on PATH: run" \
      "'source build/env.sh' in the checkout first" >&2
    exit 1
  fi
fi
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
# detect.py waits for its reader before publishing its first frame (the printing reader, in
# every-frame mode, then gets them all).
python3 "$here/detect.py" "$cam" "$out" --wait-for-consumer 30 "$@" &
detect=$!
# The overlay's pipeline starts once detect.py has published its first frame (it creates the
# channel then); cudaipcringsrc waits for the producer, then plays until its end of stream.
if [ "$overlay" = draw ]; then
  # shellcheck disable=SC2086
  gst-launch-1.0 -q cudaipcringsrc socket-path="$out" ! $download videoconvert \
    ! objectdetectionoverlay ! videoconvert ! $sink &
  overlay=$!
  # GStreamer 1.24's objectdetectionoverlay does not pass end-of-stream on, so its pipeline would
  # play on after the stream: once detect.py has ended, give it 5 s, then stop it as Ctrl-C does
  # (gst-launch-1.0 then exits 0). Only while that pid is still gst-launch-1.0, not a reused one.
  # (Short sleeps: the EXIT trap stops this watcher, and a long sleep left behind would hold the
  # script's output open.)
  (
    ours() { [ "$(cat "/proc/$overlay/comm" 2>/dev/null)" = gst-launch-1.0 ]; }
    while kill -0 "$detect" 2>/dev/null; do sleep 0.2; done
    for _ in $(seq 25); do
      ours || exit 0
      sleep 0.2
    done
    if ours; then
      echo "detect.sh: the overlay's pipeline did not end with the stream (objectdetectionoverlay" \
        "of GStreamer 1.24 holds end-of-stream); stopping it" >&2
      kill -INT "$overlay" 2>/dev/null || true
    fi
  ) &
else
  # The program reads the metas, not the pixels: host memory is enough. (One pipeline string:
  # the path is quoted inside it.)
  cudaipc-appsink-detections --frames "$frames" \
    "cudaipcringsrc socket-path=\"$out\" mode=every-frame ! $download queue" &
  overlay=$!
fi
# Every process's status counts (wait_all.sh): the first to fail decides the exit status.
status=0
wait_all detect.sh "$detect" detect "$producer" producer "$overlay" overlay || status=$?
exit "$status"
