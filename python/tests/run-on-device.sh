#!/usr/bin/env bash
# Runs the Python package's suites (the GPU ones included) and, with --bench, its benchmark on a
# machine without a package registry, from what build-device-bundle.sh made: nothing is compiled
# here. Uses the machine's python3 (torch, cupy, numpy already installed); each test is limited to
# CUDAIPC_TEST_TIMEOUT seconds (default 120). Logs, the JUnit report and the bench tables go to
# $OUT (default build/python-device-out).
#   python/tests/run-on-device.sh [--bench|--bench-only|--filter-bench-only] [--tests-only]
#       [--gst128 G128_DIR] [DIST_DIR] [-- PYTEST_ARGS]
# --gst128: the pipelines use GStreamer 1.28 instead (analytics and tensor metas): G128_DIR as
# tests/gst/gpu/collect.sh makes it (the prefix tarball, the plugin, the meta peer, libcudaipc).
#   (DIST_DIR: default build/python-dist; PYTEST_ARGS: default python/tests)
# The carried GStreamer bundle (DIST_DIR/gst) is used for the gst-launch-1.0 pipelines only: this
# process and the tests' Python keep the machine's own libraries (torch needs its libstdc++).
set -uo pipefail
cd "$(dirname "$0")/../.."
bench=0
tests=1
filter_only=0
g128=
dist=build/python-dist
tests_to_run=(python/tests)
while [ $# -gt 0 ]; do
  case $1 in
    --bench) bench=1 ;;
    --bench-only) bench=1; tests=0 ;;
    --filter-bench-only) bench=1; tests=0; filter_only=1 ;;
    --gst128) shift; g128=$(cd "$1" && pwd) ;;
    --tests-only) bench=0 ;;
    --) shift; tests_to_run=("$@"); break ;;
    *) dist=$1 ;;
  esac
  shift
done
dist=$(cd "$dist" && pwd)
out=${OUT:-$PWD/build/python-device-out}
py=${PYTHON:-python3}
mkdir -p "$out"
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
{
  echo "== $(date -u) on $(hostname)"
  "$py" --version
  nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1 || true
  # The lease's CPU: the loop's rows move with it from lease to lease (docs/benchmarks.md).
  echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs," \
    "$(awk '/^cpu MHz/ {s += $4; n++} END {if (n) printf "%.0f MHz mean", s / n}' /proc/cpuinfo)," \
    "kernel $(uname -r)"
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
  "$py" -c 'import cupy; print("cupy", cupy.__version__)' 2>&1
  # The C function frame.cupy() takes cupy's current stream from (python/native/module.cpp).
  "$py" -c 'import cupy_backends.cuda.stream as s; c = s.__pyx_capi__.get("get_stream_ptr")
print("cupy get_stream_ptr:", c)' 2>&1
  "$py" -c 'import numpy; print("numpy", numpy.__version__)' 2>&1
} | tee "$out/environment.txt"

wheel=$(ls "$dist"/cudaipc-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { echo "no cudaipc wheel in $dist: run build-device-bundle.sh first" >&2; exit 2; }
# A target directory rather than a venv: the system's torch and cupy stay importable. Without pip
# a wheel is a zip file, and unpacking it is its installation.
if ! "$py" -m pip install -q --no-index --no-deps --target "$site" "$wheel" 2>"$out/pip.log"; then
  "$py" -m zipfile -e "$wheel" "$site" || exit 2
fi
if ! "$py" -c 'import pytest' 2>/dev/null; then
  "$py" -m pip install -q --no-index --find-links "$dist" --target "$site" pytest \
    2>>"$out/pip.log" || { echo "pytest is neither installed nor installable from $dist" >&2; exit 2; }
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export CUDAIPC_TEST_TIMEOUT=${CUDAIPC_TEST_TIMEOUT:-120}
# GStreamer for the pipelines the tests and the example start (python/tests/conftest.py).
if [ -n "$g128" ]; then
  tar -xzf "$g128/gst-1.28-prefix.tar.gz" -C "$site"
  export CUDAIPC_GST_BUNDLE="$site/gst-1.28" CUDAIPC_GST_PLUGIN_DIR="$g128/plugins"
  export CUDAIPC_GST_META_PEER="$g128/bin/cudaipc-gst-meta-peer"
  # The plugin and the peer find libcudaipc here (their build-tree run path is gone).
  export LD_LIBRARY_PATH="$g128/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  LD_LIBRARY_PATH="$site/gst-1.28/lib:$site/gst-1.28/lib/deps:$LD_LIBRARY_PATH" \
    "$site/gst-1.28/bin/gst-launch-1.0" --version 2>&1 | head -1 | tee -a "$out/environment.txt"
elif [ -f "$dist/gst/env.sh" ]; then
  export CUDAIPC_GST_BUNDLE="$dist/gst"
  export CUDAIPC_GST_PLUGIN_DIR="$dist/gst/plugins"
  # In a subshell with the bundle's environment: its binaries find their libraries through it.
  # shellcheck disable=SC1091
  (source "$dist/gst/env.sh" && gst-inspect-1.0 --version) 2>&1 | head -1 |
    tee -a "$out/environment.txt"
else
  echo "no GStreamer bundle in $dist/gst: the pipeline tests skip" | tee -a "$out/environment.txt"
fi
[ -f "$dist/media/clip.h264" ] && export CUDAIPC_TEST_H264="$dist/media/clip.h264"
[ -z "$g128" ] && [ -x "$dist/gst/bin/cudaipc-gst-meta-peer" ] &&
  export CUDAIPC_GST_META_PEER="$dist/gst/bin/cudaipc-gst-meta-peer"
"$py" -c 'import cudaipc, sys; print("cudaipc from", cudaipc.__file__)' | tee -a "$out/environment.txt"

rc=0
if [ "$tests" -eq 1 ]; then
  "$py" -m pytest "${tests_to_run[@]}" -v -rA -p no:cacheprovider --junitxml="$out/pytest.xml" \
    2>&1 | tee "$out/pytest.log"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 5 ] && rc=0
