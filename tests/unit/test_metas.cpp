// The meta area's record codec (cudaipc/metas.hpp, docs/metas.md): every kind written and read
// back field by field; writers that run out of room at every capacity leave a valid area; readers
// given truncated or corrupted bytes say what is wrong and never read outside them (the sanitizer
// builds run this suite too).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cudaipc/metas.hpp"
#include "metas/text.hpp"

using namespace cudaipc::metas;

namespace {

constexpr float kR = 0.5f;

// One area holding a record of every kind, values from `n`.
std::size_t write_all(std::uint8_t* area, std::size_t capacity, int n, int* records) {
  AreaWriter w(area, capacity);
  *records = 0;
  // Custom fields of every type.
  if (std::uint8_t* b = w.begin_record(RecordKind::custom, "test-meta", 512)) {
    CustomWriter cw(b, 512);
    bool ok = cw.add_int64("i", -n) && cw.add_uint64("u", 1ull << 40 | n) &&
              cw.add_double("d", n / 8.0) && cw.add_boolean("b", n % 2 == 1) &&
              cw.add_string("s", "frame-" + std::to_string(n)) &&
              cw.add_bytes("raw", "\x01\x00\x02", 3) &&
              cw.add_other("f", "GstFraction", std::to_string(n) + "/97");
    if (ok && cw.ok()) {
      w.commit_record(cw.finish());
      ++*records;
    } else {
      w.cancel_record();
    }
  }
  // A reference timestamp.
  if (std::uint8_t* b =
          w.begin_record(RecordKind::reference_timestamp, "GstReferenceTimestampMetaAPI", 128)) {
    const std::size_t used =
        write_reference_timestamp(b, 128, ReferenceTimestamp{1000u * n, 33u, "timestamp/x-test"});
    if (used) {
      w.commit_record(used);
      ++*records;
    } else {
      w.cancel_record();
    }
  }
  // Analytics: an OD, an oriented OD, a classification, a track, a segmentation, relations.
  const std::size_t room = 4096;
  if (std::uint8_t* b =
          w.begin_record(RecordKind::analytics, "GstAnalyticsRelationMetaAPI", room)) {
    AnalyticsWriter aw(b, room, 5);
    ObjectDetection od;
    od.x = n, od.y = 2 * n, od.w = 10, od.h = 20, od.confidence = 0.75f, od.label = "ball";
    ObjectDetection tilted = od;
    tilted.r = kR, tilted.oriented = true, tilted.label = "tilted";
    ClassEntry classes[] = {{0.9f, "ball"}, {0.05f, "cube"}, {0.05f, ""}};
    Tracking t{100u + n, 5, 6, n % 3 == 0};
    std::uint32_t regions[] = {7, 100u + n};
    std::uint8_t mask[12 * 4];
    for (std::size_t k = 0; k < sizeof mask; ++k) mask[k] = static_cast<std::uint8_t>(k + n);
    Segmentation s;
    s.seg_type = 1, s.x = -n, s.y = n, s.w = 80, s.h = 40, s.region_count = 2,
    s.region_ids = regions, s.mask_width = 8, s.mask_height = 4, s.mask_stride = 12,
    s.mask_format = 25, s.mask = mask;
    bool ok = aw.ok() && aw.add_object_detection(0, od) == 0 &&
              aw.add_object_detection(1, tilted) == 1 &&
              aw.add_classification(2, classes, 3) == 2 && aw.add_tracking(3, t) == 3 &&
              aw.add_segmentation(4, s) == 4 && aw.add_relation(2, 0, 2) &&
              aw.add_relation(0, 2, 4) && aw.add_relation(4, 0, 8);
    if (ok) {
      w.commit_record(aw.finish());
      ++*records;
    } else {
      w.cancel_record();
    }
  }
  // Tensors: an int4 of odd length, a float32 matrix, an empty one.
  Tensor ts[3];
  ts[0].id = "packed", ts[0].dtype = "int4", ts[0].num_dims = 1, ts[0].dims[0] = 5,
  ts[0].data_size = 3;
  ts[1].id = "boxes", ts[1].dtype = "float32", ts[1].num_dims = 2, ts[1].dims[0] = 3,
  ts[1].dims[1] = 4, ts[1].data_size = 48, ts[1].dims_order = 1;
  ts[2].id = "none", ts[2].dtype = "uint8", ts[2].num_dims = 2, ts[2].dims[0] = 0,
  ts[2].dims[1] = 7, ts[2].data_size = 0;
  std::size_t entries = 0;
  for (const Tensor& t : ts) entries += TensorsWriter::entry_bytes(t);
  if (std::uint8_t* b = w.begin_record(RecordKind::tensors, "GstTensorMetaAPI", 1024)) {
    TensorsWriter tw(b, 1024, w.body_offset(), 3, entries);
    bool ok = tw.ok();
    for (int k = 0; ok && k < 3; ++k) {
      std::uint8_t* d = tw.add(ts[k]);
      ok = d != nullptr;
      for (std::uint64_t j = 0; ok && j < ts[k].data_size; ++j)
        d[j] = static_cast<std::uint8_t>(j * 3 + k + n);
    }
    const std::size_t used = ok ? tw.finish() : 0;
    if (used) {
      w.commit_record(used);
      ++*records;
    } else {
      w.cancel_record();
    }
  }
  // Serialized: opaque bytes.
  const std::uint8_t blob[5] = {9, 8, 7, 6, static_cast<std::uint8_t>(n)};
  if (w.add_record(RecordKind::serialized, "TestSerialMetaAPI", blob, sizeof blob)) ++*records;
  return w.size();
}

// Reads everything back; "" when every field is what write_all(n) put there, else what differs.
std::string check_all(const std::uint8_t* area, std::size_t bytes, int n, int records) {
  AreaReader r(area, bytes);
  Record rec;
  int seen = 0;
  std::string error;
  while (r.next(&rec)) {
    ++seen;
    switch (rec.kind) {
      case RecordKind::custom: {
        if (rec.name != "test-meta") return "custom name";
        CustomView v;
        if (!v.parse(rec.body, &error)) return error;
        Field f;
        std::vector<Field> fields;
        while (v.next(&f)) fields.push_back(f);
        if (v.error()) return v.error();
        if (fields.size() != 7) return "custom field count";
        if (fields[0].type != FieldType::int64 || fields[0].i != -n) return "int64";
        if (fields[1].u != (1ull << 40 | static_cast<unsigned>(n))) return "uint64";
        if (fields[2].d != n / 8.0) return "double";
        if (fields[3].b != (n % 2 == 1)) return "boolean";
        if (fields[4].text != "frame-" + std::to_string(n)) return "string";
        if (fields[5].text != std::string("\x01\x00\x02", 3)) return "bytes";
        if (fields[6].type_name != "GstFraction" || fields[6].text != std::to_string(n) + "/97")
          return "other";
        break;
      }
      case RecordKind::reference_timestamp: {
        ReferenceTimestamp ts;
        if (!read_reference_timestamp(rec.body, &ts, &error)) return error;
        if (ts.timestamp != 1000u * n || ts.duration != 33u || ts.caps != "timestamp/x-test")
          return "reference timestamp";
        break;
      }
      case RecordKind::analytics: {
        AnalyticsView v;
        if (!v.parse(rec.body, &error)) return error;
        if (v.mtd_count() != 5 || v.relation_count() != 3) return "analytics counts";
        Mtd m;
        if (!v.mtd(0, &m, &error)) return error;
        if (m.type != MtdType::object_detection || m.od.x != n || m.od.y != 2 * n || m.od.w != 10 ||
            m.od.h != 20 || m.od.confidence != 0.75f || m.od.label != "ball" || m.od.oriented)
          return "OD";
        if (!v.mtd(1, &m, &error)) return error;
        if (!m.od.oriented || m.od.r != kR || m.od.label != "tilted" || m.id != 1)
          return "oriented OD";
        if (!v.mtd(2, &m, &error)) return error;
        if (m.type != MtdType::classification || m.class_count != 3) return "classification";
        ClassEntry c;
        if (!v.class_entry(m, 1, &c) || c.label != "cube" || c.confidence != 0.05f)
          return "class 1";
        if (!v.class_entry(m, 2, &c) || !c.label.empty()) return "class 2";
        if (v.class_entry(m, 3, &c)) return "class 3 exists";
        if (!v.mtd(3, &m, &error)) return error;
        if (m.tracking.tracking_id != 100u + n || m.tracking.first_seen != 5 ||
            m.tracking.last_seen != 6 || m.tracking.lost != (n % 3 == 0))
          return "tracking";
        if (!v.mtd(4, &m, &error)) return error;
        const Segmentation& s = m.segmentation;
        if (s.seg_type != 1 || s.x != -n || s.y != n || s.w != 80 || s.h != 40 ||
            s.region_count != 2 || region_id(s, 1) != 100u + n || s.mask_stride != 12 ||
            s.mask_height != 4 || s.mask_format != 25)
          return "segmentation";
        for (std::size_t k = 0; k < 48; ++k)
          if (s.mask[k] != static_cast<std::uint8_t>(k + n)) return "mask byte";
        Relation rel;
        if (!v.relation(2, &rel, &error)) return error;
        if (rel.from != 4 || rel.to != 0 || rel.types != 8) return "relation";
        break;
      }
      case RecordKind::tensors: {
        TensorsView v;
        if (!v.parse(rec.body, &error)) return error;
        if (v.count() != 3) return "tensor count";
        for (std::uint32_t k = 0; k < 3; ++k) {
          Tensor t;
          if (!v.tensor(k, &t, &error)) return error;
          const std::uint64_t sizes[] = {3, 48, 0};
          if (t.data_size != sizes[k]) return "tensor size";
          if (t.data_size &&
              (reinterpret_cast<std::uintptr_t>(t.data) - reinterpret_cast<std::uintptr_t>(area)) %
                      64 !=
                  0)
            return "tensor data not on a 64-byte boundary of the area";
          for (std::uint64_t j = 0; j < t.data_size; ++j)
            if (t.data[j] != static_cast<std::uint8_t>(j * 3 + k + n)) return "tensor byte";
        }
        Tensor t;
        v.tensor(1, &t, &error);
        if (t.id != "boxes" || t.dtype != "float32" || t.num_dims != 2 || t.dims[1] != 4 ||
            t.dims_order != 1)
          return "tensor 1 description";
        break;
      }
      case RecordKind::serialized:
        if (rec.name != "TestSerialMetaAPI" || rec.body.size != 8 || rec.body.data[4] != n)
          return "serialized";
        break;
      default:
        return "unknown kind";
    }
  }
  if (r.error()) return r.error();
  if (seen != records) return std::to_string(seen) + " records of " + std::to_string(records);
  return "";
}

}  // namespace

