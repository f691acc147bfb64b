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

mps_control=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
mps_pipe=
mps_log=
# ask COMMAND: one command to this script's daemon, answer into mps-control.log.
ask() {
  echo "\$ echo $1 | nvidia-cuda-mps-control" >>"$out/mps-control.log"
  echo "$1" | CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$mps_log \
    timeout 15 "$mps_control" >>"$out/mps-control.log" 2>&1
}
# The daemon and server of this script's own: same uid, and our pipe directory in their
# environment (a daemon someone else runs is never touched).
our_mps_pids() {
  local pid
  for pid in $(pgrep -u "$(id -u)" -x nvidia-cuda-mps 2>/dev/null); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null \
      | grep -qx "CUDA_MPS_PIPE_DIRECTORY=$mps_pipe" && echo "$pid"
  done
}
stop_mps() {
  [ -n "$mps_pipe" ] || return 0
  ask quit
  # quit returns before the daemon and its server have gone: wait, so the next step really runs
  # without MPS; if they outstay 10 s, end them (they are this script's).
  for _ in $(seq 50); do
    [ -z "$(our_mps_pids)" ] && break
    sleep 0.2
  done
  local left
  left=$(our_mps_pids)
  if [ -n "$left" ]; then
    echo "MPS processes still there after quit, terminated: $left" | tee -a "$summary"
    # shellcheck disable=SC2086  # one pid a word
    kill $left 2>/dev/null
  fi
  cat "$mps_log"/*.log >>"$out/mps-control.log" 2>/dev/null
  rm -rf "$mps_pipe" "$mps_log"
  mps_pipe=
}
trap stop_mps EXIT
trap 'exit 130' INT TERM

step pipeline-no-mps 50 -- --scenario=pipeline --label="MPS off"

if [ -x "$mps_control" ]; then
  mps_pipe=$(mktemp -d /tmp/cudaipc-mps-pipe-XXXXXX)
  mps_log=$(mktemp -d /tmp/cudaipc-mps-log-XXXXXX)
  echo "starting MPS: $mps_control -d (pipe $mps_pipe, log $mps_log)" | tee -a "$summary"
  if CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$mps_log \
    timeout 15 "$mps_control" -d >>"$out/mps-control.log" 2>&1; then
    step pipeline-mps 50 CUDA_MPS_PIPE_DIRECTORY="$mps_pipe" \
      CUDA_MPS_LOG_DIRECTORY="$mps_log" -- --scenario=pipeline --label="MPS on"
    # A server listed here means the benchmark's processes really were MPS clients: a client
    # that cannot reach the daemon runs without MPS and says nothing.
    ask get_server_list
    grep -A3 'get_server_list' "$out/mps-control.log" | tee -a "$summary"
  else
    echo "MPS daemon did not start (mps-control.log)" | tee -a "$summary"
    status=1
  fi
  stop_mps
else
  echo "no nvidia-cuda-mps-control (PATH or /usr/local/nvidia/bin): MPS step skipped" \
    | tee -a "$summary"
  status=1
fi

step attach 70 -- --scenario=attach

echo "logs in $out; exit $status" | tee -a "$summary"
exit "$status"
