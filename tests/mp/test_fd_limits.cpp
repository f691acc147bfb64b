// File descriptor exhaustion on either side (issue #7, findings 13 and 17). A producer at its fd
// limit must back off, say so now and then, and serve again once descriptors free up; a consumer
// whose own table is full must say that, not blame the producer.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "channel_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "forked_child.hpp"
#include "peer_process.hpp"
#include "proc_stats.hpp"
#include "temp_dir.hpp"
#include "unix_socket.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

// Parses the producer peer's "logs total=T fd=F" report; -1 when the line is something else.
long long fd_logs(const std::string& line) {
  return line.rfind("logs ", 0) == 0 ? field(line, "fd") : -1;
}

// The newest fd-log count the peer reported within `window`, or -1 if it reported none.
long long newest_fd_logs(PeerProcess& peer, std::chrono::milliseconds window) {
  long long newest = -1;
  const auto end = std::chrono::steady_clock::now() + window;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0) return newest;
    auto line = peer.read_line(left);
    if (!line) return newest;
    if (long long n = fd_logs(*line); n >= 0) newest = n;
  }
}

}  // namespace

// The producer runs in a peer allowed 8 descriptors beyond what it holds at start. The test
// connects until the producer's backlog is full: it has accepted 8, hit EMFILE, and the rest wait
// in the queue. Unaccepted connections keep its listening socket readable the whole time, which
// used to make the accept loop spin and log on every turn.
TEST(FdLimits, ProducerAtItsFdLimitBacksOffAndServesAConsumerAfterwards) {
  TempDir dir;
  const std::string path = dir.file("ch");
  PeerProcess producer({"produce", "--path", path, "--bytes", "4096", "--frames", "20",
                        "--wait-consumers", "1", "--wait-ms", "60000", "--count-logs",
                        "--fd-headroom", "8"});
  ASSERT_TRUE(producer.wait_for("listening", 10s)) << producer.transcript();

  std::vector<UniqueFd> squatters;
  bool backlog_full = false;
  for (int i = 0; i < 1000 && !backlog_full; ++i) {
    try {
      squatters.push_back(connect_unix(path));
    } catch (const Error& e) {
      ASSERT_EQ(e.code(), Errc::busy) << e.what();
      backlog_full = true;
    }
  }
  ASSERT_TRUE(backlog_full) << "the producer's backlog never filled";

  // The first warning says the producer hit the limit; from then on it is at it.
  long long first = -1;
  const auto limit_deadline = std::chrono::steady_clock::now() + 10s;
  while (first < 1 && std::chrono::steady_clock::now() < limit_deadline) {
    auto line = producer.read_line(1s);
    if (line) first = std::max(first, fd_logs(*line));
  }
  ASSERT_GE(first, 1) << "the producer never reported running out of descriptors\n"
                      << producer.transcript();

  // Two seconds at the limit: a spinning accept loop burns a core and logs on every turn.
  const long long cpu_before = process_cpu_ms(producer.pid());
  const long long logs_after = newest_fd_logs(producer, 2000ms);
  const long long cpu_used = process_cpu_ms(producer.pid()) - cpu_before;
  ASSERT_GE(cpu_before, 0);
  EXPECT_LE(logs_after, 2) << "accept failures must be logged at most every few seconds";
  EXPECT_LT(cpu_used, 500) << "the producer used " << cpu_used
                           << " ms of CPU in 2 s at its fd limit";

  // A consumer arriving now finds the backlog full (busy); with reconnect on it keeps trying,
  // and gets in once the squatters leave and the producer's descriptors are free again.
  ConsumerOptions co;
  co.path = path;
  co.reconnect = true;
  co.reconnect_interval = 50ms;
  Consumer consumer(co);
  squatters.clear();
  std::uint64_t frames = 0;
  bool format = false;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (frames < 20 && std::chrono::steady_clock::now() < deadline) {
    Event ev = consumer.next(500ms);
    if (ev.type == EventType::format) {
      EXPECT_EQ(ev.format.tensor.size, 4096u);
      format = true;
    } else if (ev.type == EventType::frame) {
      ASSERT_TRUE(format) << "a frame came before its format";
      EXPECT_EQ(ev.frame.seq(), frames + 1);
      ASSERT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()), ev.frame.size())
          << "frame " << ev.frame.seq();
      ++frames;
    } else {
      ASSERT_TRUE(ev.type == EventType::timeout || ev.type == EventType::disconnected)
          << "event " << static_cast<int>(ev.type) << " " << ev.message;
    }
  }
  EXPECT_EQ(frames, 20u) << producer.transcript();
  ASSERT_TRUE(producer.wait_for("published 20", 10s)) << producer.transcript();
}

