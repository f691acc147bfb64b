#include "format/src_format.h"

#include <algorithm>

#include "format/caps_tensor.h"
#include "format/stream_header.h"

namespace cudaipc::gst {

bool read_stream_format(const Event& ev, bool cuda, bool have_context, StreamFormat* out,
                        FormatRefusal* why, std::string* message) {
  StreamHeader header;
  GstVideoInfo vinfo;
  GstCaps* check = nullptr;
  if (decode_stream_header(ev.format.caps, &header, message))
    check = caps_from_wire(header.caps, ev.format.tensor, false, &vinfo, message);
  if (!check) {
    *why = FormatRefusal::malformed;
    return false;
  }
  StreamFormat f;
  f.valid = true;
  f.caps_text = header.caps;
  f.tags = header.tags;
  f.tensor = ev.format.tensor;
  f.max_frame_size = ev.format.max_frame_size;
  f.cuda = cuda;
  f.is_video = gst_structure_has_name(gst_caps_get_structure(check, 0), "video/x-raw");
  if (f.is_video) f.video = vinfo;
  gst_caps_unref(check);
  if (!f.is_video) {
    // Several tensors in one slot: their layout (from the caps) must lie within the frames the
    // producer announced (the core checked those against the slot).
    StreamCaps parsed;
    GstCaps* caps = gst_caps_from_string(header.caps.c_str());
    const bool ok = caps && parse_caps(caps, &parsed, message);
    if (caps) gst_caps_unref(caps);
    if (ok && parsed.tensors.size() > 1) {
      if (tensors_span(parsed.tensors) > f.max_frame_size) {
        *why = FormatRefusal::malformed;
        *message = "the producer's " + std::to_string(parsed.tensors.size()) + " tensors span " +
                   std::to_string(tensors_span(parsed.tensors)) + " bytes, more than its " +
                   std::to_string(f.max_frame_size) + "-byte frames";
        return false;
      }
      f.tensors = std::move(parsed.tensors);
    }
  }
  if (f.cuda && !have_context) {
    *why = FormatRefusal::no_cuda;
    *message =
        "The producer shares CUDA memory, but this process has no usable CUDA device. Run the "
        "consumer where the GPU is visible, or publish with ipc-mode=host.";
    return false;
  }
  if (f.max_frame_size > static_cast<std::uint64_t>(G_MAXINT)) {
    *why = FormatRefusal::too_large;
    *message = "Frames of " + std::to_string(f.max_frame_size) +
               " bytes are larger than cudaipcsrc handles (2 GiB).";
    return false;
  }
  *out = std::move(f);
  return true;
}

GstCaps* offered_caps(const StreamFormat& f) {
  std::string error;
  GstVideoInfo vinfo;
  GstCaps* caps = gst_caps_new_empty();
  if (f.cuda) {
    if (GstCaps* c = caps_from_wire(f.caps_text, f.tensor, true, &vinfo, &error))
      gst_caps_append(caps, c);
  }
  if (GstCaps* c = caps_from_wire(f.caps_text, f.tensor, false, &vinfo, &error))
    gst_caps_append(caps, c);
  return caps;
}

std::uint64_t frame_span(const StreamFormat& f, const TensorDesc& t) {
  std::uint64_t span = t.byte_offset + t.size;
  if (!f.tensors.empty()) span = std::max(span, tensors_span(f.tensors));
  if (f.is_video) {
    const std::uint64_t rows_end = video_rows_end(f.video, t);
    if (rows_end <= f.max_frame_size) span = std::max(span, rows_end);
  }
  return span;
}

}  // namespace cudaipc::gst
