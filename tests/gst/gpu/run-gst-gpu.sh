#!/usr/bin/env bash
# The GStreamer suite across two processes, every frame compared with a reference made in one
# process (cudaipc-gst-verify):
#   run-gst-gpu.sh --host BUILD_DIR   host memory, on any machine (a CI test proves the script)
#   run-gst-gpu.sh --device DIR       on the GPU machine, from a directory made by collect.sh:
#                                     GStreamer 1.22 (Debian's nvcodec bundle) and 1.28
# Each case has its own time limit; logs go to $OUT (or DIR/logs). Ends with "N passed, N failed,
# N skipped". CUDAIPC_GST_ONLY=xgpu: only the two-GPU cases (xgpu_cases), under both versions.
set -u
mode=${1:?usage: run-gst-gpu.sh --host BUILD_DIR | --device DIR}
root=$(cd "${2:?usage: run-gst-gpu.sh --host BUILD_DIR | --device DIR}" && pwd)
frames=${CUDAIPC_GST_FRAMES:-120}
out=${OUT:-$root/logs}
[ "$mode" = --host ] && out=$(mktemp -d)
mkdir -p "$out"
summary=$out/gst-summary.txt
: >"$summary"
passed=0
failed=0
skipped=0
work=$(mktemp -d /tmp/cudaipc-gst-gpu-XXXXXX)
trap 'rm -rf "$work"; [ "$mode" = --host ] && rm -rf "$out"' EXIT

note() { echo "$*" | tee -a "$summary"; }
skip() { skipped=$((skipped + 1)); note "SKIP $1: $2"; }  # skip NAME WHY

# case NAME PRODUCER_PIPELINE -- VERIFY_ARGS...: the producer runs as gst-launch-1.0 (or, when
# the pipeline starts with "@", as `cudaipc-gst-verify ARGS`), the checker in the foreground.
run_case() {
  local name=$1 producer=$2
  shift 3
  local log=$out/$name.log sock=$work/$name.sock start=$SECONDS
  rm -f "$sock"
  {
    if [ "${producer:0:1}" = @ ]; then
      # shellcheck disable=SC2086
      timeout -k 5 90 "$verify" ${producer:1} --socket "$sock" &
    else
      # shellcheck disable=SC2086
      timeout -k 5 90 gst-launch-1.0 -q $producer socket-path="$sock" wait-for-consumer=true \
        sync=false &
    fi
  } >"$log.producer" 2>&1
  local ppid=$!
  for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
  GST_DEBUG=${GST_DEBUG:-cudaipcsrc:4,cudaipcsink:4} timeout -k 5 120 "$verify" "$@" >"$log" 2>&1
  local rc=$?
  wait "$ppid"
  local prc=$?
  if [ "$rc" -eq 0 ] && [ "$prc" -eq 0 ]; then
    passed=$((passed + 1))
    note "PASS $name ($((SECONDS - start))s) $(grep -m1 '^verify:' "$log") $(grep -m1 '^producer:' "$log.producer")"
  else
    failed=$((failed + 1))
    note "FAIL $name (checker rc=$rc, producer rc=$prc) $(grep -m1 '^verify:' "$log")"
    { grep -ahE 'negotiated|ERROR|WARN' "$log" "$log.producer" | cut -c1-400 | tail -n 8
      tail -n 3 "$log.producer" "$log"; } | sed 's/^/    /' | tee -a "$summary"
  fi
}

ref() {  # the reference for a videotestsrc producer of format $1
  echo "videotestsrc pattern=ball animation-mode=frames num-buffers=$frames ! $(caps "$1") ! appsink name=out"
}
caps() { echo "video/x-raw,format=$1,width=${W:-320},height=${H:-240},framerate=30/1"; }
producer() { echo "videotestsrc pattern=ball animation-mode=frames num-buffers=$frames ! $(caps "$1")"; }

