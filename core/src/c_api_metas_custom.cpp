// Custom records field by field through the C API (cudaipc_metas_custom_*, cudaipc.h): the core's
// CustomWriter writes each field while the area has room; the bytes every field takes are counted
// beside it, so a record that outgrows the area still says how large it is.
#include <cstring>
#include <string>

#include "c_api_handles.hpp"
#include "c_api_metas_writer.hpp"
#include "cudaipc/cudaipc.h"
#include "metas/text.hpp"

namespace {

using cudaipc::Errc;
using cudaipc::Error;
using cudaipc::capi::guard;
using namespace cudaipc::metas;

constexpr std::size_t pad8(std::size_t n) {
  return (n + 7) & ~std::size_t{7};
}

[[noreturn]] void refuse(const std::string& why) {
  throw Error(Errc::invalid_argument, why);
}

std::string_view name_arg(const char* p, std::uint32_t n, const char* what) {
  return cudaipc::capi::name_arg(p, n, what, 0xffff);
}

std::string_view field_name(const char* p, std::uint32_t n) {
  return name_arg(p, n, "a meta field's name");
}

// A field of a fixed-size type: its value's bytes.
template <typename T>
int fixed(cudaipc_metas_writer* w, const char* name, std::uint32_t name_size, FieldType type, T v) {
  return guard([&] {
    cudaipc::capi::require(w, "the writer");
    w->w.custom_field(field_name(name, name_size), type, &v, sizeof v);
  });
}

}  // namespace

