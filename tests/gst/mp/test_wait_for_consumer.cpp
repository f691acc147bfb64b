// F: wait-for-consumer=true holds a gst-launch-1.0 producer until a consumer connects: a
// consumer that starts a second later still gets frame seq 1 first, and every frame after it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "child_process.hpp"
#include "mp_support.hpp"
#include "temp_dir.hpp"

using namespace cudaipc::testing;
using namespace cudaipc::testing::gstmp;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kBytes = 64 * 48;
const std::string kCaps = "video/x-raw,format=GRAY8,width=64,height=48,framerate=30/1";
constexpr auto kWait = 15s;

std::vector<std::string> file_producer(const std::string& frames, const std::string& sock,
                                       bool wait) {
  return launch_argv("filesrc location=" + frames + " blocksize=" + std::to_string(kBytes) + " ! " +
                     kCaps + " ! " + sink() + " ipc-mode=host socket-path=" + sock +
                     " wait-for-consumer=" + (wait ? "true" : "false"));
}

}  // namespace

TEST(GstMpWaitForConsumer, LateConsumerStillGetsTheFirstFrame) {
  GSTMP_REQUIRE("filesrc", "capsfilter");
  TempDir dir;
  const std::string sock = dir.file("ch");
  const std::string frames = dir.file("frames.bin");
  write_frames_file(frames, kBytes, 1, 30);

  ChildProcess producer("gst-launch producer", file_producer(frames, sock, true));
  // The one second is the scenario itself, not a wait for something to happen.
  std::this_thread::sleep_for(1s);
  ASSERT_TRUE(producer.running()) << "the producer did not wait for a consumer\n"
                                  << producer.describe();

  ChildProcess consumer(
      "peer consumer", peer_argv({"consume", "--socket", sock, "--mode", "every-frame", "--verbose",
                                  "--timeout-s", "10"}));
  const auto first = consumer.wait_line("frame ", kWait);
  ASSERT_TRUE(first) << consumer.describe() << producer.describe();
  EXPECT_EQ(first->rfind("frame seq=1 id=1 ", 0), 0u) << *first;
  const auto cst = consumer.wait_exit(kWait);
  const auto pst = producer.wait_exit(kWait);
  ASSERT_TRUE(exited_ok(cst)) << consumer.describe();
  ASSERT_TRUE(exited_ok(pst)) << producer.describe();

  const Summary s(consumer.wait_line("summary ", 0ms).value_or(""));
  std::printf("consumer: %s\n", s.line().c_str());
  EXPECT_EQ(s.num("frames"), 30) << s.line();
  EXPECT_EQ(s.num("bad"), 0) << s.line();
  EXPECT_EQ(s.num("first_seq"), 1) << s.line();
  EXPECT_EQ(s.num("last_seq"), 30) << s.line();
  EXPECT_EQ(s.num("gaps"), 0) << s.line();
  EXPECT_EQ(s.num("first_id"), 1) << s.line();
  EXPECT_EQ(s.num("id_gaps"), 0) << s.line();
  EXPECT_TRUE(s.flag("eos")) << s.line();
}

// The control: the same producer without wait-for-consumer runs to its end with nobody there.
TEST(GstMpWaitForConsumer, WithoutItTheProducerDoesNotWait) {
  GSTMP_REQUIRE("filesrc", "capsfilter");
  TempDir dir;
  const std::string sock = dir.file("ch");
  const std::string frames = dir.file("frames.bin");
  write_frames_file(frames, kBytes, 1, 30);
  ChildProcess producer("gst-launch producer", file_producer(frames, sock, false));
  const auto st = producer.wait_exit(kWait);
  EXPECT_TRUE(exited_ok(st)) << producer.describe();
}
