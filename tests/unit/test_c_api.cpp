// The C API: a producer/consumer round trip through cudaipc.h only, and its error reporting
// (codes that match Errc, and a per-thread message naming the cause).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "c_channel.hpp"
#include "cudaipc/cudaipc.h"
#include "cudaipc/metas.hpp"
#include "pattern.hpp"
#include "temp_dir.hpp"

using cudaipc::testing::Channel;
using cudaipc::testing::check_pattern;
using cudaipc::testing::fill_pattern;
using cudaipc::testing::TempDir;
using cudaipc::testing::u32_tensor;

namespace {

constexpr std::uint64_t kSecond = 1'000'000'000;

cudaipc_tensor bytes_tensor(std::uint64_t n) {
  cudaipc_tensor t{};
  t.dtype = 5;  // uint8
  t.rank = 1;
  t.shape[0] = static_cast<std::int64_t>(n);
  t.strides[0] = 1;
  t.size = n;
  return t;
}

bool mentions(const char* text) {
  return std::strstr(cudaipc_last_error(), text) != nullptr;
}

// Allocations through operator new while counting is on, in this thread (the library's too: the
// replacement below is the process's).
thread_local bool g_counting = false;
thread_local std::uint64_t g_allocations = 0;

}  // namespace

// GCC sees free() of what it takes for a new-expression's pointer; these are malloc's own.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  if (g_counting) ++g_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

