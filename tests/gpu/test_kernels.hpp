// The GPU side of the tests, shared by the test binaries and their peer program: the test kernels
// (a fatbin embedded at build time, loaded through the project's driver table, so nothing links
// libcudart or libcuda) and the device's free memory.
#pragma once

#include <cstdint>
#include <string>

#include "cuda/cuda_handles.hpp"
#include "cuda/driver.hpp"
#include "cudaipc/producer.hpp"

namespace cudaipc::gputest {

// Why GPU tests cannot run in this process (no driver, no device), or "" when they can.
std::string gpu_unavailable_reason();

struct Counters {
  std::uint64_t bad = 0;      // words that did not hold the expected pattern
  std::uint64_t changed = 0;  // slow_read: words that changed while the reader held the slot
};

// The test kernels in the primary context of one device: the same context a Producer or Consumer
// with default CudaOptions works in, so the kernels can run on their streams.
class Kernels {
 public:
  explicit Kernels(int ordinal = 0);
  Kernels(const Kernels&) = delete;
  Kernels& operator=(const Kernels&) = delete;
  ~Kernels();

  const cuda::ContextPtr& context() const { return ctx_; }
  CUstream own_stream() const { return stream_.get(); }

  void fill(CUstream s, CUdeviceptr dst, std::uint64_t bytes, std::uint64_t key);
  void slow_fill(CUstream s, CUdeviceptr dst, std::uint64_t bytes, std::uint64_t key,
                 std::uint64_t spin_ns);
  void verify(CUstream s, CUdeviceptr src, std::uint64_t bytes, std::uint64_t key);
  void slow_read(CUstream s, CUdeviceptr src, std::uint64_t bytes, std::uint64_t key,
                 std::uint64_t spin_ns);
  // Waits for `s` (where the checks ran), then reads the counters.
  Counters counters(CUstream s);
  void reset_counters();

 private:
  void launch(CUfunction f, CUstream s, std::uint32_t blocks, void** args);

  cuda::ContextPtr ctx_;
  cuda::Stream stream_;
  CUmodule module_ = nullptr;
  CUfunction fill_ = nullptr, verify_ = nullptr, slow_fill_ = nullptr, slow_read_ = nullptr;
  cuda::DeviceAllocation counters_;
  std::uint32_t spin_blocks_ = 0;
};

// Publishes frame `key` zero-copy: borrows a slot, writes the pattern for `key` into its first
// `bytes` on the producer's stream (slow_fill when spin_ns > 0) and commits it with pts = key.
PublishStatus publish_pattern(Producer& producer, Kernels& kernels, std::uint64_t key,
                              std::uint64_t bytes, std::uint64_t spin_ns = 0);

// Free device memory (cuMemGetInfo) seen from `ctx`.
std::uint64_t free_device_memory(const cuda::ContextPtr& ctx);
}  // namespace cudaipc::gputest
