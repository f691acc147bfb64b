// The payload pattern tests, benchmarks and the demo write and verify: every 8-byte word depends
// on the frame's sequence number and its position, so a stale, torn or shifted frame fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cudaipc::testing {

inline std::uint64_t pattern_word(std::uint64_t seq, std::uint64_t index) {
  std::uint64_t x = seq * 0x9E3779B97F4A7C15ull + index * 0xBF58476D1CE4E5B9ull + 1;
  x ^= x >> 31;
  return x;
}

inline void fill_pattern(void* dst, std::size_t bytes, std::uint64_t seq) {
  auto* p = static_cast<std::uint8_t*>(dst);
  std::size_t words = bytes / 8;
  for (std::size_t i = 0; i < words; ++i) {
    std::uint64_t w = pattern_word(seq, i);
    std::memcpy(p + i * 8, &w, 8);
  }
  for (std::size_t i = words * 8; i < bytes; ++i)
    p[i] = static_cast<std::uint8_t>(pattern_word(seq, i) & 0xff);
}

// Index of the first wrong byte, or `bytes` when every byte is right.
inline std::size_t check_pattern(const void* src, std::size_t bytes, std::uint64_t seq) {
  const auto* p = static_cast<const std::uint8_t*>(src);
  std::size_t words = bytes / 8;
  for (std::size_t i = 0; i < words; ++i) {
    std::uint64_t w;
    std::memcpy(&w, p + i * 8, 8);
    if (w != pattern_word(seq, i)) {
      std::uint64_t want = pattern_word(seq, i);
      for (std::size_t b = 0; b < 8; ++b)
        if (((w >> (8 * b)) & 0xff) != ((want >> (8 * b)) & 0xff)) return i * 8 + b;
    }
  }
  for (std::size_t i = words * 8; i < bytes; ++i)
    if (p[i] != static_cast<std::uint8_t>(pattern_word(seq, i) & 0xff)) return i;
  return bytes;
}

}  // namespace cudaipc::testing
