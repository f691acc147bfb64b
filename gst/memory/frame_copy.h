// cudaipcsrc's copies of frames out of their slots, so the slot goes back to the producer at once:
// io-mode=copy (and every CUDA frame on 1.22, which cannot wrap foreign memory) into CUDA buffers
// of the source's own pool, host slots with io-mode=copy, and downloads of CUDA frames for
// downstream elements in system memory. Buffers come from pools, so a frame allocates nothing once
// the pool has its buffers. Only a download waits on the CPU: the CPU must have the bytes.
#pragma once

#include <gst/gst.h>

#include <cstdint>
#include <string>

#include "cudaipc/consumer.hpp"
#include "format/src_format.h"
#include "memory/cuda_glue.h"

namespace cudaipc::gst {

// A pool of GstCudaMemory on `ctx` for copies of frames of `f`, negotiated as `caps`; on 1.24+
// its memory carries `stream` (the consumer's), so downstream orders itself after the copies.
// Tensors ride in a one-row RGBA "image" of their bytes, since GstCudaBufferPool only takes video
// caps (and 1.22's allocator knows no GRAY8). Transfer full; nullptr when it cannot be set up.
GstBufferPool* cuda_copy_pool_new(GstCudaContext* ctx, GstCaps* caps, const StreamFormat& f,
                                  ElementStream& stream);
// A pool of system memory buffers of `bytes` each. Transfer full; nullptr on failure.
GstBufferPool* system_pool_new(std::uint64_t bytes);

struct Copied {
  GstBuffer* buf = nullptr;
  TensorDesc tensor{};      // the copy's layout (the slot's, for system memory copies)
  std::uintptr_t data = 0;  // the copy's element 0
};

// The frame's planes into a buffer of `pool` (cuda_copy_pool_new), queued on `stream`, which
// already waits for the frame on the GPU. On 1.22, whose memory has no stream, the copy is also
// ordered after, and before, whatever the legacy default stream (every 1.22 element's) has queued.
bool copy_to_cuda(GstBufferPool* pool, const Frame& frame, const StreamFormat& f, CUstream stream,
                  StreamOrder& order, Copied* out, std::string* error);
// The slot's first `span` bytes into a buffer of `pool` (system_pool_new): a host slot's memcpy,
// or a CUDA slot's download on `stream` (returns once the bytes are here).
bool copy_to_system(GstBufferPool* pool, const Frame& frame, std::uint64_t span, bool cuda,
                    CUstream stream, Copied* out, std::string* error);

}  // namespace cudaipc::gst
