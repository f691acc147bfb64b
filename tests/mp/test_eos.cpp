// End-of-stream comes after the last frame: an every-frame consumer still behind when the
// producer ends the stream gets every frame first; a latest consumer gets the last frame first.
#include <gtest/gtest.h>

#include "channel_helpers.hpp"
#include "peer_process.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

TEST(EndOfStream, ComesAfterTheLastFrame) {
  constexpr std::uint64_t kFrames = 40;
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 8;
  o.block_timeout = 10s;
  Producer p(o);
  p.set_format(pattern_format(2048));
  // The slow one is still reading when end_of_stream() is called.
  PeerProcess every(
      {"consume", "--path", o.path, "--mode", "every", "--verbose", "--delay-us", "2000"});
  PeerProcess latest({"consume", "--path", o.path, "--mode", "latest", "--verbose"});
  ASSERT_TRUE(every.wait_for("connected", 10s)) << every.transcript();
  ASSERT_TRUE(latest.wait_for("connected", 10s)) << latest.transcript();
  ASSERT_TRUE(wait_consumers(p, 2));
  for (std::uint64_t i = 0; i < kFrames; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
  p.end_of_stream();

  for (PeerProcess* c : {&every, &latest}) {
    auto eos = c->wait_for("eos", 30s);
    ASSERT_TRUE(eos) << c->transcript();
    auto t = c->transcript();
    // The line before "eos" is the last frame.
    auto before = t.rfind("\nframe ", t.find("\neos"));
    ASSERT_NE(before, std::string::npos) << t;
    EXPECT_EQ(t.substr(before + 1, t.find('\n', before + 1) - before - 1), "frame 40 2048 1") << t;
    auto done = c->wait_for("done", 10s);
    ASSERT_TRUE(done) << c->transcript();
    EXPECT_EQ(field(*done, "bad"), 0) << *done;
    EXPECT_EQ(field(*done, "order"), 0) << *done;
  }
  auto done = every.transcript();
  EXPECT_EQ(field(done.substr(done.find("done")), "frames"), static_cast<long long>(kFrames));
}
