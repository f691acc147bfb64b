// The meta area's decoders (core/src/metas, docs/metas.md): a producer may put any bytes in a
// frame's meta area. Whatever they are, every view either reports the area or record malformed
// or hands out strings and data that lie inside the bytes (each is read in full here, so the
// sanitizers see any that do not). Values fed through the writers read back unchanged.
#include <cstring>
#include <string>
#include <vector>

#include "cudaipc/metas.hpp"
#include "fuzz.hpp"

namespace cudaipc::fuzz {
namespace {

using namespace cudaipc::metas;

volatile std::uint64_t g_sink;  // keeps the reads below from being optimised away

void touch(const void* p, std::size_t n) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += b[i];
  g_sink = g_sink + sum;
}

void touch(std::string_view s) {
  touch(s.data(), s.size());
}

// Every record of every kind, read with every accessor. False on the first malformed one.
bool decode_everything(const std::uint8_t* area, std::size_t size, std::string* why) {
  AreaReader reader(area, size);
  Record rec;
  while (reader.next(&rec)) {
    touch(rec.name);
    touch(rec.body.data, rec.body.size);
    switch (rec.kind) {
      case RecordKind::analytics: {
        AnalyticsView v;
        if (!v.parse(rec.body, why)) return false;
        for (std::uint32_t i = 0; i < v.mtd_count(); ++i) {
          Mtd m;
          if (!v.mtd(i, &m, why)) return false;
          touch(m.od.label);
          ClassEntry c;
          for (std::uint32_t j = 0; j < m.class_count; ++j)
            if (v.class_entry(m, j, &c)) touch(c.label);
          if (m.type == MtdType::segmentation) {
            const Segmentation& s = m.segmentation;
            for (std::uint32_t j = 0; j < s.region_count; ++j) g_sink = g_sink + region_id(s, j);
            touch(s.mask, static_cast<std::size_t>(s.mask_stride) * s.mask_height);
          }
        }
        for (std::uint32_t i = 0; i < v.relation_count(); ++i) {
          Relation r;
          if (!v.relation(i, &r, why)) return false;
          if (r.from >= v.mtd_count() || r.to >= v.mtd_count()) fail("relation past the mtds");
        }
        break;
      }
      case RecordKind::tensors: {
        TensorsView v;
        if (!v.parse(rec.body, why)) return false;
        for (std::uint32_t i = 0; i < v.count(); ++i) {
          Tensor t;
          if (!v.tensor(i, &t, why)) return false;
          touch(t.id);
          touch(t.dtype);
          touch(t.data, t.data_size);
          if (t.num_dims > kMaxTensorDims) fail("tensor with too many dims accepted");
        }
        break;
      }
      case RecordKind::custom: {
        CustomView v;
        if (!v.parse(rec.body, why)) return false;
        Field f;
        while (v.next(&f)) {
          touch(f.name);
          touch(f.text);
          touch(f.type_name);
        }
        if (v.error()) return (*why = v.error(), false);
        break;
      }
      case RecordKind::reference_timestamp: {
        ReferenceTimestamp ts;
        if (!read_reference_timestamp(rec.body, &ts, why)) return false;
        touch(ts.caps);
        break;
      }
      default:
        break;
    }
  }
  if (reader.error()) return (*why = reader.error(), false);
  return true;
}

// Writes values chosen by the input and checks they read back as written.
void round_trip(Input& in) {
  alignas(64) std::uint8_t area[2048];
  AreaWriter w(area, sizeof area);
  ObjectDetection od;
  od.x = static_cast<std::int32_t>(in.u32());
  od.y = static_cast<std::int32_t>(in.u32());
  od.w = static_cast<std::int32_t>(in.u32());
  od.h = static_cast<std::int32_t>(in.u32());
  od.confidence = static_cast<float>(in.u16()) / 7.f;
  const std::string label(in.u8() % 40, static_cast<char>('a' + in.u8() % 26));
  od.label = label;
  const std::int64_t value = static_cast<std::int64_t>(in.u64());
  const std::uint32_t tensor_bytes = in.u8();
  const std::uint8_t fill = in.u8();
  if (std::uint8_t* b = w.begin_record(RecordKind::analytics, "a", 512)) {
    AnalyticsWriter aw(b, 512, 1);
    if (aw.add_object_detection(3, od) != 0) fail("an OD that fits was refused");
    w.commit_record(aw.finish());
  }
  if (std::uint8_t* b = w.begin_record(RecordKind::custom, "c", 64)) {
    CustomWriter cw(b, 64);
    if (!cw.add_int64("v", value)) fail("a field that fits was refused");
    w.commit_record(cw.finish());
  }
  Tensor t;
  t.id = "t", t.dtype = "uint8", t.num_dims = 1, t.dims[0] = tensor_bytes,
  t.data_size = tensor_bytes;
  if (std::uint8_t* b = w.begin_record(RecordKind::tensors, "t", 1024)) {
    TensorsWriter tw(b, 1024, w.body_offset(), 1, TensorsWriter::entry_bytes(t));
    std::uint8_t* d = tw.add(t);
    if (!d) fail("a tensor that fits was refused");
    std::memset(d, fill, tensor_bytes);
    w.commit_record(tw.finish());
  }
  AreaReader r(area, w.size());
  Record rec;
  std::string why;
  int seen = 0;
  while (r.next(&rec)) {
    ++seen;
    if (rec.kind == RecordKind::analytics) {
      AnalyticsView v;
      Mtd m;
      if (!v.parse(rec.body, &why) || !v.mtd(0, &m, &why)) fail("own analytics refused: " + why);
      if (m.id != 3 || m.od.x != od.x || m.od.y != od.y || m.od.w != od.w || m.od.h != od.h ||
          m.od.confidence != od.confidence || m.od.label != label)
        fail("an OD read back differently");
    } else if (rec.kind == RecordKind::custom) {
      CustomView v;
      Field f;
      if (!v.parse(rec.body, &why) || !v.next(&f) || f.i != value)
        fail("a field read back differently");
    } else if (rec.kind == RecordKind::tensors) {
      TensorsView v;
      Tensor got;
      if (!v.parse(rec.body, &why) || !v.tensor(0, &got, &why)) fail("own tensor refused: " + why);
      if (got.data_size != tensor_bytes) fail("tensor size read back differently");
      for (std::uint32_t i = 0; i < tensor_bytes; ++i)
        if (got.data[i] != fill) fail("tensor data read back differently");
    }
  }
  if (r.error() || seen != 3) fail("own area refused or short");
}

void one_input(Input& in) {
  const std::uint8_t mode = in.u8();
  if (mode % 8 == 0) {
    round_trip(in);
    return;
  }
  // The rest is an area, copied to a 64-byte boundary as a real one lies.
  Bytes rest = in.rest(1 << 16);
  std::vector<std::uint8_t> storage(rest.size() + 64);
  auto* area = reinterpret_cast<std::uint8_t*>(
      (reinterpret_cast<std::uintptr_t>(storage.data()) + 63) & ~std::uintptr_t{63});
  if (!rest.empty()) std::memcpy(area, rest.data(), rest.size());
  std::string why;
  if (!decode_everything(area, rest.size(), &why)) {
    if (why.empty()) fail("a malformed area without a reason");
    throw Error(Errc::protocol, why);
  }
}

std::vector<Bytes> seeds() {
  std::vector<Bytes> out;
  // An area with one record of each kind, as the writers lay them out.
  alignas(64) std::uint8_t area[4096];
  AreaWriter w(area, sizeof area);
  if (std::uint8_t* b =
          w.begin_record(RecordKind::analytics, "GstAnalyticsRelationMetaAPI", 1024)) {
    AnalyticsWriter aw(b, 1024, 4);
    ClassEntry classes[] = {{0.5f, "ball"}, {0.5f, "cube"}};
    std::uint32_t regions[] = {1, 2};
    std::uint8_t mask[16] = {1, 2, 3};
    Segmentation s;
    s.region_count = 2, s.region_ids = regions, s.mask_width = 4, s.mask_height = 4,
    s.mask_stride = 4, s.mask = mask;
    aw.add_object_detection(0, ObjectDetection{1, 2, 3, 4, 0.5f, 0.9f, true, "ball"});
    aw.add_classification(1, classes, 2);
    aw.add_tracking(2, Tracking{7, 1, 2, true});
    aw.add_segmentation(3, s);
    aw.add_relation(1, 0, 2);
    w.commit_record(aw.finish());
  }
  Tensor t;
  t.id = "boxes", t.dtype = "float32", t.num_dims = 2, t.dims[0] = 2, t.dims[1] = 4,
  t.data_size = 32;
  if (std::uint8_t* b = w.begin_record(RecordKind::tensors, "GstTensorMetaAPI", 512)) {
    TensorsWriter tw(b, 512, w.body_offset(), 1, TensorsWriter::entry_bytes(t));
    if (std::uint8_t* d = tw.add(t)) std::memset(d, 0x3f, 32);
    w.commit_record(tw.finish());
  }
  if (std::uint8_t* b = w.begin_record(RecordKind::custom, "cudaipc-meta", 256)) {
    CustomWriter cw(b, 256);
    cw.add_int64("i", 5);
    cw.add_string("s", "x");
    cw.add_other("f", "GstFraction", "1/2");
    w.commit_record(cw.finish());
  }
  if (std::uint8_t* b =
          w.begin_record(RecordKind::reference_timestamp, "GstReferenceTimestampMetaAPI", 64))
    w.commit_record(write_reference_timestamp(b, 64, ReferenceTimestamp{1, 2, "timestamp/x"}));
  w.add_record(RecordKind::serialized, "X", "abc", 3);
  Bytes bytes(area, area + w.size());
  out.push_back(SeedBuilder().u8(1).bytes(bytes).done());
  // A round trip: mode 0, then the values it reads.
  Bytes trip(48);
  for (std::size_t k = 0; k < trip.size(); ++k) trip[k] = static_cast<std::uint8_t>(k * 5);
  trip[0] = 0;
  out.push_back(trip);
  return out;
}

}  // namespace

const Target& target() {
  static const Target t{"metas", nullptr, one_input, seeds, {Errc::protocol}};
  return t;
}

}  // namespace cudaipc::fuzz
