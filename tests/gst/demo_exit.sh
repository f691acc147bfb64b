#!/usr/bin/env bash
# The README's first command ends in examples/gst-demo.sh: it must exit 0 when every frame was
# verified, non-zero when it could not run, and leave no temporary directory behind either way.
#   demo_exit.sh SOURCE_ROOT BUILD_DIR
set -u
src=$1 build=$2
tmp=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$tmp" "$log"' EXIT
TMPDIR=$tmp bash "$src/examples/gst-demo.sh" "$build" 30 >"$log" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
  cat "$log"
  echo "FAILED: the demo exited $rc after: $(tail -n 1 "$log")"
  exit 1
fi
if [ -n "$(ls -A "$tmp")" ]; then
  echo "FAILED: the demo left behind: $(ls -A "$tmp")"
  exit 1
fi
TMPDIR=$tmp bash "$src/examples/gst-demo.sh" "$tmp/no-such-build" 30 >"$log" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then
  echo "FAILED: the demo exited 0 without a build to run"
  exit 1
fi
if [ -n "$(ls -A "$tmp")" ]; then
  echo "FAILED: the failed demo left behind: $(ls -A "$tmp")"
  exit 1
fi
echo "demo: exit 0 when it worked, $rc without a build to run; nothing left behind either way"
