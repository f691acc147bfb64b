#include "memory/frame_pool.h"

#include <array>
#include <mutex>

#include "metas/frame_metas.h"

namespace cudaipc::gst {
namespace {

// Marks acquire parameters that name a slot in `start` (private flags start at FLAG_LAST).
constexpr auto kSlotFlag =
    static_cast<GstBufferPoolAcquireFlags>(GST_BUFFER_POOL_ACQUIRE_FLAG_LAST);

struct Entry {
  GstBuffer* buf = nullptr;  // ours while not out; made on the slot's first frame
  Frame frame;               // the frame the buffer holds while out
  bool out = false;
};

struct PoolState {
  FrameLayout layout;
  std::mutex mu;  // entries: taken by the streaming thread, returned from any thread
  std::array<Entry, kMaxSlots> entries;
};

#if GST_CHECK_VERSION(1, 24, 0)
// The slot set owns the memory: the wrapper frees nothing.
void nothing_to_free(gpointer) {}

// How a slot's bytes look to GstCudaMemory: the video layout with the slot's planes, or a row of
// bytes for tensors.
GstVideoInfo slot_video_info(const FrameLayout& l) {
  GstVideoInfo info;
  if (l.is_video) {
    info = l.video;
    for (std::uint32_t p = 0; p < l.tensor.num_planes && p < GST_VIDEO_MAX_PLANES; ++p) {
      GST_VIDEO_INFO_PLANE_OFFSET(&info, p) = l.tensor.planes[p].offset;
      GST_VIDEO_INFO_PLANE_STRIDE(&info, p) = static_cast<gint>(l.tensor.planes[p].pitch);
    }
  } else {
    gst_video_info_set_format(&info, GST_VIDEO_FORMAT_GRAY8, static_cast<guint>(l.span), 1);
    GST_VIDEO_INFO_PLANE_STRIDE(&info, 0) = static_cast<gint>(l.span);
  }
  GST_VIDEO_INFO_SIZE(&info) = l.span;
  return info;
}
#endif

// A buffer wrapping the slot at `address`, with the layout's video meta; nullptr on failure.
GstBuffer* wrap_slot(const FrameLayout& l, std::uintptr_t address) {
  GstMemory* mem = nullptr;
  if (!l.context) {
    mem = gst_memory_new_wrapped(GST_MEMORY_FLAG_READONLY, reinterpret_cast<gpointer>(address),
                                 l.span, 0, l.span, nullptr, nullptr);
  } else {
#if GST_CHECK_VERSION(1, 24, 0)
    const GstVideoInfo info = slot_video_info(l);
    mem = gst_cuda_allocator_alloc_wrapped(nullptr, l.context, l.stream, &info,
                                           static_cast<CUdeviceptr>(address), nullptr,
                                           nothing_to_free);
    if (mem) GST_MINI_OBJECT_FLAG_SET(mem, GST_MEMORY_FLAG_READONLY);
#endif
  }
  if (!mem) return nullptr;
  GstBuffer* buf = gst_buffer_new();
  gst_buffer_append_memory(buf, mem);
  // Set by the append; left set, the pool would take the buffer for changed and drop it.
  GST_BUFFER_FLAG_UNSET(buf, GST_BUFFER_FLAG_TAG_MEMORY);
  if (l.is_video) set_video_meta(buf, l.video, l.tensor);
  return buf;
}

}  // namespace
}  // namespace cudaipc::gst

using namespace cudaipc;
using namespace cudaipc::gst;

typedef struct {
  GstBufferPool parent;
  PoolState* st;
} GstCudaIpcFramePool;

typedef struct {
  GstBufferPoolClass parent_class;
} GstCudaIpcFramePoolClass;

G_DEFINE_TYPE(GstCudaIpcFramePool, gst_cuda_ipc_frame_pool, GST_TYPE_BUFFER_POOL)

static PoolState* state_of(GstBufferPool* pool) {
  return reinterpret_cast<GstCudaIpcFramePool*>(pool)->st;
}

// Hands out the buffer of the slot named in params->start.
static GstFlowReturn frame_pool_acquire(GstBufferPool* pool, GstBuffer** out,
                                        GstBufferPoolAcquireParams* params) {
  PoolState* st = state_of(pool);
  if (!params || !(params->flags & kSlotFlag) || params->start >= kMaxSlots)
    return GST_FLOW_NOT_SUPPORTED;
  std::lock_guard<std::mutex> lock(st->mu);
  Entry& e = st->entries[params->start];
  if (e.out) return GST_FLOW_NOT_SUPPORTED;
  if (!e.buf) return GST_FLOW_ERROR;  // frame_pool_take makes it first
  e.out = true;
  *out = e.buf;
  return GST_FLOW_OK;
}

