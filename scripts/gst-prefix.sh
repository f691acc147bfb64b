#!/usr/bin/env bash
# Builds GStreamer of any release tag from source into a relocatable prefix, for building and
# testing cudaipc against a GStreamer other than the system's (docs/versions.md): Debian 12 has
# 1.22, and the plugin's 1.24+ code paths (zero-copy import, analytics and tensor metas,
# objectdetectionoverlay) need a newer one.
#
#   scripts/gst-prefix.sh TAG [DIR]        e.g. scripts/gst-prefix.sh 1.28.6
#   scripts/gst-prefix.sh --help
#
# The prefix goes to DIR/gst-SERIES (default DIR: build-gst, so 1.28.6 lands in
# build-gst/gst-1.28); `source DIR/gst-SERIES/env.sh` puts it first on PATH, LD_LIBRARY_PATH,
# PKG_CONFIG_PATH and GStreamer's plugin path (only its own plugins: 1.22's must not load into the
# same process). Then `meson setup build-gst128 -Dgst=enabled` builds cudaipc against it.
#
# What it holds: core (with the check library and tracers), base (app, videotestsrc,
# videoconvertscale, tcp, typefind), good (autovideosink, qtdemux/mp4mux, rtp, udp), and from bad: nvcodec (cudaupload, cudadownload, NVDEC/NVENC,
# and nvcodec's own cudaipcsink/cudaipcsrc), debugutils (checksumsink), shm, unixfd, videoparsers
# (h264parse), gdp, and where the tag has them tensordecoders and analyticsoverlay
# (objectdetectionoverlay). Options the tag does not know are left out, and printed. Non-glibc
# libraries the prefix needs are copied into lib/deps, so it runs where they are not installed
# (the prefix can be moved or packed: nothing in it names the directory it was built in).
#
# Environment:
#   GST_SOURCE   a git clone (or bare mirror) of the GStreamer monorepo holding TAG, whose tree is
#                unpacked into DIR/src-TAG; without it the tag is cloned (shallow) from GST_REMOTE
#                (default https://gitlab.freedesktop.org/gstreamer/gstreamer.git)
#   JOBS         parallel compile jobs (default: the number of CPUs)
#   CUDA_HOME    CUDA toolkit for nvcodec's precompiled kernels (default /usr/local/cuda; without
#                nvcc there nvcodec compiles its kernels at run time with NVRTC)
#   NVCODEC_PATCH=0  leave nvcodec as released: it then registers no element at all (not even
#                cudaupload) where the driver's NVENC/NVDEC libraries are missing, as in GPU
#                containers started without the driver's video capability. By default one
#                condition is changed so that its CUDA elements register there.
# Installs missing build packages (apt-get, with sudo when not root) and meson into a virtualenv
# under DIR (GStreamer 1.24+ needs a newer meson than Debian 12's). Exit status 0 when the prefix
# was built and passed its checks (gst-launch-1.0 runs a pipeline from it), non-zero otherwise.
set -euo pipefail

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  "" | -*) usage >&2; exit 2 ;;
esac
tag=$1
dir=${2:-build-gst}
[[ "$tag" =~ ^1\.[0-9]+\.[0-9]+$ ]] || { echo "gst-prefix.sh: TAG is a release such as 1.28.6, not '$tag'" >&2; exit 2; }
series=${tag%.*}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
prefix=$dir/gst-$series
build=$dir/build-$tag
venv=$dir/meson-venv
jobs=${JOBS:-$(nproc)}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
step() { printf '\n== %s\n' "$*"; }

