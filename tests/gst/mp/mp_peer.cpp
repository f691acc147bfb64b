// cudaipc-gst-mp-peer: a GStreamer process of the multi-process suites whose frames are known.
// It reports on stdout, one fact per line, so the test waits for facts with a deadline:
//   produce --socket P [--format GRAY8] [--width 64] [--height 48] [--count N] [--fps F]
//           [--first-id I] [--policy block|drop] [--block-timeout-ms T] [--slots S]
//           [--wait-for-consumer] [--wait-consumers C] [--verbose] [--timeout-s T]
//     appsrc ! cudaipcsink ipc-mode=host; frame i carries id first-id+i (frame_pattern.hpp).
//     Prints "listening", "pushed ID" (--verbose), then
//     produced {"pushed":N,"published":P,"dropped":D,"max_gap_ms":G}.
//   consume --socket P [--mode every-frame|latest] [--reconnect true|false] [--max-frames N]
//           [--delay-ms D] [--stall-after K] [--reference PIPELINE] [--verbose] [--timeout-s T]
//     cudaipcsrc ! appsink; checks every frame (its id pattern, or with --reference the same
//     frame of a local reference pipeline, by the GstCudaIpcTensorMeta seq). Prints
//     "frame seq=S id=I discont=D ok=O results=N result=R" (--verbose; N filter results, the
//     first one R, filter_model.hpp), "stalled" (--stall-after), then
//     summary {"frames":..,"bad":..,"first_seq":..,"last_seq":..,"gaps":..,"backwards":..,
//              "discont_count":..,"eos":..,"first_id":..,"last_id":..,"id_gaps":..,"segments":"..",
//              "with_results":..,"wrong_results":..}
//   filter --socket P [--count N] [--fps F] [--first-id I] [--timeout-ms T] [--on-missing M]
//          [--max-inflight K] [--live] [--src-max-latency-ms L] [--sync] [--delay-ms D]
//          [--out-socket O] [--query-latency] [--wait-model] [--verbose] [--timeout-s T]
//          [--lend] [--hold-every K] [--hold-for L] [--downstream-buffers D] [--fds-at N]
//     appsrc ! cudaipcfilter ipc-mode=host ! appsink (or ! cudaipcsink socket-path=O
//     wait-for-consumer=true); --live stamps frames with the running time, --sync makes the
//     appsink sync on the clock, --delay-ms holds each frame at the appsink, --wait-model pushes
//     the first frame once the filter's stats say a model serves. --lend: a live videotestsrc
//     writes each frame into the slot the filter lends it (a probe stamps the id) and a fakesink
//     takes the frames, keeping every K-th for L frames (then checking it again); the open
//     descriptors are counted when frame N (20) goes by and at the end. Prints
//     "playing at_ns=T" (CLOCK_MONOTONIC), "out id=I ok=O results=N result=R" per frame
//     (--verbose), "latency answered=A live=L min=NS max=NS|none" (--query-latency, once frames
//     flow), "stats STRUCTURE" (the filter's), then filtered
//     {"frames":..,"bad":..,"order_errors":..,"with_results":..,
//                    "wrong_results":..,"eos":..,"elapsed_ms":..,"lent":..,"held_most":..,
//                    "held_bad":..,"fds_mid":..,"fds_end":..}.
// Exit codes: 0 done, 2 pipeline error (printed as "error: ..."), 3 timeout, 77 plugin missing.
#include <cstdio>
#include <cstring>

#include "mp_peer_args.hpp"

int main(int argc, char** argv) {
  // Lines must reach the test as they happen, not when a buffer fills.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  gst_init(&argc, &argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s produce|consume|filter --socket P ...\n", argv[0]);
    return 1;
  }
  gstmp_peer::Args args(argc, argv, 2);
  if (!std::strcmp(argv[1], "produce")) return gstmp_peer::produce(args);
  if (!std::strcmp(argv[1], "consume")) return gstmp_peer::consume(args);
  if (!std::strcmp(argv[1], "filter")) return gstmp_peer::filter(args);
  std::fprintf(stderr, "unknown role %s\n", argv[1]);
  return 1;
}
