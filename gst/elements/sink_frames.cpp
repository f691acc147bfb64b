#include "elements/sink_frames.h"

#include <algorithm>
#include <cstring>

namespace cudaipc::gst {
namespace {

std::uint32_t frame_flags(GstBuffer* buf) {
  std::uint32_t f = 0;
  if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DISCONT)) f |= kFlagDiscont;
  if (!GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DELTA_UNIT)) f |= kFlagKeyframe;
  if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_GAP)) f |= kFlagGap;
  if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_CORRUPTED)) f |= kFlagCorrupted;
  if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_HEADER)) f |= kFlagHeader;
  if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DROPPABLE)) f |= kFlagDroppable;
  if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_MARKER)) f |= kFlagMarker;
  return f;
}

}  // namespace

bool buffer_layout(const StreamCaps& caps, const std::string& wire_caps, GstBuffer* buf,
                   TensorDesc* tensor, std::uint64_t* bytes, std::string* error) {
  const gsize size = gst_buffer_get_size(buf);
  if (caps.kind == MediaKind::video) {
    if (!video_tensor(caps.video, gst_buffer_get_video_meta(buf), size, tensor, error)) {
      *error = "Buffer layout does not match the caps: " + *error;
      return false;
    }
  } else {
    *tensor = caps.tensor;
    std::uint64_t need = 0;
    for (const TensorDesc& t : caps.tensors) need += t.size;
    if (caps.tensors.empty()) need = tensor->size;
    if (size != need) {
      *error = "Tensor buffer of " + std::to_string(size) + " bytes, but the caps (" + wire_caps +
               ") need " + std::to_string(need);
      return false;
    }
    if (caps.tensors.size() > 1) {
      // One memory per tensor, or one memory of them all packed: nothing else has a meaning.
      const guint n = gst_buffer_n_memory(buf);
      bool sizes_match = n == caps.tensors.size();
      for (guint i = 0; sizes_match && i < n; ++i)
        sizes_match = gst_buffer_peek_memory(buf, i)->size == caps.tensors[i].size;
      if (!sizes_match && n != 1) {
        *error = "Buffer of " + std::to_string(n) + " memories for " +
                 std::to_string(caps.tensors.size()) +
                 " tensors: a memory per tensor, or one holding them all, is needed";
        return false;
      }
      *bytes = tensors_span(caps.tensors);
      return true;
    }
  }
  *bytes = tensor->byte_offset + tensor->size;
  if (caps.kind == MediaKind::video)
    *bytes = std::max<std::uint64_t>(
        *bytes, std::min<std::uint64_t>(video_rows_end(caps.video, *tensor), size));
  return true;
}

TimingRecord timing_of(GstBaseSink* sink, GstBuffer* buf, std::uint64_t entry) {
  TimingRecord t{kTimingMagic, 1, GST_CLOCK_TIME_NONE, 0, entry};
  if (!GST_BUFFER_PTS_IS_VALID(buf)) return t;
  t.running_time =
      gst_segment_to_running_time(&sink->segment, GST_FORMAT_TIME, GST_BUFFER_PTS(buf));
  if (!GST_CLOCK_TIME_IS_VALID(t.running_time)) return t;
  GstClock* clock = gst_element_get_clock(GST_ELEMENT(sink));
  if (!clock) return t;
  GstClockTime base = gst_element_get_base_time(GST_ELEMENT(sink));
  std::int64_t offset = clock_to_monotonic_offset(clock);
  gst_object_unref(clock);
  std::int64_t mono =
      static_cast<std::int64_t>(base + t.running_time + gst_base_sink_get_latency(sink)) + offset;
  t.render_mono_ns = mono > 0 ? static_cast<std::uint64_t>(mono) : 0;
  return t;
}

FrameInfo frame_info(GstBuffer* buf, const TimingRecord& timing) {
  FrameInfo info;
  info.pts = GST_BUFFER_PTS_IS_VALID(buf) ? GST_BUFFER_PTS(buf) : kNoTime;
  info.dts = GST_BUFFER_DTS_IS_VALID(buf) ? GST_BUFFER_DTS(buf) : kNoTime;
  info.duration = GST_BUFFER_DURATION_IS_VALID(buf) ? GST_BUFFER_DURATION(buf) : kNoTime;
  info.flags = frame_flags(buf);
  info.user_meta = &timing;
  info.user_meta_size = sizeof timing;
  return info;
}

