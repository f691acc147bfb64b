// The stream through cudaipcsink ipc-mode=host and cudaipcsrc in one process: format changes
// mid-stream, EOS, a flushing seek at the producer, the sink's unlock while blocked on a full
// ring, two consumers in different modes, and tags.
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "element_harness.hpp"

namespace cudaipc::testing::gst {
namespace {

constexpr Ms kWait{5000};

// Frames of three formats in a row: each format's caps reach the appsink before its first buffer.
TEST_F(ElementTest, RenegotiationMidStream) {
  const VideoLayout rgba = padded_layout(GST_VIDEO_FORMAT_RGBA, 320, 240, 0, 64, 0, true);
  const VideoLayout nv12 = default_layout(GST_VIDEO_FORMAT_NV12, 160, 120);
  const TensorFrame tensor{all_dtypes()[9], {4, 10, 6}};  // float32
  Ptr<GstCaps> rgba_caps = caps_of(rgba), nv12_caps = caps_of(nv12), tensor_caps = tensor.caps();
  constexpr int kEach = 5;

  Producer producer(socket());
  Consumer consumer(socket());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait)) << consumer.pipeline().errors();
  std::uint64_t seq = 0;
  for (int i = 0; i < kEach; ++i, ++seq)
    ASSERT_EQ(producer.push(rgba_caps.get(), video_buffer(rgba, seq + 1), seq), GST_FLOW_OK);
  for (int i = 0; i < kEach; ++i, ++seq)
    ASSERT_EQ(producer.push(nv12_caps.get(), video_buffer(nv12, seq + 1), seq), GST_FLOW_OK);
  for (int i = 0; i < kEach; ++i, ++seq)
    ASSERT_EQ(producer.push(tensor_caps.get(), tensor.buffer(seq + 1), seq), GST_FLOW_OK);
  ASSERT_TRUE(consumer.collector().wait_frames(3 * kEach, kWait))
      << "got " << consumer.collector().count() << "; " << producer.pipeline().errors()
      << consumer.pipeline().errors();

  const std::vector<Received> got = consumer.collector().frames();
  for (int i = 0; i < 3 * kEach; ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    const Received& r = got[i];
    const auto seed = static_cast<std::uint64_t>(i + 1);
    EXPECT_EQ(r.seq(), seed);
    if (i < kEach) {
      EXPECT_TRUE(caps_equal(r.caps.get(), rgba_caps.get())) << text_of(r.caps.get());
      EXPECT_EQ(check_video_frame(r, rgba, seed), "");
      EXPECT_EQ(check_tensor_meta(r, video_tensor_of(rgba), seed), "");
    } else if (i < 2 * kEach) {
      EXPECT_TRUE(caps_equal(r.caps.get(), nv12_caps.get())) << text_of(r.caps.get());
      EXPECT_EQ(check_video_frame(r, nv12, seed), "");
      EXPECT_EQ(check_tensor_meta(r, video_tensor_of(nv12), seed), "");
    } else {
      EXPECT_TRUE(caps_equal(r.caps.get(), tensor_caps.get())) << text_of(r.caps.get());
      EXPECT_FALSE(r.has_video_meta);
      EXPECT_EQ(tensor.check(r, seed), "");
      EXPECT_EQ(check_tensor_meta(r, tensor.expected(), seed), "");
    }
  }

  // On the pad: caps A, 5 buffers, caps B, 5 buffers, caps C, 5 buffers (other events between).
  std::vector<std::string> order;
  for (const Step& s : consumer.collector().steps()) {
    if (s.kind == Step::caps) order.push_back("caps");
    if (s.kind == Step::buffer) order.push_back("buffer " + std::to_string(s.seq));
  }
  std::vector<std::string> want;
  for (int f = 0; f < 3; ++f) {
    want.push_back("caps");
    for (int i = 0; i < kEach; ++i) want.push_back("buffer " + std::to_string(f * kEach + i + 1));
  }
  EXPECT_EQ(order, want);
  std::vector<std::string> caps_seen;
  for (const Step& s : consumer.collector().steps())
    if (s.kind == Step::caps) caps_seen.push_back(s.text);
  ASSERT_EQ(caps_seen.size(), 3u);
  EXPECT_TRUE(caps_equal(caps_from(caps_seen[0]).get(), rgba_caps.get())) << caps_seen[0];
  EXPECT_TRUE(caps_equal(caps_from(caps_seen[1]).get(), nv12_caps.get())) << caps_seen[1];
  EXPECT_TRUE(caps_equal(caps_from(caps_seen[2]).get(), tensor_caps.get())) << caps_seen[2];
  EXPECT_EQ(producer.pipeline().errors(), "");
  EXPECT_EQ(consumer.pipeline().errors(), "");
}

