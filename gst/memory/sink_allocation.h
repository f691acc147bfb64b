// The pools cudaipcsink offers upstream in the allocation query: slot pools, whose buffers are
// free ring slots upstream writes into (host channels, and CUDA channels on 1.24+), and for CUDA
// caps otherwise an ordinary GstCudaBufferPool on the sink's context, so upstream at least
// allocates on the slots' device.
#pragma once

#include <gst/gst.h>

#include <memory>

#include "format/caps_tensor.h"
#include "memory/cuda_glue.h"
#include "memory/slot_pool.h"

namespace cudaipc::gst {

// The slot pool of `lender`'s producer for `caps`, `bytes` a buffer; `ctx` (and on 1.24+
// `stream`) for CUDA slots, null for host slots. False when the pool refused the config: upstream
// then allocates its own memory, which render() copies.
bool offer_slot_pool(GstQuery* query, GstCaps* caps, guint bytes,
                     std::shared_ptr<SlotLender> lender, GstCudaContext* ctx,
                     ElementStream& stream);
// An ordinary GstCudaBufferPool on `ctx` for `caps`.
void offer_cuda_pool(GstQuery* query, GstCaps* caps, const StreamCaps& parsed, GstCudaContext* ctx);
// The size of the buffers such a pool allocates (pitched rows), 0 where it refuses the caps.
guint cuda_pool_size(GstCaps* caps, const StreamCaps& parsed, GstCudaContext* ctx);

}  // namespace cudaipc::gst