host_cases() {
  for fmt in NV12 RGBA I420 GRAY16_LE; do
    run_case "host-$fmt" "$(producer "$fmt") ! cudaipcringsink ipc-mode=host" -- compare \
      --frames "$frames" --reference "$(ref "$fmt")" \
      --consumer "cudaipcringsrc name=src mode=every-frame socket-path=$work/host-$fmt.sock ! appsink name=out"
  done
  # videotestsrc renders straight into the sink's slots (its slot pool): no frame is copied.
  run_case host-RGBA-in-place "$(produce in-place "$(producer RGBA)") ipc-mode=host" -- compare \
    --frames "$frames" --reference "$(ref RGBA)" \
    --consumer "cudaipcringsrc name=src mode=every-frame socket-path=$work/host-RGBA-in-place.sock ! appsink name=out"
  # A queue before the sink: upstream's thread borrows slots while render() publishes.
  run_case host-NV12-queue "$(producer NV12) ! queue ! cudaipcringsink ipc-mode=host" -- compare \
    --frames "$frames" --reference "$(ref NV12)" \
    --consumer "cudaipcringsrc name=src mode=every-frame socket-path=$work/host-NV12-queue.sock ! appsink name=out"
  run_case host-tensors "@produce-tensors --frames $frames --ipc-mode host --dims 3:64:48 --type float32" \
    -- check-tensors --frames "$frames" --dims 3:64:48 --type float32 \
    --consumer "cudaipcringsrc name=src mode=every-frame socket-path=$work/host-tensors.sock ! appsink name=out"
  # The two-GPU cases' model process and checker (model_case) and the cross-GPU bench's latency
  # stamps, in host memory: proven here, as the device run cannot be before it runs.
  # videotestsrc writes into the slots the filter lends it (in-place): no frame is copied.
  model_case host-filter -1 "$(producer NV12) ! cudaipcfilter name=x ipc-mode=host" \
    "$(ref NV12)" "" in-place
  # Downstream keeps every 8th buffer (its lent slot) for 64 frames, past a ring of 22 slots: each
  # is still its own frame.
  FILTER_HOLD="--hold-every 8 --hold-for 64" model_case host-filter-held -1 \
    "$(producer NV12) ! cudaipcfilter name=x ipc-mode=host downstream-buffers=16" "$(ref NV12)" "" \
    in-place
  kill_case host-filter-kill -1 \
    "$(producer NV12 | sed 's/^videotestsrc /videotestsrc is-live=true /') ! cudaipcfilter name=x ipc-mode=host downstream-buffers=16" \
    "$(ref NV12)" "" in-place
  run_case host-latency "@produce --stamp --pipeline-words $(producer RGBA) ! cudaipcringsink name=sink ipc-mode=host" \
    -- latency --frames "$frames" --warmup 10 \
    --consumer "cudaipcringsrc name=src mode=every-frame socket-path=$work/host-latency.sock ! appsink name=out"
  # The cross-GPU bench (device-bench.sh's xgpu): its two processes and its table, in host memory.
  local start=$SECONDS
  if timeout -k 5 60 "$verify" bench --ipc-mode host --frames 30 --warmup 5 --width 320 \
    --height 240 --formats RGBA >"$out/host-bench.log" 2>&1 &&
    grep -q '^| 0 -> 0 (same GPU) | RGBA | copy | [0-9]' "$out/host-bench.log"; then
    passed=$((passed + 1))
    note "PASS host-bench ($((SECONDS - start))s) $(grep -m1 '^| 0 -> 0' "$out/host-bench.log")"
  else
    failed=$((failed + 1))
    note "FAIL host-bench"
    tail -n 4 "$out/host-bench.log" | cut -c1-300 | sed 's/^/    /' | tee -a "$summary"
  fi
}

