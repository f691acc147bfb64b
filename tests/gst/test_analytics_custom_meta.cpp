// Analytics records as the CudaipcAnalyticsMeta custom meta (gst/metas/analytics_custom_meta.h,
// docs/metas.md "GStreamer 1.22: analytics as a custom meta"): a record's detections,
// classifications and tracks read back field by field with GStreamer's public API only, as an
// application does; what the meta cannot hold skipped and counted; the meta sent on as an
// analytics record that decodes to the same meta; hostile records (counts and offsets out of
// range, labels that are not UTF-8 or hold a NUL, every truncation and many corruptions) refused
// with a reason, never a crash or a GLib critical (G_DEBUG=fatal-criticals). The conversion is
// tested directly on every GStreamer; the decoder and encoder use it only where GStreamer has no
// analytics metas (1.22), and on 1.24+ those tests check that nothing changed.
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cudaipc/metas.hpp"
#include "hostile_records.hpp"
#include "metas/analytics_custom_meta.h"
#include "metas/analytics_records.h"
#include "metas/meta_decoder.h"
#include "metas/meta_encoder.h"
#include "metas/meta_filter.h"
#include "metas/tensor_records.h"

namespace cudaipc::gst {
namespace {

constexpr std::size_t kArea = 1 << 14;
// After gst_init: the analytics library registers its meta's type on first use.
bool has_analytics() {
  return analytics_api_type() != 0;
}

class AnalyticsCustomMeta : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }
  void TearDown() override { gst_buffer_unref(buf_); }
  GstBuffer* buf_ = gst_buffer_new();
};

// An analytics record as a model's reply holds it, with one of everything:
//   0 od "ball" (10, 20, 30, 40) 0.75        2 cls red 0.875, blue 0.125 (of 0)
//   1 od "cube" (1, 2, 3, 4) 0.5, rotated    3 cls day 1.0 (of no detection: the frame's)
//   4 track 42 (100 .. 200) of 0             5 track 7 (1 .. 2, lost) of no detection
//   6 segmentation (a mask: no field holds it), and a relation od 0 CONTAIN od 1 (dropped).
std::vector<std::uint8_t> full_body() {
  std::vector<std::uint8_t> body(4096);
  metas::AnalyticsWriter aw(body.data(), body.size(), 7);
  metas::ObjectDetection ball;
  ball.x = 10, ball.y = 20, ball.w = 30, ball.h = 40, ball.confidence = 0.75f, ball.label = "ball";
  metas::ObjectDetection cube;
  cube.x = 1, cube.y = 2, cube.w = 3, cube.h = 4, cube.confidence = 0.5f, cube.label = "cube";
  cube.oriented = true, cube.r = 0.25f;
  EXPECT_EQ(aw.add_object_detection(0, ball), 0);
  EXPECT_EQ(aw.add_object_detection(1, cube), 1);
  const metas::ClassEntry colours[] = {{0.875f, "red"}, {0.125f, "blue"}};
  const metas::ClassEntry day[] = {{1.f, "day"}};
  EXPECT_EQ(aw.add_classification(2, colours, 2), 2);
  EXPECT_EQ(aw.add_classification(3, day, 1), 3);
  metas::Tracking t42;
  t42.tracking_id = 42, t42.first_seen = 100, t42.last_seen = 200;
  metas::Tracking t7;
  t7.tracking_id = 7, t7.first_seen = 1, t7.last_seen = 2, t7.lost = true;
  EXPECT_EQ(aw.add_tracking(4, t42), 4);
  EXPECT_EQ(aw.add_tracking(5, t7), 5);
  std::uint8_t mask[64] = {1, 2, 3};
  metas::Segmentation seg;
  seg.w = seg.h = 4, seg.mask_width = seg.mask_height = 4, seg.mask_stride = 16;
  seg.mask_format = 25, seg.mask = mask;  // GRAY8
  EXPECT_EQ(aw.add_segmentation(6, seg), 6);
  // The classification found through the detection's CONTAIN, the track through RELATE_TO.
  EXPECT_TRUE(aw.add_relation(0, 2, 4));
  EXPECT_TRUE(aw.add_relation(2, 0, 2));
  EXPECT_TRUE(aw.add_relation(0, 4, 8));
  EXPECT_TRUE(aw.add_relation(0, 1, 4));
  body.resize(aw.finish());
  return body;
}

