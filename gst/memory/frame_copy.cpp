#include "memory/frame_copy.h"

#include <algorithm>

#include "format/caps_tensor.h"

namespace cudaipc::gst {
namespace {

// The pool buffer's planes (its GstCudaMemory's layout) as the copy's tensor description.
bool pool_layout(GstBuffer* buf, const StreamFormat& f, const TensorDesc& frame_tensor,
                 TensorDesc* out, std::string* error) {
  *out = frame_tensor;
  if (!f.is_video) {
    out->byte_offset = 0;
    // The pool's row may be padded past the tensor: downstream sees exactly its bytes.
    gst_buffer_resize(buf, 0, static_cast<gssize>(frame_tensor.size));
    return true;
  }
  GstVideoInfo dst = reinterpret_cast<GstCudaMemory*>(gst_buffer_peek_memory(buf, 0))->info;
  if (!gst_buffer_get_video_meta(buf))
    gst_buffer_add_video_meta_full(buf, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_INFO_FORMAT(&dst),
                                   GST_VIDEO_INFO_WIDTH(&dst), GST_VIDEO_INFO_HEIGHT(&dst),
                                   GST_VIDEO_INFO_N_PLANES(&dst), dst.offset, dst.stride);
  if (!video_tensor(dst, gst_buffer_get_video_meta(buf), gst_buffer_get_size(buf), out, error)) {
    *error = "a CUDA copy buffer has an unusable layout: " + *error;
    return false;
  }
  return true;
}

}  // namespace

GstBufferPool* cuda_copy_pool_new(GstCudaContext* ctx, GstCaps* caps, const StreamFormat& f,
                                  ElementStream& stream) {
  GstCaps* pool_caps;
  if (f.is_video) {
    pool_caps = gst_caps_copy(caps);
  } else {
    const auto pixels = static_cast<gint>((f.tensor.size + 3) / 4);
    pool_caps = gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "RGBA", "width",
                                    G_TYPE_INT, pixels, "height", G_TYPE_INT, 1, nullptr);
    gst_caps_set_features(pool_caps, 0, gst_caps_features_new(kCudaMemoryFeature, nullptr));
  }
  GstVideoInfo info;
  if (!gst_video_info_from_caps(&info, pool_caps)) {
    gst_caps_unref(pool_caps);
    return nullptr;
  }
  GstBufferPool* pool = gst_cuda_buffer_pool_new(ctx);
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, pool_caps, GST_VIDEO_INFO_SIZE(&info), 2, 0);
  gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
#if GST_CHECK_VERSION(1, 24, 0)
  if (stream.gst_stream()) gst_buffer_pool_config_set_cuda_stream(config, stream.gst_stream());
#else
  (void)stream;
#endif
  gst_caps_unref(pool_caps);
  if (!gst_buffer_pool_set_config(pool, config) || !gst_buffer_pool_set_active(pool, TRUE)) {
    gst_object_unref(pool);
    return nullptr;
  }
  return pool;
}

GstBufferPool* system_pool_new(std::uint64_t bytes) {
  GstBufferPool* pool = gst_buffer_pool_new();
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, nullptr, static_cast<guint>(bytes), 0, 0);
  if (!gst_buffer_pool_set_config(pool, config) || !gst_buffer_pool_set_active(pool, TRUE)) {
    gst_object_unref(pool);
    return nullptr;
  }
  return pool;
}