# A cudaipcfilter answered by a model process of its own (cudaipc-gst-verify serve) reading on
# device DEV (-1: host memory): every frame must leave the filter with the answer the model made
# from that frame's bytes, and equal the reference frame of its index; with PATH, every frame sent
# took that path into its slot (in-place: upstream wrote into a slot the filter lent; copied).
# FILTER_HOLD: the checker's --hold-every/--hold-for (frames kept downstream, checked again).
model_case() {  # model_case NAME DEV PIPELINE_UP_TO_THE_FILTER REFERENCE [AFTER_THE_FILTER [PATH]]
  local n=$1 dev=$2 up=$3 reference=$4 after=${5:-} path=${6:-}
  local log=$out/$n.log sock=$work/$n.sock start=$SECONDS
  timeout -k 5 90 "$verify" serve --socket "$sock" --model-device "$dev" --frames "$frames" \
    --timeout-s 80 >"$log.model" 2>&1 &
  local mpid=$!
  for _ in $(seq 200); do grep -q '^serving' "$log.model" 2>/dev/null && break; sleep 0.05; done
  # shellcheck disable=SC2086  # FILTER_HOLD is options, split on purpose
  GST_DEBUG=${GST_DEBUG:-cudaipcfilter:4} timeout -k 5 120 "$verify" filter --frames "$frames" \
    --model-device "$dev" --reference "$reference" ${path:+--expect-path "$path"} ${FILTER_HOLD:-} \
    --consumer "$up socket-path=$sock on-missing=wait timeout=10000000000 ${after:+! $after }! appsink name=out" \
    >"$log" 2>&1
  local rc=$?
  wait "$mpid"
  local mrc=$?
  if [ "$rc" -eq 0 ] && [ "$mrc" -eq 0 ]; then
    passed=$((passed + 1))
    note "PASS $n ($((SECONDS - start))s) $(grep -m1 '^verify:' "$log") $(grep -m1 '^model:' "$log.model")"
  else
    failed=$((failed + 1))
    note "FAIL $n (checker rc=$rc, model rc=$mrc) $(grep -m1 '^verify:' "$log")"
    { grep -ahE 'ERROR|WARN' "$log" | cut -c1-400 | tail -n 6
      tail -n 3 "$log.model" "$log"; } | sed 's/^/    /' | tee -a "$summary"
  fi
}

# The model SIGKILLed mid-stream while downstream keeps lent slots (issue #35), then replaced: a
# live source into the filter (DEV, UP and REFERENCE as model_case; the source must be live, so the
# kill lands mid-stream), every 8th buffer kept downstream for 64 frames. Every frame comes out
# equal to its reference, kept ones unchanged when let go; only the frames in flight at the kill
# (up to 8) may lack an answer, never carry another's; the filter holds no slot once the buffers
# are freed, and the checker has as many descriptors once the pipeline is gone as before it played.
kill_case() {  # kill_case NAME DEV PIPELINE_UP_TO_THE_FILTER REFERENCE AFTER_THE_FILTER PATH
  local n=$1 dev=$2 up=$3 reference=$4 after=$5 path=$6
  local log=$out/$n.log sock=$work/$n.sock start=$SECONDS
  # Not under timeout(1): the kill must reach the model itself (it has its own deadline).
  "$verify" serve --socket "$sock" --model-device "$dev" --frames "$frames" --timeout-s 80 \
    >"$log.model1" 2>&1 &
  local m1=$!
  for _ in $(seq 200); do grep -q '^serving' "$log.model1" 2>/dev/null && break; sleep 0.05; done
  GST_DEBUG=${GST_DEBUG:-cudaipcfilter:4} timeout -k 5 120 "$verify" filter --frames "$frames" \
    --model-device "$dev" --reference "$reference" --expect-path "$path" --hold-every 8 \
    --hold-for 64 --allow-unanswered 8 --fds-check \
    --consumer "$up socket-path=$sock on-missing=wait timeout=3000000000 ${after:+! $after }! appsink name=out" \
    >"$log" 2>&1 &
  local cpid=$!
  sleep 1.5  # 45 frames of a 30 fps source
  kill -KILL "$m1"
  wait "$m1" 2>/dev/null
  timeout -k 5 90 "$verify" serve --socket "$sock" --model-device "$dev" --frames 1 --at-least \
    --timeout-s 80 >"$log.model2" 2>&1 &
  local m2=$!
  wait "$cpid"
  local rc=$?
  wait "$m2"
  local mrc=$?
  if [ "$rc" -eq 0 ] && [ "$mrc" -eq 0 ]; then
    passed=$((passed + 1))
    note "PASS $n ($((SECONDS - start))s) $(grep -m1 '^verify:' "$log") $(grep -m1 '^filter: sockets' "$log") $(grep -m1 '^model:' "$log.model2")"
  else
    failed=$((failed + 1))
    note "FAIL $n (checker rc=$rc, second model rc=$mrc) $(grep -m1 '^verify:' "$log")"
    { grep -ahE 'ERROR|WARN' "$log" | cut -c1-400 | tail -n 6
      tail -n 3 "$log.model1" "$log.model2" "$log"; } | sed 's/^/    /' | tee -a "$summary"
  fi
}

