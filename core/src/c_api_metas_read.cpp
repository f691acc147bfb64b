// cudaipc_metas_decode (cudaipc.h): a peer's meta area checked by the core's readers
// (cudaipc/metas.hpp) and laid out as tables of fixed-size rows, so that a binding reads a frame's
// records with one call and views each table in one step. Everything a row says was read once
// and checked here; what a row points to in the area (names, strings, data) lies within it.
#include <cstring>
#include <string>
#include <vector>

#include "c_api_handles.hpp"
#include "cudaipc/cudaipc.h"
#include "cudaipc/metas.hpp"
#include "metas/text.hpp"

namespace {

using namespace cudaipc::metas;

// The tables of one decode. Thread-local and reused: a frame's decode allocates nothing once the
// tables have grown to a stream's usual size.
struct Tables {
  std::vector<cudaipc_metas_record> records;
  std::vector<cudaipc_metas_mtd> mtds;
  std::vector<cudaipc_metas_class> classes;
  std::vector<cudaipc_metas_segmentation> segmentations;
  std::vector<cudaipc_metas_relation> relations;
  std::vector<cudaipc_metas_tensor> tensors;
  std::vector<cudaipc_metas_field> fields;
  std::vector<int32_t> ranks;  // per mtd of the record being read: its detection rank, or -1
  std::string errors;
  std::uint32_t error_count = 0, unknown = 0, bad = 0;

  void clear() {
    records.clear(), mtds.clear(), classes.clear(), segmentations.clear();
    relations.clear(), tensors.clear(), fields.clear(), errors.clear();
    error_count = unknown = bad = 0;
  }
  void note(const std::string& why) {
    errors += why;
    errors += '\0';
    ++error_count;
  }
};

// What a record's body reader needs: the area (offsets count from its first byte) and the tables.
class Decoder {
 public:
  Decoder(const std::uint8_t* area, Tables& t) : area_(area), t_(t) {}

  bool analytics(Bytes body, cudaipc_metas_record* r, std::string* why);
  bool tensors(Bytes body, cudaipc_metas_record* r, std::string* why);
  bool custom(Bytes body, cudaipc_metas_record* r, std::string* why);
  bool timestamp(Bytes body, cudaipc_metas_record* r, std::string* why);

