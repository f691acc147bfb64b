#include "caller_writes.hpp"

#include "../clock.hpp"
#include "driver.hpp"
#include "semaphores.hpp"
#include "stream_join.hpp"

namespace cudaipc::cuda {

bool CallerWrites::write(CUstream s, CUdeviceptr word, std::uint32_t value) {
  std::lock_guard<std::mutex> lock(mu_);
  std::size_t i = 0;
  while (i < used_ && streams_[i] != s) ++i;
  if (i == kStreams) return false;
  const Driver& d = driver();
  if (i == used_) {
    CUevent e = nullptr;
    check(d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    events_[i] = Event(ctx_, e);
    streams_[i] = s;
    ++used_;
  }
  check_caller_stream(d.cuStreamWriteValue32(s, word, value, CU_STREAM_WRITE_VALUE_DEFAULT),
                      "cuStreamWriteValue32", s, ctx_->device());
  check_caller_stream(d.cuEventRecord(events_[i].get(), s), "cuEventRecord", s, ctx_->device());
  return true;
}

bool CallerWrites::drain(std::chrono::nanoseconds limit) const noexcept {
  const std::uint64_t deadline = monotonic_ns() + static_cast<std::uint64_t>(limit.count());
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t i = 0; i < used_; ++i)
    if (!wait_event(events_[i].get(), deadline)) return false;
  return true;
}

}  // namespace cudaipc::cuda
