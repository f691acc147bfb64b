// Metas through cudaipcsink ipc-mode=host -> cudaipcsrc in one process, frame by frame: the
// helpers the meta suites share.
#pragma once

#include <string>

#include "element_harness.hpp"

namespace cudaipc::testing::gst {

constexpr Ms kWait{5000};
constexpr int kFrames = 12;

inline const TensorFrame& frame_kind() {
  static const TensorFrame f{all_dtypes()[4], {32}};
  return f;
}

inline guint64 stat(const Ptr<GstStructure>& s, const char* field) {
  guint64 v = 0;
  if (s) gst_structure_get_uint64(s.get(), field, &v);
  return v;
}

inline const GstMetaInfo* test_custom_info(const char* name) {
  if (const GstMetaInfo* info = gst_meta_get_info(name)) return info;
  const gchar* tags[] = {nullptr};
  return gst_meta_register_custom(name, tags, nullptr, nullptr, nullptr);
}

// Publishes kFrames frames with `decorate` adding metas to frame i, and checks each one the
// consumer pulls with `check`. The frame's bytes are checked too.
template <typename Decorate, typename Check>
void round_trip(const std::string& socket, const std::string& sink_props,
                const std::string& src_props, Decorate decorate, Check check,
                Ptr<GstStructure>* sink_stats = nullptr, Ptr<GstStructure>* src_stats = nullptr) {
  const TensorFrame& frame = frame_kind();
  Ptr<GstCaps> caps = frame.caps();
  Producer producer(socket, sink_props);
  PullingConsumer consumer(socket, src_props);
  producer.set_caps(caps.get());
  ASSERT_TRUE(producer.start());
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(producer.wait_consumers(1, kWait));
  for (int i = 1; i <= kFrames; ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    GstBuffer* buf = frame.buffer(i);
    decorate(buf, i);
    ASSERT_EQ(producer.push(buf, i - 1), GST_FLOW_OK);
    Ptr<GstSample> sample = consumer.pull();
    ASSERT_TRUE(sample) << consumer.pipeline().errors();
    Received r = Collector::copy_out(sample.get());
    EXPECT_EQ(frame.check(r, i), "");
    EXPECT_EQ(check(gst_sample_get_buffer(sample.get()), i), "");
  }
  if (sink_stats) *sink_stats = producer.stats();
  if (src_stats) *src_stats = consumer.stats();
  EXPECT_EQ(consumer.pipeline().errors(), "");
  EXPECT_EQ(producer.pipeline().errors(), "");
}

}  // namespace cudaipc::testing::gst
