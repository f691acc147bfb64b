#include "memory/tensor_split.h"

namespace cudaipc::gst {

GstBuffer* split_tensors(GstBuffer* whole, const std::vector<TensorDesc>& tensors) {
  if (gst_buffer_n_memory(whole) != 1) return whole;
  GstMemory* mem = gst_buffer_peek_memory(whole, 0);
  GstBuffer* out = gst_buffer_new();
  for (const TensorDesc& t : tensors) {
    GstMemory* part =
        gst_memory_share(mem, static_cast<gssize>(t.byte_offset), static_cast<gssize>(t.size));
    if (!part) {  // an allocator without share: the frame stays one memory
      gst_buffer_unref(out);
      return whole;
    }
    gst_buffer_append_memory(out, part);
  }
  gst_buffer_copy_into(out, whole, GST_BUFFER_COPY_METADATA, 0, -1);
  gst_buffer_add_parent_buffer_meta(out, whole);
  gst_buffer_unref(whole);
  return out;
}

}  // namespace cudaipc::gst
