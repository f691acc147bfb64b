#!/usr/bin/env bash
# Frames that leave the host (docs/deployment.md): a cudaipc channel is carried to another host
# by GStreamer's own network elements, and published there on a cudaipc channel again; cudaipc
# has no network transport of its own. Both hosts are played on this machine over loopback, each
# of the four processes on its own; every command is printed before it runs.
#
#   examples/bridge.sh host|cuda|tensors|encoded [BUILD_DIR] [FRAMES]
#
#   near host  PRODUCER ! cudaipcringsink socket-path=NEAR
#              cudaipcringsrc socket-path=NEAR ! SEND ! tcpclientsink host=FAR_HOST port=PORT
#   far host   tcpserversrc port=PORT ! RECEIVE ! cudaipcringsink socket-path=FAR
#              cudaipcringsrc socket-path=FAR ! CONSUMER
#
#   (cudaipcringsink and cudaipcringsrc are cudaipcsink and cudaipcsrc under names that nvcodec,
#   whose cudaupload, cudadownload and NVENC/NVDEC elements the cuda and encoded modes use, does
#   not also have: docs/coexistence.md.)
#
#   host     raw video in host memory; SEND = gdppay, RECEIVE = gdpdepay (GStreamer's data
#            protocol: buffers, caps and events over a byte stream). Every frame the far consumer
#            gets is compared with the producer's.
#   cuda     the same with GPU memory on both hosts: cudadownload before gdppay, cudaupload after
#            gdpdepay. Every frame compared.
#   tensors  other/tensors from cudaipc-appsrc-tensor-producer, read on the far host by
#            cudaipc-appsink-tensor-reader, which prints the GstCudaIpcTensorMeta that the far
#            cudaipcsrc rebuilt from the caps. Every tensor's checksum compared.
#   encoded  H.264 instead of raw frames: nvh264enc where the GPU has NVENC (else openh264enc or
#            x264enc), RTP packets framed on the TCP stream (rtpstreampay), decoded on the far host
#            (nvh264dec, else a software decoder). Lossy: frames are counted, not compared.
#
# FAR_HOST (default 127.0.0.1) and PORT (default: a free one) are read from the environment.
# BUILD_DIR defaults to ./build. Exit status: 0 passed, 1 failed, 77 skipped because something is
# missing (printed).
set -euo pipefail

mode=${1:-}
build=${2:-build}
frames=${3:-60}
case "$mode" in
  host | cuda | tensors | encoded) ;;
  *)
    # The comment block at the top, up to its first line that is not a comment.
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2
    exit 2
    ;;
esac
# shellcheck source=examples/gst-helpers.sh
source "$(dirname "$0")/gst-helpers.sh"

{ have gdppay && have gdpdepay; } || skip "gdppay/gdpdepay (gst-plugins-bad, gdp) are needed"
{ have tcpclientsink && have tcpserversrc; } || skip "tcpclientsink/tcpserversrc (gst-plugins-base, tcp) are needed"
have checksumsink || skip "checksumsink (gst-plugins-bad debugutils) is needed to check frames"
far_host=${FAR_HOST:-127.0.0.1}
# Is something listening on TCP port $1 here?
listening() {
  local hex
  hex=$(printf '%04X' "$1")
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
    awk -v p=":$hex" '$2 ~ p"$" && $4 == "0A" { f = 1 } END { exit !f }'
}
if [ -z "${PORT:-}" ]; then
  for _ in $(seq 20); do
    port=$((20000 + RANDOM % 40000))
    listening "$port" || break
  done
else
  port=$PORT
fi
near=$dir/near.sock
far=$dir/far.sock

