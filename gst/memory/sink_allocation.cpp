#include "memory/sink_allocation.h"

namespace cudaipc::gst {

bool offer_slot_pool(GstQuery* query, GstCaps* caps, guint bytes,
                     std::shared_ptr<SlotLender> lender, GstCudaContext* ctx,
                     ElementStream& stream) {
  GstBufferPool* pool = nullptr;
  if (!ctx) {
    pool = slot_pool_new(std::move(lender));
  } else {
#if GST_CHECK_VERSION(1, 24, 0)
    if (stream.gst_stream()) pool = cuda_slot_pool_new(std::move(lender), ctx, stream.gst_stream());
#else
    (void)stream;
#endif
  }
  if (!pool) return false;
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, bytes, 0, 0);
  gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
  const bool ok = gst_buffer_pool_set_config(pool, config);
  if (ok) gst_query_add_allocation_pool(query, pool, bytes, 0, 0);
  gst_object_unref(pool);
  return ok;
}

namespace {

// A GstCudaBufferPool on `ctx` configured for `caps`, null when it refused; *size: its buffers'
// size, pitched as that pool allocates them.
GstBufferPool* configured_cuda_pool(GstCaps* caps, const StreamCaps& parsed, GstCudaContext* ctx,
                                    guint* size) {
  if (parsed.kind != MediaKind::video && parsed.tensor.size > G_MAXUINT) return nullptr;
  *size = parsed.kind == MediaKind::video ? GST_VIDEO_INFO_SIZE(&parsed.video)
                                          : static_cast<guint>(parsed.tensor.size);
  GstBufferPool* pool = gst_cuda_buffer_pool_new(ctx);
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, *size, 0, 0);
  gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
  if (!gst_buffer_pool_set_config(pool, config)) {
    gst_object_unref(pool);
    return nullptr;
  }
  config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_get_params(config, nullptr, size, nullptr, nullptr);
  gst_structure_free(config);
  return pool;
}

}  // namespace

void offer_cuda_pool(GstQuery* query, GstCaps* caps, const StreamCaps& parsed,
                     GstCudaContext* ctx) {
  guint size = 0;
  GstBufferPool* pool = configured_cuda_pool(caps, parsed, ctx, &size);
  if (!pool) return;
  gst_query_add_allocation_pool(query, pool, size, 0, 0);
  gst_object_unref(pool);
}

guint cuda_pool_size(GstCaps* caps, const StreamCaps& parsed, GstCudaContext* ctx) {
  guint size = 0;
  GstBufferPool* pool = configured_cuda_pool(caps, parsed, ctx, &size);
  if (!pool) return 0;
  gst_object_unref(pool);
  return size;
}

}  // namespace cudaipc::gst
