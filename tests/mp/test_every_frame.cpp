// One producer here, one every-frame consumer in a peer process: every frame arrives, in order,
// with its payload intact, then end-of-stream.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include "channel_helpers.hpp"
#include "peer_process.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

TEST(EveryFrame, TenThousandFramesArriveInOrderVerified) {
  constexpr std::uint64_t kFrames = 10000, kBytes = 4096;
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.block_timeout = 10s;
  Producer p(o);
  p.set_format(pattern_format(kBytes));
  PeerProcess c({"consume", "--path", o.path, "--mode", "every"});
  ASSERT_TRUE(c.wait_for("connected", 10s)) << c.transcript();
  ASSERT_TRUE(wait_consumers(p, 1));
  for (std::uint64_t i = 1; i <= kFrames; ++i)
    ASSERT_EQ(publish_next(p), PublishStatus::published) << "frame " << i;
  p.end_of_stream();
  auto done = c.wait_for("done", 120s);
  ASSERT_TRUE(done) << c.transcript();
  EXPECT_EQ(field(*done, "frames"), static_cast<long long>(kFrames)) << *done;
  EXPECT_EQ(field(*done, "first"), 1) << *done;
  EXPECT_EQ(field(*done, "last"), static_cast<long long>(kFrames)) << *done;
  EXPECT_EQ(field(*done, "bad"), 0) << *done;
  EXPECT_EQ(field(*done, "order"), 0) << *done;
  EXPECT_EQ(field(*done, "eos"), 1) << *done;
  auto st = c.wait_exit(10s);
  ASSERT_TRUE(st);
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
  EXPECT_EQ(p.stats().dropped, 0u);
}
