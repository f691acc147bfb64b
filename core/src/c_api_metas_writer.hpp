// The C API's meta-area writer (cudaipc_metas_writer, cudaipc.h): the core's record writers
// (cudaipc/metas.hpp) driven one record at a time, with the sizes of what did not fit counted.
// c_api_metas_write.cpp has the area and the small kinds, c_api_metas_custom.cpp the custom
// fields, c_api_metas_analytics.cpp the analytics record.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "cudaipc/cudaipc.h"
#include "cudaipc/metas.hpp"

namespace cudaipc::capi {

// A name handed to a writer: UTF-8 without NUL, of at most `limit` bytes; `what` names it in the
// error.
std::string_view name_arg(const char* p, std::uint32_t n, const char* what, std::size_t limit);
// A record's name (at most 1024 bytes).
std::string_view record_name(const char* p, std::uint32_t n);

// GStreamer's name for the analytics records a frame's detections go in.
inline constexpr char kAnalyticsName[] = "GstAnalyticsRelationMetaAPI";

// The detections of `d` as the analytics writer takes them (boxes, scores, rotation, labels).
inline cudaipc_metas_analytics analytics_of(const cudaipc_detections& d) {
  cudaipc_metas_analytics a{};
  a.n = d.n;
  a.boxes = d.boxes;
  a.scores = d.scores;
  a.rotation = d.rotation;
  a.labels = d.labels;
  a.names = d.names;
  a.name_offsets = d.name_offsets;
  a.name_count = d.name_count;
  return a;
}

class MetasWriter {
 public:
  void begin(std::uint8_t* area, std::uint32_t capacity);
  // The area's size; throws when records did not fit (naming what they needed) or one is open.
  std::int64_t finish();

  void raw(std::uint32_t kind, std::string_view name, const void* body, std::size_t size);
  void timestamp(std::string_view name, const metas::ReferenceTimestamp& ts);
  void tensors(std::string_view name, const metas::Tensor* tensors, std::uint32_t count);
  void analytics(std::string_view name, const cudaipc_metas_analytics& a);

  // Kind 4, field by field (c_api_metas_custom.cpp).
  void custom_begin(std::string_view name);
  // A field whose value is `a` then `b` (fixed types: their bytes; other: the GType's name and
  // its NUL, then the text).
  void custom_field(std::string_view name, metas::FieldType type, const void* a, std::size_t an,
                    const void* b = nullptr, std::size_t bn = 0);
  void custom_begin_nested(std::string_view name, metas::FieldType type,
                           std::string_view structure_name);
  void custom_end_nested();
  void custom_end();

 private:
  // Counts a record of `body` bytes and, while everything so far fitted, reserves it in the area:
  // its body, or nullptr once the area is full (then nothing more is written).
  std::uint8_t* reserve(metas::RecordKind kind, std::string_view name, std::size_t body);
  void commit(std::size_t body);

  std::uint8_t* area_ = nullptr;
  std::size_t capacity_ = 0;
  std::optional<metas::AreaWriter> w_;
  std::size_t need_ = 0;  // the area's bytes were every record written: the header, then each
  std::uint32_t records_ = 0;
  bool overflow_ = false;

  // The custom record being written: its nesting levels, each with the core's writer of its
  // fields (while they fit) and the bytes its fields take.
  struct Level {
    std::optional<metas::CustomWriter> writer;
    std::size_t body = 8;                    // the level's body: its header and fields so far
    std::size_t field_name = 0, prefix = 0;  // of the nested field it fills (levels past 0)
  };
  struct Custom {
    std::size_t name_size = 0;
    std::size_t record_start = 0;
    bool writing = false;  // fields go into the area (else they are only counted)
  };
  std::optional<Custom> custom_;
  // The analytics writer's: which names a record uses, and where each lies in its heap.
  struct AnalyticsScratch {
    std::vector<std::uint8_t> used;
    std::vector<metas::HeapString> where, class_labels;
  } scratch_;
  std::vector<Level> levels_;  // the open record's; kept between records (no allocation a frame)
  void stop_writing();
};

}  // namespace cudaipc::capi

struct cudaipc_metas_writer {
  cudaipc::capi::MetasWriter w;
};
