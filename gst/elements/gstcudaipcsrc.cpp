/**
 * SECTION:element-cudaipcsrc
 * @title: cudaipcsrc
 *
 * Plays a cudaipc channel published by cudaipcsink (or any cudaipc producer) in another process.
 * Its caps say exactly what the producer sent (media type, format or dtype, shape), in CUDA
 * memory where downstream accepts it, else in system memory. In import mode every buffer
 * references its slot and holds the slot's lease until freed: no copy. Each buffer carries a
 * GstVideoMeta (video) and a GstCudaIpcTensorMeta (see gst/cudaipc/gstcudaipcmeta.h). A format
 * change at the producer arrives as new caps before the first buffer in it; when the producer
 * goes away the source waits for a new one on the same path (reconnect=true) and resumes with
 * a DISCONT buffer.
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 cudaipcsrc socket-path=/tmp/cam0 ! cudadownload ! videoconvert ! autovideosink
 * gst-launch-1.0 cudaipcsrc socket-path=/tmp/cam0 mode=every-frame ! fakesink
 * ]|
 */
#include "elements/gstcudaipcsrc.h"
#include "elements/property_checks.h"

#include <gst/video/video.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "elements/element_errors.h"
#include "elements/element_stats.h"
#include "elements/enums.h"
#include "elements/src_settings.h"
#include "format/caps_tensor.h"
#include "format/src_format.h"
#include "format/time_sync.h"
#include "memory/cuda_glue.h"
#include "memory/frame_copy.h"
#include "memory/frame_pool.h"
#include "memory/tensor_split.h"
#include "metas/frame_metas.h"
#include "metas/meta_decoder.h"
#include "metas/meta_filter.h"

GST_DEBUG_CATEGORY_STATIC(gst_cuda_ipc_ring_src_debug);
#define GST_CAT_DEFAULT gst_cuda_ipc_ring_src_debug

using namespace cudaipc;
using namespace cudaipc::gst;
using namespace cudaipc::gst::src;

namespace {

// How long one wait in create() lasts; unlock() interrupts it at once anyway.
constexpr auto kWaitSlice = std::chrono::milliseconds(100);
// How long an unconnected source waits before it says that it is waiting (and for which path).
constexpr std::uint64_t kTellWaitingAfterNs = 1000000000;

struct SrcState {
  Settings settings;  // under the object lock

  std::unique_ptr<Consumer> consumer;  // set in start(), reset in stop(); object lock for stats
  GstCudaContext* context = nullptr;
  ElementStream stream;
  StreamOrder order;       // 1.22 copies: the legacy default stream and ours
  bool import = false;     // zero-copy from CUDA slots (io-mode and GStreamer version)
  bool copy_host = false;  // io-mode=copy: host slots are copied too, so buffers hold no slot

  StreamFormat format;  // written by the streaming thread under the object lock
  bool need_negotiate = false;
  bool out_cuda = false;                 // negotiated caps carry memory:CUDAMemory
  GstBufferPool* frame_pool = nullptr;   // import: one buffer per slot (frame_pool.h)
  GstBufferPool* copy_pool = nullptr;    // CUDA copies (io-mode=copy, or 1.22)
  GstBufferPool* system_pool = nullptr;  // host copies and downloads
  std::uint64_t system_span = 0;         // the size system_pool's buffers have
  bool discont = true;
  TimelineFollower timeline;          // non-live: a new segment when the producer's time goes back
  std::atomic<bool> flushing{false};  // between unlock() and unlock_stop()
  std::uint64_t connect_started = 0;
  std::string refusal;        // the producer's latest refusal while we wait to connect
  bool told_waiting = false;  // "waiting for a producer on PATH" was posted (once per start)
  // The producer's metas back onto buffers (metas/meta_decoder.h); counts read by stats.
  MetaFilter meta_filter;
  std::atomic<std::uint64_t> metas_received{0}, metas_unknown{0}, metas_bad{0}, metas_filtered{0};
  bool warned_bad_metas = false;
  unsigned told_version_gaps = 0;  // VersionGap bits warned about since start()
};

void clear_pool(GstBufferPool** pool) {
  if (!*pool) return;
  gst_buffer_pool_set_active(*pool, FALSE);
  gst_clear_object(pool);
}

void clear_pools(SrcState* st) {
  clear_pool(&st->frame_pool);
  clear_pool(&st->copy_pool);
  clear_pool(&st->system_pool);
  st->system_span = 0;
}

}  // namespace

struct _GstCudaIpcRingSrc {
  GstPushSrc parent;
  SrcState* st;
};

