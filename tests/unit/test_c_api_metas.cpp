// The meta codec through the C API (cudaipc.h, "Meta areas"): every kind written with the writer
// calls and decoded back row by row; what does not fit names the size it needed; wrong arguments
// are refused with the cause; and hostile areas (truncated, counts and offsets past the end,
// every byte flipped) decode to messages, never to a row pointing outside the area.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "cudaipc/cudaipc.h"

namespace {

bool mentions(const char* text) {
  return std::strstr(cudaipc_last_error(), text) != nullptr;
}

// One decode: the header and the tables, viewed in the buffer.
struct Decoded {
  std::vector<std::uint64_t> storage;  // 8-byte aligned
  cudaipc_metas_decoded h{};
  const std::uint8_t* base = nullptr;

  template <typename T>
  const T* table(std::uint32_t offset) const {
    return reinterpret_cast<const T*>(base + offset);
  }
  const cudaipc_metas_record* records() const { return table<cudaipc_metas_record>(h.records); }
  const cudaipc_metas_mtd* mtds() const { return table<cudaipc_metas_mtd>(h.mtds); }
  const cudaipc_metas_class* classes() const { return table<cudaipc_metas_class>(h.classes); }
  const cudaipc_metas_relation* relations() const {
    return table<cudaipc_metas_relation>(h.relations);
  }
  const cudaipc_metas_segmentation* segmentations() const {
    return table<cudaipc_metas_segmentation>(h.segmentations);
  }
  const cudaipc_metas_tensor* tensors() const { return table<cudaipc_metas_tensor>(h.tensors); }
  const cudaipc_metas_field* fields() const { return table<cudaipc_metas_field>(h.fields); }
  std::vector<std::string> errors() const {
    std::vector<std::string> out;
    const char* p = reinterpret_cast<const char*>(base + h.errors);
    for (std::uint32_t i = 0; i < h.error_count; ++i) {
      out.emplace_back(p);
      p += out.back().size() + 1;
    }
    return out;
  }
};

Decoded decode(const std::vector<std::uint8_t>& area) {
  Decoded d;
  // First with too little room: the call says how much it needs and writes the header alone.
  d.storage.assign(sizeof(cudaipc_metas_decoded) / 8, 0);
  const int64_t need = cudaipc_metas_decode(area.data(), static_cast<uint32_t>(area.size()),
                                            d.storage.data(), d.storage.size() * 8);
  EXPECT_GE(need, static_cast<int64_t>(sizeof(cudaipc_metas_decoded))) << cudaipc_last_error();
  d.storage.assign(static_cast<std::size_t>(need) / 8 + 1, 0);
  const int64_t again = cudaipc_metas_decode(area.data(), static_cast<uint32_t>(area.size()),
                                             d.storage.data(), d.storage.size() * 8);
  EXPECT_EQ(again, need);
  std::memcpy(&d.h, d.storage.data(), sizeof d.h);
  EXPECT_EQ(d.h.size, static_cast<uint32_t>(need));
  d.base = reinterpret_cast<const std::uint8_t*>(d.storage.data());
  return d;
}

std::string_view at(const std::vector<std::uint8_t>& area, std::uint64_t offset,
                    std::uint64_t size) {
  EXPECT_LE(offset + size, area.size()) << "a row points past the area";
  if (offset + size > area.size()) return {};
  return std::string_view(reinterpret_cast<const char*>(area.data()) + offset, size);
}

class Writer {
 public:
  Writer() { EXPECT_EQ(cudaipc_metas_writer_new(&w_), CUDAIPC_OK); }
  ~Writer() { cudaipc_metas_writer_free(w_); }
  cudaipc_metas_writer* get() { return w_; }

