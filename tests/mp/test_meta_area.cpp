// The per-slot meta area (docs/metas.md) across processes: every frame's metas arrive with it,
// whatever their size (none, some, the whole area), written by copy or in place; a consumer can
// read the area but never write it; sizes out of range are refused with a message.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <thread>
#include <vector>

#include "cudaipc/error.hpp"

#include "cudaipc/consumer.hpp"
#include "cudaipc/producer.hpp"
#include "forked_child.hpp"
#include "pattern.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

constexpr std::uint32_t kMetaSize = 20000;  // not a page multiple: the stride rounds it
constexpr int kFrames = 60;

// Frame n carries this many bytes of metas: none, a few, the whole area, and sizes between.
std::uint32_t metas_for(std::uint64_t n) {
  switch (n % 4) {
    case 0:
      return 0;
    case 1:
      return static_cast<std::uint32_t>(8 * n);
    case 2:
      return kMetaSize;
    default:
      return static_cast<std::uint32_t>(kMetaSize - 8 * n);
  }
}

ProducerOptions producer_options(const std::string& path, std::uint32_t meta_size) {
  ProducerOptions o;
  o.path = path;
  o.slots = 3;
  o.meta_size = meta_size;
  return o;
}

Format bytes_format() {
  Format f;
  f.caps = "test/metas";
  f.tensor = make_tensor(DType::uint8, {512});
  return f;
}

// A child consumer reading every frame: "ok N" after N frames whose pixels and metas both carry
// their frame's pattern, or the first thing that was wrong.
int consume_and_check(ForkedChild& me, const std::string& path) {
  ConsumerOptions co;
  co.path = path;
  co.reconnect = false;
  Consumer c(co);
  me.say("connected");
  int frames = 0;
  while (frames < kFrames) {
    Event ev = c.next(10s);
    if (ev.type == EventType::format) continue;
    if (ev.type != EventType::frame) {
      me.say("event " + std::to_string(static_cast<int>(ev.type)) + " " + ev.message);
      return 1;
    }
    const std::uint64_t n = ev.frame.seq();
    if (check_pattern(ev.frame.data(), 512, n) != 512) {
      me.say("pixels of frame " + std::to_string(n) + " differ");
      return 1;
    }
    const std::uint32_t want = metas_for(n);
    if (ev.frame.metas_size() != want || (want == 0) != (ev.frame.metas() == nullptr)) {
      me.say("frame " + std::to_string(n) + " has " + std::to_string(ev.frame.metas_size()) +
             " bytes of metas, expected " + std::to_string(want));
      return 1;
    }
    if (want && check_pattern(ev.frame.metas(), want, 1000 + n) != want) {
      me.say("metas of frame " + std::to_string(n) + " differ");
      return 1;
    }
    ++frames;
  }
  me.say("ok " + std::to_string(frames));
  return 0;
}

}  // namespace

TEST(MetaArea, EveryFramesMetasCrossWithItByCopyAndInPlace) {
  TempDir dir;
  const std::string path = dir.file("ch");
  Producer p(producer_options(path, kMetaSize));
  EXPECT_EQ(p.meta_size(), kMetaSize);
  p.set_format(bytes_format());
  ForkedChild child([&](ForkedChild& me) { return consume_and_check(me, path); });
  ASSERT_EQ(child.read_line(10s), "connected");
  for (int i = 0; i < 100 && p.consumer_count() == 0; ++i) std::this_thread::sleep_for(10ms);

  std::vector<std::uint8_t> pixels(512), metas(kMetaSize);
  for (std::uint64_t n = 1; n <= kFrames; ++n) {
    FrameInfo info;
    info.metas_size = metas_for(n);
    if (n % 2) {
      // Copied from the caller's buffer.
      fill_pattern(pixels.data(), pixels.size(), n);
      fill_pattern(metas.data(), info.metas_size, 1000 + n);
      info.metas = metas.data();
      ASSERT_EQ(p.publish(pixels.data(), pixels.size(), info), PublishStatus::published);
    } else {
      // Encoded in place in the borrowed slot's area.
      WriteSlot ws = p.begin_frame();
      ASSERT_TRUE(ws);
      ASSERT_NE(ws.metas(), nullptr);
      ASSERT_EQ(ws.metas_capacity(), kMetaSize);
      fill_pattern(ws.data(), 512, n);
      fill_pattern(ws.metas(), info.metas_size, 1000 + n);
      info.metas = ws.metas();
      p.commit(ws, info);
    }
  }
  EXPECT_EQ(child.read_line(20s), "ok " + std::to_string(kFrames));
  auto st = child.wait_exit(10s);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
}

