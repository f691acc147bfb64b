#include "stream_point.hpp"

#include <cuda.h>

#include <cstdio>
#include <string>

#include "cudaipc/error.hpp"
#include "driver.hpp"

namespace cudaipc {

StreamPoint& StreamPoint::operator=(StreamPoint&& o) noexcept {
  if (this != &o) {
    reset();
    context_ = o.context_;
    event_ = o.event_;
    armed_ = o.armed_;
    o.context_ = o.event_ = nullptr;
    o.armed_ = false;
  }
  return *this;
}

void* stream_context(void* stream) {
  const cuda::Driver& d = cuda::driver();
  auto s = static_cast<CUstream>(stream);
  CUcontext ctx = nullptr;
  CUresult r = d.cuStreamGetCtx(s, &ctx);
  if (r == CUDA_SUCCESS && !ctx) r = d.cuCtxGetCurrent(&ctx);
  if (r != CUDA_SUCCESS || !ctx) {
    char text[32];
    std::snprintf(text, sizeof text, "%p", stream);
    throw Error(Errc::invalid_argument,
                std::string("the results' CUDA stream ") + text + " has no context (" +
                    (r != CUDA_SUCCESS ? cuda::error_text(r) : "none is current") +
                    "): pass the stream the model queued its work on");
  }
  return ctx;
}

StreamPoint StreamPoint::after(void* stream) {
  StreamPoint p;
  p.mark(stream);
  return p;
}

void StreamPoint::mark(void* stream) {
  armed_ = false;
  if (!stream) return;  // results computed on the host: nothing to wait for
  const cuda::Driver& d = cuda::driver();
  auto s = static_cast<CUstream>(stream);
  auto ctx = static_cast<CUcontext>(stream_context(stream));
  cuda::ScopedContext current(ctx);
  // The usual case for a model that synchronised already: nothing to wait for.
  const CUresult r = d.cuStreamQuery(s);
  if (r == CUDA_SUCCESS) return;
  if (r != CUDA_ERROR_NOT_READY) cuda::check(r, "cuStreamQuery on the results' stream");
  if (event_ && context_ != ctx) reset();  // an event records only on its own context's streams
  if (!event_) {
    CUevent e = nullptr;
    // Blocking sync: the thread that waits sleeps instead of spinning a core.
    cuda::check(d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC),
                "cuEventCreate");
    event_ = e;
    context_ = ctx;
  }
  cuda::check(d.cuEventRecord(static_cast<CUevent>(event_), s),
              "cuEventRecord on the results' stream");
  armed_ = true;
}

void StreamPoint::wait() {
  if (!armed_) return;
  cuda::ScopedContext current(static_cast<CUcontext>(context_));
  cuda::check(cuda::loaded_driver().cuEventSynchronize(static_cast<CUevent>(event_)),
              "waiting for the results' stream (cuEventSynchronize)");
}

void StreamPoint::reset() noexcept {
  armed_ = false;
  if (!event_) return;
  cuda::ScopedContext current(static_cast<CUcontext>(context_), std::nothrow);
  cuda::loaded_driver().cuEventDestroy(static_cast<CUevent>(event_));
  event_ = context_ = nullptr;
}

}  // namespace cudaipc
