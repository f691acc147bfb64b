// The records a frame's meta area holds (docs/metas.md has the byte layout): what the GStreamer
// elements and the Python package write beside a frame and read back on the other side.
//
// Writers encode in place into a caller's buffer (a WriteSlot's meta area, or any span) and never
// allocate. Readers take bytes from another process: every size, count, offset and string is
// checked before use, each field is read once into a local copy (the producer may change the bytes
// while they are read), and a bad record is reported, never trusted. Views hand out pointers into
// the area: they stay valid while the frame's lease is held.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cudaipc::metas {

inline constexpr std::uint32_t kAreaMagic = 0x544D4943;  // "CIMT"
inline constexpr std::uint16_t kAreaVersion = 1;
inline constexpr std::size_t kAreaHeaderSize = 16;
inline constexpr std::size_t kMaxNameLength = 1024;
inline constexpr std::uint32_t kMaxTensors = 256;
inline constexpr std::uint32_t kMaxTensorDims = 16;

// Values are part of the encoding: never renumber.
enum class RecordKind : std::uint16_t {
  serialized = 1,
  analytics = 2,
  tensors = 3,
  custom = 4,
  reference_timestamp = 5,
};

// A span of bytes, read-only (records read from a peer) or writable (a record being written).
struct Bytes {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
};

// ---- writing ----

// Appends records to an area of `capacity` bytes at `area`. Each add_* returns false, leaving the
// area as it was, when the record does not fit: the caller counts it and goes on with the next.
class AreaWriter {
 public:
  AreaWriter(void* area, std::size_t capacity) noexcept;
  // Bytes to publish with the frame (FrameInfo::metas_size): 0 while no record was added.
  std::size_t size() const noexcept;
  std::uint16_t record_count() const noexcept;
  std::size_t remaining() const noexcept;

  // Reserves a record of `kind` and `name` with room for `max_body` bytes of body and returns the
  // body's first byte (8-byte aligned; its offset in the area is body_offset()), or nullptr when
  // it does not fit. Finish with commit_record(bytes actually written) or cancel_record().
  std::uint8_t* begin_record(RecordKind kind, std::string_view name, std::size_t max_body) noexcept;
  std::size_t body_offset() const noexcept;
  void commit_record(std::size_t body_size) noexcept;
  void cancel_record() noexcept;
  // One whole record from a body the caller already has.
  bool add_record(RecordKind kind, std::string_view name, const void* body,
                  std::size_t size) noexcept;

 private:
  std::uint8_t* area_;
  std::size_t capacity_;
  std::size_t used_ = 0;  // including the header once the first record is added
  std::uint16_t count_ = 0;
  std::size_t open_ = 0;  // offset of the record begun and not yet committed; 0: none
  std::size_t open_max_ = 0;
};

// ---- reading ----

struct Record {
  RecordKind kind;
  std::string_view name;  // points into the area
  Bytes body;
};

// Walks the records of an area. `bytes` is FrameDesc::metas_bytes, already checked to be within the
// area by the core. next() returns false at the end, or on a malformed area or record: then
// error() says what was wrong, and the records read before stay good.
class AreaReader {
 public:
  AreaReader(const void* area, std::size_t bytes) noexcept;
  bool next(Record* out) noexcept;
  // The reason, with the numbers that broke the rule; valid while the reader lives.
  const char* error() const noexcept { return failed_ ? message_ : nullptr; }
  // The area is of another encoding version: not malformed, only unreadable here.
  bool other_version() const noexcept { return other_version_; }
  std::uint16_t record_count() const noexcept { return count_; }
  // Where the next record starts, from the area's first byte.
  std::size_t position() const noexcept { return pos_; }

 private:
  void fail(const char* format, ...) noexcept __attribute__((format(printf, 2, 3)));
  const std::uint8_t* area_;
  std::size_t bytes_;
  std::size_t pos_ = 0;
  std::size_t end_ = 0;
  std::uint16_t count_ = 0;
  std::uint16_t read_ = 0;
  bool other_version_ = false;
  bool failed_ = false;
  char message_[256] = {};
};

// ---- kind 2: analytics ----

enum class MtdType : std::uint32_t {
  object_detection = 1,
  classification = 2,
  tracking = 3,
  segmentation = 4
};

struct ObjectDetection {
  std::int32_t x = 0, y = 0, w = 0, h = 0;
  float r = 0.f;  // radians; 0 unless oriented
  float confidence = 0.f;
  bool oriented = false;
  std::string_view label;
};

