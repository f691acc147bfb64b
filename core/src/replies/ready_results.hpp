// A reply's detections as the model left them (cudaipc/server.hpp ResultDetections), checked when
// the reply is queued, and read once the stream has run into what the encoder takes: float32 and
// int64 arrays, read in place when packed so and converted otherwise into scratch arrays the
// server's reply thread keeps (no allocation per reply once they are large enough).
#pragma once

#include <cstdint>
#include <vector>

#include "cudaipc/server.hpp"

namespace cudaipc::detail {

// The most detections one reply takes (a meta area holds far fewer).
inline constexpr std::uint32_t kMaxResultDetections = 1u << 20;

// Throws Errc::invalid_argument naming what is wrong: a dtype not taken, a stride below one, an
// array missing its data, boxes missing while there are detections.
void check_results(const ResultDetections& d);

// Bytes one array of `d` takes packed (4 values per detection for boxes).
std::size_t packed_bytes(const ResultArray& a, std::uint32_t n, std::uint32_t per_detection);

struct ResultScratch {
  std::vector<float> boxes, scores, rotation;
  std::vector<std::int64_t> labels;
};

// `d`'s arrays (host memory) as the encoder takes them; names as `d` has them.
ReadyResults ready_results(const ResultDetections& d, ResultScratch& scratch);

}  // namespace cudaipc::detail
