// Publishes patterned frames on a channel: the producing half of the two-process demo.
//   cudaipc-demo-producer PATH FRAMES BYTES [RATE_HZ]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "pattern.hpp"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s PATH FRAMES BYTES [RATE_HZ]\n", argv[0]);
    return 2;
  }
  try {
    const std::uint64_t frames = std::strtoull(argv[2], nullptr, 10);
    const std::uint64_t bytes = std::strtoull(argv[3], nullptr, 10);
    const double rate = argc > 4 ? std::atof(argv[4]) : 0;
    cudaipc::ProducerOptions opts;
    opts.path = argv[1];
    opts.block_timeout = std::chrono::seconds(5);
    cudaipc::Producer producer(opts);
    cudaipc::Format fmt;
    fmt.caps =
        "other/tensors,format=static,num_tensors=1,types=uint8,dimensions=" + std::to_string(bytes);
    fmt.tensor = cudaipc::make_tensor(cudaipc::DType::uint8, {static_cast<std::int64_t>(bytes)});
    producer.set_format(fmt);
    // Wait for the consumer so the demo's every-frame count is exact.
    for (int i = 0; i < 500 && producer.consumer_count() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto next = std::chrono::steady_clock::now();
    for (std::uint64_t n = 1; n <= frames; ++n) {
      cudaipc::PublishStatus st;
      cudaipc::WriteSlot slot = producer.begin_frame(&st);
      if (!slot) {
        std::fprintf(stderr, "producer: frame %llu not published (no free slot)\n",
                     static_cast<unsigned long long>(n));
        return 1;
      }
      // Sequence numbers start at 1 and count published frames, so n is the frame's seq.
      cudaipc::testing::fill_pattern(slot.data(), bytes, n);
      producer.commit(slot);
      if (rate > 0) {
        next += std::chrono::nanoseconds(static_cast<long long>(1e9 / rate));
        std::this_thread::sleep_until(next);
      }
    }
    producer.end_of_stream();
    // Let consumers drain before the channel closes.
    for (int i = 0; i < 500; ++i) {
      auto s = producer.stats();
      bool done = true;
      for (const auto& c : s.consumers) done = done && c.leases == 0 && c.delivered >= frames;
      if (done) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    auto s = producer.stats();
    std::printf("producer: published %llu, dropped %llu\n",
                static_cast<unsigned long long>(s.published),
                static_cast<unsigned long long>(s.dropped));
  } catch (const cudaipc::Error& e) {
    std::fprintf(stderr, "producer: %s (%s)\n", e.what(), cudaipc::errc_name(e.code()));
    return 1;
  }
  return 0;
}
