// Frames that say who they are: the first 8 bytes hold the frame's id (the producer's frame
// index, offset per producer), the rest is tests/common's pattern for that id. A reader checks a
// frame without knowing which frames were dropped or which producer sent it, and a stale, torn or
// shifted frame fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "pattern.hpp"

namespace cudaipc::testing::gstmp {

constexpr std::size_t kIdBytes = 8;

inline void fill_frame(void* dst, std::size_t bytes, std::uint64_t id) {
  auto* p = static_cast<std::uint8_t*>(dst);
  std::memcpy(p, &id, kIdBytes);
  fill_pattern(p + kIdBytes, bytes - kIdBytes, id);
}

inline std::uint64_t frame_id(const void* src) {
  std::uint64_t id;
  std::memcpy(&id, src, kIdBytes);
  return id;
}

// Whether every byte after the id matches the pattern of the id.
inline bool frame_intact(const void* src, std::size_t bytes) {
  if (bytes < kIdBytes) return false;
  const auto* p = static_cast<const std::uint8_t*>(src);
  return check_pattern(p + kIdBytes, bytes - kIdBytes, frame_id(src)) == bytes - kIdBytes;
}

}  // namespace cudaipc::testing::gstmp