struct ClassEntry {
  float confidence = 0.f;
  std::string_view label;
};

struct Tracking {
  std::uint64_t tracking_id = 0, first_seen = 0, last_seen = 0;
  bool lost = false;
};

struct Segmentation {
  std::uint32_t seg_type = 0;  // 0 semantic, 1 instance
  std::int32_t x = 0, y = 0;
  std::uint32_t w = 0, h = 0;
  std::uint32_t region_count = 0;
  const std::uint32_t* region_ids = nullptr;  // may be unaligned when read: use region_id()
  std::uint32_t mask_width = 0, mask_height = 0, mask_stride = 0, mask_format = 0;
  const std::uint8_t* mask = nullptr;  // mask_stride * mask_height bytes
};

// Bytes already in an analytics heap (AnalyticsWriter::put_heap): a label many mtds share.
struct HeapString {
  std::uint32_t offset = 0;  // from the heap's first byte
  std::uint32_t size = 0;
};

// Writes one analytics body. `max_mtds` bounds the table (mtds added beyond it fail). Every add_*
// returns false when the body has no room left; finish() then still yields a consistent body of
// what was added, and the caller decides whether a partial meta is worth sending. The body is laid
// out as header, table, relations, heap (the relations are moved before the heap at finish).
class AnalyticsWriter {
 public:
  AnalyticsWriter(std::uint8_t* body, std::size_t capacity, std::uint32_t max_mtds) noexcept;
  bool ok() const noexcept;  // false when even the empty table does not fit
  // Appends `n` bytes to the heap (a table of labels mtds then name by offset); false when full.
  bool put_heap(const void* bytes, std::size_t n, HeapString* out) noexcept;
  // Each returns the new mtd's index in the table (for relations), or -1.
  int add_object_detection(std::uint32_t id, const ObjectDetection& od) noexcept;
  // The same with a label put in the heap before (od.label is not read).
  int add_object_detection(std::uint32_t id, const ObjectDetection& od, HeapString label) noexcept;
  // `n` classes (confidence + label each).
  int add_classification(std::uint32_t id, const ClassEntry* classes, std::uint32_t n) noexcept;
  // The same with labels put in the heap before.
  int add_classification(std::uint32_t id, const float* confidences, const HeapString* labels,
                         std::uint32_t n) noexcept;
  int add_tracking(std::uint32_t id, const Tracking& t) noexcept;
  int add_segmentation(std::uint32_t id, const Segmentation& s) noexcept;
  // Relations go after every mtd: once one is added, no mtd can be.
  bool add_relation(std::uint32_t from_index, std::uint32_t to_index, std::uint32_t types) noexcept;
  // Body bytes written (the header made consistent).
  std::size_t finish() noexcept;

 private:
  template <typename Entry>
  int add_classes(std::uint32_t id, std::uint32_t n, Entry entry) noexcept;
  std::uint8_t* body_;
  std::size_t capacity_;
  std::uint32_t max_mtds_;
  std::uint32_t mtds_ = 0;
  std::uint32_t relations_ = 0;
  std::size_t heap_start_ = 0;
  std::size_t heap_end_ = 0;   // next free byte of the heap
  std::size_t heap_used_ = 0;  // the heap's end before the padding that aligns the relations
  bool relations_started_ = false;
  bool ok_ = false;
};

struct Mtd {
  MtdType type;
  std::uint32_t id;
  ObjectDetection od;                     // type object_detection
  const std::uint8_t* classes = nullptr;  // classification: read with class_entry()
  std::uint32_t class_count = 0;
  Tracking tracking;          // type tracking
  Segmentation segmentation;  // type segmentation
};

struct Relation {
  std::uint32_t from, to, types;
};

class AnalyticsView {
 public:
  // Checks the header and tables; false with a reason when the body is malformed.
  bool parse(Bytes body, std::string* error);
  std::uint32_t mtd_count() const noexcept { return mtd_count_; }
  std::uint32_t relation_count() const noexcept { return relation_count_; }
  // The heap: where it starts from the body's first byte, and its bytes.
  std::size_t heap_offset() const noexcept { return heap_off_; }
  std::size_t heap_size() const noexcept { return heap_size_; }
  // Reads and checks mtd i (its strings and payload within the heap). False with a reason when
  // mtd i is malformed; an unknown type is not an error: `out->type` holds it for the caller to
  // skip.
  bool mtd(std::uint32_t i, Mtd* out, std::string* error) const;
  // Class j of a classification mtd read by mtd(); false when out of range or malformed.
  bool class_entry(const Mtd& m, std::uint32_t j, ClassEntry* out) const;
  // Relation i, with both indexes checked against mtd_count().
  bool relation(std::uint32_t i, Relation* out, std::string* error) const;
  // Every mtd and relation, each checked as above: a malformed one fails the whole record, so a
  // reader drops it before it has attached anything.
  bool read_all(std::vector<Mtd>* mtds, std::vector<Relation>* relations, std::string* error) const;

