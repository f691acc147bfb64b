# Sourced by examples/python/detect.sh and bridge.sh, which start three processes each.
#   cleanup DIR   (their EXIT trap) stops what is still running and removes DIR
#   wait_all SCRIPT PID NAME [PID NAME ...]
# waits for every process; the first to fail decides the return status and the others are stopped
# then (a consumer whose producer died would otherwise wait for it forever).
# shellcheck shell=bash

# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local left
  left=$(jobs -p)
  # shellcheck disable=SC2086
  [ -z "$left" ] || kill $left 2>/dev/null || true
  rm -rf "$1"
}

wait_all() {
  local script=$1 status=0 rc ended name
  shift
  local -A role=()
  while [ $# -gt 1 ]; do
    role[$1]=$2
    shift 2
  done
  while [ ${#role[@]} -gt 0 ]; do
    rc=0
    wait -n -p ended "${!role[@]}" || rc=$?
    name=${role[$ended]}
    unset "role[$ended]"
    if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then
      echo "$script: the $name process failed (exit $rc)" >&2
      status=$rc
      kill "${!role[@]}" 2>/dev/null || true
    fi
  done
  return "$status"
}
