/**
 * SECTION:element-cudaipcsink
 * @title: cudaipcsink
 *
 * Publishes frames into a cudaipc channel: a ring of GPU (or host) slots that cudaipcsrc
 * elements and cudaipc applications in other processes read without copies. Accepts CUDA
 * memory from nvcodec elements (one device-to-device copy into a slot, ordered on the GPU) and
 * system memory (one host-to-device copy), as raw video or NNStreamer-style tensors. The caps,
 * the tensor description (shape, dtype, strides, plane offsets and pitches) and tags travel with
 * the stream; EOS reaches every consumer when it reaches the sink.
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 videotestsrc ! video/x-raw,format=NV12 ! cudaupload ! \
 *     cudaipcsink socket-path=/tmp/cam0
 * gst-launch-1.0 videotestsrc ! video/x-raw,format=RGBA ! cudaipcsink ipc-mode=host \
 *     socket-path=/tmp/cam0
 * ]|
 */
#include "elements/gstcudaipcsink.h"
#include "elements/property_checks.h"

#include <grp.h>
#include <gst/video/video.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "elements/element_errors.h"
#include "elements/element_messages.h"
#include "elements/element_stats.h"
#include "elements/enums.h"
#include "elements/sink_frames.h"
#include "elements/sink_settings.h"
#include "format/caps_tensor.h"
#include "format/stream_header.h"
#include "format/time_sync.h"
#include "memory/cuda_glue.h"
#include "memory/sink_allocation.h"
#include "memory/slot_pool.h"
#include "metas/meta_encoder.h"
#include "metas/meta_filter.h"

GST_DEBUG_CATEGORY_STATIC(gst_cuda_ipc_ring_sink_debug);
#define GST_CAT_DEFAULT gst_cuda_ipc_ring_sink_debug

using namespace cudaipc;
using namespace cudaipc::gst;
using namespace cudaipc::gst::sink;

namespace {

struct SinkState {
  Settings settings;  // under the object lock

  // Streaming-thread state, set up in start(), gone in stop().
  // Shared with slot-pool buffers upstream, which may outlive stop(): a lent slot keeps it.
  std::shared_ptr<Producer> producer;
  std::shared_ptr<SlotLender> lender;  // the same producer, as the slot pool borrows from it
  GstCudaContext* context = nullptr;
  ElementStream stream;  // the producer's (1.24+): slot pools offer it upstream
  StreamOrder order;
  StreamCaps caps;
  std::string wire_caps;
  GstTagList* tags = nullptr;
  bool format_dirty = true;  // caps or tags changed since the last set_format
  TensorDesc sent_tensor{};
  std::uint64_t sent_size = 0;
  bool has_format = false;
  std::atomic<std::uint64_t> lent_drops{0};  // frames the core never saw (stats add them)
  // Which path frames took into their slots (stats): written there by upstream, or copied.
  std::atomic<std::uint64_t> in_place{0}, copied{0};
  bool warned_lent = false;
  // The buffers' metas into each slot's meta area (metas/meta_encoder.h).
  MetaFilter meta_filter;
  std::atomic<std::uint64_t> metas_sent{0}, metas_oversized{0}, metas_unsupported{0};
  bool warned_oversized = false;

  // unlock()/unlock_stop() against a render() waiting for a consumer.
  std::mutex mu;
  std::condition_variable cv;
  bool flushing = false;
};

}  // namespace

struct _GstCudaIpcRingSink {
  GstBaseSink parent;
  SinkState* st;
};

#define gst_cuda_ipc_ring_sink_parent_class parent_class
G_DEFINE_TYPE(GstCudaIpcRingSink, gst_cuda_ipc_ring_sink, GST_TYPE_BASE_SINK)
GST_ELEMENT_REGISTER_DEFINE(cudaipcsink, "cudaipcsink", GST_RANK_NONE, GST_TYPE_CUDA_IPC_RING_SINK)

static bool uses_cuda(const Settings& s) {
  return s.ipc_mode != GST_CUDA_IPC_RING_MODE_HOST;
}

