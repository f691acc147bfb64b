// Zero-copy for host channels: a buffer pool the sink offers upstream whose buffers ARE free ring
// slots, so upstream renders straight into shared memory and render() only commits. The core
// lends one slot at a time; when upstream asks for a second buffer before the first reached the
// sink (a queue in between), or the ring is full under policy=drop, the pool hands out ordinary
// memory and the sink copies it as usual.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <memory>

#include "cudaipc/producer.hpp"

namespace cudaipc::gst {

// Creates the pool; buffers carry a GstVideoMeta with the slot layout for video caps.
GstBufferPool* slot_pool_new(std::shared_ptr<Producer> producer);

// The borrowed slot behind `buf` when it came from a slot pool of `producer` and is still
// uncommitted, else nullptr. The WriteSlot stays owned by the buffer; commit it through `producer`.
WriteSlot* slot_of(GstBuffer* buf, const Producer* producer);

}  // namespace cudaipc::gst