# A producer run by the checker (`produce`): PIPELINE ending in a cudaipcringsink named sink, and
# the path every frame must take into its slot (in-place: upstream wrote it there; copied).
# The sink announces its format with its first caps, before its first buffer, so consumers map
# the slots while the pipeline starts.
produce() {  # produce PATH PIPELINE
  echo "@produce --format-first --expect-path $1 --pipeline-words $2 ! cudaipcringsink name=sink"
}

# Metas across processes over a CUDA channel (docs/metas.md): cudaipc-gst-meta-peer publishes
# frames carrying every meta kind this GStreamer has and prints them; a second process prints
# what its cudaipcsrc (io-mode $2) attached; both lists must be equal.
meta_case() {  # meta_case TAG IO_MODE
  local n=$1-metas-$2 peer=$root/$1/bin/cudaipc-gst-meta-peer start=$SECONDS
  if [ ! -x "$peer" ]; then
    skipped=$((skipped + 1))
    note "SKIP $n: no cudaipc-gst-meta-peer in the bundle"
    return
  fi
  timeout -k 5 90 "$peer" consume "$work/$n.sock" 60 io-mode="$2" >"$out/$n.got" 2>"$out/$n.log" &
  local cpid=$!
  timeout -k 5 90 "$peer" produce "$work/$n.sock" 60 ipc-mode=vmm >"$out/$n.want" 2>>"$out/$n.log"
  local prc=$?
  wait "$cpid"
  local crc=$?
  if [ "$prc" -eq 0 ] && [ "$crc" -eq 0 ] && [ -s "$out/$n.want" ] &&
    diff -q "$out/$n.want" "$out/$n.got" >/dev/null; then
    passed=$((passed + 1))
    note "PASS $n ($((SECONDS - start))s) 60 frames, metas equal: $(head -c 160 "$out/$n.got")..."
  else
    failed=$((failed + 1))
    note "FAIL $n (producer rc=$prc, consumer rc=$crc)"
    { diff "$out/$n.want" "$out/$n.got" | head -n 4; tail -n 4 "$out/$n.log"; } | cut -c1-300 \
      | sed 's/^/    /' | tee -a "$summary"
  fi
}

# cudaipcfilter on CUDA frames (docs/elements.md): 1080p NV12 from cudaupload through the filter,
# a C++ model (cudaipc::Server) reading each as a CUDA request and answering with a meta naming
# the frame's timestamp; the run fails unless every frame comes back with its own result.
filter_case() {  # filter_case TAG
  local n=$1-filter bench=$root/$1/bin/cudaipc-gst-filter-bench start=$SECONDS
  [ -x "$bench" ] || bench=$(command -v cudaipc-gst-filter-bench || true)
  if [ -z "$bench" ]; then
    skipped=$((skipped + 1))
    note "SKIP $n: no cudaipc-gst-filter-bench in the bundle"
    return
  fi
  if timeout -k 5 120 "$bench" --cuda --frames=600 --dir="$work" >"$out/$n.log" 2>&1; then
    passed=$((passed + 1))
    note "PASS $n ($((SECONDS - start))s) $(grep 'C++ null model' "$out/$n.log" | cut -c1-120)"
  else
    failed=$((failed + 1))
    note "FAIL $n"
    tail -n 4 "$out/$n.log" | cut -c1-300 | sed 's/^/    /' | tee -a "$summary"
  fi
}