// EOS at the sink ends the consumer's stream after the last frame, the sink pipeline still
// PLAYING.
TEST_F(ElementTest, EosReachesTheSource) {
  const TensorFrame frame{all_dtypes()[4], {16, 16}};
  Ptr<GstCaps> caps = frame.caps();
  Producer producer(socket());
  Consumer consumer(socket());
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait));
  for (int i = 0; i < 5; ++i) ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);
  ASSERT_EQ(producer.end_of_stream(), GST_FLOW_OK);

  Ptr<GstMessage> eos = consumer.pipeline().pop(GST_MESSAGE_EOS, kWait);
  ASSERT_TRUE(eos) << "no EOS at the consumer; " << consumer.pipeline().errors();
  EXPECT_TRUE(consumer.collector().eos());
  EXPECT_EQ(producer.pipeline().wait_state(Ms(0)), GST_STATE_PLAYING);
  EXPECT_TRUE(producer.pipeline().pop(GST_MESSAGE_EOS, kWait)) << "the sink pipeline saw no EOS";
  EXPECT_EQ(producer.pipeline().wait_state(Ms(0)), GST_STATE_PLAYING);

  const std::vector<Received> got = consumer.collector().frames();
  ASSERT_EQ(got.size(), 5u) << "every frame before EOS";
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].seq(), i + 1);
    EXPECT_EQ(frame.check(got[i], i + 1), "");
  }
  const std::vector<Step> steps = consumer.collector().steps();
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.back().kind, Step::eos) << "EOS comes after the last buffer";
}

// Index of the frame whose pattern the tensor bytes hold, searched in (after, last]; 0 if none.
std::uint64_t frame_id(const TensorFrame& frame, const Received& r, std::uint64_t after,
                       std::uint64_t last) {
  for (std::uint64_t id = after + 1; id <= last; ++id)
    if (frame.check(r, id).empty()) return id;
  return 0;
}

