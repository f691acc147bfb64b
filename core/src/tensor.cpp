#include "cudaipc/tensor.hpp"
#include "hot_path.hpp"

#include <cstring>

#include "cudaipc/error.hpp"

namespace cudaipc {
namespace {

struct DTypeInfo {
  DType type;
  std::size_t size;
  const char* name;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::int8, 1, "int8"},       {DType::int16, 2, "int16"},
    {DType::int32, 4, "int32"},     {DType::int64, 8, "int64"},
    {DType::uint8, 1, "uint8"},     {DType::uint16, 2, "uint16"},
    {DType::uint32, 4, "uint32"},   {DType::uint64, 8, "uint64"},
    {DType::float16, 2, "float16"}, {DType::float32, 4, "float32"},
    {DType::float64, 8, "float64"}, {DType::bfloat16, 2, "bfloat16"},
    {DType::boolean, 1, "bool"},
};

const DTypeInfo* find(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return &d;
  return nullptr;
}

[[noreturn]] void bad(const std::string& what) {
  throw Error(Errc::protocol, "invalid tensor description: " + what);
}

}  // namespace

CUDAIPC_HOT std::size_t dtype_size(DType t) noexcept {
  const auto* d = find(t);
  return d ? d->size : 0;
}

const char* dtype_name(DType t) noexcept {
  const auto* d = find(t);
  return d ? d->name : nullptr;
}

DType dtype_from_name(const std::string& name) noexcept {
  for (const auto& d : kDTypes)
    if (name == d.name) return d.type;
  return DType::invalid;
}

TensorDesc make_tensor(DType dtype, std::initializer_list<std::int64_t> shape) {
  TensorDesc t{};
  t.dtype = dtype;
  if (shape.size() > kMaxRank)
    throw Error(Errc::invalid_argument, "tensor rank " + std::to_string(shape.size()) +
                                            " exceeds " + std::to_string(kMaxRank));
  if (dtype_size(dtype) == 0) throw Error(Errc::invalid_argument, "unknown dtype");
  t.rank = static_cast<std::uint32_t>(shape.size());
  std::copy(shape.begin(), shape.end(), t.shape);
  auto stride = static_cast<std::int64_t>(dtype_size(dtype));
  for (int i = static_cast<int>(t.rank) - 1; i >= 0; --i) {
    if (t.shape[i] < 0) throw Error(Errc::invalid_argument, "negative tensor dimension");
    t.strides[i] = stride;
    stride *= t.shape[i];
  }
  t.size = static_cast<std::uint64_t>(stride);
  return t;
}

CUDAIPC_HOT void validate(const TensorDesc& t, std::uint64_t capacity) {
  std::size_t elem = dtype_size(t.dtype);
  if (elem == 0) bad("unknown dtype " + std::to_string(static_cast<std::uint32_t>(t.dtype)));
  if (t.rank > kMaxRank)
    bad("rank " + std::to_string(t.rank) + " exceeds " + std::to_string(kMaxRank));
  if (t.num_planes > kMaxPlanes)
    bad(std::to_string(t.num_planes) + " planes exceed " + std::to_string(kMaxPlanes));
  std::uint64_t end;
  if (__builtin_add_overflow(t.byte_offset, t.size, &end) || end > capacity)
    bad("byte_offset " + std::to_string(t.byte_offset) + " + size " + std::to_string(t.size) +
        " exceeds the slot's " + std::to_string(capacity) + " bytes");
  // The furthest byte any index reaches must lie inside `size`.
  std::uint64_t reach = elem;
  bool empty = false;
  for (std::uint32_t i = 0; i < t.rank; ++i) {
    if (t.shape[i] < 0) bad("negative dimension " + std::to_string(t.shape[i]));
    if (t.strides[i] < 0) bad("negative stride " + std::to_string(t.strides[i]));
    if (t.shape[i] == 0) empty = true;
    std::uint64_t span;
    if (t.shape[i] > 0 &&
        (__builtin_mul_overflow(static_cast<std::uint64_t>(t.shape[i] - 1),
                                static_cast<std::uint64_t>(t.strides[i]), &span) ||
         __builtin_add_overflow(reach, span, &reach)))
      bad("shape and strides overflow");
  }
  if (!empty && reach > t.size)
    bad("shape and strides reach " + std::to_string(reach) + " bytes but size is " +
        std::to_string(t.size));
  for (std::uint32_t p = 0; p < t.num_planes; ++p)
    if (t.planes[p].offset >= capacity || t.planes[p].pitch > capacity)
      bad("plane " + std::to_string(p) + " lies outside the slot");
}

// Only the fields in use are compared: a frame's path reads no more of either than it needs.
CUDAIPC_HOT bool operator==(const TensorDesc& a, const TensorDesc& b) noexcept {
  if (a.dtype != b.dtype || a.rank != b.rank || a.byte_offset != b.byte_offset ||
      a.size != b.size || a.num_planes != b.num_planes)
    return false;
  for (std::uint32_t i = 0; i < a.rank && i < kMaxRank; ++i)
    if (a.shape[i] != b.shape[i] || a.strides[i] != b.strides[i]) return false;
  for (std::uint32_t p = 0; p < a.num_planes && p < kMaxPlanes; ++p)
    if (a.planes[p].offset != b.planes[p].offset || a.planes[p].pitch != b.planes[p].pitch)
      return false;
  return true;
}

std::string to_string(const TensorDesc& t) {
  const char* n = dtype_name(t.dtype);
  std::string s = n ? n : "?";
  s += '[';
  for (std::uint32_t i = 0; i < t.rank && i < kMaxRank; ++i) {
    if (i) s += ',';
    s += std::to_string(t.shape[i]);
  }
  return s + ']';
}

}  // namespace cudaipc
