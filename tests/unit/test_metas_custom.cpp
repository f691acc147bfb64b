// Custom records' typed and nested fields (docs/metas.md, kind 4): every field type written and
// read back with its width, structures, arrays and lists nested to the limit and refused past it
// (by the writer, and by the reader when another process wrote them by hand), fractions GStreamer
// would refuse refused here first, and every truncation of a nested record refused or read in full.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "cudaipc/metas.hpp"
#include "nested_records.hpp"

using namespace cudaipc::metas;

namespace {

// A custom body with one field of every type, values from `n`.
std::size_t write_typed(std::uint8_t* b, std::size_t cap, int n) {
  CustomWriter w(b, cap);
  bool ok = w.add_int32("i32", -n) && w.add_uint32("u32", 0x80000000u | n) &&
            w.add_int64("i64", -(1ll << 40) - n) && w.add_uint64("u64", (1ull << 63) | n) &&
            w.add_float("f32", n / 4.0f) && w.add_double("f64", n / 3.0) &&
            w.add_boolean("b", n % 2 == 1) && w.add_fraction("fr", n, -97) &&
            w.add_string("s", "frame-" + std::to_string(n)) && w.add_bytes("raw", "\x01\x00", 2);
  CustomWriter st = w.begin_structure("inner", "test-inner");
  ok = ok && st.add_int32("index", n) && st.add_string("what", "nested");
  CustomWriter arr = st.begin_array("a", FieldType::array);
  for (int k = 0; k < 3; ++k) ok = ok && arr.add_int32({}, n + k);
  ok = ok && st.end_nested(arr) && w.end_nested(st);
  CustomWriter list = w.begin_array("l", FieldType::list);
  ok = ok && list.add_string({}, "x") && list.add_string({}, "y") && w.end_nested(list);
  return ok ? w.finish() : 0;
}

// Reads every field of `v` and, depth first, of everything nested in it; false at the first error.
bool read_all(CustomView& v, unsigned* deepest, std::string* error) {
  Field f;
  *deepest = std::max(*deepest, v.depth());
  while (v.next(&f)) {
    if (!is_nested(f.type)) continue;
    CustomView members;
    if (!members.parse_nested(v, f, error) || !read_all(members, deepest, error)) return false;
  }
  if (v.error()) *error = v.error();
  return v.error() == nullptr;
}

}  // namespace

TEST(MetasCustom, EveryTypeKeepsItsWidthAndValue) {
  for (int n : {0, 1, 7, 1000}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    alignas(8) std::uint8_t b[1024];
    const std::size_t used = write_typed(b, sizeof b, n);
    ASSERT_GT(used, 0u);
    CustomView v;
    std::string error;
    ASSERT_TRUE(v.parse(Bytes{b, used}, &error)) << error;
    ASSERT_EQ(v.count(), 12u);
    std::vector<Field> fields(12);
    for (Field& f : fields) ASSERT_TRUE(v.next(&f)) << (v.error() ? v.error() : "");
    EXPECT_FALSE(v.next(&fields[0]));
    EXPECT_EQ(v.error(), nullptr);
    EXPECT_EQ(fields[0].type, FieldType::int32);
    EXPECT_EQ(fields[0].i, -n);
    EXPECT_EQ(fields[1].type, FieldType::uint32);
    EXPECT_EQ(fields[1].u, 0x80000000u | n);
    EXPECT_EQ(fields[2].type, FieldType::int64);
    EXPECT_EQ(fields[2].i, -(1ll << 40) - n);
    EXPECT_EQ(fields[3].type, FieldType::uint64);
    EXPECT_EQ(fields[3].u, (1ull << 63) | n);
    EXPECT_EQ(fields[4].type, FieldType::float32);
    EXPECT_EQ(fields[4].d, n / 4.0f);
    EXPECT_EQ(fields[5].type, FieldType::float64);
    EXPECT_EQ(fields[5].d, n / 3.0);
    EXPECT_EQ(fields[6].b, n % 2 == 1);
    EXPECT_EQ(fields[7].type, FieldType::fraction);
    EXPECT_EQ(fields[7].i, n);
    EXPECT_EQ(fields[7].den, -97);
    EXPECT_EQ(fields[8].text, "frame-" + std::to_string(n));
    EXPECT_EQ(fields[9].text, std::string("\x01\x00", 2));
    // The structure: its name, its fields, the array inside it.
    ASSERT_EQ(fields[10].type, FieldType::structure);
    EXPECT_EQ(fields[10].name, "inner");
    EXPECT_EQ(fields[10].type_name, "test-inner");
    CustomView st;
    ASSERT_TRUE(st.parse_nested(v, fields[10], &error)) << error;
    EXPECT_EQ(st.depth(), 1u);
    Field f;
    ASSERT_TRUE(st.next(&f));
    EXPECT_EQ(f.name, "index");
    EXPECT_EQ(f.i, n);
    ASSERT_TRUE(st.next(&f));
    EXPECT_EQ(f.text, "nested");
    ASSERT_TRUE(st.next(&f));
    ASSERT_EQ(f.type, FieldType::array);
    CustomView arr;
    ASSERT_TRUE(arr.parse_nested(st, f, &error)) << error;
    EXPECT_EQ(arr.depth(), 2u);
    for (int k = 0; k < 3; ++k) {
      Field m;
      ASSERT_TRUE(arr.next(&m));
      EXPECT_EQ(m.name, "");
      EXPECT_EQ(m.type, FieldType::int32);
      EXPECT_EQ(m.i, n + k);
    }
    ASSERT_EQ(fields[11].type, FieldType::list);
    CustomView list;
    ASSERT_TRUE(list.parse_nested(v, fields[11], &error)) << error;
    ASSERT_TRUE(list.next(&f));
    EXPECT_EQ(f.text, "x");
    ASSERT_TRUE(list.next(&f));
    EXPECT_EQ(f.text, "y");
    EXPECT_FALSE(list.next(&f));
    EXPECT_EQ(list.error(), nullptr);
  }
}

