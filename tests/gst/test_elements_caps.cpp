// Caps round trips through cudaipcsink ipc-mode=host and cudaipcsrc in one process: every video
// format with a non-default layout, every tensor dtype and ranks 1 to 4, and the equivalence of
// NNStreamer dimension spellings. Every frame's bytes, metas and caps are checked.
#include <atomic>
#include <string>
#include <tuple>
#include <vector>

#include "element_harness.hpp"

namespace cudaipc::testing::gst {
namespace {

constexpr int kFrames = 10;
constexpr Ms kWait{5000};

// io-mode=auto hands out the host slot itself; io-mode=copy copies it into a buffer of its own.
using VideoCase = std::tuple<GstVideoFormat, const char*>;

class VideoRoundTrip : public ElementTest, public ::testing::WithParamInterface<VideoCase> {};

TEST_P(VideoRoundTrip, PaddedLayoutArrivesByteExact) {
  const GstVideoFormat format = std::get<0>(GetParam());
  // 66x50: odd chroma widths for 4:2:0; RGBP gets evenly spaced planes (a (3, H, W) tensor), BGRP
  // uneven ones (its first plane only).
  const VideoLayout layout =
      padded_layout(format, 66, 50, 32, 24, 40, format != GST_VIDEO_FORMAT_BGRP);
  Ptr<GstCaps> caps = caps_of(layout);
  Producer producer(socket());
  Consumer consumer(socket(), std::string("mode=every-frame io-mode=") + std::get<1>(GetParam()));
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start()) << producer.pipeline().errors();
  ASSERT_TRUE(consumer.start()) << consumer.pipeline().errors();
  ASSERT_TRUE(producer.wait_consumers(1, kWait)) << consumer.pipeline().errors();

  for (int i = 0; i < kFrames; ++i)
    ASSERT_EQ(producer.push(video_buffer(layout, i + 1), i), GST_FLOW_OK);
  ASSERT_TRUE(consumer.collector().wait_frames(kFrames, kWait))
      << "got " << consumer.collector().count() << " frames; " << producer.pipeline().errors()
      << consumer.pipeline().errors();

