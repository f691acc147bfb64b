// Kind 4, GstCustomMeta's fields (docs/metas.md): a count, then typed fields back to back.
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "bytes_io.hpp"
#include "cudaipc/metas.hpp"
#include "text.hpp"

namespace cudaipc::metas {

using io::load;
using io::pad8;
using io::store;
using io::within;

namespace {
constexpr std::size_t kHeader = 8;
constexpr std::size_t kField = 16;
}  // namespace

CustomWriter::CustomWriter(std::uint8_t* body, std::size_t capacity) noexcept
    : body_(body), capacity_(capacity) {
  if (!body_ || capacity_ < kHeader) return;
  end_ = kHeader;
  ok_ = true;
}

bool CustomWriter::ok() const noexcept {
  return ok_;
}

bool CustomWriter::add(std::string_view name, FieldType type, const void* a, std::size_t an,
                       const void* b, std::size_t bn) noexcept {
  if (!ok_ || open_) return false;
  if (name.size() > 0xffff || an + bn > 0xffffffffu) return false;
  const std::size_t size = kField + pad8(name.size() + an + bn);
  if (size > capacity_ - end_) return false;
  std::uint8_t* f = body_ + end_;
  std::memset(f, 0, size);
  store<std::uint32_t>(f, static_cast<std::uint32_t>(size));
  store<std::uint16_t>(f + 4, static_cast<std::uint16_t>(name.size()));
  f[6] = static_cast<std::uint8_t>(type);
  store<std::uint32_t>(f + 8, static_cast<std::uint32_t>(an + bn));
  if (!name.empty()) std::memcpy(f + kField, name.data(), name.size());
  if (an) std::memcpy(f + kField + name.size(), a, an);
  if (bn) std::memcpy(f + kField + name.size() + an, b, bn);
  end_ += size;
  ++count_;
  return true;
}

bool CustomWriter::add_int64(std::string_view name, std::int64_t v) noexcept {
  return add(name, FieldType::int64, &v, 8, nullptr, 0);
}
bool CustomWriter::add_uint64(std::string_view name, std::uint64_t v) noexcept {
  return add(name, FieldType::uint64, &v, 8, nullptr, 0);
}
bool CustomWriter::add_int32(std::string_view name, std::int32_t v) noexcept {
  return add(name, FieldType::int32, &v, 4, nullptr, 0);
}
bool CustomWriter::add_uint32(std::string_view name, std::uint32_t v) noexcept {
  return add(name, FieldType::uint32, &v, 4, nullptr, 0);
}
bool CustomWriter::add_double(std::string_view name, double v) noexcept {
  return add(name, FieldType::float64, &v, 8, nullptr, 0);
}
bool CustomWriter::add_float(std::string_view name, float v) noexcept {
  return add(name, FieldType::float32, &v, 4, nullptr, 0);
}
bool CustomWriter::add_fraction(std::string_view name, std::int32_t num,
                                std::int32_t den) noexcept {
  if (den == 0 || num == INT32_MIN || den == INT32_MIN) return false;
  const std::int32_t v[2] = {num, den};
  return add(name, FieldType::fraction, v, 8, nullptr, 0);
}
bool CustomWriter::add_boolean(std::string_view name, bool v) noexcept {
  const std::uint8_t b = v ? 1 : 0;
  return add(name, FieldType::boolean, &b, 1, nullptr, 0);
}
bool CustomWriter::add_string(std::string_view name, std::string_view v) noexcept {
  return add(name, FieldType::string, v.data(), v.size(), nullptr, 0);
}
bool CustomWriter::add_bytes(std::string_view name, const void* data, std::size_t size) noexcept {
  return add(name, FieldType::bytes, data, size, nullptr, 0);
}
bool CustomWriter::add_other(std::string_view name, std::string_view type_name,
                             std::string_view serialized) noexcept {
  // "GTypeName\0" + the text.
  if (type_name.size() > 0xfffe) return false;
  char nul_terminated[256];
  if (type_name.size() + 1 > sizeof nul_terminated) return false;
  std::memcpy(nul_terminated, type_name.data(), type_name.size());
  nul_terminated[type_name.size()] = '\0';
  return add(name, FieldType::other, nul_terminated, type_name.size() + 1, serialized.data(),
             serialized.size());
}

CustomWriter CustomWriter::begin(std::string_view name, FieldType type,
                                 std::string_view struct_name) noexcept {
  CustomWriter members(nullptr, 0);
  if (!ok_ || open_ || depth_ + 1 > kMaxCustomDepth || name.size() > 0xffff ||
      struct_name.size() > 0xffff)
    return members;
  // The members' body starts after the field's header, its name and (structures) the prefix
  // carrying the structure's name; the field's sizes are written by end_nested().
  const std::size_t prefix = type == FieldType::structure ? 8 + pad8(struct_name.size()) : 0;
  const std::size_t at = end_ + kField + name.size() + prefix;
  if (at > capacity_ || capacity_ - at < kHeader) return members;
  std::uint8_t* f = body_ + end_;
  std::memset(f, 0, kField + name.size() + prefix);
  if (!name.empty()) std::memcpy(f + kField, name.data(), name.size());
  if (type == FieldType::structure) {
    std::uint8_t* p = f + kField + name.size();
    store<std::uint32_t>(p, static_cast<std::uint32_t>(struct_name.size()));
    if (!struct_name.empty()) std::memcpy(p + 8, struct_name.data(), struct_name.size());
  }
  open_ = true;
  open_type_ = type;
  open_name_len_ = name.size();
  open_prefix_ = prefix;
  members = CustomWriter(body_ + at, capacity_ - at);
  members.depth_ = depth_ + 1;
  return members;
}

CustomWriter CustomWriter::begin_structure(std::string_view name,
                                           std::string_view struct_name) noexcept {
  return begin(name, FieldType::structure, struct_name);
}

CustomWriter CustomWriter::begin_array(std::string_view name, FieldType array_or_list) noexcept {
  if (array_or_list != FieldType::array && array_or_list != FieldType::list)
    return CustomWriter(nullptr, 0);
  return begin(name, array_or_list, {});
}

bool CustomWriter::end_nested(CustomWriter& members) noexcept {
  if (!open_) return false;
  const std::size_t used = members.finish();
  const std::size_t value_len = open_prefix_ + used;
  const std::size_t size = kField + pad8(open_name_len_ + value_len);
  if (used == 0 || value_len > 0xffffffffu || size > capacity_ - end_) {
    cancel_nested();
    return false;
  }
  std::uint8_t* f = body_ + end_;
  const std::size_t tail = kField + open_name_len_ + value_len;
  std::memset(f + tail, 0, size - tail);
  store<std::uint32_t>(f, static_cast<std::uint32_t>(size));
  store<std::uint16_t>(f + 4, static_cast<std::uint16_t>(open_name_len_));
  f[6] = static_cast<std::uint8_t>(open_type_);
  store<std::uint32_t>(f + 8, static_cast<std::uint32_t>(value_len));
  open_ = false;
  end_ += size;
  ++count_;
  return true;
}

void CustomWriter::cancel_nested() noexcept {
  open_ = false;
}

std::size_t CustomWriter::finish() noexcept {
  if (!ok_ || open_) return 0;
  store<std::uint32_t>(body_, count_);
  store<std::uint32_t>(body_ + 4, 0);
  return end_;
}

bool CustomView::parse(Bytes body, std::string* error) {
  return parse_at(body, 0, error);
}

bool CustomView::parse_nested(const CustomView& parent, const Field& f, std::string* error) {
  if (!is_nested(f.type)) {
    if (error) *error = "custom field has no members";
    return false;
  }
  return parse_at(f.nested, parent.depth_ + 1, error);
}

bool CustomView::fail(const char* format, ...) noexcept {
  va_list args;
  va_start(args, format);
  std::vsnprintf(message_, sizeof message_, format, args);
  va_end(args);
  failed_ = true;
  return false;
}

bool CustomView::parse_at(Bytes body, unsigned depth, std::string* error) {
  body_ = body;
  count_ = read_ = 0;
  depth_ = depth;
  failed_ = false;
  if (body.size < kHeader) {
    if (error)
      *error = "custom body of " + std::to_string(body.size) +
               " bytes is shorter than its 8-byte header";
    return false;
  }
  const auto n = load<std::uint32_t>(body.data);
  // Each field takes 16 bytes or more: a count the body cannot hold is refused before any is read.
  const std::size_t room = (body.size - kHeader) / kField;
  if (n > room) {
    if (error)
      *error = "custom field " + std::to_string(room) + " of " + std::to_string(n) +
               " starts past the body's " + std::to_string(body.size) + " bytes";
    return false;
  }
  count_ = n;
  pos_ = kHeader;
  return true;
}

bool CustomView::next(Field* out) noexcept {
  if (failed_ || read_ >= count_) return false;
  if (!within(pos_, kField, body_.size))
    return fail("custom field %u of %u starts past the body's %zu bytes", read_, count_,
                body_.size);
  const std::uint8_t* f = body_.data + pos_;
  const auto size = load<std::uint32_t>(f);
  const auto name_len = load<std::uint16_t>(f + 4);
  const std::uint8_t type = f[6];
  const auto value_len = load<std::uint32_t>(f + 8);
  const std::uint64_t need = kField + pad8(std::uint64_t{name_len} + value_len);
  if (size % 8 != 0 || size < need || !within(pos_, size, body_.size))
    return fail(
        "custom field %u: size %u (needs a multiple of 8, at least %llu, within the "
        "body's %zu bytes left)",
        read_, size, static_cast<unsigned long long>(need), body_.size - pos_);
  const std::uint8_t* value = f + kField + name_len;
  *out = Field{};
  out->name = std::string_view(reinterpret_cast<const char*>(f + kField), name_len);
  out->type = static_cast<FieldType>(type);
  // Messages name the field, printable (made only on failure).
  char name[96];
  auto named = [&](const char* detail) {
    text::quote(out->name, name, sizeof name);
    return fail("custom field %s: %s", name, detail);
  };
  char detail[96];
  auto fixed = [&](std::uint32_t n) {
    if (value_len == n) return true;
    std::snprintf(detail, sizeof detail, "a %u-byte type with %u bytes", n, value_len);
    return named(detail);
  };
  switch (out->type) {
    case FieldType::int64:
      if (!fixed(8)) return false;
      out->i = load<std::int64_t>(value);
      break;
    case FieldType::uint64:
      if (!fixed(8)) return false;
      out->u = load<std::uint64_t>(value);
      break;
    case FieldType::float64:
      if (!fixed(8)) return false;
      out->d = load<double>(value);
      break;
    case FieldType::int32:
      if (!fixed(4)) return false;
      out->i = load<std::int32_t>(value);
      break;
    case FieldType::uint32:
      if (!fixed(4)) return false;
      out->u = load<std::uint32_t>(value);
      break;
    case FieldType::float32:
      if (!fixed(4)) return false;
      out->d = load<float>(value);
      break;
    case FieldType::fraction: {
      if (!fixed(8)) return false;
      const auto num = load<std::int32_t>(value), den = load<std::int32_t>(value + 4);
      // GStreamer refuses these with a critical: a peer's fraction must never reach it.
      if (den == 0 || num == INT32_MIN || den == INT32_MIN) {
        std::snprintf(detail, sizeof detail,
                      "the fraction %d/%d (a zero denominator, or a term of -2^31)", num, den);
        return named(detail);
      }
      out->i = num;
      out->den = den;
      break;
    }
    case FieldType::boolean:
      if (!fixed(1)) return false;
      out->b = value[0] != 0;
      break;
    case FieldType::string:
    case FieldType::bytes:
      out->text = std::string_view(reinterpret_cast<const char*>(value), value_len);
      break;
    case FieldType::other: {
      const void* nul = std::memchr(value, 0, value_len);
      if (!nul) return named("no NUL after its type's name");
      const auto tn = static_cast<std::size_t>(static_cast<const std::uint8_t*>(nul) - value);
      out->type_name = std::string_view(reinterpret_cast<const char*>(value), tn);
      out->text =
          std::string_view(reinterpret_cast<const char*>(value) + tn + 1, value_len - tn - 1);
      break;
    }
    case FieldType::structure:
    case FieldType::array:
    case FieldType::list: {
      if (depth_ + 1 > kMaxCustomDepth) return named("nested deeper than 8 levels");
      std::size_t at = 0;
      if (out->type == FieldType::structure) {
        const auto sn = value_len >= 8 ? load<std::uint32_t>(value) : 0xffffffffu;
        if (value_len < 8 || sn > value_len - 8 || pad8(sn) > value_len - 8)
          return named("a structure's name past its end");
        out->type_name = std::string_view(reinterpret_cast<const char*>(value) + 8, sn);
        at = 8 + pad8(sn);
      }
      out->nested = Bytes{value + at, value_len - at};
      break;
    }
    default:
      std::snprintf(detail, sizeof detail, "unknown type %u", unsigned{type});
      return named(detail);
  }
  pos_ += size;
  ++read_;
  return true;
}

std::size_t write_reference_timestamp(std::uint8_t* body, std::size_t capacity,
                                      const ReferenceTimestamp& ts) noexcept {
  if (!body || ts.caps.size() > 0xffffffffu) return 0;
  const std::size_t size = 24 + pad8(ts.caps.size());
  if (size > capacity) return 0;
  std::memset(body, 0, size);
  store<std::uint64_t>(body, ts.timestamp);
  store<std::uint64_t>(body + 8, ts.duration);
  store<std::uint32_t>(body + 16, static_cast<std::uint32_t>(ts.caps.size()));
  if (!ts.caps.empty()) std::memcpy(body + 24, ts.caps.data(), ts.caps.size());
  return size;
}

bool read_reference_timestamp(Bytes body, ReferenceTimestamp* out, std::string* error) {
  if (body.size < 24) {
    if (error)
      *error = "reference timestamp body of " + std::to_string(body.size) +
               " bytes is shorter than its 24-byte header";
    return false;
  }
  const auto len = load<std::uint32_t>(body.data + 16);
  if (len > body.size - 24) {
    if (error)
      *error = "reference caps of " + std::to_string(len) + " bytes overrun the body's " +
               std::to_string(body.size - 24) + " bytes after its header";
    return false;
  }
  out->timestamp = load<std::uint64_t>(body.data);
  out->duration = load<std::uint64_t>(body.data + 8);
  out->caps = std::string_view(reinterpret_cast<const char*>(body.data + 24), len);
  return true;
}

}  // namespace cudaipc::metas
