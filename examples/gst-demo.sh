#!/usr/bin/env bash
# The README's demo: two gst-launch-1.0 processes joined through cudaipcsink/cudaipcsrc. With an
# NVIDIA GPU the frames stay in GPU memory (cudaupload ! cudaipcringsink, cudaipcringsrc ! cudadownload);
# without one they travel in host memory. The consumer's per-frame checksums are compared with
# the same frames made in one process, so every frame is verified; then the core's own demo runs.
#   examples/gst-demo.sh [BUILD_DIR] [FRAMES]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
frames=${2:-300}
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -f "$build/gst/libgstcudaipc.so" ]; then
  echo "the GStreamer plugin was not built (GStreamer or CUDA headers missing): core demo only"
  exec "$here/demo.sh" "$build"
fi
export GST_PLUGIN_PATH_1_0="$build/gst${GST_PLUGIN_PATH_1_0:+:$GST_PLUGIN_PATH_1_0}"
dir=$(mktemp -d)
export GST_REGISTRY_1_0="$dir/registry.bin"
# Under `set -e` a failing command in the EXIT trap becomes the script's status: `kill` with no
# job left fails, so it runs only when a job is left, and nothing in here may fail.
cleanup() {
  local left
  left=$(jobs -p)
  if [ -n "$left" ]; then
    # shellcheck disable=SC2086
    kill $left 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

# GStreamer 1.24+'s nvcodec has elements of the same names; ours always answer to these.
sink=cudaipcringsink
srcel=cudaipcringsrc
caps="video/x-raw,format=NV12,width=640,height=480,framerate=30/1"
src="videotestsrc pattern=ball num-buffers=$frames ! $caps"
if nvidia-smi -L >/dev/null 2>&1 && gst-inspect-1.0 cudaupload >/dev/null 2>&1; then
  where="GPU memory"
  produce="$src ! cudaupload ! $sink"
  # cudadownload may keep the device rows' padding: compare the pixels in a fixed layout
  consume="cudadownload ! videoconvert ! video/x-raw,format=I420 !"
  check="videoconvert ! video/x-raw,format=I420 !"
else
  where="host memory (no NVIDIA GPU or no nvcodec)"
  produce="$src ! $sink ipc-mode=host"
  consume=""
  check=""
fi
echo "cudaipc demo: $frames frames of $caps in $where"

# The reference: the same frames, made and checksummed in one process.
# shellcheck disable=SC2086
gst-launch-1.0 -q $src ! $check checksumsink >"$dir/want.txt"
# shellcheck disable=SC2086
gst-launch-1.0 -q $produce socket-path="$dir/demo.sock" wait-for-consumer=true sync=false &
producer=$!
for _ in $(seq 100); do [ -S "$dir/demo.sock" ] && break; sleep 0.05; done
start=$(date +%s.%N)
# shellcheck disable=SC2086
gst-launch-1.0 -q $srcel socket-path="$dir/demo.sock" mode=every-frame is-live=false \
  connect-timeout=5000000000 ! $consume checksumsink >"$dir/got.txt"
end=$(date +%s.%N)
wait "$producer"

want=$(awk '{print $2}' "$dir/want.txt")
got=$(awk '{print $2}' "$dir/got.txt")
n=$(wc -l <"$dir/got.txt")
if [ "$want" != "$got" ]; then
  echo "FAILED: the consumer's frames differ from the producer's ($n received)" >&2
  diff <(echo "$want") <(echo "$got") | head -5 >&2
  exit 1
fi
# awk, not bc: bc is not on a minimal Debian or Ubuntu, and scripts/dev.sh does not install it.
awk -v n="$n" -v s="$start" -v e="$end" \
  'BEGIN { printf "two processes, %d frames verified, %.0f frames/s end to end\n", n, n / (e - s) }'
echo
echo "the core's own demo (no GStreamer):"
"$here/demo.sh" "$build"