  const ExpectedTensor want = video_tensor_of(layout);
  const std::vector<Received> got = consumer.collector().frames();
  ASSERT_EQ(got.size(), static_cast<std::size_t>(kFrames));
  for (int i = 0; i < kFrames; ++i) {
    const Received& r = got[i];
    SCOPED_TRACE("frame " + std::to_string(i));
    EXPECT_TRUE(caps_equal(r.caps.get(), caps.get()))
        << "sent " << text_of(caps.get()) << "\ngot  " << text_of(r.caps.get());
    EXPECT_TRUE(system_memory(r.caps.get())) << text_of(r.caps.get());
    EXPECT_EQ(check_video_frame(r, layout, i + 1), "");
    EXPECT_EQ(check_tensor_meta(r, want, i + 1), "");
    EXPECT_EQ(r.offset, static_cast<guint64>(i + 1)) << "GST_BUFFER_OFFSET is the seq";
  }
  EXPECT_EQ(producer.pipeline().errors(), "");
  EXPECT_EQ(consumer.pipeline().errors(), "");
}

std::string video_case_name(const ::testing::TestParamInfo<VideoCase>& info) {
  return std::string(gst_video_format_to_string(std::get<0>(info.param))) + "_" +
         std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, VideoRoundTrip,
    ::testing::Combine(::testing::Values(GST_VIDEO_FORMAT_RGBA, GST_VIDEO_FORMAT_BGRA,
                                         GST_VIDEO_FORMAT_RGBx, GST_VIDEO_FORMAT_BGRx,
                                         GST_VIDEO_FORMAT_RGB, GST_VIDEO_FORMAT_BGR,
                                         GST_VIDEO_FORMAT_RGBP, GST_VIDEO_FORMAT_BGRP,
                                         GST_VIDEO_FORMAT_GRAY8, GST_VIDEO_FORMAT_GRAY16_LE,
                                         GST_VIDEO_FORMAT_NV12, GST_VIDEO_FORMAT_I420,
                                         GST_VIDEO_FORMAT_P010_10LE),
                       ::testing::Values("auto", "copy")),
    video_case_name);

// With io-mode=copy, buffers are the source's own: they stay intact after the slot is reused.
TEST_F(ElementTest, CopiedBuffersOutliveTheirSlots) {
  const TensorFrame frame{all_dtypes()[4], {16, 16}};
  Ptr<GstCaps> caps = frame.caps();
  Producer producer(socket(), "num-slots=2");
  Pipeline consumer(std::string(src_factory()) +
                    " name=src mode=every-frame io-mode=copy ! appsink name=out sync=false");
  g_object_set(consumer.element("src"), "socket-path", socket().c_str(), nullptr);
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_NE(consumer.set_state(GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  ASSERT_TRUE(producer.wait_consumers(1, kWait));
  // Six frames through two slots while appsink keeps every buffer: only copies make that work.
  constexpr int kHeld = 6;
  for (int i = 0; i < kHeld; ++i) ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);
  ASSERT_TRUE(poll_until([&] { return producer.published() == kHeld; }, kWait))
      << "published " << producer.published() << "; the held buffers still hold slots";
  for (int i = 0; i < kHeld; ++i) {
    Ptr<GstSample> sample(
        gst_app_sink_try_pull_sample(GST_APP_SINK(consumer.element("out")), GST_SECOND));
    ASSERT_TRUE(sample);
    GstBuffer* buf = gst_sample_get_buffer(sample.get());
    GstMapInfo map;
    ASSERT_TRUE(gst_buffer_map(buf, &map, GST_MAP_READ));
    EXPECT_EQ(check_pattern(map.data, map.size, i + 1), map.size) << "frame " << i;
    gst_buffer_unmap(buf, &map);
    GstCudaIpcTensorMeta* m = gst_buffer_get_cuda_ipc_tensor_meta(buf);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->seq, static_cast<guint64>(i + 1));
  }
}

// The sink also takes buffers without a GstVideoMeta (GStreamer's default layout).
TEST_F(ElementTest, DefaultLayoutWithoutVideoMeta) {
  const VideoLayout layout = default_layout(GST_VIDEO_FORMAT_I420, 66, 50);
  Ptr<GstCaps> caps = caps_of(layout);
  Producer producer(socket());
  Consumer consumer(socket());
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait)) << consumer.pipeline().errors();
  for (int i = 0; i < kFrames; ++i)
    ASSERT_EQ(producer.push(video_buffer(layout, i + 1), i), GST_FLOW_OK);
  ASSERT_TRUE(consumer.collector().wait_frames(kFrames, kWait)) << producer.pipeline().errors();
  const std::vector<Received> got = consumer.collector().frames();
  for (int i = 0; i < kFrames; ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    EXPECT_TRUE(caps_equal(got[i].caps.get(), caps.get())) << text_of(got[i].caps.get());
    EXPECT_EQ(check_video_frame(got[i], layout, i + 1), "");
    EXPECT_EQ(check_tensor_meta(got[i], video_tensor_of(layout), i + 1), "");
  }
}

// What reached the sink's pad: allocation queries (dropped here, as cudaipcfilter answers them
// itself so none reaches a sink behind it), and the sink's format generation when its first
// buffer came.
struct SinkPadWatch {
  std::atomic<int> allocation_queries{0};
  std::atomic<bool> buffer_seen{false};
  std::atomic<guint64> generation_at_first_buffer{0};
  GstElement* sink = nullptr;
};

GstPadProbeReturn drop_allocation(GstPad*, GstPadProbeInfo* info, gpointer data) {
  if (GST_QUERY_TYPE(GST_PAD_PROBE_INFO_QUERY(info)) != GST_QUERY_ALLOCATION)
    return GST_PAD_PROBE_OK;
  static_cast<SinkPadWatch*>(data)->allocation_queries++;
  return GST_PAD_PROBE_DROP;
}

