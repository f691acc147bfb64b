#include "gpu_support.hpp"

#include <algorithm>
#include <cstdlib>

namespace cudaipc::gputest {

std::uint64_t frame_count(std::uint64_t normal) {
  const char* v = std::getenv("CUDAIPC_GPU_FRAMES");
  if (!v || !*v) return normal;
  return std::max<std::uint64_t>(1, std::strtoull(v, nullptr, 10));
}

}  // namespace cudaipc::gputest