bool copy_to_cuda(GstBufferPool* pool, const Frame& frame, const StreamFormat& f, CUstream stream,
                  StreamOrder& order, Copied* out, std::string* error) {
  GstBuffer* buf = nullptr;
  if (gst_buffer_pool_acquire_buffer(pool, &buf, nullptr) != GST_FLOW_OK) {
    *error = "no CUDA buffer available for a copy";
    return false;
  }
  GstMemory* mem = gst_buffer_peek_memory(buf, 0);
  const GstVideoInfo& dst = reinterpret_cast<GstCudaMemory*>(mem)->info;
  GstMapInfo map;
  if (!gst_memory_map(mem, &map, static_cast<GstMapFlags>(GST_MAP_WRITE | GST_MAP_CUDA))) {
    gst_buffer_unref(buf);
    *error = "could not map a CUDA buffer for writing";
    return false;
  }
  const TensorDesc& t = frame.desc().tensor;
  const auto base = reinterpret_cast<std::uintptr_t>(map.data);
#if !GST_CHECK_VERSION(1, 24, 0)
  // 1.22 memory has no stream: its users queue on the legacy default stream or on blocking
  // streams it orders. The buffer may still be read there, and must be complete for them.
  bool ok = order.order(stream, CU_STREAM_LEGACY, error);
#else
  (void)order;
  bool ok = true;
#endif
  if (f.is_video) {
    for (std::uint32_t p = 0; ok && p < t.num_planes; ++p) {
      gint comp[GST_VIDEO_MAX_COMPONENTS];
      gst_video_format_info_component(f.video.finfo, p, comp);
      const auto rows = static_cast<std::uint64_t>(GST_VIDEO_INFO_COMP_HEIGHT(&f.video, comp[0]));
      const auto dpitch = static_cast<std::uint64_t>(GST_VIDEO_INFO_PLANE_STRIDE(&dst, p));
      const std::uint64_t width = std::min<std::uint64_t>(t.planes[p].pitch, dpitch);
      ok = copy_2d(
          Copy2D{base + GST_VIDEO_INFO_PLANE_OFFSET(&dst, p), true, dpitch,
                 frame.slot_address() + t.planes[p].offset, true, t.planes[p].pitch, width, rows},
          stream, error);
    }
  } else if (ok) {
    ok = copy_2d(
        Copy2D{base, true, t.size, frame.slot_address() + t.byte_offset, true, t.size, t.size, 1},
        stream, error);
  }
#if !GST_CHECK_VERSION(1, 24, 0)
  ok = ok && order.order(CU_STREAM_LEGACY, stream, error);
#else
  // Downstream orders its reads after the memory's stream (ours) on the GPU.
  if (ok) GST_MINI_OBJECT_FLAG_SET(mem, GST_CUDA_MEMORY_TRANSFER_NEED_SYNC);
#endif
  gst_memory_unmap(mem, &map);
  if (!ok || !pool_layout(buf, f, t, &out->tensor, error)) {
    gst_buffer_unref(buf);
    return false;
  }
  out->buf = buf;
  out->data = base + out->tensor.byte_offset;
  return true;
}

bool copy_to_system(GstBufferPool* pool, const Frame& frame, std::uint64_t span, bool cuda,
                    CUstream stream, Copied* out, std::string* error) {
  GstBuffer* buf = nullptr;
  if (gst_buffer_pool_acquire_buffer(pool, &buf, nullptr) != GST_FLOW_OK) {
    *error = "no buffer available for a copy";
    return false;
  }
  GstMapInfo map;
  if (!gst_buffer_map(buf, &map, GST_MAP_WRITE)) {
    gst_buffer_unref(buf);
    *error = "could not map a buffer for writing";
    return false;
  }
  bool ok = true;
  if (!cuda) {
    std::copy_n(reinterpret_cast<const std::uint8_t*>(frame.slot_address()), span, map.data);
  } else {
    // Into pageable memory the copy returns once its bytes are here, after the frame's own wait
    // on the stream: the CPU must have them before it pushes.
    ok = copy_2d(Copy2D{reinterpret_cast<std::uintptr_t>(map.data), false, span,
                        frame.slot_address(), true, span, span, 1},
                 stream, error) &&
         cuda_check(CuStreamSynchronize(stream), "cuStreamSynchronize", error);
  }
  out->data = reinterpret_cast<std::uintptr_t>(map.data) + frame.desc().tensor.byte_offset;
  gst_buffer_unmap(buf, &map);
  if (!ok) {
    gst_buffer_unref(buf);
    return false;
  }
  out->buf = buf;
  out->tensor = frame.desc().tensor;
  return true;
}

}  // namespace cudaipc::gst