static void gst_cuda_ipc_ring_sink_set_property(GObject* object, guint prop_id, const GValue* value,
                                                GParamSpec* pspec) {
  auto* self = GST_CUDA_IPC_RING_SINK(object);
  if (!property_write_allowed(GST_ELEMENT(object), pspec, value)) return;
  GST_OBJECT_LOCK(self);
  const bool known = set_sink_setting(self->st->settings, prop_id, value);
  GST_OBJECT_UNLOCK(self);
  if (!known) G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
}

static void gst_cuda_ipc_ring_sink_get_property(GObject* object, guint prop_id, GValue* value,
                                                GParamSpec* pspec) {
  auto* self = GST_CUDA_IPC_RING_SINK(object);
  SinkState* st = self->st;
  if (prop_id == PROP_STATS) {
    // The producer lives from start() to stop(), both under the state lock.
    GST_OBJECT_LOCK(self);
    ProducerStats ps{};
    if (st->producer) ps = st->producer->stats();
    ps.dropped += st->lent_drops.load();
    GST_OBJECT_UNLOCK(self);
    SinkCounts counts{st->in_place.load(), st->copied.load(), st->metas_sent.load(),
                      st->metas_oversized.load(), st->metas_unsupported.load()};
    g_value_take_boxed(value, sink_stats(ps, counts));
    return;
  }
  GST_OBJECT_LOCK(self);
  const bool known = get_sink_setting(st->settings, prop_id, value);
  GST_OBJECT_UNLOCK(self);
  if (!known) G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
}

static void gst_cuda_ipc_ring_sink_set_context(GstElement* element, GstContext* context) {
  auto* self = GST_CUDA_IPC_RING_SINK(element);
  GST_OBJECT_LOCK(self);
  gint device_id = self->st->settings.device_id;
  GST_OBJECT_UNLOCK(self);
  gst_cuda_handle_set_context(element, context, device_id, &self->st->context);
  GST_ELEMENT_CLASS(parent_class)->set_context(element, context);
}

// "group" or a numeric gid; false when no such group exists.
static bool resolve_group(const std::string& name, gid_t* gid) {
  char* end = nullptr;
  unsigned long n = std::strtoul(name.c_str(), &end, 10);
  if (!name.empty() && end && *end == '\0') {
    *gid = static_cast<gid_t>(n);
    return true;
  }
  group grp{};
  group* found = nullptr;
  char buf[4096];
  if (getgrnam_r(name.c_str(), &grp, buf, sizeof buf, &found) != 0 || !found) return false;
  *gid = found->gr_gid;
  return true;
}

