// kill -9 of a consumer that holds leases and holds back an every-frame producer: the producer is
// unblocked, the leases come back, its entry is freed, and it leaks no fd or mapping.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <bitset>
#include <future>

#include "channel_helpers.hpp"
#include "peer_process.hpp"
#include "proc_stats.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

TEST(ConsumerCrash, KilledLeaseHolderIsReclaimedAndProducerGoesOn) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 4;
  o.block_timeout = 20s;
  Producer p(o);
  p.set_format(pattern_format(8192));
  const std::size_t fds_before = open_fd_count();
  {
    PeerProcess holder({"consume", "--path", o.path, "--mode", "every", "--hold", "3"});
    ASSERT_TRUE(holder.wait_for("connected", 10s)) << holder.transcript();
    ASSERT_TRUE(wait_consumers(p, 1));
    for (int i = 0; i < 4; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
    ASSERT_TRUE(holder.wait_for("held 3", 10s)) << holder.transcript();
    auto s = p.stats();
    ASSERT_EQ(s.consumers.size(), 1u);
    EXPECT_EQ(s.consumers[0].pid, holder.pid());
    EXPECT_EQ(std::bitset<64>(s.consumers[0].leases).count(), 3u);

    // Three slots leased, the fourth holds a frame the consumer has not read: the next publish
    // blocks until the consumer is gone.
    auto blocked = std::async(std::launch::async, [&] { return publish_next(p); });
    EXPECT_EQ(blocked.wait_for(100ms), std::future_status::timeout);
    const auto killed_at = std::chrono::steady_clock::now();
    holder.kill_hard();
    auto st = holder.wait_exit(10s);
    ASSERT_TRUE(st);
    EXPECT_TRUE(WIFSIGNALED(*st) && WTERMSIG(*st) == SIGKILL);
    ASSERT_EQ(blocked.wait_for(10s), std::future_status::ready);
    EXPECT_EQ(blocked.get(), PublishStatus::published);
    EXPECT_LT(std::chrono::steady_clock::now() - killed_at, 5s)
        << "the producer waited for its block timeout instead of reclaiming the leases";
  }
  ASSERT_TRUE(wait_consumers(p, 0));
  EXPECT_TRUE(p.stats().consumers.empty());

  // Every slot is usable again: a full round of slots publishes without a consumer.
  for (int i = 0; i < 8; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
  EXPECT_EQ(p.stats().dropped, 0u);

  // And the channel still serves a good consumer, with verified frames.
  {
    PeerProcess good({"consume", "--path", o.path, "--mode", "every", "--frames", "6"});
    ASSERT_TRUE(good.wait_for("connected", 10s)) << good.transcript();
    ASSERT_TRUE(wait_consumers(p, 1));
    for (int i = 0; i < 6; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
    auto done = good.wait_for("done", 10s);
    ASSERT_TRUE(done) << good.transcript();
    EXPECT_EQ(field(*done, "frames"), 6) << *done;
    EXPECT_EQ(field(*done, "first"), 14) << *done;
    EXPECT_EQ(field(*done, "bad"), 0) << *done;
    ASSERT_TRUE(good.wait_exit(10s));
  }
  ASSERT_TRUE(wait_consumers(p, 0));
  EXPECT_TRUE(poll_until([&] { return open_fd_count() == fds_before; }, 5s))
      << open_fd_count() << " fds open, " << fds_before << " before the consumers came";
}
