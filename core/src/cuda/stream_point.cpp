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
    o.context_ = o.event_ = nullptr;
  }
  return *this;
}

StreamPoint StreamPoint::after(void* stream) {
  if (!stream) return StreamPoint{};  // results computed on the host: nothing to wait for
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
  cuda::ScopedContext current(ctx);
  // The usual case for a model that synchronised already: nothing to wait for.
  r = d.cuStreamQuery(s);
  if (r == CUDA_SUCCESS) return StreamPoint{};
  if (r != CUDA_ERROR_NOT_READY) cuda::check(r, "cuStreamQuery on the results' stream");
  CUevent e = nullptr;
  // Blocking sync: the thread that waits sleeps instead of spinning a core.
  cuda::check(d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC),
              "cuEventCreate");
  StreamPoint p;
  p.context_ = ctx;
  p.event_ = e;
  cuda::check(d.cuEventRecord(e, s), "cuEventRecord on the results' stream");
  return p;
}

void StreamPoint::wait() {
  if (!event_) return;
  cuda::ScopedContext current(static_cast<CUcontext>(context_));
  cuda::check(cuda::loaded_driver().cuEventSynchronize(static_cast<CUevent>(event_)),
              "waiting for the results' stream (cuEventSynchronize)");
}

void StreamPoint::reset() noexcept {
  if (!event_) return;
  cuda::ScopedContext current(static_cast<CUcontext>(context_), std::nothrow);
  cuda::loaded_driver().cuEventDestroy(static_cast<CUevent>(event_));
  event_ = context_ = nullptr;
}

}  // namespace cudaipc