metas::Bytes bytes_of(const std::vector<std::uint8_t>& v) {
  return metas::Bytes{v.data(), v.size()};
}

// A meta area holding `body` as an analytics record.
std::vector<std::uint8_t> area_with(const std::vector<std::uint8_t>& body) {
  std::vector<std::uint8_t> area(kArea);
  metas::AreaWriter w(area.data(), area.size());
  EXPECT_TRUE(
      w.add_record(metas::RecordKind::analytics, kAnalyticsApiName, body.data(), body.size()));
  area.resize(w.size());
  return area;
}

const GstStructure* meta_structure(GstBuffer* buf) {
  GstCustomMeta* m = gst_buffer_get_custom_meta(buf, "CudaipcAnalyticsMeta");
  return m ? gst_custom_meta_get_structure(m) : nullptr;
}

const GstStructure* member(const GstStructure* s, const char* array, guint i) {
  const GValue* a = gst_structure_get_value(s, array);
  if (!a || !GST_VALUE_HOLDS_ARRAY(a) || i >= gst_value_array_get_size(a)) return nullptr;
  const GValue* v = gst_value_array_get_value(a, i);
  return GST_VALUE_HOLDS_STRUCTURE(v) ? gst_value_get_structure(v) : nullptr;
}

guint size_of(const GstStructure* s, const char* array) {
  const GValue* a = gst_structure_get_value(s, array);
  return a && GST_VALUE_HOLDS_ARRAY(a) ? gst_value_array_get_size(a) : G_MAXUINT;
}

std::string text(const GstStructure* s) {
  gchar* t = gst_structure_to_string(s);
  std::string out = t ? t : "(null)";
  g_free(t);
  return out;
}

// "labels" and "scores" of a classification, as "red:0.875 blue:0.125".
std::string classes_of(const GstStructure* c) {
  const GValue* labels = gst_structure_get_value(c, "labels");
  const GValue* scores = gst_structure_get_value(c, "scores");
  if (!labels || !scores || gst_value_array_get_size(labels) != gst_value_array_get_size(scores))
    return "malformed";
  std::string out;
  for (guint j = 0; j < gst_value_array_get_size(labels); ++j) {
    const GValue* l = gst_value_array_get_value(labels, j);
    const GValue* sc = gst_value_array_get_value(scores, j);
    if (!G_VALUE_HOLDS_STRING(l) || !G_VALUE_HOLDS_FLOAT(sc)) return "mistyped";
    out += std::string(j ? " " : "") + g_value_get_string(l) + ":" +
           std::to_string(g_value_get_float(sc)).substr(0, 5);
  }
  return out;
}