#define gst_cuda_ipc_ring_src_parent_class parent_class
G_DEFINE_TYPE(GstCudaIpcRingSrc, gst_cuda_ipc_ring_src, GST_TYPE_PUSH_SRC)
GST_ELEMENT_REGISTER_DEFINE(cudaipcsrc, "cudaipcsrc", GST_RANK_NONE, GST_TYPE_CUDA_IPC_RING_SRC)

static void gst_cuda_ipc_ring_src_set_property(GObject* object, guint prop_id, const GValue* value,
                                               GParamSpec* pspec) {
  auto* self = GST_CUDA_IPC_RING_SRC(object);
  Settings& s = self->st->settings;
  if (!property_write_allowed(GST_ELEMENT(object), pspec, value)) return;
  GST_OBJECT_LOCK(self);
  const bool known = set_src_setting(s, prop_id, value);
  const bool live = s.is_live;
  GST_OBJECT_UNLOCK(self);
  if (!known) G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
  // Takes the object lock itself.
  if (prop_id == PROP_IS_LIVE) gst_base_src_set_live(GST_BASE_SRC(self), live);
}

static GstStructure* make_stats(SrcState* st) {
  const SourceMetaCounts m{st->metas_received.load(), st->metas_unknown.load(),
                           st->metas_bad.load(), st->metas_filtered.load()};
  if (!st->consumer) return source_stats(ConsumerCounters{}, false, m);
  return source_stats(st->consumer->counters(), st->consumer->connected(), m);
}

// The frame's metas onto `buf`, while the frame's lease holds its meta area (read in place).
static void add_metas(GstCudaIpcRingSrc* self, const std::uint8_t* metas, std::uint32_t bytes,
                      GstBuffer* buf) {
  SrcState* st = self->st;
  if (!metas) return;
  DecodeCounts counts;
  std::string error;
  decode_metas(metas, bytes, st->meta_filter, buf, &counts, &error);
  if (counts.received) st->metas_received.fetch_add(counts.received, std::memory_order_relaxed);
  if (counts.unknown) st->metas_unknown.fetch_add(counts.unknown, std::memory_order_relaxed);
  if (counts.filtered) st->metas_filtered.fetch_add(counts.filtered, std::memory_order_relaxed);
  if (const unsigned gaps = version_gaps(counts) & ~st->told_version_gaps) {
    st->told_version_gaps |= gaps;
    GST_ELEMENT_WARNING(self, STREAM, NOT_IMPLEMENTED, ("%s", version_gap_warning(gaps).c_str()),
                        ("told once; later frames are counted in stats (metas-received, "
                         "metas-unknown)"));
  }
  if (counts.bad) {
    st->metas_bad.fetch_add(counts.bad, std::memory_order_relaxed);
    if (!st->warned_bad_metas) {
      st->warned_bad_metas = true;
      GST_ELEMENT_WARNING(
          self, STREAM, DECODE,
          ("The producer sent a malformed meta, dropped (the frame goes on): %s", error.c_str()),
          ("later ones are counted in stats (metas-bad)"));
    } else {
      GST_DEBUG_OBJECT(self, "malformed meta dropped: %s", error.c_str());
    }
  }
}

static void gst_cuda_ipc_ring_src_get_property(GObject* object, guint prop_id, GValue* value,
                                               GParamSpec* pspec) {
  auto* self = GST_CUDA_IPC_RING_SRC(object);
  GST_OBJECT_LOCK(self);
  bool known = true;
  if (prop_id == PROP_STATS)
    g_value_take_boxed(value, make_stats(self->st));
  else
    known = get_src_setting(self->st->settings, prop_id, value);
  GST_OBJECT_UNLOCK(self);
  if (!known) G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
}

static void gst_cuda_ipc_ring_src_set_context(GstElement* element, GstContext* context) {
  auto* self = GST_CUDA_IPC_RING_SRC(element);
  GST_OBJECT_LOCK(self);
  gint device_id = self->st->settings.device_id;
  GST_OBJECT_UNLOCK(self);
  gst_cuda_handle_set_context(element, context, device_id, &self->st->context);
  GST_ELEMENT_CLASS(parent_class)->set_context(element, context);
}

