// Metas through cudaipcsink ipc-mode=host -> cudaipcsrc in one process (docs/metas.md): every
// kind GStreamer has in the version built against, round-tripped field by field with values taken
// from the frame's index; records the source cannot attach or that are malformed are counted and
// their frames still flow; metas bigger than meta-size are left out and counted; forward-metas
// filters on both sides.
#include <cstring>
#include <string>
#include <vector>

#include "cudaipc/metas.hpp"
#include "cudaipc/producer.hpp"
#include "element_harness.hpp"
#include "meta_round_trip.hpp"

#ifdef CUDAIPC_HAVE_ANALYTICS
#include <gst/analytics/analytics.h>
#endif

namespace cudaipc::testing::gst {
namespace {

void add_custom(GstBuffer* buf, int i) {
  test_custom_info("test-frame-meta");
  GstCustomMeta* m = gst_buffer_add_custom_meta(buf, "test-frame-meta");
  GstStructure* s = gst_custom_meta_get_structure(m);
  const std::string text = "frame-" + std::to_string(i);
  gst_structure_set(s, "index", G_TYPE_INT, i, "big", G_TYPE_UINT64,
                    G_GUINT64_CONSTANT(1) << 40 | i, "ratio", G_TYPE_DOUBLE, i / 4.0, "odd",
                    G_TYPE_BOOLEAN, i % 2 == 1, "name", G_TYPE_STRING, text.c_str(), "fraction",
                    GST_TYPE_FRACTION, i + 1, 97, nullptr);
}

std::string check_custom(GstBuffer* buf, int i) {
  GstCustomMeta* m = gst_buffer_get_custom_meta(buf, "test-frame-meta");
  if (!m) return "no custom meta";
  GstStructure* s = gst_custom_meta_get_structure(m);
  gint index = -1;
  guint64 big = 0;
  gdouble ratio = -1;
  gboolean odd = FALSE;
  gint num = 0, den = 0;
  const gchar* name = gst_structure_get_string(s, "name");
  if (!gst_structure_get_int(s, "index", &index) || index != i)
    return "index " + std::to_string(index) + " in " + text_of(s);
  if (!gst_structure_get_uint64(s, "big", &big) || big != (G_GUINT64_CONSTANT(1) << 40 | i))
    return "big in " + text_of(s);
  if (!gst_structure_get_double(s, "ratio", &ratio) || ratio != i / 4.0) return "ratio";
  if (!gst_structure_get_boolean(s, "odd", &odd) || (odd != FALSE) != (i % 2 == 1)) return "odd";
  if (!name || std::string(name) != "frame-" + std::to_string(i)) return "name";
  if (!gst_structure_get_fraction(s, "fraction", &num, &den) || num != i + 1 || den != 97)
    return "fraction in " + text_of(s);
  return "";
}

void add_reference(GstBuffer* buf, int i) {
  Ptr<GstCaps> caps = caps_from("timestamp/x-test-clock");
  gst_buffer_add_reference_timestamp_meta(buf, caps.get(), 1000000u * i + 7, 33u * i);
}

std::string check_reference(GstBuffer* buf, int i) {
  Ptr<GstCaps> caps = caps_from("timestamp/x-test-clock");
  GstReferenceTimestampMeta* r = gst_buffer_get_reference_timestamp_meta(buf, caps.get());
  if (!r) return "no reference timestamp";
  if (r->timestamp != 1000000u * i + 7 || r->duration != 33u * i) return "reference timestamp";
  return "";
}

TEST_F(ElementTest, CustomAndReferenceTimestampMetasCrossEveryFrame) {
  Ptr<GstStructure> sink_stats, src_stats;
  round_trip(
      socket(), "", "",
      [](GstBuffer* buf, int i) {
        add_custom(buf, i);
        add_reference(buf, i);
      },
      [](GstBuffer* buf, int i) {
        std::string why = check_custom(buf, i);
        return why.empty() ? check_reference(buf, i) : why;
      },
      &sink_stats, &src_stats);
  EXPECT_EQ(stat(sink_stats, "metas-sent"), 2u * kFrames);
  EXPECT_EQ(stat(src_stats, "metas-received"), 2u * kFrames);
  EXPECT_EQ(stat(src_stats, "metas-bad"), 0u);
  EXPECT_EQ(stat(src_stats, "metas-unknown"), 0u);
}

// forward-metas on the sink sends only what it names; on the source, attaches only that.
TEST_F(ElementTest, ForwardMetasFiltersOnBothSides) {
  Ptr<GstStructure> sink_stats, src_stats;
  round_trip(
      socket(), "forward-metas=test-frame-meta", "",
      [](GstBuffer* buf, int i) {
        add_custom(buf, i);
        add_reference(buf, i);
      },
      [](GstBuffer* buf, int i) {
        std::string why = check_custom(buf, i);
        if (why.empty() && check_reference(buf, i).empty()) why = "the reference crossed";
        return why;
      },
      &sink_stats, &src_stats);
  EXPECT_EQ(stat(sink_stats, "metas-sent"), 1u * kFrames);
  round_trip(
      dir_.file("s2"), "", "forward-metas=GstReferenceTimestampMetaAPI",
      [](GstBuffer* buf, int i) {
        add_custom(buf, i);
        add_reference(buf, i);
      },
      [](GstBuffer* buf, int i) {
        std::string why = check_reference(buf, i);
        if (why.empty() && gst_buffer_get_custom_meta(buf, "test-frame-meta"))
          why = "the custom meta was attached";
        return why;
      },
      &sink_stats, &src_stats);
  EXPECT_EQ(stat(src_stats, "metas-filtered"), 1u * kFrames);
  EXPECT_EQ(stat(src_stats, "metas-received"), 1u * kFrames);
}

// A meta larger than meta-size is left out with one warning and counted; a smaller one on the
// same buffer still crosses, and so does the frame.
TEST_F(ElementTest, MetaLargerThanTheAreaIsLeftOutAndCounted) {
  Ptr<GstStructure> sink_stats, src_stats;
  round_trip(
      socket(), "meta-size=512", "",
      [](GstBuffer* buf, int i) {
        test_custom_info("test-big-meta");
        GstCustomMeta* big = gst_buffer_add_custom_meta(buf, "test-big-meta");
        gst_structure_set(gst_custom_meta_get_structure(big), "blob", G_TYPE_STRING,
                          std::string(2000, 'x').c_str(), nullptr);
        add_reference(buf, i);
      },
      [](GstBuffer* buf, int i) {
        std::string why = check_reference(buf, i);
        if (why.empty() && gst_buffer_get_custom_meta(buf, "test-big-meta"))
          why = "the oversized meta crossed";
        return why;
      },
      &sink_stats, &src_stats);
  EXPECT_EQ(stat(sink_stats, "metas-oversized"), 1u * kFrames);
  EXPECT_EQ(stat(sink_stats, "metas-sent"), 1u * kFrames);
  EXPECT_EQ(stat(sink_stats, "published"), 1u * kFrames);
}

// Records this process cannot attach (an unknown kind) or that are malformed are counted, the
// good records beside them are attached, and every frame flows. Played by a core producer, which
// writes whatever bytes it likes.
TEST_F(ElementTest, UnknownAndMalformedRecordsAreCountedAndFramesFlow) {
  const TensorFrame& frame = frame_kind();
  ProducerOptions po;
  po.path = socket();
  po.meta_size = 4096;
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
  std::vector<std::uint8_t> area(4096);
  for (int i = 1; i <= kFrames; ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    Ptr<GstBuffer> ref(frame.buffer(i));
    gst_buffer_extract(ref.get(), 0, pixels.data(), pixels.size());
    metas::AreaWriter w(area.data(), area.size());
    const std::uint8_t junk[16] = {1, 2, 3};
    ASSERT_TRUE(w.add_record(static_cast<metas::RecordKind>(99), "FromTheFutureAPI", junk, 16));
    // A custom record whose one field claims more bytes than the record has.
    std::uint8_t bad[24] = {};
    const std::uint32_t one = 1, huge = 0xfffffff0u;
    std::memcpy(bad, &one, 4);
    std::memcpy(bad + 8, &huge, 4);
    ASSERT_TRUE(w.add_record(metas::RecordKind::custom, "test-bad-meta", bad, sizeof bad));
    std::uint8_t* body = w.begin_record(metas::RecordKind::custom, "test-good-meta", 256);
    ASSERT_NE(body, nullptr);
    metas::CustomWriter cw(body, 256);
    ASSERT_TRUE(cw.add_int64("index", i));
    w.commit_record(cw.finish());
    FrameInfo info;
    info.metas = area.data();
    info.metas_size = static_cast<std::uint32_t>(w.size());
    ASSERT_EQ(producer.publish(pixels.data(), pixels.size(), info), PublishStatus::published);
    Ptr<GstSample> sample = consumer.pull();
    ASSERT_TRUE(sample) << consumer.pipeline().errors();
    GstBuffer* buf = gst_sample_get_buffer(sample.get());
    EXPECT_EQ(frame.check(Collector::copy_out(sample.get()), i), "");
    GstCustomMeta* good = gst_buffer_get_custom_meta(buf, "test-good-meta");
    ASSERT_NE(good, nullptr);
    gint64 index = 0;
    EXPECT_TRUE(gst_structure_get_int64(gst_custom_meta_get_structure(good), "index", &index));
    EXPECT_EQ(index, i);
    EXPECT_EQ(gst_buffer_get_custom_meta(buf, "test-bad-meta"), nullptr);
  }
  Ptr<GstStructure> s = consumer.stats();
  EXPECT_EQ(stat(s, "metas-unknown"), 1u * kFrames);
  EXPECT_EQ(stat(s, "metas-bad"), 1u * kFrames);
  EXPECT_EQ(stat(s, "metas-received"), 1u * kFrames);
  // One warning names the malformed meta; the pipeline plays on.
  Ptr<GstMessage> warning = consumer.pipeline().pop(GST_MESSAGE_WARNING, Ms(1000));
  ASSERT_TRUE(warning);
  GError* err = nullptr;
  gst_message_parse_warning(warning.get(), &err, nullptr);
  const std::string text = err ? err->message : "";
  g_clear_error(&err);
  EXPECT_NE(text.find("test-bad-meta"), std::string::npos) << text;
  EXPECT_EQ(consumer.pipeline().errors(), "");
}

#if GST_CHECK_VERSION(1, 24, 0)
// A meta of the test's own with serialize/deserialize functions crosses as GStreamer's own
// serialization, as unixfdsink sends it.
struct TestSerialMeta {
  GstMeta meta;
  guint32 value;
};

gboolean serial_init(GstMeta* meta, gpointer, GstBuffer*) {
  reinterpret_cast<TestSerialMeta*>(meta)->value = 0;
  return TRUE;
}
gboolean serial_serialize(const GstMeta* meta, GstByteArrayInterface* data, guint8* version) {
  *version = 0;
  guint8* p = gst_byte_array_interface_append(data, 4);
  if (!p) return FALSE;
  GST_WRITE_UINT32_LE(p, reinterpret_cast<const TestSerialMeta*>(meta)->value);
  return TRUE;
}
GstMeta* serial_deserialize(const GstMetaInfo* info, GstBuffer* buffer, const guint8* data,
                            gsize size, guint8 version) {
  if (version != 0 || size != 4) return nullptr;
  auto* m = reinterpret_cast<TestSerialMeta*>(gst_buffer_add_meta(buffer, info, nullptr));
  m->value = GST_READ_UINT32_LE(data);
  return &m->meta;
}

const GstMetaInfo* serial_info() {
  static const GstMetaInfo* info = [] {
    const gchar* tags[] = {nullptr};
    GType api = gst_meta_api_type_register("TestSerialMetaAPI", tags);
    GstMetaInfo* i = gst_meta_info_new(api, "TestSerialMeta", sizeof(TestSerialMeta));
    i->init_func = serial_init;
    i->serialize_func = serial_serialize;
    i->deserialize_func = serial_deserialize;
    return gst_meta_info_register(i);
  }();
  return info;
}

TEST_F(ElementTest, SerializableMetaCrossesAsGStreamerSerializesIt) {
  Ptr<GstStructure> src_stats;
  round_trip(
      socket(), "", "",
      [](GstBuffer* buf, int i) {
        auto* m =
            reinterpret_cast<TestSerialMeta*>(gst_buffer_add_meta(buf, serial_info(), nullptr));
        m->value = 0xC0DE0000u + i;
      },
      [](GstBuffer* buf, int i) -> std::string {
        auto* m = reinterpret_cast<TestSerialMeta*>(gst_buffer_get_meta(buf, serial_info()->api));
        if (!m) return "no serialized meta";
        if (m->value != 0xC0DE0000u + i) return "value " + std::to_string(m->value);
        return "";
      },
      nullptr, &src_stats);
  EXPECT_EQ(stat(src_stats, "metas-received"), 1u * kFrames);
}
#endif

#ifdef CUDAIPC_HAVE_ANALYTICS
// Every mtd kind the version has, with values from the frame's index, and the relations between
// them; read back field by field.
void add_analytics(GstBuffer* buf, int i) {
  GstAnalyticsRelationMeta* rmeta = gst_buffer_add_analytics_relation_meta(buf);
  GstAnalyticsODMtd od;
  ASSERT_TRUE(gst_analytics_relation_meta_add_od_mtd(rmeta, g_quark_from_string("ball"), i, 2 * i,
                                                     10 + i, 20 + i, 0.5f + i / 1000.f, &od));
  GQuark classes[] = {g_quark_from_string("ball"), g_quark_from_string("background")};
  gfloat levels[] = {0.9f - i / 100.f, 0.1f + i / 100.f};
  GstAnalyticsClsMtd cls;
  ASSERT_TRUE(gst_analytics_relation_meta_add_cls_mtd(rmeta, 2, levels, classes, &cls));
  GstAnalyticsTrackingMtd trk;
  ASSERT_TRUE(gst_analytics_relation_meta_add_tracking_mtd(rmeta, 1000 + i, 5u * i, &trk));
  gst_analytics_tracking_mtd_update_last_seen(&trk, 6u * i);
  if (i % 3 == 0) gst_analytics_tracking_mtd_set_lost(&trk);
  ASSERT_TRUE(gst_analytics_relation_meta_set_relation(rmeta, GST_ANALYTICS_REL_TYPE_IS_PART_OF,
                                                       cls.id, od.id));
  ASSERT_TRUE(gst_analytics_relation_meta_set_relation(rmeta, GST_ANALYTICS_REL_TYPE_CONTAIN, od.id,
                                                       cls.id));
  ASSERT_TRUE(gst_analytics_relation_meta_set_relation(rmeta, GST_ANALYTICS_REL_TYPE_RELATE_TO,
                                                       od.id, trk.id));
#if GST_CHECK_VERSION(1, 26, 0)
  GstAnalyticsODMtd oriented;
  ASSERT_TRUE(gst_analytics_relation_meta_add_oriented_od_mtd(
      rmeta, g_quark_from_string("tilted"), 3 * i, 4 * i, 30, 40, 0.25f * i, 0.75f, &oriented));
  // A GRAY8 mask of 8x4 with 12-byte rows, its bytes from the frame index.
  GstBuffer* mask = gst_buffer_new_allocate(nullptr, 12 * 4, nullptr);
  GstMapInfo map;
  gst_buffer_map(mask, &map, GST_MAP_WRITE);
  for (gsize k = 0; k < map.size; ++k) map.data[k] = static_cast<guint8>(k * 3 + i);
  gst_buffer_unmap(mask, &map);
  gsize offsets[GST_VIDEO_MAX_PLANES] = {0};
  gint strides[GST_VIDEO_MAX_PLANES] = {12};
  gst_buffer_add_video_meta_full(mask, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_FORMAT_GRAY8, 8, 4, 1,
                                 offsets, strides);
  guint regions[] = {7, static_cast<guint>(100 + i)};
  GstAnalyticsSegmentationMtd seg;
  ASSERT_TRUE(gst_analytics_relation_meta_add_segmentation_mtd(
      rmeta, mask, GST_SEGMENTATION_TYPE_INSTANCE, 2, regions, i, -i, 80, 40, &seg));  // takes it
  ASSERT_TRUE(gst_analytics_relation_meta_set_relation(rmeta, GST_ANALYTICS_REL_TYPE_RELATE_TO,
                                                       seg.id, od.id));
#endif
}

std::string check_analytics(GstBuffer* buf, int i) {
  GstAnalyticsRelationMeta* rmeta = gst_buffer_get_analytics_relation_meta(buf);
  if (!rmeta) return "no analytics meta";
  const gsize want = GST_CHECK_VERSION(1, 26, 0) ? 5 : 3;
  if (gst_analytics_relation_get_length(rmeta) != want)
    return std::to_string(gst_analytics_relation_get_length(rmeta)) + " mtds";
  GstAnalyticsODMtd od;
  if (!gst_analytics_relation_meta_get_od_mtd(rmeta, 0, &od)) return "mtd 0 is no OD";
  gint x, y, w, h;
  gfloat conf;
  gst_analytics_od_mtd_get_location(&od, &x, &y, &w, &h, &conf);
  if (x != i || y != 2 * i || w != 10 + i || h != 20 + i || conf != 0.5f + i / 1000.f)
    return "OD location";
  if (gst_analytics_od_mtd_get_obj_type(&od) != g_quark_from_string("ball")) return "OD type";
  GstAnalyticsClsMtd cls;
  if (!gst_analytics_relation_meta_get_cls_mtd(rmeta, 1, &cls)) return "mtd 1 is no CLS";
  if (gst_analytics_cls_mtd_get_length(&cls) != 2) return "classes";
  if (gst_analytics_cls_mtd_get_quark(&cls, 1) != g_quark_from_string("background") ||
      gst_analytics_cls_mtd_get_level(&cls, 0) != 0.9f - i / 100.f ||
      gst_analytics_cls_mtd_get_level(&cls, 1) != 0.1f + i / 100.f)
    return "class levels or names";
  GstAnalyticsTrackingMtd trk;
  if (!gst_analytics_relation_meta_get_tracking_mtd(rmeta, 2, &trk)) return "mtd 2 is no track";
  guint64 id;
  GstClockTime first, last;
  gboolean lost;
  gst_analytics_tracking_mtd_get_info(&trk, &id, &first, &last, &lost);
  if (id != 1000u + i || first != 5u * i || last != 6u * i || (lost != FALSE) != (i % 3 == 0))
    return "tracking";
  if (gst_analytics_relation_meta_get_relation(rmeta, 1, 0) != GST_ANALYTICS_REL_TYPE_IS_PART_OF ||
      gst_analytics_relation_meta_get_relation(rmeta, 0, 1) != GST_ANALYTICS_REL_TYPE_CONTAIN ||
      gst_analytics_relation_meta_get_relation(rmeta, 0, 2) != GST_ANALYTICS_REL_TYPE_RELATE_TO ||
      gst_analytics_relation_meta_get_relation(rmeta, 2, 0) != GST_ANALYTICS_REL_TYPE_NONE)
    return "relations";
#if GST_CHECK_VERSION(1, 26, 0)
  GstAnalyticsODMtd oriented;
  if (!gst_analytics_relation_meta_get_od_mtd(rmeta, 3, &oriented)) return "mtd 3 is no OD";
  gfloat r;
  gst_analytics_od_mtd_get_oriented_location(&oriented, &x, &y, &w, &h, &r, &conf);
  if (x != 3 * i || y != 4 * i || w != 30 || h != 40 || r != 0.25f * i || conf != 0.75f)
    return "oriented OD";
  GstAnalyticsSegmentationMtd seg;
  if (!gst_analytics_relation_meta_get_segmentation_mtd(rmeta, 4, &seg)) return "no segmentation";
  gint mx, my;
  guint mw, mh;
  Ptr<GstBuffer> mask(gst_analytics_segmentation_mtd_get_mask(&seg, &mx, &my, &mw, &mh));
  if (!mask || mx != i || my != -i || mw != 80 || mh != 40) return "mask location";
  if (gst_analytics_segmentation_mtd_get_region_count(&seg) != 2 ||
      gst_analytics_segmentation_mtd_get_region_id(&seg, 1) != 100u + static_cast<guint>(i))
    return "regions";
  GstVideoMeta* vm = gst_buffer_get_video_meta(mask.get());
  if (!vm || vm->format != GST_VIDEO_FORMAT_GRAY8 || vm->width != 8 || vm->height != 4 ||
      vm->stride[0] != 12)
    return "mask layout";
  GstMapInfo map;
  gst_buffer_map(mask.get(), &map, GST_MAP_READ);
  std::string why;
  for (gsize k = 0; k < 48 && why.empty(); ++k)
    if (map.data[vm->offset[0] + k] != static_cast<guint8>(k * 3 + i)) why = "mask byte";
  gst_buffer_unmap(mask.get(), &map);
  if (!why.empty()) return why;
  if (gst_analytics_relation_meta_get_relation(rmeta, 4, 0) != GST_ANALYTICS_REL_TYPE_RELATE_TO)
    return "segmentation relation";
#endif
  return "";
}

TEST_F(ElementTest, AnalyticsRelationMetaCrossesFieldByField) {
  Ptr<GstStructure> src_stats;
  round_trip(socket(), "", "", add_analytics, check_analytics, nullptr, &src_stats);
  EXPECT_EQ(stat(src_stats, "metas-received"), 1u * kFrames);
  EXPECT_EQ(stat(src_stats, "metas-unknown"), 0u);
}
#endif

#if defined(CUDAIPC_HAVE_ANALYTICS) && GST_CHECK_VERSION(1, 26, 0)
struct TensorSpec {
  const char* id;
  GstTensorDataType type;
  std::vector<gsize> dims;
  gsize element;
};

const std::vector<TensorSpec>& tensor_specs() {
  static const std::vector<TensorSpec> specs = {
      {"boxes", GST_TENSOR_DATA_TYPE_FLOAT32, {1, 10, 4}, 4},
      {"classes", GST_TENSOR_DATA_TYPE_UINT8, {3}, 1},
      {"scores", GST_TENSOR_DATA_TYPE_INT64, {2, 2}, 8},
      {"count", GST_TENSOR_DATA_TYPE_FLOAT16, {5}, 2},
  };
  return specs;
}

void add_tensors(GstBuffer* buf, int i) {
  const auto& specs = tensor_specs();
  GstTensor** tensors = g_new0(GstTensor*, specs.size());
  for (gsize t = 0; t < specs.size(); ++t) {
    gsize n = specs[t].element;
    for (gsize d : specs[t].dims) n *= d;
    GstBuffer* data = gst_buffer_new_allocate(nullptr, n, nullptr);
    GstMapInfo map;
    gst_buffer_map(data, &map, GST_MAP_WRITE);
    for (gsize k = 0; k < n; ++k) map.data[k] = static_cast<guint8>(k + 17 * t + i);
    gst_buffer_unmap(data, &map);
    std::vector<gsize> dims = specs[t].dims;
    tensors[t] = gst_tensor_new_simple(
        g_quark_from_string(specs[t].id), specs[t].type, data,
        t == 2 ? GST_TENSOR_DIM_ORDER_COL_MAJOR : GST_TENSOR_DIM_ORDER_ROW_MAJOR, dims.size(),
        dims.data());
  }
  gst_tensor_meta_set(gst_buffer_add_tensor_meta(buf), specs.size(), tensors);
}

std::string check_tensors(GstBuffer* buf, int i) {
  GstTensorMeta* m = gst_buffer_get_tensor_meta(buf);
  const auto& specs = tensor_specs();
  if (!m || m->num_tensors != specs.size()) return "tensor meta";
  for (gsize t = 0; t < specs.size(); ++t) {
    const GstTensor* x = gst_tensor_meta_get(m, t);
    if (x->id != g_quark_from_string(specs[t].id) || x->data_type != specs[t].type)
      return "tensor " + std::to_string(t) + " id or type";
    if (x->dims_order != (t == 2 ? GST_TENSOR_DIM_ORDER_COL_MAJOR : GST_TENSOR_DIM_ORDER_ROW_MAJOR))
      return "dims order";
    if (x->num_dims != specs[t].dims.size()) return "rank";
    gsize n = specs[t].element;
    for (gsize d = 0; d < x->num_dims; ++d) {
      if (x->dims[d] != specs[t].dims[d]) return "dims";
      n *= x->dims[d];
    }
    GstMapInfo map;
    if (!gst_buffer_map(x->data, &map, GST_MAP_READ)) return "map";
    std::string why = map.size == n ? "" : "data size";
    for (gsize k = 0; k < map.size && why.empty(); ++k)
      if (map.data[k] != static_cast<guint8>(k + 17 * t + i)) why = "data byte";
    gst_buffer_unmap(x->data, &map);
    if (!why.empty()) return "tensor " + std::to_string(t) + ": " + why;
  }
  return "";
}

TEST_F(ElementTest, TensorMetaCrossesFieldByField) {
  Ptr<GstStructure> src_stats;
  round_trip(socket(), "", "", add_tensors, check_tensors, nullptr, &src_stats);
  EXPECT_EQ(stat(src_stats, "metas-received"), 1u * kFrames);
}
#endif

}  // namespace
}  // namespace cudaipc::testing::gst
