// Kind 2, GstAnalyticsRelationMeta (docs/metas.md): a header, a table of fixed 56-byte mtd entries,
// a heap of labels and variable payloads, and the relations after the heap.
#include <algorithm>
#include <cstring>
#include <string>

#include "bytes_io.hpp"
#include "cudaipc/metas.hpp"

namespace cudaipc::metas {

using io::load;
using io::pad8;
using io::store;
using io::within;

namespace {

constexpr std::size_t kHeader = 24;
constexpr std::size_t kEntry = 56;
constexpr std::size_t kRelation = 12;
constexpr std::size_t kClass = 12;
constexpr std::size_t kSegHeader = 40;

// Entry fields, by offset.
constexpr std::size_t kType = 0, kId = 4, kFlags = 8, kLabelOff = 12, kLabelLen = 16,
                      kPayloadOff = 20, kPayloadLen = 24, kUnion = 32;

bool fail(std::string* error, const std::string& why) {
  if (error) *error = why;
  return false;
}

}  // namespace

AnalyticsWriter::AnalyticsWriter(std::uint8_t* body, std::size_t capacity,
                                 std::uint32_t max_mtds) noexcept
    : body_(body), capacity_(capacity), max_mtds_(max_mtds) {
  if (!body_ || max_mtds > (capacity / kEntry)) return;
  heap_start_ = kHeader + static_cast<std::size_t>(max_mtds) * kEntry;
  if (heap_start_ > capacity_) return;
  heap_end_ = heap_start_;
  std::memset(body_, 0, heap_start_);
  ok_ = true;
}

bool AnalyticsWriter::ok() const noexcept {
  return ok_;
}

bool AnalyticsWriter::put_heap(const void* bytes, std::size_t n, HeapString* out) noexcept {
  if (!ok_ || relations_started_ || n > capacity_ - heap_end_ ||
      heap_end_ + n - heap_start_ > 0xffffffffu)
    return false;
  out->offset = static_cast<std::uint32_t>(heap_end_ - heap_start_);
  out->size = static_cast<std::uint32_t>(n);
  if (n) std::memcpy(body_ + heap_end_, bytes, n);
  heap_end_ += n;
  return true;
}

int AnalyticsWriter::add_object_detection(std::uint32_t id, const ObjectDetection& od) noexcept {
  if (!ok_ || relations_started_ || mtds_ >= max_mtds_) return -1;
  HeapString label;
  if (!put_heap(od.label.data(), od.label.size(), &label)) return -1;
  return add_object_detection(id, od, label);
}

int AnalyticsWriter::add_object_detection(std::uint32_t id, const ObjectDetection& od,
                                          HeapString label) noexcept {
  if (!ok_ || relations_started_ || mtds_ >= max_mtds_) return -1;
  std::uint8_t* e = body_ + kHeader + mtds_ * kEntry;
  // Every byte of the entry is stored (detections come by the hundred: no memset first).
  store<std::uint32_t>(e + kPayloadOff, 0);
  store<std::uint32_t>(e + kPayloadLen, 0);
  store<std::uint32_t>(e + kPayloadLen + 4, 0);
  store<std::uint32_t>(e + kType, static_cast<std::uint32_t>(MtdType::object_detection));
  store<std::uint32_t>(e + kId, id);
  store<std::uint32_t>(e + kFlags, od.oriented ? 1u : 0u);
  store<std::uint32_t>(e + kLabelOff, label.size ? label.offset : 0);
  store<std::uint32_t>(e + kLabelLen, label.size);
  store<std::int32_t>(e + kUnion, od.x);
  store<std::int32_t>(e + kUnion + 4, od.y);
  store<std::int32_t>(e + kUnion + 8, od.w);
  store<std::int32_t>(e + kUnion + 12, od.h);
  store<float>(e + kUnion + 16, od.r);
  store<float>(e + kUnion + 20, od.confidence);
  return static_cast<int>(mtds_++);
}

// The payload (u32 n, then n of {f32 confidence, u32 label_off, u32 label_len}) on a 4-byte
// boundary of the heap, and the mtd naming it; entry(j) gives class j's confidence and label.
template <typename Entry>
int AnalyticsWriter::add_classes(std::uint32_t id, std::uint32_t n, Entry entry) noexcept {
  if (!ok_ || relations_started_ || mtds_ >= max_mtds_) return -1;
  const std::size_t fixed = 4 + static_cast<std::size_t>(n) * kClass;
  const std::size_t aligned = (heap_end_ + 3) & ~std::size_t{3};
  if (aligned > capacity_ || fixed > capacity_ - aligned) return -1;
  std::memset(body_ + heap_end_, 0, aligned - heap_end_);
  std::uint8_t* p = body_ + aligned;
  store<std::uint32_t>(p, n);
  for (std::uint32_t j = 0; j < n; ++j) {
    float confidence;
    HeapString label;
    entry(j, &confidence, &label);
    std::uint8_t* c = p + 4 + static_cast<std::size_t>(j) * kClass;
    store<float>(c, confidence);
    store<std::uint32_t>(c + 4, label.size ? label.offset : 0);
    store<std::uint32_t>(c + 8, label.size);
  }
  heap_end_ = aligned + fixed;
  std::uint8_t* e = body_ + kHeader + mtds_ * kEntry;
  std::memset(e, 0, kEntry);
  store<std::uint32_t>(e + kType, static_cast<std::uint32_t>(MtdType::classification));
  store<std::uint32_t>(e + kId, id);
  store<std::uint32_t>(e + kPayloadOff, static_cast<std::uint32_t>(aligned - heap_start_));
  store<std::uint32_t>(e + kPayloadLen, static_cast<std::uint32_t>(fixed));
  return static_cast<int>(mtds_++);
}

int AnalyticsWriter::add_classification(std::uint32_t id, const ClassEntry* classes,
                                        std::uint32_t n) noexcept {
  if (!ok_ || relations_started_ || mtds_ >= max_mtds_ || (n && !classes)) return -1;
  const std::size_t saved = heap_end_;
  // Labels first, back to back, then the payload that points at them.
  HeapString first{static_cast<std::uint32_t>(heap_end_ - heap_start_), 0};
  for (std::uint32_t j = 0; j < n; ++j) {
    HeapString label;
    if (!put_heap(classes[j].label.data(), classes[j].label.size(), &label)) {
      heap_end_ = saved;
      return -1;
    }
  }
  std::uint32_t at = first.offset;
  const int index = add_classes(id, n, [&](std::uint32_t j, float* confidence, HeapString* label) {
    *confidence = classes[j].confidence;
    *label = HeapString{at, static_cast<std::uint32_t>(classes[j].label.size())};
    at += label->size;
  });
  if (index < 0) heap_end_ = saved;
  return index;
}

int AnalyticsWriter::add_classification(std::uint32_t id, const float* confidences,
                                        const HeapString* labels, std::uint32_t n) noexcept {
  if (n && (!confidences || !labels)) return -1;
  return add_classes(id, n, [&](std::uint32_t j, float* confidence, HeapString* label) {
    *confidence = confidences[j];
    *label = labels[j];
  });
}

int AnalyticsWriter::add_tracking(std::uint32_t id, const Tracking& t) noexcept {
  if (!ok_ || relations_started_ || mtds_ >= max_mtds_) return -1;
  std::uint8_t* e = body_ + kHeader + mtds_ * kEntry;
  std::memset(e, 0, kEntry);
  store<std::uint32_t>(e + kType, static_cast<std::uint32_t>(MtdType::tracking));
  store<std::uint32_t>(e + kId, id);
  store<std::uint32_t>(e + kFlags, t.lost ? 1u : 0u);
  store<std::uint64_t>(e + kUnion, t.tracking_id);
  store<std::uint64_t>(e + kUnion + 8, t.first_seen);
  store<std::uint64_t>(e + kUnion + 16, t.last_seen);
  return static_cast<int>(mtds_++);
}

int AnalyticsWriter::add_segmentation(std::uint32_t id, const Segmentation& s) noexcept {
  if (!ok_ || relations_started_ || mtds_ >= max_mtds_) return -1;
  if ((s.region_count && !s.region_ids) || (!s.mask && s.mask_stride && s.mask_height)) return -1;
  const std::uint64_t mask = static_cast<std::uint64_t>(s.mask_stride) * s.mask_height;
  const std::uint64_t regions = pad8(static_cast<std::uint64_t>(s.region_count) * 4);
  const std::size_t aligned = pad8(heap_end_);
  const std::uint64_t need = (aligned - heap_end_) + kSegHeader + regions + mask;
  if (need > capacity_ - heap_end_ || kSegHeader + regions + mask > 0xffffffffu) return -1;
  std::memset(body_ + heap_end_, 0, aligned - heap_end_);
  std::uint8_t* p = body_ + aligned;
  store<std::uint32_t>(p, s.seg_type);
  store<std::int32_t>(p + 4, s.x);
  store<std::int32_t>(p + 8, s.y);
  store<std::uint32_t>(p + 12, s.w);
  store<std::uint32_t>(p + 16, s.h);
  store<std::uint32_t>(p + 20, s.region_count);
  store<std::uint32_t>(p + 24, s.mask_width);
  store<std::uint32_t>(p + 28, s.mask_height);
  store<std::uint32_t>(p + 32, s.mask_stride);
  store<std::uint32_t>(p + 36, s.mask_format);
  std::memset(p + kSegHeader, 0, regions);
  for (std::uint32_t j = 0; j < s.region_count; ++j)
    store<std::uint32_t>(p + kSegHeader + 4 * j, region_id(s, j));
  if (mask) std::memcpy(p + kSegHeader + regions, s.mask, mask);
  heap_end_ = aligned + kSegHeader + regions + mask;
  std::uint8_t* e = body_ + kHeader + mtds_ * kEntry;
  std::memset(e, 0, kEntry);
  store<std::uint32_t>(e + kType, static_cast<std::uint32_t>(MtdType::segmentation));
  store<std::uint32_t>(e + kId, id);
  store<std::uint32_t>(e + kPayloadOff, static_cast<std::uint32_t>(aligned - heap_start_));
  store<std::uint32_t>(e + kPayloadLen, static_cast<std::uint32_t>(kSegHeader + regions + mask));
  return static_cast<int>(mtds_++);
}

bool AnalyticsWriter::add_relation(std::uint32_t from_index, std::uint32_t to_index,
                                   std::uint32_t types) noexcept {
  if (!ok_ || from_index >= mtds_ || to_index >= mtds_) return false;
  if (!relations_started_) {
    // Relations are written right after the heap; finish() moves them before it, onto the
    // table's 8-byte end.
    heap_used_ = heap_end_;
    relations_started_ = true;
  }
  const std::size_t at = heap_end_ + static_cast<std::size_t>(relations_) * kRelation;
  if (kRelation > capacity_ - at) return false;
  store<std::uint32_t>(body_ + at, from_index);
  store<std::uint32_t>(body_ + at + 4, to_index);
  store<std::uint32_t>(body_ + at + 8, types);
  ++relations_;
  return true;
}

std::size_t AnalyticsWriter::finish() noexcept {
  if (!ok_) return 0;
  const std::size_t heap_end = relations_started_ ? heap_used_ : heap_end_;
  const std::size_t rel_bytes = static_cast<std::size_t>(relations_) * kRelation;
  // [heap][relations] becomes [relations][heap]: label and payload offsets count from the heap's
  // start, so moving the heap whole keeps them; the relations then sit on the table's 8-byte end.
  if (rel_bytes) std::rotate(body_ + heap_start_, body_ + heap_end_, body_ + heap_end_ + rel_bytes);
  store<std::uint32_t>(body_, mtds_);
  store<std::uint32_t>(body_ + 4, relations_);
  store<std::uint32_t>(body_ + 8, static_cast<std::uint32_t>(heap_start_ + rel_bytes));
  store<std::uint32_t>(body_ + 12, static_cast<std::uint32_t>(heap_end - heap_start_));
  store<std::uint32_t>(body_ + 16, static_cast<std::uint32_t>(heap_start_));
  store<std::uint32_t>(body_ + 20, 0);
  ok_ = false;  // the heap moved: nothing more can be added
  return heap_end + rel_bytes;
}

std::uint32_t region_id(const Segmentation& s, std::uint32_t i) noexcept {
  if (!s.region_ids || i >= s.region_count) return 0;
  std::uint32_t v;
  std::memcpy(&v, reinterpret_cast<const std::uint8_t*>(s.region_ids) + 4 * i, 4);
  return v;
}

bool AnalyticsView::parse(Bytes body, std::string* error) {
  body_ = body;
  mtd_count_ = relation_count_ = 0;
  if (body.size < kHeader) return fail(error, "analytics record shorter than its header");
  const auto mtds = load<std::uint32_t>(body.data);
  const auto rels = load<std::uint32_t>(body.data + 4);
  const auto heap_off = load<std::uint32_t>(body.data + 8);
  const auto heap_size = load<std::uint32_t>(body.data + 12);
  const auto rel_off = load<std::uint32_t>(body.data + 16);
  const std::string size = std::to_string(body.size);
  if (mtds > (body.size - kHeader) / kEntry)
    return fail(error, std::to_string(mtds) + " mtds overrun the body's " + size + " bytes");
  const std::uint64_t table_end = kHeader + static_cast<std::uint64_t>(mtds) * kEntry;
  if (heap_off < table_end || !within(heap_off, heap_size, body.size))
    return fail(error, "heap of " + std::to_string(heap_size) + " bytes at " +
                           std::to_string(heap_off) + " is not between the mtd table's end (" +
                           std::to_string(table_end) + ") and the body's (" + size + ")");
  if (!within(rel_off, static_cast<std::uint64_t>(rels) * kRelation, body.size))
    return fail(error, std::to_string(rels) + " relations at " + std::to_string(rel_off) +
                           " overrun the body's " + size + " bytes");
  mtd_count_ = mtds;
  relation_count_ = rels;
  heap_off_ = heap_off;
  heap_size_ = heap_size;
  rel_off_ = rel_off;
  return true;
}

bool AnalyticsView::mtd(std::uint32_t i, Mtd* out, std::string* error) const {
  if (i >= mtd_count_) return fail(error, "analytics mtd " + std::to_string(i) + " out of range");
  const std::uint8_t* e = body_.data + kHeader + static_cast<std::size_t>(i) * kEntry;
  // Messages are built only on failure: this runs for every mtd of every frame.
  auto at = [i] { return std::string("analytics mtd ") + std::to_string(i) + ": "; };
  *out = Mtd{};
  out->type = static_cast<MtdType>(load<std::uint32_t>(e + kType));
  out->id = load<std::uint32_t>(e + kId);
  const auto flags = load<std::uint32_t>(e + kFlags);
  const auto label_off = load<std::uint32_t>(e + kLabelOff);
  const auto label_len = load<std::uint32_t>(e + kLabelLen);
  const auto payload_off = load<std::uint32_t>(e + kPayloadOff);
  const auto payload_len = load<std::uint32_t>(e + kPayloadLen);
  // Strings and payloads lie in the heap; their offsets count from its start.
  auto in_heap = [&](std::uint64_t off, std::uint64_t len) { return within(off, len, heap_size_); };
  const std::uint8_t* heap = body_.data + heap_off_;
  switch (out->type) {
    case MtdType::object_detection: {
      if (label_len && !in_heap(label_off, label_len))
        return fail(error, at() + "a detection's label ends at " +
                               std::to_string(std::uint64_t{label_off} + label_len) +
                               ", past the heap's " + std::to_string(heap_size_) + " bytes");
      ObjectDetection& od = out->od;
      od.label = std::string_view(label_len ? reinterpret_cast<const char*>(heap + label_off) : "",
                                  label_len);
      od.x = load<std::int32_t>(e + kUnion);
      od.y = load<std::int32_t>(e + kUnion + 4);
      od.w = load<std::int32_t>(e + kUnion + 8);
      od.h = load<std::int32_t>(e + kUnion + 12);
      od.r = load<float>(e + kUnion + 16);
      od.confidence = load<float>(e + kUnion + 20);
      od.oriented = (flags & 1u) != 0;
      return true;
    }
    case MtdType::classification: {
      if (payload_len < 4 || !in_heap(payload_off, payload_len))
        return fail(error, at() + "classes outside the heap");
      const auto n = load<std::uint32_t>(heap + payload_off);
      if (n > (payload_len - 4) / kClass)
        return fail(error, at() + std::to_string(n) + " classes in " + std::to_string(payload_len) +
                               " bytes");
      out->classes = heap + payload_off + 4;
      out->class_count = n;
      return true;
    }
    case MtdType::tracking:
      out->tracking.tracking_id = load<std::uint64_t>(e + kUnion);
      out->tracking.first_seen = load<std::uint64_t>(e + kUnion + 8);
      out->tracking.last_seen = load<std::uint64_t>(e + kUnion + 16);
      out->tracking.lost = (flags & 1u) != 0;
      return true;
    case MtdType::segmentation: {
      if (payload_len < kSegHeader || !in_heap(payload_off, payload_len))
        return fail(error, at() + "segmentation outside the heap");
      const std::uint8_t* p = heap + payload_off;
      Segmentation& s = out->segmentation;
      s.seg_type = load<std::uint32_t>(p);
      s.x = load<std::int32_t>(p + 4);
      s.y = load<std::int32_t>(p + 8);
      s.w = load<std::uint32_t>(p + 12);
      s.h = load<std::uint32_t>(p + 16);
      s.region_count = load<std::uint32_t>(p + 20);
      s.mask_width = load<std::uint32_t>(p + 24);
      s.mask_height = load<std::uint32_t>(p + 28);
      s.mask_stride = load<std::uint32_t>(p + 32);
      s.mask_format = load<std::uint32_t>(p + 36);
      const std::uint64_t regions = pad8(static_cast<std::uint64_t>(s.region_count) * 4);
      const std::uint64_t mask = static_cast<std::uint64_t>(s.mask_stride) * s.mask_height;
      if (regions > payload_len - kSegHeader || mask > payload_len - kSegHeader - regions)
        return fail(error, at() + "regions and mask larger than the segmentation");
      // Rows hold at least the mask's width in pixels: bytes of one for unknown formats, of
      // two for the 16-bit grays (GRAY16_LE 26, GRAY16_BE 27).
      const std::uint64_t bpp = s.mask_format == 26 || s.mask_format == 27 ? 2 : 1;
      if (bpp * s.mask_width > s.mask_stride && s.mask_height)
        return fail(error, at() + "stride " + std::to_string(s.mask_stride) + " < " +
                               std::to_string(s.mask_width) + " pixels of " + std::to_string(bpp) +
                               " bytes");
      s.region_ids = reinterpret_cast<const std::uint32_t*>(p + kSegHeader);
      s.mask = p + kSegHeader + regions;
      return true;
    }
    default:
      return true;  // unknown: the caller skips it
  }
}

bool AnalyticsView::class_entry(const Mtd& m, std::uint32_t j, ClassEntry* out) const {
  if (m.type != MtdType::classification || !m.classes || j >= m.class_count) return false;
  const std::uint8_t* c = m.classes + static_cast<std::size_t>(j) * kClass;
  const auto off = load<std::uint32_t>(c + 4);
  const auto len = load<std::uint32_t>(c + 8);
  if (len && !within(off, len, heap_size_)) return false;
  out->confidence = load<float>(c);
  out->label =
      std::string_view(len ? reinterpret_cast<const char*>(body_.data + heap_off_ + off) : "", len);
  return true;
}

bool AnalyticsView::read_all(std::vector<Mtd>* mtds, std::vector<Relation>* relations,
                             std::string* error) const {
  mtds->assign(mtd_count_, Mtd{});
  for (std::uint32_t i = 0; i < mtd_count_; ++i)
    if (!mtd(i, &(*mtds)[i], error)) return false;
  relations->assign(relation_count_, Relation{});
  for (std::uint32_t i = 0; i < relation_count_; ++i)
    if (!relation(i, &(*relations)[i], error)) return false;
  return true;
}

bool AnalyticsView::relation(std::uint32_t i, Relation* out, std::string* error) const {
  if (i >= relation_count_)
    return fail(error, "analytics relation " + std::to_string(i) + " out of range");
  const std::uint8_t* r = body_.data + rel_off_ + static_cast<std::size_t>(i) * kRelation;
  out->from = load<std::uint32_t>(r);
  out->to = load<std::uint32_t>(r + 4);
  out->types = load<std::uint32_t>(r + 8);
  if (out->from >= mtd_count_ || out->to >= mtd_count_)
    return fail(error, "analytics relation " + std::to_string(i) + " names mtd " +
                           std::to_string(std::max(out->from, out->to)) + " of " +
                           std::to_string(mtd_count_));
  return true;
}

}  // namespace cudaipc::metas
