// io-mode=import without an allocation per frame: a buffer pool whose buffers wrap the slots of
// one imported slot set, one buffer per slot, made on the slot's first frame and reused for every
// frame after it. A buffer holds the frame leased in its slot; the lease ends when the buffer comes
// back to the pool, i.e. when downstream frees it. Host slots are wrapped read-only, CUDA slots
// (GStreamer 1.24+) as GstCudaMemory on the source's context and stream. The metas a buffer
// carries stay on it and are updated per frame (frame_metas.h).
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <cstdint>
#include <memory>

#include "cudaipc/consumer.hpp"
#include "memory/cuda_glue.h"

namespace cudaipc::gst {

// What every buffer of one pool shares.
struct FrameLayout {
  std::shared_ptr<const void> slot_memory;  // Frame::slot_memory(): keeps the set mapped
  TensorDesc tensor{};                      // the frames' layout in their slots
  std::uint64_t span = 0;                   // bytes a buffer covers from the slot's start
  bool is_video = false;
  GstVideoInfo video{};
  GstCudaContext* context = nullptr;  // CUDA slots; null for host slots
#if GST_CHECK_VERSION(1, 24, 0)
  GstCudaStream* stream = nullptr;  // the stream the consumer orders its reads on
#endif
};

// An active pool for frames of `layout`; transfer full. nullptr when it cannot be set up.
GstBufferPool* frame_pool_new(const FrameLayout& layout);
// Whether `frame`, described by `tensor` and covering `span` bytes, fits the pool's buffers (same
// slot set, layout and span). A format change that keeps the slots needs a new pool.
bool frame_pool_fits(GstBufferPool* pool, const Frame& frame, const TensorDesc& tensor,
                     std::uint64_t span);
// The buffer of the frame's slot, now holding `frame` (moved in on success). nullptr when that
// buffer is still downstream (a producer that reused a leased slot) or could not be made.
GstBuffer* frame_pool_take(GstBufferPool* pool, Frame& frame);

}  // namespace cudaipc::gst
