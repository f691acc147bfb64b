#!/usr/bin/env bash
# Runnable gst-launch-1.0 pairs for cudaipcsink and cudaipcsrc, each producer and consumer in a
# process of its own. Every command is printed before it runs, so it can be copied; every run is
# bounded (num-buffers) and checked against the same frames made in one process.
#
#   examples/pipelines.sh host|cuda|decoder|tensors [BUILD_DIR] [FRAMES] [FILE.mp4]
#
#   host     videotestsrc ! cudaipcringsink ipc-mode=host  |  cudaipcringsrc ! checksumsink
#   cuda     videotestsrc ! cudaupload ! cudaipcringsink   |  cudaipcringsrc ! cudadownload ! checksumsink
#   decoder  filesrc ! qtdemux ! h264parse ! nvh264dec ! cudaipcringsink, read by two consumers: one
#            mode=every-frame, one mode=latest that is slow on purpose and skips frames. Without
#            FILE.mp4 a short clip is encoded first (x264enc or openh264enc). Without nvh264dec a
#            software decoder feeds a host-memory channel instead.
#   tensors  the example programs cudaipc-appsrc-tensor-producer | cudaipc-appsink-tensor-reader
#
# cudaipcringsink and cudaipcringsrc are cudaipcsink and cudaipcsrc under names nvcodec (1.24+)
# does not also use (docs/coexistence.md). BUILD_DIR defaults to ./build; the plugin is taken from
# BUILD_DIR/gst. Exit status: 0 passed, 1 failed, 77 skipped because something is missing (printed).
set -euo pipefail

mode=${1:-}
build=${2:-build}
frames=${3:-60}
clip=${4:-}
case "$mode" in
  host | cuda | decoder | tensors) ;;
  *)
    # The comment block at the top, up to its first line that is not a comment.
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2
    exit 2
    ;;
esac
# shellcheck source=examples/gst-helpers.sh
source "$(dirname "$0")/gst-helpers.sh"
have checksumsink || skip "checksumsink (gst-plugins-bad debugutils) is needed to check frames"

# Producer: SOURCE_CHAIN ! [upload !] sink. Consumer: src ! [download !] CHECK, every frame. The
# consumer's checksums must equal those of SOURCE_CHAIN ! CHECK run in one process.
pair() {  # NAME "SOURCE_CHAIN" "UPLOAD" "SINK_PROPS" "DOWNLOAD" "CHECK"
  local name=$1 chain=$2 upload=$3 props=$4 download=$5 check=$6 sock="$dir/$1.sock"
  # shellcheck disable=SC2086
  gst-launch-1.0 -q $chain ! $check >"$dir/$name.want" || fail "the reference pipeline failed"
  # shellcheck disable=SC2086
  start "$dir/$name.prod" $chain ! $upload $sink $props socket-path="$sock" wait-for-consumer=true
  local producer=$last
  wait_socket "$sock"
  # shellcheck disable=SC2086
  say gst-launch-1.0 $src socket-path="$sock" mode=every-frame connect-timeout=10000000000 \
    ! $download $check
  # shellcheck disable=SC2086
  timeout "$limit" gst-launch-1.0 -q $src socket-path="$sock" mode=every-frame \
    connect-timeout=10000000000 ! $download $check >"$dir/$name.got" ||
    fail "the consumer failed"
  wait "$producer" || fail "the producer failed"
  local n
  n=$(wc -l <"$dir/$name.got")
  same_frames "$dir/$name.want" "$dir/$name.got" "$name: the consumer's frames differ from the producer's"
  echo "$name: $n of $n frames received and identical to the producer's"
}

# checksumsink hashes a buffer's bytes, row padding included. Frames that were in CUDA memory
# may come out of cudadownload with the GPU pool's row pitch (GStreamer 1.22 does this; a
# GstVideoMeta describes it), so those are compared after a conversion to packed I420 rows.
packed="videoconvert ! video/x-raw,format=I420 ! checksumsink sync=false"