namespace cudaipc::capi {

void MetasWriter::stop_writing() {
  custom_->writing = false;
  w_->cancel_record();
  overflow_ = true;
}

void MetasWriter::custom_begin(std::string_view name) {
  if (custom_) refuse("a custom record is still open: custom_end it first");
  if (!w_) refuse("the writer has no area: begin one first");
  ++records_;
  custom_.emplace();
  custom_->name_size = name.size();
  custom_->record_start = need_;
  levels_.clear();
  levels_.emplace_back();
  // The body may take all the room left; its size is known only at custom_end.
  const std::size_t head = need_ + 8 + pad8(name.size());
  if (overflow_ || records_ > 0xffff || head + 8 > capacity_) {
    overflow_ = true;
    return;
  }
  const std::size_t room = (capacity_ - head) & ~std::size_t{7};
  std::uint8_t* body = w_->begin_record(RecordKind::custom, name, room);
  if (!body || w_->body_offset() != head) {
    if (body) w_->cancel_record();
    overflow_ = true;
    return;
  }
  custom_->writing = true;
  levels_.back().writer.emplace(body, room);
}

void MetasWriter::custom_field(std::string_view name, FieldType type, const void* a, std::size_t an,
                               const void* b, std::size_t bn) {
  if (!custom_) refuse("no custom record is open: custom_begin one first");
  if (an + bn > 0xffffffffu - 64) refuse("meta field " + text::quoted(name) + " is too large");
  Level& level = levels_.back();
  level.body += 16 + pad8(name.size() + an + bn);
  if (!custom_->writing) return;
  CustomWriter& cw = *level.writer;
  auto get = [a](auto v) {
    std::memcpy(&v, a, sizeof v);
    return v;
  };
  bool ok = false;
  switch (type) {
    case FieldType::int64:
      ok = cw.add_int64(name, get(std::int64_t{}));
      break;
    case FieldType::uint64:
      ok = cw.add_uint64(name, get(std::uint64_t{}));
      break;
    case FieldType::int32:
      ok = cw.add_int32(name, get(std::int32_t{}));
      break;
    case FieldType::uint32:
      ok = cw.add_uint32(name, get(std::uint32_t{}));
      break;
    case FieldType::float64:
      ok = cw.add_double(name, get(double{}));
      break;
    case FieldType::float32:
      ok = cw.add_float(name, get(float{}));
      break;
    case FieldType::boolean:
      ok = cw.add_boolean(name, get(std::uint8_t{}) != 0);
      break;
    case FieldType::fraction: {
      std::int32_t v[2];
      std::memcpy(v, a, sizeof v);
      ok = cw.add_fraction(name, v[0], v[1]);
      break;
    }
    case FieldType::string:
      ok = cw.add_string(name, std::string_view(static_cast<const char*>(a), an));
      break;
    case FieldType::bytes:
      ok = cw.add_bytes(name, a, an);
      break;
    case FieldType::other:  // `a` is the GType's name and its NUL
      ok = cw.add_other(name, std::string_view(static_cast<const char*>(a), an - 1),
                        std::string_view(static_cast<const char*>(b), bn));
      break;
    default:
      refuse("custom field type " + std::to_string(static_cast<int>(type)) + " is not a value");
  }
  // The arguments were checked before: a field refused here did not fit.
  if (!ok) stop_writing();
}

void MetasWriter::custom_begin_nested(std::string_view name, FieldType type,
                                      std::string_view structure_name) {
  if (!custom_) refuse("no custom record is open: custom_begin one first");
  // levels_.size() - 1 is the depth of the fields being added: their members go one deeper.
  if (levels_.size() > kMaxCustomDepth)
    refuse("meta field " + text::quoted(name) + ": nested deeper than " +
           std::to_string(kMaxCustomDepth) + " levels");
  Level nested;
  nested.field_name = name.size();
  nested.prefix = type == FieldType::structure ? 8 + pad8(structure_name.size()) : 0;
  if (custom_->writing) {
    CustomWriter& parent = *levels_.back().writer;
    CustomWriter members = type == FieldType::structure
                               ? parent.begin_structure(name, structure_name)
                               : parent.begin_array(name, type);
    if (members.ok())
      nested.writer.emplace(members);
    else
      stop_writing();
  }
  levels_.push_back(std::move(nested));
}

void MetasWriter::custom_end_nested() {
  if (!custom_ || levels_.size() < 2) refuse("no structure, array or list is open to end");
  Level done = std::move(levels_.back());
  levels_.pop_back();
  Level& parent = levels_.back();
  parent.body += 16 + pad8(done.field_name + done.prefix + done.body);
  if (custom_->writing && !parent.writer->end_nested(*done.writer)) stop_writing();
}

void MetasWriter::custom_end() {
  if (!custom_) refuse("no custom record is open: custom_begin one first");
  if (levels_.size() != 1) refuse("a structure, array or list of the custom record is still open");
  const std::size_t body = levels_.back().body;
  if (custom_->writing) w_->commit_record(levels_.back().writer->finish());
  need_ = custom_->record_start + 8 + pad8(custom_->name_size) + pad8(body);
  custom_.reset();
}

}  // namespace cudaipc::capi

int cudaipc_metas_custom_begin(cudaipc_metas_writer* w, const char* name, uint32_t name_size) {
  return guard([&] {
    cudaipc::capi::require(w, "the writer");
    w->w.custom_begin(cudaipc::capi::record_name(name, name_size));
  });
}

int cudaipc_metas_custom_int64(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                               int64_t v) {
  return fixed(w, name, name_size, FieldType::int64, v);
}
int cudaipc_metas_custom_uint64(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                uint64_t v) {
  return fixed(w, name, name_size, FieldType::uint64, v);
}
int cudaipc_metas_custom_int32(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                               int32_t v) {
  return fixed(w, name, name_size, FieldType::int32, v);
}
int cudaipc_metas_custom_uint32(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                uint32_t v) {
  return fixed(w, name, name_size, FieldType::uint32, v);
}
int cudaipc_metas_custom_double(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                double v) {
  return fixed(w, name, name_size, FieldType::float64, v);
}
int cudaipc_metas_custom_float(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                               float v) {
  return fixed(w, name, name_size, FieldType::float32, v);
}
int cudaipc_metas_custom_boolean(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                 int v) {
  return fixed(w, name, name_size, FieldType::boolean, static_cast<std::uint8_t>(v ? 1 : 0));
}

