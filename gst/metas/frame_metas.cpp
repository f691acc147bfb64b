#include "metas/frame_metas.h"

#include <algorithm>

#include "format/time_sync.h"
#include "metas/tensor_meta.h"

namespace cudaipc::gst {
namespace {

// A meta stays on a pooled buffer across its reuses; on any other buffer the flag changes nothing.
void keep(GstMeta* meta) {
  if (meta) meta->flags = static_cast<GstMetaFlags>(meta->flags | GST_META_FLAG_POOLED);
}

// The reference timestamp metas of `buf` whose caps are `caps` (the static caps of time_sync.h,
// compared by pointer: cheaper than gst_buffer_get_reference_timestamp_meta's caps subset test).
GstReferenceTimestampMeta* find_reference(GstBuffer* buf, GstCaps* caps) {
  gpointer state = nullptr;
  while (GstMeta* m =
             gst_buffer_iterate_meta_filtered(buf, &state, GST_REFERENCE_TIMESTAMP_META_API_TYPE)) {
    auto* r = reinterpret_cast<GstReferenceTimestampMeta*>(m);
    if (r->reference == caps) return r;
  }
  return nullptr;
}

void set_reference(GstBuffer* buf, GstCaps* caps, std::uint64_t t, bool present) {
  GstReferenceTimestampMeta* r = find_reference(buf, caps);
  if (!present) {
    if (r) gst_buffer_remove_meta(buf, &r->parent);
    return;
  }
  if (r) {
    r->timestamp = t;
    return;
  }
  r = gst_buffer_add_reference_timestamp_meta(buf, caps, t, GST_CLOCK_TIME_NONE);
  keep(r ? &r->parent : nullptr);
}

}  // namespace

void set_video_meta(GstBuffer* buf, const GstVideoInfo& video, const TensorDesc& tensor) {
  gsize offsets[GST_VIDEO_MAX_PLANES] = {};
  gint strides[GST_VIDEO_MAX_PLANES] = {};
  const std::uint32_t planes = std::min<std::uint32_t>(tensor.num_planes, GST_VIDEO_MAX_PLANES);
  for (std::uint32_t p = 0; p < planes; ++p) {
    offsets[p] = tensor.planes[p].offset;
    strides[p] = static_cast<gint>(tensor.planes[p].pitch);
  }
  if (GstVideoMeta* m = gst_buffer_get_video_meta(buf)) {
    m->format = GST_VIDEO_INFO_FORMAT(&video);
    m->width = GST_VIDEO_INFO_WIDTH(&video);
    m->height = GST_VIDEO_INFO_HEIGHT(&video);
    m->n_planes = planes;
    std::copy(offsets, offsets + GST_VIDEO_MAX_PLANES, m->offset);
    std::copy(strides, strides + GST_VIDEO_MAX_PLANES, m->stride);
    return;
  }
  GstVideoMeta* m = gst_buffer_add_video_meta_full(
      buf, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_INFO_FORMAT(&video), GST_VIDEO_INFO_WIDTH(&video),
      GST_VIDEO_INFO_HEIGHT(&video), planes, offsets, strides);
  keep(m ? &m->meta : nullptr);
}

void set_tensor_meta(GstBuffer* buf, const TensorDesc& tensor, std::uintptr_t data, int device_id,
                     std::uint64_t seq) {
  auto* m =
      reinterpret_cast<GstCudaIpcTensorMeta*>(gst_buffer_get_meta(buf, tensor_meta_api_type()));
  if (!m) {
    m = add_tensor_meta(buf);
    if (!m) return;
    keep(&m->meta);
  }
  fill_tensor_meta(m, tensor, data, device_id, seq);
}

void add_tensor_meta_for(GstBuffer* buf, const TensorDesc& tensor, std::uintptr_t data,
                         int device_id, std::uint64_t seq) {
  if (GstCudaIpcTensorMeta* m = add_tensor_meta(buf))
    fill_tensor_meta(m, tensor, data, device_id, seq);
}

void set_reference_times(GstBuffer* buf, const FrameStamps& s) {
  set_reference(buf, pts_reference_caps(), s.producer_pts, s.producer_pts != kNoTime);
  set_reference(buf, publish_reference_caps(), s.publish_ns, true);
  set_reference(buf, chain_reference_caps(), s.chain_ns, s.chain_ns != 0);
  set_reference(buf, acquire_reference_caps(), s.acquire_ns, true);
}

void set_frame_flags(GstBuffer* buf, std::uint32_t f) {
  if (!(f & kFlagKeyframe)) GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_DELTA_UNIT);
  if (f & kFlagGap) GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_GAP);
  if (f & kFlagCorrupted) GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_CORRUPTED);
  if (f & kFlagDroppable) GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_DROPPABLE);
  if (f & kFlagMarker) GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_MARKER);
  if (f & kFlagHeader) GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_HEADER);
  if (f & kFlagDiscont) GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_DISCONT);
}

}  // namespace cudaipc::gst