// Makes the consumer: the part of basesrc's start() that can fail, run from change_state (below)
// instead; false after posting an error that names the cause.
static bool open_consumer(GstCudaIpcRingSrc* self) {
  SrcState* st = self->st;
  GST_OBJECT_LOCK(self);
  Settings s = st->settings;
  GST_OBJECT_UNLOCK(self);

  if (s.io_mode == GST_CUDA_IPC_RING_IO_IMPORT && !kCanWrapCudaMemory) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                      ("io-mode=import needs GStreamer 1.24 or newer to wrap CUDA slots; this "
                       "plugin was built for 1.%d. Use io-mode=auto or copy. (On 1.%d "
                       "io-mode=import is refused for host channels too, as a channel's memory is "
                       "known only once connected; io-mode=auto imports host channels.)",
                       GST_VERSION_MINOR, GST_VERSION_MINOR),
                      (nullptr));
    return false;
  }
  st->import = s.io_mode == GST_CUDA_IPC_RING_IO_IMPORT ||
               (s.io_mode == GST_CUDA_IPC_RING_IO_AUTO && kCanWrapCudaMemory);
  st->copy_host = s.io_mode == GST_CUDA_IPC_RING_IO_COPY;

  // CUDA is optional here: a host-memory channel plays on a machine without a GPU.
  if (gst_cuda_load_library() && (gst_cuda_memory_init_once(), true) &&
      gst_cuda_ensure_element_context(GST_ELEMENT(self), s.device_id, &st->context)) {
    st->stream.create(st->context);
  } else {
    GST_INFO_OBJECT(self, "no CUDA context: only host-memory channels can be played");
  }

  ConsumerOptions co;
  co.path = s.socket_path;
  co.mode = s.mode == GST_CUDA_IPC_RING_CONSUME_EVERY_FRAME ? ConsumeMode::every_frame
                                                            : ConsumeMode::latest;
  // The core keeps retrying; reconnect=false is enforced here, when a connection is lost. The
  // first connect waits for the streaming thread: a state change never waits on a producer (one
  // whose process is stopped held the application's set_state for the handshake's 3 s).
  co.reconnect = true;
  co.connect_later = true;
  if (st->context) {
    co.cuda.device = context_device_id(st->context);
    co.cuda.context = gst_cuda_context_get_handle(st->context);
    co.cuda.stream = st->stream.handle();
  } else {
    co.cuda.device = s.device_id;
  }
  try {
    ContextScope scope(st->context);
    auto consumer = std::make_unique<Consumer>(co);
    GST_OBJECT_LOCK(self);
    st->consumer = std::move(consumer);
    GST_OBJECT_UNLOCK(self);
  } catch (const Error& e) {
    post_core_error(GST_ELEMENT(self), e, s.socket_path.c_str());
    st->stream.reset();
    gst_clear_object(&st->context);
    return false;
  }
  return true;
}

static gboolean gst_cuda_ipc_ring_src_start(GstBaseSrc* src) {
  auto* self = GST_CUDA_IPC_RING_SRC(src);
  SrcState* st = self->st;
  GST_OBJECT_LOCK(self);
  const Settings s = st->settings;
  GST_OBJECT_UNLOCK(self);
  st->format = StreamFormat{};
  st->need_negotiate = false;
  st->discont = true;
  st->timeline.reset();
  st->connect_started = monotonic_now_ns();
  st->told_waiting = false;
  st->meta_filter = MetaFilter(s.forward_metas);
  st->metas_received.store(0);
  st->metas_unknown.store(0);
  st->metas_bad.store(0);
  st->metas_filtered.store(0);
  st->warned_bad_metas = false;
  st->told_version_gaps = 0;
  st->refusal.clear();
  return TRUE;
}

static gboolean gst_cuda_ipc_ring_src_stop(GstBaseSrc* src) {
  auto* self = GST_CUDA_IPC_RING_SRC(src);
  SrcState* st = self->st;
  std::unique_ptr<Consumer> consumer;
  GST_OBJECT_LOCK(self);
  consumer = std::move(st->consumer);
  GST_OBJECT_UNLOCK(self);
  clear_pools(st);
  {
    ContextScope scope(st->context);
    consumer.reset();  // buffers still downstream keep their own imports alive
  }
  st->stream.reset();
  gst_clear_object(&st->context);
  return TRUE;
}

// The consumer is made here, before basesrc starts the source, rather than in start(): a start()
// that fails is followed by basesrc's own error, "state change failed and some element failed to
// post a proper error message", which would stand beside ours as if the cause were unknown.
static GstStateChangeReturn gst_cuda_ipc_ring_src_change_state(GstElement* element,
                                                               GstStateChange transition) {
  auto* self = GST_CUDA_IPC_RING_SRC(element);
  if (transition == GST_STATE_CHANGE_READY_TO_PAUSED && !open_consumer(self))
    return GST_STATE_CHANGE_FAILURE;
  const GstStateChangeReturn ret =
      GST_ELEMENT_CLASS(parent_class)->change_state(element, transition);
  if (transition == GST_STATE_CHANGE_READY_TO_PAUSED && ret == GST_STATE_CHANGE_FAILURE)
    gst_cuda_ipc_ring_src_stop(GST_BASE_SRC(self));
  return ret;
}