TEST(CApi, RoundTrip) {
  TempDir dir;
  const std::string path = dir.file("ch");
  cudaipc_producer_options po;
  cudaipc_producer_options_init(&po);
  EXPECT_EQ(po.slots, 4u);
  EXPECT_EQ(po.memory, CUDAIPC_MEMORY_HOST);
  po.path = path.c_str();
  cudaipc_producer* p = nullptr;
  ASSERT_EQ(cudaipc_producer_new(&po, &p), CUDAIPC_OK) << cudaipc_last_error();
  EXPECT_STREQ(cudaipc_last_error(), "");
  cudaipc_tensor t = bytes_tensor(1000);
  ASSERT_EQ(cudaipc_producer_set_format(p, "test/c", &t, 0), CUDAIPC_OK) << cudaipc_last_error();

  cudaipc_consumer_options co;
  cudaipc_consumer_options_init(&co);
  EXPECT_EQ(co.mode, CUDAIPC_EVERY_FRAME);
  co.path = path.c_str();
  co.reconnect = 0;
  cudaipc_consumer* c = nullptr;
  ASSERT_EQ(cudaipc_consumer_new(&co, &c), CUDAIPC_OK) << cudaipc_last_error();

  // Copying publish with times, flags and user metadata.
  std::vector<std::uint8_t> buf(1000);
  fill_pattern(buf.data(), buf.size(), 1);
  const char meta[] = "hello";
  // Metas are opaque bytes to the core: a pattern with the frame's index stands in for records.
  std::vector<std::uint8_t> metas1(3000);
  fill_pattern(metas1.data(), metas1.size(), 101);
  EXPECT_EQ(po.meta_size, 65536u);
  EXPECT_EQ(cudaipc_producer_meta_size(p), 65536u);
  cudaipc_frame_info info{100,
                          90,
                          33,
                          2,
                          nullptr,
                          meta,
                          sizeof meta,
                          metas1.data(),
                          static_cast<uint32_t>(metas1.size())};
  cudaipc_publish result = CUDAIPC_DROPPED;
  ASSERT_EQ(cudaipc_producer_publish(p, buf.data(), buf.size(), &info, 0, &result), CUDAIPC_OK)
      << cudaipc_last_error();
  EXPECT_EQ(result, CUDAIPC_PUBLISHED);

  // Zero-copy publish.
  uintptr_t addr = 0;
  uint64_t capacity = 0;
  ASSERT_EQ(cudaipc_producer_begin(p, &addr, &capacity, &result), CUDAIPC_OK);
  ASSERT_NE(addr, 0u);
  EXPECT_GE(capacity, 1000u);
  fill_pattern(reinterpret_cast<void*>(addr), 1000, 2);
  // Metas encoded in place in the borrowed slot's area: committed without a copy.
  uint32_t meta_capacity = 0;
  uint8_t* area = cudaipc_producer_slot_metas(p, &meta_capacity);
  ASSERT_NE(area, nullptr);
  EXPECT_EQ(meta_capacity, 65536u);
  fill_pattern(area, meta_capacity, 102);
  cudaipc_frame_info in_place{};
  in_place.pts = in_place.dts = in_place.duration = CUDAIPC_NO_TIME;
  in_place.metas = area;
  in_place.metas_size = meta_capacity;
  ASSERT_EQ(cudaipc_producer_commit(p, &in_place), CUDAIPC_OK) << cudaipc_last_error();
  EXPECT_EQ(cudaipc_producer_slot_metas(p, &meta_capacity), nullptr);
  EXPECT_EQ(meta_capacity, 0u);
  ASSERT_EQ(cudaipc_producer_end_of_stream(p), CUDAIPC_OK);

  cudaipc_event ev;
  ASSERT_EQ(cudaipc_consumer_next(c, 5 * kSecond, &ev), CUDAIPC_OK);
  ASSERT_EQ(ev.type, CUDAIPC_EVENT_FORMAT);
  EXPECT_STREQ(ev.caps, "test/c");
  EXPECT_EQ(ev.tensor.size, 1000u);
  EXPECT_EQ(ev.tensor.dtype, 5u);
  EXPECT_EQ(ev.generation, 1u);

  for (uint64_t seq = 1; seq <= 2; ++seq) {
    ASSERT_EQ(cudaipc_consumer_next(c, 5 * kSecond, &ev), CUDAIPC_OK);
    ASSERT_EQ(ev.type, CUDAIPC_EVENT_FRAME);
    cudaipc_frame* f = ev.frame;
    EXPECT_EQ(cudaipc_frame_seq(f), seq);
    ASSERT_EQ(cudaipc_frame_size(f), 1000u);
    EXPECT_EQ(check_pattern(reinterpret_cast<const void*>(cudaipc_frame_data(f)), 1000, seq),
              1000u);
    EXPECT_EQ(cudaipc_frame_tensor(f)->shape[0], 1000);
    uint64_t pts, dts, dur;
    uint32_t flags, meta_size = 0;
    cudaipc_frame_times(f, &pts, &dts, &dur, &flags);
    const void* m = cudaipc_frame_user_meta(f, &meta_size);
    uint32_t metas_size = 0;
    const uint8_t* metas = cudaipc_frame_metas(f, &metas_size);
    ASSERT_NE(metas, nullptr);
    ASSERT_EQ(metas_size, seq == 1 ? 3000u : 65536u);
    EXPECT_EQ(check_pattern(metas, metas_size, 100 + seq), metas_size);
    if (seq == 1) {
      EXPECT_EQ(pts, 100u);
      EXPECT_EQ(dts, 90u);
      EXPECT_EQ(dur, 33u);
      EXPECT_EQ(flags, 2u);
      ASSERT_EQ(meta_size, sizeof meta);
      EXPECT_STREQ(static_cast<const char*>(m), "hello");
    } else {
      EXPECT_EQ(pts, CUDAIPC_NO_TIME);
      EXPECT_EQ(meta_size, 0u);
    }
    cudaipc_frame_release(f);
  }
  ASSERT_EQ(cudaipc_consumer_next(c, 5 * kSecond, &ev), CUDAIPC_OK);
  EXPECT_EQ(ev.type, CUDAIPC_EVENT_EOS);
  ASSERT_EQ(cudaipc_consumer_next(c, 1000000, &ev), CUDAIPC_OK);
  EXPECT_EQ(ev.type, CUDAIPC_EVENT_TIMEOUT);

  uint64_t published = 0, dropped = 9;
  uint32_t consumers = 0;
  ASSERT_EQ(cudaipc_producer_counters(p, &published, &dropped, &consumers), CUDAIPC_OK);
  EXPECT_EQ(published, 2u);
  EXPECT_EQ(dropped, 0u);
  EXPECT_EQ(consumers, 1u);
  EXPECT_EQ(cudaipc_consumer_cuda_stream(c), nullptr);

  cudaipc_consumer_interrupt(c);
  ASSERT_EQ(cudaipc_consumer_next(c, 30 * kSecond, &ev), CUDAIPC_OK);
  EXPECT_EQ(ev.type, CUDAIPC_EVENT_INTERRUPTED);

  cudaipc_consumer_free(c);
  cudaipc_producer_free(p);
}