 private:
  cudaipc_metas_writer* w_ = nullptr;
};

#define OK(call) ASSERT_EQ((call), CUDAIPC_OK) << cudaipc_last_error()

int add_name(cudaipc_metas_writer* w, const char* name, int64_t v) {
  return cudaipc_metas_custom_int64(w, name, static_cast<uint32_t>(std::strlen(name)), v);
}

// Records of every kind, values from `n`, added to `w`.
void write_all(cudaipc_metas_writer* w, int n) {
  OK(cudaipc_metas_add_raw(w, 1, "GstFooMetaAPI", 13, "serial", 6));
  OK(cudaipc_metas_add_timestamp(w, "GstReferenceTimestampMetaAPI", 28, 1000u * n, CUDAIPC_NO_TIME,
                                 "timestamp/x-test", 16));
  // Tensors: a float32 2x3 column-major matrix and an empty uint8 one.
  const float matrix[6] = {1.f * n, 2, 3, 4, 5, 6};
  cudaipc_metas_tensor_in t[2]{};
  const char text[] = "mfloat32euint8";
  t[0] = {0, 1, 1, 7, 2, 1, matrix, sizeof matrix, {2, 3}};
  t[1] = {8, 1, 9, 5, 2, 0, nullptr, 0, {0, 7}};
  OK(cudaipc_metas_add_tensors(w, "GstTensorMetaAPI", 16, t, 2, text, sizeof text - 1));
  // Analytics: two detections, a classification of the second, a track of the first, a relation.
  const double boxes[8] = {1.4, 2.6, 11.5, 22.4, -3, 0, 5, 8};
  const float scores[2] = {0.5f, 0.75f};
  const int64_t labels[2] = {1, 0};
  const char names[] = "ballcubeclass-a";
  const uint32_t offsets[4] = {0, 4, 8, 15};
  const int32_t class_det[1] = {1};
  const uint32_t class_first[2] = {0, 2};
  const float class_scores[2] = {0.9f, 0.1f};
  const int64_t class_labels[2] = {2, 0};
  const int32_t track_det[1] = {0};
  const uint64_t track_ids[1] = {77u + n}, first_seen[1] = {5}, last_seen[1] = {6};
  const uint8_t lost[1] = {1};
  const uint32_t relations[3] = {0, 1, 8};
  cudaipc_metas_analytics a{};
  a.n = 2, a.boxes_f64 = 1, a.boxes = boxes, a.scores = scores, a.labels = labels;
  a.classifications = 1, a.class_detection = class_det, a.class_first = class_first;
  a.class_scores = class_scores, a.class_labels = class_labels;
  a.tracks = 1, a.track_detection = track_det, a.track_ids = track_ids;
  a.first_seen = first_seen, a.last_seen = last_seen, a.lost = lost;
  a.relations = relations, a.relation_count = 1;
  a.names = reinterpret_cast<const uint8_t*>(names), a.name_offsets = offsets, a.name_count = 3;
  OK(cudaipc_metas_add_analytics(w, "GstAnalyticsRelationMetaAPI", 27, &a));
  // Custom: every type, a structure holding an array holding a list.
  OK(cudaipc_metas_custom_begin(w, "test-meta", 9));
  OK(add_name(w, "i", -n));
  OK(cudaipc_metas_custom_uint64(w, "u", 1, 1ull << 63));
  OK(cudaipc_metas_custom_int32(w, "i32", 3, -7));
  OK(cudaipc_metas_custom_uint32(w, "u32", 3, 7));
  OK(cudaipc_metas_custom_double(w, "d", 1, 0.25));
  OK(cudaipc_metas_custom_float(w, "f", 1, 0.5f));
  OK(cudaipc_metas_custom_boolean(w, "b", 1, 1));
  OK(cudaipc_metas_custom_fraction(w, "fr", 2, 30000, 1001));
  OK(cudaipc_metas_custom_string(w, "s", 1, "é", 2));
  OK(cudaipc_metas_custom_bytes(w, "y", 1, "\0\xff", 2));
  OK(cudaipc_metas_custom_other(w, "o", 1, "GstFraction", 11, "30/1", 4));
  OK(cudaipc_metas_custom_begin_structure(w, "st", 2, "roi", 3));
  OK(cudaipc_metas_custom_begin_array(w, "arr", 3, 0));
  OK(cudaipc_metas_custom_begin_array(w, "", 0, 1));
  OK(add_name(w, "", 5));
  OK(cudaipc_metas_custom_end_nested(w));
  OK(cudaipc_metas_custom_end_nested(w));
  OK(cudaipc_metas_custom_end_nested(w));
  OK(cudaipc_metas_custom_end(w));
  OK(cudaipc_metas_add_raw(w, 99, "future-kind", 11, "\x01\x02", 2));
}

std::vector<std::uint8_t> all_area(int n) {
  Writer w;
  std::vector<std::uint8_t> area(8192);
  EXPECT_EQ(cudaipc_metas_writer_begin(w.get(), area.data(), 8192), CUDAIPC_OK);
  write_all(w.get(), n);
  const int64_t size = cudaipc_metas_writer_finish(w.get());
  EXPECT_GT(size, 0) << cudaipc_last_error();
  area.resize(static_cast<std::size_t>(size > 0 ? size : 0));
  return area;
}

}  // namespace