static gboolean gst_cuda_ipc_ring_src_unlock(GstBaseSrc* src) {
  auto* self = GST_CUDA_IPC_RING_SRC(src);
  self->st->flushing.store(true);
  GST_OBJECT_LOCK(self);
  if (self->st->consumer) self->st->consumer->interrupt();
  GST_OBJECT_UNLOCK(self);
  return TRUE;
}

static gboolean gst_cuda_ipc_ring_src_unlock_stop(GstBaseSrc* src) {
  // A leftover interrupt makes one next() return early; create() then simply waits again.
  GST_CUDA_IPC_RING_SRC(src)->st->flushing.store(false);
  return TRUE;
}

// Caps and latency queries come from any thread: read the stream format under the lock.
static StreamFormat current_format(GstCudaIpcRingSrc* self) {
  GST_OBJECT_LOCK(self);
  StreamFormat f = self->st->format;
  GST_OBJECT_UNLOCK(self);
  return f;
}

static GstCaps* gst_cuda_ipc_ring_src_get_caps(GstBaseSrc* src, GstCaps* filter) {
  auto* self = GST_CUDA_IPC_RING_SRC(src);
  const StreamFormat f = current_format(self);
  GstCaps* caps = f.valid ? offered_caps(f) : template_caps();
  if (filter) {
    GstCaps* both = gst_caps_intersect_full(filter, caps, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref(caps);
    caps = both;
  }
  return caps;
}

static gboolean gst_cuda_ipc_ring_src_negotiate(GstBaseSrc* src) {
  auto* self = GST_CUDA_IPC_RING_SRC(src);
  SrcState* st = self->st;
  if (!st->format.valid) return TRUE;  // caps come with the producer's first format
  GstCaps* ours = offered_caps(st->format);
  GstCaps* answer = gst_pad_peer_query_caps(GST_BASE_SRC_PAD(src), ours);
  // Our order, not the peer's: CUDA memory wherever downstream takes it (cudadownload lists
  // system memory first once a capsfilter follows it).
  GstCaps* peer = gst_caps_intersect_full(ours, answer, GST_CAPS_INTERSECT_FIRST);
  gst_caps_unref(answer);
  gst_caps_unref(ours);
  if (gst_caps_is_empty(peer)) {
    gst_caps_unref(peer);
    GST_ELEMENT_ERROR(
        self, STREAM, FORMAT,
        ("Downstream accepts none of the producer's formats (%s).", st->format.caps_text.c_str()),
        (nullptr));
    return FALSE;
  }
  GstCaps* caps = gst_caps_fixate(peer);
  GstCapsFeatures* f = gst_caps_get_features(caps, 0);
  st->out_cuda = f && gst_caps_features_contains(f, kCudaMemoryFeature);
  bool ok = true;
  clear_pools(st);  // made again for the new layout
  if (st->out_cuda && !st->import) {
    st->copy_pool = cuda_copy_pool_new(st->context, caps, st->format, st->stream);
    if (!st->copy_pool) {
      GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("Could not allocate CUDA buffers for copies."),
                        ("caps %" GST_PTR_FORMAT, caps));
      ok = false;
    }
  }
  GST_INFO_OBJECT(self, "negotiated %" GST_PTR_FORMAT, caps);
  ok = ok && gst_base_src_set_caps(src, caps);
  gst_caps_unref(caps);
  return ok;
}

static gboolean gst_cuda_ipc_ring_src_query(GstBaseSrc* src, GstQuery* query) {
  auto* self = GST_CUDA_IPC_RING_SRC(src);
  SrcState* st = self->st;
  switch (GST_QUERY_TYPE(query)) {
    case GST_QUERY_CONTEXT:
      if (gst_cuda_handle_context_query(GST_ELEMENT(self), query, st->context)) return TRUE;
      break;
    case GST_QUERY_LATENCY: {
      GST_OBJECT_LOCK(self);
      const bool live = st->settings.is_live;
      GST_OBJECT_UNLOCK(self);
      // A frame can be shown one frame duration after it was meant to be, at most.
      const StreamFormat f = current_format(self);
      GstClockTime min = 0;
      if (f.is_video && GST_VIDEO_INFO_FPS_N(&f.video) > 0)
        min = gst_util_uint64_scale_int(GST_SECOND, GST_VIDEO_INFO_FPS_D(&f.video),
                                        GST_VIDEO_INFO_FPS_N(&f.video));
      gst_query_set_latency(query, live, min, GST_CLOCK_TIME_NONE);
      return TRUE;
    }
    default:
      break;
  }
  return GST_BASE_SRC_CLASS(parent_class)->query(src, query);
}