TEST(MetasCustom, NestingStopsAtTheLimitOnBothSides) {
  // The writer nests to kMaxCustomDepth and no further.
  alignas(8) std::uint8_t b[4096];
  CustomWriter top(b, sizeof b);
  std::vector<CustomWriter> chain{top};
  for (unsigned d = 1; d <= kMaxCustomDepth; ++d) {
    chain.push_back(chain.back().begin_array("a", FieldType::array));
    ASSERT_TRUE(chain.back().ok()) << "depth " << d;
  }
  EXPECT_FALSE(chain.back().begin_array("a", FieldType::array).ok());
  chain.back().cancel_nested();
  ASSERT_TRUE(chain.back().add_int32({}, 42));
  for (std::size_t d = chain.size() - 1; d > 0; --d)
    ASSERT_TRUE(chain[d - 1].end_nested(chain[d])) << "depth " << d;
  const std::size_t used = chain[0].finish();
  ASSERT_GT(used, 0u);
  CustomView v;
  std::string error;
  unsigned deepest = 0;
  ASSERT_TRUE(v.parse(Bytes{b, used}, &error));
  EXPECT_TRUE(read_all(v, &deepest, &error)) << error;
  EXPECT_EQ(deepest, kMaxCustomDepth);

  // A peer's hand-made record one level deeper, and 30 000 levels deeper, is refused at the limit
  // (the reader never goes past it, so the depth costs nothing).
  for (unsigned levels : {kMaxCustomDepth, kMaxCustomDepth + 1, 30000u}) {
    SCOPED_TRACE("levels " + std::to_string(levels));
    const std::vector<std::uint8_t> body = cudaipc::testing::nested_arrays(levels);
    CustomView hv;
    std::string why;
    deepest = 0;
    ASSERT_TRUE(hv.parse(Bytes{body.data(), body.size()}, &why)) << why;
    const bool ok = read_all(hv, &deepest, &why);
    EXPECT_EQ(ok, levels <= kMaxCustomDepth) << why;
    EXPECT_LE(deepest, kMaxCustomDepth);
    if (!ok) {
      EXPECT_NE(why.find("nested deeper"), std::string::npos) << why;
    }
  }
}

TEST(MetasCustom, FractionsGStreamerRefusesAreRefused) {
  alignas(8) std::uint8_t b[64];
  CustomWriter w(b, sizeof b);
  EXPECT_FALSE(w.add_fraction("z", 1, 0));
  EXPECT_FALSE(w.add_fraction("m", INT_MIN, 2));
  EXPECT_FALSE(w.add_fraction("d", 1, INT_MIN));
  for (std::int32_t den : {0, INT_MIN}) {
    CustomWriter ok(b, sizeof b);
    ASSERT_TRUE(ok.add_fraction("f", 3, 4));
    const std::size_t used = ok.finish();
    std::memcpy(b + 8 + 16 + 1 + 4, &den, 4);  // header, field header, name "f", numerator
    CustomView v;
    std::string error;
    ASSERT_TRUE(v.parse(Bytes{b, used}, &error));
    Field f;
    EXPECT_FALSE(v.next(&f));
    ASSERT_NE(v.error(), nullptr);
    EXPECT_NE(std::string(v.error()).find("fraction"), std::string::npos);
  }
}

TEST(MetasCustom, EveryTruncationOfANestedRecordIsRefusedOrReadInFull) {
  alignas(8) std::uint8_t b[1024];
  const std::size_t used = write_typed(b, sizeof b, 5);
  ASSERT_GT(used, 0u);
  for (std::size_t n = 0; n < used; ++n) {
    std::vector<std::uint8_t> cut(b, b + n);
    CustomView v;
    std::string error;
    unsigned deepest = 0;
    if (!v.parse(Bytes{cut.data(), cut.size()}, &error)) continue;
    EXPECT_FALSE(read_all(v, &deepest, &error)) << "a body cut to " << n << " bytes read whole";
  }
  // Each structure name length and member count corrupted: refused, never read past the body.
  for (std::size_t at = 0; at + 4 <= used; at += 4) {
    std::vector<std::uint8_t> bad(b, b + used);
    const std::uint32_t huge = 0xfffffff0u;
    std::memcpy(bad.data() + at, &huge, 4);
    CustomView v;
    std::string error;
    unsigned deepest = 0;
    if (v.parse(Bytes{bad.data(), bad.size()}, &error)) read_all(v, &deepest, &error);
  }
}

TEST(MetasCustom, AWriterWithoutRoomForItsMembersLeavesTheBodyValid) {
  for (std::size_t cap = 8; cap < 400; ++cap) {
    std::vector<std::uint8_t> b(cap);
    const std::size_t used = write_typed(b.data(), cap, 3);
    if (!used) continue;
    CustomView v;
    std::string error;
    unsigned deepest = 0;
    ASSERT_TRUE(v.parse(Bytes{b.data(), used}, &error)) << cap;
    EXPECT_TRUE(read_all(v, &deepest, &error)) << cap << ": " << error;
  }
}