# Two GPUs (issue #30: a decoder GPU and an inference GPU). The producer's slots on one device
# and the consumer reading them on the other, through a VMM mapping or a legacy handle opened with
# peer access, every frame checked on the reading GPU (the producer checks where its slots are,
# the checker where the source read); and a model process reading on device 1
# answering a cudaipcfilter whose pipeline is on device 0. Every CUDA element names its device
# (cuda-device-id): an element with one takes only a neighbour's context of that device, so
# nothing in a pipeline lands on the other GPU. On fewer than 2 GPUs, or without peer access
# between them (the core refuses such a channel), each case is skipped by name with the reason.
xgpu_cases() {  # xgpu_cases TAG IOMODES PATH, as gpu_cases
  local tag=$1 iomodes=$2 path=$3 gpus why='' fmt ipc io from to
  gpus=$("$verify" gpus 2>&1 | grep -m1 '^gpus:')
  if [ "$(awk '{ print $2 }' <<<"${gpus:-gpus: 0}")" -lt 2 ]; then
    why="fewer than 2 GPUs (${gpus:-cudaipc-gst-verify gpus said nothing})"
  elif ! grep -q 'peer-0-1: yes peer-1-0: yes' <<<"$gpus"; then
    why="no peer access between GPUs 0 and 1 ($gpus)"
  else
    note "$gpus"
  fi
  for fmt in NV12 RGBA; do
    for ipc in vmm legacy; do
      # 0 -> 1 with every io-mode; back, 1 -> 0, with the first (import where there is one).
      for io in $iomodes "<-${iomodes%% *}"; do
        from=0 to=1
        [ "${io:0:2}" = "<-" ] && { from=1 to=0 io=${io:2}; }
        local n=$tag-xgpu${from}to$to-$fmt-$ipc-$io
        if [ -n "$why" ]; then skip "$n" "$why"; continue; fi
        run_case "$n" "@produce --expect-path $path --expect-device-id $from --pipeline-words $(producer "$fmt") ! cudaupload cuda-device-id=$from ! cudaipcringsink name=sink ipc-mode=$ipc cuda-device-id=$from" \
          -- compare --frames "$frames" --expect-device --expect-device-id "$to" \
          --reference "$(ref "$fmt")" \
          --consumer "cudaipcringsrc name=src cuda-device-id=$to mode=every-frame io-mode=$io socket-path=$work/$n.sock ! cudadownload cuda-device-id=$to ! appsink name=out"
      done
    done
  done
  # The model on its own GPU: 1080p NV12 from cudaupload on device 0 through the filter (its
  # slots on device 0), read by the model on device 1.
  for ipc in vmm legacy; do
    local n=$tag-xgpu-filter-$ipc
    if [ -n "$why" ]; then skip "$n" "$why"; continue; fi
    model_case "$n" 1 \
      "$(W=1920 H=1080 producer NV12) ! cudaupload cuda-device-id=0 ! cudaipcfilter name=x cuda-device-id=0 ipc-mode=$ipc" \
      "$(W=1920 H=1080 ref NV12)" "cudadownload cuda-device-id=0"
  done
}