 private:
  Bytes body_{};
  std::uint32_t mtd_count_ = 0, relation_count_ = 0;
  std::size_t heap_off_ = 0, heap_size_ = 0, rel_off_ = 0;
};

std::uint32_t region_id(const Segmentation& s, std::uint32_t i) noexcept;

// ---- kind 3: tensors ----

struct Tensor {
  std::string_view id;
  std::string_view dtype;  // a name from docs/metas.md
  std::uint32_t num_dims = 0;
  std::uint64_t dims[kMaxTensorDims] = {};
  std::uint32_t dims_order = 0;  // 0 row-major, 1 column-major
  const std::uint8_t* data = nullptr;
  std::uint64_t data_size = 0;
};

// Element size in bits of a dtype name (4 for int4/uint4, 8 for int8, ...), 0 when unknown or not
// fixed (string).
std::uint32_t tensor_dtype_bits(std::string_view dtype) noexcept;
// A name of docs/metas.md's list (string included).
bool tensor_dtype_known(std::string_view dtype) noexcept;

class TensorsWriter {
 public:
  // Bytes of one tensor's entry (its id, dtype and dims included): the writer places every entry
  // before the first tensor's data, so it needs their sum, `entries_bytes`, up front.
  static std::size_t entry_bytes(const Tensor& t) noexcept;
  // `body_offset_in_area` (AreaWriter::body_offset()) lets data land on 64-byte boundaries.
  TensorsWriter(std::uint8_t* body, std::size_t capacity, std::size_t body_offset_in_area,
                std::uint32_t count, std::size_t entries_bytes) noexcept;
  bool ok() const noexcept;
  // Entry for the next tensor; returns where to write its `data_size` bytes, or nullptr when it
  // does not fit. `t.data` is ignored (the caller copies into the returned pointer).
  std::uint8_t* add(const Tensor& t) noexcept;
  // Body bytes written; 0 (and ok() false) if the tensors added differ from those announced.
  std::size_t finish() noexcept;

 private:
  std::uint8_t* body_;
  std::size_t capacity_;
  std::size_t area_off_;
  std::uint32_t count_;
  std::uint32_t added_ = 0;
  std::size_t entries_end_ = 0;    // next entry's offset
  std::size_t entries_limit_ = 0;  // where the entries announced end
  std::size_t data_end_ = 0;       // next free byte after the data written so far
  bool ok_ = false;
};

class TensorsView {
 public:
  bool parse(Bytes body, std::string* error);
  std::uint32_t count() const noexcept { return count_; }
  // Tensor i with its dims, strings and data checked; false with a reason when malformed.
  bool tensor(std::uint32_t i, Tensor* out, std::string* error) const;

 private:
  Bytes body_{};
  std::uint32_t count_ = 0;
  std::size_t entry_offsets_[kMaxTensors] = {};
};

// ---- kind 4: custom ----

enum class FieldType : std::uint8_t {
  int64 = 1,
  uint64 = 2,
  float64 = 3,
  boolean = 4,
  string = 5,
  bytes = 6,
  other = 7,  // "GTypeName\0" + GStreamer's text of the value
  int32 = 8,
  uint32 = 9,
  float32 = 10,
  fraction = 11,   // i32 numerator, i32 denominator (not 0; neither is INT32_MIN)
  structure = 12,  // u32 name_len, u32 reserved, name, pad to 8, then a custom body
  array = 13,      // a custom body of nameless members (GstValueArray)
  list = 14,       // the same for GstValueList
};

// How deep structures, arrays and lists may nest (the record's own fields are depth 0): a reader
// recurses at most this far, so a peer's record cannot exhaust a stack. Deeper is malformed.
inline constexpr unsigned kMaxCustomDepth = 8;

inline constexpr bool is_nested(FieldType t) noexcept {
  return t == FieldType::structure || t == FieldType::array || t == FieldType::list;
}