TEST(Metas, EveryKindRoundTripsFieldByField) {
  alignas(64) std::uint8_t area[16384];
  for (int n = 1; n < 20; ++n) {
    int records = 0;
    const std::size_t used = write_all(area, sizeof area, n, &records);
    ASSERT_EQ(records, 5);
    ASSERT_GT(used, 0u);
    EXPECT_EQ(used % 8, 0u);
    EXPECT_EQ(check_all(area, used, n, records), "") << "frame " << n;
  }
}

// However little room there is, what the writers accepted reads back exactly.
TEST(Metas, WritersRefuseWhatDoesNotFitAndLeaveAValidArea) {
  alignas(64) std::uint8_t full[16384];
  int all = 0;
  const std::size_t need = write_all(full, sizeof full, 3, &all);
  for (std::size_t cap = 0; cap <= need; ++cap) {
    std::vector<std::uint8_t> area(cap + 64);
    // 64-aligned start, as a real meta area.
    auto* p = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(area.data()) + 63) &
                                              ~std::uintptr_t{63});
    int records = 0;
    const std::size_t used = write_all(p, cap, 3, &records);
    ASSERT_LE(used, cap);
    ASSERT_EQ(check_all(p, used, 3, records), "") << "capacity " << cap;
  }
}

TEST(Metas, EveryTruncationIsRefusedOrReadsWhatItHolds) {
  alignas(64) std::uint8_t area[16384];
  int records = 0;
  const std::size_t used = write_all(area, sizeof area, 5, &records);
  for (std::size_t cut = 0; cut < used; ++cut) {
    // The header still claims `used` bytes: a reader given fewer refuses the area.
    std::vector<std::uint8_t> copy(area, area + cut);
    AreaReader r(copy.data(), copy.size());
    Record rec;
    int n = 0;
    while (r.next(&rec)) ++n;
    if (cut > 0) {
      EXPECT_NE(r.error(), nullptr) << "cut " << cut;
    }
    EXPECT_EQ(n, 0);
  }
}

