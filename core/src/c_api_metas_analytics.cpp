// Analytics records through the C API (cudaipc_metas_add_analytics, cudaipc.h): detections,
// classifications, tracks and relations in one call, laid out exactly (so that a record too large
// for the area still names its size) and written with the core's AnalyticsWriter.
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "c_api_handles.hpp"
#include "c_api_metas_writer.hpp"
#include "cudaipc/cudaipc.h"

namespace {

using cudaipc::Errc;
using cudaipc::Error;
using namespace cudaipc::metas;

constexpr std::size_t kHeader = 24, kMtd = 56, kRelation = 12, kClass = 12;
// A names table of at most this many bytes goes into the heap whole: the same bytes every frame,
// cheaper than finding which names a frame uses (COCO's 91 take 700 bytes).
constexpr std::size_t kWholeTable = 2048;
constexpr std::uint32_t kContain = 4, kIsPartOf = 2, kRelateTo = 8;

[[noreturn]] void refuse(const std::string& why) {
  throw Error(Errc::invalid_argument, why);
}

// x = rint(x1), w = rint(x2 - x1) in the boxes' own precision, half to even (the default rounding
// mode); a value past int32 becomes INT32_MIN, as NumPy's cast of rint makes it on x86, rather
// than undefined behaviour. Below 2^22 adding and taking away 1.5 * 2^mantissa rounds in place of
// a libm call per coordinate (every value there is exact in T, and so is the sum).
template <typename T>
std::int32_t whole(T v) {
  constexpr T kMagic = std::is_same_v<T, float> ? T(12582912.0) : T(6755399441055744.0);
  const T r = std::fabs(v) < T(4194304.0) ? (v + kMagic) - kMagic : std::nearbyint(v);
  if (!(r >= static_cast<T>(INT32_MIN) && r <= static_cast<T>(INT32_MAX))) return INT32_MIN;
  return static_cast<std::int32_t>(r);
}

template <typename T>
ObjectDetection box(const T* b) {
  ObjectDetection od;
  od.x = whole(b[0]);
  od.y = whole(b[1]);
  od.w = whole(b[2] - b[0]);
  od.h = whole(b[3] - b[1]);
  return od;
}

// Detections 0 .. n-1, their labels the names at `where`.
template <typename T>
[[gnu::noinline]] bool detections(AnalyticsWriter& aw, const cudaipc_metas_analytics& a,
                                  const T* boxes, const HeapString* where) {
  const float* scores = a.scores;
  const float* rotation = a.rotation;
  const std::int64_t* labels = a.labels;
  for (std::uint32_t i = 0; i < a.n; ++i) {
    ObjectDetection od = box(boxes + 4 * std::size_t{i});
    od.confidence = scores ? scores[i] : 1.f;
    od.r = rotation ? rotation[i] : 0.f;
    od.oriented = rotation != nullptr;
    const HeapString label = labels ? where[labels[i]] : HeapString{};
    if (aw.add_object_detection(i, od, label) < 0) return false;
  }
  return true;
}

// The checked input: counts, and where each label's name lies in the heap once it is there.
struct Plan {
  std::uint32_t mtds = 0, relations = 0;
  std::size_t heap = 0, body = 0;
  bool whole_table = false;
  std::size_t table_bytes = 0;
};

[[gnu::cold, gnu::noinline]] void check_label(const cudaipc_metas_analytics& a, std::int64_t l,
                                              const char* what, std::uint32_t i) {
  if (l < 0)
    refuse(std::string("label ") + std::to_string(l) + " of " + what + " " + std::to_string(i) +
           " is negative");
  if (static_cast<std::uint64_t>(l) >= a.name_count)
    refuse(std::string("label ") + std::to_string(l) + " of " + what + " " + std::to_string(i) +
           " has no name (" + std::to_string(a.name_count) + " names)");
}

// plan() for the classifications, tracks and relations (off the path of a record of detections
// alone, whose code it would otherwise spread over more cache lines): their checks, and the
// relations they add.
template <typename Use>
[[gnu::noinline]] std::uint64_t plan_more(const cudaipc_metas_analytics& a, const Plan& p,
                                          Use& use) {
  const std::uint32_t n = a.n, nc = a.classifications, nt = a.tracks;
  std::uint64_t relations = 0;
  for (std::uint32_t k = 0; k < nc; ++k) {
    const std::int32_t d = a.class_detection[k];
    if (d < -1 || d >= static_cast<std::int64_t>(n))
      refuse("classification " + std::to_string(k) + " names detection " + std::to_string(d) +
             " of " + std::to_string(n));
    if (d >= 0) relations += 2;
    const std::uint32_t first = a.class_first[k], last = a.class_first[k + 1];
    if (last < first) refuse("classification " + std::to_string(k) + "'s classes go backwards");
    if (last > first && (!a.class_scores || !a.class_labels))
      refuse("classification " + std::to_string(k) + ": its scores or labels are NULL");
    for (std::uint32_t j = first; j < last; ++j) {
      check_label(a, a.class_labels[j], "class", j);
      use(a.class_labels[j]);
    }
  }
  for (std::uint32_t j = 0; j < nt; ++j) {
    const std::int32_t d = a.track_detection[j];
    if (d < -1 || d >= static_cast<std::int64_t>(n))
      refuse("track " + std::to_string(j) + " names detection " + std::to_string(d) + " of " +
             std::to_string(n));
    if (d >= 0) ++relations;
  }
  for (std::uint32_t r = 0; r < a.relation_count; ++r) {
    const std::uint32_t from = a.relations[3 * r], to = a.relations[3 * r + 1];
    if (from >= p.mtds || to >= p.mtds)
      refuse("relation (" + std::to_string(from) + ", " + std::to_string(to) +
             ") names an mtd outside the " + std::to_string(p.mtds) +
             " published (detections first, then classifications, then tracks)");
  }
  return relations;
}

// Checks every count, index and label, and lays the record out: its body's bytes.
Plan plan(const cudaipc_metas_analytics& a, std::vector<std::uint8_t>& used) {
  Plan p;
  const std::uint32_t n = a.n, nc = a.classifications, nt = a.tracks;
  if (n && !a.boxes) refuse("analytics: the boxes are NULL");
  if (nc && (!a.class_detection || !a.class_first))
    refuse("analytics: the classifications' arrays are NULL");
  if (nt && (!a.track_detection || !a.track_ids)) refuse("analytics: the tracks' arrays are NULL");
  if (a.relation_count && !a.relations) refuse("analytics: the relations are NULL");
  const std::uint64_t mtds = std::uint64_t{n} + nc + nt;
  if (mtds > (16u << 20) / kMtd) refuse("analytics: " + std::to_string(mtds) + " mtds");
  p.mtds = static_cast<std::uint32_t>(mtds);
  const bool labelled = (a.labels && n) || (nc && a.class_first[nc] > a.class_first[0]);
  if (labelled) {
    if (!a.name_offsets || a.name_count == 0) refuse("analytics: labels without a names table");
    for (std::uint32_t i = 0; i < a.name_count; ++i)
      if (a.name_offsets[i + 1] < a.name_offsets[i])
        refuse("analytics: the names table's offsets go backwards at name " + std::to_string(i));
    p.table_bytes = a.name_offsets[a.name_count] - a.name_offsets[0];
    if (p.table_bytes && !a.names) refuse("analytics: the names are NULL");
    p.whole_table = p.table_bytes <= kWholeTable;
    if (!p.whole_table) used.assign(a.name_count, 0);
  }
  auto use = [&](std::int64_t l) {
    if (!p.whole_table) used[static_cast<std::size_t>(l)] = 1;
  };
  if (a.labels && n) {
    const std::int64_t* labels = a.labels;
    const std::uint64_t count = a.name_count;
    bool in_range = true;
    for (std::uint32_t i = 0; i < n; ++i) in_range &= static_cast<std::uint64_t>(labels[i]) < count;
    for (std::uint32_t i = 0; !in_range && i < n; ++i) check_label(a, labels[i], "box", i);
    if (!p.whole_table)
      for (std::uint32_t i = 0; i < n; ++i) use(labels[i]);
  }
  std::uint64_t relations = a.relation_count;
  if (nc || nt || a.relation_count) relations += plan_more(a, p, use);
  if (relations > 0xffffffffu / kRelation) refuse("analytics: too many relations");
  p.relations = static_cast<std::uint32_t>(relations);
  std::size_t names = 0;
  if (labelled) {
    if (p.whole_table) {
      names = p.table_bytes;
    } else {
      for (std::uint32_t i = 0; i < a.name_count; ++i)
        if (used[i]) names += a.name_offsets[i + 1] - a.name_offsets[i];
    }
  }
  p.heap = names;
  for (std::uint32_t k = 0; k < nc; ++k) {
    p.heap = (p.heap + 3) & ~std::size_t{3};
    p.heap += 4 + kClass * (std::size_t{a.class_first[k + 1]} - a.class_first[k]);
  }
  p.body = kHeader + kMtd * std::size_t{p.mtds} + kRelation * std::size_t{p.relations} + p.heap;
  return p;
}

// analytics() for the classifications, tracks and relations, after the detections (off the path
// of a record of detections alone). False when the writer ran out of room.
[[gnu::noinline]] bool write_more(AnalyticsWriter& aw, const cudaipc_metas_analytics& a,
                                  const std::vector<HeapString>& where,
                                  std::vector<HeapString>& class_labels) {
  bool ok = true;
  for (std::uint32_t k = 0; ok && k < a.classifications; ++k) {
    const std::uint32_t first = a.class_first[k], count = a.class_first[k + 1] - first;
    class_labels.resize(count);
    for (std::uint32_t j = 0; j < count; ++j)
      class_labels[j] = where[static_cast<std::size_t>(a.class_labels[first + j])];
    ok = aw.add_classification(a.n + k, count ? a.class_scores + first : nullptr,
                               class_labels.data(), count) >= 0;
  }
  const std::uint32_t t0 = a.n + a.classifications;
  for (std::uint32_t j = 0; ok && j < a.tracks; ++j) {
    Tracking t;
    t.tracking_id = a.track_ids[j];
    t.first_seen = a.first_seen ? a.first_seen[j] : 0;
    t.last_seen = a.last_seen ? a.last_seen[j] : 0;
    t.lost = a.lost && a.lost[j];
    ok = aw.add_tracking(t0 + j, t) >= 0;
  }
  // GStreamer's own pairs: detection CONTAIN classification, classification IS_PART_OF detection;
  // detection RELATE_TO track. Then the caller's.
  for (std::uint32_t k = 0; ok && k < a.classifications; ++k) {
    const std::int32_t d = a.class_detection[k];
    if (d < 0) continue;
    const auto c = a.n + k, det = static_cast<std::uint32_t>(d);
    ok = aw.add_relation(det, c, kContain) && aw.add_relation(c, det, kIsPartOf);
  }
  for (std::uint32_t j = 0; ok && j < a.tracks; ++j) {
    const std::int32_t d = a.track_detection[j];
    if (d >= 0) ok = aw.add_relation(static_cast<std::uint32_t>(d), t0 + j, kRelateTo);
  }
  for (std::uint32_t r = 0; ok && r < a.relation_count; ++r)
    ok = aw.add_relation(a.relations[3 * r], a.relations[3 * r + 1], a.relations[3 * r + 2]);
  return ok;
}

}  // namespace

