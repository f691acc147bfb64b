// The test pattern `cudaipc pub` writes and the tests check: the frame index in the pixels. The
// first 8 bytes of the slot hold the frame's seq (little-endian); byte i after them is
// (seq + i) mod 256, so every frame differs from its neighbours everywhere and a stale, torn or
// shifted frame shows.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cudaipc::cli {

inline std::uint8_t pattern_byte(std::uint64_t seq, std::uint64_t i) {
  if (i < 8) return static_cast<std::uint8_t>(seq >> (8 * i));
  return static_cast<std::uint8_t>((seq + i) & 0xff);
}

inline void fill_frame_pattern(std::uint8_t* dst, std::size_t bytes, std::uint64_t seq) {
  for (std::size_t i = 0; i < bytes; ++i) dst[i] = pattern_byte(seq, i);
}

}  // namespace cudaipc::cli