namespace {

struct Corruption {
  const char* what;
  std::size_t offset;  // from the record's body start
  std::uint32_t value;
};

// Writes one record of `kind` built by `fill`, corrupts a u32 in its body, and decodes it.
template <typename Fill, typename Decode>
void expect_refused(RecordKind kind, Fill fill, Decode decode, const Corruption& c) {
  alignas(64) std::uint8_t area[8192] = {};
  AreaWriter w(area, sizeof area);
  std::uint8_t* b = w.begin_record(kind, "x", 4096);
  ASSERT_NE(b, nullptr);
  const std::size_t used = fill(b, 4096, w.body_offset());
  ASSERT_GT(used, 0u);
  w.commit_record(used);
  std::memcpy(b + c.offset, &c.value, 4);
  AreaReader r(area, w.size());
  Record rec;
  ASSERT_TRUE(r.next(&rec));
  std::string error;
  EXPECT_FALSE(decode(rec.body, &error)) << c.what;
  EXPECT_FALSE(error.empty()) << c.what;
}

std::size_t fill_analytics(std::uint8_t* b, std::size_t cap, std::size_t) {
  AnalyticsWriter aw(b, cap, 3);
  ClassEntry classes[] = {{0.5f, "a"}, {0.5f, "b"}};
  std::uint8_t mask[16] = {};
  Segmentation s;
  s.mask_width = 4, s.mask_height = 4, s.mask_stride = 4, s.mask = mask;
  aw.add_object_detection(0, ObjectDetection{1, 2, 3, 4, 0, 1, false, "ball"});
  aw.add_classification(1, classes, 2);
  aw.add_segmentation(2, s);
  aw.add_relation(0, 1, 2);
  return aw.finish();
}

bool decode_analytics(Bytes body, std::string* error) {
  AnalyticsView v;
  if (!v.parse(body, error)) return false;
  Mtd m;
  for (std::uint32_t i = 0; i < v.mtd_count(); ++i) {
    if (!v.mtd(i, &m, error)) return false;
    ClassEntry c;
    for (std::uint32_t j = 0; j < m.class_count; ++j)
      if (!v.class_entry(m, j, &c)) return (*error = "class entry", false);
  }
  Relation r;
  for (std::uint32_t i = 0; i < v.relation_count(); ++i)
    if (!v.relation(i, &r, error)) return false;
  return true;
}

std::size_t fill_tensors(std::uint8_t* b, std::size_t cap, std::size_t off) {
  Tensor t;
  t.id = "t", t.dtype = "float32", t.num_dims = 2, t.dims[0] = 2, t.dims[1] = 3, t.data_size = 24;
  TensorsWriter tw(b, cap, off, 1, TensorsWriter::entry_bytes(t));
  tw.add(t);
  return tw.finish();
}

bool decode_tensors(Bytes body, std::string* error) {
  TensorsView v;
  if (!v.parse(body, error)) return false;
  Tensor t;
  for (std::uint32_t i = 0; i < v.count(); ++i)
    if (!v.tensor(i, &t, error)) return false;
  return true;
}

std::size_t fill_custom(std::uint8_t* b, std::size_t cap, std::size_t) {
  CustomWriter cw(b, cap);
  cw.add_int64("a", 1);
  cw.add_other("f", "GstFraction", "1/2");
  return cw.finish();
}

bool decode_custom(Bytes body, std::string* error) {
  CustomView v;
  if (!v.parse(body, error)) return false;
  Field f;
  while (v.next(&f)) {
  }
  if (v.error()) *error = v.error();
  return v.error() == nullptr;
}

}  // namespace