// The checks an application makes on the full record's meta, field by field.
void expect_full(const GstStructure* s) {
  ASSERT_NE(s, nullptr);
  SCOPED_TRACE(text(s));
  guint version = 0;
  EXPECT_TRUE(gst_structure_get_uint(s, "version", &version));
  EXPECT_EQ(version, 1u);
  ASSERT_EQ(size_of(s, "objects"), 2u);
  const GstStructure* ball = member(s, "objects", 0);
  const GstStructure* cube = member(s, "objects", 1);
  ASSERT_TRUE(ball && cube);
  EXPECT_TRUE(gst_structure_has_name(ball, "object"));
  gint x = 0, y = 0, w = 0, h = 0;
  gfloat score = 0, rotation = -1;
  ASSERT_TRUE(gst_structure_get(ball, "x", G_TYPE_INT, &x, "y", G_TYPE_INT, &y, "w", G_TYPE_INT, &w,
                                "h", G_TYPE_INT, &h, "score", G_TYPE_FLOAT, &score, "rotation",
                                G_TYPE_FLOAT, &rotation, nullptr));
  EXPECT_EQ(x, 10);
  EXPECT_EQ(y, 20);
  EXPECT_EQ(w, 30);
  EXPECT_EQ(h, 40);
  EXPECT_EQ(score, 0.75f);
  EXPECT_EQ(rotation, 0.f);
  EXPECT_STREQ(gst_structure_get_string(ball, "label"), "ball");
  ASSERT_EQ(size_of(ball, "classifications"), 1u);
  const GstStructure* colours = member(ball, "classifications", 0);
  ASSERT_NE(colours, nullptr);
  EXPECT_TRUE(gst_structure_has_name(colours, "classification"));
  EXPECT_EQ(classes_of(colours), "red:0.875 blue:0.125");
  const GstStructure* track = nullptr;
  ASSERT_TRUE(gst_structure_get(ball, "track", GST_TYPE_STRUCTURE, &track, nullptr));
  guint64 id = 0, first = 0, last = 0;
  gboolean lost = TRUE;
  EXPECT_TRUE(gst_structure_get(track, "id", G_TYPE_UINT64, &id, "first-seen", G_TYPE_UINT64,
                                &first, "last-seen", G_TYPE_UINT64, &last, "lost", G_TYPE_BOOLEAN,
                                &lost, nullptr));
  gst_structure_free(const_cast<GstStructure*>(track));  // gst_structure_get copies it
  EXPECT_EQ(id, 42u);
  EXPECT_EQ(first, 100u);
  EXPECT_EQ(last, 200u);
  EXPECT_FALSE(lost);

  ASSERT_TRUE(gst_structure_get(cube, "x", G_TYPE_INT, &x, "y", G_TYPE_INT, &y, "w", G_TYPE_INT, &w,
                                "h", G_TYPE_INT, &h, "score", G_TYPE_FLOAT, &score, "rotation",
                                G_TYPE_FLOAT, &rotation, nullptr));
  EXPECT_EQ(x, 1);
  EXPECT_EQ(h, 4);
  EXPECT_EQ(score, 0.5f);
  EXPECT_EQ(rotation, 0.25f);
  EXPECT_STREQ(gst_structure_get_string(cube, "label"), "cube");
  EXPECT_EQ(size_of(cube, "classifications"), 0u);
  EXPECT_FALSE(gst_structure_has_field(cube, "track"));

  ASSERT_EQ(size_of(s, "classifications"), 1u);
  EXPECT_EQ(classes_of(member(s, "classifications", 0)), "day:1.000");
  ASSERT_EQ(size_of(s, "tracks"), 1u);
  const GstStructure* t7 = member(s, "tracks", 0);
  ASSERT_NE(t7, nullptr);
  EXPECT_TRUE(
      gst_structure_get(t7, "id", G_TYPE_UINT64, &id, "lost", G_TYPE_BOOLEAN, &lost, nullptr));
  EXPECT_EQ(id, 7u);
  EXPECT_TRUE(lost);
}

TEST_F(AnalyticsCustomMeta, RecordReadsBackFieldByField) {
  const std::vector<std::uint8_t> body = full_body();
  std::uint32_t skipped = 0;
  std::string error;
  ASSERT_TRUE(attach_analytics_as_custom(buf_, bytes_of(body), &skipped, &error)) << error;
  EXPECT_EQ(skipped, 1u);  // the segmentation
  expect_full(meta_structure(buf_));
}

TEST_F(AnalyticsCustomMeta, EmptyRecordIsAnEmptyMeta) {
  std::vector<std::uint8_t> body(256);
  metas::AnalyticsWriter aw(body.data(), body.size(), 0);
  body.resize(aw.finish());
  std::uint32_t skipped = 0;
  std::string error;
  ASSERT_TRUE(attach_analytics_as_custom(buf_, bytes_of(body), &skipped, &error)) << error;
  const GstStructure* s = meta_structure(buf_);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(size_of(s, "objects"), 0u);
  EXPECT_EQ(size_of(s, "classifications"), 0u);
  EXPECT_EQ(size_of(s, "tracks"), 0u);
}