step "build tools"
packages=(build-essential pkg-config ninja-build flex bison git python3-venv file
  libglib2.0-dev libpango1.0-dev libcairo2-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  { "${sudo[@]}" apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
      "${missing[@]}"; } >"$dir/apt.log" 2>&1 || { tail -n 20 "$dir/apt.log" >&2; exit 1; }
fi
if ! "$venv/bin/meson" --version >/dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check 'meson>=1.4'
fi
meson=$venv/bin/meson
echo "meson $("$meson" --version), ninja $(ninja --version)"

step "source $tag"
src=$dir/src-$tag
if [ ! -f "$src/.cudaipc-tag" ]; then
  rm -rf "$src"
  if [ -n "${GST_SOURCE:-}" ]; then
    gitdir=$(cd "$GST_SOURCE" && git rev-parse --absolute-git-dir) ||
      { echo "gst-prefix.sh: GST_SOURCE=$GST_SOURCE is not a git repository" >&2; exit 1; }
    git --git-dir="$gitdir" rev-parse -q --verify "refs/tags/$tag" >/dev/null ||
      { echo "gst-prefix.sh: no tag $tag in $GST_SOURCE" >&2; exit 1; }
    # The tag's tree, less the plugin documentation caches (large, and not needed with docs
    # off; a mirror may even lack them).
    mkdir -p "$src"
    git --git-dir="$gitdir" archive "$tag" -- . ':(exclude,glob)**/gst_plugins_cache.json' |
      tar -x -C "$src"
  else
    git clone -q --depth 1 --branch "$tag" \
      "${GST_REMOTE:-https://gitlab.freedesktop.org/gstreamer/gstreamer.git}" "$src"
  fi
  if [ "${NVCODEC_PATCH:-1}" = 1 ]; then
    # nvcodec's plugin_init returns before registering anything when neither NVENC nor NVDEC
    # loads; its CUDA elements need only libcuda, so let them register (the codecs' own
    # registration is conditioned on NVENC/NVDEC already).
    python3 - "$src/subprojects/gst-plugins-bad/sys/nvcodec/plugin.c" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
pattern = re.compile(r"(\n\s*if \(!nvdec_available && !nvenc_available\))\s*\n\s*return TRUE;")
new, n = pattern.subn(
    r'\1\n    GST_INFO ("no NVENC and no NVDEC: registering the CUDA elements only");', text, count=1)
print("nvcodec: CUDA elements register without NVENC/NVDEC" if n else
      "nvcodec: this tag registers its CUDA elements without NVENC/NVDEC already (or differs): unchanged")
open(path, "w").write(new)
PY
  fi
  echo "$tag" >"$src/.cudaipc-tag"
fi
echo "$src"

step "configure"
opts=(--prefix="$prefix" --libdir=lib --buildtype=release --wrap-mode=nodownload
  -Dpkgconfig.relocatable=true -Dauto_features=disabled
  -Dbase=enabled -Dgood=enabled -Dbad=enabled -Dugly=disabled -Dlibav=disabled
  -Ddevtools=disabled -Dges=disabled -Drtsp_server=disabled -Dpython=disabled
  -Dgst-examples=disabled -Dtls=disabled -Dlibnice=disabled -Dtests=disabled -Dexamples=disabled
  -Ddoc=disabled -Dintrospection=disabled -Dnls=disabled -Dtools=enabled -Dorc=disabled
  -Dgstreamer:check=enabled -Dgstreamer:coretracers=enabled
  -Dgst-plugins-base:app=enabled -Dgst-plugins-base:videotestsrc=enabled
  -Dgst-plugins-base:videoconvertscale=enabled -Dgst-plugins-base:gl=disabled
  -Dgst-plugins-base:tcp=enabled -Dgst-plugins-base:typefind=enabled
  -Dgst-plugins-good:autodetect=enabled -Dgst-plugins-good:isomp4=enabled
  -Dgst-plugins-good:rtp=enabled -Dgst-plugins-good:rtpmanager=enabled
  -Dgst-plugins-good:udp=enabled
  -Dgst-plugins-bad:nvcodec=enabled -Dgst-plugins-bad:debugutils=enabled
  -Dgst-plugins-bad:shm=enabled -Dgst-plugins-bad:unixfd=enabled
  -Dgst-plugins-bad:videoparsers=enabled -Dgst-plugins-bad:gdp=enabled
  -Dgst-plugins-bad:tensordecoders=enabled -Dgst-plugins-bad:analyticsoverlay=enabled)
if [ -x "$cuda_home/bin/nvcc" ]; then
  export PATH="$cuda_home/bin:$PATH"
  opts+=(-Dgst-plugins-bad:nvcodec-cuda-precompile=enabled -Dgst-plugins-bad:nvcodec-nvcc-arch=compute_75)
fi
# Only the options this tag's subprojects declare (1.22 has no analyticsoverlay, say).
kept=()
for o in "${opts[@]}"; do
  if [[ "$o" =~ ^-D(gstreamer|gst-plugins-base|gst-plugins-bad):([a-z0-9_-]+)= ]]; then
    f=$src/subprojects/${BASH_REMATCH[1]}/meson.options
    [ -f "$f" ] || f=$src/subprojects/${BASH_REMATCH[1]}/meson_options.txt
    if ! grep -q "option *( *'${BASH_REMATCH[2]}'" "$f"; then
      echo "skipped $o ($tag has no such option)"
      continue
    fi
  fi
  kept+=("$o")
done
# A build directory made with other options starts over: meson cannot reconfigure a subproject
# that was disabled before (its options are unknown to it).
if [ -f "$build/build.ninja" ] && [ "$(cat "$build/.cudaipc-options" 2>/dev/null)" = "${kept[*]}" ]; then
  "$meson" setup --reconfigure "$build" "$src" "${kept[@]}" >"$build.setup.log" 2>&1 ||
    { tail -n 40 "$build.setup.log" >&2; exit 1; }
else
  rm -rf "$build"
  "$meson" setup "$build" "$src" "${kept[@]}" >"$build.setup.log" 2>&1 ||
    { tail -n 40 "$build.setup.log" >&2; exit 1; }
  echo "${kept[*]}" >"$build/.cudaipc-options"
fi
echo "log: $build.setup.log"

step "build and install into $prefix"
ninja -C "$build" -j"$jobs" >"$build.ninja.log" 2>&1 || { tail -n 60 "$build.ninja.log" >&2; exit 1; }
rm -rf "$prefix"
"$meson" install -C "$build" --no-rebuild --quiet >"$build.install.log" 2>&1 ||
  { tail -n 40 "$build.install.log" >&2; exit 1; }

step "runtime libraries into $prefix/lib/deps"
# Everything the prefix's programs and plugins load from the system, except glibc's own
# libraries, the C++ runtime (the target's newer one must win) and the GPU driver's.
system_libs='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libmvec|ld-linux[^.]*|linux-vdso|libstdc\+\+|libgcc_s|libcuda|libnvidia-[^.]*)\.so'
mkdir -p "$prefix/lib/deps"
find "$prefix" -path "$prefix/lib/deps" -prune -o -type f -print | while read -r f; do
  file -b "$f" | grep -q '^ELF' || continue
  { LD_LIBRARY_PATH="$prefix/lib" ldd "$f" 2>/dev/null || true; } |
    awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r soname path; do
  case "$path" in "$prefix"/*) continue ;; esac
  [[ "$soname" =~ $system_libs ]] && continue
  cp -L "$path" "$prefix/lib/deps/$soname"
done
ls "$prefix/lib/deps"

cat >"$prefix/env.sh" <<'ENV'
# Source this file (bash): GStreamer from this prefix first on every search path, and only its
# plugins. Everything is found relative to this file, so the prefix may be moved.
GST_PREFIX_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd -P)
export GST_PREFIX_ROOT
export PATH="$GST_PREFIX_ROOT/bin${PATH:+:$PATH}"
export LD_LIBRARY_PATH="$GST_PREFIX_ROOT/lib:$GST_PREFIX_ROOT/lib/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PKG_CONFIG_PATH="$GST_PREFIX_ROOT/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export GST_PLUGIN_SYSTEM_PATH_1_0="$GST_PREFIX_ROOT/lib/gstreamer-1.0"
export GST_PLUGIN_SCANNER_1_0="$GST_PREFIX_ROOT/libexec/gstreamer-1.0/gst-plugin-scanner"
export GST_PLUGIN_SCANNER="$GST_PLUGIN_SCANNER_1_0"
export GST_REGISTRY_1_0="${TMPDIR:-/tmp}/gst-registry-$(basename "$GST_PREFIX_ROOT")-$(id -u).bin"
ENV
echo "GStreamer $tag built from source by scripts/gst-prefix.sh on $(date -u +%F); source env.sh" \
  >"$prefix/README.txt"

step "check"
(
  # shellcheck disable=SC1091
  source "$prefix/env.sh"
  export GST_REGISTRY_1_0="$dir/check-registry.bin"
  rm -f "$GST_REGISTRY_1_0"
  gst-launch-1.0 --version | sed -n 1p  # (head would cut the pipe: SIGPIPE under pipefail)
  pkg-config --modversion gstreamer-1.0 gstreamer-cuda-1.0
  gst-launch-1.0 -q videotestsrc num-buffers=3 ! video/x-raw,format=NV12,width=64,height=48 \
    ! checksumsink
  for e in cudaupload objectdetectionoverlay; do
    gst-inspect-1.0 --exists "$e" && echo "$e: yes" ||
      echo "$e: no (nvcodec's elements register only where a CUDA driver is; overlay: 1.24+)"
  done
  rm -f "$GST_REGISTRY_1_0"
)
echo
echo "GStreamer $tag is in $prefix: source $prefix/env.sh, then build cudaipc against it:"
echo "  meson setup build-gst${series//./} -Dgst=enabled && ninja -C build-gst${series//./}"
