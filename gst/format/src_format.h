// The producer's stream as cudaipcsrc sees it: its format message validated (untrusted input) and
// the caps the source offers downstream for it.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cudaipc/consumer.hpp"

namespace cudaipc::gst {

struct StreamFormat {
  bool valid = false;
  std::string caps_text;
  std::string tags;
  TensorDesc tensor{};
  // other/tensors with num_tensors > 1: every tensor, where it lies in the slot (caps_tensor.h);
  // empty otherwise. The buffer is cut into one memory per tensor.
  std::vector<TensorDesc> tensors;
  bool is_video = false;
  GstVideoInfo video{};
  std::uint64_t max_frame_size = 0;  // validated by the core against the slot size
  bool cuda = false;                 // the producer's slots are CUDA memory
};

// Why a format was refused, for the element's error message.
enum class FormatRefusal {
  malformed,  // STREAM, DECODE: the caps text or tensor is unusable or inconsistent
  no_cuda,    // RESOURCE, NOT_FOUND: CUDA slots, but no CUDA context here
  too_large,  // STREAM, FORMAT: frames past what a GstBuffer of this source covers
};

// Reads `ev` (a format event) into `out`. `cuda` says whether the channel's slots are CUDA
// memory, `have_context` whether this process has a CUDA context for them. False with the reason
// and a message when the format cannot be played.
bool read_stream_format(const Event& ev, bool cuda, bool have_context, StreamFormat* out,
                        FormatRefusal* why, std::string* message);

// The caps we can produce for a stream: CUDA memory first where we can, then system memory.
// Transfer full.
GstCaps* offered_caps(const StreamFormat& f);

// Bytes a buffer covers from the slot's start: the tensor's span, and for video the last row's
// padding where the slot has it (GStreamer derives row counts from sizes).
std::uint64_t frame_span(const StreamFormat& f, const TensorDesc& t);

}  // namespace cudaipc::gst