int cudaipc_metas_custom_fraction(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                  int32_t numerator, int32_t denominator) {
  return guard([&] {
    cudaipc::capi::require(w, "the writer");
    const std::string_view n = field_name(name, name_size);
    if (denominator == 0 || numerator == INT32_MIN || denominator == INT32_MIN)
      refuse("meta field " + text::quoted(n) + ": the fraction " + std::to_string(numerator) + "/" +
             std::to_string(denominator) +
             " (GStreamer takes no zero denominator and no term of -2^31)");
    const std::int32_t v[2] = {numerator, denominator};
    w->w.custom_field(n, FieldType::fraction, v, sizeof v);
  });
}

int cudaipc_metas_custom_string(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                const char* value, uint32_t value_size) {
  return guard([&] {
    cudaipc::capi::require(w, "the writer");
    const std::string_view n = field_name(name, name_size);
    if (value_size && !value) refuse("meta field " + text::quoted(n) + ": the string is NULL");
    const std::string_view v(value_size ? value : "", value_size);
    if (!text::valid_utf8(v)) refuse("meta field " + text::quoted(n) + ": a string not UTF-8");
    w->w.custom_field(n, FieldType::string, v.data(), v.size());
  });
}

int cudaipc_metas_custom_bytes(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                               const void* value, uint32_t value_size) {
  return guard([&] {
    cudaipc::capi::require(w, "the writer");
    const std::string_view n = field_name(name, name_size);
    if (value_size && !value) refuse("meta field " + text::quoted(n) + ": the bytes are NULL");
    w->w.custom_field(n, FieldType::bytes, value_size ? value : "", value_size);
  });
}

int cudaipc_metas_custom_other(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                               const char* type_name, uint32_t type_name_size, const char* text,
                               uint32_t text_size) {
  return guard([&] {
    cudaipc::capi::require(w, "the writer");
    const std::string_view n = field_name(name, name_size);
    const std::string_view tn = name_arg(type_name, type_name_size, "a GType name");
    if (tn.empty() || tn.size() > 255)
      refuse("meta field " + text::quoted(n) + ": a GType name of " + std::to_string(tn.size()) +
             " bytes (1 to 255)");
    if (text_size && !text) refuse("meta field " + text::quoted(n) + ": the text is NULL");
    const std::string_view t(text_size ? text : "", text_size);
    if (!text::valid_utf8(t)) refuse("meta field " + text::quoted(n) + ": text not UTF-8");
    // The name and its NUL, as the record holds them: the NUL is the caller's string's end or
    // is counted here.
    char with_nul[256];
    std::memcpy(with_nul, tn.data(), tn.size());
    with_nul[tn.size()] = 0;
    w->w.custom_field(n, FieldType::other, with_nul, tn.size() + 1, t.data(), t.size());
  });
}

int cudaipc_metas_custom_begin_structure(cudaipc_metas_writer* w, const char* name,
                                         uint32_t name_size, const char* structure_name,
                                         uint32_t structure_name_size) {
  return guard([&] {
    cudaipc::capi::require(w, "the writer");
    const std::string_view n = field_name(name, name_size);
    const std::string_view sn = name_arg(structure_name, structure_name_size, "a structure's name");
    w->w.custom_begin_nested(n, FieldType::structure, sn);
  });
}

int cudaipc_metas_custom_begin_array(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                     int list) {
  return guard([&] {
    cudaipc::capi::require(w, "the writer");
    w->w.custom_begin_nested(field_name(name, name_size), list ? FieldType::list : FieldType::array,
                             {});
  });
}

int cudaipc_metas_custom_end_nested(cudaipc_metas_writer* w) {
  return guard([&] {
    cudaipc::capi::require(w, "the writer");
    w->w.custom_end_nested();
  });
}

int cudaipc_metas_custom_end(cudaipc_metas_writer* w) {
  return guard([&] {
    cudaipc::capi::require(w, "the writer");
    w->w.custom_end();
  });
}
