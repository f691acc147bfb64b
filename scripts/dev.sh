#!/usr/bin/env bash
# One entry point for the README's commands and CI: installs what is missing (Debian 12 /
# Ubuntu 24.04), configures, builds, then runs the demo or the tests.
#   scripts/dev.sh demo            build and run the two-process demo
#   scripts/dev.sh test            build and run every test suite (GPU suites skip without a GPU)
#   scripts/dev.sh test --sanitize the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   scripts/dev.sh deps            only install the packages
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(meson ninja-build g++ pkg-config libgtest-dev libgmock-dev
  # the GStreamer plugin, its tests and the demo (Debian 12: 1.22, Ubuntu 24.04: 1.24)
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libgstreamer-plugins-bad1.0-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad)

install_deps() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}"
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}"
}

configure() {  # configure DIR [meson args...]
  local dir=$1; shift
  if [ -f "$dir/build.ninja" ]; then
    meson configure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@"
  fi
  ninja -C "$dir"
}

cmd=${1:-}
case "$cmd" in
  deps)
    install_deps ;;
  demo)
    install_deps
    configure build
    examples/gst-demo.sh build ;;
  test)
    install_deps
    if [ "${2:-}" = "--sanitize" ]; then
      configure build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dexamples=false
      # gst-launch-1.0 and gst-inspect-1.0 are not instrumented and cannot load an ASan-built
      # plugin: the suites that run them (suite gst-launch) are left out here.
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        meson test -C build-asan --print-errorlogs --num-processes 2 --no-suite gst-launch
    else
      configure build
      meson test -C build --print-errorlogs --num-processes 2
    fi ;;
  *)
    echo "usage: $0 demo|test [--sanitize]|deps" >&2
    exit 2 ;;
esac
