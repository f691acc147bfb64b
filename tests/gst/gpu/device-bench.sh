#!/usr/bin/env bash
# The GStreamer element benchmarks of docs/benchmarks.md on the GPU machine, in one device call:
# cudaipc-gst-bench live (1080p60, the per-frame budget) and flat out (the CUDA rows), under
# GStreamer 1.22 (Debian's nvcodec bundle) and 1.28 (with GStreamer's own cudaipc, shm and unixfd
# elements beside ours), each without and with an MPS daemon of this script's own; the core alone
# at the live rate (the floor under the live rows); the time-slicing probe
# (cudaipc-bench-timeslice); and, asked for with BENCH_WHAT's "streams", cudaipc-gst-streams
# (16 producers at 1080p30 and 64 at 320x240 into one consumer, STREAMS_SECONDS each, default
# 10); and, asked for with BENCH_WHAT's "xgpu", the cross-GPU rows (cudaipc-gst-verify bench:
# live 60 fps frames from a producer on GPU 0 into a consumer on GPU 1, beside the same-GPU
# baseline 0 -> 0 in the same run; "not run" with the reason on one GPU). Every step has its own
# time limit.
#   bash tests/gst/gpu/device-bench.sh GSTDIR [COREDIR]
# GSTDIR is what tests/gst/gpu/collect.sh made, COREDIR what tests/gpu/collect.sh made (the floor
# and the probe; skipped without it). Environment: BENCH_WHAT (default "live full floor probe";
# add "streams" for cudaipc-gst-streams, "xgpu" for the cross-GPU rows), BENCH_MPS ("off on"),
# BENCH_VERSIONS ("122 128"), BENCH_FRAMES (300 flat-out frames), LIVE_FRAMES (300; the xgpu rows
# too), BENCH_FORMATS (RGBA,NV12),
# BENCH_TRANSPORTS (flat-out rows; default the CUDA ones). Logs in $OUT (or GSTDIR/logs); the
# last lines printed are every table.
set -u
dir=$(cd "${1:?usage: device-bench.sh GSTDIR [COREDIR]}" && pwd)
core=${2:-}
[ -n "$core" ] && core=$(cd "$core" && pwd)
out=${OUT:-$dir/logs}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../bench/gpu/mps.sh
source "$here/../../bench/gpu/mps.sh"
trap mps_stop EXIT
trap 'exit 130' INT TERM
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/nvidia/lib64"
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
what=${BENCH_WHAT:-live full floor probe}
frames=${BENCH_FRAMES:-300}
live_frames=${LIVE_FRAMES:-300}
formats=${BENCH_FORMATS:-RGBA,NV12}
transports=${BENCH_TRANSPORTS:-cudaipc-cuda-import,cudaipc-cuda-copy,nvcodec,cudaipc-cuda-appsrc-import,cudaipc-cuda-appsrc-copy,cudaipc-cuda-convert,cudaipc-cuda-nvdec,cudaipc-cuda-appsink-import,cudaipc-cuda-appsrc-appsink-import}
summary=$out/bench-summary.txt
: >"$summary"
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; } 2>&1 \
  | tee -a "$summary"
status=0
g128=

# under VERSION NAME LIMIT PROGRAM ARGS...: one run of one of our programs under GStreamer 1.VERSION.
under() {
  local v=$1 name=$2 limit=$3 prog=$4
  shift 4
  local log=$out/$name.txt start=$SECONDS
  (
    if [ "$v" = 122 ]; then
      # shellcheck disable=SC1091
      source "$dir/g122/env.sh"
      bin=$prog
    else
      # shellcheck disable=SC1091
      source "$g128/gst-1.28/env.sh"
      export GST_PLUGIN_PATH_1_0=$dir/g128/plugins GST_REGISTRY_1_0=$g128/registry.bin
      export LD_LIBRARY_PATH=$dir/g128/lib:$LD_LIBRARY_PATH
      bin=$dir/g128/bin/$prog
    fi
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/nvidia/lib64
    timeout -k 5 "$limit" "$bin" "$@"
  ) >"$log" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || status=1
  printf '%-24s rc=%-3s %4ss\n' "$name" "$rc" $((SECONDS - start)) | tee -a "$summary"
}

# gst VERSION NAME LIMIT ARGS...: one cudaipc-gst-bench run under GStreamer 1.VERSION.
gst() {
  local v=$1 name=$2 limit=$3
  shift 3
  under "$v" "$name" "$limit" cudaipc-gst-bench --gpu --formats="$formats" "$@" \
    --json "$out/$name.json"
}