GstPadProbeReturn note_first_buffer(GstPad*, GstPadProbeInfo*, gpointer data) {
  auto* w = static_cast<SinkPadWatch*>(data);
  GstStructure* s = nullptr;
  g_object_get(w->sink, "stats", &s, nullptr);
  guint64 generation = 0;
  if (s) gst_structure_get_uint64(s, "format-generation", &generation);
  if (s) gst_structure_free(s);
  w->generation_at_first_buffer = generation;
  w->buffer_seen = true;
  return GST_PAD_PROBE_REMOVE;
}

// The sink announces its format with its caps, before its first buffer, also when no allocation
// query reaches it: a consumer connected early has the format (and maps the slots) while the
// pipeline starts, not at its first frame. One caps, one layout: one generation in all.
TEST_F(ElementTest, TheFormatGoesOutWithTheCapsBeforeAnyBuffer) {
  const VideoLayout layout = default_layout(GST_VIDEO_FORMAT_NV12, 64, 48);
  Ptr<GstCaps> caps = caps_of(layout);
  Producer producer(socket());
  Consumer consumer(socket(), "mode=every-frame");
  SinkPadWatch watch;
  watch.sink = producer.sink();
  Ptr<GstPad> pad(gst_element_get_static_pad(producer.sink(), "sink"));
  gst_pad_add_probe(pad.get(), GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM, drop_allocation, &watch,
                    nullptr);
  gst_pad_add_probe(pad.get(), GST_PAD_PROBE_TYPE_BUFFER, note_first_buffer, &watch, nullptr);
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start()) << producer.pipeline().errors();
  ASSERT_TRUE(consumer.start()) << consumer.pipeline().errors();
  ASSERT_TRUE(producer.wait_consumers(1, kWait)) << consumer.pipeline().errors();
  for (int i = 0; i < kFrames; ++i)
    ASSERT_EQ(producer.push(video_buffer(layout, i + 1), i), GST_FLOW_OK);
  ASSERT_TRUE(consumer.collector().wait_frames(kFrames, kWait)) << producer.pipeline().errors();
  EXPECT_TRUE(watch.buffer_seen);
  EXPECT_GE(watch.allocation_queries.load(), 1) << "appsrc asked for no allocation";
  EXPECT_EQ(watch.generation_at_first_buffer.load(), 1u) << "no format before the first buffer";
  guint64 generation = 0;
  Ptr<GstStructure> stats = producer.stats();
  ASSERT_TRUE(stats && gst_structure_get_uint64(stats.get(), "format-generation", &generation));
  EXPECT_EQ(generation, 1u) << text_of(stats.get());
  const std::vector<Received> got = consumer.collector().frames();
  for (int i = 0; i < kFrames; ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    EXPECT_EQ(check_video_frame(got[i], layout, i + 1), "");
  }
}

struct TensorCase {
  DTypeInfo type;
  std::vector<gint64> shape;
};

std::vector<TensorCase> tensor_cases() {
  // Odd sizes so no dimension hides another; every dtype at every rank.
  const std::vector<std::vector<gint64>> shapes = {{37}, {5, 7}, {3, 6, 5}, {2, 3, 4, 5}};
  std::vector<TensorCase> cases;
  for (const DTypeInfo& t : all_dtypes())
    for (const auto& s : shapes) cases.push_back({t, s});
  return cases;
}

class TensorRoundTrip : public ElementTest, public ::testing::WithParamInterface<TensorCase> {};

TEST_P(TensorRoundTrip, CapsMetaAndBytes) {
  const TensorFrame frame{GetParam().type, GetParam().shape};
  Ptr<GstCaps> caps = frame.caps();
  Producer producer(socket());
  Consumer consumer(socket());
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait)) << consumer.pipeline().errors();
  for (int i = 0; i < kFrames; ++i) ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);
  ASSERT_TRUE(consumer.collector().wait_frames(kFrames, kWait))
      << "got " << consumer.collector().count() << "; " << producer.pipeline().errors()
      << consumer.pipeline().errors();
  const std::vector<Received> got = consumer.collector().frames();
  for (int i = 0; i < kFrames; ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    EXPECT_TRUE(caps_equal(got[i].caps.get(), caps.get()))
        << "sent " << text_of(caps.get()) << "\ngot  " << text_of(got[i].caps.get());
    EXPECT_TRUE(system_memory(got[i].caps.get()));
    EXPECT_FALSE(got[i].has_video_meta) << "a tensor buffer carries no GstVideoMeta";
    EXPECT_EQ(check_tensor_meta(got[i], frame.expected(), i + 1), "");
    EXPECT_EQ(frame.check(got[i], i + 1), "");
  }
  EXPECT_EQ(consumer.pipeline().errors(), "");
}

