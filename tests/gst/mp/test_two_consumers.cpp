// C: two consumers in their own processes on one producer: gst-launch-1.0 with mode=every-frame
// writes every frame, in order, to a file; a slow latest consumer sees an increasing subsequence.
// Every frame either receives is checked.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "child_process.hpp"
#include "mp_support.hpp"
#include "temp_dir.hpp"

using namespace cudaipc::testing;
using namespace cudaipc::testing::gstmp;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kBytes = 64 * 48;  // the peer's default GRAY8 64x48
constexpr long long kCount = 300;
constexpr auto kWait = 20s;

}  // namespace

TEST(GstMpTwoConsumers, EveryFrameGetsAllLatestGetsIncreasingSubsequence) {
  GSTMP_REQUIRE("filesink");
  TempDir dir;
  const std::string sock = dir.file("ch");
  const std::string out = dir.file("every.bin");

  // 200 frames/s for 1.5 s, starting once both consumers are connected.
  ChildProcess producer(
      "peer producer",
      peer_argv({"produce", "--socket", sock, "--count", std::to_string(kCount), "--fps", "200",
                 "--slots", "8", "--wait-consumers", "2", "--timeout-s", "20"}));
  ASSERT_TRUE(producer.wait_line("listening", kWait)) << producer.describe();
  ChildProcess every(
      "gst-launch every-frame consumer",
      launch_argv(src() + " socket-path=" + sock +
                  " mode=every-frame ! filesink buffer-mode=unbuffered location=" + out));
  // 15 ms per frame against 5 ms between frames: it must skip.
  ChildProcess latest("peer latest consumer",
                      peer_argv({"consume", "--socket", sock, "--mode", "latest", "--delay-ms",
                                 "15", "--timeout-s", "20"}));

  const auto pst = producer.wait_exit(kWait);
  const auto est = every.wait_exit(kWait);
  const auto lst = latest.wait_exit(kWait);
  ASSERT_TRUE(exited_ok(pst)) << producer.describe() << every.describe() << latest.describe();
  ASSERT_TRUE(exited_ok(est)) << every.describe();
  ASSERT_TRUE(exited_ok(lst)) << latest.describe();

  const Summary ps(producer.wait_line("produced ", 0ms).value_or(""));
  std::printf("producer: %s\n", ps.line().c_str());
  EXPECT_EQ(ps.num("published"), kCount) << ps.line();
  EXPECT_EQ(ps.num("dropped"), 0) << ps.line();

  const FileFrames f = read_frames_file(out, kBytes);
  EXPECT_EQ(f.trailing_bytes, 0u);
  EXPECT_EQ(static_cast<long long>(f.frames), kCount);
  EXPECT_EQ(f.bad, 0u);
  EXPECT_TRUE(f.ids_contiguous_from(1)) << "every-frame sees every seq, in order";

  const Summary ls(latest.wait_line("summary ", 0ms).value_or(""));
  ASSERT_TRUE(ls.valid()) << latest.describe();
  std::printf("latest: %s\n", ls.line().c_str());
  EXPECT_EQ(ls.num("bad"), 0) << ls.line();
  EXPECT_EQ(ls.num("backwards"), 0) << "latest never goes back: " << ls.line();
  EXPECT_GT(ls.num("gaps"), 0) << "a slow latest consumer skips: " << ls.line();
  EXPECT_GE(ls.num("frames"), 10) << ls.line();
  EXPECT_LT(ls.num("frames"), kCount) << ls.line();
  EXPECT_EQ(ls.num("first_id"), ls.num("first_seq")) << "nothing dropped: id = seq: " << ls.line();
  EXPECT_EQ(ls.num("last_id"), ls.num("last_seq")) << ls.line();
  EXPECT_LE(ls.num("last_seq"), kCount) << ls.line();
  EXPECT_TRUE(ls.flag("eos")) << ls.line();
}
