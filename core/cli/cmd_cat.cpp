// `cudaipc cat`: what a producer really sends, as files: each frame's tensor as .npy, the format
// as JSON.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <fstream>

#include "args.hpp"
#include "commands.hpp"
#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "download.hpp"
#include "json.hpp"
#include "npy.hpp"

namespace cudaipc::cli {
namespace {

const char* kHelp =
    "usage: cudaipc cat PATH [--frames N] [--out DIR] [--timeout SECONDS]\n"
    "\n"
    "Joins the channel as a `latest` consumer and writes the next N frames (default 1) into DIR\n"
    "(default: the current directory):\n"
    "  frame-SEQ.npy     the frame's tensor in C order (NumPy's .npy; bfloat16 as uint16);\n"
    "                    planes beyond the tensor (NV12's chroma) are described in the JSON,\n"
    "                    not written. Frames of CUDA channels are downloaded first.\n"
    "  frame-SEQ.json    the frame's seq, generation, pts, flags and tensor\n"
    "  format.json       the channel's format (caps, tensor, planes, max frame size), rewritten\n"
    "                    when it changes\n"
    "Each file written is printed, one path a line.\n"
    "\n"
    "  --frames N         frames to write (default 1)\n"
    "  --out DIR          where to write them (created if missing)\n"
    "  --timeout SECONDS  give up when no frame came for this long (default 10)\n"
    "\n"
    "Exit status: 0 with N frames written, 1 otherwise (the reason on stderr).\n";

void tensor_json(Json& j, const char* key, const TensorDesc& t) {
  j.begin_object(key).field("dtype", dtype_name(t.dtype) ? dtype_name(t.dtype) : "invalid");
  j.begin_array("shape");
  for (std::uint32_t i = 0; i < t.rank; ++i) j.value(t.shape[i]);
  j.end_array().begin_array("strides");
  for (std::uint32_t i = 0; i < t.rank; ++i) j.value(t.strides[i]);
  j.end_array().field("byte_offset", t.byte_offset).field("size", t.size);
  j.begin_array("planes");
  for (std::uint32_t p = 0; p < t.num_planes && p < kMaxPlanes; ++p)
    j.begin_object()
        .field("offset", t.planes[p].offset)
        .field("pitch", t.planes[p].pitch)
        .end_object();
  j.end_array().end_object();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text << "\n";
  f.close();
  if (!f) throw Error(Errc::system, "writing '" + path + "' failed");
  std::printf("%s\n", path.c_str());
}

}  // namespace

int run_cat(int argc, char** argv) {
  Args args(argc, argv, 2, {"frames", "out", "timeout"}, {});
  if (args.flag("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (args.positional().size() != 1) throw UsageError("cat takes one channel PATH");
  const std::string path = args.positional()[0];
  const std::uint64_t want = args.count("frames", 1, 1, 1'000'000);
  const double timeout = args.number("timeout", 10, 0.1, 86400);
  const std::string out = args.str("out", ".");
  if (::mkdir(out.c_str(), 0755) != 0 && errno != EEXIST) throw_errno("mkdir '" + out + "'");
  install_stop_signals();
  ConsumerOptions o;
  o.path = path;
  o.mode = ConsumeMode::latest;
  o.reconnect = false;
  Consumer consumer(o);

  std::uint64_t written = 0;
  auto quiet_since = std::chrono::steady_clock::now();
  while (written < want && !g_stop.load()) {
    if (std::chrono::steady_clock::now() - quiet_since > std::chrono::duration<double>(timeout)) {
      std::fprintf(stderr, "cudaipc cat: %s: no frame for %g s (%llu of %llu written)\n",
                   path.c_str(), timeout, static_cast<unsigned long long>(written),
                   static_cast<unsigned long long>(want));
      return 1;
    }
    Event ev = consumer.next(std::chrono::milliseconds(100));
    if (ev.type == EventType::format) {
      Json j;
      j.begin_object()
          .field("generation", ev.generation)
          .field("caps", ev.format.caps)
          .field("max_frame_size", ev.format.max_frame_size)
          .field("memory", consumer.memory_kind() == MemoryKind::host ? "host" : "cuda");
      tensor_json(j, "tensor", ev.format.tensor);
      j.end_object();
      write_text(out + "/format.json", j.text());
    } else if (ev.type == EventType::frame) {
      const FrameDesc& d = ev.frame.desc();
      const std::vector<std::uint8_t> bytes = frame_bytes(consumer, ev.frame);
      const std::vector<std::uint8_t> dense = gather_dense(d.tensor, bytes.data(), bytes.size());
      ev.frame.release();
      const std::string stem = out + "/frame-" + std::to_string(d.seq);
      write_npy(stem + ".npy", d.tensor, dense);
      std::printf("%s.npy\n", stem.c_str());
      Json j;
      j.begin_object().field("seq", d.seq).field("generation", d.generation);
      if (d.pts == kNoTime)
        j.null_field("pts");
      else
        j.field("pts", d.pts);
      j.field("flags", d.flags).field("metas_bytes", d.metas_bytes);
      tensor_json(j, "tensor", d.tensor);
      j.end_object();
      write_text(stem + ".json", j.text());
      ++written;
      quiet_since = std::chrono::steady_clock::now();
    } else if (ev.type == EventType::eos) {
      std::fprintf(stderr, "cudaipc cat: %s: end of stream after %llu frames\n", path.c_str(),
                   static_cast<unsigned long long>(written));
      return 1;
    } else if (ev.type == EventType::disconnected) {
      std::fprintf(stderr, "cudaipc cat: %s: %s\n", path.c_str(),
                   ev.message.empty() ? "the producer went away" : ev.message.c_str());
      return 1;
    }
  }
  return written == want ? 0 : 1;
}

}  // namespace cudaipc::cli
