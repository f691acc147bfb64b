// A consumer that stops (SIGSTOP, or a process that just stops calling next()) while publishing
// waits for it (issue #7, finding 16). Within lease_timeout it is evicted, the log names its pid,
// the stats showed how far behind it was, and every other consumer gets every frame intact.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <bitset>
#include <thread>
#include <vector>

#include "channel_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "log_capture.hpp"
#include "peer_process.hpp"
#include "poll_until.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

// Samples the producer's view of one consumer process while publishing goes on elsewhere.
class StatsWatch {
 public:
  StatsWatch(const Producer& p, pid_t pid)
      : thread_([this, &p, pid] {
          while (!stop_.load()) {
            for (const auto& c : p.stats().consumers) {
              if (c.pid != pid) continue;
              if (!c.evicted) max_lag_ = std::max<std::uint64_t>(max_lag_, c.lag);
              if (c.evicted) saw_evicted_ = true;
            }
            std::this_thread::sleep_for(1ms);
          }
        }) {}
  ~StatsWatch() { finish(); }
  void finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::uint64_t max_lag() const { return max_lag_.load(); }
  bool saw_evicted() const { return saw_evicted_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> max_lag_{0};
  std::atomic<bool> saw_evicted_{false};
  std::thread thread_;
};

const ConsumerStats* stats_of(const ProducerStats& s, pid_t pid) {
  for (const auto& c : s.consumers)
    if (c.pid == pid) return &c;
  return nullptr;
}

ProducerOptions short_lease(const TempDir& dir) {
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 4;
  o.lease_timeout = 500ms;
  o.block_timeout = 10s;  // far beyond the lease timeout: only eviction lets publishing on
  return o;
}

}  // namespace

