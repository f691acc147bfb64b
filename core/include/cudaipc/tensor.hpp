// The tensor description that travels with the format and with every frame. It lives in shared
// memory, so it is a fixed-size, trivially copyable layout; validate() checks one read from a peer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace cudaipc {

inline constexpr std::uint32_t kMaxRank = 8;
inline constexpr std::uint32_t kMaxPlanes = 4;

// Values are part of the wire format: never renumber.
enum class DType : std::uint32_t {
  invalid = 0,
  int8 = 1,
  int16 = 2,
  int32 = 3,
  int64 = 4,
  uint8 = 5,
  uint16 = 6,
  uint32 = 7,
  uint64 = 8,
  float16 = 9,
  float32 = 10,
  float64 = 11,
  bfloat16 = 12,
  boolean = 13,
};

// Size of one element in bytes, 0 for an unknown dtype.
std::size_t dtype_size(DType t) noexcept;
// NNStreamer/GstTensorMeta spelling ("uint8", "float32", ...); nullptr for an unknown dtype.
const char* dtype_name(DType t) noexcept;
// Inverse of dtype_name; DType::invalid when unknown.
DType dtype_from_name(const std::string& name) noexcept;

struct Plane {
  std::uint64_t offset;  // from the start of the slot
  std::uint64_t pitch;   // bytes per row
};

struct TensorDesc {
  DType dtype;
  std::uint32_t rank;              // 0..kMaxRank
  std::int64_t shape[kMaxRank];    // outermost first
  std::int64_t strides[kMaxRank];  // bytes, outermost first
  std::uint64_t byte_offset;       // where element 0 is, from the start of the slot
  std::uint64_t size;              // bytes the tensor spans from byte_offset
  std::uint32_t num_planes;        // 0..kMaxPlanes (video: Y, UV, ...)
  std::uint32_t reserved;
  Plane planes[kMaxPlanes];
};

// A dense row-major description of `shape` (strides derived), with size computed.
TensorDesc make_tensor(DType dtype, std::initializer_list<std::int64_t> shape);

// Throws Error(protocol) naming the field when `t` is not self-consistent or does not fit in
// `capacity` bytes. Used on everything read from a peer.
void validate(const TensorDesc& t, std::uint64_t capacity);

bool operator==(const TensorDesc& a, const TensorDesc& b) noexcept;
inline bool operator!=(const TensorDesc& a, const TensorDesc& b) noexcept {
  return !(a == b);
}

// "uint8[480,640,4]" — for logs and messages.
std::string to_string(const TensorDesc& t);

}  // namespace cudaipc