TEST_F(AnalyticsCustomMeta, SentOnAsAnAnalyticsRecordThatDecodesToTheSameMeta) {
  const std::vector<std::uint8_t> body = full_body();
  std::uint32_t skipped = 0;
  std::string error;
  ASSERT_TRUE(attach_analytics_as_custom(buf_, bytes_of(body), &skipped, &error)) << error;
  GstMeta* meta =
      reinterpret_cast<GstMeta*>(gst_buffer_get_custom_meta(buf_, kAnalyticsCustomMetaName));
  std::vector<std::uint8_t> area(kArea);
  metas::AreaWriter w(area.data(), area.size());
  std::uint32_t left_out = 0;
  ASSERT_EQ(encode_analytics_custom(meta, w, &left_out), Encoded::written);
  EXPECT_EQ(left_out, 0u);
  metas::AreaReader reader(area.data(), w.size());
  metas::Record rec;
  ASSERT_TRUE(reader.next(&rec));
  EXPECT_EQ(rec.kind, metas::RecordKind::analytics);
  EXPECT_EQ(rec.name, kAnalyticsApiName);
  // Detections, classifications, tracks; each classification and track linked to its detection
  // as GStreamer links them. The segmentation and the relation between detections are gone.
  metas::AnalyticsView view;
  ASSERT_TRUE(view.parse(rec.body, &error)) << error;
  ASSERT_EQ(view.mtd_count(), 6u);
  const metas::MtdType want[] = {metas::MtdType::object_detection, metas::MtdType::object_detection,
                                 metas::MtdType::classification,   metas::MtdType::classification,
                                 metas::MtdType::tracking,         metas::MtdType::tracking};
  for (std::uint32_t i = 0; i < 6; ++i) {
    metas::Mtd m;
    ASSERT_TRUE(view.mtd(i, &m, &error)) << error;
    EXPECT_EQ(m.type, want[i]) << i;
    if (i == 1) {
      EXPECT_TRUE(m.od.oriented);
      EXPECT_EQ(m.od.r, 0.25f);
    }
  }
  ASSERT_EQ(view.relation_count(), 3u);
  metas::Relation r;
  ASSERT_TRUE(view.relation(0, &r, &error));
  EXPECT_EQ((std::vector<std::uint32_t>{r.from, r.to, r.types}),
            (std::vector<std::uint32_t>{0, 2, 4}));
  ASSERT_TRUE(view.relation(1, &r, &error));
  EXPECT_EQ((std::vector<std::uint32_t>{r.from, r.to, r.types}),
            (std::vector<std::uint32_t>{2, 0, 2}));
  ASSERT_TRUE(view.relation(2, &r, &error));
  EXPECT_EQ((std::vector<std::uint32_t>{r.from, r.to, r.types}),
            (std::vector<std::uint32_t>{0, 4, 8}));

  GstBuffer* again = gst_buffer_new();
  skipped = 0;
  ASSERT_TRUE(attach_analytics_as_custom(again, rec.body, &skipped, &error)) << error;
  EXPECT_EQ(skipped, 0u);
  expect_full(meta_structure(again));
  EXPECT_TRUE(gst_structure_is_equal(meta_structure(again), meta_structure(buf_)))
      << text(meta_structure(again)) << "\n"
      << text(meta_structure(buf_));
  gst_buffer_unref(again);
}

