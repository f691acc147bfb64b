# shellcheck shell=bash
# An MPS daemon of a device script's own, sourced by tests/bench/gpu/run-mps.sh and
# tests/gst/gpu/device-bench.sh: private pipe and log directories, so no other CUDA program on the
# machine becomes a client by accident, and a daemon someone else runs is never touched.
#   mps_start LOGFILE    starts it; exports CUDA_MPS_PIPE_DIRECTORY/CUDA_MPS_LOG_DIRECTORY
#                        for what runs next; false (and says why in LOGFILE) when it cannot
#   mps_servers          the daemon's server list (a pid once clients have connected)
#   mps_stop             stops it, waits for it to go, unsets the variables; safe to call twice
# Callers trap EXIT to mps_stop.
mps_control=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
mps_pipe=
mps_log=
mps_logfile=/dev/null

mps_ask() {
  echo "\$ echo $1 | nvidia-cuda-mps-control" >>"$mps_logfile"
  echo "$1" | CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$mps_log \
    timeout 15 "$mps_control" >>"$mps_logfile" 2>&1
}

# The daemon and server of this script's own: same uid, and our pipe directory in their
# environment.
mps_pids() {
  local pid
  # Both the control daemon and its server show as "nvidia-cuda-mps" (15 characters).
  for pid in $(pgrep -u "$(id -u)" -x nvidia-cuda-mps 2>/dev/null); do
    # stderr first: a process that left meanwhile fails the input's open, which is said before
    # a 2>/dev/null written after it takes effect.
    tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" \
      | grep -qx "CUDA_MPS_PIPE_DIRECTORY=$mps_pipe" && echo "$pid"
  done
}

mps_start() {
  mps_logfile=${1:-/dev/null}
  if [ ! -x "$mps_control" ]; then
    echo "no nvidia-cuda-mps-control (PATH or /usr/local/nvidia/bin)" >>"$mps_logfile"
    return 1
  fi
  mps_pipe=$(mktemp -d /tmp/cudaipc-mps-pipe-XXXXXX)
  mps_log=$(mktemp -d /tmp/cudaipc-mps-log-XXXXXX)
  echo "starting MPS: $mps_control -d (pipe $mps_pipe, log $mps_log)" >>"$mps_logfile"
  if ! CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$mps_log \
    timeout 15 "$mps_control" -d >>"$mps_logfile" 2>&1; then
    echo "MPS daemon did not start" >>"$mps_logfile"
    rm -rf "$mps_pipe" "$mps_log"
    mps_pipe=
    return 1
  fi
  export CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$mps_log
}

# A server listed means the processes really were MPS clients: a client that cannot reach the
# daemon runs without MPS and says nothing.
mps_servers() {
  [ -n "$mps_pipe" ] || return 0
  mps_ask get_server_list
  grep -A3 'get_server_list' "$mps_logfile" | tail -n 3
}

mps_stop() {
  [ -n "$mps_pipe" ] || return 0
  mps_ask quit
  # quit returns before the daemon and its server have gone: wait, so what runs next really runs
  # without MPS; if they outstay 10 s, end them (they are this script's).
  for _ in $(seq 50); do
    [ -z "$(mps_pids)" ] && break
    sleep 0.2
  done
  local left
  left=$(mps_pids)
  if [ -n "$left" ]; then
    echo "MPS processes still there after quit, terminated: $left" >>"$mps_logfile"
    # shellcheck disable=SC2086  # one pid a word
    kill $left 2>/dev/null
  fi
  cat "$mps_log"/*.log >>"$mps_logfile" 2>/dev/null
  rm -rf "$mps_pipe" "$mps_log"
  mps_pipe=
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
