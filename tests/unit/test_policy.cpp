// What a producer does when no slot is free: drop counts the frame and moves on, block waits up to
// block_timeout; neither consumes a seq. Also the producer's own argument checks.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <type_traits>

#include "channel_helpers.hpp"
#include "consumer_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

TEST(Policy, DropCountsEveryDroppedFrameAndKeepsSeqsDense) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 2;
  o.on_full = FullPolicy::drop;
  Producer p(o);
  p.set_format(pattern_format(512));
  Consumer c(consumer_at(o.path));  // every-frame, not reading yet
  ASSERT_TRUE(wait_consumers(p, 1));
  EXPECT_EQ(publish_next(p), PublishStatus::published);
  EXPECT_EQ(publish_next(p), PublishStatus::published);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(publish_next(p), PublishStatus::dropped);
  auto s = p.stats();
  EXPECT_EQ(s.published, 2u);
  EXPECT_EQ(s.dropped, 6u);
  // The consumer sees the producer's count, and gets the frames that were kept, intact.
  for (std::uint64_t seq = 1; seq <= 2; ++seq) {
    Frame f = next_frame(c);
    ASSERT_TRUE(f);
    EXPECT_EQ(f.seq(), seq);
    EXPECT_EQ(check_pattern(f.data(), f.size(), f.seq()), f.size());
  }
  EXPECT_EQ(c.counters().producer_dropped, 6u);
  EXPECT_EQ(c.counters().delivered, 2u);
  // Host memory: ordering never needs the GPU.
  EXPECT_EQ(c.counters().gpu_waits, 0u);
  EXPECT_EQ(c.counters().gpu_releases, 0u);
  // Room again: the next frame gets the next seq, drops used none.
  EXPECT_EQ(publish_next(p), PublishStatus::published);
  Frame f = next_frame(c);
  EXPECT_EQ(f.seq(), 3u);
  EXPECT_EQ(check_pattern(f.data(), f.size(), f.seq()), f.size());
}

TEST(Policy, BlockTimesOutAfterBlockTimeout) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 1;
  o.block_timeout = 100ms;
  Producer p(o);
  p.set_format(pattern_format(512));
  Consumer c(consumer_at(o.path));
  ASSERT_TRUE(wait_consumers(p, 1));
  EXPECT_EQ(publish_next(p), PublishStatus::published);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(publish_next(p), PublishStatus::timeout);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 5s);
  EXPECT_EQ(p.stats().dropped, 1u);
  EXPECT_EQ(p.stats().published, 1u);
}

TEST(Policy, BlockedProducerResumesWhenTheConsumerReads) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 1;
  o.block_timeout = 20s;
  Producer p(o);
  p.set_format(pattern_format(512));
  Consumer c(consumer_at(o.path));
  ASSERT_TRUE(wait_consumers(p, 1));
  EXPECT_EQ(publish_next(p), PublishStatus::published);
  std::thread reader([&] { next_frame(c).release(); });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(publish_next(p), PublishStatus::published);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  reader.join();
}

TEST(Policy, LatestConsumerLeaseOnlyPinsItsSlot) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 3;  // one consumer may hold 2 of them
  o.on_full = FullPolicy::drop;
  Producer p(o);
  p.set_format(pattern_format(512));
  Consumer c(consumer_at(o.path, ConsumeMode::latest));
  ASSERT_TRUE(wait_consumers(p, 1));
  EXPECT_EQ(publish_next(p), PublishStatus::published);
  Frame held = next_frame(c);
  ASSERT_TRUE(held);
  // A latest consumer never holds back frames it has not read: only the leased slot is taken.
  for (int i = 0; i < 10; ++i) EXPECT_EQ(publish_next(p), PublishStatus::published);
  EXPECT_EQ(check_pattern(held.data(), held.size(), held.seq()), held.size());
  Frame newest = next_frame(c);
  EXPECT_EQ(newest.seq(), 11u);
  EXPECT_EQ(check_pattern(newest.data(), newest.size(), newest.seq()), newest.size());
}

TEST(Policy, EndOfStreamIsClearedByTheNextFrame) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  Producer p(o);
  p.set_format(pattern_format(512));
  Consumer c(consumer_at(o.path));
  ASSERT_TRUE(wait_consumers(p, 1));
  EXPECT_EQ(publish_next(p), PublishStatus::published);
  p.end_of_stream();
  EXPECT_EQ(next_frame(c).seq(), 1u);
  EXPECT_EQ(c.next(5s).type, EventType::eos);
  EXPECT_EQ(c.next(20ms).type, EventType::timeout);  // reported once
  EXPECT_EQ(publish_next(p), PublishStatus::published);
  EXPECT_EQ(next_frame(c).seq(), 2u);
}

