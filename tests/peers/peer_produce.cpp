// Producer role: patterned frames (the pattern's seq is the frame's seq), used where the test
// needs the producer in another process, e.g. to kill it.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "cudaipc/producer.hpp"
#include "pattern.hpp"
#include "peer_args.hpp"

namespace peer {

int produce(const Args& a) {
  cudaipc::ProducerOptions opts;
  opts.path = a.str("path");
  opts.slots = static_cast<std::uint32_t>(a.num("slots", 4));
  opts.block_timeout = std::chrono::seconds(10);
  const std::uint64_t bytes = a.num("bytes", 4096);
  const std::uint64_t frames = a.num("frames", 10);
  const std::uint64_t want_consumers = a.num("wait-consumers", 0);
  cudaipc::Producer producer(opts);
  std::printf("listening\n");
  cudaipc::Format fmt;
  fmt.caps = "test/pattern";
  fmt.tensor = cudaipc::make_tensor(cudaipc::DType::uint8, {static_cast<std::int64_t>(bytes)});
  producer.set_format(fmt);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (producer.consumer_count() < want_consumers) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::printf("error no consumer came\n");
      return 4;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<std::uint8_t> buf(bytes);
  for (std::uint64_t seq = 1; seq <= frames; ++seq) {
    cudaipc::testing::fill_pattern(buf.data(), bytes, seq);
    if (producer.publish(buf.data(), bytes) != cudaipc::PublishStatus::published) {
      std::printf("error frame %llu not published\n", static_cast<unsigned long long>(seq));
      return 4;
    }
  }
  std::printf("published %llu\n", static_cast<unsigned long long>(frames));
  if (a.str("then", "hold") == "hold") {
    for (;;) ::pause();  // until the test kills us
  }
  producer.end_of_stream();
  // Consumers may still be reading; closing the channel now would cut them off.
  while (std::chrono::steady_clock::now() < deadline + std::chrono::seconds(10)) {
    bool drained = true;
    for (const auto& c : producer.stats().consumers) drained = drained && c.leases == 0;
    if (drained && producer.consumer_count() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return 0;
}

}  // namespace peer