// An application may make the meta itself (on 1.22, to send detections through cudaipcsink):
// entries without the documented fields and types are left out and counted, the rest go.
TEST_F(AnalyticsCustomMeta, ApplicationMadeMetaKeepsItsGoodEntries) {
  const gchar* tags[] = {nullptr};
  if (!gst_meta_get_info(kAnalyticsCustomMetaName))
    gst_meta_register_custom(kAnalyticsCustomMetaName, tags, nullptr, nullptr, nullptr);
  GstCustomMeta* cm = gst_buffer_add_custom_meta(buf_, kAnalyticsCustomMetaName);
  ASSERT_NE(cm, nullptr);
  GstStructure* s = gst_custom_meta_get_structure(cm);
  GstStructure* good = gst_structure_new("object", "x", G_TYPE_INT, 5, "y", G_TYPE_INT, 6, "w",
                                         G_TYPE_INT, 7, "h", G_TYPE_INT, 8, "label", G_TYPE_STRING,
                                         "person", "score", G_TYPE_DOUBLE, 0.5, nullptr);
  GstStructure* no_h = gst_structure_new("object", "x", G_TYPE_INT, 5, "y", G_TYPE_INT, 6, "w",
                                         G_TYPE_INT, 7, nullptr);
  GstStructure* bad_label =
      gst_structure_new("object", "x", G_TYPE_INT, 1, "y", G_TYPE_INT, 1, "w", G_TYPE_INT, 1, "h",
                        G_TYPE_INT, 1, "label", G_TYPE_INT, 3, nullptr);
  // A track whose id is text, and a classification of two labels and one score: both left out.
  GstStructure* bad_track = gst_structure_new("track", "id", G_TYPE_STRING, "7", nullptr);
  GstStructure* uneven = gst_structure_new_empty("classification");
  GValue labels = G_VALUE_INIT, scores = G_VALUE_INIT, v = G_VALUE_INIT;
  g_value_init(&labels, GST_TYPE_ARRAY);
  g_value_init(&scores, GST_TYPE_ARRAY);
  for (const char* l : {"a", "b"}) {
    g_value_init(&v, G_TYPE_STRING);
    g_value_set_string(&v, l);
    gst_value_array_append_and_take_value(&labels, &v);
  }
  g_value_init(&v, G_TYPE_FLOAT);
  g_value_set_float(&v, 1.f);
  gst_value_array_append_and_take_value(&scores, &v);
  gst_structure_take_value(uneven, "labels", &labels);
  gst_structure_take_value(uneven, "scores", &scores);
  GValue objects = G_VALUE_INIT, classifications = G_VALUE_INIT, tracks = G_VALUE_INIT;
  for (GValue* a : {&objects, &classifications, &tracks}) g_value_init(a, GST_TYPE_ARRAY);
  for (GstStructure* o : {good, no_h, bad_label}) {
    g_value_init(&v, GST_TYPE_STRUCTURE);
    g_value_take_boxed(&v, o);
    gst_value_array_append_and_take_value(&objects, &v);
  }
  g_value_init(&v, GST_TYPE_STRUCTURE);
  g_value_take_boxed(&v, uneven);
  gst_value_array_append_and_take_value(&classifications, &v);
  g_value_init(&v, GST_TYPE_STRUCTURE);
  g_value_take_boxed(&v, bad_track);
  gst_value_array_append_and_take_value(&tracks, &v);
  gst_structure_take_value(s, "objects", &objects);
  gst_structure_take_value(s, "classifications", &classifications);
  gst_structure_take_value(s, "tracks", &tracks);

  std::vector<std::uint8_t> area(kArea);
  metas::AreaWriter w(area.data(), area.size());
  std::uint32_t left_out = 0;
  ASSERT_EQ(encode_analytics_custom(reinterpret_cast<GstMeta*>(cm), w, &left_out),
            Encoded::written);
  EXPECT_EQ(left_out, 4u);
  metas::AreaReader reader(area.data(), w.size());
  metas::Record rec;
  ASSERT_TRUE(reader.next(&rec));
  metas::AnalyticsView view;
  std::string error;
  ASSERT_TRUE(view.parse(rec.body, &error)) << error;
  ASSERT_EQ(view.mtd_count(), 1u);
  metas::Mtd m;
  ASSERT_TRUE(view.mtd(0, &m, &error)) << error;
  EXPECT_EQ(m.od.label, "person");
  EXPECT_EQ(m.od.x, 5);
  EXPECT_EQ(m.od.h, 8);
  EXPECT_EQ(m.od.confidence, 0.5f);
}

// ---- hostile records: refused with a reason, nothing attached, never a critical ----

void expect_refused(GstBuffer* buf, const std::vector<std::uint8_t>& body, const char* reason) {
  std::uint32_t skipped = 0;
  std::string error;
  EXPECT_FALSE(attach_analytics_as_custom(buf, bytes_of(body), &skipped, &error));
  EXPECT_NE(error.find(reason), std::string::npos) << error;
  EXPECT_EQ(meta_structure(buf), nullptr);
}

void put_u32(std::vector<std::uint8_t>& body, std::size_t at, std::uint32_t v) {
  std::memcpy(body.data() + at, &v, 4);
}

std::uint32_t get_u32(const std::vector<std::uint8_t>& body, std::size_t at) {
  std::uint32_t v = 0;
  std::memcpy(&v, body.data() + at, 4);
  return v;
}