TEST(CApi, ErrorsCarryCodeAndMessage) {
  TempDir dir;
  const std::string path = dir.file("ch");
  cudaipc_producer* p = nullptr;
  EXPECT_EQ(cudaipc_producer_new(nullptr, &p), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("options is NULL")) << cudaipc_last_error();

  cudaipc_producer_options po;
  cudaipc_producer_options_init(&po);
  po.path = path.c_str();
  po.memory = static_cast<cudaipc_memory>(7);
  EXPECT_EQ(cudaipc_producer_new(&po, &p), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("memory kind")) << cudaipc_last_error();
  po.memory = CUDAIPC_MEMORY_HOST;
  po.slots = 99;
  EXPECT_EQ(cudaipc_producer_new(&po, &p), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("slot count 99")) << cudaipc_last_error();
  po.slots = 0;  // the default
  ASSERT_EQ(cudaipc_producer_new(&po, &p), CUDAIPC_OK) << cudaipc_last_error();

  cudaipc_producer* second = nullptr;
  EXPECT_EQ(cudaipc_producer_new(&po, &second), CUDAIPC_ERR_BUSY);
  EXPECT_TRUE(mentions("already running")) << cudaipc_last_error();

  std::uint8_t data[16] = {};
  EXPECT_EQ(cudaipc_producer_publish(p, data, sizeof data, nullptr, 0, nullptr),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("set_format")) << cudaipc_last_error();
  cudaipc_tensor bad = bytes_tensor(16);
  bad.dtype = 200;
  EXPECT_EQ(cudaipc_producer_set_format(p, "x", &bad, 0), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("unknown dtype 200")) << cudaipc_last_error();
  EXPECT_EQ(cudaipc_producer_set_format(p, "x", nullptr, 0), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("tensor is NULL")) << cudaipc_last_error();
  EXPECT_EQ(cudaipc_producer_commit(p, nullptr), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("without a borrowed slot")) << cudaipc_last_error();
  EXPECT_EQ(cudaipc_producer_end_of_stream(nullptr), CUDAIPC_ERR_INVALID_ARGUMENT);

  cudaipc_consumer_options co;
  cudaipc_consumer_options_init(&co);
  const std::string nowhere = dir.file("nowhere");
  co.path = nowhere.c_str();
  co.reconnect = 0;
  cudaipc_consumer* c = nullptr;
  EXPECT_EQ(cudaipc_consumer_new(&co, &c), CUDAIPC_ERR_DISCONNECTED);
  EXPECT_TRUE(mentions("no producer")) << cudaipc_last_error();
  EXPECT_EQ(c, nullptr);

  // The message is per thread: another thread's failure does not overwrite ours.
  std::thread([&] {
    cudaipc_producer* q = nullptr;
    EXPECT_EQ(cudaipc_producer_new(nullptr, &q), CUDAIPC_ERR_INVALID_ARGUMENT);
  }).join();
  EXPECT_TRUE(mentions("no producer")) << cudaipc_last_error();

  // Success clears it, and the code with it.
  EXPECT_EQ(cudaipc_last_error_code(), CUDAIPC_ERR_DISCONNECTED);
  cudaipc_tensor good = bytes_tensor(16);
  EXPECT_EQ(cudaipc_producer_set_format(p, "x", &good, 0), CUDAIPC_OK);
  EXPECT_STREQ(cudaipc_last_error(), "");
  EXPECT_EQ(cudaipc_last_error_code(), CUDAIPC_OK);
  // A thread that never failed has nothing to clear after others' failures.
  std::thread([&] {
    EXPECT_EQ(cudaipc_producer_set_format(p, "x", &good, 0), CUDAIPC_OK);
    EXPECT_EQ(cudaipc_last_error_code(), CUDAIPC_OK);
    EXPECT_STREQ(cudaipc_last_error(), "");
  }).join();
  // NULL handles are harmless where the API says so.
  EXPECT_EQ(cudaipc_frame_seq(nullptr), 0u);
  cudaipc_frame_release(nullptr);
  cudaipc_consumer_free(nullptr);
  cudaipc_producer_free(p);
}

