// Monitors (cudaipc/monitor.hpp, issue #21): a snapshot says what the producer published and what
// each consumer holds, and watching changes nothing: no consumer place is taken, no lease held, and
// the consumers' own view of the channel stays as it was.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <thread>

#include "channel_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "cudaipc/monitor.hpp"
#include "temp_dir.hpp"
#include "unix_socket.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

ProducerOptions options(const TempDir& dir, std::uint32_t max_consumers = 4) {
  ProducerOptions o;
  o.path = dir.file("chan");
  o.slots = 4;
  o.max_consumers = max_consumers;
  o.on_full = FullPolicy::drop;
  o.meta_size = 4096;
  return o;
}

// Reads events until a frame comes (formats and timeouts pass), within 5 s.
Frame next_frame(Consumer& c) {
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < end) {
    Event ev = c.next(200ms);
    if (ev.type == EventType::frame) return std::move(ev.frame);
  }
  return Frame();
}

}  // namespace

TEST(Monitor, SnapshotOfAQuietChannel) {
  TempDir dir;
  Producer p(options(dir));
  ChannelStatus s = read_channel_status(dir.file("chan"));
  EXPECT_EQ(s.producer_pid, ::getpid());
  EXPECT_NE(s.producer_exe.find("unit_monitor"), std::string::npos) << s.producer_exe;
  EXPECT_EQ(s.memory, MemoryKind::host);
  EXPECT_EQ(s.device, -1);
  EXPECT_EQ(s.slot_count, 4u);
  EXPECT_EQ(s.max_consumers, 4u);
  EXPECT_EQ(s.max_leases, 3u);
  EXPECT_EQ(s.meta_size, 4096u);
  EXPECT_EQ(s.generation, 0u);
  EXPECT_EQ(s.slot_size, 0u);
  EXPECT_EQ(s.published, 0u);
  EXPECT_TRUE(s.consumers.empty());
  EXPECT_EQ(s.monitors, 1u);
}

TEST(Monitor, CountsFormatAndConsumers) {
  TempDir dir;
  Producer p(options(dir));
  p.set_format(pattern_format(1000, "test/monitor"));
  ConsumerOptions co;
  co.path = dir.file("chan");
  co.reconnect = false;
  Consumer every(co);
  co.mode = ConsumeMode::latest;
  Consumer latest(co);
  ASSERT_TRUE(wait_consumers(p, 2));
  for (int i = 0; i < 2; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
  Frame held = next_frame(every);  // frame 1, held: one lease, 1 frame behind
  ASSERT_TRUE(held);
  ASSERT_EQ(held.seq(), 1u);
  Frame newest = next_frame(latest);
  ASSERT_TRUE(newest);
  newest.release();
  for (int i = 0; i < 5; ++i) publish_next(p);  // the drop policy: some are dropped

  const ProducerStats truth = p.stats();
  ChannelStatus s = read_channel_status(dir.file("chan"));
  EXPECT_EQ(s.generation, 1u);
  EXPECT_EQ(s.format.caps, "test/monitor");
  EXPECT_EQ(s.format.tensor, pattern_format(1000).tensor);
  EXPECT_GE(s.slot_size, 1000u);
  EXPECT_EQ(s.published, truth.published);
  EXPECT_EQ(s.dropped, truth.dropped);
  EXPECT_GT(s.dropped, 0u) << "an every-frame consumer holding frame 1 leaves 3 slots";
  ASSERT_EQ(s.consumers.size(), 2u);
  for (const auto& c : s.consumers) {
    EXPECT_EQ(c.pid, ::getpid());
    if (c.mode == ConsumeMode::every_frame) {
      EXPECT_EQ(c.cursor, 1u);
      EXPECT_EQ(c.lag, s.published - 1);
      EXPECT_EQ(c.leases, 1u);
      EXPECT_EQ(c.delivered, 1u);
    } else {
      EXPECT_EQ(c.leases, 0u);
      EXPECT_EQ(c.delivered, 1u);
    }
    EXPECT_FALSE(c.evicted);
  }
}

// A channel with one consumer place: a monitor leaves it to the consumer, and the consumer's frames
// and counters are what they would be unwatched.
TEST(Monitor, TakesNoPlaceAndNoLease) {
  TempDir dir;
  Producer p(options(dir, 1));
  p.set_format(pattern_format(64));
  Monitor watcher(dir.file("chan"));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(watcher.status().consumers.size(), 0u);
  ConsumerOptions co;
  co.path = dir.file("chan");
  co.reconnect = false;
  Consumer c(co);
  ASSERT_TRUE(wait_consumers(p, 1));
  ChannelStatus s = watcher.status();
  EXPECT_EQ(s.monitors, 1u);
  ASSERT_EQ(s.consumers.size(), 1u);
  EXPECT_EQ(p.consumer_count(), 1u);
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(publish_next(p), PublishStatus::published);
    Frame f = next_frame(c);
    ASSERT_TRUE(f);
    EXPECT_EQ(f.seq(), static_cast<std::uint64_t>(i + 1));
    EXPECT_EQ(watcher.status().published, static_cast<std::uint64_t>(i + 1));
  }
  EXPECT_EQ(p.stats().dropped, 0u);
  EXPECT_EQ(watcher.status().consumers.at(0).delivered, 10u);
}

