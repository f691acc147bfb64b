// A frame's tensor bytes in host memory: read in place for host channels, downloaded from the GPU
// (ordered after the producer's write, on the consumer's stream) for CUDA channels.
#pragma once

#include <cstdint>
#include <vector>

#include "cudaipc/consumer.hpp"

namespace cudaipc::cli {

// The `f.size()` bytes from the tensor's first byte. Errc::no_cuda where the build or machine has
// no CUDA and the frame lives in GPU memory.
std::vector<std::uint8_t> frame_bytes(const Consumer& c, const Frame& f);

}  // namespace cudaipc::cli
