#!/usr/bin/env bash
# One device call: the GStreamer GPU suite, then cudaipc-gst-bench --gpu under GStreamer 1.22
# (Debian's nvcodec) and 1.28 (with GStreamer's own cudaipc elements beside ours). Logs in $OUT.
#   bash tests/gst/gpu/device-all.sh DIR      (DIR made by collect.sh)
set -u
dir=$(cd "${1:?usage: device-all.sh DIR}" && pwd)
out=${OUT:-$dir/logs}
mkdir -p "$out"
frames=${CUDAIPC_BENCH_FRAMES:-300}
# The suite's own limit: every case has its own within it; the two-GPU cases (skipped on one GPU)
# add about two dozen.
CUDAIPC_GST_FRAMES=${CUDAIPC_GST_FRAMES:-120} timeout -k 5 480 \
  bash "$dir/run-gst-gpu.sh" --device "$dir" >"$out/gst-gpu.txt" 2>&1
suite=$?
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/nvidia/lib64"
if [ -x "$dir/g122/bin/cudaipc-gst-bench" ]; then
  (
    # shellcheck disable=SC1091
    source "$dir/g122/env.sh"
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/nvidia/lib64
    timeout -k 5 120 cudaipc-gst-bench --gpu --frames="$frames" --warmup=30 \
      --json "$out/bench-122.json"
  ) >"$out/bench-122.txt" 2>&1
fi
if [ -x "$dir/g128/bin/cudaipc-gst-bench" ]; then
  g=$(mktemp -d)
  tar -xf "$dir/g128/gst-1.28-prefix.tar.gz" -C "$g"
  (
    # shellcheck disable=SC1091
    source "$g/gst-1.28/env.sh"
    export GST_PLUGIN_PATH_1_0=$dir/g128/plugins GST_REGISTRY_1_0=$g/registry.bin
    export LD_LIBRARY_PATH=$dir/g128/lib:$LD_LIBRARY_PATH:/usr/local/nvidia/lib64
    timeout -k 5 150 "$dir/g128/bin/cudaipc-gst-bench" --gpu --frames="$frames" --warmup=30 \
      --json "$out/bench-128.json"
    # The pre-uploaded rows again with a detector's output crossing as metas (docs/metas.md),
    # and what encoding and attaching those metas costs per frame.
    if [ -x "$dir/g128/bin/cudaipc-gst-meta-bench" ]; then
      timeout -k 5 120 "$dir/g128/bin/cudaipc-gst-bench" --gpu --metas --frames="$frames" \
        --warmup=30 --transports=cudaipc-cuda-appsrc-import,cudaipc-cuda-appsrc-copy
      timeout -k 5 60 "$dir/g128/bin/cudaipc-gst-meta-bench" --frames=20000
    fi
    # cudaipcfilter with a C++ null model, 1080p CUDA frames, beside identity.
    if [ -x "$dir/g128/bin/cudaipc-gst-filter-bench" ]; then
      timeout -k 5 120 "$dir/g128/bin/cudaipc-gst-filter-bench" --cuda --frames=5000
    fi
  ) >"$out/bench-128.txt" 2>&1
  rm -rf "$g"
fi
grep -E '^(PASS|FAIL|SKIP|==)|passed' "$out/gst-gpu.txt"
for v in 122 128; do
  [ -f "$out/bench-$v.txt" ] && { echo "== bench $v"; grep -E '^\||^[0-9]+x|every|FAIL|rror|meta cost' "$out/bench-$v.txt" | cut -c1-400; }
done
exit "$suite"