fi
if [ "$bench" -eq 1 ]; then
  # CONSUMER_RUNS: the consumer_overhead.py runs, each a memory and its options joined by "+"
  # (default "cuda host"; e.g. "cuda+--pin cuda host+--pin"; "none" runs none), their tables in
  # bench-MEMORY.txt.
  for run in ${CONSUMER_RUNS:-cuda host}; do
    { [ "$filter_only" -eq 1 ] || [ "$run" = none ]; } && break
    memory=${run%%+*}
    opts=
    [ "$run" != "$memory" ] && opts=${run#*+}
    # shellcheck disable=SC2086
    timeout 900 "$py" python/bench/consumer_overhead.py --memory "$memory" --frames 3000 \
      ${opts//+/ } --cxx-consumer "$dist/bench/cudaipc-bench-consumer-rate" \
      --cxx-producer "$dist/bench/cudaipc-bench-producer-rate" 2>&1 | tee -a "$out/bench-$memory.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  done
  # What metas cost publish() (docs/metas.md), and cudaipcfilter with a C++ and a Python null
  # model on CUDA 1080p frames (docs/benchmarks.md).
  if [ "$filter_only" -eq 0 ]; then
    # METAS_BENCH=0 leaves the metas rows out (a run about something else).
    if [ "${METAS_BENCH:-1}" != 0 ]; then
      timeout 300 "$py" python/bench/metas_overhead.py 2>&1 | tee "$out/bench-metas.txt"
      [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    fi
    # Where a served model's reply() goes, call by call, after a few kernels as a model's
    # (REPLY_BUSY, default 20), beside the machine's own cost of waking a sleeping process.
    if [ -x "$dist/bench/cudaipc-bench" ]; then
      # Copied out of build/, it finds libcudaipc beside it.
      LD_LIBRARY_PATH="$dist/bench${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        timeout 60 "$dist/bench/cudaipc-bench" --host-only --backend=host --sizes=64K \
        --consumers=1 --quick --pin 2>&1 | grep -A3 "futex floor" | tee "$out/bench-reply.txt"
    fi
    timeout 180 "$py" python/bench/reply_profile.py --loop --frames 3000 \
      --busy "${REPLY_BUSY:-20}" 2>&1 | tee -a "$out/bench-reply.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  fi
  # With --gst128 the filter bench and the pipelines are 1.28's (the filter lends its slots to
  # cudaupload and NVDEC there), else the 1.22 bundle's.
  if [ -n "$g128" ]; then
    gst_env="source '$site/gst-1.28/env.sh'
export GST_PLUGIN_PATH_1_0='$g128/plugins' GST_REGISTRY_1_0='$site/registry-128.bin'
export LD_LIBRARY_PATH='$g128/lib':\$LD_LIBRARY_PATH"
    filter_bench=$g128/bin/cudaipc-gst-filter-bench
    gst_launch=$site/gst-1.28/bin/gst-launch-1.0
  else
    gst_env="source '$dist/gst/env.sh'"
    filter_bench=$dist/gst/bin/cudaipc-gst-filter-bench
    gst_launch=$dist/gst/bin/gst-launch-1.0
  fi
  if [ -x "$filter_bench" ]; then
    # The bench runs in the GStreamer bundle's environment, the model processes it starts in this
    # machine's own (torch needs its libstdc++).
    cat >"$site/filter-bench" <<EOF
#!/usr/bin/env bash
$gst_env
export LD_LIBRARY_PATH=\$LD_LIBRARY_PATH:/usr/local/nvidia/lib64
exec "$filter_bench" "\$@"
EOF
    cat >"$site/python" <<EOF
#!/usr/bin/env bash
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" PYTHONPATH="$PYTHONPATH"
exec "$(command -v "$py")" "\$@"
EOF
    chmod +x "$site/filter-bench" "$site/python"
    timeout 300 "$site/filter-bench" --cuda --frames=3000 --python="$site/python" 2>&1 |
      tee "$out/bench-filter.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    # A real model (torch, fp16 convolutions) alone and serving the filter: the rate ratio.
    # The base network (~0.9 ms a frame on the H100) and one twice as wide (~4x the work).
    : >"$out/bench-filter-model.txt"
    : >"$out/bench-many-pipelines.txt"
    # Each with the answer taken to the CPU per frame, and with it left on the GPU for the core
    # to send (--gpu-results: reply() does not wait).
    # FILTER_WIDTHS (default "1 2") and FILTER_MODEL_ARGS (e.g. --inflight=16) narrow or vary
    # the runs.
    # FILTER_VARIANTS: the loops (default: serial with the answer on the CPU, the overlapped loop
    # docs/python.md teaches for it, and the answer left on the GPU); "-" is the plain loop, and
    # "+" joins a variant's options ("--gpu-results+--pin").
    # MANY_PIPELINES: the pipelines of many_pipelines.py (default 16; empty skips it), each
    # `videotestsrc ! cudaupload ! cudaipcfilter ! cudaipcringsink` in a gst-launch-1.0 of the
    # bundle, into one batching model process; MANY_ARGS adds to its options (e.g. --pin);
    # MANY_RUNS runs it once per option set, each joined by "+" (e.g. "--pin --pin+--interleave");
    # MANY_MPS_ONLY=1 runs it under MPS only. A run with "--trace+DIR" has its model process traced
    # into DIR and its stalled batches taken apart after it (python/bench/stall_trace.py).
    printf '#!/usr/bin/env bash\n%s\nexport LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/nvidia/lib64\nexec "%s" "$@"\n' \
      "$gst_env" "$gst_launch" >"$site/gst-launch"
    chmod +x "$site/gst-launch"
    model_rows() {  # WIDTHS VARIANTS [--label TEXT]
      local width results
      for width in $1; do
        for results in $2; do
          [ "$results" = - ] && results=
          # shellcheck disable=SC2086
          timeout 300 "$py" -u python/bench/filter_model_rate.py --filter-bench \
            "$site/filter-bench" --python "$site/python" --width "$width" "${@:3}" \
            ${results//+/ } ${FILTER_MODEL_ARGS:-} 2>&1 | tee -a "$out/bench-filter-model.txt"
          [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
        done
      done
      if [ -n "${MANY_PIPELINES-16}" ] && { [ -z "${MANY_MPS_ONLY:-}" ] || [ -n "$mps_on" ]; }; then
        local many_args many_runs=${MANY_ARGS:-}
        many_runs=${MANY_RUNS:-${many_runs// /+}}
        for many_args in ${many_runs:--}; do
          [ "$many_args" = - ] && many_args=
          echo "== many_pipelines.py ${*:3} ${many_args//+/ }" | tee -a "$out/bench-many-pipelines.txt"
          # shellcheck disable=SC2086
          timeout 240 "$py" -u python/bench/many_pipelines.py --pipelines "${MANY_PIPELINES-16}" \
            --gst-launch "$site/gst-launch" ${many_args//+/ } 2>&1 |
            tee -a "$out/bench-many-pipelines.txt"
          [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
          local trace_dir trace
          trace_dir=$(sed -n 's/.*--trace+\([^+]*\).*/\1/p' <<<"$many_args")
          for trace in ${trace_dir:+"$trace_dir"/served-batch*.json.gz}; do
            [ -f "$trace" ] || continue
            "$py" python/bench/stall_trace.py "$trace" 2>&1 | tee -a "$out/bench-many-pipelines.txt"
            [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
          done
        done
      fi
    }
    mps_on=
    model_rows "${FILTER_WIDTHS:-1 2}" "${FILTER_VARIANTS:-- --overlap --gpu-results}"
    # The same under MPS: the pipeline's copies and the model's kernels share the GPU instead of
    # taking turns between two contexts.
    # shellcheck disable=SC1091
    source tests/bench/gpu/mps.sh
    if [ -n "${MPS_WIDTHS-1 2}" ] && mps_start "$out/mps-control.log"; then
      mps_on=1
      model_rows "${MPS_WIDTHS-1 2}" "${MPS_VARIANTS:-- --overlap --gpu-results}" --label "MPS on"
      mps_servers | tee -a "$out/bench-filter-model.txt"
      mps_stop
    else
      echo "MPS could not start (mps-control.log): the MPS row is skipped"
    fi
  fi
fi
exit "$rc"
