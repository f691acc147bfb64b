// State changes with a consumer attached: PAUSED⇄PLAYING of the sink pipeline holds frames back
// and lets them go; NULL closes the channel and PLAYING opens it again on the same path, where the
// source (reconnect=true) resumes with a DISCONT buffer; the consumer itself restarts too.
#include <filesystem>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "element_harness.hpp"

namespace cudaipc::testing::gst {
namespace {

constexpr Ms kWait{5000};

TEST_F(ElementTest, PausedPlayingCycles) {
  const TensorFrame frame{all_dtypes()[6], {6, 9}};  // uint32
  Ptr<GstCaps> caps = frame.caps();
  Producer producer(socket());
  Consumer consumer(socket());
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait));

  std::uint64_t sent = 0;
  for (int cycle = 0; cycle < 3; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    for (int i = 0; i < 4; ++i, ++sent)
      ASSERT_EQ(producer.push(frame.buffer(sent + 1), sent), GST_FLOW_OK);
    ASSERT_TRUE(consumer.collector().wait_frames(sent, kWait)) << producer.pipeline().errors();

    // PAUSED: the sink prerolls the next frame but publishes nothing.
    ASSERT_NE(producer.pipeline().set_state(GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
    for (int i = 0; i < 4; ++i, ++sent)
      ASSERT_EQ(producer.push(frame.buffer(sent + 1), sent), GST_FLOW_OK);
    EXPECT_EQ(producer.pipeline().wait_state(kWait), GST_STATE_PAUSED);
    std::this_thread::sleep_for(Ms(100));
    EXPECT_EQ(consumer.collector().count(), sent - 4) << "frames published while PAUSED";
    EXPECT_EQ(producer.consumers(), 1u);

    ASSERT_NE(producer.pipeline().set_state(GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
    ASSERT_TRUE(consumer.collector().wait_frames(sent, kWait)) << producer.pipeline().errors();
  }
  const std::vector<Received> got = consumer.collector().frames();
  ASSERT_EQ(got.size(), sent);
  for (std::size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    EXPECT_EQ(got[i].seq(), i + 1);
    EXPECT_EQ(frame.check(got[i], i + 1), "");
    EXPECT_EQ(check_tensor_meta(got[i], frame.expected(), i + 1), "");
  }
  EXPECT_EQ(producer.pipeline().errors(), "");
  EXPECT_EQ(consumer.pipeline().errors(), "");
}

// Clears DISCONT on what enters the sink, so a DISCONT at the consumer is the source's own.
GstPadProbeReturn clear_discont(GstPad*, GstPadProbeInfo* info, gpointer) {
  GstBuffer* buf = GST_PAD_PROBE_INFO_BUFFER(info);
  if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DISCONT)) {
    buf = gst_buffer_make_writable(buf);
    GST_BUFFER_FLAG_UNSET(buf, GST_BUFFER_FLAG_DISCONT);
    GST_PAD_PROBE_INFO_DATA(info) = buf;
  }
  return GST_PAD_PROBE_OK;
}

// The sink pipeline down to READY or NULL and back to PLAYING, four times. GstBaseSink opens and
// closes the channel on NULL⇄READY: in READY the channel (and the consumer's connection) stays and
// numbering goes on; after NULL a new channel opens on the same path, the consumer reconnects on
// its own, seq starts again at 1 and the first buffer is DISCONT. Every frame arrives intact.
TEST_F(ElementTest, RestartOnTheSamePath) {
  const VideoLayout layout = padded_layout(GST_VIDEO_FORMAT_NV12, 66, 50, 0, 8, 16, true);
  Ptr<GstCaps> caps = caps_of(layout);
  Producer producer(socket());
  Consumer consumer(socket(), "mode=every-frame reconnect=true");
  producer.set_caps(caps.get());
  Ptr<GstPad> sink_pad(gst_element_get_static_pad(producer.sink(), "sink"));
  gst_pad_add_probe(sink_pad.get(), GST_PAD_PROBE_TYPE_BUFFER, clear_discont, nullptr, nullptr);
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.start());

  constexpr int kPerSession = 5;
  const GstState downs[] = {GST_STATE_READY, GST_STATE_NULL, GST_STATE_NULL, GST_STATE_READY};
  struct Want {
    guint64 seq;
    bool discont;
  };
  std::vector<Want> want;
  guint64 channel_seq = 0;
  bool new_channel = true;
  for (std::size_t s = 0; s <= std::size(downs); ++s) {
    SCOPED_TRACE("session " + std::to_string(s));
    ASSERT_TRUE(producer.wait_consumers(1, kWait))
        << "the source did not come back; " << consumer.pipeline().errors();
    for (int i = 0; i < kPerSession; ++i) {
      const std::uint64_t n = want.size();
      want.push_back({++channel_seq, new_channel && i == 0});
      ASSERT_EQ(producer.push(video_buffer(layout, n + 1), n), GST_FLOW_OK);
    }
    ASSERT_TRUE(consumer.collector().wait_frames(want.size(), kWait))
        << consumer.collector().count() << " frames; " << producer.pipeline().errors()
        << consumer.pipeline().errors();
    if (s == std::size(downs)) break;
    EXPECT_EQ(producer.pipeline().set_state(downs[s]), GST_STATE_CHANGE_SUCCESS);
    EXPECT_EQ(producer.pipeline().wait_state(kWait), downs[s]);
    new_channel = downs[s] == GST_STATE_NULL;
    EXPECT_EQ(std::filesystem::exists(socket()), !new_channel)
        << "the socket file lives exactly as long as the channel (NULL⇄READY)";
    if (new_channel) {
      channel_seq = 0;
      ASSERT_EQ(producer.pipeline().set_state(GST_STATE_READY), GST_STATE_CHANGE_SUCCESS);
    }
    ASSERT_NE(producer.pipeline().set_state(GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  }

  const std::vector<Received> got = consumer.collector().frames();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    EXPECT_EQ(check_video_frame(got[i], layout, i + 1), "");
    EXPECT_EQ(check_tensor_meta(got[i], video_tensor_of(layout), want[i].seq), "");
    EXPECT_TRUE(caps_equal(got[i].caps.get(), caps.get())) << text_of(got[i].caps.get());
    EXPECT_EQ(got[i].discont(), want[i].discont)
        << "DISCONT exactly on the first buffer of each channel";
  }
  EXPECT_EQ(producer.pipeline().errors(), "");
  EXPECT_EQ(consumer.pipeline().errors(), "");
}

// The consumer may also come and go: taken to NULL and back, it joins the same channel again.
TEST_F(ElementTest, ConsumerRestarts) {
  const TensorFrame frame{all_dtypes()[10], {3, 7}};  // float64
  Ptr<GstCaps> caps = frame.caps();
  Producer producer(socket());
  Consumer consumer(socket());
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  std::uint64_t sent = 0;
  for (int cycle = 0; cycle < 3; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    ASSERT_TRUE(consumer.start());
    ASSERT_TRUE(producer.wait_consumers(1, kWait)) << consumer.pipeline().errors();
    const std::size_t before = consumer.collector().count();
    for (int i = 0; i < 3; ++i, ++sent)
      ASSERT_EQ(producer.push(frame.buffer(sent + 1), sent), GST_FLOW_OK);
    ASSERT_TRUE(consumer.collector().wait_frames(before + 3, kWait));
    EXPECT_EQ(consumer.pipeline().set_state(GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
    // At NULL the source has left; the source connects from its streaming thread, so the next
    // cycle's "one consumer" must be the new one, not this one still being let go.
    ASSERT_TRUE(poll_until([&] { return producer.consumers() == 0; }, kWait));
  }
  const std::vector<Received> got = consumer.collector().frames();
  ASSERT_EQ(got.size(), sent);
  for (std::size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    EXPECT_EQ(got[i].seq(), i + 1) << "one channel numbers its frames on";
    EXPECT_EQ(frame.check(got[i], i + 1), "");
    EXPECT_EQ(got[i].discont(), i % 3 == 0) << "a fresh start is DISCONT";
  }
  EXPECT_EQ(producer.pipeline().errors(), "");
}

// Stopped consumers stop holding the producer back: with one every-frame consumer taken to NULL
// (its pipeline object kept, as an application pausing consumption does), a second consumer still
// gets every frame at full speed. GStreamer 1.22's appsink keeps its last sample's buffer after
// stop (until it starts again or is freed; 1.28's lets it go), and with io-mode=auto that buffer
// holds its slot's lease and so the connection: the sink may still list it, but as a reader that
// has left (the core retires a destroyed Consumer's cursor), never one that must be waited for.
class StoppedConsumer : public ElementTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(StoppedConsumer, LeavesTheChannel) {
  const TensorFrame frame{all_dtypes()[4], {10, 10}};
  Ptr<GstCaps> caps = frame.caps();
  Producer producer(socket(), "num-slots=4 block-timeout=50000000");
  auto stopped =
      std::make_unique<Consumer>(socket(), std::string("mode=every-frame io-mode=") + GetParam());
  Consumer active(socket(), "mode=every-frame");
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(stopped->start());
  ASSERT_TRUE(active.start());
  ASSERT_TRUE(producer.wait_consumers(2, kWait));
  for (guint64 i = 0; i < 3; ++i) ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);
  ASSERT_TRUE(stopped->collector().wait_frames(3, kWait));
  ASSERT_TRUE(active.collector().wait_frames(3, kWait));
  EXPECT_EQ(stopped->pipeline().set_state(GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);

  constexpr guint64 kMore = 12;
  const auto start = Clock::now();
  for (guint64 i = 3; i < 3 + kMore; ++i)
    ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);
  const bool all = active.collector().wait_frames(3 + kMore, Ms(2000));
  const auto took = std::chrono::duration_cast<Ms>(Clock::now() - start).count();
  Ptr<GstStructure> stats = producer.stats();
  std::printf("after the stop: %s; %zu frames in %lld ms\n", text_of(stats.get()).c_str(),
              active.collector().count(), static_cast<long long>(took));
  EXPECT_TRUE(all) << "FAIL: the active consumer got " << active.collector().count() << " of "
                   << 3 + kMore << " frames (the stopped consumer holds the producer back)";
  guint64 dropped = 0;
  gst_structure_get_uint64(stats.get(), "dropped", &dropped);
  EXPECT_EQ(dropped, 0u) << "FAIL: frames dropped because of a stopped consumer";
  const std::vector<Received> got = active.collector().frames();
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].seq(), i + 1);
    EXPECT_EQ(frame.check(got[i], got[i].seq()), "");
  }
  // Freeing the stopped pipeline certainly ends its connection.
  stopped.reset();
  EXPECT_TRUE(poll_until([&] { return producer.consumers() == 1; }, kWait));
}

INSTANTIATE_TEST_SUITE_P(IoModes, StoppedConsumer, ::testing::Values("auto", "copy"));

}  // namespace
}  // namespace cudaipc::testing::gst