// Makes the producer: basesink's start(), run from change_state (below) instead; false after
// posting an error that names the cause.
static bool open_producer(GstCudaIpcRingSink* self) {
  SinkState* st = self->st;
  GST_OBJECT_LOCK(self);
  Settings s = st->settings;
  GST_OBJECT_UNLOCK(self);

  ProducerOptions po;
  po.path = s.socket_path;
  po.slots = s.num_slots;
  po.on_full = s.policy == GST_CUDA_IPC_RING_POLICY_DROP ? FullPolicy::drop : FullPolicy::block;
  // The core takes signed nanoseconds; anything past ~292 years means "for ever" anyway.
  po.block_timeout = std::chrono::nanoseconds(
      std::min<guint64>(s.block_timeout, static_cast<guint64>(G_MAXINT64)));
  po.socket_mode = s.socket_mode;
  po.max_consumers = s.max_consumers;
  po.meta_size = s.meta_size;
  // The producer is closed in stop(), before this element can go: no call outlives it.
  po.on_consumer = [self](const ConsumerChange& c) { post_consumer_change(GST_ELEMENT(self), c); };
  po.role = s.role;
  st->meta_filter = MetaFilter(s.forward_metas);
  if (!s.allowed_group.empty()) {
    gid_t gid;
    if (!resolve_group(s.allowed_group, &gid)) {
      GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                        ("No group named \"%s\" exists; set allowed-group to a group or gid.",
                         s.allowed_group.c_str()),
                        (nullptr));
      return false;
    }
    po.allowed_gid = gid;
  }

  if (uses_cuda(s)) {
    if (!gst_cuda_load_library() ||
        !gst_cuda_ensure_element_context(GST_ELEMENT(self), s.device_id, &st->context)) {
      GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND,
                        ("No usable CUDA device (device %d): the NVIDIA driver or GPU is missing, "
                         "or an MPS server refused another client (it serves at most 48 "
                         "processes, fewer where clients raise CUDA_DEVICE_MAX_CONNECTIONS). Set "
                         "ipc-mode=host to share frames in host memory instead.",
                         s.device_id),
                        ("gst_cuda_ensure_element_context failed"));
      return false;
    }
    gst_cuda_memory_init_once();  // CUDA buffer pools need the allocator registered
    po.memory = MemoryKind::cuda;
    po.cuda.device = context_device_id(st->context);
    po.cuda.context = gst_cuda_context_get_handle(st->context);
    st->stream.create(st->context);
    po.cuda.stream = st->stream.handle();  // 1.24+; on 1.22 the core makes its own
    po.cuda.export_mode = s.ipc_mode == GST_CUDA_IPC_RING_MODE_VMM      ? CudaExportMode::vmm
                          : s.ipc_mode == GST_CUDA_IPC_RING_MODE_LEGACY ? CudaExportMode::legacy
                                                                        : CudaExportMode::automatic;
  } else {
    po.memory = MemoryKind::host;
  }

  try {
    ContextScope scope(st->context);
    auto producer = std::make_shared<Producer>(po);
    GST_OBJECT_LOCK(self);
    st->lender = std::make_shared<SlotLender>(producer);
    st->producer = std::move(producer);
    GST_OBJECT_UNLOCK(self);
  } catch (const Error& e) {
    post_core_error(GST_ELEMENT(self), e, po.path.empty() ? "(default path)" : po.path.c_str());
    st->stream.reset();
    gst_clear_object(&st->context);
    return false;
  }
  GST_INFO_OBJECT(self, "publishing on %s (%s memory, %u slots)", st->producer->path().c_str(),
                  uses_cuda(s) ? "CUDA" : "host", s.num_slots);
  st->format_dirty = true;
  st->has_format = false;
  st->lent_drops.store(0);
  st->in_place.store(0);
  st->copied.store(0);
  st->metas_sent.store(0);
  st->metas_oversized.store(0);
  st->metas_unsupported.store(0);
  st->warned_oversized = false;
  return true;
}

std::shared_ptr<Producer> gst_cuda_ipc_ring_sink_producer(GstCudaIpcRingSink* sink) {
  GST_OBJECT_LOCK(sink);
  std::shared_ptr<Producer> p = sink->st->producer;
  GST_OBJECT_UNLOCK(sink);
  return p;
}

void gst_cuda_ipc_ring_sink_set_role(GstCudaIpcRingSink* sink, ChannelRole role) {
  GST_OBJECT_LOCK(sink);
  sink->st->settings.role = role;
  GST_OBJECT_UNLOCK(sink);
}

static gboolean gst_cuda_ipc_ring_sink_stop(GstBaseSink* sink) {
  auto* self = GST_CUDA_IPC_RING_SINK(sink);
  SinkState* st = self->st;
  std::shared_ptr<Producer> producer;
  GST_OBJECT_LOCK(self);
  if (st->lender) st->lender->close();
  st->lender.reset();
  producer = std::move(st->producer);
  GST_OBJECT_UNLOCK(self);
  {
    ContextScope scope(st->context);
    // The channel ends here, whoever else holds the producer (a slot lent upstream, whose buffer
    // keeps the slot's memory until its last reference): consumers see it close, the socket file
    // goes, and a new sink may take the path at once.
    if (producer) producer->close();
    producer.reset();
  }
  st->stream.reset();  // after the producer, which drained its work on it
  gst_clear_object(&st->context);
  if (st->tags) gst_tag_list_unref(st->tags);
  st->tags = nullptr;
  return TRUE;
}

// The producer is made here rather than in basesink's start(): a start() that fails is followed
// by basesink's own error, "state change failed and some element failed to post a proper error
// message", which would stand beside ours as if the cause were unknown.
static GstStateChangeReturn gst_cuda_ipc_ring_sink_change_state(GstElement* element,
                                                                GstStateChange transition) {
  auto* self = GST_CUDA_IPC_RING_SINK(element);
  if (transition == GST_STATE_CHANGE_NULL_TO_READY && !open_producer(self))
    return GST_STATE_CHANGE_FAILURE;
  const GstStateChangeReturn ret =
      GST_ELEMENT_CLASS(parent_class)->change_state(element, transition);
  if (transition == GST_STATE_CHANGE_NULL_TO_READY && ret == GST_STATE_CHANGE_FAILURE)
    gst_cuda_ipc_ring_sink_stop(GST_BASE_SINK(self));
  return ret;
}