// Validates the producer's new format (untrusted) and notes what changed.
static bool take_format(GstCudaIpcRingSrc* self, const Event& ev) {
  SrcState* st = self->st;
  StreamFormat f;
  FormatRefusal why = FormatRefusal::malformed;
  std::string message;
  if (!read_stream_format(ev, st->consumer->memory_kind() == MemoryKind::cuda,
                          st->context != nullptr, &f, &why, &message)) {
    switch (why) {
      case FormatRefusal::malformed:
        GST_ELEMENT_ERROR(self, STREAM, DECODE,
                          ("The producer's stream format is unusable: %s", message.c_str()),
                          ("caps text: %s", ev.format.caps.c_str()));
        break;
      case FormatRefusal::no_cuda:
        GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND, ("%s", message.c_str()), (nullptr));
        break;
      case FormatRefusal::too_large:
        GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("%s", message.c_str()), (nullptr));
        break;
    }
    return false;
  }
  const bool caps_changed = !st->format.valid || f.caps_text != st->format.caps_text ||
                            f.tensor != st->format.tensor || f.cuda != st->format.cuda;
  const bool tags_changed = f.tags != st->format.tags;
  GST_OBJECT_LOCK(self);
  st->format = f;
  GST_OBJECT_UNLOCK(self);
  if (caps_changed) st->need_negotiate = true;
  if (tags_changed && !f.tags.empty()) {
    if (GstTagList* tags = gst_tag_list_new_from_string(f.tags.c_str()))
      gst_pad_push_event(GST_BASE_SRC_PAD(self), gst_event_new_tag(tags));
  }
  GST_INFO_OBJECT(self, "producer format (generation %" G_GUINT64_FORMAT "): %s, %s",
                  static_cast<guint64>(ev.generation), f.caps_text.c_str(),
                  to_string(f.tensor).c_str());
  return true;
}

// PTS (docs/elements.md, "Timestamps"), duration, offset, flags and reference timestamps.
static void set_timestamps(GstCudaIpcRingSrc* self, GstBuffer* buf, const FrameDesc& d,
                           std::uint64_t acquired_ns) {
  SrcState* st = self->st;
  TimingRecord t{};
  const bool has = read_timing(d.user_meta, d.user_meta_size, &t);
  GstClockTime pts = GST_CLOCK_TIME_NONE;
  const bool live = gst_base_src_is_live(GST_BASE_SRC(self));
  if (live)
    pts = live_running_time(GST_ELEMENT(self), has ? t.render_mono_ns : 0);
  else if (has && GST_CLOCK_TIME_IS_VALID(t.running_time))
    pts = t.running_time;
  else if (d.pts != kNoTime)
    pts = d.pts;
  GST_BUFFER_PTS(buf) = pts;
  GST_BUFFER_DTS(buf) = GST_CLOCK_TIME_NONE;
  GST_BUFFER_DURATION(buf) = d.duration != kNoTime ? d.duration : GST_CLOCK_TIME_NONE;
  GstClockTime last_end = GST_CLOCK_TIME_NONE;
  if (!live && st->timeline.went_back(pts, GST_BUFFER_DURATION(buf), &last_end)) {
    GST_OBJECT_LOCK(self);
    const GstSegment current = GST_BASE_SRC(self)->segment;
    GST_OBJECT_UNLOCK(self);
    GstSegment next;
    if (TimelineFollower::next_segment(current, last_end, pts, &next)) {
      GST_DEBUG_OBJECT(self, "the producer's time went back to %" GST_TIME_FORMAT ": a new segment",
                       GST_TIME_ARGS(pts));
      gst_base_src_new_segment(GST_BASE_SRC(self), &next);
      st->discont = true;
    }
  }
  GST_BUFFER_OFFSET(buf) = d.seq;
  set_reference_times(
      buf, FrameStamps{d.pts, d.publish_time_ns, has ? t.chain_mono_ns : 0, acquired_ns});
  set_frame_flags(buf, st->discont ? d.flags | kFlagDiscont : d.flags);
  st->discont = false;
}

