// GstCustomMeta through cudaipcsink ipc-mode=host -> cudaipcsrc in one process: every field comes
// back with its own GType (int, uint, int64, uint64, float, double, boolean, string, fraction,
// bytes, nested structures, arrays and lists), values from the frame's index; and a producer's
// hostile custom records (names GStreamer refuses, GTypes it cannot hold, values nested past the
// limit or 30 000 levels deep, fractions it refuses, text its parser would recurse on, a new meta
// name per record) are dropped and counted or kept as text, with no GLib critical, while the
// frames and the good records flow.
#include <cstring>
#include <string>
#include <vector>

#include "cudaipc/metas.hpp"
#include "cudaipc/producer.hpp"
#include "element_harness.hpp"
#include "meta_round_trip.hpp"
#include "nested_records.hpp"

namespace cudaipc::testing::gst {
namespace {

// Frame i's fields, one of each type, nested values included.
GstStructure* typed_fields(int i) {
  GValue arr = G_VALUE_INIT, list = G_VALUE_INIT, v = G_VALUE_INIT;
  g_value_init(&arr, GST_TYPE_ARRAY);
  for (int k = 0; k < 3; ++k) {
    g_value_init(&v, G_TYPE_INT);
    g_value_set_int(&v, i + k);
    gst_value_array_append_and_take_value(&arr, &v);
  }
  g_value_init(&list, GST_TYPE_LIST);
  for (const char* s : {"car", "bus"}) {
    g_value_init(&v, G_TYPE_STRING);
    g_value_set_string(&v, (std::string(s) + std::to_string(i)).c_str());
    gst_value_list_append_and_take_value(&list, &v);
  }
  GstStructure* inner = gst_structure_new("test-inner", "index", G_TYPE_INT, i, "score",
                                          G_TYPE_FLOAT, i / 8.0f, nullptr);
  gst_structure_set_value(inner, "ids", &arr);
  GBytes* bytes = g_bytes_new("\x01\x00\x02", 3);
  GstStructure* s = gst_structure_new(
      "test-typed-meta", "i", G_TYPE_INT, -i, "u", G_TYPE_UINT, 0x80000000u + i, "i64",
      G_TYPE_INT64, -(G_GINT64_CONSTANT(1) << 40) - i, "u64", G_TYPE_UINT64,
      (G_GUINT64_CONSTANT(1) << 63) + i, "f", G_TYPE_FLOAT, i / 4.0f, "d", G_TYPE_DOUBLE, i / 3.0,
      "b", G_TYPE_BOOLEAN, i % 2, "s", G_TYPE_STRING, ("frame-" + std::to_string(i)).c_str(), "fr",
      GST_TYPE_FRACTION, 30000, 1001 + i, "raw", G_TYPE_BYTES, bytes, "inner", GST_TYPE_STRUCTURE,
      inner, nullptr);
  gst_structure_set_value(s, "arr", &arr);
  gst_structure_set_value(s, "list", &list);
  g_bytes_unref(bytes);
  gst_structure_free(inner);
  g_value_unset(&arr);
  g_value_unset(&list);
  return s;
}

void add_typed(GstBuffer* buf, int i) {
  test_custom_info("test-typed-meta");
  GstCustomMeta* m = gst_buffer_add_custom_meta(buf, "test-typed-meta");
  GstStructure* want = typed_fields(i);
  gst_structure_foreach(
      want,
      [](GQuark field, const GValue* value, gpointer into) -> gboolean {
        gst_structure_id_set_value(static_cast<GstStructure*>(into), field, value);
        return TRUE;
      },
      gst_custom_meta_get_structure(m));
  gst_structure_free(want);
}

std::string check_typed(GstBuffer* buf, int i) {
  GstCustomMeta* m = gst_buffer_get_custom_meta(buf, "test-typed-meta");
  if (!m) return "no custom meta";
  const GstStructure* got = gst_custom_meta_get_structure(m);
  Ptr<GstStructure> want(typed_fields(i));
  // Field by field: the same GType, then the same value.
  const gint n = gst_structure_n_fields(want.get());
  if (gst_structure_n_fields(got) != n) return "field count in " + text_of(got);
  for (gint k = 0; k < n; ++k) {
    const gchar* name = gst_structure_nth_field_name(want.get(), static_cast<guint>(k));
    const GValue* a = gst_structure_get_value(want.get(), name);
    const GValue* b = gst_structure_get_value(got, name);
    if (!b) return std::string("no field ") + name;
    if (G_VALUE_TYPE(a) != G_VALUE_TYPE(b))
      return std::string(name) + " is " + G_VALUE_TYPE_NAME(b) + ", sent as " +
             G_VALUE_TYPE_NAME(a);
    if (gst_value_compare(a, b) != GST_VALUE_EQUAL)
      return std::string(name) + " in " + text_of(got);
  }
  // Inside the structure too (gst_value_compare checks values, this the nested types).
  const GstStructure* inner = gst_value_get_structure(gst_structure_get_value(got, "inner"));
  gint index = -1;
  gfloat score = -1;
  if (!inner || !gst_structure_get_int(inner, "index", &index) || index != i ||
      !gst_structure_get(inner, "score", G_TYPE_FLOAT, &score, nullptr) || score != i / 8.0f ||
      G_VALUE_TYPE(gst_structure_get_value(inner, "ids")) != GST_TYPE_ARRAY)
    return "inner structure " + text_of(inner);
  return "";
}

TEST_F(ElementTest, EveryCustomFieldKeepsItsGType) {
  Ptr<GstStructure> src_stats;
  round_trip(socket(), "", "", add_typed, check_typed, nullptr, &src_stats);
  EXPECT_EQ(stat(src_stats, "metas-received"), 1u * kFrames);
  EXPECT_EQ(stat(src_stats, "metas-bad"), 0u);
}

// ---- hostile records, written as another process could ----

struct Record {
  std::string name;
  std::vector<std::uint8_t> body;
};

// A custom body with one field, its value bytes as given.
std::vector<std::uint8_t> one_field(const std::string& name, metas::FieldType type,
                                    const std::string& value) {
  const std::size_t n = name.size() + value.size(), size = 16 + ((n + 7) & ~std::size_t{7});
  std::vector<std::uint8_t> b(8 + size, 0);
  const std::uint32_t one = 1, sz = static_cast<std::uint32_t>(size),
                      vl = static_cast<std::uint32_t>(value.size());
  const std::uint16_t nl = static_cast<std::uint16_t>(name.size());
  std::memcpy(b.data(), &one, 4);
  std::memcpy(b.data() + 8, &sz, 4);
  std::memcpy(b.data() + 12, &nl, 2);
  b[14] = static_cast<std::uint8_t>(type);
  std::memcpy(b.data() + 16, &vl, 4);
  std::memcpy(b.data() + 24, name.data(), name.size());
  std::memcpy(b.data() + 24 + name.size(), value.data(), value.size());
  return b;
}

std::vector<std::uint8_t> other_field(const std::string& name, const std::string& type,
                                      const std::string& text) {
  return one_field(name, metas::FieldType::other, type + std::string(1, '\0') + text);
}

std::vector<std::uint8_t> index_body(int i) {
  std::vector<std::uint8_t> b(64);
  metas::CustomWriter w(b.data(), b.size());
  w.add_int32("index", i);
  b.resize(w.finish());
  return b;
}

// Publishes frame i with `records` in its meta area; the pulled sample, its bytes checked.
Ptr<GstSample> publish(cudaipc::Producer& producer, PullingConsumer& consumer, int i,
                       const std::vector<Record>& records) {
  const TensorFrame& frame = frame_kind();
  Ptr<GstBuffer> ref(frame.buffer(i));
  std::vector<std::uint8_t> pixels(frame.bytes()), area(1 << 20);
  gst_buffer_extract(ref.get(), 0, pixels.data(), pixels.size());
  metas::AreaWriter w(area.data(), area.size());
  for (const Record& r : records)
    EXPECT_TRUE(w.add_record(metas::RecordKind::custom, r.name, r.body.data(), r.body.size()))
        << r.name;
  FrameInfo info;
  info.metas = area.data();
  info.metas_size = static_cast<std::uint32_t>(w.size());
  EXPECT_EQ(producer.publish(pixels.data(), pixels.size(), info), PublishStatus::published);
  Ptr<GstSample> sample = consumer.pull();
  if (sample) {
    EXPECT_EQ(frame.check(Collector::copy_out(sample.get()), i), "");
  }
  return sample;
}

class HostileCustomRecords : public ElementTest {
 protected:
  void SetUp() override {
    ElementTest::SetUp();
    if (IsSkipped()) return;
    ProducerOptions po;
    po.path = socket();
    po.meta_size = 1 << 20;
    producer_ = std::make_unique<cudaipc::Producer>(po);
    Format f;
    Ptr<GstCaps> caps = frame_kind().caps();
    f.caps = text_of(caps.get());
    f.tensor = make_tensor(DType::uint8, {32});
    producer_->set_format(f);
    consumer_ = std::make_unique<PullingConsumer>(socket(), "");
    ASSERT_TRUE(consumer_->start());
    ASSERT_TRUE(poll_until([&] { return producer_->consumer_count() == 1; }, kWait));
  }
  void TearDown() override {
    consumer_.reset();
    producer_.reset();
    ElementTest::TearDown();
  }
  std::unique_ptr<cudaipc::Producer> producer_;
  std::unique_ptr<PullingConsumer> consumer_;
};

TEST_F(HostileCustomRecords, AreDroppedOrKeptAsTextAndFramesFlow) {
  const std::string deep_text = std::string(30000, '<') + std::string(30000, '>');
  for (int i = 1; i <= 4; ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    const std::vector<Record> records = {
        // Bad: dropped and counted.
        {"bad name!", index_body(i)},
        {"9lives", index_body(i)},
        {"GstBuffer", index_body(i)},  // a type of this process, not a custom meta
        {"test-bad-field-name", one_field("bad name!", metas::FieldType::int64, "12345678")},
        {"test-nine-deep", testing::nested_arrays(metas::kMaxCustomDepth + 1)},
        {"test-30000-deep", testing::nested_arrays(30000)},
        {"test-zero-fraction",
         one_field("f", metas::FieldType::fraction, std::string("\1\0\0\0\0\0\0\0", 8))},
        {"test-cast-inside", other_field("r", "GstState", "(GstValueArray)<playing>")},
        // Kept, their values as text: types this process does not take from a peer.
        {"test-deep-text", other_field("v", "GstValueArray", deep_text)},
        {"test-void", other_field("v", "void", "1")},
        {"test-interface", other_field("v", "GInterface", "x")},
        // Good.
        {"test-good-meta", index_body(i)},
        {"test-enum", other_field("r", "GstState", "playing")},
    };
    Ptr<GstSample> sample = publish(*producer_, *consumer_, i, records);
    ASSERT_TRUE(sample) << consumer_->pipeline().errors();
    GstBuffer* buf = gst_sample_get_buffer(sample.get());
    GstCustomMeta* good = gst_buffer_get_custom_meta(buf, "test-good-meta");
    ASSERT_NE(good, nullptr);
    gint index = 0;
    EXPECT_TRUE(gst_structure_get_int(gst_custom_meta_get_structure(good), "index", &index));
    EXPECT_EQ(index, i);
    GstCustomMeta* e = gst_buffer_get_custom_meta(buf, "test-enum");
    ASSERT_NE(e, nullptr);
    const GValue* r = gst_structure_get_value(gst_custom_meta_get_structure(e), "r");
    ASSERT_TRUE(r && G_VALUE_TYPE(r) == GST_TYPE_STATE);
    EXPECT_EQ(g_value_get_enum(r), GST_STATE_PLAYING);
    for (const char* text_name : {"test-deep-text", "test-void", "test-interface"}) {
      GstCustomMeta* m = gst_buffer_get_custom_meta(buf, text_name);
      ASSERT_NE(m, nullptr) << text_name;
      EXPECT_TRUE(
          gst_structure_has_field_typed(gst_custom_meta_get_structure(m), "v", G_TYPE_STRING))
          << text_name;
    }
    for (const char* bad : {"test-bad-field-name", "test-nine-deep", "test-30000-deep",
                            "test-zero-fraction", "test-cast-inside"})
      EXPECT_EQ(gst_buffer_get_custom_meta(buf, bad), nullptr) << bad;
  }
  Ptr<GstStructure> s = consumer_->stats();
  EXPECT_EQ(stat(s, "metas-bad"), 8u * 4);
  EXPECT_EQ(stat(s, "metas-received"), 5u * 4);
  // One warning, naming the first bad record; the pipeline plays on.
  Ptr<GstMessage> warning = consumer_->pipeline().pop(GST_MESSAGE_WARNING, Ms(1000));
  ASSERT_TRUE(warning);
  GError* err = nullptr;
  gst_message_parse_warning(warning.get(), &err, nullptr);
  const std::string text = err ? err->message : "";
  g_clear_error(&err);
  EXPECT_NE(text.find("bad name!"), std::string::npos) << text;
  EXPECT_FALSE(consumer_->pipeline().pop(GST_MESSAGE_WARNING, Ms(0)));
  EXPECT_EQ(consumer_->pipeline().errors(), "");
}

TEST_F(HostileCustomRecords, ANewMetaNamePerRecordIsBounded) {
  // 40 fresh names a frame: the process registers a bounded number of them for its peers, then
  // drops records of new names (counted) while names it has keep working.
  int attached = 0;
  for (int i = 1; i <= 10; ++i) {
    std::vector<Record> records;
    for (int k = 0; k < 40; ++k)
      records.push_back(
          {"test-fresh-" + std::to_string(i) + "-" + std::to_string(k), index_body(i)});
    records.push_back({"test-good-meta", index_body(i)});
    Ptr<GstSample> sample = publish(*producer_, *consumer_, i, records);
    ASSERT_TRUE(sample) << consumer_->pipeline().errors();
    GstBuffer* buf = gst_sample_get_buffer(sample.get());
    for (int k = 0; k < 40; ++k)
      attached += gst_buffer_get_custom_meta(
                      buf, ("test-fresh-" + std::to_string(i) + "-" + std::to_string(k)).c_str())
                      ? 1
                      : 0;
    GstCustomMeta* good = gst_buffer_get_custom_meta(buf, "test-good-meta");
    ASSERT_NE(good, nullptr) << "frame " << i;
  }
  EXPECT_LE(attached, 256);
  EXPECT_GE(attached, 200);
  Ptr<GstStructure> s = consumer_->stats();
  EXPECT_EQ(stat(s, "metas-bad"), 400u - attached);
}

}  // namespace
}  // namespace cudaipc::testing::gst

