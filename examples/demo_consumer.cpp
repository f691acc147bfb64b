// Receives and verifies every frame, then prints frames/s, publish->acquire latency and the number
// of verified frames: the consuming half of the two-process demo.
//   cudaipc-demo-consumer PATH
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "pattern.hpp"

namespace {
std::uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PATH\n", argv[0]);
    return 2;
  }
  try {
    cudaipc::ConsumerOptions opts;
    opts.path = argv[1];
    cudaipc::Consumer consumer(opts);
    std::vector<std::uint64_t> latency;
    latency.reserve(1 << 20);
    std::uint64_t verified = 0, bad = 0, first_ns = 0, last_ns = 0;
    for (;;) {
      cudaipc::Event ev = consumer.next(std::chrono::seconds(10));
      if (ev.type == cudaipc::EventType::frame) {
        const std::uint64_t t = now_ns();
        latency.push_back(t - ev.frame.desc().publish_time_ns);
        if (!first_ns) first_ns = t;
        last_ns = t;
        if (cudaipc::testing::check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()) ==
            ev.frame.size())
          ++verified;
        else
          ++bad;
      } else if (ev.type == cudaipc::EventType::format) {
        std::printf("consumer: format %s (generation %llu)\n", ev.format.caps.c_str(),
                    static_cast<unsigned long long>(ev.generation));
      } else if (ev.type == cudaipc::EventType::eos) {
        break;
      } else {
        std::fprintf(stderr, "consumer: no frame (%s)\n",
                     ev.type == cudaipc::EventType::timeout ? "timeout" : ev.message.c_str());
        return 1;
      }
    }
    std::sort(latency.begin(), latency.end());
    auto pct = [&](double q) {
      return latency.empty() ? 0.0
                             : latency[static_cast<std::size_t>(q * (latency.size() - 1))] / 1e3;
    };
    double secs = (last_ns - first_ns) / 1e9;
    std::printf(
        "consumer: %llu frames verified, %llu bad, %.0f frames/s, "
        "publish->acquire p50 %.1f us, p99 %.1f us\n",
        static_cast<unsigned long long>(verified), static_cast<unsigned long long>(bad),
        secs > 0 ? (latency.size() - 1) / secs : 0.0, pct(0.5), pct(0.99));
    return bad == 0 && verified > 0 ? 0 : 1;
  } catch (const cudaipc::Error& e) {
    std::fprintf(stderr, "consumer: %s (%s)\n", e.what(), cudaipc::errc_name(e.code()));
    return 1;
  }
}