std::string tensor_name(const ::testing::TestParamInfo<TensorCase>& info) {
  return std::string(info.param.type.name) + "_rank" + std::to_string(info.param.shape.size());
}

INSTANTIATE_TEST_SUITE_P(Tensors, TensorRoundTrip, ::testing::ValuesIn(tensor_cases()),
                         tensor_name);

// A downstream filter written "3:224:224:1" (rank 4, outer 1) accepts a producer's "3:224:224".
TEST_F(ElementTest, DimensionsWithTrailingOneIntersect) {
  const TensorFrame frame{all_dtypes()[4], {224, 224, 3}};  // uint8, "3:224:224"
  ASSERT_EQ(frame.dimensions(), "3:224:224");
  Ptr<GstCaps> caps = frame.caps();
  Producer producer(socket());
  Consumer consumer(socket(), "mode=every-frame",
                    "capsfilter caps=\"other/tensors,format=static,num_tensors=1,types=uint8,"
                    "dimensions=(string)3:224:224:1\"");
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait)) << consumer.pipeline().errors();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(producer.push(frame.buffer(i + 1), i), GST_FLOW_OK);
  ASSERT_TRUE(consumer.collector().wait_frames(3, kWait)) << consumer.pipeline().errors();
  for (const Received& r : consumer.collector().frames()) {
    const GstStructure* s = gst_caps_get_structure(r.caps.get(), 0);
    const char* dims = gst_structure_get_string(s, "dimensions");
    EXPECT_STREQ(dims, "3:224:224:1") << text_of(r.caps.get());
    EXPECT_EQ(frame.check(r, r.seq()), "");
    EXPECT_EQ(check_tensor_meta(r, frame.expected(), r.seq()), "");
  }
  EXPECT_EQ(consumer.pipeline().errors(), "");
}

// On a CUDA channel the sink wants CUDA memory first, whatever order the caps query's filter
// lists: cudaupload offers its input's system memory first and would otherwise pass it through
// (leaving the upload to the sink, from pageable memory). A host channel offers no CUDA memory.
TEST_F(ElementTest, SinkPrefersCudaMemoryOnCudaChannels) {
  Ptr<GstCaps> filter = caps_from(
      "video/x-raw,format=NV12,width=64,height=48; "
      "video/x-raw(memory:CUDAMemory),format=NV12,width=64,height=48");
  for (const char* mode : {"auto", "vmm", "legacy", "host"}) {
    SCOPED_TRACE(std::string("ipc-mode=") + mode);
    Ptr<GstElement> sink(gst_element_factory_make(sink_factory(), nullptr));
    ASSERT_TRUE(sink);
    gst_util_set_object_arg(G_OBJECT(sink.get()), "ipc-mode", mode);
    Ptr<GstPad> pad(gst_element_get_static_pad(sink.get(), "sink"));
    Ptr<GstCaps> got(gst_pad_query_caps(pad.get(), filter.get()));
    ASSERT_GT(gst_caps_get_size(got.get()), 0u) << text_of(got.get());
    const bool cuda_first = !system_memory(got.get());
    EXPECT_EQ(cuda_first, std::string(mode) != "host") << text_of(got.get());
    if (std::string(mode) == "host") {
      EXPECT_EQ(gst_caps_get_size(got.get()), 1u) << text_of(got.get());
    }
  }
}

}  // namespace
}  // namespace cudaipc::testing::gst
