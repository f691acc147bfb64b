#!/usr/bin/env bash
# A directory of links to the GStreamer plugins the test suites use, and nothing else: suites point
# GST_PLUGIN_SYSTEM_PATH_1_0 at it, so third-party plugins a machine happens to have (libav, say)
# are never scanned and can neither fail a test (a leak in their init under ASan) nor pass one.
# A plugin the machine lacks is left out; the tests that need it skip, saying so.
#   plugin_set.sh OUT_DIR SYSTEM_PLUGIN_DIR
set -eu
out=$1 sys=$2
rm -rf "$out"
mkdir -p "$out"
for name in coreelements coretracers app videotestsrc videoconvert videoscale videoconvertscale \
  videorate audiotestsrc debugutilsbad shm unixfd nvcodec videoparsersbad gdp tcp rtp rtpmanager \
  udp x264 tensordecoders analyticsoverlay typefindfunctions; do
  so=$sys/libgst$name.so
  if [ -e "$so" ]; then ln -s "$so" "$out/"; fi
done
