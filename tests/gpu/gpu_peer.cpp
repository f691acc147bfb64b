// The other process of the GPU tests: a CUDA producer or consumer that writes or checks the test
// pattern on the GPU. It prints "READY" once connected (consumer) or once its format is set
// (producer), and "RESULT key=value..." when it ends normally.
//   cudaipc-gpu-peer consume --path P [--frames N] [--mode every|latest] [--slow-read-ns NS]
//                    [--slow-count K] [--cpu-wait] [--unordered] [--no-reconnect]
//                    [--timeout-ms MS] [--device D] [--each-frame-checked]
//     (--each-frame-checked: waits for each frame's check before releasing it, and counts a
//      frame the producer died before writing (Frame::written() false) as unwritten, not bad)
//   cudaipc-gpu-peer produce --path P --size BYTES [--frames N|--forever] [--slots S]
//                    [--export auto|vmm|legacy] [--slow-fill-ns NS] [--consumers K]
//                    [--interval-us US]
// Exit status: 0 done, 1 error (message on stderr), 2 usage, 3 timed out waiting.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include "channel_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "test_kernels.hpp"

namespace {

using namespace cudaipc;
using gputest::Kernels;

struct Args {
  std::map<std::string, std::string> values;
  bool has(const std::string& k) const { return values.count(k) != 0; }
  std::string str(const std::string& k, const std::string& def = "") const {
    auto it = values.find(k);
    return it == values.end() ? def : it->second;
  }
  std::uint64_t num(const std::string& k, std::uint64_t def = 0) const {
    auto it = values.find(k);
    return it == values.end() ? def : std::strtoull(it->second.c_str(), nullptr, 10);
  }
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 2; i < argc; ++i) {
    std::string k = argv[i];
    if (k.rfind("--", 0) != 0) throw Error(Errc::invalid_argument, "unexpected argument " + k);
    k = k.substr(2);
    const bool flag = i + 1 >= argc || std::string(argv[i + 1]).rfind("--", 0) == 0;
    a.values[k] = flag ? "1" : argv[++i];
  }
  return a;
}

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

int consume(const Args& a) {
  const int device = static_cast<int>(a.num("device"));
  Kernels kernels(device);
  ConsumerOptions opts;
  if (a.has("device")) opts.cuda.device = device;
  opts.path = a.str("path");
  opts.mode = a.str("mode", "every") == "latest" ? ConsumeMode::latest : ConsumeMode::every_frame;
  opts.reconnect = !a.has("no-reconnect");
  opts.cuda.cpu_wait = a.has("cpu-wait");
  const std::uint64_t limit = a.num("frames");
  const std::uint64_t slow_ns = a.num("slow-read-ns");
  const std::uint64_t slow_count = a.num("slow-count", ~std::uint64_t{0});  // frames read slowly
  const auto timeout = std::chrono::milliseconds(a.num("timeout-ms", 20000));
  Consumer consumer(opts);
  say("READY");
  std::uint64_t frames = 0, formats = 0, disconnects = 0;
  std::uint64_t unwritten = 0, excluded_bad = 0, checked_bad = 0;
  CUstream last = kernels.own_stream();
  for (;;) {
    Event ev = consumer.next(timeout);
    if (ev.type == EventType::frame) {
      const auto stream = static_cast<CUstream>(consumer.cuda_stream());
      const auto data = reinterpret_cast<CUdeviceptr>(ev.frame.data());
      const std::uint64_t key = ev.frame.desc().pts;
      if (slow_ns && frames < slow_count)
        kernels.slow_read(stream, data, ev.frame.size(), key, slow_ns);
      else if (a.has("unordered"))  // control: a read the channel does not order
        kernels.verify(kernels.own_stream(), data, ev.frame.size(), key);
      else
        kernels.verify(stream, data, ev.frame.size(), key);
      last = stream;
      if (a.has("each-frame-checked")) {
        // This frame's own bad words: the counters after its check (a CPU wait on the stream,
        // which a dead producer's release lets finish) less those before.
        const gputest::Counters now = kernels.counters(stream);
        if (!ev.frame.written()) {
          ++unwritten;
          excluded_bad += now.bad - checked_bad;
        }
        checked_bad = now.bad;
      }
      if (++frames == limit) break;
    } else if (ev.type == EventType::format) {
      ++formats;
    } else if (ev.type == EventType::eos) {
      break;
    } else if (ev.type == EventType::disconnected) {
      say("DISCONNECTED " + ev.message);
      ++disconnects;
      // The connection, and the stream it read on, are gone: its close() drained that stream.
      last = kernels.own_stream();
      if (!opts.reconnect) break;
    } else if (ev.type == EventType::timeout) {
      std::fprintf(stderr, "peer: no event within %lld ms after %llu frames\n",
                   static_cast<long long>(timeout.count()),
                   static_cast<unsigned long long>(frames));
      return 3;
    }
  }
  kernels.counters(kernels.own_stream());
  const gputest::Counters c = kernels.counters(last);
  const ConsumerCounters cc = consumer.counters();
  say("RESULT frames=" + std::to_string(frames) + " bad=" + std::to_string(c.bad - excluded_bad) +
      " unwritten=" + std::to_string(unwritten) + " changed=" + std::to_string(c.changed) +
      " formats=" + std::to_string(formats) + " skipped=" + std::to_string(cc.skipped) +
      " disconnects=" + std::to_string(disconnects));
  return 0;
}

int produce(const Args& a) {
  Kernels kernels;
  ProducerOptions opts;
  opts.path = a.str("path");
  opts.slots = static_cast<std::uint32_t>(a.num("slots", 4));
  opts.memory = MemoryKind::cuda;
  const std::string mode = a.str("export", "auto");
  opts.cuda.export_mode = mode == "vmm"      ? CudaExportMode::vmm
                          : mode == "legacy" ? CudaExportMode::legacy
                                             : CudaExportMode::automatic;
  opts.block_timeout = std::chrono::seconds(10);
  const std::uint64_t size = a.num("size", 1 << 20);
  Producer producer(opts);
  producer.set_format(testing::pattern_format(size));
  say("READY");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (producer.consumer_count() < a.num("consumers")) {
    if (std::chrono::steady_clock::now() > deadline) return 3;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool forever = a.has("forever");
  const std::uint64_t frames = a.num("frames", 100);
  const auto interval = std::chrono::microseconds(a.num("interval-us"));
  std::uint64_t published = 0, missed = 0;
  for (std::uint64_t key = 1; forever || key <= frames; ++key) {
    if (gputest::publish_pattern(producer, kernels, key, size, a.num("slow-fill-ns")) ==
        PublishStatus::published)
      ++published;
    else
      ++missed;
    if (interval.count()) std::this_thread::sleep_for(interval);
  }
  producer.end_of_stream();
  // Consumers leave after end-of-stream; leaving first would disconnect them before it.
  const auto leave_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (producer.consumer_count() > 0 && std::chrono::steady_clock::now() < leave_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  say("RESULT published=" + std::to_string(published) + " missed=" + std::to_string(missed));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string role = argc > 1 ? argv[1] : "";
  try {
    const Args a = parse(argc, argv);
    if (role == "consume") return consume(a);
    if (role == "produce") return produce(a);
    std::fprintf(stderr, "usage: %s consume|produce --path P ...\n", argv[0]);
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "peer %s: %s (%s)\n", role.c_str(), e.what(), errc_name(e.code()));
    say(std::string("ERROR ") + e.what());  // on stdout too: the tests read only that
    return 1;
  }
}
