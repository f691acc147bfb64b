// A connection's GPU semaphore words (`ready`, `done[]`, semaphores.hpp) in a page of host memory
// the CUDA driver makes itself (a host NUMA node's, cuMemCreate), which the consumer makes and
// shares with its producer by descriptor, as a producer shares its slots. Both map it for their
// device and their CPU. The alternative, registering the connection page in both processes
// (cuMemHostRegister), holds every launch of the registering process while the kernel driver's
// GPU-wide lock is taken by other processes making or dropping contexts: up to 0.2 s for a model
// process whose pipelines start (docs/design.md, "twenty-fourth session"). Imports and mappings
// of such a page wait for that lock too, but hold no launch. Where the driver makes no such page
// the connection page is registered as before. A futex on this page is refused (EFAULT), so the
// words the CPUs sleep on stay in the connection page.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "../control_block.hpp"
#include "../unique_fd.hpp"
#include "cuda_handles.hpp"

namespace cudaipc::cuda {

struct GpuWords {
  // Written by the producer's stream once a frame's bytes have landed: the newest such seq.
  alignas(64) std::atomic<std::uint32_t> ready;
  // Written by the consumer's stream after its last read of a frame from slot i: that frame's seq.
  alignas(64) std::atomic<std::uint32_t> done[kMaxSlots];
};

class WordsPage {
  struct Key {
    explicit Key() = default;
  };

 public:
  explicit WordsPage(Key) {}
  // The consumer's page, zeroed, mapped for `ctx`'s device and the CPU; nullptr (and why, once, at
  // info level) where the driver makes no such page.
  static std::unique_ptr<WordsPage> make(const ContextPtr& ctx);
  // The producer's map of a consumer's page (`fd` untrusted: a page that is no host memory the
  // driver made, or smaller than the words, is a protocol error).
  static std::unique_ptr<WordsPage> import(const ContextPtr& ctx, int fd);

  WordsPage(const WordsPage&) = delete;
  WordsPage& operator=(const WordsPage&) = delete;

  // A descriptor of the page for the producer (the consumer's page only).
  UniqueFd export_fd() const;
  GpuWords& words() const noexcept { return *reinterpret_cast<GpuWords*>(mapping_.address()); }
  // The CPU and the device reach the page at the same address.
  CUdeviceptr device_address(const void* word) const noexcept {
    return reinterpret_cast<CUdeviceptr>(word);
  }

 private:
  ContextPtr ctx_;
  VmmAllocation allocation_;  // the consumer's, kept for its export
  Mapping mapping_;
};

}  // namespace cudaipc::cuda