// Each child fills its fd table to leave exactly k descriptors free, then connects. Whatever k,
// the consumer either connects or fails with a system error that says what ran out; never a
// protocol error blaming the producer. With 3 free (the socket, the eventfd and the producer's
// pidfd take all three), the welcome's descriptors are the ones the kernel cannot install.
TEST(FdLimits, ConsumerOutOfFdsDuringTheHandshakeSaysSo) {
  TempDir dir;
  const std::string path = dir.file("ch");
  PeerProcess producer({"produce", "--path", path, "--frames", "0", "--then", "hold"});
  ASSERT_TRUE(producer.wait_for("published 0", 10s)) << producer.transcript();
  ConsumerOptions co;
  co.path = path;
  co.reconnect = false;
  int ran_out = 0;
  bool connected_before = false;
  for (int k = 0; k <= 16; ++k) {
    ForkedChild child([&](ForkedChild& ch) {
      if (!leave_free_fds(k)) {
        ch.say("setup failed");
        return 1;
      }
      try {
        Consumer c(co);
        ch.say("ok");
      } catch (const Error& e) {
        ch.say(std::to_string(static_cast<int>(e.code())) + " " + e.what());
      }
      return 0;
    });
    auto line = child.read_line(15s);
    ASSERT_TRUE(line) << "k=" << k << ": the child said nothing";
    SCOPED_TRACE("k=" + std::to_string(k) + ": " + *line);
    ASSERT_NE(*line, "setup failed");
    if (*line == "ok") {
      connected_before = true;
      continue;
    }
    EXPECT_FALSE(connected_before) << "more free descriptors must not make connecting fail";
    EXPECT_EQ(line->rfind(std::to_string(static_cast<int>(Errc::system)) + " ", 0), 0u);
    const bool says_ran_out = line->find("ran out of file descriptors") != std::string::npos;
    EXPECT_TRUE(says_ran_out || line->find("Too many open files") != std::string::npos);
    if (says_ran_out) ++ran_out;
    if (k == 3) {
      EXPECT_TRUE(says_ran_out);
    }
  }
  EXPECT_TRUE(connected_before) << "even 16 free descriptors were not enough to connect";
  // The welcome (control block, page) and the format (one fd per slot) both hit it.
  EXPECT_GE(ran_out, 4);
}

// A connected consumer fills its table; the producer then grows its slots, so the next format
// message carries new slot descriptors the kernel cannot install. next() must name the cause.
TEST(FdLimits, ConsumerOutOfFdsMidStreamSaysSo) {
  TempDir dir;
  const std::string path = dir.file("ch");
  ConsumerOptions co;
  co.path = path;
  co.reconnect = false;
  // Forked before the producer exists, while this process has no other thread.
  ForkedChild child([&](ForkedChild& ch) {
    if (!ch.wait_go()) return 1;
    Consumer c(co);
    Event ev = c.next(5s);
    if (ev.type != EventType::format) {
      ch.say("no format first");
      return 1;
    }
    ev = c.next(5s);
    if (ev.type != EventType::frame) {
      ch.say("no frame");
      return 1;
    }
    if (check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()) != ev.frame.size()) {
      ch.say("bad frame");
      return 1;
    }
    ev.frame.release();
    if (!leave_free_fds(2)) {
      ch.say("setup failed");
      return 1;
    }
    ch.say("filled");
    try {
      for (int i = 0; i < 10; ++i) {
        ev = c.next(5s);
        ch.say("event " + std::to_string(static_cast<int>(ev.type)));
      }
    } catch (const Error& e) {
      ch.say(std::to_string(static_cast<int>(e.code())) + " " + e.what());
    }
    return 0;
  });
  ProducerOptions o;
  o.path = path;
  Producer p(o);
  p.set_format(pattern_format(4096));
  child.go();
  ASSERT_TRUE(wait_consumers(p, 1));
  ASSERT_EQ(publish_next(p), PublishStatus::published);
  auto line = child.read_line(10s);
  ASSERT_TRUE(line);
  ASSERT_EQ(*line, "filled");
  // Bigger frames than the slots hold: a new slot set, whose descriptors travel with the format.
  p.set_format(pattern_format(1 << 20, "test/pattern,grown"));
  ASSERT_EQ(publish_next(p), PublishStatus::published);
  line = child.read_line(10s);
  ASSERT_TRUE(line);
  EXPECT_EQ(line->rfind(std::to_string(static_cast<int>(Errc::system)) + " ", 0), 0u) << *line;
  EXPECT_NE(line->find("ran out of file descriptors"), std::string::npos) << *line;
}