static bool send_format(GstCudaIpcRingSink* self, const TensorDesc& tensor, std::uint64_t bytes);

// The tensor and size of a buffer in the caps' default layout, which a pool's buffers use.
// False for what one buffer-pool buffer cannot be: several tensors (NNStreamer's buffers, a
// memory each), or more than a pool's guint sizes.
static bool default_layout(const StreamCaps& parsed, TensorDesc* tensor, std::uint64_t* bytes) {
  std::string error;
  *tensor = parsed.tensor;
  if (parsed.tensors.size() > 1) return false;
  if (parsed.kind == MediaKind::video &&
      !video_tensor(parsed.video, nullptr, GST_VIDEO_INFO_SIZE(&parsed.video), tensor, &error))
    return false;
  *bytes = tensor->byte_offset + tensor->size;
  if (parsed.kind == MediaKind::video)
    *bytes = std::max<std::uint64_t>(*bytes, video_rows_end(parsed.video, *tensor));
  return *bytes <= G_MAXUINT;
}

// The first format goes out with the first caps, before the first buffer, in the caps' default
// layout: consumers that connected earlier map the slots while the pipeline starts, not at its
// first frame (behind cudaipcfilter, which answers upstream's allocation query itself, that is
// after the model's first answer). On 1.22 upstream's CUDA buffers come pitched from a
// GstCudaBufferPool, copied into the slots: those are sized for such a buffer, so a first buffer
// of that layout is a new format on the same slots. Any other first buffer is announced as
// before (new slots where it does not fit).
static gboolean announce_early(GstCudaIpcRingSink* self, GstCaps* caps) {
  SinkState* st = self->st;
  TensorDesc tensor;
  std::uint64_t bytes = 0;
  if (st->has_format || !st->producer || !default_layout(st->caps, &tensor, &bytes)) return TRUE;
  if (!kCanWrapCudaMemory && st->caps.cuda_memory && st->context &&
      st->producer->memory_kind() == MemoryKind::cuda)
    bytes = std::max<std::uint64_t>(bytes, cuda_pool_size(caps, st->caps, st->context));
  return send_format(self, tensor, bytes);
}

static gboolean gst_cuda_ipc_ring_sink_set_caps(GstBaseSink* sink, GstCaps* caps) {
  auto* self = GST_CUDA_IPC_RING_SINK(sink);
  SinkState* st = self->st;
  std::string error;
  StreamCaps parsed;
  if (!parse_caps(caps, &parsed, &error)) {
    GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("Unsupported caps: %s", error.c_str()),
                      ("caps: %" GST_PTR_FORMAT, caps));
    return FALSE;
  }
  st->caps = parsed;
  st->wire_caps = wire_caps(caps);
  st->format_dirty = true;
  GST_DEBUG_OBJECT(self, "caps %s", st->wire_caps.c_str());
  return announce_early(self, caps);
}