// Import: the frame's slot as a buffer of the frame pool, which holds the lease until downstream
// frees it. A pool serves one slot set and layout; a frame of another gets a new pool (buffers
// still downstream keep the old one alive).
static GstBuffer* import_frame(SrcState* st, Frame& frame, const TensorDesc& t,
                               std::uint64_t span) {
  if (!st->frame_pool || !frame_pool_fits(st->frame_pool, frame, t, span)) {
    clear_pool(&st->frame_pool);
    FrameLayout layout;
    layout.slot_memory = frame.slot_memory();
    layout.tensor = t;
    layout.span = span;
    layout.is_video = st->format.is_video;
    layout.video = st->format.video;
    if (st->format.cuda) {
      layout.context = st->context;
#if GST_CHECK_VERSION(1, 24, 0)
      layout.stream = st->stream.gst_stream();
#endif
    }
    st->frame_pool = frame_pool_new(layout);
    if (!st->frame_pool) return nullptr;
  }
  GstBuffer* buf = frame_pool_take(st->frame_pool, frame);
#if GST_CHECK_VERSION(1, 24, 0)
  // The consumer's stream waits for the producer's write; readers order after that stream. The
  // memory holds a new frame: a copy the CPU mapped earlier (its staging) is stale.
  if (buf && st->format.cuda)
    GST_MINI_OBJECT_FLAG_SET(
        gst_buffer_peek_memory(buf, 0),
        GST_CUDA_MEMORY_TRANSFER_NEED_SYNC | GST_CUDA_MEMORY_TRANSFER_NEED_DOWNLOAD);
#endif
  return buf;
}

static GstBufferPool* system_pool_for(SrcState* st, std::uint64_t span) {
  if (st->system_pool && st->system_span == span) return st->system_pool;
  clear_pool(&st->system_pool);
  st->system_pool = system_pool_new(span);
  st->system_span = st->system_pool ? span : 0;
  return st->system_pool;
}

// Builds the output buffer for a leased frame, consuming the lease (kept in the buffer, or
// released after a copy).
static GstFlowReturn make_buffer(GstCudaIpcRingSrc* self, Frame frame, std::uint64_t acquired_ns,
                                 GstBuffer** out) {
  SrcState* st = self->st;
  const FrameDesc& d = frame.desc();
  const TensorDesc t = d.tensor;
  const bool cuda = st->format.cuda;
  std::string error;
  if (!check_frame_tensor(st->format.is_video ? &st->format.video : nullptr, st->format.tensor,
                          st->format.max_frame_size, t, &error)) {
    GST_ELEMENT_ERROR(self, STREAM, DECODE,
                      ("The producer sent a malformed frame: %s", error.c_str()), (nullptr));
    return GST_FLOW_ERROR;
  }
  const std::uint64_t span = frame_span(st->format, t);
  // An import moves the frame (and its lease) into the buffer's pool: the area stays valid.
  const std::uint8_t* metas = frame.metas();
  const std::uint32_t metas_size = frame.metas_size();
  ContextScope scope(cuda ? st->context : nullptr);
  Copied copy;
  copy.tensor = t;
  int device = -1;
  if ((!cuda && !st->copy_host) || (cuda && st->out_cuda && st->import)) {
    copy.data = frame.slot_address() + t.byte_offset;
    copy.buf = import_frame(st, frame, t, span);
    if (!copy.buf) {
      GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("Could not wrap a slot as a buffer."),
                        ("slot %u", frame.slot()));
      return GST_FLOW_ERROR;
    }
  } else if (cuda && st->out_cuda) {
    if (!copy_to_cuda(st->copy_pool, frame, st->format,
                      static_cast<CUstream>(st->consumer->cuda_stream()), st->order, &copy,
                      &error)) {
      GST_ELEMENT_ERROR(self, RESOURCE, READ, ("Could not copy a frame: %s", error.c_str()),
                        (nullptr));
      return GST_FLOW_ERROR;
    }
  } else {
    GstBufferPool* pool = system_pool_for(st, span);
    if (!pool ||
        !copy_to_system(pool, frame, span, cuda, static_cast<CUstream>(st->consumer->cuda_stream()),
                        &copy, &error)) {
      GST_ELEMENT_ERROR(self, RESOURCE, READ,
                        ("Could not %s a frame: %s", cuda ? "download" : "copy", error.c_str()),
                        (nullptr));
      return GST_FLOW_ERROR;
    }
    if (st->format.is_video) set_video_meta(copy.buf, st->format.video, t);
  }
  if (st->format.tensors.size() > 1) copy.buf = split_tensors(copy.buf, st->format.tensors);
  add_metas(self, metas, metas_size, copy.buf);
  // A copy's lease ends here, ordered after the copy on the GPU; an import's buffer holds it.
  frame.release();
  if (cuda && st->out_cuda) device = context_device_id(st->context);
  set_tensor_meta(copy.buf, copy.tensor, copy.data, device, d.seq);
  // Several tensors: a tensor meta for each of the others too, in order, at their offsets.
  for (std::size_t i = 1; i < st->format.tensors.size(); ++i) {
    const TensorDesc& t = st->format.tensors[i];
    add_tensor_meta_for(copy.buf, t, copy.data - copy.tensor.byte_offset + t.byte_offset, device,
                        d.seq);
  }
  set_timestamps(self, copy.buf, d, acquired_ns);
  *out = copy.buf;
  return GST_FLOW_OK;
}