TEST(StoppedConsumer, StoppedEveryFrameConsumerIsEvictedAndNamed) {
  LogCapture logs;
  TempDir dir;
  ProducerOptions o = short_lease(dir);
  Producer p(o);
  p.set_format(pattern_format(4096));
  constexpr int kFrames = 60;
  PeerProcess stuck(
      {"consume", "--path", o.path, "--mode", "every", "--verbose", "--timeout-ms", "30000"});
  PeerProcess healthy({"consume", "--path", o.path, "--mode", "every", "--frames",
                       std::to_string(kFrames), "--timeout-ms", "30000"});
  ASSERT_TRUE(stuck.wait_for("connected", 10s)) << stuck.transcript();
  ASSERT_TRUE(healthy.wait_for("connected", 10s)) << healthy.transcript();
  ASSERT_TRUE(wait_consumers(p, 2));
  for (int i = 0; i < 2; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
  ASSERT_TRUE(stuck.wait_for("frame 2", 10s)) << stuck.transcript();
  ASSERT_EQ(::kill(stuck.pid(), SIGSTOP), 0);

  StatsWatch watch(p, stuck.pid());
  for (int i = 2; i < kFrames; ++i)
    ASSERT_EQ(publish_next(p), PublishStatus::published) << "frame " << i + 1 << "\n" << logs.all();
  watch.finish();

  auto done = healthy.wait_for("done", 20s);
  ASSERT_TRUE(done) << healthy.transcript();
  EXPECT_EQ(field(*done, "frames"), kFrames) << *done;
  EXPECT_EQ(field(*done, "bad"), 0) << *done;
  EXPECT_EQ(field(*done, "order"), 0) << *done;

  // Stopped at frame 2 (perhaps still holding it), it kept at least every slot but one unread.
  EXPECT_GE(watch.max_lag(), o.slots - 1) << "stats never showed the stopped consumer behind";
  const std::string pid = "pid " + std::to_string(stuck.pid());
  EXPECT_NE(logs.find({"evict", pid}), "") << "no log line names the evicted consumer\n"
                                           << logs.all();
  const ProducerStats after_stats = p.stats();  // the pointer below points into it
  const ConsumerStats* after = stats_of(after_stats, stuck.pid());
  EXPECT_TRUE(after == nullptr || after->evicted) << "the stopped consumer still counts as active";

  // Continued, it learns why it was cut off.
  ASSERT_EQ(::kill(stuck.pid(), SIGCONT), 0);
  auto why = stuck.wait_for("event", 10s);
  ASSERT_TRUE(why) << stuck.transcript();
  EXPECT_NE(why->find("evicted"), std::string::npos) << *why;
}

// A consumer that holds frames and stops reading: evicted, it keeps the slots it holds (it may
// still be reading them) until it exits; publishing goes on in the rest of the ring.
TEST(StoppedConsumer, EvictedHolderKeepsItsSlotsUntilItExits) {
  LogCapture logs;
  TempDir dir;
  ProducerOptions o = short_lease(dir);
  Producer p(o);
  p.set_format(pattern_format(4096));
  constexpr int kFrames = 40;
  PeerProcess holder({"consume", "--path", o.path, "--mode", "every", "--hold", "2"});
  PeerProcess healthy({"consume", "--path", o.path, "--mode", "every", "--frames",
                       std::to_string(kFrames), "--timeout-ms", "30000"});
  ASSERT_TRUE(holder.wait_for("connected", 10s)) << holder.transcript();
  ASSERT_TRUE(healthy.wait_for("connected", 10s)) << healthy.transcript();
  ASSERT_TRUE(wait_consumers(p, 2));
  for (int i = 0; i < 2; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
  ASSERT_TRUE(holder.wait_for("held 2", 10s)) << holder.transcript();

  StatsWatch watch(p, holder.pid());
  for (int i = 2; i < kFrames; ++i)
    ASSERT_EQ(publish_next(p), PublishStatus::published) << "frame " << i + 1 << "\n" << logs.all();
  watch.finish();
  auto done = healthy.wait_for("done", 20s);
  ASSERT_TRUE(done) << healthy.transcript();
  EXPECT_EQ(field(*done, "frames"), kFrames) << *done;
  EXPECT_EQ(field(*done, "bad"), 0) << *done;
  EXPECT_EQ(field(*done, "order"), 0) << *done;
  EXPECT_GE(watch.max_lag(), 1u);

  const ProducerStats stats = p.stats();  // the pointer below points into it
  const ConsumerStats* held = stats_of(stats, holder.pid());
  ASSERT_NE(held, nullptr) << "a consumer that still holds slots must stay listed";
  EXPECT_TRUE(held->evicted);
  EXPECT_EQ(std::bitset<64>(held->leases).count(), 2u);
  EXPECT_NE(logs.find({"evict", "pid " + std::to_string(holder.pid())}), "") << logs.all();

  // Its process exits: the producer learns it from the pidfd and takes the slots back.
  holder.kill_hard();
  ASSERT_TRUE(holder.wait_exit(5s));
  EXPECT_TRUE(poll_until([&] { return stats_of(p.stats(), holder.pid()) == nullptr; }, 5s));
}

// After eviction the producer stops counting a consumer's leases once it holds none. A consumer
// that has not noticed yet must not be handed a frame from then on: nothing keeps that slot from
// being rewritten under it.
TEST(StoppedConsumer, EvictedConsumerIsHandedNoUnprotectedFrame) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 4;
  o.max_leases_per_consumer = 4;  // it may hold the whole ring, so holding on stalls publishing
  o.lease_timeout = 200ms;
  o.block_timeout = 10s;
  Producer p(o);
  p.set_format(pattern_format(4096));
  ConsumerOptions co;
  co.path = o.path;
  co.mode = ConsumeMode::latest;
  co.reconnect = false;
  Consumer c(co);
  ASSERT_TRUE(wait_consumers(p, 1));
  ASSERT_EQ(c.next(5s).type, EventType::format);
  std::vector<Frame> held;
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(publish_next(p), PublishStatus::published);
    Event ev = c.next(5s);
    ASSERT_EQ(ev.type, EventType::frame);
    held.push_back(std::move(ev.frame));
  }
  // The whole ring is held: the fifth frame waits, then the consumer is evicted. Its slots stay
  // out of rotation until it lets go.
  PublishStatus fifth = PublishStatus::timeout;
  std::thread publisher([&] { fifth = publish_next(p); });
  ASSERT_TRUE(poll_until(
      [&] {
        auto s = p.stats();
        return !s.consumers.empty() && s.consumers[0].evicted;
      },
      5s));
  for (auto& f : held) {
    EXPECT_EQ(check_pattern(f.data(), f.size(), f.seq()), f.size());
    f.release();
  }
  publisher.join();
  ASSERT_EQ(fifth, PublishStatus::published);
  // It holds nothing now: the producer forgets it.
  ASSERT_TRUE(poll_until([&] { return p.stats().consumers.empty(); }, 5s));

  Event ev = c.next(1s);
  if (ev.type == EventType::frame) {
    // Handed a frame all the same: it must stay intact while held, whatever the producer does.
    for (int i = 0; i < 8; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
    EXPECT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()), ev.frame.size())
        << "frame " << ev.frame.seq() << " was rewritten while an evicted consumer held it";
  } else {
    EXPECT_EQ(ev.type, EventType::disconnected) << "event " << static_cast<int>(ev.type);
    EXPECT_NE(ev.message.find("evicted"), std::string::npos) << ev.message;
  }
}
