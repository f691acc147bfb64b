// interrupt() wakes a next() blocked in another thread, both while connected (waiting for a
// frame) and while waiting for a producer to come back.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "channel_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "temp_dir.hpp"
#include "thread_syscall.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

// Runs next(30 s) on a thread, waits until it sleeps, interrupts, and returns what next() gave.
EventType interrupt_blocked_next(Consumer& c, std::chrono::milliseconds* took) {
  std::atomic<pid_t> tid{0};
  std::atomic<int> type{-1};
  std::thread t([&] {
    tid = static_cast<pid_t>(::syscall(SYS_gettid));
    type = static_cast<int>(c.next(30s).type);
  });
  // Asleep: on its futex waiting for a frame, in ppoll() on the channel's directory waiting for a
  // producer.
  EXPECT_TRUE(poll_until([&] { return tid != 0 && (in_futex_wait(tid) || in_ppoll(tid)); }, 10s));
  const auto start = std::chrono::steady_clock::now();
  c.interrupt();
  EXPECT_TRUE(poll_until([&] { return type != -1; }, 10s)) << "interrupt() did not wake next()";
  *took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                start);
  t.join();
  return static_cast<EventType>(type.load());
}

}  // namespace

TEST(Interrupt, WakesNextWaitingForAFrame) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  Producer p(o);
  p.set_format(pattern_format(64));
  ConsumerOptions co;
  co.path = o.path;
  Consumer c(co);
  ASSERT_EQ(c.next(5s).type, EventType::format);
  std::chrono::milliseconds took{};
  EXPECT_EQ(interrupt_blocked_next(c, &took), EventType::interrupted);
  EXPECT_LT(took, 5s);
  // Not sticky past that next(): the stream goes on.
  EXPECT_EQ(c.next(10ms).type, EventType::timeout);
  ASSERT_EQ(publish_next(p), PublishStatus::published);
  Event ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::frame);
  EXPECT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()), ev.frame.size());
}

TEST(Interrupt, WakesNextWaitingForAProducer) {
  TempDir dir;
  ConsumerOptions co;
  co.path = dir.file("nobody");
  co.reconnect = true;
  co.reconnect_interval = 60s;
  Consumer c(co);
  ASSERT_FALSE(c.connected());
  std::chrono::milliseconds took{};
  EXPECT_EQ(interrupt_blocked_next(c, &took), EventType::interrupted);
  EXPECT_LT(took, 5s);
}

TEST(Interrupt, BeforeNextMakesItReturnAtOnce) {
  TempDir dir;
  ConsumerOptions co;
  co.path = dir.file("nobody");
  Consumer c(co);
  c.interrupt();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(c.next(30s).type, EventType::interrupted);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

// Producer::interrupt() wakes a begin_frame() blocked on a full ring (a sink's unlock on flush):
// the frame is not published, the consumer's held frame stays intact, and publishing goes on.
TEST(Interrupt, WakesAProducerBlockedOnAFullRing) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 1;
  o.block_timeout = 30s;
  Producer p(o);
  p.set_format(pattern_format(64));
  ConsumerOptions co;
  co.path = o.path;
  Consumer c(co);
  ASSERT_EQ(c.next(5s).type, EventType::format);
  ASSERT_EQ(publish_next(p), PublishStatus::published);
  Event held = c.next(5s);  // leases the only slot
  ASSERT_EQ(held.type, EventType::frame);

  std::atomic<pid_t> tid{0};
  std::atomic<int> status{-1};
  std::thread t([&] {
    tid = static_cast<pid_t>(::syscall(SYS_gettid));
    status = static_cast<int>(publish_next(p));
  });
  ASSERT_TRUE(poll_until([&] { return tid != 0 && in_futex_wait(tid); }, 10s));
  const auto start = std::chrono::steady_clock::now();
  p.interrupt();
  ASSERT_TRUE(poll_until([&] { return status != -1; }, 10s)) << "interrupt() did not wake it";
  t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(static_cast<PublishStatus>(status.load()), PublishStatus::interrupted);
  EXPECT_EQ(p.stats().published, 1u);
  EXPECT_EQ(check_pattern(held.frame.data(), held.frame.size(), held.frame.seq()),
            held.frame.size());

  // Sticky: a publish that would wait returns at once, until clear_interrupt().
  EXPECT_EQ(publish_next(p), PublishStatus::interrupted);
  p.clear_interrupt();
  held.frame.release();
  EXPECT_EQ(publish_next(p), PublishStatus::published);
  Event ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::frame);
  EXPECT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()), ev.frame.size());
}

TEST(Interrupt, ClearedProducerInterruptDoesNotFireLater) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  Producer p(o);
  p.set_format(pattern_format(64));
  p.interrupt();
  p.clear_interrupt();
  EXPECT_EQ(publish_next(p), PublishStatus::published);
}
