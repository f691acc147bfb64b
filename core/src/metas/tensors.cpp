// Kind 3, GstTensorMeta (docs/metas.md): a count, entries back to back (each names its data by an
// offset from the body's start), then the data, each tensor's on a 64-byte boundary of the area.
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
constexpr std::size_t kEntry = 32;  // fixed part; id, dtype, pad and dims follow
constexpr std::size_t kDataAlign = 64;

bool fail(std::string* error, const std::string& why) {
  if (error) *error = why;
  return false;
}

std::size_t entry_size(std::size_t id, std::size_t dtype, std::uint32_t dims) {
  return kEntry + pad8(id + dtype) + 8 * static_cast<std::size_t>(dims);
}

}  // namespace

std::uint32_t tensor_dtype_bits(std::string_view d) noexcept {
  struct Bits {
    std::string_view name;
    std::uint32_t bits;
  };
  static constexpr Bits kTable[] = {
      {"int4", 4},           {"uint4", 4},        {"int8", 8},           {"uint8", 8},
      {"bool", 8},           {"float8e4m3fn", 8}, {"float8e4m3fnuz", 8}, {"float8e5m2", 8},
      {"float8e5m2fnuz", 8}, {"int16", 16},       {"uint16", 16},        {"float16", 16},
      {"bfloat16", 16},      {"int32", 32},       {"uint32", 32},        {"float32", 32},
      {"int64", 64},         {"uint64", 64},      {"float64", 64},       {"complex64", 64},
      {"complex128", 128},
  };
  for (const Bits& b : kTable)
    if (b.name == d) return b.bits;
  return 0;
}

bool tensor_dtype_known(std::string_view d) noexcept {
  return tensor_dtype_bits(d) != 0 || d == "string";
}

std::size_t TensorsWriter::entry_bytes(const Tensor& t) noexcept {
  return entry_size(t.id.size(), t.dtype.size(), t.num_dims);
}

TensorsWriter::TensorsWriter(std::uint8_t* body, std::size_t capacity,
                             std::size_t body_offset_in_area, std::uint32_t count,
                             std::size_t entries_bytes) noexcept
    : body_(body), capacity_(capacity), area_off_(body_offset_in_area), count_(count) {
  if (!body_ || count > kMaxTensors || capacity < kHeader || entries_bytes > capacity - kHeader)
    return;
  store<std::uint32_t>(body_, count);
  store<std::uint32_t>(body_ + 4, 0);
  entries_end_ = kHeader;
  entries_limit_ = kHeader + entries_bytes;
  data_end_ = entries_limit_;
  ok_ = true;
}

bool TensorsWriter::ok() const noexcept {
  return ok_;
}

std::uint8_t* TensorsWriter::add(const Tensor& t) noexcept {
  if (!ok_ || added_ >= count_ || t.num_dims > kMaxTensorDims || t.id.size() > 0xffff ||
      t.dtype.size() > 0xffff)
    return nullptr;
  const std::size_t esz = entry_bytes(t);
  if (esz > entries_limit_ - entries_end_) return nullptr;  // more than announced
  // Data on a 64-byte boundary of the area, after everything written so far.
  const std::size_t abs = area_off_ + data_end_;
  const std::size_t data_at = data_end_ + ((kDataAlign - abs % kDataAlign) % kDataAlign);
  if (data_at > capacity_ || t.data_size > capacity_ - data_at) return nullptr;
  std::memset(body_ + data_end_, 0, data_at - data_end_);
  std::uint8_t* e = body_ + entries_end_;
  std::memset(e, 0, esz);
  store<std::uint32_t>(e, static_cast<std::uint32_t>(esz));
  store<std::uint16_t>(e + 4, static_cast<std::uint16_t>(t.id.size()));
  store<std::uint16_t>(e + 6, static_cast<std::uint16_t>(t.dtype.size()));
  store<std::uint32_t>(e + 8, t.num_dims);
  store<std::uint32_t>(e + 12, t.dims_order);
  store<std::uint64_t>(e + 16, data_at);
  store<std::uint64_t>(e + 24, t.data_size);
  if (!t.id.empty()) std::memcpy(e + kEntry, t.id.data(), t.id.size());
  if (!t.dtype.empty()) std::memcpy(e + kEntry + t.id.size(), t.dtype.data(), t.dtype.size());
  const std::size_t dims_at = kEntry + pad8(t.id.size() + t.dtype.size());
  for (std::uint32_t k = 0; k < t.num_dims; ++k)
    store<std::uint64_t>(e + dims_at + 8 * k, t.dims[k]);
  entries_end_ += esz;
  data_end_ = data_at + t.data_size;
  ++added_;
  return body_ + data_at;
}

std::size_t TensorsWriter::finish() noexcept {
  if (!ok_ || added_ != count_ || entries_end_ != entries_limit_) {
    ok_ = false;
    return 0;
  }
  const std::size_t end = pad8(data_end_) <= capacity_ ? pad8(data_end_) : data_end_;
  std::memset(body_ + data_end_, 0, end - data_end_);
  return end;
}