namespace {

// Tensor i's bytes from memory i of the buffer (one memory per tensor) or from its place in the
// buffer's one packed memory, to its offset in the slot.
bool copy_tensors(Producer& producer, GstCudaContext* ctx, StreamOrder& order, GstBuffer* buf,
                  const WriteSlot& slot, const std::vector<TensorDesc>& tensors,
                  std::string* error) {
  const bool cuda_channel = producer.memory_kind() == MemoryKind::cuda;
  const bool per_memory = gst_buffer_n_memory(buf) == tensors.size();
  std::uint64_t packed = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorDesc& t = tensors[i];
    GstMemory* mem = gst_buffer_peek_memory(buf, per_memory ? static_cast<guint>(i) : 0);
    const std::uint64_t from = per_memory ? 0 : packed;
    packed += t.size;
    const bool device_src = cuda_channel && gst_is_cuda_memory(mem);
    GstMapInfo map;
    if (!gst_memory_map(
            mem, &map,
            device_src ? static_cast<GstMapFlags>(GST_MAP_READ | GST_MAP_CUDA) : GST_MAP_READ)) {
      *error = "could not map tensor " + std::to_string(i) + "'s memory";
      return false;
    }
    bool ok = from + t.size <= map.size;
    if (!ok) {
      *error = "tensor " + std::to_string(i) + "'s memory is smaller than the tensor";
    } else if (!cuda_channel) {
      std::memcpy(static_cast<std::uint8_t*>(slot.data()) + t.byte_offset, map.data + from, t.size);
    } else if (t.size) {
      auto stream = static_cast<CUstream>(producer.cuda_stream());
      ContextScope scope(ctx);
      ok = (!device_src || order.order_after(mem, stream, error)) &&
           copy_2d(Copy2D{slot.address() + t.byte_offset, true, t.size,
                          reinterpret_cast<std::uintptr_t>(map.data) + from, device_src, t.size,
                          t.size, 1},
                   stream, error) &&
           (!device_src || order.release_to(mem, stream, error));
    }
    gst_memory_unmap(mem, &map);
    if (!ok) return false;
  }
  return true;
}

}  // namespace

bool copy_into_slot(Producer& producer, GstCudaContext* ctx, StreamOrder& order, GstBuffer* buf,
                    const WriteSlot& slot, std::uint64_t bytes,
                    const std::vector<TensorDesc>& tensors, std::string* error) {
  if (tensors.size() > 1) return copy_tensors(producer, ctx, order, buf, slot, tensors, error);
  const bool cuda_channel = producer.memory_kind() == MemoryKind::cuda;
  GstMemory* mem0 = gst_buffer_n_memory(buf) == 1 ? gst_buffer_peek_memory(buf, 0) : nullptr;
  const bool device_src = cuda_channel && mem0 && gst_is_cuda_memory(mem0);
  GstMapInfo map;
  if (!gst_buffer_map(
          buf, &map,
          device_src ? static_cast<GstMapFlags>(GST_MAP_READ | GST_MAP_CUDA) : GST_MAP_READ)) {
    *error = "could not map the input buffer";
    return false;
  }
  bool ok = true;
  if (map.size < bytes) {
    *error = "buffer of " + std::to_string(map.size) + " bytes is smaller than its layout (" +
             std::to_string(bytes) + ")";
    ok = false;
  } else if (!cuda_channel) {
    std::memcpy(slot.data(), map.data, bytes);
  } else {
    auto stream = static_cast<CUstream>(producer.cuda_stream());
    ContextScope scope(ctx);
    ok = (!device_src || order.order_after(mem0, stream, error)) &&
         copy_2d(Copy2D{slot.address(), true, bytes, reinterpret_cast<std::uintptr_t>(map.data),
                        device_src, bytes, bytes, 1},
                 stream, error) &&
         (!device_src || order.release_to(mem0, stream, error));
  }
  gst_buffer_unmap(buf, &map);
  return ok;
}

}  // namespace cudaipc::gst