// A flushing seek on the producing pipeline while the consumer reads: the stream goes on, and
// every frame before and after it holds the bytes of one frame the producer sent, in order.
TEST_F(ElementTest, FlushingSeekAtTheProducer) {
  const TensorFrame frame{all_dtypes()[4], {48, 64}};
  Ptr<GstCaps> caps = frame.caps();
  Producer producer(socket(), "", "", "stream-type=seekable max-buffers=4 block=true");
  Consumer consumer(socket());
  producer.set_caps(caps.get());
  // A seekable appsrc asks the application to seek; frames simply go on from here.
  g_signal_connect(producer.appsrc(), "seek-data",
                   G_CALLBACK(+[](GstAppSrc*, guint64, gpointer) -> gboolean { return TRUE; }),
                   nullptr);
  // The seek must really flush through the sink (unlock, unlock_stop), not just reach appsrc.
  std::atomic<int> flushes{0};
  Ptr<GstPad> sink_pad(gst_element_get_static_pad(producer.sink(), "sink"));
  gst_pad_add_probe(
      sink_pad.get(), GST_PAD_PROBE_TYPE_EVENT_FLUSH,
      +[](GstPad*, GstPadProbeInfo* info, gpointer data) {
        if (GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_FLUSH_STOP)
          ++*static_cast<std::atomic<int>*>(data);
        return GST_PAD_PROBE_OK;
      },
      &flushes, nullptr);
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait));

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> pushed{0};
  std::thread pusher([&] {
    for (std::uint64_t id = 1; !stop.load() && id < 100000; ++id) {
      producer.push(frame.buffer(id), id);  // FLUSHING while the seek flushes: the frame is lost
      pushed.store(id);
      std::this_thread::sleep_for(Ms(2));
    }
  });
  const bool before = consumer.collector().wait_frames(10, kWait);
  const std::uint64_t at_seek = pushed.load();
  const bool seeked = gst_element_seek_simple(producer.pipeline().get(), GST_FORMAT_TIME,
                                              static_cast<GstSeekFlags>(GST_SEEK_FLAG_FLUSH), 0);
  const std::size_t seen_at_seek = consumer.collector().count();
  const bool after = consumer.collector().wait_frames(seen_at_seek + 20, kWait);
  stop.store(true);
  pusher.join();
  ASSERT_TRUE(before) << "no frames before the seek; " << producer.pipeline().errors();
  ASSERT_TRUE(seeked) << "the flushing seek failed; " << producer.pipeline().errors();
  ASSERT_TRUE(after) << "the stream stopped after the seek (" << consumer.collector().count()
                     << " frames); " << producer.pipeline().errors()
                     << consumer.pipeline().errors();

  // Frames the seek flushed never reach the sink; all others arrive in order, seq contiguous.
  const std::uint64_t last = pushed.load();
  std::uint64_t id = 0, later = 0;
  const std::vector<Received> got = consumer.collector().frames();
  for (std::size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    const std::uint64_t next = frame_id(frame, got[i], id, last);
    ASSERT_NE(next, 0u) << "bytes of no frame sent after frame " << id;
    id = next;
    if (id > at_seek) ++later;
    EXPECT_EQ(got[i].seq(), i + 1) << "the producer numbers what it publishes without gaps";
    EXPECT_EQ(check_tensor_meta(got[i], frame.expected(), i + 1), "");
  }
  EXPECT_GE(later, 10u) << "frames pushed after the seek";
  EXPECT_EQ(flushes.load(), 1) << "FLUSH_STOP events at the sink";
  std::printf("%zu frames, %" G_GUINT64_FORMAT " pushed, %" G_GUINT64_FORMAT
              " lost in the flush or not yet published\n",
              got.size(), last, last - got.size());
  EXPECT_EQ(producer.pipeline().errors(), "");
  EXPECT_EQ(consumer.pipeline().errors(), "");
}

// What reached the consumer's appsink in time: each buffer's PTS and running time under the
// segment in force, and where new segments came.
struct Timeline {
  std::mutex mu;
  GstSegment segment;
  std::vector<GstClockTime> pts, running;
  std::vector<std::size_t> segments_before;  // buffers seen when each segment came

  Timeline() { gst_segment_init(&segment, GST_FORMAT_TIME); }
  static GstPadProbeReturn probe(GstPad*, GstPadProbeInfo* info, gpointer data) {
    auto* t = static_cast<Timeline*>(data);
    std::lock_guard<std::mutex> lock(t->mu);
    if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
      const GstClockTime pts = GST_BUFFER_PTS(GST_PAD_PROBE_INFO_BUFFER(info));
      t->pts.push_back(pts);
      t->running.push_back(gst_segment_to_running_time(&t->segment, GST_FORMAT_TIME, pts));
    } else if (GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_SEGMENT) {
      const GstSegment* seg = nullptr;
      gst_event_parse_segment(GST_PAD_PROBE_INFO_EVENT(info), &seg);
      gst_segment_copy_into(seg, &t->segment);
      t->segments_before.push_back(t->pts.size());
    }
    return GST_PAD_PROBE_OK;
  }
};