bool TensorsView::parse(Bytes body, std::string* error) {
  body_ = body;
  count_ = 0;
  if (body.size < kHeader)
    return fail(error, "tensors body of " + std::to_string(body.size) +
                           " bytes is shorter than its 8-byte header");
  const auto n = load<std::uint32_t>(body.data);
  if (n > kMaxTensors)
    return fail(error, std::to_string(n) + " tensors: at most " + std::to_string(kMaxTensors) +
                           " a record");
  // Entries lie back to back; each one's data anywhere in the record (checked per tensor).
  std::size_t pos = kHeader;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (!within(pos, kEntry, body.size))
      return fail(error, "tensor " + std::to_string(i) + " of " + std::to_string(n) +
                             " starts past the body's " + std::to_string(body.size) + " bytes");
    const auto size = load<std::uint32_t>(body.data + pos);
    const auto dims = load<std::uint32_t>(body.data + pos + 8);
    if (dims > kMaxTensorDims)
      return fail(error, "tensor " + std::to_string(i) + ": " + std::to_string(dims) +
                             " dims, at most " + std::to_string(kMaxTensorDims));
    if (size < kEntry || size % 8 != 0 || !within(pos, size, body.size))
      return fail(error, "tensor " + std::to_string(i) + ": entry size " + std::to_string(size) +
                             " (needs a multiple of 8, at least 32, within the " +
                             std::to_string(body.size - pos) + " bytes left)");
    entry_offsets_[i] = pos;
    pos += size;
  }
  count_ = n;
  return true;
}

bool TensorsView::tensor(std::uint32_t i, Tensor* out, std::string* error) const {
  if (i >= count_) return fail(error, "tensor " + std::to_string(i) + " out of range");
  // Messages are built only on failure: this runs for every mtd of every frame.
  auto at = [i] { return std::string("tensor ") + std::to_string(i) + ": "; };
  const std::size_t pos = entry_offsets_[i];
  const std::uint8_t* e = body_.data + pos;
  const auto size = load<std::uint32_t>(e);
  const auto id_len = load<std::uint16_t>(e + 4);
  const auto dtype_len = load<std::uint16_t>(e + 6);
  const auto dims = load<std::uint32_t>(e + 8);
  const auto order = load<std::uint32_t>(e + 12);
  const auto data_off = load<std::uint64_t>(e + 16);
  const auto data_size = load<std::uint64_t>(e + 24);
  // The entry's size was checked by parse(); it is read again here, so check it again.
  if (size < kEntry || !within(pos, size, body_.size)) return fail(error, at() + "entry size");
  if (dims > kMaxTensorDims)
    return fail(error,
                at() + std::to_string(dims) + " dims, at most " + std::to_string(kMaxTensorDims));
  if (entry_size(id_len, dtype_len, dims) > size)
    return fail(error, at() + "entry size " + std::to_string(size) + " is shorter than its " +
                           std::to_string(entry_size(id_len, dtype_len, dims)) +
                           " bytes of fields");
  *out = Tensor{};
  out->id = std::string_view(reinterpret_cast<const char*>(e + kEntry), id_len);
  out->dtype = std::string_view(reinterpret_cast<const char*>(e + kEntry + id_len), dtype_len);
  if (!tensor_dtype_known(out->dtype))
    return fail(error, at() + "unknown data type " + text::quoted(out->dtype));
  if (order > 1)
    return fail(error, at() + "dims order " + std::to_string(order) + " is neither 0 nor 1");
  if (!within(data_off, data_size, body_.size))
    return fail(error, at() + std::to_string(data_size) + " bytes of data at " +
                           std::to_string(data_off) + " overrun the body's " +
                           std::to_string(body_.size));
  out->num_dims = dims;
  out->dims_order = order;
  const std::size_t dims_at = kEntry + pad8(std::size_t{id_len} + dtype_len);
  // Elements, overflow-checked: a product past the record cannot match its data anyway.
  unsigned __int128 elements = 1;
  for (std::uint32_t k = 0; k < dims; ++k) {
    out->dims[k] = load<std::uint64_t>(e + dims_at + 8 * k);
    elements *= out->dims[k];
    if (elements > (static_cast<unsigned __int128>(1) << 70))
      elements = static_cast<unsigned __int128>(1) << 70;
  }
  const std::uint32_t bits = tensor_dtype_bits(out->dtype);
  if (bits) {
    const unsigned __int128 need = (elements * bits + 7) / 8;
    if (need != data_size)
      return fail(error, at() + std::to_string(data_size) + " bytes of data for dims of " +
                             std::string(out->dtype) + ", which take " +
                             std::to_string(static_cast<std::uint64_t>(
                                 need > ~std::uint64_t{0} ? ~std::uint64_t{0} : need)));
  }
  out->data = body_.data + data_off;
  out->data_size = data_size;
  return true;
}

}  // namespace cudaipc::metas