# GPU cases for the GStreamer in the environment; $1 names it, $2 the io-modes it supports, $3
# the path cudaupload's frames take into slots (1.24+: cudaupload writes into the sink's slots).
gpu_cases() {
  local tag=$1 iomodes=$2 path=$3
  if [ "${CUDAIPC_GST_ONLY:-all}" = xgpu ]; then
    xgpu_cases "$@"
    return
  fi
  for fmt in NV12 RGBA; do
    for ipc in vmm legacy; do
      for io in $iomodes; do
        local n=$tag-$fmt-$ipc-$io
        run_case "$n" "$(produce "$path" "$(producer "$fmt") ! cudaupload") ipc-mode=$ipc" -- compare \
          --frames "$frames" --expect-device --reference "$(ref "$fmt")" \
          --consumer "cudaipcringsrc name=src mode=every-frame io-mode=$io socket-path=$work/$n.sock ! cudadownload ! appsink name=out"
      done
    done
  done
  local io=${iomodes%% *}
  # cudadownload takes video only: the checker maps the CUDA tensors itself (a download).
  run_case "$tag-tensors" "@produce-tensors --frames $frames --ipc-mode auto --dims 3:224:224 --type float32" \
    -- check-tensors --frames "$frames" --dims 3:224:224 --type float32 --expect-device \
    --consumer "cudaipcringsrc name=src mode=every-frame io-mode=$io socket-path=$work/$tag-tensors.sock ! appsink name=out"
  # A consumer without CUDA downstream gets system memory (the source downloads).
  run_case "$tag-download" "$(producer NV12) ! cudaupload ! cudaipcringsink" -- compare \
    --frames "$frames" --reference "$(ref NV12)" \
    --consumer "cudaipcringsrc name=src mode=every-frame socket-path=$work/$tag-download.sock ! appsink name=out"
  # nvcodec's CUDA elements work on our buffers in place (the 1.22 bundle has no NVRTC for it),
  # and convert straight into the sink's slots.
  if [ "$tag" = g128 ] && gst-inspect-1.0 cudaconvert >/dev/null 2>&1; then
    local conv="cudaconvert ! video/x-raw(memory:CUDAMemory),format=I420"
    run_case "$tag-cudaconvert" "$(produce "$path" "$(producer NV12) ! cudaupload")" -- compare \
      --frames "$frames" --expect-device \
      --reference "$(producer NV12) ! cudaupload ! $conv ! cudadownload ! appsink name=out" \
      --consumer "cudaipcringsrc name=src mode=every-frame io-mode=$io socket-path=$work/$tag-cudaconvert.sock ! $conv ! cudadownload ! appsink name=out"
    run_case "$tag-cudaconvert-into-slots" "$(produce "$path" "$(producer NV12) ! cudaupload ! $conv")" -- compare \
      --frames "$frames" --expect-device \
      --reference "$(producer NV12) ! cudaupload ! $conv ! cudadownload ! appsink name=out" \
      --consumer "cudaipcringsrc name=src mode=every-frame io-mode=$io socket-path=$work/$tag-cudaconvert-into-slots.sock ! cudadownload ! appsink name=out"
  fi
  for io in $iomodes; do meta_case "$tag" "$io"; done
  filter_case "$tag"
  # cudaipcfilter lends its slots upstream (issue #35): on 1.24+ cudaupload writes each 1080p frame
  # into the slot the model reads and the filter pushes that buffer on (in-place, no copy of its
  # own); 1.22 cannot wrap the slots as CUDA memory, so there the filter copies (copied).
  model_case "$tag-filter-lend" 0 "$(W=1920 H=1080 producer NV12) ! cudaupload ! cudaipcfilter name=x" \
    "$(W=1920 H=1080 ref NV12)" "cudadownload" "$path"
  # CUDA memory up to the appsink, which keeps every 8th buffer (on 1.24+ the slot itself) for 64
  # frames, past a ring of 22 slots: each must still be its own frame when let go.
  FILTER_HOLD="--hold-every 8 --hold-for 64" model_case "$tag-filter-lend-held" 0 \
    "$(producer NV12) ! cudaupload ! cudaipcfilter name=x downstream-buffers=16" "$(ref NV12)" "" \
    "$path"
  # The model SIGKILLed while the appsink keeps lent CUDA slots, then replaced.
  kill_case "$tag-filter-lend-kill" 0 \
    "$(producer NV12 | sed 's/^videotestsrc /videotestsrc is-live=true /') ! cudaupload ! cudaipcfilter name=x downstream-buffers=16" \
    "$(ref NV12)" "" "$path"
  if [ "$tag" = g128 ] && gst-inspect-1.0 cudaconvert >/dev/null 2>&1; then
    local conv="cudaconvert ! video/x-raw(memory:CUDAMemory),format=I420"
    model_case "$tag-filter-lend-cudaconvert" 0 "$(producer NV12) ! cudaupload ! $conv ! cudaipcfilter name=x" \
      "$(producer NV12) ! cudaupload ! $conv ! cudadownload ! appsink name=out" "cudadownload" "$path"
  fi
  xgpu_cases "$@"
  if [ -f "$root/clip.h264" ] && gst-inspect-1.0 nvh264dec >/dev/null 2>&1 &&
    gst-inspect-1.0 h264parse >/dev/null 2>&1; then
    local dec="filesrc location=$root/clip.h264 ! h264parse ! nvh264dec"
    local nclip
    nclip=$(cat "$root/clip.frames")
    # nvh264dec exports its own output surfaces where it has enough of them: any path.
    run_case "$tag-nvh264dec" "$(produce any "$dec")" -- compare --frames "$nclip" --expect-device \
      --reference "$dec ! cudadownload ! video/x-raw,format=NV12 ! appsink name=out" \
      --consumer "cudaipcringsrc name=src mode=every-frame io-mode=$io socket-path=$work/$tag-nvh264dec.sock ! cudadownload ! video/x-raw,format=NV12 ! appsink name=out"
    # The decoder into the filter's slots, every frame answered (its path printed, any allowed).
    frames=$nclip model_case "$tag-filter-lend-nvh264dec" 0 "$dec ! cudaipcfilter name=x" \
      "$dec ! cudadownload ! video/x-raw,format=NV12 ! appsink name=out" \
      "cudadownload ! video/x-raw,format=NV12"
  else
    skipped=$((skipped + 1))
    note "SKIP $tag-nvh264dec: no clip.h264, nvh264dec or h264parse in this GStreamer"
  fi
}

