// Orders one CUDA stream after another on the GPU, for callers that read frames or write slots on
// streams of their own (bindings: a torch or cupy stream) instead of the channel's stream.
#pragma once

#include <cuda.h>

#include <mutex>

#include "cuda_handles.hpp"

namespace cudaipc::cuda {

// One reusable event per channel end. cuStreamWaitEvent takes the event's state when it is called,
// so recording the event again for the next pair is safe; the lock keeps a record and its wait
// together when several threads order streams at once (releases run on any thread).
class StreamJoin {
 public:
  explicit StreamJoin(ContextPtr ctx);

  // Work queued on `waiter` from now on runs after the work `signaller` has queued so far. The CPU
  // never waits. Nothing is queued when the two are one stream or `signaller` is idle (everything
  // it queued has run), the usual case for a caller's stream between frames. Both must belong to
  // this object's context (CU_STREAM_LEGACY and CU_STREAM_PER_THREAD mean its default streams);
  // Error(Errc::invalid_argument) says so when one does not. True when it queued the wait.
  bool wait(CUstream waiter, CUstream signaller);

 private:
  ContextPtr ctx_;
  std::mutex mu_;
  Event event_;
};

}  // namespace cudaipc::cuda