TEST(CApiMetas, EveryKindWrittenDecodesRowByRow) {
  const std::vector<std::uint8_t> area = all_area(3);
  const Decoded d = decode(area);
  ASSERT_EQ(d.h.record_count, 6u) << (d.errors().empty() ? "" : d.errors()[0]);
  EXPECT_EQ(d.h.bad, 0u);
  EXPECT_EQ(d.h.unknown, 1u);  // kind 99
  const cudaipc_metas_record* r = d.records();
  const std::uint16_t kinds[] = {1, 5, 3, 2, 4, 99};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(r[i].kind, kinds[i]) << i;
  EXPECT_EQ(at(area, r[0].name_offset, r[0].name_size), "GstFooMetaAPI");
  EXPECT_EQ(r[0].known, 0);
  EXPECT_EQ(at(area, r[0].body_offset, 6), "serial");
  // Timestamp.
  EXPECT_EQ(r[1].timestamp, 3000u);
  EXPECT_EQ(r[1].duration, CUDAIPC_NO_TIME);
  EXPECT_EQ(at(area, r[1].heap_offset, r[1].heap_size), "timestamp/x-test");
  // Tensors: the data on a 64-byte boundary of the area.
  ASSERT_EQ(r[2].count, 2u);
  const cudaipc_metas_tensor* t = d.tensors() + r[2].first;
  EXPECT_EQ(at(area, t[0].id_offset, t[0].id_size), "m");
  EXPECT_EQ(at(area, t[0].dtype_offset, t[0].dtype_size), "float32");
  EXPECT_EQ(t[0].num_dims, 2u);
  EXPECT_EQ(t[0].dims_order, 1u);
  EXPECT_EQ(t[0].dims[0], 2u);
  EXPECT_EQ(t[0].dims[1], 3u);
  EXPECT_EQ(t[0].data_offset % 64, 0u);
  ASSERT_EQ(t[0].data_size, 24u);
  float got[6];
  std::memcpy(got, area.data() + t[0].data_offset, sizeof got);
  EXPECT_EQ(got[0], 3.f);
  EXPECT_EQ(got[5], 6.f);
  EXPECT_EQ(at(area, t[1].dtype_offset, t[1].dtype_size), "uint8");
  EXPECT_EQ(t[1].data_size, 0u);
  EXPECT_EQ(t[1].dims[1], 7u);
  // Analytics: detections rounded half to even, labels, links, relations.
  ASSERT_EQ(r[3].count, 4u);
  const cudaipc_metas_mtd* m = d.mtds() + r[3].first;
  EXPECT_EQ(m[0].type, 1u);
  EXPECT_EQ(m[0].id, 0u);
  EXPECT_EQ(m[0].x, 1);
  EXPECT_EQ(m[0].y, 3);
  EXPECT_EQ(m[0].w, 10);
  EXPECT_EQ(m[0].h, 20);
  EXPECT_EQ(m[0].confidence, 0.5f);
  EXPECT_EQ(at(area, m[0].label_offset, m[0].label_size), "cube");
  EXPECT_EQ(m[0].track, 3);  // the track, mtd 3
  EXPECT_EQ(m[1].x, -3);
  EXPECT_EQ(m[1].w, 8);
  EXPECT_EQ(at(area, m[1].label_offset, m[1].label_size), "ball");
  EXPECT_EQ(m[1].track, -1);
  EXPECT_EQ(m[2].type, 2u);
  EXPECT_EQ(m[2].id, 2u);
  EXPECT_EQ(m[2].detection, 1);  // classifies the second detection
  ASSERT_EQ(m[2].count, 2u);
  const cudaipc_metas_class* c = d.classes() + m[2].first;
  EXPECT_EQ(c[0].confidence, 0.9f);
  EXPECT_EQ(at(area, c[0].label_offset, c[0].label_size), "class-a");
  EXPECT_EQ(at(area, c[1].label_offset, c[1].label_size), "ball");
  EXPECT_EQ(m[3].type, 3u);
  EXPECT_EQ(m[3].tracking_id, 80u);
  EXPECT_EQ(m[3].first_seen, 5u);
  EXPECT_EQ(m[3].last_seen, 6u);
  EXPECT_EQ(m[3].flags, 1u);
  EXPECT_EQ(m[3].detection, 0);
  // GStreamer's pairs, then the caller's relation.
  ASSERT_EQ(r[3].relation_count, 4u);
  const cudaipc_metas_relation* rel = d.relations() + r[3].first_relation;
  const std::uint32_t want[4][3] = {{1, 2, 4}, {2, 1, 2}, {0, 3, 8}, {0, 1, 8}};
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(rel[k].from, want[k][0]) << k;
    EXPECT_EQ(rel[k].to, want[k][1]) << k;
    EXPECT_EQ(rel[k].types, want[k][2]) << k;
  }
  // Custom: 12 fields of the record itself, the nested ones' members after them.
  ASSERT_EQ(r[4].count, 12u);
  const cudaipc_metas_field* f = d.fields() + r[4].first;
  EXPECT_EQ(at(area, f[0].name_offset, f[0].name_size), "i");
  EXPECT_EQ(f[0].value.i, -3);
  EXPECT_EQ(f[1].type, 2u);
  EXPECT_EQ(f[1].value.u, 1ull << 63);
  EXPECT_EQ(f[2].type, 8u);
  EXPECT_EQ(f[2].value.i, -7);
  EXPECT_EQ(f[3].value.u, 7u);
  EXPECT_EQ(f[4].value.d, 0.25);
  EXPECT_EQ(f[5].type, 10u);
  EXPECT_EQ(f[5].value.d, 0.5);
  EXPECT_EQ(f[6].value.i, 1);
  EXPECT_EQ(f[7].value.i, 30000);
  EXPECT_EQ(f[7].denominator, 1001);
  EXPECT_EQ(at(area, f[8].text_offset, f[8].text_size), "é");
  EXPECT_EQ(at(area, f[9].text_offset, f[9].text_size), std::string_view("\0\xff", 2));
  EXPECT_EQ(at(area, f[10].type_name_offset, f[10].type_name_size), "GstFraction");
  EXPECT_EQ(at(area, f[10].text_offset, f[10].text_size), "30/1");
  EXPECT_EQ(f[11].type, 12u);
  EXPECT_EQ(at(area, f[11].text_offset, f[11].text_size), "roi");
  EXPECT_EQ(f[11].members, 1u);
  EXPECT_EQ(f[12].type, 13u);  // st.arr
  EXPECT_EQ(f[12].members, 1u);
  EXPECT_EQ(f[13].type, 14u);  // its list
  EXPECT_EQ(f[14].value.i, 5);
  EXPECT_EQ(d.h.field_count, 15u);
  EXPECT_EQ(r[5].known, 0);
  EXPECT_EQ(at(area, r[5].body_offset, 2), "\x01\x02");
}