TEST_F(AnalyticsCustomMeta, CountsOutOfRangeAreRefused) {
  std::vector<std::uint8_t> body = full_body();
  put_u32(body, 0, 0x7fffffffu);  // mtd_count: far more than the body holds
  std::uint32_t skipped = 0;
  std::string error;
  EXPECT_FALSE(attach_analytics_as_custom(buf_, bytes_of(body), &skipped, &error));
  EXPECT_FALSE(error.empty());
  EXPECT_EQ(meta_structure(buf_), nullptr);

  body = full_body();
  put_u32(body, 4, 0xffffffffu);  // relation_count
  error.clear();
  EXPECT_FALSE(attach_analytics_as_custom(buf_, bytes_of(body), &skipped, &error));
  EXPECT_FALSE(error.empty());

  body = full_body();
  const std::uint32_t relations = get_u32(body, 16);
  put_u32(body, relations + 4, 99);  // the first relation's `to`: no such mtd
  error.clear();
  EXPECT_FALSE(attach_analytics_as_custom(buf_, bytes_of(body), &skipped, &error));
  EXPECT_FALSE(error.empty());

  body = full_body();
  put_u32(body, 24 + 56 * 2 + 20, 0xfffffff0u);  // the classification's payload_off
  error.clear();
  EXPECT_FALSE(attach_analytics_as_custom(buf_, bytes_of(body), &skipped, &error));
  EXPECT_FALSE(error.empty());
  EXPECT_EQ(meta_structure(buf_), nullptr);
}

std::vector<std::uint8_t> one_label(std::string_view od_label, std::string_view class_label) {
  std::vector<std::uint8_t> body(1024);
  metas::AnalyticsWriter aw(body.data(), body.size(), 2);
  metas::ObjectDetection od;
  od.label = od_label;
  aw.add_object_detection(0, od);
  const metas::ClassEntry c[] = {{1.f, class_label}};
  aw.add_classification(1, c, 1);
  body.resize(aw.finish());
  return body;
}

TEST_F(AnalyticsCustomMeta, LabelsThatAreNotTextAreRefused) {
  expect_refused(buf_, one_label("\xff\xfe", "ok"), "not UTF-8");
  expect_refused(buf_, one_label(std::string_view("a\0b", 3), "ok"), "holds a NUL");
  expect_refused(buf_, one_label("ok", "\xc3"), "not UTF-8");
  expect_refused(buf_, one_label("ok", std::string_view("\0", 1)), "holds a NUL");
  std::uint32_t skipped = 0;
  std::string error;
  EXPECT_TRUE(attach_analytics_as_custom(buf_, bytes_of(one_label("é", "ü")), &skipped, &error))
      << error;
}

// Every truncation and a deterministic spread of corrupted bytes: either refused with a reason
// and nothing attached, or one meta attached; nothing else (G_DEBUG makes a critical abort).
TEST_F(AnalyticsCustomMeta, TruncatedAndCorruptedRecordsNeverCrash) {
  const std::vector<std::uint8_t> full = full_body();
  auto attempt = [](const std::vector<std::uint8_t>& body) {
    GstBuffer* b = gst_buffer_new();
    std::uint32_t skipped = 0;
    std::string error;
    const bool ok = attach_analytics_as_custom(b, bytes_of(body), &skipped, &error);
    EXPECT_EQ(ok, meta_structure(b) != nullptr);
    EXPECT_EQ(ok, error.empty()) << error;
    gst_buffer_unref(b);
  };
  for (std::size_t n = 0; n < full.size(); ++n)
    attempt(std::vector<std::uint8_t>(full.begin(), full.begin() + n));
  std::uint32_t state = 12345;
  for (int round = 0; round < 4000; ++round) {
    std::vector<std::uint8_t> body = full;
    for (int k = 0; k < 1 + round % 4; ++k) {
      state = state * 1103515245u + 12345u;
      const std::size_t at = (state >> 8) % body.size();
      state = state * 1103515245u + 12345u;
      body[at] = static_cast<std::uint8_t>(state >> 16);
    }
    attempt(body);
  }
}

// ---- where the decoder and encoder use it ----