TEST(Metas, CorruptedAnalyticsAreRefusedWithAReason) {
  for (const Corruption& c : {
           Corruption{"mtd count", 0, 0xffffffffu},
           Corruption{"relation count", 4, 0x10000000u},
           Corruption{"heap offset", 8, 0xfffffff0u},
           Corruption{"heap size", 12, 0xffffffffu},
           Corruption{"relations offset", 16, 0xffffff00u},
           Corruption{"OD label offset", 24 + 12, 0xffffffffu},
           Corruption{"OD label length", 24 + 16, 0x7fffffffu},
           Corruption{"class payload offset", 24 + 56 + 20, 3},
           Corruption{"class payload length", 24 + 56 + 24, 0xffffffffu},
           Corruption{"segmentation payload length", 24 + 112 + 24, 12},
       })
    expect_refused(RecordKind::analytics, fill_analytics, decode_analytics, c);
}

TEST(Metas, CorruptedAnalyticsPayloadsAreRefused) {
  // The classification's own count and the segmentation's mask size, inside the heap.
  alignas(64) std::uint8_t body[4096] = {};
  const std::size_t used = fill_analytics(body, sizeof body, 0);
  AnalyticsView v;
  std::string error;
  ASSERT_TRUE(v.parse(Bytes{body, used}, &error)) << error;
  Mtd m;
  ASSERT_TRUE(v.mtd(1, &m, &error));
  std::uint32_t huge = 0x7fffffffu;
  std::memcpy(const_cast<std::uint8_t*>(m.classes) - 4, &huge, 4);
  EXPECT_FALSE(v.mtd(1, &m, &error));
  EXPECT_NE(error.find("classes"), std::string::npos) << error;
  ASSERT_TRUE(v.mtd(2, &m, &error));
  std::uint8_t* seg = const_cast<std::uint8_t*>(m.segmentation.mask) - 40;  // no regions
  std::memcpy(seg + 28, &huge, 4);  // mask height: stride * height far past the payload
  EXPECT_FALSE(v.mtd(2, &m, &error));
  const std::uint32_t relation_to = 9;
  std::uint32_t relations_offset = 0;  // the writer puts the relations before the heap
  std::memcpy(&relations_offset, body + 16, 4);
  std::uint8_t* rel = body + relations_offset;
  std::memcpy(rel + 4, &relation_to, 4);
  Relation r;
  EXPECT_FALSE(v.relation(0, &r, &error));
  EXPECT_NE(error.find("names mtd 9"), std::string::npos) << error;
}