static GstCaps* gst_cuda_ipc_ring_sink_get_caps(GstBaseSink* sink, GstCaps* filter) {
  GstCaps* caps = template_caps();
  auto* self = GST_CUDA_IPC_RING_SINK(sink);
  GST_OBJECT_LOCK(self);
  bool host = !uses_cuda(self->st->settings);
  GST_OBJECT_UNLOCK(self);
  if (host) {
    // Host slots take system memory; CUDA memory would only be downloaded here.
    GstCaps* sys = gst_caps_new_empty();
    for (guint i = 0; i < gst_caps_get_size(caps); ++i) {
      GstCapsFeatures* f = gst_caps_get_features(caps, i);
      if (f && gst_caps_features_contains(f, kCudaMemoryFeature)) continue;
      sys = gst_caps_merge_structure_full(sys, gst_structure_copy(gst_caps_get_structure(caps, i)),
                                          f ? gst_caps_features_copy(f) : nullptr);
    }
    gst_caps_unref(caps);
    caps = sys;
  }
  if (filter) {
    // Our order, not the filter's: CUDA memory first on a CUDA channel. cudaupload offers its
    // input's system memory first (passthrough), and in its order it would never upload.
    GstCaps* both = gst_caps_intersect_full(caps, filter, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref(caps);
    caps = both;
  }
  return caps;
}

// A new format generation is due: new caps or tags, or a layout the consumers were not told of.
static bool format_changed(const SinkState* st, const TensorDesc& tensor, std::uint64_t bytes) {
  return st->format_dirty || !st->has_format || tensor != st->sent_tensor || bytes != st->sent_size;
}

// Upstream writes straight into ring slots (host channels; CUDA channels on 1.24+). The format
// (with the caps' default layout, which the pool's buffers use) must exist before the first slot
// is lent.
static gboolean propose_slot_pool(GstCudaIpcRingSink* self, GstQuery* query, GstCaps* caps,
                                  const StreamCaps& parsed, bool cuda) {
  SinkState* st = self->st;
  TensorDesc tensor;
  std::uint64_t bytes = 0;
  // Otherwise upstream allocates its own memory, which render() copies into the slot.
  if (!default_layout(parsed, &tensor, &bytes)) return TRUE;
  st->caps = parsed;
  st->wire_caps = wire_caps(caps);
  if (format_changed(st, tensor, bytes) && !send_format(self, tensor, bytes)) return FALSE;
  // basesink's last-sample would keep a committed slot buffer, pointing into a slot the ring
  // reuses and may retire: that stays off while upstream writes into slots.
  gst_base_sink_set_last_sample_enabled(GST_BASE_SINK(self), FALSE);
  if (offer_slot_pool(query, caps, static_cast<guint>(bytes), st->lender,
                      cuda ? st->context : nullptr, st->stream))
    GST_DEBUG_OBJECT(self, "offered a %s slot pool for %" GST_PTR_FORMAT, cuda ? "CUDA" : "host",
                     caps);
  else
    GST_WARNING_OBJECT(self, "slot pool refused its config; upstream buffers will be copied");
  return TRUE;
}

static gboolean gst_cuda_ipc_ring_sink_propose_allocation(GstBaseSink* sink, GstQuery* query) {
  auto* self = GST_CUDA_IPC_RING_SINK(sink);
  SinkState* st = self->st;
  GstCaps* caps = nullptr;
  gboolean need_pool = FALSE;
  gst_query_parse_allocation(query, &caps, &need_pool);
  if (!caps) return FALSE;
  // Any layout is fine: the tensor description is taken from each buffer's GstVideoMeta.
  gst_query_add_allocation_meta(query, GST_VIDEO_META_API_TYPE, nullptr);
  StreamCaps parsed;
  std::string error;
  if (!need_pool || !st->producer || !parse_caps(caps, &parsed, &error)) return TRUE;
  const bool cuda_channel = st->producer->memory_kind() == MemoryKind::cuda;
  if (!parsed.cuda_memory && !cuda_channel)
    return propose_slot_pool(self, query, caps, parsed, false);
  if (!parsed.cuda_memory || !st->context) return TRUE;
  if (cuda_channel && kCanWrapCudaMemory) return propose_slot_pool(self, query, caps, parsed, true);
  // 1.22: upstream at least allocates on our device and context, so the copy stays on it.
  offer_cuda_pool(query, caps, parsed, st->context);
  return TRUE;
}

static gboolean gst_cuda_ipc_ring_sink_query(GstBaseSink* sink, GstQuery* query) {
  auto* self = GST_CUDA_IPC_RING_SINK(sink);
  if (GST_QUERY_TYPE(query) == GST_QUERY_CONTEXT &&
      gst_cuda_handle_context_query(GST_ELEMENT(self), query, self->st->context))
    return TRUE;
  return GST_BASE_SINK_CLASS(parent_class)->query(sink, query);
}

// Publishes the stream header (caps, tags) and the buffer's layout as a new format generation.
static bool send_format(GstCudaIpcRingSink* self, const TensorDesc& tensor, std::uint64_t bytes) {
  SinkState* st = self->st;
  Format f;
  f.caps = encode_stream_header(st->wire_caps, st->tags);
  f.tensor = tensor;
  f.max_frame_size = bytes;
  try {
    ContextScope scope(st->context);
    st->producer->set_format(f);
  } catch (const Error& e) {
    post_core_error(GST_ELEMENT(self), e, st->producer->path().c_str());
    return false;
  }
  st->sent_tensor = tensor;
  st->sent_size = bytes;
  st->has_format = true;
  st->format_dirty = false;
  GST_INFO_OBJECT(self, "new format: %s, %s, %" G_GUINT64_FORMAT " bytes", st->wire_caps.c_str(),
                  to_string(tensor).c_str(), bytes);
  return true;
}

// Returns false when flushing.
static bool wait_for_consumer(GstCudaIpcRingSink* self) {
  SinkState* st = self->st;
  std::unique_lock<std::mutex> lock(st->mu);
  bool announced = false;
  while (!st->flushing && st->producer->consumer_count() == 0) {
    if (!announced) GST_INFO_OBJECT(self, "waiting for a consumer");
    announced = true;
    st->cv.wait_for(lock, std::chrono::milliseconds(10));
  }
  return !st->flushing;
}

// The buffer's metas into the slot's meta area, where `info` publishes them without a copy.
static void add_metas(GstCudaIpcRingSink* self, GstBuffer* buf, const WriteSlot& slot,
                      FrameInfo& info) {
  SinkState* st = self->st;
  EncodeCounts counts;
  const char* oversized = nullptr;
  info.metas = slot.metas();
  info.metas_size =
      encode_metas(buf, st->meta_filter, slot.metas(), slot.metas_capacity(), &counts, &oversized);
  if (counts.sent) st->metas_sent.fetch_add(counts.sent, std::memory_order_relaxed);
  if (counts.unsupported)
    st->metas_unsupported.fetch_add(counts.unsupported, std::memory_order_relaxed);
  if (counts.oversized) {
    st->metas_oversized.fetch_add(counts.oversized, std::memory_order_relaxed);
    if (!st->warned_oversized) {
      st->warned_oversized = true;
      GST_ELEMENT_WARNING(self, RESOURCE, NO_SPACE_LEFT,
                          ("A %s did not fit the frame's meta area of %u bytes and was left out "
                           "(the frame went on without it); raise meta-size to send it.",
                           oversized, slot.metas_capacity()),
                          ("later ones are counted in stats (metas-oversized)"));
    } else {
      GST_DEBUG_OBJECT(self, "%u metas left out: no room in the meta area", counts.oversized);
    }
  }
}

// A slot-pool buffer: upstream already wrote the frame into the slot, so publishing is a commit.
// Tags that arrived meanwhile go out as a new format after it (no format change while lent).
static GstFlowReturn commit_lent_slot(GstCudaIpcRingSink* self, GstBuffer* buf, WriteSlot& slot,
                                      const TensorDesc& tensor, std::uint64_t entry) {
  SinkState* st = self->st;
  const TimingRecord timing = timing_of(GST_BASE_SINK(self), buf, entry);
  FrameInfo info = frame_info(buf, timing);
  if (tensor != st->sent_tensor) info.tensor = &tensor;
  add_metas(self, buf, slot, info);
  try {
    st->producer->commit(slot, info);
  } catch (const Error& e) {
    post_core_error(GST_ELEMENT(self), e, st->producer->path().c_str());
    return GST_FLOW_ERROR;
  }
  st->in_place.fetch_add(1, std::memory_order_relaxed);
  if (st->format_dirty && !send_format(self, st->sent_tensor, st->sent_size)) return GST_FLOW_ERROR;
  return GST_FLOW_OK;
}

static GstFlowReturn gst_cuda_ipc_ring_sink_render(GstBaseSink* sink, GstBuffer* buf) {
  auto* self = GST_CUDA_IPC_RING_SINK(sink);
  SinkState* st = self->st;
  const std::uint64_t entry = monotonic_now_ns();
  GST_TRACE_OBJECT(self, "render %" GST_PTR_FORMAT, buf);
  // However render() ends, the slot pool may lend again once this buffer is through.
  struct Rendered {
    GstBuffer* buf;
    ~Rendered() { mark_rendered(buf); }
  } rendered{buf};
  std::string error;

  GST_OBJECT_LOCK(self);
  const bool wait = st->settings.wait_for_consumer;
  GST_OBJECT_UNLOCK(self);
  if (wait && !wait_for_consumer(self)) return GST_FLOW_FLUSHING;

  TensorDesc tensor;
  std::uint64_t bytes;
  if (!buffer_layout(st->caps, st->wire_caps, buf, &tensor, &bytes, &error)) {
    GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("%s", error.c_str()), (nullptr));
    return GST_FLOW_ERROR;
  }
  if (WriteSlot* lent = slot_of(buf, st->producer.get()))
    return commit_lent_slot(self, buf, *lent, tensor, entry);
  if (format_changed(st, tensor, bytes)) {
    if (!send_format(self, tensor, bytes)) return GST_FLOW_ERROR;
  }

  PublishStatus status = PublishStatus::published;
  WriteSlot slot;
  try {
    slot = st->lender->begin(&status);
  } catch (const Error& e) {
    if (e.code() == Errc::invalid_argument && !st->warned_lent) {
      // Upstream still holds a slot-pool buffer it has not pushed (the core lends one slot at a
      // time) and pushed another buffer first: this one cannot be published before it.
      st->warned_lent = true;
      GST_WARNING_OBJECT(self, "frame dropped: upstream holds a lent slot (%s)", e.what());
    }
    if (e.code() == Errc::invalid_argument) {
      st->lent_drops.fetch_add(1);
      return GST_FLOW_OK;
    }
    post_core_error(GST_ELEMENT(self), e, st->producer->path().c_str());
    return GST_FLOW_ERROR;
  }
  if (!slot) {
    if (status == PublishStatus::interrupted) return GST_FLOW_FLUSHING;
    GST_LOG_OBJECT(
        self, "frame dropped (%s)",
        status == PublishStatus::timeout ? "no free slot within block-timeout" : "no free slot");
    return GST_FLOW_OK;
  }
  if (bytes > slot.capacity()) {
    GST_ELEMENT_ERROR(self, RESOURCE, NO_SPACE_LEFT,
                      ("Frame of %" G_GUINT64_FORMAT
                       " bytes is larger than a slot (%" G_GUINT64_FORMAT " bytes).",
                       bytes, slot.capacity()),
                      ("the format announced %" G_GUINT64_FORMAT " bytes", st->sent_size));
    return GST_FLOW_ERROR;
  }
  GST_TRACE_OBJECT(self, "slot %u taken", slot.index());
  if (!copy_into_slot(*st->producer, st->context, st->order, buf, slot, bytes, st->caps.tensors,
                      &error)) {
    GST_ELEMENT_ERROR(self, RESOURCE, WRITE,
                      ("Could not copy the frame into a slot: %s", error.c_str()), (nullptr));
    return GST_FLOW_ERROR;
  }
  GST_TRACE_OBJECT(self, "frame copied into slot %u", slot.index());
  const TimingRecord timing = timing_of(GST_BASE_SINK(self), buf, entry);
  FrameInfo info = frame_info(buf, timing);
  add_metas(self, buf, slot, info);
  try {
    ContextScope scope(st->context);
    st->producer->commit(slot, info);
  } catch (const Error& e) {
    post_core_error(GST_ELEMENT(self), e, st->producer->path().c_str());
    return GST_FLOW_ERROR;
  }
  st->copied.fetch_add(1, std::memory_order_relaxed);
  GST_TRACE_OBJECT(self, "frame published");
  return GST_FLOW_OK;
}