TEST_F(AnalyticsCustomMeta, DecoderAttachesItWhereGStreamerHasNoAnalyticsMetas) {
  const std::vector<std::uint8_t> area = area_with(full_body());
  DecodeCounts counts;
  std::string error;
  decode_metas(area.data(), static_cast<std::uint32_t>(area.size()), MetaFilter(), buf_, &counts,
               &error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(counts.received, 1u);
  EXPECT_EQ(counts.bad, 0u);
  // The segmentation: the custom meta cannot hold it, 1.24 and 1.25 have no such mtd, 1.26 has.
  const bool segmentations = has_analytics() && GST_CHECK_VERSION(1, 26, 0);
  EXPECT_EQ(counts.unknown, segmentations ? 0u : 1u);
  if (has_analytics()) {
    // 1.24+: nothing changes (the analytics meta itself, no warning).
    EXPECT_EQ(meta_structure(buf_), nullptr);
    EXPECT_EQ(counts.as_custom, 0u);
    EXPECT_EQ(version_gaps(counts), 0u);
    return;
  }
  expect_full(meta_structure(buf_));
  EXPECT_EQ(counts.as_custom, 1u);
  EXPECT_EQ(version_gaps(counts), unsigned{kAnalyticsAsCustom});
  const std::string warning = version_gap_warning(version_gaps(counts));
  guint major = 0, minor = 0, micro = 0, nano = 0;
  gst_version(&major, &minor, &micro, &nano);
  const std::string version = "GStreamer " + std::to_string(major) + "." + std::to_string(minor);
  EXPECT_NE(warning.find(version), std::string::npos) << warning;
  EXPECT_NE(warning.find("\"CudaipcAnalyticsMeta\""), std::string::npos) << warning;
  EXPECT_NE(warning.find("docs/metas.md"), std::string::npos) << warning;
  EXPECT_EQ(warning.find("tensor"), std::string::npos) << warning;
}

// Issue #38: every record a model sends is counted once, as received, bad or unknown, on every
// version: a hostile analytics record (mtd_count 0xFFFFFFFF) is bad, and a serialized meta this
// GStreamer cannot deserialize (1.22 has no deserialization at all) is unknown.
TEST_F(AnalyticsCustomMeta, EveryRecordIsCountedOnceWhateverItHolds) {
  std::vector<std::uint8_t> area(kArea);
  metas::AreaWriter w(area.data(), area.size());
  const std::vector<std::uint8_t> good = full_body();
  ASSERT_TRUE(w.add_record(metas::RecordKind::analytics, "GstAnalyticsRelationMetaAPI", good.data(),
                           good.size()));
  std::vector<std::uint8_t> hostile(good);
  const std::uint32_t all_ones = 0xFFFFFFFFu;
  std::memcpy(hostile.data(), &all_ones, 4);  // mtd_count
  ASSERT_TRUE(w.add_record(metas::RecordKind::analytics, "GstAnalyticsRelationMetaAPI",
                           hostile.data(), hostile.size()));
  const std::vector<std::uint8_t> serialized =
      cudaipc::testing::gst::unregistered_serialized_meta();
  ASSERT_TRUE(w.add_record(metas::RecordKind::serialized, "NoSuchMetaOfAnyProcess",
                           serialized.data(), serialized.size()));
  DecodeCounts counts;
  std::string error;
  decode_metas(area.data(), static_cast<std::uint32_t>(w.size()), MetaFilter(), buf_, &counts,
               &error);
  // The good record's segmentation mtd is its own unknown where no mtd holds it (see above).
  const std::uint32_t segmentation = has_analytics() && GST_CHECK_VERSION(1, 26, 0) ? 0u : 1u;
  EXPECT_EQ(counts.received, 1u);
  EXPECT_EQ(counts.bad, 1u) << "the hostile analytics record";
  EXPECT_EQ(counts.unknown, segmentation + 1u) << "the serialized meta nobody registered";
  EXPECT_NE(error.find("mtds overrun"), std::string::npos) << error;
}

TEST_F(AnalyticsCustomMeta, TensorsWithoutTheirApiAreSkippedAndCounted) {
  std::vector<std::uint8_t> area(kArea);
  metas::AreaWriter w(area.data(), area.size());
  const std::uint8_t tensors[8] = {};  // no tensor: the record's kind alone decides here
  ASSERT_TRUE(w.add_record(metas::RecordKind::tensors, "GstTensorMetaAPI", tensors, 8));
  DecodeCounts counts;
  std::string error;
  decode_metas(area.data(), static_cast<std::uint32_t>(w.size()), MetaFilter(), buf_, &counts,
               &error);
  if (tensor_meta_api_type_or_0() != 0) GTEST_SKIP() << "this GStreamer has tensor metas (1.26+)";
  EXPECT_EQ(counts.unknown, 1u);
  EXPECT_EQ(counts.tensors_no_api, 1u);
  if (has_analytics()) {
    EXPECT_EQ(version_gaps(counts), 0u);  // 1.24, 1.25: counted, as always, not warned about
    return;
  }
  EXPECT_EQ(version_gaps(counts), unsigned{kTensorsSkipped});
  const std::string warning = version_gap_warning(kTensorsSkipped | kAnalyticsAsCustom);
  EXPECT_NE(warning.find("tensor metas (they need 1.26)"), std::string::npos) << warning;
  EXPECT_NE(warning.find("CudaipcAnalyticsMeta"), std::string::npos) << warning;
}

TEST_F(AnalyticsCustomMeta, ForwardMetasSelectsItByEitherName) {
  const std::vector<std::uint8_t> area = area_with(full_body());
  for (const char* spec : {"CudaipcAnalyticsMeta", "GstAnalyticsRelationMetaAPI", "other", ""}) {
    SCOPED_TRACE(spec);
    GstBuffer* b = gst_buffer_new();
    DecodeCounts counts;
    std::string error;
    decode_metas(area.data(), static_cast<std::uint32_t>(area.size()), MetaFilter(spec), b, &counts,
                 &error);
    const bool wanted = std::strcmp(spec, "GstAnalyticsRelationMetaAPI") == 0 ||
                        (!has_analytics() && std::strcmp(spec, "CudaipcAnalyticsMeta") == 0);
    EXPECT_EQ(counts.filtered, wanted ? 0u : 1u);
    EXPECT_EQ(counts.received, wanted ? 1u : 0u);
    gst_buffer_unref(b);
  }
}

TEST_F(AnalyticsCustomMeta, EncoderSendsItAsAnAnalyticsRecord) {
  if (has_analytics()) GTEST_SKIP() << "1.24+: a CudaipcAnalyticsMeta is an ordinary custom meta";
  const std::vector<std::uint8_t> area = area_with(full_body());
  DecodeCounts counts;
  std::string error;
  decode_metas(area.data(), static_cast<std::uint32_t>(area.size()), MetaFilter(), buf_, &counts,
               &error);
  ASSERT_NE(meta_structure(buf_), nullptr);
  for (const char* spec : {"*", "CudaipcAnalyticsMeta", "GstAnalyticsRelationMetaAPI", "other"}) {
    SCOPED_TRACE(spec);
    std::vector<std::uint8_t> out(kArea);
    EncodeCounts sent;
    const std::uint32_t size = encode_metas(buf_, MetaFilter(spec), out.data(),
                                            static_cast<std::uint32_t>(out.size()), &sent, nullptr);
    if (std::strcmp(spec, "other") == 0) {
      EXPECT_EQ(size, 0u);
      continue;
    }
    EXPECT_EQ(sent.sent, 1u);
    EXPECT_EQ(sent.unsupported, 0u);
    metas::AreaReader reader(out.data(), size);
    metas::Record rec;
    ASSERT_TRUE(reader.next(&rec));
    EXPECT_EQ(rec.kind, metas::RecordKind::analytics);
    EXPECT_EQ(rec.name, kAnalyticsApiName);
  }
}

// A peer's custom record of the meta's name would leave again as an analytics record: refused.
TEST_F(AnalyticsCustomMeta, PeerCustomRecordOfTheNameIsRefusedWithoutAnalytics) {
  std::vector<std::uint8_t> area(kArea);
  metas::AreaWriter w(area.data(), area.size());
  std::uint8_t* body = w.begin_record(metas::RecordKind::custom, kAnalyticsCustomMetaName, 256);
  ASSERT_NE(body, nullptr);
  metas::CustomWriter cw(body, 256);
  ASSERT_TRUE(cw.add_int64("objects", 3));
  w.commit_record(cw.finish());
  DecodeCounts counts;
  std::string error;
  decode_metas(area.data(), static_cast<std::uint32_t>(w.size()), MetaFilter(), buf_, &counts,
               &error);
  if (has_analytics()) {
    EXPECT_EQ(counts.received, 1u);  // 1.24+: an ordinary custom meta, as before
    return;
  }
  EXPECT_EQ(counts.bad, 1u);
  EXPECT_NE(error.find("made from analytics records"), std::string::npos) << error;
  EXPECT_EQ(meta_structure(buf_), nullptr);
}

}  // namespace
}  // namespace cudaipc::gst