TEST(Metas, CorruptedTensorsAreRefusedWithAReason) {
  for (const Corruption& c : {
           Corruption{"tensor count", 0, 257},
           Corruption{"second tensor that is not there", 0, 2},
           Corruption{"entry size", 8, 0xfffffff8u},
           Corruption{"entry size too small", 8, 8},
           Corruption{"id length", 8 + 4, 0xffff},
           Corruption{"dims", 8 + 8, 17},
           Corruption{"dims order", 8 + 12, 5},
           Corruption{"data offset", 8 + 16, 0xffffff00u},
           Corruption{"data size", 8 + 24, 25},
           Corruption{"a dim that disagrees with the data", 8 + 32 + 8 + 8, 1000},
       })
    expect_refused(RecordKind::tensors, fill_tensors, decode_tensors, c);
}

TEST(Metas, CorruptedCustomFieldsAreRefusedWithAReason) {
  for (const Corruption& c : {
           Corruption{"field count", 0, 0x10000000u},
           Corruption{"field size", 8, 0xfffffff0u},
           Corruption{"field size misaligned", 8, 17},
           Corruption{"value length", 8 + 8, 0x7fffffffu},
           Corruption{"int64 of 4 bytes", 8 + 8, 4},
           Corruption{"unknown type", 8 + 4, 0x00630001u},
           Corruption{"other without a type name", 0, 0},
       }) {
    if (std::string(c.what) == "other without a type name") {
      // Overwrite the second field's type name and its NUL with letters.
      alignas(64) std::uint8_t body[512] = {};
      const std::size_t used = fill_custom(body, sizeof body, 0);
      std::uint32_t first_size = 0;
      std::memcpy(&first_size, body + 8, 4);
      const std::size_t second = 8 + first_size;
      for (std::size_t k = second + 16 + 1; k < used; ++k) body[k] = 'A';
      std::string error;
      EXPECT_FALSE(decode_custom(Bytes{body, used}, &error));
      EXPECT_NE(error.find("type's name"), std::string::npos) << error;
      continue;
    }
    expect_refused(RecordKind::custom, fill_custom, decode_custom, c);
  }
}