namespace cudaipc::testing::gst {
namespace {

TEST_F(HostileCustomRecords, NewFieldNamesFromPeersAreBounded) {
  // 10 000 fresh field names a frame: GLib never frees a quark, so past the bound (65 536 names
  // this process did not have) records needing a new one are dropped, while names it has keep
  // working and the frames flow.
  constexpr int kFields = 10000;
  // Registered here, as an application would: the bound on meta names a peer registers (the test
  // above reaches it) is not what this test is about.
  test_custom_info("test-many-fields");
  std::vector<bool> attached;
  for (int i = 1; i <= 8; ++i) {
    std::vector<std::uint8_t> body(8 + 32 * kFields);
    metas::CustomWriter w(body.data(), body.size());
    for (int k = 0; k < kFields; ++k)
      ASSERT_TRUE(w.add_int32("f" + std::to_string(i) + "_" + std::to_string(k), k));
    body.resize(w.finish());
    Ptr<GstSample> sample = publish(
        *producer_, *consumer_, i, {{"test-many-fields", body}, {"test-good-meta", index_body(i)}});
    ASSERT_TRUE(sample) << consumer_->pipeline().errors();
    GstBuffer* buf = gst_sample_get_buffer(sample.get());
    GstCustomMeta* many = gst_buffer_get_custom_meta(buf, "test-many-fields");
    if (many) {
      EXPECT_EQ(gst_structure_n_fields(gst_custom_meta_get_structure(many)), kFields);
    }
    attached.push_back(many != nullptr);
    GstCustomMeta* good = gst_buffer_get_custom_meta(buf, "test-good-meta");
    ASSERT_NE(good, nullptr) << "frame " << i;
    gint index = 0;
    EXPECT_TRUE(gst_structure_get_int(gst_custom_meta_get_structure(good), "index", &index));
    EXPECT_EQ(index, i);
  }
  EXPECT_TRUE(attached.front()) << "the first 10 000 names are within the bound";
  EXPECT_FALSE(attached.back()) << "80 000 new names are past it";
  Ptr<GstStructure> s = consumer_->stats();
  EXPECT_GE(stat(s, "metas-bad"), 1u);
}

}  // namespace
}  // namespace cudaipc::testing::gst