TEST(CApiMetas, DetectionsAreaIsTheWritersAnalyticsRecord) {
  const float boxes[8] = {1.5f, 2.5f, 3.f, 9.f, 0, 0, 4, 4};
  const int64_t labels[2] = {0, 0};
  const char names[] = "dog";
  const uint32_t offsets[2] = {0, 3};
  std::vector<std::uint8_t> one(1024), two(1024);
  cudaipc_detections d{};
  d.area = one.data(), d.capacity = 1024, d.n = 2, d.boxes = boxes, d.labels = labels;
  d.names = reinterpret_cast<const uint8_t*>(names), d.name_offsets = offsets, d.name_count = 1;
  const int64_t size = cudaipc_metas_detections_area(&d);
  ASSERT_GT(size, 0) << cudaipc_last_error();
  cudaipc_metas_analytics a{};
  a.n = 2, a.boxes = boxes, a.labels = labels, a.names = d.names, a.name_offsets = offsets;
  a.name_count = 1;
  Writer w;
  OK(cudaipc_metas_writer_begin(w.get(), two.data(), 1024));
  OK(cudaipc_metas_add_analytics(w.get(), "GstAnalyticsRelationMetaAPI", 27, &a));
  ASSERT_EQ(cudaipc_metas_writer_finish(w.get()), size);
  EXPECT_EQ(0, std::memcmp(one.data(), two.data(), static_cast<std::size_t>(size)));
  // The label table whole in the heap, right after the table (no relations): 3 bytes.
  const Decoded got = decode(std::vector<std::uint8_t>(one.begin(), one.begin() + size));
  ASSERT_EQ(got.h.record_count, 1u);
  EXPECT_EQ(got.records()[0].heap_size, 3u);
  EXPECT_EQ(got.mtds()[0].x, 2);  // rint(1.5): half to even
  EXPECT_EQ(got.mtds()[0].y, 2);  // rint(2.5)
}

