// kill -9 of the producer: the consumer reports the loss, frames it still holds stay readable
// and intact, and it follows a new producer started on the same path over the stale socket.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <vector>

#include "cudaipc/consumer.hpp"
#include "pattern.hpp"
#include "peer_process.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

// The next event that is not a timeout, within `timeout`.
Event next_event(Consumer& c, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    Event ev = c.next(100ms);
    if (ev.type != EventType::timeout || std::chrono::steady_clock::now() >= deadline) return ev;
  }
}

bool intact(const Frame& f) {
  return check_pattern(f.data(), f.size(), f.seq()) == f.size();
}

}  // namespace

TEST(ProducerCrash, ConsumerReportsDisconnectKeepsFramesAndResumes) {
  TempDir dir;
  const std::string path = dir.file("ch");
  PeerProcess first({"produce", "--path", path, "--bytes", "8192", "--frames", "6",
                     "--wait-consumers", "1", "--then", "hold"});
  ASSERT_TRUE(first.wait_for("listening", 10s)) << first.transcript();

  ConsumerOptions co;
  co.path = path;
  co.reconnect = true;
  co.reconnect_interval = 20ms;
  Consumer c(co);
  ASSERT_TRUE(c.connected());
  Event ev = next_event(c, 10s);
  ASSERT_EQ(ev.type, EventType::format);
  std::vector<Frame> held;
  for (std::uint64_t seq = 1; seq <= 6; ++seq) {
    ev = next_event(c, 10s);
    ASSERT_EQ(ev.type, EventType::frame) << "seq " << seq << ": " << ev.message;
    ASSERT_EQ(ev.frame.seq(), seq);
    ASSERT_TRUE(intact(ev.frame));
    if (seq >= 5) held.push_back(std::move(ev.frame));
  }
  ASSERT_TRUE(first.wait_for("published 6", 10s)) << first.transcript();

  first.kill_hard();
  ASSERT_TRUE(first.wait_exit(10s));
  ev = next_event(c, 10s);
  ASSERT_EQ(ev.type, EventType::disconnected) << "event " << static_cast<int>(ev.type);
  EXPECT_FALSE(ev.message.empty());
  EXPECT_FALSE(c.connected());
  for (const auto& f : held) EXPECT_TRUE(intact(f)) << "held frame " << f.seq() << " changed";

  // The dead producer's socket file is still there; a new producer must replace it.
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  ASSERT_TRUE(S_ISSOCK(st.st_mode));
  PeerProcess second({"produce", "--path", path, "--bytes", "4096", "--frames", "4",
                      "--wait-consumers", "1", "--then", "hold"});
  ASSERT_TRUE(second.wait_for("listening", 10s)) << second.transcript();
  ev = next_event(c, 10s);
  ASSERT_EQ(ev.type, EventType::format)
      << "event " << static_cast<int>(ev.type) << " " << ev.message << "\n"
      << second.transcript();
  EXPECT_EQ(ev.format.tensor.size, 4096u);
  for (std::uint64_t seq = 1; seq <= 4; ++seq) {
    ev = next_event(c, 10s);
    ASSERT_EQ(ev.type, EventType::frame) << "seq " << seq << ": " << ev.message;
    EXPECT_EQ(ev.frame.seq(), seq);
    EXPECT_EQ(ev.frame.size(), 4096u);
    EXPECT_TRUE(intact(ev.frame));
  }
  EXPECT_TRUE(c.connected());
  // The first producer's frames are still mapped and intact after a whole new connection.
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].seq(), 5u);
  for (const auto& f : held) EXPECT_TRUE(intact(f)) << "held frame " << f.seq() << " changed";
}
