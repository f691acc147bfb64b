#!/usr/bin/env bash
# On the GPU machine, from the repository root, with DIR made by tests/deploy/collect.sh:
#   bash tests/deploy/device.sh DIR
# 1. what the machine allows: kernel, namespaces (unshare), user namespaces;
# 2. CUDA channels between containers (cudaipc-gpu-namespace-test: vmm and legacy);
# 3. examples/bridge.sh under GStreamer 1.28: cuda (raw video in GPU memory at both ends), tensors,
#    host, and encoded (skips where there is no NVENC, as on an H100).
# Each step has its own time limit (all together under 10 minutes, one device call); logs go to
# $OUT (or DIR/logs), the summary to summary.txt.
set -u
dir=$(cd "${1:?usage: device.sh DIR}" && pwd)
out=${OUT:-$dir/logs}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
for d in /usr/local/nvidia/bin /usr/local/cuda/bin; do [ -d "$d" ] && PATH=$PATH:$d; done
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/nvidia/lib64"

note "kernel $(uname -r), uid $(id -u)"
nvidia-smi -L 2>&1 | tee -a "$summary"
if out_ns=$(timeout 10 unshare --pid --fork --mount-proc --mount --net --ipc --uts true 2>&1); then
  note "namespaces: unshare --pid --mount --net --ipc --uts works"
else
  note "namespaces: unshare refused: $out_ns"
fi
if out_ns=$(timeout 10 unshare --user --map-root-user true 2>&1); then
  note "user namespaces: work"
else
  note "user namespaces: refused: $out_ns"
fi

# step NAME LIMIT COMMAND...: its output in $out/NAME.log, its status in the summary
step() {
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  timeout -k 10 "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  note "$name: rc=$rc ($((SECONDS - start))s)"
}

LD_LIBRARY_PATH="$dir/gpu:$LD_LIBRARY_PATH" step gpu-namespaces 280 "$dir/gpu/cudaipc-gpu-namespace-test"
grep -E '^FINDING|^\[  (FAILED|SKIPPED|PASSED) +\] [0-9]+ tests?|^\[  FAILED  \] .*\(|GPU test skipped|kernel refused|container-setup-failed' \
  "$out/gpu-namespaces.log" | sort -u | head -n 40 | tee -a "$summary"

g=$(mktemp -d)
tar -xf "$dir/b128/gst-1.28-prefix.tar.gz" -C "$g"
(
  # shellcheck disable=SC1091
  source "$g/gst-1.28/env.sh"
  # The driver's libcuda, wherever env.sh left the loader path.
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/nvidia/lib64"
  step bridge-cuda 100 examples/bridge.sh cuda "$dir/b128" 300
  step bridge-tensors 80 examples/bridge.sh tensors "$dir/b128" 60
  step bridge-host 60 examples/bridge.sh host "$dir/b128" 300
  step bridge-encoded 40 examples/bridge.sh encoded "$dir/b128" 60
)
rm -rf "$g"
for s in cuda tensors host encoded; do
  note "  bridge $s: $(grep -E 'crossed the bridge|^FAILED|^skipped' "$out/bridge-$s.log" | tail -n 1)"
done
