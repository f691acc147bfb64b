#!/usr/bin/env bash
# Runs the GPU suites from a directory of built binaries (made by tests/gpu/collect.sh) and writes
# their logs to $OUT (or DIR/logs):
#   bash tests/gpu/run-on-device.sh DIR [all|tests|sanitize]
# On a machine with two GPUs the multi-GPU tests run too (they skip, saying so, on one).
# 'tests' runs both test binaries; 'sanitize' runs the channel integrity test under
# compute-sanitizer memcheck and racecheck (peer processes included). Each step has its own time
# limit; 'all' can approach 10 minutes, so on a device call with that limit run the two halves as
# separate calls. Ends with one line "N passed, N failed".
set -u
dir=$(cd "${1:?usage: run-on-device.sh DIR [all|tests|sanitize]}" && pwd)
what=${2:-all}
out=${OUT:-$dir/logs}
mkdir -p "$out"
export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Channel sockets go under $XDG_RUNTIME_DIR/cudaipc; give them a private one.
export XDG_RUNTIME_DIR=$(mktemp -d /tmp/cudaipc-gpu-XXXXXX)
summary=$out/summary.txt
: >"$summary"
{ nvidia-smi -L 2>&1; nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1; } \
  | tee -a "$summary"

passed=0
failed=0
# run NAME LIMIT_S COMMAND...: one gtest binary (possibly under a wrapper), its log in $out/NAME.log
run() {
  local name=$1 limit=$2
  shift 2
  local log=$out/$name.log
  local start=$SECONDS
  timeout -k 10 "$limit" "$@" >"$log" 2>&1
  local rc=$?
  local p f
  p=$(grep -Eo '^\[  PASSED  \] [0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -n 1)
  f=$(grep -Eo '^\[  FAILED  \] [0-9]+ tests?,' "$log" | grep -Eo '[0-9]+' | tail -n 1)
  p=${p:-0}
  f=${f:-0}
  # A crash, a timeout or a sanitizer report with no failed test still counts as one failure.
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ "$f" -eq 0 ]; then f=1; fi
  # A script (not a gtest binary) that exits 0 is one passed test.
  if [ "$rc" -eq 0 ] && [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then p=1; fi
  passed=$((passed + p))
  failed=$((failed + f))
  printf '%-14s rc=%-3s %4ss  passed %s, failed %s\n' "$name" "$rc" $((SECONDS - start)) "$p" "$f" \
    | tee -a "$summary"
  grep -E '^\[  FAILED  \] [^0-9]|^\[  SKIPPED \] [0-9]+ tests?,|^FATAL|ERROR SUMMARY' "$log" \
    | sort -u | head -n 40 | tee -a "$summary"
  grep -m 1 'GPU test skipped' "$log" | tee -a "$summary"
}

if [ "$what" = all ] || [ "$what" = tests ]; then
  run gpu-backend 180 "$dir/cudaipc-gpu-backend-test"
  # The tests that kill or stop a peer run on their own, bounded: a regression there (a stream
  # waiting for ever on a dead peer) fails visibly without eating the other tests' time.
  peers='*Killed*:*Stopped*:*Evicted*'
  run gpu-channel 360 "$dir/cudaipc-gpu-channel-test" --gtest_filter="-$peers"
  run gpu-peer-death 180 "$dir/cudaipc-gpu-channel-test" --gtest_filter="$peers"
  # The semaphore words' fallback, the connection page registered in both processes (a driver
  # before 12.2 makes no page of their own), across processes: every byte, slow writers and
  # readers, killed peers.
  run gpu-registered 240 env CUDAIPC_SEMAPHORE_PAGE=registered "$dir/cudaipc-gpu-channel-test" \
    --gtest_filter='*IntegrityEveryByteOfEveryFrame*:*SlowWriteEarly*:*SlowRead*:*KilledConsumerStallsNothing*:*KilledProducerWithWritesQueued*'
  if [ -x "$dir/cudaipc" ]; then
    run gpu-cli 90 sh "$dir/gpu_cli.sh" "$dir/cudaipc"
  fi
fi

if [ "$what" = all ] || [ "$what" = sanitize ]; then
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  if [ -z "$sanitizer" ]; then
    echo "compute-sanitizer not found: sanitizer runs skipped" | tee -a "$summary"
  else
    # Fewer frames: every kernel runs instrumented.
    export CUDAIPC_GPU_FRAMES=300
    for tool in memcheck racecheck; do
      run "$tool" 280 "$sanitizer" --tool "$tool" --target-processes all --error-exitcode 86 \
        "$dir/cudaipc-gpu-channel-test" --gtest_filter='*IntegrityEveryByteOfEveryFrame*'
    done
    unset CUDAIPC_GPU_FRAMES
  fi
fi

rm -rf "$XDG_RUNTIME_DIR"
echo "$passed passed, $failed failed" | tee -a "$summary"
[ "$failed" -eq 0 ]