// Issue #38: after a flushing seek the producer's time starts again (here: its frames come back to
// PTS 0 without a new segment at the sink, which is what a non-live consumer sees of it). The
// consumer used to push those frames with DISCONT under its old segment, so downstream saw time go
// back; it now starts a new segment before them whose running time goes on, every frame whole.
TEST_F(ElementTest, ProducerTimeGoingBackStartsANewSegment) {
  const TensorFrame frame{all_dtypes()[4], {10, 10}};
  Ptr<GstCaps> caps = frame.caps();
  Producer producer(socket());
  // Non-live: its timestamps are the producer's running time (a live one stamps its own).
  Consumer consumer(socket(), "mode=every-frame is-live=false");
  Timeline timeline;
  Ptr<GstPad> pad(gst_element_get_static_pad(consumer.pipeline().element("out"), "sink"));
  gst_pad_add_probe(
      pad.get(),
      static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
      Timeline::probe, &timeline, nullptr);
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait));
  for (guint64 i = 0; i < 10; ++i) ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);
  ASSERT_TRUE(consumer.collector().wait_frames(10, kWait));
  for (guint64 i = 0; i < 10; ++i)  // the same times again, as after a seek to 0
    ASSERT_EQ(producer.push(frame.buffer(i + 11), i), GST_FLOW_OK);
  ASSERT_TRUE(consumer.collector().wait_frames(20, kWait));

  const std::vector<Received> got = consumer.collector().frames();
  for (guint64 i = 0; i < 20; ++i) EXPECT_EQ(frame.check(got[i], i + 1), "") << "frame " << i;
  EXPECT_TRUE(got[10].discont()) << "the frame after the jump is DISCONT";
  std::lock_guard<std::mutex> lock(timeline.mu);
  ASSERT_EQ(timeline.pts.size(), 20u);
  EXPECT_EQ(timeline.pts[10], 0u) << "the frame keeps the producer's time";
  ASSERT_FALSE(timeline.segments_before.empty());
  EXPECT_EQ(timeline.segments_before.back(), 10u) << "a new segment right before the jump";
  for (std::size_t i = 1; i < timeline.running.size(); ++i)
    EXPECT_GE(timeline.running[i], timeline.running[i - 1] + Producer::kFrame)
        << "running time went back at frame " << i;
}

