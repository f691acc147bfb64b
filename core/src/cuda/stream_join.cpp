#include "stream_join.hpp"

#include <cstdio>
#include <string>

#include "cudaipc/error.hpp"

namespace cudaipc::cuda {
namespace {

std::string stream_name(CUstream s) {
  if (s == nullptr || s == CU_STREAM_LEGACY) return "the legacy default stream";
  if (s == CU_STREAM_PER_THREAD) return "the per-thread default stream";
  char text[32];
  std::snprintf(text, sizeof text, "%p", static_cast<void*>(s));
  return std::string("CUDA stream ") + text;
}

// A caller's stream from another context (or a stale handle) is the likely cause of a failure
// here: say so instead of the driver's bare code.
void check_stream(CUresult r, const char* call, CUstream s, CUdevice device) {
  if (r == CUDA_SUCCESS) return;
  const std::string why =
      std::string(call) + " on " + stream_name(s) + " failed: " + error_text(r) +
      " (a stream ordered against a cudaipc channel must " +
      "belong to the channel's CUDA context, on device " + std::to_string(device) + ")";
  throw Error(r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_CONTEXT ||
                      r == CUDA_ERROR_INVALID_VALUE
                  ? Errc::invalid_argument
                  : Errc::cuda,
              why);
}

}  // namespace

StreamJoin::StreamJoin(ContextPtr ctx) : ctx_(std::move(ctx)) {
  ScopedContext current(ctx_->get());
  CUevent e = nullptr;
  check(driver().cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  event_ = Event(ctx_, e);
}

bool StreamJoin::wait(CUstream waiter, CUstream signaller) {
  if (waiter == signaller) return false;
  const Driver& d = driver();
  // The legacy and per-thread handles name the current context's streams.
  ScopedContext current(ctx_->get());
  const CUresult idle = d.cuStreamQuery(signaller);
  if (idle == CUDA_SUCCESS) return false;
  if (idle != CUDA_ERROR_NOT_READY) check_stream(idle, "cuStreamQuery", signaller, ctx_->device());
  std::lock_guard<std::mutex> lock(mu_);
  check_stream(d.cuEventRecord(event_.get(), signaller), "cuEventRecord", signaller,
               ctx_->device());
  check_stream(d.cuStreamWaitEvent(waiter, event_.get(), 0), "cuStreamWaitEvent", waiter,
               ctx_->device());
  return true;
}

}  // namespace cudaipc::cuda
