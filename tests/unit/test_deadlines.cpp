// Core v2, finding 5: every wait honours the caller's deadline and interrupt(). A producer whose
// backlog is full, a producer that never answers the hello, and one that drips its format
// messages: none of them holds next() past its timeout, and interrupt() breaks each wait.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "channel_helpers.hpp"
#include "control_block.hpp"
#include "cudaipc/consumer.hpp"
#include "temp_dir.hpp"
#include "unix_socket.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

std::chrono::milliseconds since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               t);
}

// A listener that never accepts, its backlog filled to the brim.
struct FullBacklog {
  UniqueFd listener;
  std::vector<UniqueFd> queued;
  explicit FullBacklog(const std::string& path) : listener(listen_unix(path, 0600, std::nullopt)) {
    for (int i = 0; i < 1000; ++i) {
      try {
        queued.push_back(connect_unix(path));
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::busy) << e.what();
        return;
      }
    }
    ADD_FAILURE() << "the backlog never filled";
  }
};

}  // namespace

TEST(Deadlines, ConnectToAFullBacklogFailsAtOnceAsBusy) {
  TempDir dir;
  FullBacklog full(dir.file("ch"));
  ConsumerOptions o;
  o.path = dir.file("ch");
  o.reconnect = false;
  const auto start = std::chrono::steady_clock::now();
  try {
    Consumer c(o);
    ADD_FAILURE() << "connected to a listener that never accepts";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::busy) << e.what();
    EXPECT_NE(std::string(e.what()).find("backlog is full"), std::string::npos) << e.what();
  }
  EXPECT_LT(since(start), 2000ms);
}

TEST(Deadlines, ReconnectingConsumerKeepsItsTimeoutAgainstAFullBacklog) {
  TempDir dir;
  FullBacklog full(dir.file("ch"));
  ConsumerOptions o;
  o.path = dir.file("ch");
  o.reconnect = true;  // busy is worth retrying: the constructor must not throw
  Consumer c(o);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(c.next(300ms).type, EventType::timeout);
  EXPECT_LT(since(start), 2000ms);
}

TEST(Deadlines, InterruptBreaksAHandshakeThatNeverAnswers) {
  TempDir dir;
  const std::string path = dir.file("ch");
  ConsumerOptions o;
  o.path = path;
  o.reconnect = true;
  o.reconnect_interval = 10ms;
  Consumer c(o);  // nobody listens yet: not connected, no throw
  // A listener that accepts and then says nothing: the consumer's handshake waits on it.
  UniqueFd listener = listen_unix(path, 0600, std::nullopt);
  std::atomic<bool> done{false};
  std::atomic<int> type{-1};
  std::thread t([&] {
    type = static_cast<int>(c.next(30s).type);
    done = true;
  });
  std::vector<UniqueFd> accepted;
  ASSERT_TRUE(poll_until(
      [&] {
        UniqueFd a = accept_unix(listener.get());
        if (a) accepted.push_back(std::move(a));
        return !accepted.empty();
      },
      5s));
  std::this_thread::sleep_for(100ms);  // it now waits for a welcome that never comes
  const auto start = std::chrono::steady_clock::now();
  c.interrupt();
  ASSERT_TRUE(poll_until([&] { return done.load(); }, 2s)) << "interrupt() did not break it";
  t.join();
  EXPECT_EQ(static_cast<EventType>(type.load()), EventType::interrupted);
  EXPECT_LT(since(start), 1000ms);
}

TEST(Deadlines, FormatThatComesLateDoesNotHoldNextPastItsTimeout) {
  TempDir dir;
  ProducerOptions po;
  po.path = dir.file("ch");
  Producer p(po);
  p.set_format(pattern_format(256));
  ConsumerOptions o;
  o.path = po.path;
  o.reconnect = false;
  Consumer c(o);
  ASSERT_EQ(c.next(5s).type, EventType::format);
  // Many format changes in a row: whatever has arrived is read, and next() keeps to its budget.
  for (int round = 0; round < 50; ++round) {
    p.set_format(pattern_format(256, "test/pattern,round=" + std::to_string(round)));
    ASSERT_EQ(publish_next(p), PublishStatus::published);
    const auto start = std::chrono::steady_clock::now();
    Event ev = c.next(100ms);
    EXPECT_LT(since(start), 1000ms);
    if (ev.type == EventType::format) ev = c.next(5s);
    ASSERT_EQ(ev.type, EventType::frame) << "round " << round;
    EXPECT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()), ev.frame.size());
  }
}
