// SlotHold: a borrowed slot the producer's own process still uses after publishing it (or after
// giving it up unpublished) stays out of the ring until the hold goes: no later frame is written
// into it, its memory survives a format change, and a publish waiting only for it wakes when it
// is released from another thread.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "channel_helpers.hpp"
#include "cudaipc/error.hpp"
#include "pattern.hpp"
#include "poll_until.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kBytes = 4096;

ProducerOptions options(const TempDir& dir, std::uint32_t slots) {
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = slots;
  o.block_timeout = 20s;
  return o;
}

// Borrows a slot, holds it, writes `seq`'s pattern into it and commits it.
WriteSlot publish_held(Producer& p, std::uint64_t seq, SlotHold* hold) {
  WriteSlot ws = p.begin_frame();
  EXPECT_TRUE(ws);
  *hold = p.hold(ws);
  fill_pattern(ws.data(), kBytes, seq);
  return ws;
}

}  // namespace

TEST(SlotHold, AHeldSlotIsNeverWrittenAgainUntilReleased) {
  TempDir dir;
  Producer p(options(dir, 3));
  p.set_format(pattern_format(kBytes));
  SlotHold hold;
  WriteSlot ws = publish_held(p, 1000, &hold);
  const std::uint32_t held = ws.index();
  void* const bytes = ws.data();
  p.commit(ws);
  EXPECT_EQ(__builtin_popcountll(p.stats().held), 1);
  for (int i = 0; i < 12; ++i) {
    WriteSlot next = p.begin_frame();
    ASSERT_TRUE(next);
    EXPECT_NE(next.index(), held) << "frame " << i << " got the held slot";
    fill_pattern(next.data(), kBytes, i);
    p.commit(next);
  }
  EXPECT_EQ(check_pattern(bytes, kBytes, 1000), kBytes);
  hold = SlotHold();
  EXPECT_EQ(p.stats().held, 0u);
  bool reused = false;
  for (int i = 0; i < 3 && !reused; ++i) {
    WriteSlot next = p.begin_frame();
    reused = next.index() == held;
    p.commit(next);
  }
  EXPECT_TRUE(reused) << "the released slot is back in the ring";
}

TEST(SlotHold, AnAbortedHeldSlotStaysOutAndTheRingGoesOn) {
  TempDir dir;
  Producer p(options(dir, 2));
  p.set_format(pattern_format(kBytes));
  SlotHold hold;
  WriteSlot ws = publish_held(p, 7, &hold);
  const std::uint32_t held = ws.index();
  p.abort(ws);  // not published, still in use here
  EXPECT_EQ(p.last_seq(), 0u);
  for (int i = 0; i < 4; ++i) {
    WriteSlot next = p.begin_frame();
    ASSERT_TRUE(next);
    EXPECT_NE(next.index(), held);
    p.commit(next);
  }
}

TEST(SlotHold, HeldMemoryOutlivesAFormatChange) {
  TempDir dir;
  Producer p(options(dir, 2));
  p.set_format(pattern_format(kBytes));
  SlotHold hold;
  WriteSlot ws = publish_held(p, 42, &hold);
  void* const bytes = ws.data();
  p.commit(ws);
  p.set_format(pattern_format(kBytes * 4));  // a new slot set; the old one is retired
  for (int i = 0; i < 4; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
  EXPECT_EQ(check_pattern(bytes, kBytes, 42), kBytes) << "the retired set was freed under a hold";
}

TEST(SlotHold, APublishWaitingOnlyForAHeldSlotWakesWhenItIsReleased) {
  TempDir dir;
  Producer p(options(dir, 1));
  p.set_format(pattern_format(kBytes));
  SlotHold hold;
  WriteSlot ws = publish_held(p, 1, &hold);
  p.commit(ws);
  std::atomic<bool> done{false};
  PublishStatus status = PublishStatus::dropped;
  std::thread publisher([&] {
    status = publish_next(p);
    done = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(done) << "published into the held slot";
  const auto released = std::chrono::steady_clock::now();
  std::thread([&] { hold = SlotHold(); }).join();
  publisher.join();
  EXPECT_EQ(status, PublishStatus::published);
  EXPECT_LT(std::chrono::steady_clock::now() - released, 5s) << "the release did not wake it";
}

TEST(SlotHold, OnlyABorrowedSlotCanBeHeld) {
  TempDir dir;
  Producer p(options(dir, 2));
  p.set_format(pattern_format(kBytes));
  WriteSlot none;
  EXPECT_THROW(p.hold(none), Error);
  WriteSlot ws = p.begin_frame();
  SlotHold first = p.hold(ws);
  EXPECT_THROW(p.hold(ws), Error);
  p.commit(ws);
}
