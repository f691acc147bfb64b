// What cudaipcsrc attaches to every buffer beside its memory: a GstVideoMeta with the frame's
// layout, the GstCudaIpcTensorMeta and the reference timestamps (docs/elements.md). A buffer from a
// pool keeps its metas (marked pooled) and has them updated in place, so once a buffer has been
// round its pool a frame costs no meta allocation.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <cstdint>

#include "cudaipc/frame.hpp"
#include "cudaipc/tensor.hpp"

namespace cudaipc::gst {

// The reference timestamps of one frame; 0 (or kNoTime for the PTS) leaves one out.
struct FrameStamps {
  std::uint64_t producer_pts = kNoTime;  // timestamp/x-cudaipc-pts
  std::uint64_t publish_ns = 0;          // timestamp/x-cudaipc-publish
  std::uint64_t chain_ns = 0;            // timestamp/x-cudaipc-sink-chain
  std::uint64_t acquire_ns = 0;          // timestamp/x-cudaipc-acquire
};

// A GstVideoMeta for `video` with the planes where `tensor` puts them (the slot's layout).
void set_video_meta(GstBuffer* buf, const GstVideoInfo& video, const TensorDesc& tensor);
// `data` is element 0 (slot address + tensor.byte_offset, or the copy's address).
void set_tensor_meta(GstBuffer* buf, const TensorDesc& tensor, std::uintptr_t data, int device_id,
                     std::uint64_t seq);
// One more tensor meta, for tensor 1.. of a frame of several tensors (a new buffer each frame:
// nothing to reuse).
void add_tensor_meta_for(GstBuffer* buf, const TensorDesc& tensor, std::uintptr_t data,
                         int device_id, std::uint64_t seq);
void set_reference_times(GstBuffer* buf, const FrameStamps& stamps);
// Buffer flags from the frame's (kFlagKeyframe and friends, frame.hpp).
void set_frame_flags(GstBuffer* buf, std::uint32_t flags);

}  // namespace cudaipc::gst