# The far host first, so that nothing is published before the path to it exists: its consumer
# (waiting for its producer), then the receiver (listening); then the near host's sender, which
# connects, and last the producer. The sender's tcpclientsink writes each buffer before it takes
# the next, so everything sent before the end of stream reaches the far host.
#   FAR_CONSUMER_CMD is a command line run with its output in $dir/got; the pipelines are
#   gst-launch-1.0 descriptions; NEAR_PRODUCER_CMD runs in the foreground.
bridge() {  # "FAR_CONSUMER_CMD" "RECEIVE" "SEND" "NEAR_PRODUCER_CMD"
  local consumer=$1 receive=$2 send=$3 producer=$4
  say "$consumer"
  # shellcheck disable=SC2086
  timeout "$limit" $consumer >"$dir/got" &
  local far_consumer=$!
  pids+=("$far_consumer")
  # shellcheck disable=SC2086
  start "$dir/receiver" tcpserversrc host="$far_host" port="$port" ! $receive \
    socket-path="$far" wait-for-consumer=true sync=false
  local receiver=$last
  for _ in $(seq 200); do listening "$port" && break; sleep 0.05; done
  listening "$port" || fail "the receiver does not listen on port $port"
  # shellcheck disable=SC2086
  start "$dir/sender" $src socket-path="$near" mode=every-frame is-live=false $send_props \
    connect-timeout=30000000000 ! $send ! tcpclientsink host="$far_host" port="$port" sync=false
  local sender=$last
  say "$producer"
  # shellcheck disable=SC2086
  timeout "$limit" $producer >"$dir/produced" || fail "the producer failed"
  wait "$sender" || fail "the sender failed"
  wait "$receiver" || fail "the receiver failed"
  wait "$far_consumer" || fail "the far consumer failed"
}

# The sender copies each frame out of its slot (io-mode=copy), so the slot goes back to the
# producer at once: network sinks and encoders keep buffers a while (tcpserversink queues them for
# each client, x264enc looks ahead dozens of frames), and a buffer that wraps a slot keeps that
# slot from the producer, which then stalls. A cudadownload right after the source copies anyway.
send_props="io-mode=copy"
far_src="$src socket-path=$far mode=every-frame is-live=false connect-timeout=30000000000"
# Frames that were in GPU memory may come out of cudadownload with the GPU pool's row pitch:
# compared after a conversion to packed I420 rows, as examples/pipelines.sh does.
packed="videoconvert ! video/x-raw,format=I420 ! checksumsink sync=false"

# Raw video: NAME "SOURCE_CHAIN" "UPLOAD" "NEAR_PROPS" "SEND" "RECEIVE" "DOWNLOAD" "CHECK". The
# far consumer's checksums must equal those of SOURCE_CHAIN ! CHECK run in one process.
raw() {
  local name=$1 chain=$2 upload=$3 props=$4 send=$5 receive=$6 download=$7 check=$8
  # shellcheck disable=SC2086
  gst-launch-1.0 -q $chain ! $check >"$dir/want" || fail "the reference pipeline failed"
  bridge "gst-launch-1.0 -q $far_src ! $download $check" "$receive" "$send" \
    "gst-launch-1.0 -q $chain ! $upload $sink $props socket-path=$near wait-for-consumer=true sync=false"
  same_frames "$dir/want" "$dir/got" "$name: the far consumer's frames differ from the producer's"
  echo "$name: $(wc -l <"$dir/got") of $(wc -l <"$dir/want") frames crossed the bridge, identical" \
    "to the producer's"
}

