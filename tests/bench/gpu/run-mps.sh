#!/usr/bin/env bash
# Device-side run of cudaipc-bench-gpu-pipeline: the "pipeline" scenario without MPS, then under
# an MPS daemon of this script's own (private pipe and log directories, stopped on every way out),
# then the "attach" scenario without MPS. Every step runs under `timeout`; about a minute in all,
# under four minutes if every step runs to its limit.
#   bash tests/bench/gpu/run-mps.sh OUTDIR [BINDIR]
# BINDIR (default .gpu) is what tests/gpu/collect.sh made: the benchmark and libcudaipc.
# GPU_PIPELINE_ARGS adds options to every run (e.g. "--samples=500 --frames=1000").
# OUTDIR gets one log per step, mps-control.log (the daemon's answers and its own logs) and
# summary.txt; the exit status is 0 when every step exited 0.
set -u
out=${1:?usage: run-mps.sh OUTDIR [BINDIR]}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bindir=$(cd "${2:-.gpu}" && pwd) || exit 2
bin=$bindir/cudaipc-bench-gpu-pipeline
if [ ! -x "$bin" ]; then
  echo "no $bin: run tests/gpu/collect.sh BUILD_DIR $bindir on the build machine first" >&2
  exit 2
fi
export LD_LIBRARY_PATH="$bindir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# A client looks for a daemon in CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps); only the MPS
# step sets it, so the other steps see MPS only if someone else runs a daemon there (the
# benchmark's "MPS:" line says so).
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
read -r -a extra <<<"${GPU_PIPELINE_ARGS:-}"
summary=$out/summary.txt
: >"$summary"
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version,compute_mode --format=csv,noheader; } \
  2>&1 | tee -a "$summary"

status=0
# step NAME LIMIT_S [VAR=VALUE...] -- ARGS...: one benchmark run, its output in $out/NAME.log.
# Each of its processes gets a time limit 15 s under the step's, so a hung process is reported
# by the benchmark itself before `timeout` has to kill it.
step() {
  local name=$1 limit=$2
  shift 2
  local env=()
  while [ "$1" != -- ]; do
    env+=("$1")
    shift
  done
  shift
  local start=$SECONDS
  timeout -k 10 "$limit" env "${env[@]}" "$bin" --time-limit=$((limit - 15)) "$@" \
    "${extra[@]}" >"$out/$name.log" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || status=1
  printf '%-16s rc=%-3s %4ss\n' "$name" "$rc" $((SECONDS - start)) | tee -a "$summary"
  grep -E '^(MPS|label|skipped|FAILED)' "$out/$name.log" | tee -a "$summary"
}

# shellcheck source=mps.sh
source "$(dirname "$0")/mps.sh"
trap mps_stop EXIT
trap 'exit 130' INT TERM

step pipeline-no-mps 50 -- --scenario=pipeline --label="MPS off"

if mps_start "$out/mps-control.log"; then
  echo "MPS daemon started (pipe $CUDA_MPS_PIPE_DIRECTORY)" | tee -a "$summary"
  step pipeline-mps 50 -- --scenario=pipeline --label="MPS on"
  mps_servers | tee -a "$summary"
  mps_stop
else
  echo "MPS step skipped: $(tail -n 1 "$out/mps-control.log")" | tee -a "$summary"
  status=1
fi

step attach 70 -- --scenario=attach

echo "logs in $out; exit $status" | tee -a "$summary"
exit "$status"
