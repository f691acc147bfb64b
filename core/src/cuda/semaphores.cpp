#include "semaphores.hpp"

#include <time.h>

#include <string>

#include "../clock.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/log.hpp"

namespace cudaipc::cuda {

RegisteredPage::RegisteredPage(ContextPtr ctx, std::shared_ptr<const void> keep, void* page,
                               std::size_t bytes)
    : ctx_(std::move(ctx)), keep_(std::move(keep)) {
  const Driver& d = driver();
  ScopedContext current(ctx_->get());
  // PORTABLE: every context of the process may use it (a consumer's context need not be the one
  // that registered); DEVICEMAP: streams address it directly, no staging copy.
  check(
      d.cuMemHostRegister(page, bytes, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP),
      "cuMemHostRegister (connection page)");
  host_ = page;
  const CUresult r = d.cuMemHostGetDevicePointer(&device_, page, 0);
  if (r != CUDA_SUCCESS) {
    d.cuMemHostUnregister(page);
    host_ = nullptr;
    check(r, "cuMemHostGetDevicePointer (connection page)");
  }
}

RegisteredPage::~RegisteredPage() {
  if (!host_) return;
  ScopedContext current(ctx_->get(), std::nothrow);
  loaded_driver().cuMemHostUnregister(host_);
}

void stream_wait(CUstream s, CUdeviceptr word, std::uint32_t target) {
  check(driver().cuStreamWaitValue32(s, word, target, CU_STREAM_WAIT_VALUE_GEQ),
        "cuStreamWaitValue32");
}

void stream_write(CUstream s, CUdeviceptr word, std::uint32_t value) {
  // CU_STREAM_WRITE_VALUE_DEFAULT: the write is a release, so the peer that sees it sees every
  // write the stream made before it (frames written, frames read to the end).
  check(driver().cuStreamWriteValue32(s, word, value, CU_STREAM_WRITE_VALUE_DEFAULT),
        "cuStreamWriteValue32");
}

void WriteBatch::add(CUdeviceptr word, std::uint32_t value) noexcept {
  if (n_ == capacity) return;  // callers size their consumer tables below the capacity
  CUstreamBatchMemOpParams& op = ops_[n_++];
  op = CUstreamBatchMemOpParams{};
  op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  op.writeValue.address = word;
  op.writeValue.value = value;
  op.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
}

void WriteBatch::enqueue(CUstream s) const {
  if (n_ == 0) return;
  check(driver().cuStreamBatchMemOp(s, static_cast<unsigned>(n_),
                                    const_cast<CUstreamBatchMemOpParams*>(ops_.data()), 0),
        "cuStreamBatchMemOp");
}

namespace {

// Sleeps a little longer each round, up to 1 ms: a stream that drains at once costs no sleep, one
// that takes long costs no spinning core.
void backoff(unsigned round) noexcept {
  if (round < 64) return;
  timespec ts{0, round < 256 ? 20'000 : 1'000'000};
  ::nanosleep(&ts, nullptr);
}

// Polls `done` until it says so (true) or `deadline_ns` (monotonic) passes (false).
template <typename Done>
bool poll_until(Done done, std::uint64_t deadline_ns) noexcept {
  for (unsigned round = 0;; ++round) {
    if (done()) return true;
    if (monotonic_ns() >= deadline_ns) return false;
    backoff(round);
  }
}

std::uint64_t deadline_after(std::chrono::nanoseconds timeout) noexcept {
  return monotonic_ns() + static_cast<std::uint64_t>(timeout.count());
}

}  // namespace

Event mark_queued(const ContextPtr& ctx, CUstream s) {
  const Driver& d = driver();
  ScopedContext current(ctx->get());
  const CUresult r = d.cuStreamQuery(s);
  if (r == CUDA_SUCCESS) return Event();
  if (r != CUDA_ERROR_NOT_READY) check(r, "cuStreamQuery");
  CUevent e = nullptr;
  check(d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  Event event(ctx, e);
  check(d.cuEventRecord(e, s), "cuEventRecord");
  return event;
}

bool drain(CUstream s, std::chrono::nanoseconds timeout) noexcept {
  // Done, or failed: nothing more will run.
  return poll_until([s] { return loaded_driver().cuStreamQuery(s) != CUDA_ERROR_NOT_READY; },
                    deadline_after(timeout));
}

bool wait_event(CUevent e, std::chrono::nanoseconds timeout) noexcept {
  return poll_until([e] { return loaded_driver().cuEventQuery(e) != CUDA_ERROR_NOT_READY; },
                    deadline_after(timeout));
}

bool cpu_wait(const std::atomic<std::uint32_t>& word, std::uint32_t target,
              std::uint64_t deadline_ns) noexcept {
  return poll_until([&] { return reached(word.load(std::memory_order_acquire), target); },
                    deadline_ns);
}

}  // namespace cudaipc::cuda