video="videotestsrc pattern=ball num-buffers=$frames"
case "$mode" in
  host)
    raw host "$video ! video/x-raw,format=RGBA,width=320,height=240,framerate=30/1" "" \
      "ipc-mode=host" "gdppay" "gdpdepay ! $sink ipc-mode=host" "" "checksumsink sync=false"
    ;;

  cuda)
    if ! have cudaupload || ! have cudadownload; then
      skip "cudaupload/cudadownload (nvcodec) are not registered: no NVIDIA GPU or driver here"
    fi
    send_props=""
    raw cuda "$video ! video/x-raw,format=NV12,width=640,height=480,framerate=30/1" \
      "cudaupload !" "" "cudadownload ! gdppay" "gdpdepay ! cudaupload ! $sink" "cudadownload !" \
      "$packed"
    ;;

  tensors)
    producer_bin="$build/examples/cudaipc-appsrc-tensor-producer"
    reader_bin="$build/examples/cudaipc-appsink-tensor-reader"
    if [ ! -x "$producer_bin" ] || [ ! -x "$reader_bin" ]; then
      skip "the example programs were not built (gstreamer-app-1.0 missing, or -Dexamples=false)"
    fi
    # With a GPU the tensors live in GPU memory on both hosts, else in host memory. cudaupload and
    # cudadownload take video only: the sender's cudaipcsrc downloads tensors itself when asked
    # for system memory (the caps filter), and the receiver's cudaipcsink uploads them.
    if have cudaupload && nvidia-smi -L >/dev/null 2>&1; then
      ipc=auto send="other/tensors ! gdppay" receive="gdpdepay ! $sink" read=--system-memory
      send_props=""
    else
      ipc=host send="gdppay" receive="gdpdepay ! $sink ipc-mode=host" read=""
    fi
    bridge "$reader_bin --connect-timeout 30 $read $far" "$receive" "$send" \
      "$producer_bin --frames $frames --ipc-mode $ipc $near"
    head -2 "$dir/got"
    echo "..."
    tail -1 "$dir/got"
    [ "$(awk '/^frame /{print $4}' "$dir/produced")" = "$(awk '/^seq /{print $NF}' "$dir/got")" ] ||
      fail "the far reader's checksums differ from the producer's"
    grep -q '^seq .* shape \[1,224,224,3\] strides \[602112,2688,12,4\]' "$dir/got" ||
      fail "the far reader saw no tensor meta of shape [1,224,224,3]"
    echo "tensors ($ipc): $frames of $frames tensors crossed the bridge, identical to the" \
      "producer's, with the tensor meta rebuilt on the far host"
    ;;

  encoded)
    { have rtpstreampay && have rtph264pay && have h264parse; } ||
      skip "rtpstreampay, rtph264pay (gst-plugins-good) and h264parse are needed"
    if have nvh264enc && have cudaupload; then
      enc="nvh264enc" upload="cudaupload !" props="" download=""
    else
      enc=""
      for e in x264enc openh264enc; do have "$e" && enc=$e && break; done
      [ -n "$enc" ] || skip "no H.264 encoder (nvh264enc with NVENC, x264enc, openh264enc)"
      # Constrained baseline, so every decoder (openh264dec included) can play it.
      enc="$enc ! video/x-h264,profile=constrained-baseline"
      upload="" props="ipc-mode=host" download="videoconvert !"
    fi
    dec=""
    for d in nvh264dec avdec_h264 openh264dec; do have "$d" && dec=$d && break; done
    [ -n "$dec" ] || skip "no H.264 decoder (nvh264dec, avdec_h264, openh264dec)"
    far_props=""
    [ "$dec" = nvh264dec ] || far_props="ipc-mode=host"
    [ "$dec" = nvh264dec ] && far_download="cudadownload !" || far_download=""
    rtp="application/x-rtp-stream,media=video,clock-rate=90000,encoding-name=H264"
    bridge "gst-launch-1.0 -q $far_src ! $far_download checksumsink sync=false" \
      "$rtp ! rtpstreamdepay ! rtph264depay ! h264parse ! $dec ! $sink $far_props" \
      "$download $enc ! h264parse config-interval=-1 ! rtph264pay config-interval=-1 ! rtpstreampay" \
      "gst-launch-1.0 -q $video ! video/x-raw,format=NV12,width=640,height=480,framerate=30/1 ! $upload $sink $props socket-path=$near wait-for-consumer=true sync=false"
    n=$(wc -l <"$dir/got")
    [ "$n" -eq "$frames" ] || fail "encoded: the far consumer got $n of $frames frames"
    echo "encoded (${enc%% *} -> $dec): $n of $frames frames crossed the bridge as H.264 and" \
      "were decoded on the far host (lossy: counted, not compared)"
    ;;
esac
