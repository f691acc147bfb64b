// Analytics records reaching a pipeline whose GStreamer has no analytics metas (1.22): cudaipcsrc
// attaches each frame's detections, classifications and tracks as the CudaipcAnalyticsMeta custom
// meta (docs/metas.md, "GStreamer 1.22: analytics as a custom meta"), read here with GStreamer's
// public API only, every value from the frame's index; what it cannot hold (a segmentation,
// a tensors record) is skipped and counted, and one warning on the bus names the GStreamer
// version, what was converted and skipped, and the docs. Forwarded through cudaipcsink, the meta
// crosses again (as an analytics record) and arrives equal. On 1.24+ nothing of this happens: the
// records become GstAnalyticsRelationMeta, as before, without a warning.
#include <cstring>
#include <string>
#include <vector>

#include "cudaipc/metas.hpp"
#include "cudaipc/producer.hpp"
#include "element_harness.hpp"
#include "meta_round_trip.hpp"

namespace cudaipc::testing::gst {
namespace {

#ifdef CUDAIPC_HAVE_ANALYTICS
constexpr bool kAsCustom = false;
#else
constexpr bool kAsCustom = true;
#endif

// Frame i's analytics record: a ball at (i, 2i) of 10+i x 20+i, score i/16, classified and
// tracked (track 1000+i); every third frame also a segmentation, which 1.22 cannot hold.
std::size_t write_analytics(metas::AreaWriter& w, int i) {
  std::uint8_t* body =
      w.begin_record(metas::RecordKind::analytics, "GstAnalyticsRelationMetaAPI", 2048);
  if (!body) return 0;
  metas::AnalyticsWriter aw(body, 2048, 4);
  metas::ObjectDetection od;
  od.x = i, od.y = 2 * i, od.w = 10 + i, od.h = 20 + i, od.confidence = i / 16.f;
  od.label = "ball";
  aw.add_object_detection(0, od);
  const metas::ClassEntry colour[] = {{0.5f, i % 2 ? "red" : "blue"}};
  aw.add_classification(1, colour, 1);
  metas::Tracking t;
  t.tracking_id = 1000 + i, t.first_seen = 1, t.last_seen = i;
  aw.add_tracking(2, t);
  std::uint8_t mask[64] = {};
  if (i % 3 == 0) {
    metas::Segmentation seg;
    seg.w = seg.h = 4, seg.mask_width = seg.mask_height = 4, seg.mask_stride = 16;
    seg.mask_format = 25, seg.mask = mask;
    aw.add_segmentation(3, seg);
  }
  aw.add_relation(0, 1, 4);
  aw.add_relation(1, 0, 2);
  aw.add_relation(0, 2, 8);
  w.commit_record(aw.finish());
  return 1;
}

const GstStructure* member(const GstStructure* s, const char* array, guint i) {
  const GValue* a = s ? gst_structure_get_value(s, array) : nullptr;
  if (!a || !GST_VALUE_HOLDS_ARRAY(a) || i >= gst_value_array_get_size(a)) return nullptr;
  const GValue* v = gst_value_array_get_value(a, i);
  return GST_VALUE_HOLDS_STRUCTURE(v) ? gst_value_get_structure(v) : nullptr;
}

// What an application reads of frame i's meta; "" when it is all there.
std::string check_frame(GstBuffer* buf, int i) {
  GstCustomMeta* m = gst_buffer_get_custom_meta(buf, "CudaipcAnalyticsMeta");
  if (!m) return "no CudaipcAnalyticsMeta";
  const GstStructure* s = gst_custom_meta_get_structure(m);
  const GstStructure* o = member(s, "objects", 0);
  if (!o || member(s, "objects", 1)) return "not one object in " + text_of(s);
  gint x = -1, y = -1, w = -1, h = -1;
  gfloat score = -1;
  if (!gst_structure_get(o, "x", G_TYPE_INT, &x, "y", G_TYPE_INT, &y, "w", G_TYPE_INT, &w, "h",
                         G_TYPE_INT, &h, "score", G_TYPE_FLOAT, &score, nullptr) ||
      x != i || y != 2 * i || w != 10 + i || h != 20 + i || score != i / 16.f)
    return "box or score in " + text_of(s);
  const gchar* label = gst_structure_get_string(o, "label");
  if (!label || std::strcmp(label, "ball") != 0) return "label in " + text_of(s);
  const GstStructure* cls = member(o, "classifications", 0);
  const GValue* labels = cls ? gst_structure_get_value(cls, "labels") : nullptr;
  if (!labels || gst_value_array_get_size(labels) != 1 ||
      std::strcmp(g_value_get_string(gst_value_array_get_value(labels, 0)),
                  i % 2 ? "red" : "blue") != 0)
    return "classification in " + text_of(s);
  const GValue* track = gst_structure_get_value(o, "track");
  guint64 id = 0, last = 0;
  if (!track || !GST_VALUE_HOLDS_STRUCTURE(track) ||
      !gst_structure_get(gst_value_get_structure(track), "id", G_TYPE_UINT64, &id, "last-seen",
                         G_TYPE_UINT64, &last, nullptr) ||
      id != 1000u + i || last != static_cast<guint64>(i))
    return "track in " + text_of(s);
  return "";
}

std::string warning_text(GstMessage* m) {
  GError* err = nullptr;
  gst_message_parse_warning(m, &err, nullptr);
  std::string text = err ? err->message : "";
  g_clear_error(&err);
  return text;
}

TEST_F(ElementTest, AnalyticsRecordsArriveAsACustomMetaWithOneWarning) {
  const TensorFrame& frame = frame_kind();
  ProducerOptions po;
  po.path = socket();
  po.meta_size = 8192;
  cudaipc::Producer producer(po);
  Format f;
  Ptr<GstCaps> caps = frame.caps();
  f.caps = text_of(caps.get());
  f.tensor = make_tensor(DType::uint8, {32});
  producer.set_format(f);
  PullingConsumer consumer(socket(), "");
  ASSERT_TRUE(consumer.start());
  ASSERT_TRUE(poll_until([&] { return producer.consumer_count() == 1; }, kWait));
  std::vector<std::uint8_t> pixels(frame.bytes());
  std::vector<std::uint8_t> area(8192);
  int segmentations = 0;
  for (int i = 1; i <= kFrames; ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    Ptr<GstBuffer> ref(frame.buffer(i));
    gst_buffer_extract(ref.get(), 0, pixels.data(), pixels.size());
    metas::AreaWriter w(area.data(), area.size());
    ASSERT_EQ(write_analytics(w, i), 1u);
    segmentations += i % 3 == 0;
    const std::uint8_t no_tensors[8] = {};  // a tensors record of none: 1.22 has no tensor metas
    ASSERT_TRUE(w.add_record(metas::RecordKind::tensors, "GstTensorMetaAPI", no_tensors, 8));
    FrameInfo info;
    info.metas = area.data();
    info.metas_size = static_cast<std::uint32_t>(w.size());
    ASSERT_EQ(producer.publish(pixels.data(), pixels.size(), info), PublishStatus::published);
    Ptr<GstSample> sample = consumer.pull();
    ASSERT_TRUE(sample) << consumer.pipeline().errors();
    GstBuffer* buf = gst_sample_get_buffer(sample.get());
    EXPECT_EQ(frame.check(Collector::copy_out(sample.get()), i), "");
    if (kAsCustom)
      EXPECT_EQ(check_frame(buf, i), "");
    else
      EXPECT_EQ(gst_buffer_get_custom_meta(buf, "CudaipcAnalyticsMeta"), nullptr);
  }
  Ptr<GstStructure> s = consumer.stats();
  EXPECT_EQ(stat(s, "metas-bad"), 0u);
  Ptr<GstMessage> warning = consumer.pipeline().pop(GST_MESSAGE_WARNING, Ms(kAsCustom ? 1000 : 0));
  if (!kAsCustom) {
    EXPECT_FALSE(warning) << "1.24+ warns of nothing: " << warning_text(warning.get());
    return;
  }
  // The tensors records, the segmentations; one meta a frame.
  EXPECT_EQ(stat(s, "metas-received"), 1u * kFrames);
  EXPECT_EQ(stat(s, "metas-unknown"), 1u * kFrames + segmentations);
  ASSERT_TRUE(warning);
  const std::string text = warning_text(warning.get());
  guint major = 0, minor = 0, micro = 0, nano = 0;
  gst_version(&major, &minor, &micro, &nano);
  for (const std::string& part :
       {"GStreamer " + std::to_string(major) + "." + std::to_string(minor),
        std::string("no analytics metas"), std::string("\"CudaipcAnalyticsMeta\""),
        std::string("segmentation masks are skipped"), std::string("no tensor metas"),
        std::string("docs/metas.md")})
    EXPECT_NE(text.find(part), std::string::npos) << part << " in: " << text;
  EXPECT_FALSE(consumer.pipeline().pop(GST_MESSAGE_WARNING, Ms(0))) << "warned more than once";
  EXPECT_EQ(consumer.pipeline().errors(), "");
}

// A 1.22 pipeline forwarding the meta to another cudaipcsink: it leaves as an analytics record
// and arrives as the same meta (on 1.24+ it is an application's custom meta: it crosses as one).
TEST_F(ElementTest, ForwardedMetaCrossesAgainEqual) {
  const gchar* tags[] = {nullptr};
  if (!gst_meta_get_info("CudaipcAnalyticsMeta"))
    gst_meta_register_custom("CudaipcAnalyticsMeta", tags, nullptr, nullptr, nullptr);
  std::vector<Ptr<GstStructure>> sent;
  Ptr<GstStructure> src_stats;
  round_trip(
      socket(), "", "",
      [&](GstBuffer* buf, int i) {
        // What cudaipcsrc attached on the way in (frame i's record), as an application holds it.
        GstCustomMeta* m = gst_buffer_add_custom_meta(buf, "CudaipcAnalyticsMeta");
        GstStructure* s = gst_custom_meta_get_structure(m);
        gst_structure_set(s, "version", G_TYPE_UINT, 1u, nullptr);
        GstStructure* o = gst_structure_new("object", "x", G_TYPE_INT, i, "y", G_TYPE_INT, 2 * i,
                                            "w", G_TYPE_INT, 10 + i, "h", G_TYPE_INT, 20 + i,
                                            "label", G_TYPE_STRING, "ball", "score", G_TYPE_FLOAT,
                                            i / 16.f, "rotation", G_TYPE_FLOAT, 0.f, nullptr);
        GValue labels = G_VALUE_INIT, scores = G_VALUE_INIT, v = G_VALUE_INIT;
        g_value_init(&labels, GST_TYPE_ARRAY);
        g_value_init(&scores, GST_TYPE_ARRAY);
        g_value_init(&v, G_TYPE_STRING);
        g_value_set_string(&v, i % 2 ? "red" : "blue");
        gst_value_array_append_and_take_value(&labels, &v);
        g_value_init(&v, G_TYPE_FLOAT);
        g_value_set_float(&v, 0.5f);
        gst_value_array_append_and_take_value(&scores, &v);
        GstStructure* cls = gst_structure_new_empty("classification");
        gst_structure_take_value(cls, "labels", &labels);
        gst_structure_take_value(cls, "scores", &scores);
        GValue own = G_VALUE_INIT, objects = G_VALUE_INIT, none = G_VALUE_INIT;
        g_value_init(&own, GST_TYPE_ARRAY);
        g_value_init(&v, GST_TYPE_STRUCTURE);
        g_value_take_boxed(&v, cls);
        gst_value_array_append_and_take_value(&own, &v);
        gst_structure_take_value(o, "classifications", &own);
        GstStructure* track =
            gst_structure_new("track", "id", G_TYPE_UINT64, static_cast<guint64>(1000 + i),
                              "first-seen", G_TYPE_UINT64, guint64{1}, "last-seen", G_TYPE_UINT64,
                              static_cast<guint64>(i), "lost", G_TYPE_BOOLEAN, FALSE, nullptr);
        gst_structure_set(o, "track", GST_TYPE_STRUCTURE, track, nullptr);
        gst_structure_free(track);
        g_value_init(&objects, GST_TYPE_ARRAY);
        g_value_init(&v, GST_TYPE_STRUCTURE);
        g_value_take_boxed(&v, o);
        gst_value_array_append_and_take_value(&objects, &v);
        gst_structure_take_value(s, "objects", &objects);
        for (const char* empty : {"classifications", "tracks"}) {
          g_value_init(&none, GST_TYPE_ARRAY);
          gst_structure_take_value(s, empty, &none);
        }
        sent.emplace_back(gst_structure_copy(s));
      },
      [&](GstBuffer* buf, int i) -> std::string {
        if (std::string why = check_frame(buf, i); !why.empty()) return why;
        const GstStructure* got =
            gst_custom_meta_get_structure(gst_buffer_get_custom_meta(buf, "CudaipcAnalyticsMeta"));
        if (!gst_structure_is_equal(got, sent[i - 1].get()))
          return "sent " + text_of(sent[i - 1].get()) + ", got " + text_of(got);
        return "";
      },
      nullptr, &src_stats);
  EXPECT_EQ(stat(src_stats, "metas-received"), 1u * kFrames);
  EXPECT_EQ(stat(src_stats, "metas-unknown"), 0u);
}

}  // namespace
}  // namespace cudaipc::testing::gst
