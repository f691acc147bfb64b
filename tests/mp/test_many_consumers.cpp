// Four consumers at once, one slow: every-frame consumers hold the producer back (it blocks, it
// never drops), latest consumers skip ahead but never see a torn or stale frame. Sixteen streams
// cost each side two descriptors per stream and no thread (issue #14, target 7).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "channel_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "peer_process.hpp"
#include "proc_stats.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

TEST(ManyConsumers, SlowEveryFrameConsumerBlocksProducerLatestNeverTorn) {
  constexpr std::uint64_t kFrames = 2000, kBytes = 16384;
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 4;
  o.block_timeout = 20s;
  Producer p(o);
  p.set_format(pattern_format(kBytes));
  struct Role {
    const char* mode;
    const char* delay_us;
  };
  // The delays keep each lease open and re-check the payload after it: a slot rewritten under a
  // lease fails the second check.
  const std::vector<Role> roles{
      {"every", "0"}, {"every", "500"}, {"latest", "0"}, {"latest", "300"}};
  std::vector<std::unique_ptr<PeerProcess>> peers;
  for (const auto& r : roles) {
    peers.push_back(std::make_unique<PeerProcess>(std::vector<std::string>{
        "consume", "--path", o.path, "--mode", r.mode, "--delay-us", r.delay_us}));
    ASSERT_TRUE(peers.back()->wait_for("connected", 10s)) << peers.back()->transcript();
  }
  ASSERT_TRUE(wait_consumers(p, roles.size()));
  for (std::uint64_t i = 1; i <= kFrames; ++i)
    ASSERT_EQ(publish_next(p), PublishStatus::published) << "frame " << i;
  p.end_of_stream();
  for (std::size_t k = 0; k < roles.size(); ++k) {
    auto done = peers[k]->wait_for("done", 120s);
    ASSERT_TRUE(done) << roles[k].mode << " " << peers[k]->transcript();
    SCOPED_TRACE(std::string(roles[k].mode) + " delay " + roles[k].delay_us + ": " + *done);
    EXPECT_EQ(field(*done, "bad"), 0);
    EXPECT_EQ(field(*done, "order"), 0);
    EXPECT_EQ(field(*done, "eos"), 1);
    // The newest frame is never skipped: nothing is stale at the end.
    EXPECT_EQ(field(*done, "last"), static_cast<long long>(kFrames));
    if (std::string(roles[k].mode) == "every") {
      EXPECT_EQ(field(*done, "frames"), static_cast<long long>(kFrames));
      EXPECT_EQ(field(*done, "first"), 1);
    } else {
      EXPECT_GE(field(*done, "frames"), 1);
    }
  }
  EXPECT_EQ(p.stats().dropped, 0u);
}

// What a stream costs once connected, on either side of a host channel: the consumer keeps its
// socket and its Consumer's eventfd (the welcome's and the format's memfds are closed once mapped,
// the producer's pidfd is not kept), and no thread; the producer keeps the socket and a pidfd.
// docs/design.md has the table.
TEST(ManyConsumers, SixteenStreamsCostTwoDescriptorsAndNoThreadEachSide) {
  constexpr int kStreams = 16;
  constexpr std::uint64_t kFrames = 3;
  TempDir dir;
  const std::string path = dir.file("ch");
  PeerProcess producer({"produce", "--path", path, "--bytes", "4096", "--frames",
                        std::to_string(kFrames), "--wait-consumers", std::to_string(kStreams),
                        "--wait-ms", "30000", "--then", "hold"});
  ASSERT_TRUE(producer.wait_for("listening", 10s)) << producer.transcript();
  const std::size_t producer_fds = open_fd_count(producer.pid());
  const std::size_t fds = open_fd_count(), threads = thread_count();
  ConsumerOptions co;
  co.path = path;
  co.reconnect = false;
  std::vector<std::unique_ptr<Consumer>> consumers;
  for (int i = 0; i < kStreams; ++i) consumers.push_back(std::make_unique<Consumer>(co));
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE("stream " + std::to_string(i));
    Event ev = consumers[i]->next(10s);
    ASSERT_EQ(ev.type, EventType::format) << ev.message;
    for (std::uint64_t f = 1; f <= kFrames; ++f) {
      ev = consumers[i]->next(10s);
      ASSERT_EQ(ev.type, EventType::frame) << ev.message;
      ASSERT_EQ(ev.frame.seq(), f);
      ASSERT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), f), ev.frame.size());
    }
  }
  ASSERT_TRUE(producer.wait_for("published", 10s)) << producer.transcript();
  EXPECT_EQ(open_fd_count(), fds + 2 * kStreams);
  EXPECT_EQ(thread_count(), threads);
  // Without pidfds (old kernels) the producer keeps only the socket.
  EXPECT_LE(open_fd_count(producer.pid()), producer_fds + 2 * kStreams);
  EXPECT_GE(open_fd_count(producer.pid()), producer_fds + kStreams);
}
