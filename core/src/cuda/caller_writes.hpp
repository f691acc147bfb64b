// A consumer's "done reading" written by its caller's stream instead of its own (issue #39): one
// driver call for a release after a model's stream, where ordering the consumer's stream after it
// took four (the stream's query, an event recorded, the wait, our stream's write).
#pragma once

#include <cuda.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "cuda_handles.hpp"

namespace cudaipc::cuda {

// The callers' streams a consumer wrote on. The page those writes land in, and the slots the
// callers read before them, must outlive them, and a caller's stream is not ours to wait for (it
// may be gone): the newest write on each stream is followed by an event of ours, which drain()
// waits for before that memory goes. A few streams at a time; a model reads on one.
class CallerWrites {
 public:
  static constexpr std::size_t kStreams = 4;

  explicit CallerWrites(ContextPtr ctx) : ctx_(std::move(ctx)) {}

  // Queues the write of `value` into `word` on `s` after the work queued there so far, then its
  // event. False, queuing nothing, when kStreams other streams hold the places. Our context must be
  // current; `s` must belong to it (Error(Errc::invalid_argument) says so when it does not).
  bool write(CUstream s, CUdeviceptr word, std::uint32_t value);
  // Polls until every write queued here has landed, for at most `limit`.
  bool drain(std::chrono::nanoseconds limit) const noexcept;

 private:
  ContextPtr ctx_;
  mutable std::mutex mu_;
  std::array<CUstream, kStreams> streams_{};
  std::array<Event, kStreams> events_;
  std::size_t used_ = 0;
};

}  // namespace cudaipc::cuda
