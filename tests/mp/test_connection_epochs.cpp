// Per-connection epochs: each connection has its own page, so a frame released late, from a
// connection its Consumer has since left (a new producer run on the path, or an eviction), ends
// only its own lease and never one the consumer holds on its new connection.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "channel_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "poll_until.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

// Reads events until a format whose caps hold `caps`; the disconnect before it is expected.
void wait_for_format(Consumer& c, const std::string& caps) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    Event ev = c.next(100ms);
    if (ev.type == EventType::format && ev.format.caps.find(caps) != std::string::npos) return;
    ASSERT_TRUE(ev.type == EventType::disconnected || ev.type == EventType::timeout ||
                ev.type == EventType::format)
        << "event " << static_cast<int>(ev.type) << " " << ev.message;
    if (ev.type == EventType::disconnected) {
      EXPECT_FALSE(ev.message.empty());
    }
  }
  FAIL() << "no format with '" << caps << "' came";
}

// A frame whose pattern is seq + 1000, so it can be told from the other run's frame of the same
// seq in the same slot.
void publish_tagged(Producer& p, std::uint32_t avoid_slot) {
  PublishStatus st;
  WriteSlot ws = p.begin_frame(&st);
  ASSERT_TRUE(ws) << static_cast<int>(st);
  EXPECT_NE(ws.index(), avoid_slot) << "the producer rewrote a slot the consumer holds";
  fill_pattern(ws.data(), p.format().tensor.size, p.stats().published + 1 + 1000);
  p.commit(ws);
}

const ConsumerStats* only_active(const ProducerStats& s) {
  const ConsumerStats* found = nullptr;
  for (const auto& c : s.consumers) {
    if (c.evicted) continue;
    if (found) return nullptr;
    found = &c;
  }
  return found;
}

}  // namespace

// The frame is from the first producer run; the consumer meanwhile joined a second one and leases
// the same slot index there. Releasing the old frame must leave the new lease alone.
TEST(ConnectionEpochs, LateReleaseAfterANewProducerRun) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 4;
  o.block_timeout = 2s;
  auto run1 = std::make_unique<Producer>(o);
  run1->set_format(pattern_format(4096, "test/pattern,run=1"));
  ConsumerOptions co;
  co.path = o.path;
  co.mode = ConsumeMode::latest;
  co.reconnect = true;
  co.reconnect_interval = 10ms;
  Consumer c(co);
  ASSERT_TRUE(wait_consumers(*run1, 1));
  // Five frames round the ring once and land in slot 0 again.
  for (int i = 0; i < 5; ++i) ASSERT_EQ(publish_next(*run1), PublishStatus::published);
  ASSERT_EQ(c.next(5s).type, EventType::format);
  Event ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::frame);
  Frame old_frame = std::move(ev.frame);
  ASSERT_EQ(old_frame.seq(), 5u);
  run1.reset();

  Producer run2(o);
  run2.set_format(pattern_format(4096, "test/pattern,run=2"));
  ASSERT_NO_FATAL_FAILURE(wait_for_format(c, "run=2"));
  ASSERT_TRUE(wait_consumers(run2, 1));
  ASSERT_NO_FATAL_FAILURE(publish_tagged(run2, ~0u));
  ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::frame) << ev.message;
  Frame new_frame = std::move(ev.frame);
  ASSERT_EQ(new_frame.slot(), old_frame.slot()) << "the test needs both leases on one slot index";
  EXPECT_EQ(check_pattern(new_frame.data(), new_frame.size(), new_frame.seq() + 1000),
            new_frame.size());
  EXPECT_EQ(check_pattern(old_frame.data(), old_frame.size(), old_frame.seq()), old_frame.size());

  old_frame.release();
  const ProducerStats stats = run2.stats();  // the pointer below points into it
  const ConsumerStats* me = only_active(stats);
  ASSERT_NE(me, nullptr);
  EXPECT_EQ(me->leases, 1ull << new_frame.slot()) << "the old frame's release ended the new lease";
  // The new run keeps rotating around the held slot, and the frame in it stays intact.
  for (int i = 0; i < 8; ++i) ASSERT_NO_FATAL_FAILURE(publish_tagged(run2, new_frame.slot()));
  EXPECT_EQ(check_pattern(new_frame.data(), new_frame.size(), new_frame.seq() + 1000),
            new_frame.size());
}

// The frame is from a connection the producer evicted (it held the frame past lease_timeout);
// the consumer has rejoined and holds a frame on its new connection. The old frame's slot stays
// out of rotation until released; releasing it ends the old record and nothing else.
TEST(ConnectionEpochs, LateReleaseAfterAnEviction) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 4;
  o.lease_timeout = 200ms;
  o.block_timeout = 5s;
  Producer p(o);
  p.set_format(pattern_format(4096));
  ConsumerOptions co;
  co.path = o.path;
  co.mode = ConsumeMode::every_frame;
  co.reconnect = true;
  co.reconnect_interval = 10ms;
  Consumer c(co);
  ASSERT_TRUE(wait_consumers(p, 1));
  ASSERT_EQ(publish_next(p), PublishStatus::published);
  ASSERT_EQ(c.next(5s).type, EventType::format);
  Event ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::frame);
  Frame old_frame = std::move(ev.frame);

  // Frames 2-4 fill the other slots unread; frame 5 waits for lease_timeout, then the consumer
  // is evicted and its unread frames no longer hold publishing back.
  for (int i = 0; i < 4; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published) << i;
  auto s = p.stats();
  ASSERT_EQ(s.consumers.size(), 1u);
  EXPECT_TRUE(s.consumers[0].evicted);
  EXPECT_EQ(s.consumers[0].leases, 1ull << old_frame.slot());

  ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::disconnected) << "event " << static_cast<int>(ev.type);
  EXPECT_NE(ev.message.find("evicted"), std::string::npos) << ev.message;
  ASSERT_NO_FATAL_FAILURE(wait_for_format(c, "test/pattern"));
  ASSERT_EQ(publish_next(p), PublishStatus::published);
  ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::frame) << ev.message;
  Frame new_frame = std::move(ev.frame);
  EXPECT_NE(new_frame.slot(), old_frame.slot()) << "a quarantined slot was published into";
  EXPECT_EQ(check_pattern(new_frame.data(), new_frame.size(), new_frame.seq()), new_frame.size());
  EXPECT_EQ(check_pattern(old_frame.data(), old_frame.size(), old_frame.seq()), old_frame.size());

  old_frame.release();
  // The old record goes once its slot is back; the new connection's lease is untouched.
  ASSERT_TRUE(poll_until([&] { return p.stats().consumers.size() == 1; }, 5s));
  const ProducerStats stats = p.stats();  // the pointer below points into it
  const ConsumerStats* me = only_active(stats);
  ASSERT_NE(me, nullptr);
  EXPECT_EQ(me->leases, 1ull << new_frame.slot());
  // Publishing and reading go on around the held frame, which stays intact.
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(publish_tagged(p, new_frame.slot()));
    for (int i = 0; i < 2; ++i) {
      ev = c.next(5s);
      ASSERT_EQ(ev.type, EventType::frame) << ev.message;
      EXPECT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq() + 1000),
                ev.frame.size());
    }
  }
  EXPECT_EQ(check_pattern(new_frame.data(), new_frame.size(), new_frame.seq()), new_frame.size());
}