if [ "$mode" = --host ]; then
  verify=$root/tests/gst/gpu/cudaipc-gst-verify
  host_cases
else
  export XDG_RUNTIME_DIR=$work
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/nvidia/lib64"
  { nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; } 2>&1 | tee -a "$summary"
  if [ -d "$root/g122" ]; then
    (
      # shellcheck disable=SC1091
      source "$root/g122/env.sh"
      verify=$root/g122/bin/cudaipc-gst-verify
      note "== GStreamer $(gst-launch-1.0 --gst-version | head -n1) (Debian nvcodec)"
      gpu_cases g122 "auto" copied
      # io-mode=import cannot work on 1.22: the source must refuse it clearly.
      if [ "${CUDAIPC_GST_ONLY:-all}" = xgpu ]; then
        :
      elif gst-launch-1.0 cudaipcringsrc io-mode=import socket-path="$work/none" ! fakesink 2>&1 \
        | grep -q 'io-mode=import needs GStreamer 1.24'; then
        passed=$((passed + 1)); note "PASS g122-import-refused"
      else
        failed=$((failed + 1)); note "FAIL g122-import-refused"
      fi
      echo "$passed $failed $skipped" >"$work/counts122"
    )
    read -r passed failed skipped <"$work/counts122"
  fi
  if [ -d "$root/g128" ]; then
    g=$work/gst128
    mkdir -p "$g"
    tar -xf "$root/g128/gst-1.28-prefix.tar.gz" -C "$g"
    (
      # shellcheck disable=SC1091
      source "$g/gst-1.28/env.sh"
      export GST_PLUGIN_PATH_1_0=$root/g128/plugins GST_REGISTRY_1_0=$work/registry128.bin
      export LD_LIBRARY_PATH=$root/g128/lib:$LD_LIBRARY_PATH
      verify=$root/g128/bin/cudaipc-gst-verify
      note "== GStreamer $(gst-launch-1.0 --gst-version | head -n1)"
      gpu_cases g128 "import copy" in-place
      echo "$passed $failed $skipped" >"$work/counts128"
    )
    read -r passed failed skipped <"$work/counts128"
  fi
fi
note "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
