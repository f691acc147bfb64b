// Consumers joining mid-stream: an every-frame consumer gets the current format at once and then
// the next frame published; a latest consumer gets the newest frame already there.
#include <gtest/gtest.h>

#include "channel_helpers.hpp"
#include "peer_process.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

TEST(LateJoin, EveryFrameStartsAtNextFrameLatestAtNewest) {
  constexpr std::uint64_t kBytes = 3000;
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  Producer p(o);
  p.set_format(pattern_format(kBytes));
  for (int i = 0; i < 10; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);

  PeerProcess every({"consume", "--path", o.path, "--mode", "every", "--verbose"});
  PeerProcess latest({"consume", "--path", o.path, "--mode", "latest", "--verbose"});
  // Both see the format before any frame, without waiting for one.
  ASSERT_EQ(every.wait_for("format", 10s).value_or("none"), "format 1 3000") << every.transcript();
  ASSERT_EQ(latest.wait_for("format", 10s).value_or("none"), "format 1 3000")
      << latest.transcript();
  ASSERT_EQ(latest.read_line(10s).value_or("none"), "frame 10 3000 1") << latest.transcript();
  ASSERT_TRUE(wait_consumers(p, 2));

  for (int i = 0; i < 10; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
  p.end_of_stream();
  ASSERT_EQ(every.read_line(10s).value_or("none"), "frame 11 3000 1") << every.transcript();
  auto done = every.wait_for("done", 30s);
  ASSERT_TRUE(done) << every.transcript();
  EXPECT_EQ(field(*done, "frames"), 10) << *done;
  EXPECT_EQ(field(*done, "first"), 11) << *done;
  EXPECT_EQ(field(*done, "last"), 20) << *done;
  EXPECT_EQ(field(*done, "bad"), 0) << *done;
  EXPECT_EQ(field(*done, "order"), 0) << *done;

  auto ldone = latest.wait_for("done", 30s);
  ASSERT_TRUE(ldone) << latest.transcript();
  EXPECT_EQ(field(*ldone, "first"), 10) << *ldone;
  EXPECT_EQ(field(*ldone, "last"), 20) << *ldone;
  EXPECT_EQ(field(*ldone, "bad"), 0) << *ldone;
  EXPECT_EQ(field(*ldone, "order"), 0) << *ldone;
}
