// Test-only helpers of the GPU suites: the skip check, peer processes, and the resource counts the
// leak tests compare.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

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

// Open file descriptors of this process.
int open_fd_count();

// Frames per long test: CUDAIPC_GPU_FRAMES overrides `normal` (compute-sanitizer runs use fewer).
std::uint64_t frame_count(std::uint64_t normal);

// A unique channel path for one test.
std::string channel_path(const std::string& name);

// A peer program (cudaipc-gpu-peer beside this executable) with its stdout piped back.
class Peer {
 public:
  explicit Peer(const std::vector<std::string>& args);
  ~Peer();  // kills and reaps it if it still runs
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  pid_t pid() const { return pid_; }
  // Reads stdout until a line starting with `prefix`; false on timeout or exit.
  bool wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout,
                     std::string* line = nullptr);
  // Exit status (0..255), 128+signal when killed, -1 when still running after `timeout`.
  int wait(std::chrono::milliseconds timeout);
  void kill(int signal);
  // The RESULT line's key=value pairs (after wait()).
  std::map<std::string, std::uint64_t> result() const;
  const std::string& output() const { return out_; }

 private:
  void drain(int timeout_ms);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int status_ = -1;
  std::string out_;
  std::size_t scanned_ = 0;
};

}  // namespace cudaipc::gputest
