// A frame of several tensors (other/tensors, num_tensors > 1) as NNStreamer's elements expect it:
// one GstMemory per tensor. The memories share the source's one buffer of the whole slot (or its
// copy), which a GstParentBufferMeta keeps alive, and with it the frame's lease.
#pragma once

#include <gst/gst.h>

#include <vector>

#include "cudaipc/tensor.hpp"

namespace cudaipc::gst {

// A new buffer of one memory per tensor that holds `whole` (taken) as its parent; `whole` itself
// back (one memory) where its allocator cannot share parts of a memory.
GstBuffer* split_tensors(GstBuffer* whole, const std::vector<TensorDesc>& tensors);

}  // namespace cudaipc::gst