static GstFlowReturn gst_cuda_ipc_ring_src_create(GstPushSrc* psrc, GstBuffer** out) {
  auto* self = GST_CUDA_IPC_RING_SRC(psrc);
  SrcState* st = self->st;
  GST_OBJECT_LOCK(self);
  const Settings s = st->settings;
  GST_OBJECT_UNLOCK(self);
  for (;;) {
    Event ev;
    try {
      ContextScope scope(st->context);
      ev = st->consumer->next(kWaitSlice);
    } catch (const Error& e) {
      post_core_error(GST_ELEMENT(self), e, s.socket_path.c_str());
      return GST_FLOW_ERROR;
    }
    const std::uint64_t acquired_ns = monotonic_now_ns();
    switch (ev.type) {
      case EventType::frame:
        if (!st->format.valid) continue;  // cannot happen: the core sends the format first
        if (st->need_negotiate) {
          st->need_negotiate = false;
          if (!gst_base_src_negotiate(GST_BASE_SRC(self))) return GST_FLOW_NOT_NEGOTIATED;
        }
        return make_buffer(self, std::move(ev.frame), acquired_ns, out);
      case EventType::format:
        st->refusal.clear();  // connected
        if (!take_format(self, ev)) return GST_FLOW_ERROR;
        continue;
      case EventType::eos:
        GST_INFO_OBJECT(self, "end of stream from the producer");
        return GST_FLOW_EOS;
      case EventType::interrupted:
        if (st->flushing.load()) return GST_FLOW_FLUSHING;
        continue;  // a stale wake-up from an earlier unlock()
      case EventType::disconnected:
        if (ev.refused) {
          // A producer is there but turns us away for now (it has no file descriptors left,
          // every place is taken): the core keeps trying, and the application hears why.
          GST_ELEMENT_WARNING(self, RESOURCE, BUSY,
                              ("The producer on %s does not serve this source yet; retrying: %s",
                               s.socket_path.c_str(), ev.message.c_str()),
                              (nullptr));
          st->refusal = ev.message;
          continue;
        }
        if (!s.reconnect) {
          GST_ELEMENT_ERROR(self, RESOURCE, READ,
                            ("The producer on %s went away (%s) and reconnect is off.",
                             s.socket_path.c_str(), ev.message.c_str()),
                            (nullptr));
          return GST_FLOW_ERROR;
        }
        // On the bus, as docs/elements.md says: gst-launch-1.0 shows why the frames stopped.
        GST_ELEMENT_WARNING(self, RESOURCE, READ,
                            ("The producer on %s went away (%s); waiting for a new one there "
                             "(reconnect=true).",
                             s.socket_path.c_str(), ev.message.c_str()),
                            (nullptr));
        st->discont = true;
        st->connect_started = monotonic_now_ns();
        continue;
      case EventType::timeout:
        // A source started before its producer waits (for ever without connect-timeout): say so
        // once, and for which path, so a mistyped socket-path does not look like a hang.
        if (!st->consumer->connected() && !st->told_waiting &&
            monotonic_now_ns() - st->connect_started >= kTellWaitingAfterNs) {
          st->told_waiting = true;
          // A path whose directory is missing is most often a variable that was not set
          // ($XDG_RUNTIME_DIR/cudaipc/...): the producer's directory is named so the user sees it.
          const std::string dir = std::filesystem::path(s.socket_path).parent_path().string();
          std::error_code ec;
          const std::string missing =
              !dir.empty() && !std::filesystem::is_directory(dir, ec)
                  ? " Its directory " + dir +
                        " does not exist: a producer there would make it (check the path, and "
                        "that the variables it was made from were set)."
                  : std::string();
          gchar* text =
              s.connect_timeout > 0
                  ? g_strdup_printf(
                        "Waiting for a cudaipc producer on %s (up to connect-timeout, "
                        "%" GST_TIME_FORMAT ").%s",
                        s.socket_path.c_str(), GST_TIME_ARGS(s.connect_timeout), missing.c_str())
                  : g_strdup_printf(
                        "Waiting for a cudaipc producer on %s (connect-timeout=0: "
                        "until one starts there).%s",
                        s.socket_path.c_str(), missing.c_str());
          GST_ELEMENT_INFO(self, RESOURCE, OPEN_READ, ("%s", text), ("%s", text));
          g_free(text);
        }
        if (!st->consumer->connected() && s.connect_timeout > 0 &&
            monotonic_now_ns() - st->connect_started > s.connect_timeout) {
          if (!st->refusal.empty()) {
            GST_ELEMENT_ERROR(
                self, RESOURCE, BUSY,
                ("The cudaipc producer on %s did not serve this source within "
                 "%" GST_TIME_FORMAT ": %s",
                 s.socket_path.c_str(), GST_TIME_ARGS(s.connect_timeout), st->refusal.c_str()),
                (nullptr));
            return GST_FLOW_ERROR;
          }
          GST_ELEMENT_ERROR(self, RESOURCE, OPEN_READ,
                            ("No cudaipc producer on %s within %" GST_TIME_FORMAT
                             ". Start the producing pipeline or raise connect-timeout.",
                             s.socket_path.c_str(), GST_TIME_ARGS(s.connect_timeout)),
                            (nullptr));
          return GST_FLOW_ERROR;
        }
        continue;
    }
  }
}

