// D: an every-frame consumer stops reading, holding its leases, and stalls a policy=block
// producer; it is then killed with SIGKILL. The producer must go on (not stall past its
// block-timeout) and a second every-frame consumer, gst-launch-1.0, must receive every frame
// published, right.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "child_process.hpp"
#include "mp_support.hpp"
#include "poll_until.hpp"
#include "temp_dir.hpp"

using namespace cudaipc::testing;
using namespace cudaipc::testing::gstmp;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kBytes = 64 * 48;  // the peer's default GRAY8 64x48
constexpr long long kCount = 400;
constexpr long long kBlockTimeoutMs = 2000;
constexpr auto kWait = 20s;

}  // namespace

TEST(GstMpConsumerKill, KilledEveryFrameConsumerDoesNotStallProducerOrOthers) {
  GSTMP_REQUIRE("filesink");
  TempDir dir;
  const std::string sock = dir.file("ch");
  const std::string out = dir.file("survivor.bin");

  ChildProcess producer("peer producer",
                        peer_argv({"produce", "--socket", sock, "--count", std::to_string(kCount),
                                   "--fps", "200", "--slots", "4", "--policy", "block",
                                   "--block-timeout-ms", std::to_string(kBlockTimeoutMs),
                                   "--wait-consumers", "2", "--verbose", "--timeout-s", "25"}));
  ASSERT_TRUE(producer.wait_line("listening", kWait)) << producer.describe();
  ChildProcess victim("peer consumer that stalls",
                      peer_argv({"consume", "--socket", sock, "--mode", "every-frame",
                                 "--stall-after", "30", "--timeout-s", "25"}));
  ChildProcess survivor("gst-launch every-frame consumer",
                        launch_argv(src() + " socket-path=" + sock +
                                    " mode=every-frame ! filesink buffer-mode=unbuffered "
                                    "location=" +
                                    out));
  ASSERT_TRUE(victim.wait_line("stalled", kWait)) << victim.describe() << producer.describe();

  // The stalled reader must hold the producer up: its pushes stop (the test's premise).
  std::size_t before = 0;
  const bool stuck = poll_until(
      [&] {
        const std::size_t n = producer.count_lines("pushed ");
        std::this_thread::sleep_for(300ms);
        before = producer.count_lines("pushed ");
        return before == n;
      },
      5s);
  ASSERT_TRUE(stuck) << "the producer did not block on the stalled every-frame consumer\n"
                     << producer.describe();
  ASSERT_LT(static_cast<long long>(before), kCount);

  const auto killed_at = std::chrono::steady_clock::now();
  victim.send_signal(SIGKILL);
  const bool resumed = poll_until([&] { return producer.count_lines("pushed ") > before; },
                                  std::chrono::milliseconds(kBlockTimeoutMs));
  const auto resume_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - killed_at)
                             .count();
  std::printf("producer resumed %lld ms after the kill (block-timeout %lld ms)\n",
              static_cast<long long>(resume_ms), kBlockTimeoutMs);
  EXPECT_TRUE(resumed) << "the producer stalled past its block-timeout after the kill\n"
                       << producer.describe();

  const auto pst = producer.wait_exit(kWait);
  const auto sst = survivor.wait_exit(kWait);
  ASSERT_TRUE(exited_ok(pst)) << producer.describe();
  ASSERT_TRUE(exited_ok(sst)) << survivor.describe();
  EXPECT_TRUE(victim.wait_exit(kWait));

  const Summary ps(producer.wait_line("produced ", 0ms).value_or(""));
  std::printf("producer: %s\n", ps.line().c_str());
  ASSERT_TRUE(ps.valid()) << producer.describe();
  EXPECT_EQ(ps.num("pushed"), kCount) << ps.line();
  EXPECT_EQ(ps.num("published") + ps.num("dropped"), kCount) << ps.line();
  EXPECT_LE(ps.num("max_gap_ms"), kBlockTimeoutMs + 500) << ps.line();

  const FileFrames f = read_frames_file(out, kBytes);
  EXPECT_EQ(f.trailing_bytes, 0u);
  EXPECT_EQ(static_cast<long long>(f.frames), ps.num("published"))
      << "the survivor receives every published frame";
  EXPECT_EQ(f.bad, 0u);
  EXPECT_TRUE(f.ids_increasing());
  ASSERT_FALSE(f.ids.empty());
  EXPECT_EQ(f.ids.front(), 1u);
  EXPECT_EQ(static_cast<long long>(f.ids.back()), kCount) << "the producer ran to its end";
}
