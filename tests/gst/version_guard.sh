#!/usr/bin/env bash
# The plugin refuses to load beside a libgstcuda of another minor version than it was built for
# (the API changed under one soname): load this build's plugin into the other GStreamer we have
# (the 1.28 prefix in ../shared for a 1.22 build). A build against the 1.28 prefix carries a run
# path into that prefix, so loading it elsewhere mixes libraries: that direction is skipped.
#   version_guard.sh PLUGIN_DIR BUILT_MINOR SOURCE_ROOT
set -u
plugins=$1 built=$2 src=$3
tarball=$src/../shared/gst-1.28/gst-1.28-prefix.tar.gz
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "$built" = 28 ]; then
  echo "SKIP: this build runs only against the prefix it was linked with (run path)"
  exit 77
else
  if [ ! -f "$tarball" ]; then echo "SKIP: no $tarball to load the plugin into"; exit 77; fi
  tar -xf "$tarball" -C "$work"
  # shellcheck disable=SC1091
  source "$work/gst-1.28/env.sh"
  inspect=(gst-inspect-1.0)
fi
out=$(GST_PLUGIN_PATH_1_0="$plugins" GST_PLUGIN_PATH="$plugins" GST_REGISTRY_1_0="$work/reg.bin" \
  GST_REGISTRY="$work/reg.bin" "${inspect[@]}" cudaipcringsink 2>&1)
echo "$out" | head -n 5
if echo "$out" | grep -q "this plugin was built for GStreamer 1.$built but libgstcuda" &&
  ! echo "$out" | grep -q "Factory Details"; then
  echo "OK: the plugin refused to load with a clear message"
  exit 0
fi
echo "FAILED: expected the version refusal"
exit 1