 private:
  std::uint32_t at(const void* p) const {
    return static_cast<std::uint32_t>(static_cast<const std::uint8_t*>(p) - area_);
  }
  std::uint32_t at(std::string_view s) const { return s.empty() ? 0 : at(s.data()); }
  bool fields(CustomView& view, std::string* why);
  const std::uint8_t* area_;
  Tables& t_;
};

// A name a reader hands on as text: UTF-8 without NUL. `what` names it, called only on failure.
template <typename What>
bool check_name(std::string_view s, What what, std::string* why) {
  if (std::memchr(s.data(), 0, s.size())) return (*why = what() + " holds a NUL byte", false);
  if (!text::valid_utf8(s)) return (*why = what() + " is not UTF-8", false);
  return true;
}

bool Decoder::analytics(Bytes body, cudaipc_metas_record* r, std::string* why) {
  AnalyticsView v;
  if (!v.parse(body, why)) return false;
  const std::uint32_t n = v.mtd_count();
  const std::size_t base = t_.mtds.size();
  t_.mtds.resize(base + n);
  t_.ranks.assign(n, -1);
  std::int32_t detections = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    Mtd m;
    if (!v.mtd(i, &m, why)) return false;
    cudaipc_metas_mtd& row = t_.mtds[base + i];
    row = cudaipc_metas_mtd{};
    row.type = static_cast<std::uint32_t>(m.type);
    row.id = m.id;
    row.detection = -1;
    row.track = -1;
    switch (m.type) {
      case MtdType::object_detection:
        t_.ranks[i] = detections++;
        row.flags = m.od.oriented ? 1 : 0;
        row.x = m.od.x, row.y = m.od.y, row.w = m.od.w, row.h = m.od.h;
        row.rotation = m.od.r;
        row.confidence = m.od.confidence;
        row.label_offset = at(m.od.label);
        row.label_size = static_cast<std::uint32_t>(m.od.label.size());
        break;
      case MtdType::classification:
        row.first = static_cast<std::uint32_t>(t_.classes.size());
        row.count = m.class_count;
        for (std::uint32_t j = 0; j < m.class_count; ++j) {
          ClassEntry c;
          if (!v.class_entry(m, j, &c))
            return (*why = "classification " + std::to_string(i) + ": class " + std::to_string(j) +
                           "'s label lies past the heap",
                    false);
          t_.classes.push_back(cudaipc_metas_class{c.confidence, at(c.label),
                                                   static_cast<std::uint32_t>(c.label.size())});
        }
        break;
      case MtdType::tracking:
        row.flags = m.tracking.lost ? 1 : 0;
        row.tracking_id = m.tracking.tracking_id;
        row.first_seen = m.tracking.first_seen;
        row.last_seen = m.tracking.last_seen;
        break;
      case MtdType::segmentation: {
        const Segmentation& s = m.segmentation;
        row.first = static_cast<std::uint32_t>(t_.segmentations.size());
        row.count = 1;
        t_.segmentations.push_back(cudaipc_metas_segmentation{
            s.seg_type, s.x, s.y, s.w, s.h, s.region_count, at(s.region_ids), s.mask_width,
            s.mask_height, s.mask_stride, s.mask_format, at(s.mask)});
        break;
      }
      default:
        break;  // a type this version does not read: its id and type only
    }
  }
  r->first = static_cast<std::uint32_t>(base);
  r->count = n;
  r->first_relation = static_cast<std::uint32_t>(t_.relations.size());
  r->relation_count = v.relation_count();
  const std::size_t rel_base = t_.relations.size();
  for (std::uint32_t i = 0; i < v.relation_count(); ++i) {
    Relation rel;
    if (!v.relation(i, &rel, why)) return false;
    t_.relations.push_back(cudaipc_metas_relation{rel.from, rel.to, rel.types});
  }
  // Which detection each classification and track belongs to: a detection's relation to it
  // first, then its own to a detection, each in the relations' order; the first found counts.
  // A detection's track is the last one linked to it so.
  const auto od = static_cast<std::uint32_t>(MtdType::object_detection);
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t k = rel_base; k < t_.relations.size(); ++k) {
      const cudaipc_metas_relation& rel = t_.relations[k];
      if (!rel.types) continue;
      const std::uint32_t d = pass == 0 ? rel.from : rel.to, x = pass == 0 ? rel.to : rel.from;
      cudaipc_metas_mtd& dm = t_.mtds[base + d];
      cudaipc_metas_mtd& xm = t_.mtds[base + x];
      const bool linkable = xm.type == static_cast<std::uint32_t>(MtdType::classification) ||
                            xm.type == static_cast<std::uint32_t>(MtdType::tracking);
      if (dm.type != od || !linkable || xm.detection >= 0) continue;
      xm.detection = t_.ranks[d];
      if (xm.type == static_cast<std::uint32_t>(MtdType::tracking))
        dm.track = static_cast<std::int32_t>(x);
    }
  }
  r->heap_offset = at(body.data) + static_cast<std::uint32_t>(v.heap_offset());
  r->heap_size = static_cast<std::uint32_t>(v.heap_size());
  return true;
}

bool Decoder::tensors(Bytes body, cudaipc_metas_record* r, std::string* why) {
  TensorsView v;
  if (!v.parse(body, why)) return false;
  r->first = static_cast<std::uint32_t>(t_.tensors.size());
  r->count = v.count();
  for (std::uint32_t i = 0; i < v.count(); ++i) {
    Tensor t;
    if (!v.tensor(i, &t, why)) return false;
    if (!check_name(
            t.id, [i] { return "tensor " + std::to_string(i) + "'s id"; }, why))
      return false;
    cudaipc_metas_tensor row{};
    row.id_offset = at(t.id);
    row.id_size = static_cast<std::uint32_t>(t.id.size());
    row.dtype_offset = at(t.dtype);
    row.dtype_size = static_cast<std::uint32_t>(t.dtype.size());
    row.num_dims = t.num_dims;
    row.dims_order = t.dims_order;
    row.data_offset = t.data_size ? at(t.data) : at(body.data);
    row.data_size = t.data_size;
    std::memcpy(row.dims, t.dims, sizeof row.dims);
    t_.tensors.push_back(row);
  }
  return true;
}

