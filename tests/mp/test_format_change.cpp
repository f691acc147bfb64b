// Format changes mid-stream, growing the slots then shrinking the frames: every consumer sees the
// format before the first frame of it, frames carry the new sizes, and frames of the old format
// held across the change stay readable and intact.
#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "channel_helpers.hpp"
#include "peer_process.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

// Checks a verbose peer transcript: each frame line's size is the last announced format's.
// Returns the format sizes in the order they were announced.
std::vector<long long> check_formats_precede_frames(const std::string& transcript) {
  std::istringstream in(transcript);
  std::vector<long long> formats;
  long long current = -1;
  for (std::string line; std::getline(in, line);) {
    std::istringstream l(line);
    std::string kind;
    long long a = 0, b = 0;
    l >> kind >> a >> b;
    if (kind == "format") {
      formats.push_back(b);
      current = b;
    } else if (kind == "frame") {
      EXPECT_EQ(b, current) << "frame " << a << " arrived with another format's size";
    }
  }
  return formats;
}

}  // namespace

TEST(FormatChange, GrowAndShrinkMidStream) {
  const std::vector<std::uint64_t> sizes{1000, 100000, 500};
  constexpr int kPerFormat = 5;
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  // The every-frame peer holds every frame to the end, so there must be a slot for each.
  o.slots = 16;
  o.block_timeout = 10s;
  Producer p(o);
  p.set_format(pattern_format(sizes[0]));
  PeerProcess every({"consume", "--path", o.path, "--mode", "every", "--verbose", "--hold-all"});
  PeerProcess latest({"consume", "--path", o.path, "--mode", "latest", "--verbose"});
  ASSERT_TRUE(every.wait_for("connected", 10s)) << every.transcript();
  ASSERT_TRUE(latest.wait_for("connected", 10s)) << latest.transcript();
  ASSERT_TRUE(wait_consumers(p, 2));
  for (std::size_t g = 0; g < sizes.size(); ++g) {
    if (g > 0) p.set_format(pattern_format(sizes[g], "test/pattern,gen=" + std::to_string(g + 1)));
    for (int i = 0; i < kPerFormat; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
  }
  p.end_of_stream();

  auto done = every.wait_for("done", 30s);
  ASSERT_TRUE(done) << every.transcript() << "exit status " << every.wait_exit(5s).value_or(-1);
  EXPECT_EQ(field(*done, "frames"), 15) << *done;
  EXPECT_EQ(field(*done, "bad"), 0) << *done;
  EXPECT_EQ(field(*done, "order"), 0) << *done;
  EXPECT_EQ(field(*done, "formats"), 3) << *done;
  // Frames of the first, smaller slot set were held across two format changes.
  EXPECT_EQ(field(*done, "held"), 15) << *done;
  EXPECT_EQ(field(*done, "recheck"), 0) << *done;
  EXPECT_EQ(check_formats_precede_frames(every.transcript()),
            (std::vector<long long>{1000, 100000, 500}))
      << every.transcript();

  auto ldone = latest.wait_for("done", 30s);
  ASSERT_TRUE(ldone) << latest.transcript();
  EXPECT_EQ(field(*ldone, "bad"), 0) << *ldone;
  EXPECT_EQ(field(*ldone, "order"), 0) << *ldone;
  EXPECT_EQ(field(*ldone, "last"), 15) << *ldone;
  auto lformats = check_formats_precede_frames(latest.transcript());
  ASSERT_FALSE(lformats.empty()) << latest.transcript();
  EXPECT_EQ(lformats.back(), 500) << latest.transcript();
}
