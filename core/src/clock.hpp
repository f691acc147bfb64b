#pragma once

#include <time.h>

#include <cstdint>

namespace cudaipc {

// CLOCK_MONOTONIC in ns: comparable across processes on one machine (a vDSO call, no syscall).
inline std::uint64_t monotonic_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace cudaipc