TEST(ProducerArguments, AreChecked) {
  TempDir dir;
  auto error_code = [&](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return Errc::ok;
  };
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 0;
  EXPECT_EQ(error_code([&] { Producer p(o); }), Errc::invalid_argument);
  o.slots = 33;
  EXPECT_EQ(error_code([&] { Producer p(o); }), Errc::invalid_argument);
  o.slots = 2;
  o.max_consumers = 0;
  EXPECT_EQ(error_code([&] { Producer p(o); }), Errc::invalid_argument);
  o.max_consumers = 4;
  o.memory = MemoryKind::cuda;
  const Errc cuda = error_code([&] { Producer p(o); });
  EXPECT_TRUE(cuda == Errc::no_cuda || cuda == Errc::ok) << errc_name(cuda);
  o.memory = MemoryKind::host;

  Producer p(o);
  std::uint8_t buf[1024] = {};
  EXPECT_EQ(error_code([&] { p.publish(buf, 16); }), Errc::invalid_argument);  // no format yet
  p.set_format(pattern_format(512));
  EXPECT_EQ(error_code([&] { p.publish(buf, 8192); }), Errc::invalid_argument);  // > slot
  FrameInfo meta;
  meta.user_meta = buf;
  meta.user_meta_size = kMaxUserMeta + 1;
  EXPECT_EQ(error_code([&] { p.publish(buf, 16, meta); }), Errc::invalid_argument);
  TensorDesc too_big = make_tensor(DType::uint8, {1 << 20});
  FrameInfo big;
  big.tensor = &too_big;
  EXPECT_EQ(error_code([&] { p.publish(buf, 16, big); }), Errc::invalid_argument);
  EXPECT_EQ(error_code([&] { p.publish(buf, 16, {}, true); }), Errc::invalid_argument);
  Format bad = pattern_format(16);
  bad.max_frame_size = 8;
  EXPECT_EQ(error_code([&] { p.set_format(bad); }), Errc::invalid_argument);
  WriteSlot ws = p.begin_frame();
  ASSERT_TRUE(ws);
  EXPECT_EQ(error_code([&] { p.begin_frame(); }), Errc::invalid_argument);  // one at a time
  p.abort(ws);
  EXPECT_FALSE(ws);
  // The aborted slot published nothing.
  EXPECT_EQ(p.stats().published, 0u);
}

// A Consumer destroyed while a frame it handed out is still held (an application's last sample)
// keeps that frame's lease, but no longer holds the producer back as an every-frame reader.
TEST(Policy, DestroyedEveryFrameConsumerHoldingAFrameDoesNotBlock) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 3;
  o.on_full = FullPolicy::drop;
  Producer p(o);
  p.set_format(pattern_format(64));
  auto c = std::make_unique<Consumer>(consumer_at(o.path));
  ASSERT_EQ(publish_next(p), PublishStatus::published);
  Frame held = next_frame(*c);
  ASSERT_TRUE(held);
  c.reset();
  // Without the retirement, the unread frames 2..3 would fill the ring and 4.. would be dropped.
  for (int i = 0; i < 10; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published) << i;
  EXPECT_EQ(p.stats().dropped, 0u);
  EXPECT_EQ(check_pattern(held.data(), held.size(), held.seq()), held.size());
}

// Core v2, finding 6: slot owners end in destructors and moves, which must never throw.
static_assert(std::is_nothrow_destructible_v<WriteSlot>);
static_assert(std::is_nothrow_move_assignable_v<WriteSlot>);
static_assert(std::is_nothrow_move_assignable_v<Frame>);

// Core v2, finding 7: a format whose slots cannot be allocated leaves the old one working.
TEST(Policy, FailedFormatChangeLeavesTheProducerWorking) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  Producer p(o);
  p.set_format(pattern_format(512));
  Consumer c(consumer_at(o.path, ConsumeMode::every_frame));
  ASSERT_TRUE(wait_consumers(p, 1));
  Format huge = pattern_format(512, "test/huge");
  huge.max_frame_size = std::uint64_t{1} << 62;  // no memfd grows that far
  EXPECT_THROW(p.set_format(huge), Error);
  EXPECT_EQ(p.format().caps, "test/pattern");
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(publish_next(p), PublishStatus::published);
    Frame f = next_frame(c);
    ASSERT_TRUE(f);
    EXPECT_EQ(f.size(), 512u);
    EXPECT_EQ(check_pattern(f.data(), f.size(), f.seq()), f.size());
  }
}