TEST(CApi, DropPolicyAndCountersThroughC) {
  TempDir dir;
  const std::string path = dir.file("ch");
  cudaipc_producer_options po;
  cudaipc_producer_options_init(&po);
  po.path = path.c_str();
  po.slots = 1;
  po.on_full = CUDAIPC_DROP;
  cudaipc_producer* p = nullptr;
  ASSERT_EQ(cudaipc_producer_new(&po, &p), CUDAIPC_OK) << cudaipc_last_error();
  cudaipc_tensor t = bytes_tensor(64);
  ASSERT_EQ(cudaipc_producer_set_format(p, "x", &t, 0), CUDAIPC_OK);
  cudaipc_consumer_options co;
  cudaipc_consumer_options_init(&co);
  co.path = path.c_str();
  cudaipc_consumer* c = nullptr;
  ASSERT_EQ(cudaipc_consumer_new(&co, &c), CUDAIPC_OK) << cudaipc_last_error();
  std::uint8_t data[64] = {};
  cudaipc_publish r;
  ASSERT_EQ(cudaipc_producer_publish(p, data, 64, nullptr, 0, &r), CUDAIPC_OK);
  EXPECT_EQ(r, CUDAIPC_PUBLISHED);
  ASSERT_EQ(cudaipc_producer_publish(p, data, 64, nullptr, 0, &r), CUDAIPC_OK);
  EXPECT_EQ(r, CUDAIPC_DROPPED);
  uintptr_t addr = 1;
  ASSERT_EQ(cudaipc_producer_begin(p, &addr, nullptr, &r), CUDAIPC_OK);
  EXPECT_EQ(addr, 0u);
  EXPECT_EQ(r, CUDAIPC_DROPPED);
  uint64_t published = 0, dropped = 0;
  ASSERT_EQ(cudaipc_producer_counters(p, &published, &dropped, nullptr), CUDAIPC_OK);
  EXPECT_EQ(published, 1u);
  EXPECT_EQ(dropped, 2u);
  cudaipc_consumer_free(c);
  cudaipc_producer_free(p);
}

// Finding 9 of core v2: UINT64_MAX means "wait for ever", not a negative (expired) duration.
TEST(CApi, LargestTimeoutWaitsForTheFrame) {
  TempDir dir;
  const std::string path = dir.file("ch");
  cudaipc_producer_options po;
  cudaipc_producer_options_init(&po);
  po.path = path.c_str();
  cudaipc_producer* p = nullptr;
  ASSERT_EQ(cudaipc_producer_new(&po, &p), CUDAIPC_OK) << cudaipc_last_error();
  cudaipc_tensor t = bytes_tensor(64);
  ASSERT_EQ(cudaipc_producer_set_format(p, "test/c", &t, 0), CUDAIPC_OK);
  cudaipc_consumer_options co;
  cudaipc_consumer_options_init(&co);
  co.path = path.c_str();
  co.reconnect = 0;
  cudaipc_consumer* c = nullptr;
  ASSERT_EQ(cudaipc_consumer_new(&co, &c), CUDAIPC_OK) << cudaipc_last_error();
  cudaipc_event ev;
  ASSERT_EQ(cudaipc_consumer_next(c, UINT64_MAX, &ev), CUDAIPC_OK);
  ASSERT_EQ(ev.type, CUDAIPC_EVENT_FORMAT);
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::vector<std::uint8_t> buf(64);
    fill_pattern(buf.data(), buf.size(), 1);
    cudaipc_producer_publish(p, buf.data(), buf.size(), nullptr, 0, nullptr);
  });
  ASSERT_EQ(cudaipc_consumer_next(c, UINT64_MAX, &ev), CUDAIPC_OK) << cudaipc_last_error();
  later.join();
  ASSERT_EQ(ev.type, CUDAIPC_EVENT_FRAME);
  EXPECT_EQ(check_pattern(reinterpret_cast<const void*>(cudaipc_frame_data(ev.frame)), 64, 1), 64u);
  cudaipc_frame_release(ev.frame);
  cudaipc_consumer_free(c);
  cudaipc_producer_free(p);
}

