#include "memory/slot_pool.h"

#include <mutex>
#include <string>

#include "cudaipc/error.hpp"
#include "format/caps_tensor.h"

GST_DEBUG_CATEGORY(cudaipc_slot_pool_debug);
#define GST_CAT_DEFAULT cudaipc_slot_pool_debug

namespace cudaipc::gst {
namespace {

GQuark slot_quark() {
  static GQuark q = g_quark_from_static_string("cudaipc-write-slot");
  return q;
}

using slot_pool_detail::LentSlot;

void free_lent(gpointer data) {
  std::unique_ptr<LentSlot> reclaim(static_cast<LentSlot*>(data));
}

GQuark in_flight_quark() {
  static GQuark q = g_quark_from_static_string("cudaipc-in-flight");
  return q;
}

// Counts a pool buffer in flight until render() is done with it or it is freed unrendered.
struct InFlight {
  std::shared_ptr<SlotLender> lender;
  std::atomic<bool> finished{false};
  void finish() {
    if (!finished.exchange(true)) lender->done();
  }
};

void free_in_flight(gpointer data) {
  std::unique_ptr<InFlight> token(static_cast<InFlight*>(data));
  token->finish();
}

}  // namespace

namespace slot_pool_detail {

void debug_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    GST_DEBUG_CATEGORY_INIT(cudaipc_slot_pool_debug, "cudaipcslotpool", 0,
                            "cudaipcsink's slot pools: slots lent to upstream");
  });
}

std::unique_ptr<LentSlot> lend(SlotLender& lender, std::uint64_t size, bool* flushing) {
  *flushing = false;
  if (lender.closed() || !lender.idle()) {
    GST_TRACE("no slot lent: %s", lender.closed() ? "the sink stopped" : "a buffer is in flight");
    return nullptr;
  }
  PublishStatus status = PublishStatus::published;
  auto lent = std::make_unique<LentSlot>();
  lent->producer = lender.shared();
  try {
    lent->slot = lender.begin(&status);
  } catch (const Error& e) {
    // A slot is already lent (upstream holds two buffers at once) or no format yet: copy instead.
    GST_TRACE("no slot lent: %s", e.what());
    return nullptr;
  }
  *flushing = status == PublishStatus::interrupted;
  if (!lent->slot || lent->slot.capacity() < size) {
    GST_TRACE("no slot lent: %s", lent->slot ? "slots too small" : "none free");
    return nullptr;
  }
  try {
    lent->hold = lent->producer->hold(lent->slot);
  } catch (const Error& e) {
    GST_WARNING("no slot lent: %s", e.what());  // never: the slot was free to borrow
    return nullptr;
  }
  GST_TRACE("slot %u lent", lent->slot.index());
  return lent;
}

void attach(GstMemory* mem, std::unique_ptr<LentSlot> lent) {
  gst_mini_object_set_qdata(GST_MINI_OBJECT(mem), slot_quark(), lent.release(), free_lent);
}

void track(GstBuffer* buf, const std::shared_ptr<SlotLender>& lender) {
  auto token = std::make_unique<InFlight>();
  token->lender = lender;
  lender->sent();
  // Replaces (and so finishes) the token of an earlier round when `buf` is a pooled fallback.
  gst_mini_object_set_qdata(GST_MINI_OBJECT(buf), in_flight_quark(), token.release(),
                            free_in_flight);
}

GstBuffer* slot_buffer(GstMemory* mem, bool is_video, const GstVideoInfo& layout) {
  GstBuffer* buf = gst_buffer_new();
  gst_buffer_append_memory(buf, mem);
  GstVideoInfo video = layout;  // 1.22's gst_buffer_add_video_meta_full takes non-const arrays
  if (is_video)
    gst_buffer_add_video_meta_full(buf, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_INFO_FORMAT(&video),
                                   GST_VIDEO_INFO_WIDTH(&video), GST_VIDEO_INFO_HEIGHT(&video),
                                   GST_VIDEO_INFO_N_PLANES(&video), video.offset, video.stride);
  return buf;
}

}  // namespace slot_pool_detail

}  // namespace cudaipc::gst

using namespace cudaipc;
using namespace cudaipc::gst;

// The C side of the pool: GObject boilerplate around the C++ state.
struct SlotPoolState {
  std::shared_ptr<SlotLender> lender;
  std::mutex mu;
  bool is_video = false;
  GstVideoInfo video{};
  guint size = 0;
};

typedef struct {
  GstBufferPool parent;
  SlotPoolState* st;
} GstCudaIpcSlotPool;

typedef struct {
  GstBufferPoolClass parent_class;
} GstCudaIpcSlotPoolClass;

G_DEFINE_TYPE(GstCudaIpcSlotPool, gst_cuda_ipc_slot_pool, GST_TYPE_BUFFER_POOL)

static const gchar** slot_pool_get_options(GstBufferPool*) {
  static const gchar* options[] = {GST_BUFFER_POOL_OPTION_VIDEO_META, nullptr};
  return options;
}