TEST(Monitor, MonitorsAreCapped) {
  TempDir dir;
  Producer p(options(dir));
  std::vector<Monitor> ms;
  for (int i = 0; i < 8; ++i) {
    ms.emplace_back(dir.file("chan"));
    EXPECT_EQ(ms.back().status().monitors, static_cast<std::uint32_t>(i + 1));
  }
  Monitor extra(dir.file("chan"));
  try {
    extra.status();
    ADD_FAILURE() << "a ninth monitor was served";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::busy) << e.what();
    EXPECT_NE(std::string(e.what()).find("8 monitors"), std::string::npos) << e.what();
  }
  ms.pop_back();
  ASSERT_TRUE(poll_until(
      [&] {
        try {
          return Monitor(dir.file("chan")).status().monitors == 8u;
        } catch (const Error&) {
          return false;
        }
      },
      5s));
}

TEST(Monitor, StaleAndMissingSockets) {
  TempDir dir;
  { Producer p(options(dir)); }
  try {
    read_channel_status(dir.file("chan"));
    ADD_FAILURE() << "a missing socket gave a status";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::disconnected) << e.what();
  }
  // A socket file nobody listens on: what a killed producer leaves.
  { UniqueFd l = listen_unix(dir.file("stale"), 0600, std::nullopt); }
  try {
    read_channel_status(dir.file("stale"));
    ADD_FAILURE() << "a stale socket gave a status";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::disconnected) << e.what();
  }
}

TEST(Monitor, ProducerGoneBetweenRequests) {
  TempDir dir;
  auto p = std::make_unique<Producer>(options(dir));
  Monitor m(dir.file("chan"));
  EXPECT_EQ(m.status().published, 0u);
  p.reset();
  try {
    m.status();
    ADD_FAILURE() << "a status from a producer that is gone";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::disconnected) << e.what();
    EXPECT_NE(std::string(e.what()).find("went away"), std::string::npos) << e.what();
  }
}

// A consumer that outlives its producer and joins the next one on the path counts that producer's
// frames only: its delivered and skipped, in its own counters, the producer's stats and a
// monitor's snapshot, restart with the new producer (issue #34: 193 delivered against 104
// published).
TEST(Monitor, ConsumerCountsRestartWithANewProducer) {
  TempDir dir;
  ConsumerOptions co;
  co.path = dir.file("chan");
  co.reconnect = true;
  co.reconnect_interval = 10ms;
  Consumer c(co);
  constexpr std::uint64_t kFirst = 7, kSecond = 3;
  auto read_all = [&](Producer& p, std::uint64_t n) {
    for (std::uint64_t seq = 1; seq <= n; ++seq) {
      ASSERT_EQ(publish_next(p), PublishStatus::published);
      Frame f = next_frame(c);
      ASSERT_TRUE(f) << "frame " << seq;
      EXPECT_EQ(f.seq(), seq);
      EXPECT_EQ(check_pattern(f.data(), f.size(), f.seq()), f.size());
    }
  };
  {
    Producer first(options(dir));
    first.set_format(pattern_format(256));
    ASSERT_TRUE(poll_until(
        [&] {
          c.next(10ms);
          return c.connected();
        },
        5s));
    read_all(first, kFirst);
    EXPECT_EQ(c.counters().delivered, kFirst);
    EXPECT_EQ(first.stats().consumers.at(0).delivered, kFirst);
  }
  ASSERT_TRUE(poll_until([&] { return c.next(10ms).type == EventType::disconnected; }, 5s));
  Producer second(options(dir));
  second.set_format(pattern_format(256));
  ASSERT_TRUE(poll_until(
      [&] {
        c.next(10ms);
        return c.connected() && second.consumer_count() == 1;
      },
      5s));
  read_all(second, kSecond);
  const ConsumerCounters counted = c.counters();
  EXPECT_EQ(counted.delivered, kSecond) << "frames of the first producer counted too";
  EXPECT_EQ(counted.skipped, 0u);
  EXPECT_EQ(counted.producer_published, kSecond);
  ASSERT_EQ(second.stats().consumers.size(), 1u);
  EXPECT_EQ(second.stats().consumers[0].delivered, kSecond);
  const ChannelStatus s = read_channel_status(dir.file("chan"));
  ASSERT_EQ(s.consumers.size(), 1u);
  EXPECT_EQ(s.consumers[0].delivered, kSecond);
  EXPECT_EQ(s.published, kSecond);
}
