#!/usr/bin/env bash
# Bundles this machine's `perf` for a machine that has none (the GPU test machine: no package
# registry), with every shared library it loads except glibc's own, the C++ runtime and zlib,
# which the target provides. There, OUTDIR/perf runs it with its libraries.
#
#   scripts/perf-bundle.sh OUTDIR
#
# python/bench/perf_breakdown.py uses it (--perf OUTDIR/perf) to split the package's per-frame
# calls into where the GPU machine's CPU spends them. Exit status 0 when the bundle was made.
set -euo pipefail

case "${1:-}" in
  -h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "" | -*) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
out=$1
perf=$(command -v perf) || { echo "perf-bundle.sh: no perf on PATH (apt-get install linux-perf)" >&2; exit 1; }
mkdir -p "$out/lib"
cp -L "$perf" "$out/perf.bin"
ldd "$perf" | awk '$3 ~ /^\// { print $3 }' | while read -r lib; do
  case $(basename "$lib") in
    libc.so.* | libm.so.* | libstdc++.so.* | libgcc_s.so.* | libz.so.* | ld-linux*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
strip --strip-unneeded "$out/perf.bin" "$out"/lib/* 2>/dev/null || true
cat >"$out/perf" <<'EOF'
#!/usr/bin/env bash
# perf with the libraries bundled beside it. A program perf starts would inherit that library
# path: attach to it instead (record -p PID), as perf_breakdown.py does.
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH=$here/lib exec "$here/perf.bin" "$@"
EOF
chmod +x "$out/perf"
"$out/perf" --version >/dev/null || { echo "perf-bundle.sh: the bundled perf does not run" >&2; exit 1; }
echo "perf bundle in $out ($(du -sh "$out" | cut -f1)): run $out/perf"