// The buffer is back: downstream is done with it, and so the frame's lease ends. A buffer that
// came back changed (other memory) is dropped; the slot's next frame gets a fresh one.
static void frame_pool_release(GstBufferPool* pool, GstBuffer* buf) {
  PoolState* st = state_of(pool);
  Frame done;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    for (Entry& e : st->entries) {
      if (e.buf != buf) continue;
      done = std::move(e.frame);
      e.out = false;
      if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_TAG_MEMORY) || gst_buffer_n_memory(buf) != 1)
        e.buf = nullptr;
      else
        buf = nullptr;
      break;
    }
  }
  if (buf) gst_buffer_unref(buf);
  // `done` goes here, outside the lock: its release may reach the GPU driver.
}

static void frame_pool_finalize(GObject* object) {
  auto* self = reinterpret_cast<GstCudaIpcFramePool*>(object);
  std::unique_ptr<PoolState> reclaim(self->st);
  self->st = nullptr;
  for (Entry& e : reclaim->entries)
    if (e.buf) gst_buffer_unref(e.buf);  // every buffer is back: each one out held the pool
  GstCudaContext* ctx = reclaim->layout.context;
#if GST_CHECK_VERSION(1, 24, 0)
  GstCudaStream* stream = reclaim->layout.stream;
#endif
  // The slot set's import (and what it drains on its way) uses the CUDA context, which the
  // source may have let go already: it goes while our reference keeps the context alive.
  reclaim.reset();
#if GST_CHECK_VERSION(1, 24, 0)
  if (stream) gst_cuda_stream_unref(stream);
#endif
  if (ctx) gst_object_unref(ctx);
  G_OBJECT_CLASS(gst_cuda_ipc_frame_pool_parent_class)->finalize(object);
}

static void gst_cuda_ipc_frame_pool_init(GstCudaIpcFramePool* self) {
  self->st = std::make_unique<PoolState>().release();  // reclaimed in finalize
}

static void gst_cuda_ipc_frame_pool_class_init(GstCudaIpcFramePoolClass* klass) {
  G_OBJECT_CLASS(klass)->finalize = frame_pool_finalize;
  GstBufferPoolClass* pool_class = GST_BUFFER_POOL_CLASS(klass);
  pool_class->acquire_buffer = frame_pool_acquire;
  pool_class->release_buffer = frame_pool_release;
}

namespace cudaipc::gst {

GstBufferPool* frame_pool_new(const FrameLayout& layout) {
  auto* self =
      static_cast<GstCudaIpcFramePool*>(g_object_new(gst_cuda_ipc_frame_pool_get_type(), nullptr));
  gst_object_ref_sink(self);
  GstBufferPool* pool = GST_BUFFER_POOL(self);
  self->st->layout = layout;
  if (layout.context) gst_object_ref(layout.context);
#if GST_CHECK_VERSION(1, 24, 0)
  if (layout.stream) gst_cuda_stream_ref(layout.stream);
#endif
  // Buffers are made per slot on demand (frame_pool_take), none up front.
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, nullptr, static_cast<guint>(layout.span), 0, 0);
  if (!gst_buffer_pool_set_config(pool, config) || !gst_buffer_pool_set_active(pool, TRUE)) {
    gst_object_unref(pool);
    return nullptr;
  }
  return pool;
}

bool frame_pool_fits(GstBufferPool* pool, const Frame& frame, const TensorDesc& tensor,
                     std::uint64_t span) {
  const FrameLayout& l = state_of(pool)->layout;
  return frame.slot() < kMaxSlots && frame.slot_memory() == l.slot_memory && span == l.span &&
         tensor == l.tensor;
}

GstBuffer* frame_pool_take(GstBufferPool* pool, Frame& frame) {
  PoolState* st = state_of(pool);
  const std::uint32_t slot = frame.slot();
  if (slot >= kMaxSlots) return nullptr;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    Entry& e = st->entries[slot];
    if (!e.buf && !e.out) e.buf = wrap_slot(st->layout, frame.slot_address());
    if (!e.buf) return nullptr;
  }
  GstBufferPoolAcquireParams params{};
  params.start = slot;
  params.flags = kSlotFlag;
  GstBuffer* buf = nullptr;
  if (gst_buffer_pool_acquire_buffer(pool, &buf, &params) != GST_FLOW_OK) return nullptr;
  std::lock_guard<std::mutex> lock(st->mu);
  st->entries[slot].frame = std::move(frame);
  return buf;
}

}  // namespace cudaipc::gst