static void gst_cuda_ipc_ring_src_finalize(GObject* object) {
  auto* self = GST_CUDA_IPC_RING_SRC(object);
  std::unique_ptr<SrcState> reclaim(self->st);
  self->st = nullptr;
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

static void gst_cuda_ipc_ring_src_init(GstCudaIpcRingSrc* self) {
  self->st = std::make_unique<SrcState>().release();  // reclaimed in finalize
  gst_base_src_set_format(GST_BASE_SRC(self), GST_FORMAT_TIME);
  gst_base_src_set_live(GST_BASE_SRC(self), TRUE);
}

static void gst_cuda_ipc_ring_src_class_init(GstCudaIpcRingSrcClass* klass) {
  GObjectClass* gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass* element_class = GST_ELEMENT_CLASS(klass);
  GstBaseSrcClass* basesrc_class = GST_BASE_SRC_CLASS(klass);
  GstPushSrcClass* pushsrc_class = GST_PUSH_SRC_CLASS(klass);

  gobject_class->set_property = gst_cuda_ipc_ring_src_set_property;
  gobject_class->get_property = gst_cuda_ipc_ring_src_get_property;
  gobject_class->finalize = gst_cuda_ipc_ring_src_finalize;

  install_src_properties(gobject_class);
  g_object_class_install_property(
      gobject_class, PROP_STATS,
      g_param_spec_boxed("stats", "Statistics",
                         "connected, delivered, skipped, producer-published, producer-dropped; "
                         "CUDA: gpu-waits (frames taken before the producer's GPU had written "
                         "them) and gpu-releases (releases the GPU wrote after reads still "
                         "queued), each a switch between processes on a GPU without MPS",
                         GST_TYPE_STRUCTURE,
                         static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));

  gst_element_class_set_static_metadata(
      element_class, "CUDA IPC ring source", "Source/Video",
      "Receives CUDA or host frames, video or tensors, from a cudaipc producer in another "
      "process, zero-copy where possible",
      "cudaipc developers");
  GstCaps* caps = template_caps();
  gst_element_class_add_pad_template(
      element_class, gst_pad_template_new("src", GST_PAD_SRC, GST_PAD_ALWAYS, caps));
  gst_caps_unref(caps);
  element_class->set_context = gst_cuda_ipc_ring_src_set_context;
  element_class->change_state = gst_cuda_ipc_ring_src_change_state;

  basesrc_class->start = gst_cuda_ipc_ring_src_start;
  basesrc_class->stop = gst_cuda_ipc_ring_src_stop;
  basesrc_class->unlock = gst_cuda_ipc_ring_src_unlock;
  basesrc_class->unlock_stop = gst_cuda_ipc_ring_src_unlock_stop;
  basesrc_class->get_caps = gst_cuda_ipc_ring_src_get_caps;
  basesrc_class->negotiate = gst_cuda_ipc_ring_src_negotiate;
  basesrc_class->query = gst_cuda_ipc_ring_src_query;
  pushsrc_class->create = gst_cuda_ipc_ring_src_create;

  GST_DEBUG_CATEGORY_INIT(gst_cuda_ipc_ring_src_debug, "cudaipcsrc", 0, "cudaipcsrc");
  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_IPC_RING_CONSUME_MODE,
                              static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_IPC_RING_IO_MODE, static_cast<GstPluginAPIFlags>(0));
}