TEST(Metas, CorruptedAreaHeadersAndRecordsAreRefused) {
  alignas(64) std::uint8_t area[16384];
  int records = 0;
  const std::size_t used = write_all(area, sizeof area, 2, &records);
  auto refused = [&](std::size_t offset, std::uint32_t value, std::size_t width) {
    std::vector<std::uint8_t> copy(area, area + used);
    std::memcpy(copy.data() + offset, &value, width);
    AreaReader r(copy.data(), copy.size());
    Record rec;
    while (r.next(&rec)) {
    }
    return r.error() != nullptr;
  };
  EXPECT_TRUE(refused(0, 0x12345678u, 4)) << "magic";
  EXPECT_TRUE(refused(4, 2, 2)) << "version";
  EXPECT_TRUE(refused(8, static_cast<std::uint32_t>(used + 8), 4)) << "used past the frame";
  EXPECT_TRUE(refused(6, 200, 2)) << "record count past the records";
  EXPECT_TRUE(refused(16, 0, 4)) << "record size 0";
  EXPECT_TRUE(refused(16, 13, 4)) << "record size not a multiple of 8";
  EXPECT_TRUE(refused(16, 0xfffffff8u, 4)) << "record size past the area";
  EXPECT_TRUE(refused(22, 2000, 2)) << "name longer than the limit";
  // No metas at all is not an error.
  AreaReader empty(area, 0);
  Record rec;
  EXPECT_FALSE(empty.next(&rec));
  EXPECT_EQ(empty.error(), nullptr);
}

TEST(Metas, UnknownKindsAreHandedToTheCallerToSkip) {
  alignas(64) std::uint8_t area[256];
  AreaWriter w(area, sizeof area);
  ASSERT_TRUE(w.add_record(static_cast<RecordKind>(77), "Future", "abc", 3));
  ASSERT_TRUE(w.add_record(RecordKind::serialized, "Now", "de", 2));
  AreaReader r(area, w.size());
  Record rec;
  ASSERT_TRUE(r.next(&rec));
  EXPECT_EQ(static_cast<int>(rec.kind), 77);
  EXPECT_EQ(rec.name, "Future");
  ASSERT_TRUE(r.next(&rec));
  EXPECT_EQ(rec.name, "Now");
  EXPECT_EQ(rec.body.size, 8u);  // padded to 8
  EXPECT_FALSE(r.next(&rec));
  EXPECT_EQ(r.error(), nullptr);
}

TEST(Metas, DtypeBits) {
  EXPECT_EQ(tensor_dtype_bits("int4"), 4u);
  EXPECT_EQ(tensor_dtype_bits("bfloat16"), 16u);
  EXPECT_EQ(tensor_dtype_bits("complex128"), 128u);
  EXPECT_EQ(tensor_dtype_bits("string"), 0u);
  EXPECT_EQ(tensor_dtype_bits("nonsense"), 0u);
}

// valid_utf8 reads ASCII eight bytes a step: every sequence, well-formed or not, is judged the same
// at every offset from the string's start and with every length of ASCII after it, across the
// eight-byte steps' boundaries.
TEST(MetasText, Utf8IsJudgedTheSameAtEveryOffset) {
  struct Case {
    const char* bytes;
    bool valid;
  } cases[] = {
      {"", true},
      {"\xc3\xa9", true},           // U+00E9
      {"\xe2\x82\xac", true},       // U+20AC
      {"\xf0\x9f\x98\x80", true},   // U+1F600
      {"\xf4\x8f\xbf\xbf", true},   // U+10FFFF
      {"\x80", false},              // a continuation alone
      {"\xc3", false},              // cut short
      {"\xe2\x82", false},          // cut short
      {"\xc0\xaf", false},          // overlong
      {"\xe0\x80\xaf", false},      // overlong
      {"\xed\xa0\x80", false},      // a surrogate
      {"\xf4\x90\x80\x80", false},  // past U+10FFFF
      {"\xff", false},
      {"\xc3\x28", false},  // a lead byte before ASCII
  };
  for (const Case& c : cases) {
    for (std::size_t before = 0; before <= 17; ++before) {
      for (std::size_t after = 0; after <= 17; ++after) {
        std::string s(before, 'a');
        s += c.bytes;
        s.append(after, 'z');
        // A sequence cut short and then followed by ASCII is as ill-formed as one at the end.
        EXPECT_EQ(text::valid_utf8(s), c.valid)
            << text::quoted(s) << " (" << before << " before, " << after << " after)";
      }
    }
  }
  std::string ascii(100, 'x');
  ascii[3] = '\0';  // NUL is UTF-8; callers that refuse it say so
  EXPECT_TRUE(text::valid_utf8(ascii));
  ascii[99] = '\x80';
  EXPECT_FALSE(text::valid_utf8(ascii));
}
