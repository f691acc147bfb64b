// Test-only helpers of the GPU suites (peer processes, fd counts and the rest come from
// tests/common): the skip check and the frame counts of the long tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "test_kernels.hpp"

namespace cudaipc::gputest {

// Skips the test, saying why on the test's output, where there is no driver or no GPU.
#define CUDAIPC_REQUIRE_GPU()                                                    \
  do {                                                                           \
    const std::string why_no_gpu = ::cudaipc::gputest::gpu_unavailable_reason(); \
    if (!why_no_gpu.empty()) {                                                   \
      std::fprintf(stderr, "GPU test skipped: %s\n", why_no_gpu.c_str());        \
      GTEST_SKIP() << "no GPU: " << why_no_gpu;                                  \
    }                                                                            \
  } while (0)

// Frames per long test: CUDAIPC_GPU_FRAMES overrides `normal` (compute-sanitizer runs use fewer).
std::uint64_t frame_count(std::uint64_t normal);

}  // namespace cudaipc::gputest
