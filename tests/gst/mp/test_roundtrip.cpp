// A: frames cross between a real gst-launch-1.0 and the mp peer in both directions, every frame
// byte-exact, and the producer's EOS ends the consumer.
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

constexpr std::size_t kBytes = 64 * 48;  // GRAY8 64x48: rows need no padding
const std::string kCaps = "video/x-raw,format=GRAY8,width=64,height=48,framerate=30/1";
constexpr auto kWait = 20s;

}  // namespace

// The producer replays a file of id-stamped frames, so its frames are known.
TEST(GstMpRoundtrip, GstLaunchProducerToPeerConsumer) {
  GSTMP_REQUIRE("filesrc", "capsfilter");
  TempDir dir;
  const std::string sock = dir.file("ch");
  const std::string frames = dir.file("frames.bin");
  write_frames_file(frames, kBytes, 1, 60);

  ChildProcess producer(
      "gst-launch producer",
      launch_argv("filesrc location=" + frames + " blocksize=" + std::to_string(kBytes) + " ! " +
                  kCaps + " ! " + sink() + " ipc-mode=host socket-path=" + sock +
                  " wait-for-consumer=true"));
  ChildProcess consumer("peer consumer", peer_argv({"consume", "--socket", sock, "--mode",
                                                    "every-frame", "--timeout-s", "20"}));
  const auto cst = consumer.wait_exit(kWait);
  const auto pst = producer.wait_exit(kWait);
  ASSERT_TRUE(exited_ok(cst)) << consumer.describe() << producer.describe();
  ASSERT_TRUE(exited_ok(pst)) << producer.describe();

  const Summary s(consumer.wait_line("summary ", 0ms).value_or(""));
  ASSERT_TRUE(s.valid()) << consumer.describe();
  std::printf("consumer: %s\n", s.line().c_str());
  EXPECT_EQ(s.num("frames"), 60) << s.line();
  EXPECT_EQ(s.num("bad"), 0) << s.line();
  EXPECT_EQ(s.num("first_seq"), 1) << s.line();
  EXPECT_EQ(s.num("last_seq"), 60) << s.line();
  EXPECT_EQ(s.num("gaps"), 0) << s.line();
  EXPECT_EQ(s.num("first_id"), 1) << s.line();
  EXPECT_EQ(s.num("last_id"), 60) << s.line();
  EXPECT_EQ(s.num("id_gaps"), 0) << s.line();
  EXPECT_EQ(s.num("discont_count"), 1) << "only the first buffer starts a stream: " << s.line();
  EXPECT_TRUE(s.flag("eos")) << s.line();
}

// gst-launch-1.0 writes what it receives to a file; the file must be the producer's frames.
TEST(GstMpRoundtrip, PeerProducerToGstLaunchConsumer) {
  GSTMP_REQUIRE("filesink");
  TempDir dir;
  const std::string sock = dir.file("ch");
  const std::string out = dir.file("out.bin");

  ChildProcess producer("peer producer", peer_argv({"produce", "--socket", sock, "--count", "60",
                                                    "--wait-for-consumer", "--timeout-s", "20"}));
  ASSERT_TRUE(producer.wait_line("listening", kWait)) << producer.describe();
  // filesink's default buffering keeps up to 64 KiB of buffers, each holding a slot's lease:
  // more than the ring has for frames this small, so it writes each frame at once.
  ChildProcess consumer(
      "gst-launch consumer",
      launch_argv(src() + " socket-path=" + sock +
                  " mode=every-frame ! filesink buffer-mode=unbuffered location=" + out));
  const auto pst = producer.wait_exit(kWait);
  const auto cst = consumer.wait_exit(kWait);
  ASSERT_TRUE(exited_ok(pst)) << producer.describe() << consumer.describe();
  ASSERT_TRUE(exited_ok(cst)) << "EOS must end gst-launch-1.0\n" << consumer.describe();
  ASSERT_TRUE(consumer.wait_line("Got EOS", 0ms)) << consumer.describe();

  const Summary ps(producer.wait_line("produced ", 0ms).value_or(""));
  EXPECT_EQ(ps.num("published"), 60) << ps.line();
  EXPECT_EQ(ps.num("dropped"), 0) << ps.line();

  const FileFrames f = read_frames_file(out, kBytes);
  EXPECT_EQ(f.trailing_bytes, 0u);
  EXPECT_EQ(f.frames, 60u);
  EXPECT_EQ(f.bad, 0u);
  EXPECT_TRUE(f.ids_contiguous_from(1));
}

// A real video source: the consumer renders the same videotestsrc frames locally and compares
// each received frame, by its GstCudaIpcTensorMeta seq, with the one of that number.
TEST(GstMpRoundtrip, VideotestsrcProducerMatchesLocalReference) {
  GSTMP_REQUIRE("videotestsrc", "capsfilter");
  TempDir dir;
  const std::string sock = dir.file("ch");
  const std::string source =
      "videotestsrc pattern=ball animation-mode=frames num-buffers=40 ! "
      "video/x-raw,format=I420,width=160,height=120,framerate=30/1";

  ChildProcess producer("gst-launch producer",
                        launch_argv(source + " ! " + sink() + " ipc-mode=host socket-path=" + sock +
                                    " wait-for-consumer=true sync=false"));
  ChildProcess consumer("peer consumer",
                        peer_argv({"consume", "--socket", sock, "--mode", "every-frame",
                                   "--reference", source, "--timeout-s", "20"}));
  const auto cst = consumer.wait_exit(kWait);
  const auto pst = producer.wait_exit(kWait);
  ASSERT_TRUE(exited_ok(cst)) << consumer.describe() << producer.describe();
  ASSERT_TRUE(exited_ok(pst)) << producer.describe();

  const Summary s(consumer.wait_line("summary ", 0ms).value_or(""));
  ASSERT_TRUE(s.valid()) << consumer.describe();
  std::printf("consumer: %s\n", s.line().c_str());
  EXPECT_EQ(s.num("frames"), 40) << s.line();
  EXPECT_EQ(s.num("bad"), 0) << s.line();
  EXPECT_EQ(s.num("first_seq"), 1) << s.line();
  EXPECT_EQ(s.num("last_seq"), 40) << s.line();
  EXPECT_EQ(s.num("gaps"), 0) << s.line();
  EXPECT_TRUE(s.flag("eos")) << s.line();
}