case "$mode" in
  host)
    pair host "videotestsrc pattern=ball num-buffers=$frames !
      video/x-raw,format=RGBA,width=320,height=240,framerate=30/1" "" "ipc-mode=host" "" \
      "checksumsink sync=false"
    ;;

  cuda)
    if ! have cudaupload || ! have cudadownload; then
      skip "cudaupload/cudadownload (nvcodec) are not registered: no NVIDIA GPU or driver here"
    fi
    pair cuda "videotestsrc pattern=ball num-buffers=$frames !
      video/x-raw,format=NV12,width=640,height=480,framerate=30/1" "cudaupload !" "" \
      "cudadownload !" "$packed"
    ;;

  decoder)
    if ! have qtdemux || ! have h264parse; then skip "qtdemux and h264parse are needed"; fi
    if have nvh264dec; then
      dec=nvh264dec props="" download="cudadownload !" check=$packed
    else
      dec=""
      for d in avdec_h264 openh264dec; do have "$d" && dec=$d && break; done
      [ -n "$dec" ] || skip "no H.264 decoder (nvh264dec, avdec_h264, openh264dec)"
      props="ipc-mode=host" download="" check="checksumsink sync=false"
      echo "note: nvh264dec is not available; $dec feeds a host-memory channel instead"
    fi
    if [ -z "$clip" ]; then
      enc=""
      for e in x264enc openh264enc; do have "$e" && enc=$e && break; done
      [ -n "$enc" ] || skip "no H.264 encoder (x264enc, openh264enc) to make a clip; pass FILE.mp4"
      clip="$dir/clip.mp4"
      # Constrained baseline, so every decoder here (openh264dec included) can play it.
      encode=(videotestsrc pattern=ball num-buffers="$frames"
        ! "video/x-raw,width=640,height=480,framerate=30/1" ! videoconvert ! "$enc"
        ! "video/x-h264,profile=constrained-baseline" ! h264parse ! mp4mux
        ! filesink location="$clip")
      say gst-launch-1.0 "${encode[@]}"
      # Encoders chatter on stderr; show it only when encoding fails.
      gst-launch-1.0 -q "${encode[@]}" 2>"$dir/encode.log" || {
        cat "$dir/encode.log" >&2
        fail "encoding the clip failed"
      }
    fi
    [ -f "$clip" ] || fail "no file $clip"
    decode="filesrc location=$clip ! qtdemux ! h264parse ! $dec"
    # shellcheck disable=SC2086
    gst-launch-1.0 -q $decode ! $download $check >"$dir/want" ||
      fail "decoding $clip in one process failed"
    sock="$dir/decoder.sock"
    # Both consumers start first and wait for the producer, so neither pays its start-up (CUDA
    # initialisation can take seconds) while the clip plays. The producer starts publishing when
    # the first of them connects; the other joins within its 100 ms retry interval.
    # shellcheck disable=SC2086
    start "$dir/every" $src socket-path="$sock" mode=every-frame connect-timeout=30000000000 \
      ! $download $check
    every=$last
    # Sleeping 100 ms per frame at 30 frames/s: this consumer can only keep up by skipping.
    # shellcheck disable=SC2086
    start "$dir/latest" $src socket-path="$sock" mode=latest connect-timeout=30000000000 \
      ! $download identity sleep-time=100000 ! $check
    latest=$last
    # shellcheck disable=SC2086
    start "$dir/prod" $decode ! $sink $props socket-path="$sock" wait-for-consumer=true
    producer=$last
    wait "$every" || fail "the every-frame consumer failed"
    wait "$latest" || fail "the latest consumer failed"
    wait "$producer" || fail "the producer failed"
    n=$(wc -l <"$dir/want")
    # Every frame from the one it joined at to the last, none missing: the decoder's last $m.
    m=$(wc -l <"$dir/every")
    [ "$m" -ge 1 ] || fail "the every-frame consumer received nothing"
    [ "$(hashes "$dir/want" | tail -n "$m")" = "$(hashes "$dir/every")" ] ||
      fail "the every-frame consumer missed frames or got frames the decoder did not make"
    got=$(wc -l <"$dir/latest")
    [ "$got" -ge 1 ] || fail "the latest consumer received nothing"
    # Each frame the latest consumer got must be one of the decoder's, in order.
    awk 'NR==FNR { want[NR] = $1; n = NR; next }
         { while (i < n && want[++i] != $1) {} if (want[i] != $1) exit 1 }' \
      <(hashes "$dir/want") <(hashes "$dir/latest") ||
      fail "the latest consumer got frames the decoder did not make, or out of order"
    echo "decoder ($dec): every-frame consumer $m of $n frames (joined at frame $((n - m + 1))," \
      "none missed after), latest consumer $got of $n, each one of the decoder's frames, in order"
    ;;

  tensors)
    producer_bin="$build/examples/cudaipc-appsrc-tensor-producer"
    reader_bin="$build/examples/cudaipc-appsink-tensor-reader"
    if [ ! -x "$producer_bin" ] || [ ! -x "$reader_bin" ]; then
      skip "the example programs were not built (gstreamer-app-1.0 missing?)"
    fi
    sock="$dir/tensors.sock"
    say "$producer_bin" --frames "$frames" "$sock"
    timeout "$limit" "$producer_bin" --frames "$frames" "$sock" >"$dir/prod" &
    producer=$!
    pids+=("$producer")
    wait_socket "$sock"
    say "$reader_bin" "$sock"
    timeout "$limit" "$reader_bin" "$sock" >"$dir/got" || fail "the reader failed"
    wait "$producer" || fail "the producer failed"
    head -3 "$dir/got"
    echo "..."
    tail -1 "$dir/got"
    [ "$(awk '/^frame /{print $4}' "$dir/prod")" = "$(awk '/^seq /{print $NF}' "$dir/got")" ] ||
      fail "the reader's checksums differ from the producer's"
    echo "tensors: $frames of $frames tensors received and identical to the producer's"
    ;;
esac
