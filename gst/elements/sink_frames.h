// What cudaipcsink makes of a buffer for the channel: its frame flags and timing record (the
// FrameInfo it is committed with), and the copy of its bytes into a slot when upstream did not
// write into the slot itself.
#pragma once

#include <gst/base/gstbasesink.h>
#include <gst/gst.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cudaipc/producer.hpp"
#include "format/caps_tensor.h"
#include "format/time_sync.h"
#include "memory/cuda_glue.h"

namespace cudaipc::gst {

// The buffer's tensor description (planes from its GstVideoMeta) and the bytes it needs in a slot:
// whole rows, the last row's padding too, so the source can describe the slot to GStreamer, which
// counts rows from a size. False with the message for the user when it does not match the caps.
bool buffer_layout(const StreamCaps& caps, const std::string& wire_caps, GstBuffer* buf,
                   TensorDesc* tensor, std::uint64_t* bytes, std::string* error);
// The buffer's timing for consumers (time_sync.h); `entry` is render()'s entry time.
TimingRecord timing_of(GstBaseSink* sink, GstBuffer* buf, std::uint64_t entry);
// The buffer's timestamps and flags; `timing` must outlive the commit.
FrameInfo frame_info(GstBuffer* buf, const TimingRecord& timing);
// Copies the buffer's bytes [0, bytes) into `slot`, the layout (plane offsets, pitches) kept:
// a memcpy for host channels; for CUDA channels one copy queued on the producer's stream,
// ordered on the GPU after the input memory's pending writes and before its owner's next use.
// With several `tensors`, each goes to its offset in the slot, from the buffer's memory of the
// same index (one memory per tensor) or from where it lies in one packed memory.
bool copy_into_slot(Producer& producer, GstCudaContext* ctx, StreamOrder& order, GstBuffer* buf,
                    const WriteSlot& slot, std::uint64_t bytes,
                    const std::vector<TensorDesc>& tensors, std::string* error);

}  // namespace cudaipc::gst
