# Sourced by examples/pipelines.sh and examples/bridge.sh after they set $build (the build
# directory, whose gst/ holds the plugin): puts the plugin first on GStreamer's path with a
# registry of its own in a fresh $dir (removed on exit with every process started through
# `start`), and defines the helpers both use. Sets $sink and $src to cudaipcringsink and
# cudaipcringsrc, names that are ours even where nvcodec has elements named cudaipcsink and
# cudaipcsrc (docs/coexistence.md).
# shellcheck shell=bash

build=$(cd "$build" && pwd)
[ -f "$build/gst/libgstcudaipc.so" ] || {
  echo "FAILED: no plugin at $build/gst/libgstcudaipc.so (build it: ninja -C $build)" >&2
  exit 1
}

# GST_PLUGIN_PATH_1_0, when set (even empty), hides GST_PLUGIN_PATH: prepend the build to both.
export GST_PLUGIN_PATH="$build/gst${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}"
if [ -n "${GST_PLUGIN_PATH_1_0+set}" ]; then
  export GST_PLUGIN_PATH_1_0="$build/gst${GST_PLUGIN_PATH_1_0:+:$GST_PLUGIN_PATH_1_0}"
fi
dir=$(mktemp -d)
# A registry of our own: scanning this build's plugin leaves the user's registry alone.
export GST_REGISTRY_1_0="$dir/registry.bin"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

limit=120  # seconds any one process may run
say() { printf '+ %s\n' "$*"; }
skip() {
  echo "skipped: $*"
  exit 77
}
fail() {
  echo "FAILED: $*" >&2
  exit 1
}
# --exists alone also demands a plugin version of at least GStreamer's own (cudaipc is 0.x).
have() { gst-inspect-1.0 --exists --atleast-version=0.0 "$1"; }
# Runs a pipeline in the background; its pid goes to $last.
start() {  # OUTFILE gst-launch args...
  local out=$1
  shift
  say gst-launch-1.0 "$@"
  timeout "$limit" gst-launch-1.0 -q "$@" >"$out" &
  last=$!
  pids+=("$last")
}
wait_socket() {
  for _ in $(seq 200); do
    [ -S "$1" ] && return 0
    sleep 0.05
  done
  fail "no socket appeared at $1"
}
hashes() { awk '{print $2}' "$1"; }
# Fails, showing the first differences, unless checksumsink files WANT and GOT list the same frames.
same_frames() {  # WANT GOT WHAT
  if [ "$(hashes "$1")" != "$(hashes "$2")" ]; then
    diff <(hashes "$1") <(hashes "$2") | head -5 >&2
    fail "$3 ($(wc -l <"$2") received)"
  fi
}

# GStreamer 1.24+'s nvcodec has elements named cudaipcsink/cudaipcsrc too. Which one a plain name
# gives depends on the registry and on whether the process has loaded nvcodec (for cudaupload or
# a decoder, say), so every pipeline here uses the names only ours answer to (docs/coexistence.md):
# the commands printed can be copied into a pipeline with nvcodec elements as they are.
# shellcheck disable=SC2034  # used by the scripts that source this one
sink=cudaipcringsink src=cudaipcringsrc
have "$sink" || fail "the cudaipc elements do not load from $build/gst (gst-inspect-1.0 cudaipc says why)"
