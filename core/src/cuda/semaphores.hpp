// GPU semaphores: words in host memory that the producer's and the consumer's streams write
// (cuStreamWriteValue32) and wait on (cuStreamWaitValue32), in place of IPC events. An IPC event
// whose recording process died stays incomplete for ever and takes every stream that waits on it
// along; a word in host memory can be stored by the surviving CPU instead, which releases the
// waiting stream within microseconds. The words are in a page of their own that the driver made
// (words_page.hpp), or in the connection page (conn_page.hpp) registered in each process that
// uses it (RegisteredPage); either way both GPUs' streams and both CPUs see the same word.
#pragma once

#include <cuda.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "../control_block.hpp"
#include "cuda_handles.hpp"

namespace cudaipc::cuda {

// Whether a cyclic 32-bit counter `value` has reached `target`: the rule CU_STREAM_WAIT_VALUE_GEQ
// applies on the GPU, so the CPU's shortcut and the stream's wait never disagree.
inline bool reached(std::uint32_t value, std::uint32_t target) noexcept {
  return static_cast<std::int32_t>(value - target) >= 0;
}

// Raises `word` to `value` unless it is already there: the CPU may race with a stream's writes to
// the same word and must never move it back.
inline void raise(std::atomic<std::uint32_t>& word, std::uint32_t value) noexcept {
  std::uint32_t seen = word.load(std::memory_order_acquire);
  while (!reached(seen, value) &&
         !word.compare_exchange_weak(seen, value, std::memory_order_acq_rel)) {
  }
}

// The low half of a frame seq, as the 32-bit semaphores carry it.
inline std::uint32_t seq32(std::uint64_t seq) noexcept {
  return static_cast<std::uint32_t>(seq);
}

// A host range made visible to the device of `ctx` for as long as this object lives; `keep` holds
// the host mapping alive meanwhile (it may be empty when the caller outlives this object).
class RegisteredPage {
 public:
  RegisteredPage(ContextPtr ctx, std::shared_ptr<const void> keep, void* page, std::size_t bytes);
  ~RegisteredPage();
  RegisteredPage(const RegisteredPage&) = delete;
  RegisteredPage& operator=(const RegisteredPage&) = delete;

  // The device address of a word inside the page.
  CUdeviceptr device_address(const void* word) const noexcept {
    return device_ + static_cast<CUdeviceptr>(static_cast<const char*>(word) -
                                              static_cast<const char*>(host_));
  }

 private:
  ContextPtr ctx_;
  std::shared_ptr<const void> keep_;
  void* host_ = nullptr;
  CUdeviceptr device_ = 0;
};

// A connection's semaphore words as this process reaches them: the CPU's atomics, and the device
// addresses its streams write and wait on.
struct WordPlaces {
  std::atomic<std::uint32_t>* ready = nullptr;
  std::atomic<std::uint32_t>* done = nullptr;  // kMaxSlots of them
  CUdeviceptr ready_at = 0;
  std::array<CUdeviceptr, kMaxSlots> done_at{};

  // The words `ready` and `done[kMaxSlots]` of `page` (a WordsPage or a RegisteredPage).
  template <class Page>
  static WordPlaces in(const Page& page, std::atomic<std::uint32_t>& ready,
                       std::atomic<std::uint32_t>* done) noexcept {
    WordPlaces w;
    w.ready = &ready;
    w.done = done;
    w.ready_at = page.device_address(&ready);
    for (std::uint32_t i = 0; i < kMaxSlots; ++i) w.done_at[i] = page.device_address(&done[i]);
    return w;
  }
};

// The stream waits (on the GPU) until the word has reached `target`.
void stream_wait(CUstream s, CUdeviceptr word, std::uint32_t target);
// The stream writes `value` once everything queued before it has finished, its writes visible.
void stream_write(CUstream s, CUdeviceptr word, std::uint32_t value);

// Up to `capacity` word writes queued as one driver call (one per consumer of a frame).
class WriteBatch {
 public:
  static constexpr std::size_t capacity = 128;
  void clear() noexcept { n_ = 0; }
  void add(CUdeviceptr word, std::uint32_t value) noexcept;
  std::size_t size() const noexcept { return n_; }
  void enqueue(CUstream s) const;

 private:
  std::array<CUstreamBatchMemOpParams, capacity> ops_{};
  std::size_t n_ = 0;
};

// Waits on the CPU, polling, until `s` has run everything queued on it or `timeout` has passed:
// true when it drained. Never blocks inside the driver, so a stream held by a peer that will not
// come back cannot hang the caller. The stream's context must be current.
bool drain(CUstream s, std::chrono::nanoseconds timeout) noexcept;

// The work queued on `s` now, as an event recorded after it, for a CPU wait on that work alone
// while more is queued behind it (a slot set's teardown on the retiring thread, the connection
// still reading). Empty when nothing is queued. `s` is a stream of `ctx`. Throws Error naming the
// failed call.
Event mark_queued(const ContextPtr& ctx, CUstream s);
// Polls, as drain() does, until the work before `e` has run or `timeout` has passed: true when it
// ran (or failed: nothing more of it will run). The event's context must be current.
bool wait_event(CUevent e, std::chrono::nanoseconds timeout) noexcept;

// Polls a semaphore word from the CPU until it reaches `target` or `deadline_ns` (monotonic)
// passes.
bool cpu_wait(const std::atomic<std::uint32_t>& word, std::uint32_t target,
              std::uint64_t deadline_ns) noexcept;

}  // namespace cudaipc::cuda
