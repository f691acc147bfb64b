// Four consumers at once, one slow: every-frame consumers hold the producer back (it blocks, it
// never drops), latest consumers skip ahead but never see a torn or stale frame.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "channel_helpers.hpp"
#include "peer_process.hpp"
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
