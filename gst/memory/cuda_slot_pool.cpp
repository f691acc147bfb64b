// The CUDA slot pool (slot_pool.h): zero copies for CUDA upstream on GStreamer 1.24+. nvcodec's
// elements keep a downstream pool only if it is a GstCudaBufferPool on their context, so this is
// one, with none of its own allocation: a buffer is a free ring slot wrapped as GstCudaMemory,
// lent by the producer, and render() only commits it. When no slot can be lent at once (one is
// lent already, or none is free under policy=drop) it hands out a buffer of an ordinary
// GstCudaBufferPool, which render() copies into a slot as before.
#include <gst/video/video.h>

#include <memory>
#include <mutex>

#include "format/caps_tensor.h"
#include "memory/slot_pool.h"

#if GST_CHECK_VERSION(1, 24, 0)

GST_DEBUG_CATEGORY_EXTERN(cudaipc_slot_pool_debug);
#define GST_CAT_DEFAULT cudaipc_slot_pool_debug

using namespace cudaipc;
using namespace cudaipc::gst;

namespace {

struct CudaPoolState {
  std::shared_ptr<SlotLender> lender;
  GstCudaStream* stream = nullptr;  // the producer's
  std::mutex mu;                    // the config below, set by set_config, read by acquire
  GstVideoInfo video{};             // the caps' default layout, which lent slots take
  bool is_video = false;
  guint size = 0;                     // tensors: their bytes
  GstBufferPool* fallback = nullptr;  // ordinary CUDA memory, when no slot can be lent
};

// The slot set owns the memory: the wrapper frees nothing (the lent slot is the memory's qdata).
void nothing_to_free(gpointer) {}

}  // namespace

typedef struct {
  GstCudaBufferPool parent;
  CudaPoolState* st;
} GstCudaIpcCudaSlotPool;

typedef struct {
  GstCudaBufferPoolClass parent_class;
} GstCudaIpcCudaSlotPoolClass;

G_DEFINE_TYPE(GstCudaIpcCudaSlotPool, gst_cuda_ipc_cuda_slot_pool, GST_TYPE_CUDA_BUFFER_POOL)

static CudaPoolState* state_of(GstBufferPool* pool) {
  return reinterpret_cast<GstCudaIpcCudaSlotPool*>(pool)->st;
}

// GstBufferPool's own implementation, past GstCudaBufferPool's, which would allocate memory of
// its own for the config.
static GstBufferPoolClass* base_class() {
  return GST_BUFFER_POOL_CLASS(g_type_class_peek(GST_TYPE_BUFFER_POOL));
}

static void clear_fallback(CudaPoolState* st) {
  if (!st->fallback) return;
  gst_buffer_pool_set_active(st->fallback, FALSE);
  gst_clear_object(&st->fallback);
}

// The layout lent slots take is the caps' default one (a video meta says so); the fallback pool
// gets the same caps and the producer's stream.
static gboolean cuda_slot_pool_set_config(GstBufferPool* pool, GstStructure* config) {
  CudaPoolState* st = state_of(pool);
  GstCaps* caps = nullptr;
  guint size = 0, min = 0, max = 0;
  if (!gst_buffer_pool_config_get_params(config, &caps, &size, &min, &max) || !caps) return FALSE;
  StreamCaps parsed;
  std::string error;
  if (!parse_caps(caps, &parsed, &error) || !parsed.cuda_memory) {
    GST_WARNING_OBJECT(pool, "refused config %" GST_PTR_FORMAT ": %s", caps,
                       error.empty() ? "not CUDA memory" : error.c_str());
    return FALSE;
  }
  GstBufferPool* fallback =
      gst_cuda_buffer_pool_new(reinterpret_cast<GstCudaBufferPool*>(pool)->context);
  GstStructure* fconfig = gst_buffer_pool_get_config(fallback);
  gst_buffer_pool_config_set_params(fconfig, caps, size, 0, 0);
  gst_buffer_pool_config_add_option(fconfig, GST_BUFFER_POOL_OPTION_VIDEO_META);
  gst_buffer_pool_config_set_cuda_stream(fconfig, st->stream);
  if (!gst_buffer_pool_set_config(fallback, fconfig)) {
    gst_object_unref(fallback);
    return FALSE;
  }
  {
    std::lock_guard<std::mutex> lock(st->mu);
    clear_fallback(st);
    st->fallback = fallback;
    st->is_video = parsed.kind == MediaKind::video;
    st->video = parsed.video;
    st->size = st->is_video ? static_cast<guint>(GST_VIDEO_INFO_SIZE(&parsed.video))
                            : static_cast<guint>(parsed.tensor.size);
  }
  GST_DEBUG_OBJECT(pool, "configured for %" GST_PTR_FORMAT, caps);
  // Nothing to preallocate: every buffer is a fresh lease of a ring slot. Upstream reads the
  // stream from the config (and forwards it upstream in its turn).
  gst_buffer_pool_config_set_params(config, caps, st->size, 0, max);
  gst_buffer_pool_config_set_cuda_stream(config, st->stream);
  return base_class()->set_config(pool, config);
}

static gboolean cuda_slot_pool_start(GstBufferPool* pool) {
  CudaPoolState* st = state_of(pool);
  std::lock_guard<std::mutex> lock(st->mu);
  return st->fallback && gst_buffer_pool_set_active(st->fallback, TRUE) &&
         base_class()->start(pool);
}

static gboolean cuda_slot_pool_stop(GstBufferPool* pool) {
  CudaPoolState* st = state_of(pool);
  {
    std::lock_guard<std::mutex> lock(st->mu);
    if (st->fallback) gst_buffer_pool_set_active(st->fallback, FALSE);
  }
  return base_class()->stop(pool);
}

