#!/usr/bin/env bash
# Bundles this machine's GStreamer runtime for a machine that has an NVIDIA driver but no
# GStreamer (a GPU test machine, a container): gst-launch-1.0, gst-inspect-1.0, the plugin
# scanner, a chosen set of plugins, the files you add (cudaipc's plugin, test programs), and every
# shared library they load except glibc's own, the C++ runtime and the GPU driver's, which the
# target provides. There: `source OUTDIR/env.sh`.
#
#   scripts/gst-bundle.sh OUTDIR [-p PLUGIN.so]... [FILE]...
#   scripts/gst-bundle.sh --help
#
#   -p PLUGIN.so   a plugin for the bundle's plugin directory (build/gst/libgstcudaipc.so, say)
#   FILE           an executable (to bin/) or a shared library (*.so, *.so.N, to lib/)
#
# GST_BUNDLE_PLUGINS: the system plugins to take, by name (default: coreelements videotestsrc
# videoconvertscale videorate app debug coretracers shm nvcodec videoparsersbad). A plugin the
# system does not have is reported and left out; a FILE or -p PLUGIN that does not exist is an
# error. Exit status 0 when the bundle was made, non-zero otherwise. The plugin scanner and the
# plugins come from the GStreamer that gst-launch-1.0 on PATH belongs to.
set -euo pipefail

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  "" | -*) usage >&2; exit 2 ;;
esac
out=$1
shift
die() { echo "gst-bundle.sh: $*" >&2; exit 1; }

launch=$(command -v gst-launch-1.0) || die "no gst-launch-1.0 on PATH (apt-get install gstreamer1.0-tools)"
inspect=$(command -v gst-inspect-1.0) || die "no gst-inspect-1.0 on PATH"
# Where this GStreamer keeps its plugins and scanner: from pkg-config, else Debian's layout.
plugindir=$(pkg-config --variable=pluginsdir gstreamer-1.0 2>/dev/null || true)
scanner=$(pkg-config --variable=pluginscannerdir gstreamer-1.0 2>/dev/null || true)
arch=$(gcc -print-multiarch 2>/dev/null || dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
[ -n "$plugindir" ] || plugindir=/usr/lib/$arch/gstreamer-1.0
[ -n "$scanner" ] || scanner=/usr/lib/$arch/gstreamer1.0/gstreamer-1.0
scanner=$scanner/gst-plugin-scanner
[ -d "$plugindir" ] || die "no plugin directory $plugindir"
[ -x "$scanner" ] || die "no plugin scanner at $scanner"

mkdir -p "$out/bin" "$out/lib" "$out/plugins" "$out/libexec"
cp -L "$launch" "$inspect" "$out/bin/"
cp -L "$scanner" "$out/libexec/"
for p in ${GST_BUNDLE_PLUGINS:-coreelements videotestsrc videoconvertscale videorate app debug \
  coretracers shm nvcodec videoparsersbad}; do
  if [ -f "$plugindir/libgst$p.so" ]; then
    cp -L "$plugindir/libgst$p.so" "$out/plugins/"
  else
    echo "note: this GStreamer has no plugin $p ($plugindir/libgst$p.so): left out" >&2
  fi
done
while [ $# -gt 0 ]; do
  case $1 in
    -p)
      [ -f "${2:-}" ] || die "-p: no plugin file '${2:-}'"
      cp -L "$2" "$out/plugins/"
      shift 2
      ;;
    *.so | *.so.*)
      [ -f "$1" ] || die "no library '$1'"
      cp -L "$1" "$out/lib/"
      shift
      ;;
    *)
      [ -f "$1" ] || die "no file '$1'"
      cp -L "$1" "$out/bin/"
      shift
      ;;
  esac
done

# The libraries every file of the bundle loads, found by ldd (with the bundle's lib/ first, so
# a library added as FILE satisfies its users), less those the target machine provides.
provided='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libmvec|ld-linux[^.]*|linux-vdso|libstdc\+\+|libgcc_s|libcuda|libnvidia-[^.]*)\.so'
missing=0
for f in "$out"/bin/* "$out"/libexec/* "$out"/plugins/*.so "$out"/lib/*.so*; do
  [ -e "$f" ] || continue
  LD_LIBRARY_PATH="$out/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$f" 2>/dev/null |
    awk -v f="$f" '/not found/ { print "MISSING", $1, f } $2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u >"$out/.libs"
while read -r soname path extra; do
  if [ "$soname" = MISSING ]; then
    [[ "$path" =~ $provided ]] && continue
    echo "gst-bundle.sh: $extra needs $path, which is not found here" >&2
    missing=1
    continue
  fi
  [[ "$soname" =~ $provided ]] && continue
  [ -e "$out/lib/$soname" ] || cp -L "$path" "$out/lib/$soname"
done <"$out/.libs"
rm -f "$out/.libs"
[ "$missing" -eq 0 ] || die "some libraries the bundle needs are missing on this machine"

cat >"$out/env.sh" <<'ENV'
# Source this file (bash): the bundle's GStreamer first on every search path, and only the
# bundle's plugins.
GST_BUNDLE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd -P)
export GST_BUNDLE_ROOT
export PATH="$GST_BUNDLE_ROOT/bin${PATH:+:$PATH}"
export LD_LIBRARY_PATH="$GST_BUNDLE_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GST_PLUGIN_SYSTEM_PATH_1_0="$GST_BUNDLE_ROOT/plugins" GST_PLUGIN_PATH_1_0=""
export GST_PLUGIN_SCANNER_1_0="$GST_BUNDLE_ROOT/libexec/gst-plugin-scanner"
export GST_REGISTRY_1_0="${TMPDIR:-/tmp}/gst-bundle-registry-$(id -u).bin"
ENV
# shellcheck disable=SC2012  # counting plain file names
echo "bundle in $out ($(du -sh "$out" | cut -f1)): $(ls "$out/plugins" | wc -l) plugins," \
  "$(ls "$out/lib" | wc -l) libraries; on the target: source $out/env.sh"
