#!/usr/bin/env bash
# Metas across processes, GStreamer to GStreamer (docs/metas.md): cudaipc-gst-meta-peer produces
# frames carrying every meta kind this GStreamer has (values from the frame's index) and prints
# them; another process of it consumes them through cudaipcsrc and prints what arrived. Both
# lists must be equal, frame by frame and field by field.
#   meta_roundtrip.sh PEER [FRAMES] [sink properties...]
set -euo pipefail
peer=$1
frames=${2:-30}
shift $(($# < 2 ? $# : 2))
dir=$(mktemp -d)
consumer=
cleanup() {
  if [ -n "$consumer" ]; then kill "$consumer" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
"$peer" consume "$dir/s" "$frames" >"$dir/got" &
consumer=$!
"$peer" produce "$dir/s" "$frames" "$@" >"$dir/want"
wait "$consumer"
consumer=
if ! diff "$dir/want" "$dir/got" >"$dir/diff"; then
  echo "FAILED: the consumer's metas differ from the producer's" >&2
  head -20 "$dir/diff" >&2
  exit 1
fi
echo "$frames frames, every meta equal on both sides: $(head -c 300 "$dir/got")..."