// cudaipc_metas_detections_area: one analytics record of detections, read back with the codec
// field by field; a label without a name and too small an area are refused with the cause.
TEST(CApi, DetectionsAreaReadsBackBoxByBox) {
  const float boxes[] = {1.4f, 2.6f, 11.5f, 22.4f, -3.f, 0.f, 5.f, 8.f};
  const float scores[] = {0.5f, 0.75f};
  const int64_t labels[] = {1, 0};
  const char names[] = "ballcube";
  const uint32_t offsets[] = {0, 4, 8};
  std::vector<std::uint8_t> area(4096);
  cudaipc_detections d{};
  d.area = area.data();
  d.capacity = static_cast<uint32_t>(area.size());
  d.n = 2;
  d.boxes = boxes;
  d.scores = scores;
  d.labels = labels;
  d.names = reinterpret_cast<const uint8_t*>(names);
  d.name_offsets = offsets;
  d.name_count = 2;
  const int64_t size = cudaipc_metas_detections_area(&d);
  ASSERT_GT(size, 0) << cudaipc_last_error();
  cudaipc::metas::AreaReader reader(area.data(), static_cast<std::size_t>(size));
  cudaipc::metas::Record rec;
  ASSERT_TRUE(reader.next(&rec));
  EXPECT_EQ(rec.kind, cudaipc::metas::RecordKind::analytics);
  EXPECT_EQ(rec.name, "GstAnalyticsRelationMetaAPI");
  cudaipc::metas::AnalyticsView v;
  std::string error;
  ASSERT_TRUE(v.parse(rec.body, &error)) << error;
  ASSERT_EQ(v.mtd_count(), 2u);
  cudaipc::metas::Mtd m;
  ASSERT_TRUE(v.mtd(0, &m, &error)) << error;
  EXPECT_EQ(m.od.label, "cube");
  EXPECT_EQ(m.od.x, 1);
  EXPECT_EQ(m.od.y, 3);
  EXPECT_EQ(m.od.w, 10);  // rint(10.1)
  EXPECT_EQ(m.od.h, 20);  // rint(19.8)
  EXPECT_EQ(m.od.confidence, 0.5f);
  ASSERT_TRUE(v.mtd(1, &m, &error)) << error;
  EXPECT_EQ(m.od.label, "ball");
  EXPECT_EQ(m.od.x, -3);
  EXPECT_EQ(m.od.w, 8);
  EXPECT_FALSE(reader.next(&rec));
  EXPECT_EQ(reader.error(), nullptr);

  const int64_t bad_label[] = {1, 2};
  d.labels = bad_label;
  EXPECT_EQ(cudaipc_metas_detections_area(&d), -CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cudaipc_last_error()).find("label 2 of box 1 has no name"),
            std::string::npos)
      << cudaipc_last_error();
  d.labels = labels;
  d.capacity = 64;
  EXPECT_EQ(cudaipc_metas_detections_area(&d), -CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cudaipc_last_error()).find("meta area of 64 bytes"), std::string::npos)
      << cudaipc_last_error();
}