static gboolean gst_cuda_ipc_ring_sink_event(GstBaseSink* sink, GstEvent* event) {
  auto* self = GST_CUDA_IPC_RING_SINK(sink);
  SinkState* st = self->st;
  switch (GST_EVENT_TYPE(event)) {
    case GST_EVENT_EOS:
      if (st->producer) {
        st->producer->end_of_stream();
        GST_INFO_OBJECT(self, "end of stream sent to %zu consumer(s)",
                        st->producer->consumer_count());
      }
      break;
    case GST_EVENT_TAG: {
      GstTagList* tags = nullptr;
      gst_event_parse_tag(event, &tags);
      if (tags && gst_tag_list_get_scope(tags) == GST_TAG_SCOPE_STREAM) {
        GstTagList* merged = st->tags ? gst_tag_list_merge(st->tags, tags, GST_TAG_MERGE_REPLACE)
                                      : gst_tag_list_copy(tags);
        if (st->tags) gst_tag_list_unref(st->tags);
        st->tags = merged;
        st->format_dirty = true;  // the next frame carries them
      }
      break;
    }
    case GST_EVENT_STREAM_START:
      if (st->tags) gst_tag_list_unref(st->tags);
      st->tags = nullptr;
      st->format_dirty = true;
      break;
    default:
      break;
  }
  return GST_BASE_SINK_CLASS(parent_class)->event(sink, event);
}