bool Decoder::fields(CustomView& view, std::string* why) {
  Field f;
  for (std::uint32_t i = 0; view.next(&f); ++i) {
    auto field = [&f, i] {
      return "custom field " + (f.name.empty() ? std::to_string(i) : text::quoted(f.name));
    };
    if (!check_name(
            f.name, [&] { return field() + "'s name"; }, why))
      return false;
    cudaipc_metas_field row{};
    row.type = static_cast<std::uint32_t>(f.type);
    row.name_offset = at(f.name);
    row.name_size = static_cast<std::uint32_t>(f.name.size());
    switch (f.type) {
      case FieldType::int64:
      case FieldType::int32:
        row.value.i = f.i;
        break;
      case FieldType::uint64:
      case FieldType::uint32:
        row.value.u = f.u;
        break;
      case FieldType::float64:
      case FieldType::float32:
        row.value.d = f.d;
        break;
      case FieldType::boolean:
        row.value.i = f.b ? 1 : 0;
        break;
      case FieldType::fraction:
        row.value.i = f.i;
        row.denominator = f.den;
        break;
      case FieldType::string:
        if (!text::valid_utf8(f.text))
          return (*why = field() + ": a string that is not UTF-8", false);
        [[fallthrough]];
      case FieldType::bytes:
        row.text_offset = at(f.text);
        row.text_size = static_cast<std::uint32_t>(f.text.size());
        break;
      case FieldType::other:
        if (!check_name(
                f.type_name, [&] { return field() + "'s type"; }, why))
          return false;
        if (!text::valid_utf8(f.text)) return (*why = field() + ": text that is not UTF-8", false);
        row.text_offset = at(f.text);
        row.text_size = static_cast<std::uint32_t>(f.text.size());
        row.type_name_offset = at(f.type_name);
        row.type_name_size = static_cast<std::uint32_t>(f.type_name.size());
        break;
      case FieldType::structure:
      case FieldType::array:
      case FieldType::list:
        if (f.type == FieldType::structure) {
          if (!check_name(
                  f.type_name, [&] { return field() + "'s structure name"; }, why))
            return false;
          row.text_offset = at(f.type_name);
          row.text_size = static_cast<std::uint32_t>(f.type_name.size());
        }
        break;
    }
    const std::size_t at_row = t_.fields.size();
    t_.fields.push_back(row);
    if (is_nested(f.type)) {
      CustomView members;
      if (!members.parse_nested(view, f, why)) return false;
      t_.fields[at_row].members = members.count();
      if (!fields(members, why)) return false;
    }
  }
  if (view.error()) return (*why = view.error(), false);
  return true;
}

bool Decoder::custom(Bytes body, cudaipc_metas_record* r, std::string* why) {
  CustomView v;
  if (!v.parse(body, why)) return false;
  r->first = static_cast<std::uint32_t>(t_.fields.size());
  r->count = v.count();
  return fields(v, why);
}

bool Decoder::timestamp(Bytes body, cudaipc_metas_record* r, std::string* why) {
  ReferenceTimestamp ts;
  if (!read_reference_timestamp(body, &ts, why)) return false;
  if (!text::valid_utf8(ts.caps)) return (*why = "reference caps are not UTF-8", false);
  r->timestamp = ts.timestamp;
  r->duration = ts.duration;
  r->heap_offset = at(ts.caps);
  r->heap_size = static_cast<std::uint32_t>(ts.caps.size());
  return true;
}