struct Field {
  std::string_view name;
  FieldType type;
  std::int64_t i = 0;    // int64, int32; fraction: the numerator
  std::uint64_t u = 0;   // uint64, uint32
  double d = 0;          // float64, float32
  std::int32_t den = 0;  // fraction: the denominator
  bool b = false;
  // string, bytes: the value; other: the serialized text, with `type_name` its GType's name.
  std::string_view text;
  // other: the GType's name; structure: the structure's name.
  std::string_view type_name;
  // structure, array, list: the members, a custom body (read with CustomView::parse_nested).
  Bytes nested{};
};

class CustomWriter {
 public:
  CustomWriter(std::uint8_t* body, std::size_t capacity) noexcept;
  bool add_int64(std::string_view name, std::int64_t v) noexcept;
  bool add_uint64(std::string_view name, std::uint64_t v) noexcept;
  bool add_int32(std::string_view name, std::int32_t v) noexcept;
  bool add_uint32(std::string_view name, std::uint32_t v) noexcept;
  bool add_double(std::string_view name, double v) noexcept;
  bool add_float(std::string_view name, float v) noexcept;
  bool add_fraction(std::string_view name, std::int32_t num, std::int32_t den) noexcept;
  bool add_boolean(std::string_view name, bool v) noexcept;
  bool add_string(std::string_view name, std::string_view v) noexcept;
  bool add_bytes(std::string_view name, const void* data, std::size_t size) noexcept;
  bool add_other(std::string_view name, std::string_view type_name,
                 std::string_view serialized) noexcept;
  // A structure, array or list field: its members are written with the writer returned (an
  // array's and a list's with empty names), then end_nested() closes the field. Nothing else may
  // be added here meanwhile. A member past kMaxCustomDepth fails (the writer returned is not ok()).
  CustomWriter begin_structure(std::string_view name, std::string_view struct_name) noexcept;
  CustomWriter begin_array(std::string_view name, FieldType array_or_list) noexcept;
  bool end_nested(CustomWriter& members) noexcept;
  // Drops a field begun with begin_*, as if it had not been.
  void cancel_nested() noexcept;
  std::size_t finish() noexcept;
  bool ok() const noexcept;
  // 0 for a record's own fields, 1 for the members of one of them, and so on.
  unsigned depth() const noexcept { return depth_; }

 private:
  bool add(std::string_view name, FieldType type, const void* a, std::size_t an, const void* b,
           std::size_t bn) noexcept;
  CustomWriter begin(std::string_view name, FieldType type, std::string_view struct_name) noexcept;
  std::uint8_t* body_;
  std::size_t capacity_;
  std::size_t end_ = 0;
  std::uint32_t count_ = 0;
  unsigned depth_ = 0;
  bool ok_ = false;
  // The field begun with begin_* and not yet ended.
  bool open_ = false;
  FieldType open_type_{};
  std::size_t open_name_len_ = 0, open_prefix_ = 0;
};

class CustomView {
 public:
  bool parse(Bytes body, std::string* error);
  // The members of `f`, a structure, array or list field that `parent` read: one level deeper.
  bool parse_nested(const CustomView& parent, const Field& f, std::string* error);
  std::uint32_t count() const noexcept { return count_; }
  unsigned depth() const noexcept { return depth_; }
  // Fields in order: call next() until false; error() tells a malformed field from the end.
  bool next(Field* out) noexcept;
  // Why next() stopped early, naming the field and the numbers; nullptr at a normal end.
  const char* error() const noexcept { return failed_ ? message_ : nullptr; }

 private:
  bool parse_at(Bytes body, unsigned depth, std::string* error);
  bool fail(const char* format, ...) noexcept __attribute__((format(printf, 2, 3)));
  Bytes body_{};
  std::uint32_t count_ = 0, read_ = 0;
  std::size_t pos_ = 0;
  unsigned depth_ = 0;
  bool failed_ = false;
  char message_[192] = {};
};

// ---- kind 5: reference timestamp ----

struct ReferenceTimestamp {
  std::uint64_t timestamp = ~std::uint64_t{0};
  std::uint64_t duration = ~std::uint64_t{0};
  std::string_view caps;
};

// Body bytes written, 0 when it does not fit.
std::size_t write_reference_timestamp(std::uint8_t* body, std::size_t capacity,
                                      const ReferenceTimestamp& ts) noexcept;
bool read_reference_timestamp(Bytes body, ReferenceTimestamp* out, std::string* error);

}  // namespace cudaipc::metas