// policy=block, 2 slots, an every-frame consumer that does not pull: the sink blocks on a full
// ring, and taking its pipeline to NULL still returns at once (unlock interrupts the wait).
TEST_F(ElementTest, SinkUnlockWhileBlockedOnFullRing) {
  const TensorFrame frame{all_dtypes()[4], {32, 32}};
  Ptr<GstCaps> caps = frame.caps();
  Producer producer(socket(), "policy=block num-slots=2 block-timeout=60000000000");
  // appsink holds one buffer and the source blocks pushing the next: both hold their slots.
  Pipeline consumer(std::string(src_factory()) +
                    " name=src mode=every-frame ! appsink name=out sync=false max-buffers=1");
  g_object_set(consumer.element("src"), "socket-path", socket().c_str(), nullptr);
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_NE(consumer.set_state(GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  ASSERT_TRUE(producer.wait_consumers(1, kWait));
  for (int i = 0; i < 6; ++i) ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);

  // Blocked: two frames published, the rest wait in appsrc, nothing moves.
  ASSERT_TRUE(poll_until([&] { return producer.published() >= 2; }, kWait));
  std::this_thread::sleep_for(Ms(300));
  EXPECT_EQ(producer.published(), 2u);
  guint64 queued = 0;
  g_object_get(producer.appsrc(), "current-level-buffers", &queued, nullptr);
  EXPECT_GE(queued, 1u) << "frames still wait upstream of the blocked sink";

  const auto start = Clock::now();
  EXPECT_EQ(producer.pipeline().set_state(GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
  const auto took = std::chrono::duration_cast<Ms>(Clock::now() - start);
  EXPECT_LT(took.count(), 1000) << "the sink pipeline took " << took.count() << " ms to stop";

  // What the consumer holds is still the first frame, intact.
  Ptr<GstSample> sample(
      gst_app_sink_try_pull_sample(GST_APP_SINK(consumer.element("out")), GST_SECOND));
  ASSERT_TRUE(sample);
  GstMapInfo map;
  GstBuffer* buf = gst_sample_get_buffer(sample.get());
  ASSERT_TRUE(gst_buffer_map(buf, &map, GST_MAP_READ));
  EXPECT_EQ(check_pattern(map.data, map.size, 1), map.size);
  gst_buffer_unmap(buf, &map);
}

// One latest and one every-frame consumer of one sink: every-frame sees seq 1..N, latest an
// increasing subsequence ending at N, each frame with its own bytes.
TEST_F(ElementTest, LatestAndEveryFrameConsumers) {
  const TensorFrame frame{all_dtypes()[5], {40, 30}};  // uint16
  Ptr<GstCaps> caps = frame.caps();
  constexpr int kFrames = 40;
  Producer producer(socket(), "num-slots=4");
  Consumer every(socket(), "mode=every-frame");
  Consumer latest(socket(), "mode=latest");
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(every.start());
  ASSERT_TRUE(latest.start());
  ASSERT_TRUE(producer.wait_consumers(2, kWait)) << producer.consumers() << " consumers";
  for (int i = 0; i < kFrames; ++i) {
    ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);
    if (i % 8 == 0) std::this_thread::sleep_for(Ms(5));
  }
  ASSERT_TRUE(every.collector().wait_frames(kFrames, kWait))
      << every.collector().count() << " frames; " << every.pipeline().errors();
  ASSERT_TRUE(latest.collector().wait_until(
      [&](const std::vector<Received>& f) { return !f.empty() && f.back().seq() == kFrames; },
      kWait))
      << "latest never saw the last frame; " << latest.pipeline().errors();

  const std::vector<Received> all = every.collector().frames();
  ASSERT_EQ(all.size(), static_cast<std::size_t>(kFrames));
  for (int i = 0; i < kFrames; ++i) {
    SCOPED_TRACE("every-frame " + std::to_string(i));
    EXPECT_EQ(all[i].seq(), static_cast<guint64>(i + 1));
    EXPECT_EQ(frame.check(all[i], i + 1), "");
    EXPECT_EQ(check_tensor_meta(all[i], frame.expected(), i + 1), "");
  }
  guint64 prev = 0;
  for (const Received& r : latest.collector().frames()) {
    SCOPED_TRACE("latest seq " + std::to_string(r.seq()));
    EXPECT_GT(r.seq(), prev);
    EXPECT_LE(r.seq(), static_cast<guint64>(kFrames));
    EXPECT_EQ(frame.check(r, r.seq()), "");
    EXPECT_EQ(check_tensor_meta(r, frame.expected(), r.seq()), "");
    prev = r.seq();
  }
  std::printf("latest saw %zu of %d frames\n", latest.collector().count(), kFrames);
  EXPECT_EQ(every.pipeline().errors(), "");
  EXPECT_EQ(latest.pipeline().errors(), "");
}

// A stream tag (title) sent at the producer reaches the consumer as a tag event, before the
// frame that followed it.
TEST_F(ElementTest, TagsReachTheConsumer) {
  const TensorFrame frame{all_dtypes()[4], {8, 8}};
  Ptr<GstCaps> caps = frame.caps();
  Producer producer(socket());
  Consumer consumer(socket());
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait));
  for (int i = 0; i < 3; ++i) ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);
  ASSERT_TRUE(consumer.collector().wait_frames(3, kWait));
  const char* kTitle = "cudaipc element test";
  ASSERT_TRUE(gst_element_send_event(
      producer.appsrc(), gst_event_new_tag(gst_tag_list_new(GST_TAG_TITLE, kTitle, nullptr))));
  for (int i = 3; i < 6; ++i) ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);
  ASSERT_TRUE(consumer.collector().wait_frames(6, kWait)) << consumer.pipeline().errors();

  int tag_at = -1, fourth_at = -1, index = 0;
  for (const Step& s : consumer.collector().steps()) {
    if (s.kind == Step::tag && s.title == kTitle && tag_at < 0) tag_at = index;
    if (s.kind == Step::buffer && s.seq == 4) fourth_at = index;
    ++index;
  }
  EXPECT_GE(tag_at, 0) << "no tag event with title=\"" << kTitle << "\" at the consumer";
  EXPECT_LT(tag_at, fourth_at) << "the tag comes before the frame sent after it";
  const std::vector<Received> got = consumer.collector().frames();
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].seq(), i + 1);
    EXPECT_EQ(frame.check(got[i], i + 1), "");
  }
  EXPECT_EQ(consumer.pipeline().errors(), "");
}

}  // namespace
}  // namespace cudaipc::testing::gst