run_all() {  # run_all TAG (mps-off | mps-on)
  local tag=$1 v
  for v in ${BENCH_VERSIONS:-122 128}; do
    [ "$v" = 122 ] && [ ! -d "$dir/g122" ] && continue
    [ "$v" = 128 ] && [ ! -d "$dir/g128" ] && continue
    case " $what " in *" live "*)
      gst "$v" "live-$v-$tag" 200 --live=60 --frames="$live_frames" --warmup=30 --timeout=60 ;;
    esac
    case " $what " in *" full "*)
      local clip=()
      [ -f "$dir/clip-1080p.h264" ] && clip=(--clip="$dir/clip-1080p.h264")
      gst "$v" "full-$v-$tag" 300 --frames="$frames" --warmup=30 --transports="$transports" \
        "${clip[@]}" ;;
    esac
    case " $what " in *" streams "*)
      local secs=${STREAMS_SECONDS:-10}
      under "$v" "streams16-$v-$tag" $((secs + 140)) cudaipc-gst-streams --streams=16 \
        --width=1920 --height=1080 --seconds="$secs" --timeout=120
      under "$v" "streams64-$v-$tag" $((secs + 140)) cudaipc-gst-streams --streams=64 \
        --width=320 --height=240 --seconds="$secs" --timeout=120 ;;
    esac
    case " $what " in *" xgpu "*)
      # 1 s of warm-up: the first frames wait for the consumer to connect.
      under "$v" "xgpu-$v-$tag" 240 cudaipc-gst-verify bench --frames "$live_frames" --warmup 60 \
        --formats "$formats" ;;
    esac
  done
  case " $what " in *" floor "*)
    # The core alone at the live rate: a futex wake and a CUDA frame's publish->acquire with
    # 16.7 ms between frames, the floor under the live rows' wake stage.
    if [ -n "$core" ] && [ -x "$core/cudaipc-bench" ]; then
      local start=$SECONDS
      LD_LIBRARY_PATH=$core:$LD_LIBRARY_PATH timeout -k 5 120 "$core/cudaipc-bench" --gpu-only \
        --gpu-sizes=8294400 --export=vmm --consumers=1 --producer-mode=borrowed --samples=300 \
        --frames=2000 --warmup=20 --gap-us=16667 --floor-samples=300 \
        >"$out/floor-60hz-$tag.txt" 2>&1 || status=1
      printf '%-24s %4ss\n' "floor-60hz-$tag" $((SECONDS - start)) | tee -a "$summary"
    fi ;;
  esac
  case " $what " in *" probe "*)
    if [ -n "$core" ] && [ -x "$core/cudaipc-bench-timeslice" ]; then
      local start=$SECONDS
      LD_LIBRARY_PATH=$core:$LD_LIBRARY_PATH timeout -k 5 150 "$core/cudaipc-bench-timeslice" \
        --frames=3000 --slots=4,8,16 >"$out/timeslice-$tag.txt" 2>&1 || status=1
      printf '%-24s %4ss\n' "timeslice-$tag" $((SECONDS - start)) | tee -a "$summary"
    fi ;;
  esac
}

if [ -d "$dir/g128" ]; then
  g128=$(mktemp -d)
  tar -xf "$dir/g128/gst-1.28-prefix.tar.gz" -C "$g128"
fi
for mode in ${BENCH_MPS:-off on}; do
  if [ "$mode" = on ]; then
    if ! mps_start "$out/mps-control.log"; then
      echo "MPS runs skipped: $(tail -n 1 "$out/mps-control.log")" | tee -a "$summary"
      status=1
      continue
    fi
    echo "MPS daemon started" | tee -a "$summary"
  fi
  run_all "mps-$mode"
  if [ "$mode" = on ]; then
    mps_servers | tee -a "$summary"
    mps_stop
  fi
done
[ -n "$g128" ] && rm -rf "$g128"
for f in "$out"/live-*.txt "$out"/full-*.txt "$out"/floor-*.txt "$out"/timeslice-*.txt \
  "$out"/streams*.txt "$out"/xgpu-*.txt; do
  [ -f "$f" ] || continue
  echo "== $(basename "$f" .txt)"
  grep -E '^\||FAIL|rror|^Consumer CPU|not run' "$f" | grep -v -- '---|' | cut -c1-330
done
exit "$status"
