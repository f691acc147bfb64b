// `cudaipc pub`: a producer of a test pattern, for checking a consumer without GStreamer.
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "pub_format.hpp"
#include "pub_pattern.hpp"

namespace cudaipc::cli {
namespace {

const char* kHelp =
    "usage: cudaipc pub PATH --caps CAPS [--tensor DTYPE[D0,...]] [--memory host|cuda]\n"
    "                   [--device N] [--rate R] [--frames N] [--slots N] [--policy block|drop]\n"
    "\n"
    "Creates the channel PATH and publishes a test pattern in it: bytes 0 to 7 of each frame\n"
    "hold the frame's index (its seq, from 1, little-endian), and every later byte, at offset\n"
    "i from the frame's start (i >= 8), is (seq + i) mod 256. `cudaipc cat` and the tests check\n"
    "frames against it.\n"
    "\n"
    "  --caps CAPS        the channel's caps. Raw video (video/x-raw,format=F,width=W,height=H;\n"
    "                     F one of RGBA BGRA RGBx BGRx ARGB ABGR xRGB xBGR RGB BGR GRAY8\n"
    "                     GRAY16_LE NV12 I420) is laid out as GStreamer lays it out, so\n"
    "                     cudaipcsrc can read it; other caps need --tensor\n"
    "  --tensor SPEC      the frame's tensor, dense, e.g. float32[3,224,224]\n"
    "  --memory KIND      host (default) or cuda (slots on GPU --device, default 0; frames are\n"
    "                     copied up from host memory)\n"
    "  --rate R           frames/s (default: the caps' framerate, else 30)\n"
    "  --frames N         stop after N frames and keep the channel open (default: no end)\n"
    "  --slots N          slots in the ring (default 4)\n"
    "  --policy P         when every slot is held: block (default, up to 1 s) or drop\n"
    "\n"
    "Prints one line when the channel is up and one when it ends (SIGINT or SIGTERM).\n";

// Without a usable GPU a CUDA channel cannot be made: say what to use instead, as the elements
// do ("Use ipc-mode=host").
Producer make_producer(const ProducerOptions& o) {
  try {
    return Producer(o);
  } catch (const Error& e) {
    if (e.code() != Errc::no_cuda) throw;
    throw Error(
        Errc::no_cuda,
        std::string(e.what()) + ". Use --memory host (the default) for a channel in host memory");
  }
}

}  // namespace

int run_pub(int argc, char** argv) {
  Args args(argc, argv, 2,
            {"caps", "tensor", "memory", "device", "rate", "frames", "slots", "policy"}, {});
  if (args.flag("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (args.positional().size() != 1) throw UsageError("pub takes one channel PATH");
  if (!args.has("caps")) throw UsageError("pub needs --caps");
  const PubFormat pf = pub_format(args.str("caps"), args.str("tensor"));
  ProducerOptions o;
  o.path = args.positional()[0];
  o.slots = static_cast<std::uint32_t>(args.count("slots", 4, 1, 32));
  const std::string memory = args.str("memory", "host");
  if (memory == "cuda") {
    o.memory = MemoryKind::cuda;
    o.cuda.device = static_cast<int>(args.count("device", 0, 0, 1023));
  } else if (memory != "host") {
    throw UsageError("--memory " + memory + ": host or cuda");
  }
  const std::string policy = args.str("policy", "block");
  if (policy == "drop")
    o.on_full = FullPolicy::drop;
  else if (policy != "block")
    throw UsageError("--policy " + policy + ": block or drop");
  const double rate = args.number("rate", pf.framerate > 0 ? pf.framerate : 30, 0.01, 1e6);
  const std::uint64_t frames = args.count("frames", 0, 0, ~std::uint64_t{0} >> 1);

  install_stop_signals();
  Producer producer = make_producer(o);
  producer.set_format(pf.format);
  const std::uint64_t bytes = pf.format.tensor.byte_offset + pf.format.tensor.size;
  std::vector<std::uint8_t> staging(o.memory == MemoryKind::cuda ? bytes : 0);
  std::printf("publishing %s: %s, tensor %s, %llu bytes a frame, %g frames/s, %s memory\n",
              producer.path().c_str(), pf.format.caps.c_str(), to_string(pf.format.tensor).c_str(),
              static_cast<unsigned long long>(bytes), rate, memory.c_str());
  const auto period = std::chrono::duration<double>(1.0 / rate);
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t attempts = 0;
  while (!g_stop.load() && (frames == 0 || attempts < frames)) {
    const auto due =
        start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(period * attempts);
    if (!sleep_unless_stopped(
            std::chrono::duration<double>(due - std::chrono::steady_clock::now()).count()))
      break;
    ++attempts;
    FrameInfo info;
    info.pts = static_cast<std::uint64_t>((period * (attempts - 1)).count() * 1e9);
    info.duration = static_cast<std::uint64_t>(period.count() * 1e9);
    // The seq a frame gets is the producer's count of published frames plus one: drops take none.
    const std::uint64_t seq = producer.last_seq() + 1;
    if (o.memory == MemoryKind::host) {
      PublishStatus st;
      WriteSlot ws = producer.begin_frame(&st);
      if (!ws) continue;
      fill_frame_pattern(static_cast<std::uint8_t*>(ws.data()), bytes, seq);
      producer.commit(ws, info);
    } else {
      fill_frame_pattern(staging.data(), bytes, seq);
      producer.publish(staging.data(), bytes, info, false);
    }
  }
  const ProducerStats s = producer.stats();
  std::printf("published %llu frames, dropped %llu\n", static_cast<unsigned long long>(s.published),
              static_cast<unsigned long long>(s.dropped));
  // With --frames the channel stays up for whoever reads it, until we are told to stop.
  while (!g_stop.load()) sleep_unless_stopped(3600);
  return 0;
}

}  // namespace cudaipc::cli