// A frame's C handle is made again from the one an ended frame left (no allocation per frame once
// the first ones are made), and carries nothing of that frame: its seq, bytes, held count and
// exports are the new frame's. Frames held past their consumer's free end cleanly.
TEST(CApi, FrameHandlesAreReusedAndStartClean) {
  constexpr std::uint64_t kBytes = 4 * 8 * 4;
  auto ch = std::make_unique<Channel>(4);
  ch->format(u32_tensor(4, 8));
  auto export_checked = [](cudaipc_frame* f, std::uint64_t key) {
    void* managed = nullptr;
    if (cudaipc_frame_dlpack(f, nullptr, 0, &managed) != CUDAIPC_OK) return false;
    auto* m = static_cast<cudaipc_dl_managed_tensor*>(managed);
    const bool intact = check_pattern(m->dl_tensor.data, kBytes, key) == kBytes;
    m->deleter(m);
    return intact;
  };

  ch->publish(1, kBytes);
  cudaipc_frame* first = ch->next();
  ASSERT_NE(first, nullptr);
  // An export keeps the frame after its caller's release; its deleter ends it.
  void* managed = nullptr;
  ASSERT_EQ(cudaipc_frame_dlpack(first, nullptr, 0, &managed), CUDAIPC_OK) << cudaipc_last_error();
  cudaipc_frame_release(first);
  EXPECT_EQ(ch->held(), 1u);
  auto* m = static_cast<cudaipc_dl_managed_tensor*>(managed);
  m->deleter(m);
  EXPECT_EQ(ch->held(), 0u);

  std::uint64_t seq = 1;
  for (int round = 0; round < 20; ++round) {
    ch->publish(++seq, kBytes);
    // The frame's way through the C API: next, an export and its end, release.
    g_allocations = 0;
    g_counting = true;
    cudaipc_event ev;
    const int rc = cudaipc_consumer_next(ch->c, 5 * kSecond, &ev);
    const bool frame = rc == CUDAIPC_OK && ev.type == CUDAIPC_EVENT_FRAME;
    const std::uint64_t got = frame ? cudaipc_frame_seq(ev.frame) : 0;
    const bool intact = frame && export_checked(ev.frame, seq);
    if (frame) cudaipc_frame_release(ev.frame);
    g_counting = false;
    ASSERT_TRUE(frame) << "status " << rc << ", event " << ev.type << ": " << cudaipc_last_error();
    EXPECT_EQ(g_allocations, 0u) << "frame " << seq << " allocated";
    EXPECT_EQ(ev.frame, first) << "frame " << seq << " got a new handle: one was spare";
    EXPECT_EQ(got, seq);
    EXPECT_TRUE(intact) << "frame " << seq;
    EXPECT_EQ(ch->held(), 0u);
    // The reused handle is this frame's, not the one before's.
    ch->publish(++seq, kBytes);
    cudaipc_frame* f = ch->next();
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(cudaipc_frame_seq(f), seq);
    EXPECT_EQ(ch->held(), 1u);
    EXPECT_TRUE(export_checked(f, seq)) << "frame " << seq;
    cudaipc_frame_release(f);
    EXPECT_EQ(ch->held(), 0u);
  }
  // Three held at once: each its own handle, each its own frame.
  std::vector<cudaipc_frame*> kept;
  const std::uint64_t first_kept = seq + 1;
  for (int i = 0; i < 3; ++i) {
    ch->publish(++seq, kBytes);
    kept.push_back(ch->next());
    ASSERT_NE(kept.back(), nullptr);
  }
  EXPECT_EQ(ch->held(), 3u);
  EXPECT_NE(kept[0], kept[1]);
  EXPECT_NE(kept[1], kept[2]);
  // Outliving the consumer (and its producer): still readable, released cleanly after.
  ch.reset();
  for (std::size_t i = 0; i < kept.size(); ++i) {
    EXPECT_EQ(check_pattern(reinterpret_cast<const void*>(cudaipc_frame_data(kept[i])), kBytes,
                            first_kept + i),
              kBytes);
    cudaipc_frame_release(kept[i]);
  }
}
