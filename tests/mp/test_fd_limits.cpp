// File descriptor exhaustion on either side (issue #7, findings 13 and 17; issue #14, target 7).
// A producer at its fd limit must tell a consumer that connects so, naming the limit, without
// spinning or flooding its log, and serve again once descriptors free up; a consumer whose own
// table is full must say that, not blame the producer.
#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
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

// The limit the producer peer set ("limit N"), read from its report; -1 if it did not say.
long long peer_limit(PeerProcess& peer) {
  auto line = peer.wait_for("limit ", 10s);
  return line ? std::stoll(line->substr(6)) : -1;
}

// Reads the format and every frame of a producer publishing `frames` patterned frames of 4096
// bytes, each checked; other events must be timeouts. The number of frames read.
std::uint64_t read_every_frame(Consumer& consumer, std::uint64_t frames) {
  std::uint64_t got = 0;
  bool format = false;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (got < frames && std::chrono::steady_clock::now() < deadline) {
    Event ev = consumer.next(500ms);
    if (ev.type == EventType::format) {
      EXPECT_EQ(ev.format.tensor.size, 4096u);
      format = true;
    } else if (ev.type == EventType::frame) {
      EXPECT_TRUE(format) << "a frame came before its format";
      EXPECT_EQ(ev.frame.seq(), got + 1);
      EXPECT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()), ev.frame.size())
          << "frame " << ev.frame.seq();
      ++got;
    } else {
      EXPECT_EQ(ev.type, EventType::timeout) << static_cast<int>(ev.type) << " " << ev.message;
    }
  }
  return got;
}

}  // namespace

// The producer runs in a peer whose descriptors are all taken (the limit lowered to what it holds,
// 16 of them ballast). Connections must not wait in its backlog in silence: each is let in on the
// producer's spare descriptor, told that the producer has no file descriptors left and its limit,
// and closed; without spinning or a log line per connection. A consumer that keeps trying hears
// the reason once, and is served as soon as the peer closes its ballast.
TEST(FdLimits, ProducerAtItsFdLimitRefusesNamingTheLimitAndServesOnceFdsReturn) {
  TempDir dir;
  const std::string path = dir.file("ch");
  PeerProcess producer({"produce", "--path", path, "--bytes", "4096", "--frames", "20",
                        "--wait-consumers", "1", "--wait-ms", "60000", "--count-logs",
                        "--fd-headroom", "0", "--fd-ballast", "16"});
  const long long limit = peer_limit(producer);
  ASSERT_GT(limit, 0) << producer.transcript();
  ASSERT_TRUE(producer.wait_for("listening", 10s)) << producer.transcript();
  const std::string named = "no file descriptors left (limit " + std::to_string(limit) + ")";

  // A flood of connections, each refused with the reason, none left queued: the producer's
  // backlog (64) would have filled long before the last.
  ConsumerOptions once;
  once.path = path;
  once.reconnect = false;
  const long long cpu_before = process_cpu_ms(producer.pid());
  for (int i = 0; i < 200; ++i) {
    try {
      Consumer c(once);
      FAIL() << "connection " << i << " was served by a producer with no descriptors";
    } catch (const Error& e) {
      ASSERT_EQ(e.code(), Errc::busy) << "connection " << i << ": " << e.what();
      ASSERT_NE(std::string(e.what()).find(named), std::string::npos)
          << "connection " << i << ": " << e.what();
    }
  }
  const long long logs = newest_fd_logs(producer, 500ms);
  const long long cpu_used = process_cpu_ms(producer.pid()) - cpu_before;
  ASSERT_GE(cpu_before, 0);
  EXPECT_GE(logs, 1) << "the producer never said it refuses consumers\n" << producer.transcript();
  EXPECT_LE(logs, 2) << "refusals must be logged at most every few seconds";
  EXPECT_LT(cpu_used, 1000) << "the producer used " << cpu_used << " ms of CPU on 200 refusals";

  // A consumer that keeps trying is told why it waits, once; then served once the descriptors
  // are back, every frame checked.
  ConsumerOptions co;
  co.path = path;
  co.reconnect = true;
  co.reconnect_interval = 50ms;
  Consumer consumer(co);
  Event ev = consumer.next(5s);
  ASSERT_EQ(ev.type, EventType::disconnected) << ev.message;
  EXPECT_TRUE(ev.refused);
  EXPECT_NE(ev.message.find(named), std::string::npos) << ev.message;
  // Retries meanwhile are refused alike: that is no news.
  ev = consumer.next(300ms);
  EXPECT_EQ(ev.type, EventType::timeout) << static_cast<int>(ev.type) << " " << ev.message;
  EXPECT_FALSE(consumer.connected());
  ASSERT_EQ(::kill(producer.pid(), SIGUSR1), 0);
  ASSERT_TRUE(producer.wait_for("fds returned", 10s)) << producer.transcript();
  EXPECT_EQ(read_every_frame(consumer, 20), 20u) << producer.transcript();
  ASSERT_TRUE(producer.wait_for("published 20", 10s)) << producer.transcript();
}

// With room for k descriptors the producer accepts, but its handshake needs more: the pidfd, the
// page's memfd, a dup of the control block, one dup per slot. Whichever runs out, the consumer is
// refused with the limit named, never left to time out; with the limit raised again (SIGUSR1) a
// consumer is served and reads every frame.
TEST(FdLimits, ProducerShortOfFdsDuringTheHandshakeRefusesNamingTheLimit) {
  TempDir dir;
  int refused = 0, after_accept = 0;
  bool served_before = false;
  for (int k = 1; k <= 10; ++k) {
    SCOPED_TRACE("k=" + std::to_string(k));
    const std::string path = dir.file("ch" + std::to_string(k));
    PeerProcess producer({"produce", "--path", path, "--bytes", "4096", "--frames", "5",
                          "--wait-consumers", "1", "--wait-ms", "30000", "--then", "eos",
                          "--fd-headroom", std::to_string(k)});
    const long long limit = peer_limit(producer);
    ASSERT_GT(limit, 0) << producer.transcript();
    ASSERT_TRUE(producer.wait_for("listening", 10s)) << producer.transcript();
    ConsumerOptions co;
    co.path = path;
    co.reconnect = false;
    std::unique_ptr<Consumer> consumer;
    try {
      consumer = std::make_unique<Consumer>(co);
      served_before = true;
    } catch (const Error& e) {
      EXPECT_FALSE(served_before) << "more room must not make the handshake fail: " << e.what();
      EXPECT_EQ(e.code(), Errc::busy) << e.what();
      const std::string what = e.what();
      EXPECT_NE(what.find("no file descriptors left (limit " + std::to_string(limit) + ")"),
                std::string::npos)
          << what;
      ++refused;
      if (what.find("cannot accept") == std::string::npos) ++after_accept;
      ASSERT_EQ(::kill(producer.pid(), SIGUSR1), 0);
      ASSERT_TRUE(producer.wait_for("fds returned", 10s)) << producer.transcript();
      consumer = std::make_unique<Consumer>(co);
    }
    EXPECT_EQ(read_every_frame(*consumer, 5), 5u) << producer.transcript();
  }
  EXPECT_TRUE(served_before) << "even 10 free descriptors were not enough for a handshake";
  // The pidfd, the page and the control block at least, each a refusal after accept.
  EXPECT_GE(after_accept, 3);
  EXPECT_EQ(refused, after_accept) << "with room for one, accepting must succeed";
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