TEST(MetaArea, ConsumersCannotWriteIt) {
  TempDir dir;
  const std::string path = dir.file("ch");
  Producer p(producer_options(path, 4096));
  p.set_format(bytes_format());
  ForkedChild child([&](ForkedChild& me) {
    ConsumerOptions co;
    co.path = path;
    co.reconnect = false;
    Consumer c(co);
    for (;;) {
      Event ev = c.next(10s);
      if (ev.type == EventType::format) continue;
      if (ev.type != EventType::frame || !ev.frame.metas()) return 1;
      me.say("writing");
      // The area is mapped read-only: this store must fault. Default action, so a sanitizer's
      // handler does not turn the fault into its own report.
      ::signal(SIGSEGV, SIG_DFL);
      *const_cast<volatile std::uint8_t*>(ev.frame.metas()) = 0xff;
      me.say("wrote");
      return 2;
    }
  });
  std::vector<std::uint8_t> pixels(512), metas(64, 7);
  FrameInfo info;
  info.metas = metas.data();
  info.metas_size = 64;
  for (int i = 0; i < 100 && p.consumer_count() == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(p.publish(pixels.data(), pixels.size(), info), PublishStatus::published);
  EXPECT_EQ(child.read_line(10s), "writing");
  auto st = child.wait_exit(10s);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(WIFSIGNALED(*st) && WTERMSIG(*st) == SIGSEGV) << "status " << *st;
}

TEST(MetaArea, NoAreaMeansNoMetasAndARefusalToSendThem) {
  TempDir dir;
  const std::string path = dir.file("ch");
  Producer p(producer_options(path, 0));
  p.set_format(bytes_format());
  ConsumerOptions co;
  co.path = path;
  co.reconnect = false;
  Consumer c(co);
  std::vector<std::uint8_t> pixels(512), metas(8);
  FrameInfo info;
  info.metas = metas.data();
  info.metas_size = 8;
  try {
    p.publish(pixels.data(), pixels.size(), info);
    FAIL() << "metas beyond a zero-sized area were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("meta area of 0 bytes"), std::string::npos) << e.what();
  }
  WriteSlot ws = p.begin_frame();
  EXPECT_EQ(ws.metas(), nullptr);
  fill_pattern(ws.data(), 512, 1);
  p.commit(ws, {});
  Event ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::format);
  ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::frame);
  EXPECT_EQ(ev.frame.metas(), nullptr);
  EXPECT_EQ(ev.frame.metas_size(), 0u);
  EXPECT_EQ(check_pattern(ev.frame.data(), 512, 1), 512u);
}

TEST(MetaArea, SizesOutOfRangeAreRefused) {
  TempDir dir;
  try {
    Producer p(producer_options(dir.file("big"), kMaxMetaSize + 1));
    FAIL() << "a meta area over the limit was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("exceeds the limit"), std::string::npos) << e.what();
  }
  // The largest area is fine: its pages are only backed once written.
  ProducerOptions o = producer_options(dir.file("max"), kMaxMetaSize);
  o.slots = 32;
  Producer p(o);
  p.set_format(bytes_format());
  std::vector<std::uint8_t> pixels(512), metas(kMaxMetaSize + 1);
  FrameInfo info;
  info.metas = metas.data();
  info.metas_size = kMaxMetaSize + 1;
  EXPECT_THROW(p.publish(pixels.data(), pixels.size(), info), Error);
  info.metas_size = kMaxMetaSize;
  EXPECT_EQ(p.publish(pixels.data(), pixels.size(), info), PublishStatus::published);
}
