#!/usr/bin/env bash
# A GPU machine call's work, part by part, from the bundles scripts/device-bundles.sh made here
# (nothing is built there). Each part runs under its own time limit and logs into $OUT/PART (OUT
# default build/device-out); at the end every log is gathered into $OUT/all.txt, one file to read
# back. Exit status: non-zero when any part failed.
#   scripts/device-run.sh PART...
# Parts, their carry and about how long each takes on an H200:
#   cpp     the C++ GPU suites (tests/gpu/run-on-device.sh)          .gpu                  3 min
#   python  the Python suites on GStreamer 1.28                     .gst-gpu/g128          5 min
#                                                                   build/python-dist
#   gst     the GStreamer GPU suite, 1.22 and 1.28                  .gst-gpu               2 min
#   table   the model loop's table (docs/benchmarks.md): consumer   build/python-dist      4 min
#           rows, filter_model_rate x1 with and without MPS,
#           many_pipelines 16x1080p30 plain and interleaved (MPS)
#   trace   many_pipelines under MPS with its model process traced  build/python-dist      1 min
#           and its threads sampled; stall_trace's view of each stall
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
[ $# -gt 0 ] || { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
out=$(mkdir -p "${OUT:-build/device-out}" && cd "${OUT:-build/device-out}" && pwd)
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/nvidia/lib64
rc=0
: >"$out/parts.txt"
# The settings of the table's many_pipelines rows (docs/benchmarks.md): pinned, the ball pattern,
# the filters at nice -20 with a 0.5 ms time slice.
many="--pin+--pattern+ball+--nice+-20+--time-slice+500000"
for part in "$@"; do
  o=$out/$part
  mkdir -p "$o"
  start=$SECONDS
  case $part in
    cpp) OUT=$o timeout -k 10 280 bash tests/gpu/run-on-device.sh .gpu tests ;;
    python)
      OUT=$o timeout -k 10 420 bash python/tests/run-on-device.sh --tests-only \
        --gst128 .gst-gpu/g128 build/python-dist ;;
    gst) CUDAIPC_GST_FRAMES=60 OUT=$o timeout -k 10 150 bash .gst-gpu/run-gst-gpu.sh --device .gst-gpu \
      >"$o/gst-gpu.txt" 2>&1 ;;
    table)
      METAS_BENCH=0 CONSUMER_RUNS="cuda+--pin+--rows+consumer host+--pin+--rows+consumer" \
        FILTER_WIDTHS=1 FILTER_VARIANTS=--overlap+--graph+--pin MPS_WIDTHS=1 \
        MPS_VARIANTS=--overlap+--graph+--pin MANY_MPS_ONLY=1 MANY_RUNS="$many $many+--interleave" \
        OUT=$o timeout -k 10 420 bash python/tests/run-on-device.sh --bench-only build/python-dist ;;
    trace)
      t=$(mktemp -d)
      FILTER_WIDTHS=" " MPS_WIDTHS=" " MANY_MPS_ONLY=1 MANY_RUNS="$many+--trace+$t" OUT=$o timeout -k 10 300 \
        bash python/tests/run-on-device.sh --filter-bench-only build/python-dist
      part_rc=$?
      # The thread samples, compressed, for stall_trace.py here.
      [ -f "$t/threads.json" ] && gzip -c "$t/threads.json" >"$o/threads.json.gz"
      rm -rf "$t"
      (exit $part_rc) ;;
    *) echo "unknown part: $part" >&2; false ;;
  esac
  part_rc=$?
  echo "== $part: exit $part_rc in $((SECONDS - start)) s" >>"$out/parts.txt"
  [ "$part_rc" -eq 0 ] || rc=1
done
# One file to read back, the logs in the order the parts ran; what it holds is not sent twice
# (KEEP_LOGS=1 keeps the logs too).
for f in "$out/parts.txt" $(find "$out" -mindepth 2 -type f ! -name '*.gz' | sort); do
  echo "=== $f"
  cat "$f"
done >"$out/all.txt"
[ "${KEEP_LOGS:-0}" = 1 ] || find "$out" -mindepth 2 -type f ! -name '*.gz' -delete
cat "$out/parts.txt"
exit "$rc"