static gboolean gst_cuda_ipc_ring_sink_unlock(GstBaseSink* sink) {
  auto* self = GST_CUDA_IPC_RING_SINK(sink);
  SinkState* st = self->st;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->flushing = true;
  }
  st->cv.notify_all();
  GST_OBJECT_LOCK(self);
  if (st->producer) st->producer->interrupt();
  GST_OBJECT_UNLOCK(self);
  return TRUE;
}

static gboolean gst_cuda_ipc_ring_sink_unlock_stop(GstBaseSink* sink) {
  auto* self = GST_CUDA_IPC_RING_SINK(sink);
  SinkState* st = self->st;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->flushing = false;
  }
  GST_OBJECT_LOCK(self);
  if (st->producer) st->producer->clear_interrupt();
  GST_OBJECT_UNLOCK(self);
  return TRUE;
}

static void gst_cuda_ipc_ring_sink_finalize(GObject* object) {
  auto* self = GST_CUDA_IPC_RING_SINK(object);
  std::unique_ptr<SinkState> reclaim(self->st);
  self->st = nullptr;
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

static void gst_cuda_ipc_ring_sink_init(GstCudaIpcRingSink* self) {
  self->st = std::make_unique<SinkState>().release();  // reclaimed in finalize
}

static void gst_cuda_ipc_ring_sink_class_init(GstCudaIpcRingSinkClass* klass) {
  GObjectClass* gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass* element_class = GST_ELEMENT_CLASS(klass);
  GstBaseSinkClass* basesink_class = GST_BASE_SINK_CLASS(klass);

  gobject_class->set_property = gst_cuda_ipc_ring_sink_set_property;
  gobject_class->get_property = gst_cuda_ipc_ring_sink_get_property;
  gobject_class->finalize = gst_cuda_ipc_ring_sink_finalize;

  install_sink_properties(gobject_class);
  g_object_class_install_property(
      gobject_class, PROP_STATS,
      g_param_spec_boxed("stats", "Statistics",
                         "published, dropped, consumers, in-place (frames upstream wrote into "
                         "slots), copied (frames copied into slots), and consumer-stats: per "
                         "consumer pid, mode, delivered, skipped",
                         GST_TYPE_STRUCTURE,
                         static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));

  gst_element_class_set_static_metadata(
      element_class, "CUDA IPC ring sink", "Sink/Video",
      "Publishes CUDA or system-memory frames, video or tensors, to other processes through a "
      "shared ring of GPU slots",
      "cudaipc developers");
  GstCaps* caps = template_caps();
  gst_element_class_add_pad_template(
      element_class, gst_pad_template_new("sink", GST_PAD_SINK, GST_PAD_ALWAYS, caps));
  gst_caps_unref(caps);
  element_class->set_context = gst_cuda_ipc_ring_sink_set_context;
  element_class->change_state = gst_cuda_ipc_ring_sink_change_state;

  basesink_class->stop = gst_cuda_ipc_ring_sink_stop;
  basesink_class->set_caps = gst_cuda_ipc_ring_sink_set_caps;
  basesink_class->get_caps = gst_cuda_ipc_ring_sink_get_caps;
  basesink_class->propose_allocation = gst_cuda_ipc_ring_sink_propose_allocation;
  basesink_class->query = gst_cuda_ipc_ring_sink_query;
  basesink_class->render = gst_cuda_ipc_ring_sink_render;
  basesink_class->event = gst_cuda_ipc_ring_sink_event;
  basesink_class->unlock = gst_cuda_ipc_ring_sink_unlock;
  basesink_class->unlock_stop = gst_cuda_ipc_ring_sink_unlock_stop;

  GST_DEBUG_CATEGORY_INIT(gst_cuda_ipc_ring_sink_debug, "cudaipcsink", 0, "cudaipcsink");
  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_IPC_RING_MODE, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_IPC_RING_POLICY, static_cast<GstPluginAPIFlags>(0));
}