static GstFlowReturn cuda_slot_pool_acquire(GstBufferPool* pool, GstBuffer** out,
                                            GstBufferPoolAcquireParams* params) {
  namespace d = slot_pool_detail;
  CudaPoolState* st = state_of(pool);
  GstCudaContext* ctx = reinterpret_cast<GstCudaBufferPool*>(pool)->context;
  GstVideoInfo info;
  bool is_video;
  GstBufferPool* fallback;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    info = st->video;
    is_video = st->is_video;
    fallback = st->fallback ? GST_BUFFER_POOL(gst_object_ref(st->fallback)) : nullptr;
  }
  if (!fallback) return GST_FLOW_FLUSHING;  // not configured
  const guint size = is_video ? static_cast<guint>(GST_VIDEO_INFO_SIZE(&info)) : st->size;
  bool flushing = false;
  // May wait for a free slot (policy=block), as render() would.
  std::unique_ptr<d::LentSlot> lent = d::lend(*st->lender, size, &flushing);
  GstFlowReturn ret = GST_FLOW_OK;
  if (flushing) {
    ret = GST_FLOW_FLUSHING;
  } else if (!lent) {
    // Its buffers return to it when freed; render() copies this one into a slot.
    ret = gst_buffer_pool_acquire_buffer(fallback, out, params);
    if (ret == GST_FLOW_OK) d::track(*out, st->lender);
  } else {
    const GstVideoInfo layout = info;
    if (!is_video) {
      gst_video_info_set_format(&info, GST_VIDEO_FORMAT_GRAY8, size, 1);
      GST_VIDEO_INFO_PLANE_STRIDE(&info, 0) = static_cast<gint>(size);
    }
    GST_VIDEO_INFO_SIZE(&info) = size;
    GstMemory* mem = gst_cuda_allocator_alloc_wrapped(
        nullptr, ctx, st->stream, &info, static_cast<CUdeviceptr>(lent->slot.address()), nullptr,
        nothing_to_free);
    if (mem) {
      d::attach(mem, std::move(lent));
      *out = d::slot_buffer(mem, is_video, layout);
      d::track(*out, st->lender);
    } else {
      ret = GST_FLOW_ERROR;  // `lent` goes back unwritten (aborted)
    }
  }
  gst_object_unref(fallback);
  return ret;
}

// Never called (acquire makes every buffer); GstCudaBufferPool's would use an allocator this pool
// does not have.
static GstFlowReturn cuda_slot_pool_alloc(GstBufferPool*, GstBuffer**,
                                          GstBufferPoolAcquireParams*) {
  return GST_FLOW_NOT_SUPPORTED;
}

// Slot buffers are never recycled (each is a new lease); fallback ones go back to their own pool.
static void cuda_slot_pool_release(GstBufferPool*, GstBuffer* buffer) {
  gst_buffer_unref(buffer);
}

static void cuda_slot_pool_flush_start(GstBufferPool* pool) {
  state_of(pool)->lender->producer().interrupt();
}

static void cuda_slot_pool_flush_stop(GstBufferPool* pool) {
  state_of(pool)->lender->producer().clear_interrupt();
}

static void cuda_slot_pool_finalize(GObject* object) {
  auto* self = reinterpret_cast<GstCudaIpcCudaSlotPool*>(object);
  std::unique_ptr<CudaPoolState> reclaim(self->st);
  self->st = nullptr;
  clear_fallback(reclaim.get());
  if (reclaim->stream) gst_cuda_stream_unref(reclaim->stream);
  G_OBJECT_CLASS(gst_cuda_ipc_cuda_slot_pool_parent_class)->finalize(object);
}

static void gst_cuda_ipc_cuda_slot_pool_init(GstCudaIpcCudaSlotPool* self) {
  self->st = std::make_unique<CudaPoolState>().release();  // reclaimed in finalize
}

static void gst_cuda_ipc_cuda_slot_pool_class_init(GstCudaIpcCudaSlotPoolClass* klass) {
  slot_pool_detail::debug_init();
  G_OBJECT_CLASS(klass)->finalize = cuda_slot_pool_finalize;
  GstBufferPoolClass* pool_class = GST_BUFFER_POOL_CLASS(klass);
  pool_class->set_config = cuda_slot_pool_set_config;
  pool_class->start = cuda_slot_pool_start;
  pool_class->stop = cuda_slot_pool_stop;
  pool_class->acquire_buffer = cuda_slot_pool_acquire;
  pool_class->alloc_buffer = cuda_slot_pool_alloc;
  pool_class->release_buffer = cuda_slot_pool_release;
  pool_class->flush_start = cuda_slot_pool_flush_start;
  pool_class->flush_stop = cuda_slot_pool_flush_stop;
}

namespace cudaipc::gst {

GstBufferPool* cuda_slot_pool_new(std::shared_ptr<SlotLender> lender, GstCudaContext* ctx,
                                  GstCudaStream* stream) {
  auto* self = static_cast<GstCudaIpcCudaSlotPool*>(
      g_object_new(gst_cuda_ipc_cuda_slot_pool_get_type(), nullptr));
  gst_object_ref_sink(self);
  // GstCudaBufferPool's public field, which nvcodec compares with its own context.
  self->parent.context = GST_CUDA_CONTEXT(gst_object_ref(ctx));
  self->st->lender = std::move(lender);
  self->st->stream = gst_cuda_stream_ref(stream);
  return GST_BUFFER_POOL(self);
}

}  // namespace cudaipc::gst

#endif  // GST_CHECK_VERSION(1, 24, 0)