static gboolean slot_pool_set_config(GstBufferPool* pool, GstStructure* config) {
  auto* self = reinterpret_cast<GstCudaIpcSlotPool*>(pool);
  GstCaps* caps = nullptr;
  guint size = 0, min = 0, max = 0;
  (void)min;
  if (!gst_buffer_pool_config_get_params(config, &caps, &size, &min, &max) || !caps) return FALSE;
  StreamCaps parsed;
  std::string error;
  if (!parse_caps(caps, &parsed, &error)) return FALSE;
  std::lock_guard<std::mutex> lock(self->st->mu);
  self->st->is_video = parsed.kind == MediaKind::video;
  self->st->video = parsed.video;
  self->st->size = self->st->is_video ? static_cast<guint>(GST_VIDEO_INFO_SIZE(&parsed.video))
                                      : static_cast<guint>(parsed.tensor.size);
  // Nothing to preallocate: every buffer is a fresh lease of a ring slot.
  gst_buffer_pool_config_set_params(config, caps, self->st->size, 0, max);
  return GST_BUFFER_POOL_CLASS(gst_cuda_ipc_slot_pool_parent_class)->set_config(pool, config);
}

static GstFlowReturn slot_pool_acquire(GstBufferPool* pool, GstBuffer** out,
                                       GstBufferPoolAcquireParams* params) {
  namespace d = slot_pool_detail;
  SlotPoolState* st = reinterpret_cast<GstCudaIpcSlotPool*>(pool)->st;
  bool flushing = false;
  std::unique_ptr<d::LentSlot> lent = d::lend(*st->lender, st->size, &flushing);
  if (flushing) return GST_FLOW_FLUSHING;
  if (!lent) {
    // Ordinary memory; render() copies it (and applies the drop policy) as for any buffer.
    GstFlowReturn ret =
        GST_BUFFER_POOL_CLASS(gst_cuda_ipc_slot_pool_parent_class)->alloc_buffer(pool, out, params);
    if (ret == GST_FLOW_OK && st->is_video)
      gst_buffer_add_video_meta_full(
          *out, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_INFO_FORMAT(&st->video),
          GST_VIDEO_INFO_WIDTH(&st->video), GST_VIDEO_INFO_HEIGHT(&st->video),
          GST_VIDEO_INFO_N_PLANES(&st->video), st->video.offset, st->video.stride);
    if (ret == GST_FLOW_OK) d::track(*out, st->lender);
    return ret;
  }
  const std::uintptr_t addr = lent->slot.address();
  GstMemory* mem =
      gst_memory_new_wrapped(static_cast<GstMemoryFlags>(0), reinterpret_cast<gpointer>(addr),
                             st->size, 0, st->size, nullptr, nullptr);
  d::attach(mem, std::move(lent));
  *out = d::slot_buffer(mem, st->is_video, st->video);
  d::track(*out, st->lender);
  return GST_FLOW_OK;
}

// Slot buffers are never recycled (each is a new lease); plain ones are simply freed too.
static void slot_pool_release(GstBufferPool*, GstBuffer* buffer) {
  gst_buffer_unref(buffer);
}

static void slot_pool_flush_start(GstBufferPool* pool) {
  reinterpret_cast<GstCudaIpcSlotPool*>(pool)->st->lender->producer().interrupt();
}

static void slot_pool_flush_stop(GstBufferPool* pool) {
  reinterpret_cast<GstCudaIpcSlotPool*>(pool)->st->lender->producer().clear_interrupt();
}

static void slot_pool_finalize(GObject* object) {
  auto* self = reinterpret_cast<GstCudaIpcSlotPool*>(object);
  std::unique_ptr<SlotPoolState> reclaim(self->st);
  self->st = nullptr;
  G_OBJECT_CLASS(gst_cuda_ipc_slot_pool_parent_class)->finalize(object);
}

static void gst_cuda_ipc_slot_pool_init(GstCudaIpcSlotPool* self) {
  self->st = std::make_unique<SlotPoolState>().release();  // reclaimed in finalize
}

static void gst_cuda_ipc_slot_pool_class_init(GstCudaIpcSlotPoolClass* klass) {
  slot_pool_detail::debug_init();
  GObjectClass* gobject_class = G_OBJECT_CLASS(klass);
  GstBufferPoolClass* pool_class = GST_BUFFER_POOL_CLASS(klass);
  gobject_class->finalize = slot_pool_finalize;
  pool_class->get_options = slot_pool_get_options;
  pool_class->set_config = slot_pool_set_config;
  pool_class->acquire_buffer = slot_pool_acquire;
  pool_class->release_buffer = slot_pool_release;
  pool_class->flush_start = slot_pool_flush_start;
  pool_class->flush_stop = slot_pool_flush_stop;
}

namespace cudaipc::gst {

GstBufferPool* slot_pool_new(std::shared_ptr<SlotLender> lender) {
  auto* pool =
      static_cast<GstCudaIpcSlotPool*>(g_object_new(gst_cuda_ipc_slot_pool_get_type(), nullptr));
  gst_object_ref_sink(pool);
  pool->st->lender = std::move(lender);
  return GST_BUFFER_POOL(pool);
}

void mark_rendered(GstBuffer* buf) {
  if (auto* token = static_cast<InFlight*>(
          gst_mini_object_get_qdata(GST_MINI_OBJECT(buf), in_flight_quark())))
    token->finish();
}

WriteSlot* slot_of(GstBuffer* buf, const Producer* producer) {
  if (gst_buffer_n_memory(buf) != 1) return nullptr;
  auto* h = static_cast<slot_pool_detail::LentSlot*>(
      gst_mini_object_get_qdata(GST_MINI_OBJECT(gst_buffer_peek_memory(buf, 0)), slot_quark()));
  return h && h->producer.get() == producer && h->slot ? &h->slot : nullptr;
}

}  // namespace cudaipc::gst