// Core v2, finding 3: giving a lease back (a lost race, a format event first) wakes a producer
// waiting for that slot. With one slot, a latest consumer and format changes between frames, a
// lost wakeup would leave a blocking publish to time out.
TEST(Policy, GivenBackLeasesWakeABlockedProducer) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 1;
  o.block_timeout = 5s;
  o.lease_timeout = 0s;
  Producer p(o);
  p.set_format(pattern_format(256));
  Consumer c(consumer_at(o.path, ConsumeMode::latest));
  ASSERT_TRUE(wait_consumers(p, 1));
  std::atomic<bool> stop{false};
  std::atomic<int> frames{0}, bad{0};
  std::thread reader([&] {
    while (!stop.load()) {
      Event ev = c.next(50ms);
      if (ev.type != EventType::frame) continue;
      if (check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()) != ev.frame.size()) ++bad;
      ++frames;
    }
  });
  for (int i = 0; i < 1500; ++i) {
    if (i % 3 == 0) p.set_format(pattern_format(256, "test/pattern,i=" + std::to_string(i)));
    ASSERT_EQ(publish_next(p), PublishStatus::published) << "publish " << i << " waited in vain";
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // give the reader its turns
  }
  stop = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(frames.load(), 0);
}

// Core v2: a consumer holding as many frames as the producer allows waits in next() until it
// releases one (from any thread), instead of taking the whole ring.
TEST(Policy, ConsumerAtItsLeaseLimitWaitsForItsOwnRelease) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 3;
  o.on_full = FullPolicy::drop;
  Producer p(o);
  p.set_format(pattern_format(256));
  Consumer c(consumer_at(o.path, ConsumeMode::latest));
  ASSERT_TRUE(wait_consumers(p, 1));
  ASSERT_EQ(publish_next(p), PublishStatus::published);
  Frame a = next_frame(c);
  ASSERT_EQ(publish_next(p), PublishStatus::published);
  Frame b = next_frame(c);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(publish_next(p), PublishStatus::published);  // the third slot: never ours
  EXPECT_EQ(c.next(100ms).type, EventType::timeout);     // at the limit of 2
  std::thread releaser([&] {
    std::this_thread::sleep_for(100ms);
    a.release();
  });
  Event ev = c.next(5s);
  releaser.join();
  ASSERT_EQ(ev.type, EventType::frame);
  EXPECT_EQ(ev.frame.seq(), 3u);
  EXPECT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()), ev.frame.size());
  EXPECT_EQ(check_pattern(b.data(), b.size(), b.seq()), b.size());
}

// The socket thread sends formats; one set just before the producer closes must still reach the
// consumers, or the frame published in it could never be read.
TEST(Policy, FormatSetJustBeforeCloseStillArrives) {
  for (int round = 0; round < 20; ++round) {
    TempDir dir;
    ProducerOptions o;
    o.path = dir.file("ch");
    auto p = std::make_unique<Producer>(o);
    ConsumerOptions co = consumer_at(o.path);
    co.reconnect = round % 2 == 0;
    Consumer c(co);
    ASSERT_TRUE(wait_consumers(*p, 1));
    p->set_format(pattern_format(64));
    ASSERT_EQ(publish_next(*p), PublishStatus::published);
    p->end_of_stream();
    p.reset();
    Frame f = next_frame(c);
    ASSERT_TRUE(f) << "round " << round;
    EXPECT_EQ(f.seq(), 1u);
    EXPECT_EQ(check_pattern(f.data(), f.size(), f.seq()), f.size());
    EXPECT_EQ(c.next(2s).type, EventType::eos) << "round " << round;
  }
}

// A consumer at its lease limit when the producer closes still reads the frames published before
// the close once it releases one (GStreamer sources holding buffers downstream do this at EOS).
TEST(Policy, ConsumerAtItsLimitReadsTheLastFramesAfterTheProducerCloses) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 3;
  auto p = std::make_unique<Producer>(o);
  p->set_format(pattern_format(128));
  ConsumerOptions co = consumer_at(o.path);
  co.reconnect = false;
  Consumer c(co);
  ASSERT_TRUE(wait_consumers(*p, 1));
  for (int i = 0; i < 3; ++i) ASSERT_EQ(publish_next(*p), PublishStatus::published);
  Frame a = next_frame(c);
  Frame b = next_frame(c);
  ASSERT_TRUE(a && b);
  p->end_of_stream();
  p.reset();  // frame 3 is published, and we hold 2 of the 2 frames allowed
  EXPECT_EQ(c.next(100ms).type, EventType::timeout);
  a.release();
  Event ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::frame);
  EXPECT_EQ(ev.frame.seq(), 3u);
  EXPECT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()), ev.frame.size());
  EXPECT_EQ(c.next(5s).type, EventType::eos);
}
