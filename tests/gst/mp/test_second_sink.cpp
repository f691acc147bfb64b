// E: one producer per path. A second gst-launch-1.0 sink on a live path fails, saying another
// producer is live, and leaves the live one serving; a socket file left by a SIGKILLed producer
// does not stop a new one.
#include <gtest/gtest.h>
#include <signal.h>

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

constexpr std::size_t kBytes = 64 * 48;  // GRAY8 64x48, the peer's default
const std::string kCaps = "video/x-raw,format=GRAY8,width=64,height=48,framerate=30/1";
constexpr auto kWait = 15s;

// A producer that keeps publishing until it is killed.
std::vector<std::string> live_producer(const std::string& sock) {
  return peer_argv(
      {"produce", "--socket", sock, "--count", "1000000", "--fps", "100", "--timeout-s", "30"});
}

}  // namespace

TEST(GstMpSecondSink, SecondSinkOnLivePathFailsAndLeavesTheFirstServing) {
  GSTMP_REQUIRE("videotestsrc", "capsfilter");
  TempDir dir;
  const std::string sock = dir.file("ch");
  ChildProcess first("live peer producer", live_producer(sock));
  ASSERT_TRUE(first.wait_line("listening", kWait)) << first.describe();

  ChildProcess second("second gst-launch sink",
                      launch_argv("videotestsrc num-buffers=5 ! " + kCaps + " ! " + sink() +
                                  " ipc-mode=host socket-path=" + sock));
  const auto st = second.wait_exit(kWait);
  ASSERT_TRUE(st) << "the second sink must give up, not wait\n" << second.describe();
  EXPECT_FALSE(exited_ok(st)) << describe_status(*st) << "\n" << second.describe();
  const auto error = second.wait_line("Another cudaipc producer is live on " + sock, 0ms);
  EXPECT_TRUE(error) << second.describe();
  if (error) std::printf("second sink: %s\n", error->c_str());

  // The failed attempt must not have taken the path from the live producer.
  ASSERT_TRUE(first.running()) << first.describe();
  ASSERT_TRUE(is_socket(sock));
  ChildProcess consumer("peer consumer",
                        peer_argv({"consume", "--socket", sock, "--mode", "every-frame",
                                   "--max-frames", "20", "--timeout-s", "10"}));
  const auto cst = consumer.wait_exit(kWait);
  ASSERT_TRUE(exited_ok(cst)) << consumer.describe() << first.describe();
  const Summary s(consumer.wait_line("summary ", 0ms).value_or(""));
  std::printf("consumer: %s\n", s.line().c_str());
  EXPECT_EQ(s.num("frames"), 20) << s.line();
  EXPECT_EQ(s.num("bad"), 0) << s.line();
  EXPECT_EQ(s.num("gaps"), 0) << s.line();
  EXPECT_EQ(s.num("id_gaps"), 0) << s.line();
  EXPECT_TRUE(first.running()) << first.describe();
}

TEST(GstMpSecondSink, StaleSocketOfKilledProducerDoesNotStopANewOne) {
  GSTMP_REQUIRE("filesrc", "capsfilter");
  TempDir dir;
  const std::string sock = dir.file("ch");
  const std::string frames = dir.file("frames.bin");
  write_frames_file(frames, kBytes, 1, 30);
  {
    ChildProcess first("live peer producer", live_producer(sock));
    ASSERT_TRUE(first.wait_line("listening", kWait)) << first.describe();
    first.send_signal(SIGKILL);
    ASSERT_TRUE(first.wait_exit(kWait));
  }
  ASSERT_TRUE(is_socket(sock)) << "the killed producer's socket file is the stale one";

  ChildProcess producer(
      "new gst-launch producer",
      launch_argv("filesrc location=" + frames + " blocksize=" + std::to_string(kBytes) + " ! " +
                  kCaps + " ! " + sink() + " ipc-mode=host socket-path=" + sock +
                  " wait-for-consumer=true"));
  ChildProcess consumer("peer consumer", peer_argv({"consume", "--socket", sock, "--mode",
                                                    "every-frame", "--timeout-s", "10"}));
  const auto pst = producer.wait_exit(kWait);
  const auto cst = consumer.wait_exit(kWait);
  ASSERT_TRUE(exited_ok(pst)) << producer.describe() << consumer.describe();
  ASSERT_TRUE(exited_ok(cst)) << consumer.describe();
  const Summary s(consumer.wait_line("summary ", 0ms).value_or(""));
  std::printf("consumer: %s\n", s.line().c_str());
  EXPECT_EQ(s.num("frames"), 30) << s.line();
  EXPECT_EQ(s.num("bad"), 0) << s.line();
  EXPECT_EQ(s.num("first_id"), 1) << s.line();
  EXPECT_EQ(s.num("last_id"), 30) << s.line();
  EXPECT_EQ(s.num("id_gaps"), 0) << s.line();
  EXPECT_TRUE(s.flag("eos")) << s.line();
}
