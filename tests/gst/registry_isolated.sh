#!/usr/bin/env bash
# The suites' registry holds cudaipc and the plugins of tests/gst/plugin_set.sh only: whatever
# else the machine has installed is not scanned (a plugin outside the list would be a finding).
#   registry_isolated.sh     (in a suite's environment)
set -u
allowed=" cudaipc coreelements coretracers app videotestsrc videoconvert videoscale \
videoconvertscale videorate audiotestsrc debugutilsbad shm unixfd nvcodec videoparsersbad gdp tcp \
rtp rtpmanager udp x264 tensordecoders analyticsoverlay typefindfunctions staticelements "
command -v gst-inspect-1.0 >/dev/null || { echo "SKIP: no gst-inspect-1.0"; exit 77; }
listing=$(gst-inspect-1.0 2>&1) || { echo "FAILED: gst-inspect-1.0: $listing"; exit 1; }
bad=0
# Lines "plugin:  element: description"; the last line counts plugins and features.
for plugin in $(printf '%s\n' "$listing" | sed -n 's/^\([A-Za-z0-9_-]*\):  .*/\1/p' | sort -u); do
  case "$allowed" in
    *" $plugin "*) ;;
    *) echo "FAILED: plugin $plugin is in the suites' registry"; bad=1 ;;
  esac
done
printf '%s\n' "$listing" | tail -n 1
exit $bad