TEST(CApiMetas, WhatDoesNotFitNamesTheSizeTheAreaNeeded) {
  Writer w;
  std::vector<std::uint8_t> big(8192);
  OK(cudaipc_metas_writer_begin(w.get(), big.data(), 8192));
  write_all(w.get(), 1);
  const int64_t need = cudaipc_metas_writer_finish(w.get());
  ASSERT_GT(need, 0);
  // Every smaller area: the records that fit are written, the error names the whole need.
  const std::string want = "need " + std::to_string(need) + " bytes";
  for (uint32_t cap : {0u, 16u, 100u, 400u, static_cast<uint32_t>(need - 8)}) {
    std::vector<std::uint8_t> small(cap + 1, 0xAB);
    OK(cudaipc_metas_writer_begin(w.get(), cap ? small.data() : nullptr, cap));
    write_all(w.get(), 1);
    EXPECT_EQ(cudaipc_metas_writer_finish(w.get()), -CUDAIPC_ERR_INVALID_ARGUMENT) << cap;
    EXPECT_TRUE(mentions(want.c_str())) << cap << ": " << cudaipc_last_error();
    EXPECT_TRUE(mentions(cap ? "more than the channel's meta area" : "no meta area")) << cap;
    EXPECT_EQ(small[cap], 0xAB) << "written past the capacity " << cap;
  }
  // A custom record alone that outgrows its area mid-structure.
  std::vector<std::uint8_t> area(64);
  OK(cudaipc_metas_writer_begin(w.get(), area.data(), 64));
  OK(cudaipc_metas_custom_begin(w.get(), "m", 1));
  OK(cudaipc_metas_custom_begin_structure(w.get(), "s", 1, "st", 2));
  const std::string text(100, 'x');
  OK(cudaipc_metas_custom_string(w.get(), "t", 1, text.data(), 100));
  OK(cudaipc_metas_custom_end_nested(w.get()));
  OK(cudaipc_metas_custom_end(w.get()));
  // Area header 16, record header 8, name 8, body: 8, then the structure field: 16 + pad8(name 1
  // + its name's prefix 16 + its members: 8 + the string field 16 + pad8(1 + 100)) = 168.
  EXPECT_EQ(cudaipc_metas_writer_finish(w.get()), -CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("need 208 bytes")) << cudaipc_last_error();
}