namespace cudaipc::capi {

void MetasWriter::analytics(std::string_view name, const cudaipc_metas_analytics& a) {
  std::vector<std::uint8_t>& used = scratch_.used;
  std::vector<HeapString>& where = scratch_.where;
  std::vector<HeapString>& class_labels = scratch_.class_labels;
  const Plan p = plan(a, used);
  std::uint8_t* body = reserve(RecordKind::analytics, name, p.body);
  if (!body) return;
  AnalyticsWriter aw(body, p.body, p.mtds);
  bool ok = aw.ok();
  // The names first: each label is then its name's place in the heap.
  where.assign(p.table_bytes || a.name_count ? a.name_count : 0, HeapString{});
  if (ok && p.whole_table && a.name_count) {
    HeapString table;
    ok = aw.put_heap(a.names + a.name_offsets[0], p.table_bytes, &table);
    for (std::uint32_t i = 0; i < a.name_count; ++i)
      where[i] = HeapString{table.offset + (a.name_offsets[i] - a.name_offsets[0]),
                            a.name_offsets[i + 1] - a.name_offsets[i]};
  } else if (ok && !used.empty()) {
    for (std::uint32_t i = 0; ok && i < a.name_count; ++i)
      if (used[i])
        ok = aw.put_heap(a.names + a.name_offsets[i], a.name_offsets[i + 1] - a.name_offsets[i],
                         &where[i]);
  }
  if (ok)
    ok = a.boxes_f64 ? detections(aw, a, static_cast<const double*>(a.boxes), where.data())
                     : detections(aw, a, static_cast<const float*>(a.boxes), where.data());
  if (ok && (a.classifications || a.tracks || a.relation_count))
    ok = write_more(aw, a, where, class_labels);
  const std::size_t written = ok ? aw.finish() : 0;
  if (written != p.body) {
    w_->cancel_record();
    throw Error(Errc::system, "analytics record laid out as " + std::to_string(p.body) +
                                  " bytes came out as " + std::to_string(written));
  }
  commit(written);
}

}  // namespace cudaipc::capi

int cudaipc_metas_add_analytics(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                const cudaipc_metas_analytics* a) {
  return cudaipc::capi::guard([&] {
    cudaipc::capi::require(w, "the writer");
    cudaipc::capi::require(a, "the analytics");
    w->w.analytics(cudaipc::capi::record_name(name, name_size), *a);
  });
}
