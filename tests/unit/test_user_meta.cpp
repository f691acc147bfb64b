// A frame's user metadata crosses whole at every size, and stays whole as the frame is moved: the
// core copies a description only up to the metadata's size (consumer.cpp's copy_used), so a short
// or empty one after a long one must not read as the long one's bytes.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "channel_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "pattern.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

// The frame's pixels and its metadata both carry its seq.
void expect_whole(const Frame& f, std::uint32_t meta_size) {
  ASSERT_TRUE(f);
  EXPECT_EQ(check_pattern(f.data(), f.size(), f.seq()), f.size()) << "frame " << f.seq();
  EXPECT_EQ(f.desc().user_meta_size, meta_size) << "frame " << f.seq();
  EXPECT_EQ(check_pattern(f.desc().user_meta, meta_size, f.seq() + 1000), meta_size)
      << "frame " << f.seq();
}

// Slots the one consumer leases now, as the producer counts them.
int leases(const Producer& p) {
  const ProducerStats s = p.stats();
  return s.consumers.size() == 1 ? __builtin_popcountll(s.consumers[0].leases) : -1;
}

}  // namespace

TEST(UserMeta, EverySizeCrossesWholeAndMovesWhole) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 8;
  Producer p(o);
  p.set_format(pattern_format(4096));
  ConsumerOptions co;
  co.path = o.path;
  co.mode = ConsumeMode::every_frame;
  Consumer c(co);

  const std::vector<std::uint32_t> sizes = {kMaxUserMeta, 0, 1, 255, 64, 0, 7, kMaxUserMeta, 0};
  ASSERT_EQ(c.next(5s).type, EventType::format);
  Frame kept;  // assigned over while it holds an earlier frame
  std::uint32_t kept_size = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::uint64_t seq = i + 1;
    std::uint8_t pixels[4096], meta[kMaxUserMeta];
    fill_pattern(pixels, sizeof pixels, seq);
    fill_pattern(meta, sizes[i], seq + 1000);
    FrameInfo info;
    info.user_meta = meta;
    info.user_meta_size = sizes[i];
    ASSERT_EQ(p.publish(pixels, sizeof pixels, info), PublishStatus::published);

    Event ev = c.next(5s);
    ASSERT_EQ(ev.type, EventType::frame) << "frame " << seq;
    ASSERT_EQ(ev.frame.seq(), seq);
    ASSERT_NO_FATAL_FAILURE(expect_whole(ev.frame, sizes[i]));
    Frame moved(std::move(ev.frame));
    EXPECT_FALSE(ev.frame);
    ASSERT_NO_FATAL_FAILURE(expect_whole(moved, sizes[i]));
    if (kept) {
      ASSERT_NO_FATAL_FAILURE(expect_whole(kept, kept_size));
    }
    kept = std::move(moved);  // releases the frame it held
    kept_size = sizes[i];
    EXPECT_FALSE(moved);
    ASSERT_NO_FATAL_FAILURE(expect_whole(kept, kept_size));
    EXPECT_EQ(leases(p), 1) << "frame " << seq << ": the frame assigned over was released";
  }
  kept.release();
  EXPECT_EQ(leases(p), 0);
}
