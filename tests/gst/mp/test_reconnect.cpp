// B: the producer process goes away mid-stream (SIGKILL, or an interrupted gst-launch-1.0 that
// stops without EOS) and a new one starts on the same path. With reconnect=true the consumer
// resumes with a DISCONT buffer and checks every frame of both producers; with reconnect=false
// it stops with an error that names the path.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "mp_support.hpp"
#include "temp_dir.hpp"

using namespace cudaipc::testing;
using namespace cudaipc::testing::gstmp;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kBytes = 64 * 48;
const std::string kCaps = "video/x-raw,format=GRAY8,width=64,height=48,framerate=30/1";
constexpr std::uint64_t kFirstCount = 300;         // far more than it gets to send
constexpr std::uint64_t kSecondFirstId = 1000001;  // the second producer's ids
constexpr std::uint64_t kSecondCount = 40;
constexpr auto kWait = 15s;

// gst-launch-1.0 replaying `frames`; `pace_us` sleeps per frame make it a stream to interrupt.
std::vector<std::string> file_producer(const std::string& frames, const std::string& sock,
                                       int pace_us) {
  std::string d = "filesrc location=" + frames + " blocksize=" + std::to_string(kBytes);
  if (pace_us) d += " ! identity sleep-time=" + std::to_string(pace_us);
  d += " ! " + kCaps + " ! " + sink() + " ipc-mode=host socket-path=" + sock +
       " wait-for-consumer=true";
  return launch_argv(d);
}

struct Segment {
  std::uint64_t first_id = 0, last_id = 0, count = 0, first_seq = 0, last_seq = 0;
};

// The peer's "segments" field: FIRSTID-LASTID/COUNT@FIRSTSEQ-LASTSEQ, comma-separated.
std::vector<Segment> parse_segments(const std::string& text) {
  std::vector<Segment> out;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    Segment s;
    char dash, slash, at, dash2;
    std::istringstream is(item);
    is >> s.first_id >> dash >> s.last_id >> slash >> s.count >> at >> s.first_seq >> dash2 >>
        s.last_seq;
    out.push_back(s);
  }
  return out;
}

void restart_producer(int signal) {
  TempDir dir;
  const std::string sock = dir.file("ch");
  const std::string gen1 = dir.file("gen1.bin");
  const std::string gen2 = dir.file("gen2.bin");
  write_frames_file(gen1, kBytes, 1, kFirstCount);
  write_frames_file(gen2, kBytes, kSecondFirstId, kSecondCount);

  ChildProcess consumer("peer consumer",
                        peer_argv({"consume", "--socket", sock, "--mode", "every-frame",
                                   "--reconnect", "true", "--verbose", "--timeout-s", "25"}));
  ChildProcess first("first gst-launch producer", file_producer(gen1, sock, 10000));
  ASSERT_TRUE(consumer.wait_line("frame seq=20 ", kWait))
      << consumer.describe() << first.describe();
  first.send_signal(signal);
  const auto st = first.wait_exit(kWait);
  ASSERT_TRUE(st) << "the first producer did not stop\n" << first.describe();
  ASSERT_LT(consumer.count_lines("frame "), kFirstCount) << "the first producer ran to its end";
  if (signal == SIGKILL) {
    ASSERT_TRUE(is_socket(sock)) << "a killed producer leaves its socket: the stale-socket case";
  }

  ChildProcess second("second gst-launch producer", file_producer(gen2, sock, 0));
  const auto cst = consumer.wait_exit(kWait);
  const auto pst = second.wait_exit(kWait);
  ASSERT_TRUE(exited_ok(cst)) << consumer.describe() << second.describe();
  ASSERT_TRUE(exited_ok(pst)) << second.describe();

  const Summary s(consumer.wait_line("summary ", 0ms).value_or(""));
  ASSERT_TRUE(s.valid()) << consumer.describe();
  std::printf("consumer: %s\n", s.line().c_str());
  EXPECT_EQ(s.num("bad"), 0) << s.line();
  EXPECT_TRUE(s.flag("eos")) << "the second producer's EOS ends the consumer: " << s.line();
  EXPECT_EQ(s.num("gaps"), 0) << "every-frame within each producer: " << s.line();
  EXPECT_EQ(s.num("id_gaps"), 0) << s.line();
  EXPECT_EQ(s.num("backwards"), 0) << s.line();
  EXPECT_EQ(s.num("discont_count"), 2)
      << "the first buffer and the first after the restart: " << s.line();
  const auto segs = parse_segments(s.str("segments"));
  ASSERT_EQ(segs.size(), 2u) << s.line();
  EXPECT_EQ(segs[0].first_id, 1u) << s.line();
  EXPECT_GE(segs[0].count, 20u) << s.line();
  EXPECT_EQ(segs[0].first_seq, 1u) << s.line();
  EXPECT_EQ(segs[1].first_id, kSecondFirstId)
      << "DISCONT on the second producer's first frame: " << s.line();
  EXPECT_EQ(segs[1].count, kSecondCount) << s.line();
  EXPECT_EQ(segs[1].last_id, kSecondFirstId + kSecondCount - 1) << s.line();
  EXPECT_EQ(segs[1].first_seq, 1u) << "a new producer counts from 1: " << s.line();
  EXPECT_EQ(segs[1].last_seq, kSecondCount) << s.line();
}

}  // namespace

TEST(GstMpReconnect, ProducerKilledThenReplacedConsumerResumes) {
  GSTMP_REQUIRE("filesrc", "identity", "capsfilter");
  restart_producer(SIGKILL);
}

// gst-launch-1.0 stops on SIGINT without sending EOS: the channel closes without an end.
TEST(GstMpReconnect, ProducerInterruptedThenReplacedConsumerResumes) {
  GSTMP_REQUIRE("filesrc", "identity", "capsfilter");
  restart_producer(SIGINT);
}

TEST(GstMpReconnect, ReconnectOffFailsNamingThePath) {
  GSTMP_REQUIRE("filesrc", "identity", "capsfilter", "fakesink");
  TempDir dir;
  const std::string sock = dir.file("ch");
  const std::string gen1 = dir.file("gen1.bin");
  write_frames_file(gen1, kBytes, 1, kFirstCount);

  ChildProcess producer("gst-launch producer", file_producer(gen1, sock, 10000));
  // -v prints fakesink's last-message per buffer: frames are flowing once one shows.
  std::vector<std::string> argv =
      launch_argv("-v " + src() + " socket-path=" + sock +
                  " mode=every-frame reconnect=false ! fakesink silent=false");
  ChildProcess consumer("gst-launch consumer", argv);
  ASSERT_TRUE(consumer.wait_line("last-message = chain", kWait))
      << consumer.describe() << producer.describe();
  producer.send_signal(SIGKILL);
  ASSERT_TRUE(producer.wait_exit(kWait));

  const auto cst = consumer.wait_exit(kWait);
  ASSERT_TRUE(cst) << "the consumer must stop, not wait for a new producer\n"
                   << consumer.describe();
  EXPECT_FALSE(exited_ok(cst)) << describe_status(*cst) << "\n" << consumer.describe();
  const auto error = consumer.wait_line("ERROR", 0ms);
  ASSERT_TRUE(error) << consumer.describe();
  std::printf("consumer: %s\n", error->c_str());
  EXPECT_NE(error->find(sock), std::string::npos) << "the error names the path: " << *error;
  EXPECT_NE(error->find("reconnect is off"), std::string::npos) << *error;
}
