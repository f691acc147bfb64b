// Issue #38, item 4: at NULL an element lets its channel go, whatever the application still holds.
// A sink whose lent slot upstream is still referenced used to keep its channel (socket file there,
// a new sink on the path refused busy); a source set to NULL but not yet freed used to stay a
// connected consumer holding a lease. Both are applications' views: pipelines in this process,
// states set by the test, the channel looked at from outside.
#include <gst/app/gstappsink.h>
#include <sys/stat.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "element_harness.hpp"

namespace cudaipc::testing::gst {
namespace {

constexpr Ms kWait{10000};

bool path_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

guint64 stat_u64(GstElement* e, const char* field) {
  GstStructure* s = nullptr;
  g_object_get(e, "stats", &s, nullptr);
  Ptr<GstStructure> owned(s);
  guint64 v = 0;
  if (s) gst_structure_get_uint64(s, field, &v);
  return v;
}

// The first buffer that reaches the sink, kept by the application, with a copy of its bytes.
struct Keeper {
  std::mutex mu;
  GstBuffer* kept = nullptr;
  std::vector<guint8> bytes;

  static GstPadProbeReturn probe(GstPad*, GstPadProbeInfo* info, gpointer data) {
    auto* k = static_cast<Keeper*>(data);
    GstBuffer* buf = GST_PAD_PROBE_INFO_BUFFER(info);
    std::lock_guard<std::mutex> lock(k->mu);
    if (!k->kept && buf) {
      GstMapInfo map;
      if (gst_buffer_map(buf, &map, GST_MAP_READ)) {
        k->bytes.assign(map.data, map.data + map.size);
        gst_buffer_unmap(buf, &map);
        k->kept = gst_buffer_ref(buf);
      }
    }
    return GST_PAD_PROBE_OK;
  }
  ~Keeper() {
    if (kept) gst_buffer_unref(kept);
  }
};

TEST_F(ElementTest, SinkAtNullLetsItsChannelGoWhileALentSlotIsHeld) {
  if (!element_exists("videotestsrc")) GTEST_SKIP() << "videotestsrc is not installed";
  Pipeline p(
      "videotestsrc pattern=ball is-live=true ! "
      "video/x-raw,format=GRAY8,width=64,height=48,framerate=100/1 ! " +
      sink_element("num-slots=4"));
  ASSERT_TRUE(p.ok());
  GstElement* sink = p.element("sink");
  g_object_set(sink, "socket-path", socket().c_str(), nullptr);
  Keeper keeper;
  Ptr<GstPad> pad(gst_element_get_static_pad(sink, "sink"));
  gst_pad_add_probe(pad.get(), GST_PAD_PROBE_TYPE_BUFFER, Keeper::probe, &keeper, nullptr);
  ASSERT_NE(p.set_state(GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  ASSERT_TRUE(poll_until([&] { return stat_u64(sink, "published") >= 5; }, kWait)) << p.errors();
  ASSERT_GT(stat_u64(sink, "in-place"), 0u) << "videotestsrc wrote into the sink's lent slots";
  ASSERT_TRUE(path_exists(socket()));

  ASSERT_EQ(p.set_state(GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
  std::lock_guard<std::mutex> lock(keeper.mu);
  ASSERT_NE(keeper.kept, nullptr);
  EXPECT_FALSE(path_exists(socket())) << "the socket file went with the channel";

  // The path is free: a new sink takes it and serves a consumer.
  const TensorFrame frame{all_dtypes()[4], {10, 10}};
  Ptr<GstCaps> caps = frame.caps();
  Producer producer(socket());
  Consumer consumer(socket());
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start()) << producer.pipeline().errors();
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait));
  ASSERT_EQ(producer.push(frame.buffer(7), 0), GST_FLOW_OK);
  ASSERT_TRUE(consumer.collector().wait_frames(1, kWait));
  EXPECT_EQ(frame.check(consumer.collector().frames()[0], 7), "");

  // The lent slot the application kept is still its frame, until its last reference goes.
  GstMapInfo map;
  ASSERT_TRUE(gst_buffer_map(keeper.kept, &map, GST_MAP_READ));
  EXPECT_EQ(map.size, keeper.bytes.size());
  EXPECT_EQ(std::memcmp(map.data, keeper.bytes.data(), std::min(map.size, keeper.bytes.size())), 0);
  gst_buffer_unmap(keeper.kept, &map);
}

TEST_F(ElementTest, SourceAtNullHoldsNothingBeforeItIsFreed) {
  const TensorFrame frame{all_dtypes()[4], {10, 10}};
  Ptr<GstCaps> caps = frame.caps();
  Producer producer(socket());
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  // The application pulls the frames itself and keeps none.
  PullingConsumer consumer(socket(), "");
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait));
  for (guint64 i = 0; i < 3; ++i) {
    ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);
    Ptr<GstSample> s = consumer.pull();
    ASSERT_TRUE(s);
    Received r;
    GstBuffer* b = gst_sample_get_buffer(s.get());
    GstMapInfo map;
    ASSERT_TRUE(b && gst_buffer_map(b, &map, GST_MAP_READ));
    r.bytes.assign(map.data, map.data + map.size);
    gst_buffer_unmap(b, &map);
    EXPECT_EQ(frame.check(r, i + 1), "") << "frame " << i;
  }
  // Another frame stays queued in the pipeline when the state drops.
  ASSERT_EQ(producer.push(frame.buffer(9), 3), GST_FLOW_OK);
  ASSERT_EQ(consumer.pipeline().set_state(GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
  EXPECT_TRUE(poll_until([&] { return producer.consumers() == 0; }, kWait))
      << "the source left the channel at NULL: " << text_of(producer.stats().get());
  // The channel goes on for others: a new source reads the next frame whole.
  Consumer next(socket());
  ASSERT_TRUE(next.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait));
  ASSERT_EQ(producer.push(frame.buffer(30), 4), GST_FLOW_OK);
  ASSERT_TRUE(next.collector().wait_frames(1, kWait));
  EXPECT_EQ(frame.check(next.collector().frames()[0], 30), "");
}

}  // namespace
}  // namespace cudaipc::testing::gst
