// Little-endian loads and stores at any alignment, for the meta area's records: memcpy, so a
// field of another process's shared memory is read once, into a local, whatever its address.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cudaipc::metas::io {

template <typename T>
inline T load(const std::uint8_t* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
inline void store(std::uint8_t* p, T v) noexcept {
  std::memcpy(p, &v, sizeof v);
}

inline constexpr std::size_t pad8(std::size_t n) noexcept {
  return (n + 7) & ~std::size_t{7};
}

// [off, off + len) lies within [0, size), without overflow.
inline constexpr bool within(std::uint64_t off, std::uint64_t len, std::uint64_t size) noexcept {
  return off <= size && len <= size - off;
}

}  // namespace cudaipc::metas::io