void decode(const std::uint8_t* area, std::uint32_t size, Tables& t) {
  t.clear();
  AreaReader reader(area, size);
  Decoder d(area, t);
  Record rec;
  for (std::uint32_t i = 0; reader.next(&rec); ++i) {
    const auto kind = static_cast<std::uint16_t>(rec.kind);
    // What a bad record added is taken back: its rows, then its message.
    const std::size_t sizes[] = {t.mtds.size(),      t.classes.size(), t.segmentations.size(),
                                 t.relations.size(), t.tensors.size(), t.fields.size()};
    cudaipc_metas_record r{};
    r.kind = kind;
    r.name_offset = static_cast<std::uint32_t>(
        rec.name.empty() ? 0 : rec.name.data() - reinterpret_cast<const char*>(area));
    r.name_size = static_cast<std::uint32_t>(rec.name.size());
    r.body_offset = static_cast<std::uint32_t>(rec.body.data - area);
    r.body_size = static_cast<std::uint32_t>(rec.body.size);
    std::string why;
    bool ok = check_name(
        rec.name, [i] { return "record " + std::to_string(i) + "'s name"; }, &why);
    if (ok) {
      r.known = 1;
      switch (rec.kind) {
        case RecordKind::analytics:
          ok = d.analytics(rec.body, &r, &why);
          break;
        case RecordKind::tensors:
          ok = d.tensors(rec.body, &r, &why);
          break;
        case RecordKind::custom:
          ok = d.custom(rec.body, &r, &why);
          break;
        case RecordKind::reference_timestamp:
          ok = d.timestamp(rec.body, &r, &why);
          break;
        case RecordKind::serialized:
          r.known = 0;  // opaque bytes, read by GStreamer's deserializer alone
          break;
        default:
          r.known = 0;
          ++t.unknown;
          break;
      }
    }
    if (!ok) {
      t.mtds.resize(sizes[0]), t.classes.resize(sizes[1]), t.segmentations.resize(sizes[2]);
      t.relations.resize(sizes[3]), t.tensors.resize(sizes[4]), t.fields.resize(sizes[5]);
      ++t.bad;
      t.note("record " + std::to_string(i) + " (kind " + std::to_string(kind) + "): " + why);
      continue;
    }
    t.records.push_back(r);
  }
  if (const char* why = reader.error()) {
    if (reader.other_version())
      ++t.unknown;
    else
      ++t.bad;
    t.note(why);
  }
}

Tables& tables() {
  static thread_local Tables t;
  return t;
}

constexpr std::size_t pad8(std::size_t n) {
  return (n + 7) & ~std::size_t{7};
}

}  // namespace

int64_t cudaipc_metas_decode(const uint8_t* area, uint32_t size, void* out, uint64_t capacity) {
  int64_t needed = 0;
  const int rc = cudaipc::capi::guard([&] {
    if (size) cudaipc::capi::require(area, "the area");
    cudaipc::capi::require(out, "the decode's buffer");
    if (reinterpret_cast<std::uintptr_t>(out) % 8)
      throw cudaipc::Error(cudaipc::Errc::invalid_argument,
                           "the decode's buffer is not 8-byte aligned");
    Tables& t = tables();
    decode(area, size, t);
    cudaipc_metas_decoded h{};
    std::size_t end = pad8(sizeof h);
    auto place = [&end](std::uint32_t* offset, std::size_t bytes) {
      *offset = static_cast<std::uint32_t>(end);
      end += pad8(bytes);
    };
    auto table = [&](std::uint32_t* offset, std::uint32_t* count, const auto& rows) {
      *count = static_cast<std::uint32_t>(rows.size());
      place(offset, rows.size() * sizeof rows[0]);
    };
    table(&h.records, &h.record_count, t.records);
    table(&h.mtds, &h.mtd_count, t.mtds);
    table(&h.classes, &h.class_count, t.classes);
    table(&h.segmentations, &h.segmentation_count, t.segmentations);
    table(&h.relations, &h.relation_count, t.relations);
    table(&h.tensors, &h.tensor_count, t.tensors);
    table(&h.fields, &h.field_count, t.fields);
    place(&h.errors, t.errors.size());
    h.errors_size = static_cast<std::uint32_t>(t.errors.size());
    h.error_count = t.error_count;
    h.unknown = t.unknown;
    h.bad = t.bad;
    // Rows take at most about 6 times the area's bytes they come from.
    if (end > 0xffffffffu)
      throw cudaipc::Error(cudaipc::Errc::invalid_argument,
                           "an area of " + std::to_string(size) + " bytes is too large to decode");
    h.size = static_cast<std::uint32_t>(end);
    needed = static_cast<int64_t>(end);
    auto* o = static_cast<std::uint8_t*>(out);
    if (capacity >= sizeof h) std::memcpy(o, &h, sizeof h);
    if (capacity < end) return;
    auto copy = [o](std::uint32_t offset, const auto& rows) {
      if (!rows.empty()) std::memcpy(o + offset, rows.data(), rows.size() * sizeof rows[0]);
    };
    copy(h.records, t.records);
    copy(h.mtds, t.mtds);
    copy(h.classes, t.classes);
    copy(h.segmentations, t.segmentations);
    copy(h.relations, t.relations);
    copy(h.tensors, t.tensors);
    copy(h.fields, t.fields);
    copy(h.errors, t.errors);
  });
  // Tables a large (or hostile) area grew are given back rather than kept by the thread.
  if (needed > (std::int64_t{1} << 20)) tables() = Tables{};
  return rc == CUDAIPC_OK ? needed : -rc;
}