TEST(CApiMetas, WrongArgumentsAreRefusedWithTheCause) {
  Writer w;
  std::vector<std::uint8_t> area(4096);
  cudaipc_metas_writer* h = w.get();
  OK(cudaipc_metas_writer_begin(h, area.data(), 4096));
  EXPECT_EQ(cudaipc_metas_add_raw(h, 0, "x", 1, "", 0), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("record kind 0"));
  EXPECT_EQ(cudaipc_metas_add_raw(h, 1, "a\0b", 3, "", 0), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("NUL"));
  EXPECT_EQ(cudaipc_metas_add_raw(h, 1, "\xff", 1, "", 0), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("not UTF-8"));
  const std::string long_name(1025, 'n');
  EXPECT_EQ(cudaipc_metas_add_raw(h, 1, long_name.data(), 1025, "", 0),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("1024 allowed"));
  // Tensors: an unknown type, data that disagrees with the dims, text past its end.
  const float data[2] = {1, 2};
  cudaipc_metas_tensor_in t{0, 1, 1, 7, 1, 0, data, 8, {2}};
  EXPECT_EQ(cudaipc_metas_add_tensors(h, "T", 1, &t, 1, "tfloat99", 8),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("unknown data type 'float99'"));
  t.data_size = 4;
  EXPECT_EQ(cudaipc_metas_add_tensors(h, "T", 1, &t, 1, "tfloat32", 8),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("4 bytes of data"));
  EXPECT_EQ(cudaipc_metas_add_tensors(h, "T", 1, &t, 1, "tfloat32", 4),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("past the text"));
  t.num_dims = 17;
  EXPECT_EQ(cudaipc_metas_add_tensors(h, "T", 1, &t, 1, "tfloat32", 8),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("17 dims"));
  // Analytics: a label past the names, a negative one, a relation past the mtds.
  const float boxes[4] = {0, 0, 1, 1};
  const int64_t nine[1] = {9}, negative[1] = {-1};
  const uint32_t offsets[2] = {0, 1};
  cudaipc_metas_analytics a{};
  a.n = 1, a.boxes = boxes, a.labels = nine, a.names = reinterpret_cast<const uint8_t*>("a");
  a.name_offsets = offsets, a.name_count = 1;
  EXPECT_EQ(cudaipc_metas_add_analytics(h, "A", 1, &a), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("label 9 of box 0 has no name (1 names)"));
  a.labels = negative;
  EXPECT_EQ(cudaipc_metas_add_analytics(h, "A", 1, &a), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("label -1 of box 0 is negative"));
  a.labels = nullptr;
  const uint32_t rel[3] = {0, 1, 4};
  a.relations = rel, a.relation_count = 1;
  EXPECT_EQ(cudaipc_metas_add_analytics(h, "A", 1, &a), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("relation (0, 1) names an mtd outside the 1 published"));
  // Custom: fields outside a record, a bad fraction, nesting past 8 levels, an open structure.
  EXPECT_EQ(add_name(h, "x", 1), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("no custom record is open"));
  OK(cudaipc_metas_custom_begin(h, "c", 1));
  EXPECT_EQ(cudaipc_metas_custom_fraction(h, "f", 1, 1, 0), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("the fraction 1/0"));
  EXPECT_EQ(cudaipc_metas_custom_int64(h, "a\0", 2, 1), CUDAIPC_ERR_INVALID_ARGUMENT);
  for (int level = 0; level < 8; ++level) OK(cudaipc_metas_custom_begin_array(h, "a", 1, 0));
  EXPECT_EQ(cudaipc_metas_custom_begin_array(h, "deep", 4, 0), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("nested deeper than 8 levels"));
  EXPECT_EQ(cudaipc_metas_custom_end(h), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("still open"));
  for (int level = 0; level < 8; ++level) OK(cudaipc_metas_custom_end_nested(h));
  EXPECT_EQ(cudaipc_metas_custom_end_nested(h), CUDAIPC_ERR_INVALID_ARGUMENT);
  OK(cudaipc_metas_custom_end(h));
  // The records that were refused left nothing behind: one custom record of 8 empty arrays.
  const int64_t size = cudaipc_metas_writer_finish(h);
  ASSERT_GT(size, 0) << cudaipc_last_error();
  const Decoded d = decode(std::vector<std::uint8_t>(area.begin(), area.begin() + size));
  ASSERT_EQ(d.h.record_count, 1u);
  EXPECT_EQ(d.h.field_count, 8u);
  // NULL handles and unaligned buffers.
  EXPECT_EQ(cudaipc_metas_writer_begin(nullptr, area.data(), 1), CUDAIPC_ERR_INVALID_ARGUMENT);
  std::uint64_t out[16];
  EXPECT_EQ(cudaipc_metas_decode(nullptr, 16, out, sizeof out), -CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(cudaipc_metas_decode(area.data(), 16, reinterpret_cast<std::uint8_t*>(out) + 1, 64),
            -CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("8-byte aligned"));
}

TEST(CApiMetas, HostileAreasDecodeToMessagesNeverToRowsOutsideThem) {
  const std::vector<std::uint8_t> good = all_area(2);
  // Every truncation, with the area's own size (the header then claims more than there is).
  for (std::size_t cut = 1; cut < good.size(); cut += 3) {
    const std::vector<std::uint8_t> area(good.begin(), good.begin() + cut);
    const Decoded d = decode(area);
    EXPECT_EQ(d.h.record_count, 0u) << cut;
    EXPECT_EQ(d.h.bad, 1u) << cut;
    ASSERT_EQ(d.errors().size(), 1u) << cut;
  }
  // Counts and offsets past the end, and every byte flipped: whatever is read points inside.
  auto check_rows = [](const std::vector<std::uint8_t>& area, const Decoded& d) {
    for (std::uint32_t i = 0; i < d.h.record_count; ++i) {
      const cudaipc_metas_record& r = d.records()[i];
      at(area, r.name_offset, r.name_size);
      at(area, r.body_offset, r.body_size);
      at(area, r.heap_offset, r.heap_size);
    }
    for (std::uint32_t i = 0; i < d.h.mtd_count; ++i)
      at(area, d.mtds()[i].label_offset, d.mtds()[i].label_size);
    for (std::uint32_t i = 0; i < d.h.class_count; ++i)
      at(area, d.classes()[i].label_offset, d.classes()[i].label_size);
    for (std::uint32_t i = 0; i < d.h.tensor_count; ++i) {
      const cudaipc_metas_tensor& t = d.tensors()[i];
      at(area, t.id_offset, t.id_size);
      at(area, t.dtype_offset, t.dtype_size);
      at(area, t.data_offset, t.data_size);
    }
    for (std::uint32_t i = 0; i < d.h.field_count; ++i) {
      const cudaipc_metas_field& f = d.fields()[i];
      at(area, f.name_offset, f.name_size);
      at(area, f.text_offset, f.text_size);
      at(area, f.type_name_offset, f.type_name_size);
    }
    EXPECT_EQ(d.errors().size(), d.h.error_count);
  };
  std::size_t bad = 0;
  for (std::size_t k = 0; k < good.size(); ++k) {
    for (std::uint8_t value : {0x00, 0xff, 0x7f, 0x80}) {
      std::vector<std::uint8_t> area = good;
      area[k] = value;
      const Decoded d = decode(area);
      check_rows(area, d);
      bad += d.h.bad;
      if (d.h.bad) {
        EXPECT_FALSE(d.errors().empty()) << k;
      }
    }
  }
  EXPECT_GT(bad, 0u) << "flips that break records are counted";
  // A count past the records, a record size past the area.
  std::vector<std::uint8_t> area = good;
  area[6] = 200;
  Decoded d = decode(area);
  EXPECT_EQ(d.h.record_count, 6u);
  EXPECT_NE(d.errors().at(0).find("record 6 of 200 starts past"), std::string::npos)
      << d.errors()[0];
  area = good;
  const std::uint32_t huge = 0xfffffff8u;
  std::memcpy(area.data() + 16, &huge, 4);
  d = decode(area);
  EXPECT_EQ(d.h.record_count, 0u);
  EXPECT_NE(d.errors().at(0).find("size 4294967288"), std::string::npos) << d.errors()[0];
  // No metas: nothing, and no error.
  d = decode(std::vector<std::uint8_t>{});
  EXPECT_EQ(d.h.record_count + d.h.bad + d.h.error_count, 0u);
}
