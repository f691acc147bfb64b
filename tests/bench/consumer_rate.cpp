// cudaipc-bench-consumer-rate: the native consumer beside which python/bench/consumer_overhead.py
// puts the Python consumer, in the same run and on the same channel. Joins a running producer as a
// latest consumer, reads N frames (next -> release) and prints one parseable line:
//   consumer-rate frames=N fps=F p50_us=A p99_us=B gpu_waits=W gpu_releases=R
// Per-frame times are this thread's CPU time (waiting for the producer is left out), as in the
// Python bench, so the rows compare. With --ordered each frame's reads are ordered on the CUDA
// legacy default stream and its release after that stream, as any reader of a CUDA frame on a
// stream of its own must (what frame.torch() and frame.cupy() do on torch's or cupy's stream).
// With --stream-handed-out the consumer's own stream is asked for first, so that work of others
// may be queued there and every release asks the driver whether it has run (what each release
// cost before the consumer counted its own work on the stream).
// With --flush-mib=N each frame is preceded by a write of N MiB, which empties the caches as a wait
// on a busy machine does: python/bench/cold_lines.py counts under callgrind the cache lines
// read_one() touches then (its frame's path alone, the write left out).
//   cudaipc-bench-consumer-rate --path=PATH [--frames=2000] [--warmup=10] [--timeout-s=30]
//                               [--ordered] [--stream-handed-out] [--flush-mib=0]
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cudaipc/consumer.hpp"
#include "cudaipc/options.hpp"
#include "rate_util.hpp"

namespace {

using cudaipc::bench::parse_count;
using cudaipc::bench::pct_us;
using cudaipc::bench::thread_cpu_ns;

// CU_STREAM_LEGACY, without cuda.h: the bench links only the core.
void* const kLegacyStream = reinterpret_cast<void*>(std::uintptr_t{1});

// The next frame, skipping format and other events; throws when none comes in time.
cudaipc::Frame next_frame(cudaipc::Consumer& c, std::chrono::nanoseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto ev = c.next(std::chrono::milliseconds(200));
    switch (ev.type) {
      case cudaipc::EventType::frame:
        return std::move(ev.frame);
      case cudaipc::EventType::eos:
        throw std::runtime_error("the producer ended the stream before enough frames came");
      case cudaipc::EventType::interrupted:
        throw std::runtime_error("interrupted");
      default:
        break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("no frame within the timeout");
    }
  }
}

// One frame read: next -> its data touched -> (ordered) -> release. Not inlined: callgrind's
// --toggle-collect names it.
[[gnu::noinline]] void read_one(cudaipc::Consumer& consumer, std::chrono::nanoseconds timeout,
                                bool ordered) {
  cudaipc::Frame f = next_frame(consumer, timeout);
  volatile const void* data = f.data();  // what a reader touches first; not optimised away
  (void)data;
  if (ordered) {
    f.order_reads(kLegacyStream);
    f.order_release_after(kLegacyStream);
  }
  f.release();
}

// Writes `bytes` through a pointer the compiler cannot see through, so the write is not dropped.
[[gnu::noinline]] void flush_caches(std::vector<unsigned char>& buffer, unsigned char value) {
  void* (*volatile write)(void*, int, std::size_t) = std::memset;
  write(buffer.data(), value, buffer.size());
}

int run(int argc, char** argv) {
  std::string path;
  std::uint64_t frames = 2000, warmup = 10, timeout_s = 30, flush_mib = 0;
  bool ordered = false, hand_out = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ordered" || a == "--stream-handed-out") {
      (a == "--ordered" ? ordered : hand_out) = true;
      continue;
    }
    const auto eq = a.find('=');
    const std::string key = a.substr(0, eq);
    if (eq == std::string::npos) throw std::invalid_argument("unknown argument " + a);
    const char* value = argv[i] + eq + 1;
    if (key == "--path") {
      path = value;
    } else if (key == "--frames") {
      frames = parse_count(a, value);
    } else if (key == "--warmup") {
      warmup = parse_count(a, value);
    } else if (key == "--timeout-s") {
      timeout_s = parse_count(a, value);
    } else if (key == "--flush-mib") {
      flush_mib = parse_count(a, value);
    } else {
      throw std::invalid_argument("unknown argument " + a);
    }
  }
  if (path.empty()) throw std::invalid_argument("--path=PATH (the producer's channel) is needed");

  cudaipc::ConsumerOptions opts;
  opts.path = path;
  opts.mode = cudaipc::ConsumeMode::latest;
  cudaipc::Consumer consumer(opts);
  const std::chrono::nanoseconds timeout = std::chrono::seconds(timeout_s);
  for (std::uint64_t i = 0; i < warmup; ++i) {
    next_frame(consumer, timeout).release();
    // Connected now: the stream is this connection's.
    if (hand_out && !consumer.cuda_stream())
      throw std::runtime_error("--stream-handed-out: the channel has no CUDA stream");
  }

  std::vector<std::uint64_t> cpu;
  cpu.reserve(frames);
  std::vector<unsigned char> flush(flush_mib << 20);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < frames; ++i) {
    if (!flush.empty()) flush_caches(flush, static_cast<unsigned char>(i));
    const std::uint64_t s = thread_cpu_ns();
    read_one(consumer, timeout, ordered);
    cpu.push_back(thread_cpu_ns() - s);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Per frame taken: GPU waits (not yet written when taken) and releases the stream wrote, as
  // the Python rows print theirs.
  const cudaipc::ConsumerCounters k = consumer.counters();
  std::printf(
      "consumer-rate frames=%llu fps=%.0f p50_us=%.1f p99_us=%.1f gpu_waits=%.2f "
      "gpu_releases=%.2f\n",
      static_cast<unsigned long long>(frames), frames / secs, pct_us(cpu, 0.5), pct_us(cpu, 0.99),
      double(k.gpu_waits) / double(frames + warmup),
      double(k.gpu_releases) / double(frames + warmup));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return cudaipc::bench::rate_main("cudaipc-bench-consumer-rate", [&] { return run(argc, argv); });
}
