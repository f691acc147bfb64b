/**
 * SECTION:element-cudaipcfilter
 * @title: cudaipcfilter
 *
 * Lets a model in another process act on the pipeline's frames as one element: each frame goes
 * to the model process through a cudaipc channel (zero-copy for the model, as with cudaipcsink),
 * and when the model's reply for that frame comes back, its results (analytics, tensor, custom
 * metas; docs/metas.md) are attached to the original buffer, which is pushed on with its
 * timestamps and metas intact. Up to max-inflight frames are out at once, so throughput is not one
 * round trip per frame; output order is input order. The model process can crash and restart:
 * frames whose results cannot come follow on-missing, and the pipeline never waits longer than
 * timeout on the model.
 *
 * Upstream writes each frame straight into the slot the model reads: the filter answers the
 * allocation query with its channel's slot pool (host channels; CUDA channels on GStreamer 1.24+,
 * for cudaupload, cudaconvert and decoders) and pushes that same buffer on, its slot kept out of
 * the ring until downstream frees it (downstream-buffers sizes the ring for what downstream
 * keeps). Other buffers are copied into a slot.
 *
 * The model side is a few lines with the Python package (cudaipc.Server) or the core library
 * (cudaipc::Server): it reads frames on socket-path and answers on socket-path.reply.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 filesrc location=cars.mp4 ! parsebin ! nvh264dec ! \
 *     cudaipcfilter socket-path=$XDG_RUNTIME_DIR/detector ! cudadownload ! \
 *     objectdetectionoverlay ! autovideosink
 * ]|
 */
#include "elements/gstcudaipcfilter.h"
#include "elements/property_checks.h"

#include <algorithm>
#include <atomic>
#include <bitset>
#include <memory>
#include <mutex>
#include <string>

#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "cudaipc/reply.hpp"
#include "elements/element_errors.h"
#include "elements/filter_state.h"
#include "elements/gstcudaipcsink.h"
#include "elements/thread_priority.h"
#include "format/caps_tensor.h"
#include "format/time_sync.h"
#include "memory/slot_pool.h"
#include "metas/meta_filter.h"

GST_DEBUG_CATEGORY(gst_cuda_ipc_filter_debug);
#define GST_CAT_DEFAULT gst_cuda_ipc_filter_debug

using namespace cudaipc;
using namespace cudaipc::gst;
using namespace cudaipc::gst::filter;

#define gst_cuda_ipc_filter_parent_class parent_class
G_DEFINE_TYPE(GstCudaIpcFilter, gst_cuda_ipc_filter, GST_TYPE_ELEMENT)
GST_ELEMENT_REGISTER_DEFINE(cudaipcfilter, "cudaipcfilter", GST_RANK_NONE, GST_TYPE_CUDA_IPC_FILTER)

static Settings settings_of(GstCudaIpcFilter* self) {
  GST_OBJECT_LOCK(self);
  Settings s = self->st->settings;
  GST_OBJECT_UNLOCK(self);
  return s;
}

// ---- Statistics ----

static GstStructure* filter_stats(GstCudaIpcFilter* self) {
  FilterState* st = self->st;
  const Counters& c = st->counts;
  auto n = [](const std::atomic<std::uint64_t>& v) {
    return static_cast<guint64>(v.load(std::memory_order_relaxed));
  };
  std::size_t consumers = 0;
  guint held = 0;
  std::uint32_t inflight = 0;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    inflight = st->pending.size();
  }
  GST_OBJECT_LOCK(self);
  if (st->producer) {
    consumers = st->producer->consumer_count();
    held = static_cast<guint>(std::bitset<64>(st->producer->stats().held).count());
  }
  GST_OBJECT_UNLOCK(self);
  return gst_structure_new(
      "cudaipcfilter-stats", "frames", G_TYPE_UINT64, n(c.frames), "sent", G_TYPE_UINT64, n(c.sent),
      "answered", G_TYPE_UINT64, n(c.answered), "passed", G_TYPE_UINT64, n(c.passed), "dropped",
      G_TYPE_UINT64, n(c.dropped), "timeouts", G_TYPE_UINT64, n(c.timeouts), "no-model",
      G_TYPE_UINT64, n(c.no_model), "model-lost", G_TYPE_UINT64, n(c.model_lost), "not-sent",
      G_TYPE_UINT64, n(c.not_sent), "replies-malformed", G_TYPE_UINT64, n(c.malformed),
      "replies-unknown", G_TYPE_UINT64, n(c.unknown), "replies-stale", G_TYPE_UINT64, n(c.stale),
      "replies-duplicate", G_TYPE_UINT64, n(c.duplicate), "replies-foreign", G_TYPE_UINT64,
      n(c.foreign), "metas-received", G_TYPE_UINT64, n(c.metas_received), "metas-unknown",
      G_TYPE_UINT64, n(c.metas_unknown), "metas-bad", G_TYPE_UINT64, n(c.metas_bad),
      "metas-filtered", G_TYPE_UINT64, n(c.metas_filtered), "in-place", G_TYPE_UINT64,
      n(c.in_place), "copied", G_TYPE_UINT64, n(c.copied), "inflight", G_TYPE_UINT, inflight,
      "slots-held", G_TYPE_UINT, held, "model-connected", G_TYPE_BOOLEAN,
      st->model_replying.load() && consumers > 0, "model-replying", G_TYPE_BOOLEAN,
      st->model_replying.load(), nullptr);
}

// ---- Upstream: frames in, sent to the model ----

// Whether a model process is there for a filter that finds none serving yet, asked once while
// none serves (it costs a few system calls): the model's reply channel is up (a server of this
// path, waiting to read the frames), or a server watches the channel's directory and is about to
// take it (directory_served). A filter with no model about plays on per on-missing at once.
static bool model_expected(GstCudaIpcFilter* self) {
  FilterState* st = self->st;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    if (st->model_wait_spent || st->model_looked_for) return false;
    st->model_looked_for = true;
  }
  if (st->model_replying.load(std::memory_order_relaxed)) return true;
  try {
    return directory_served(st->producer->path());
  } catch (const Error& e) {
    GST_WARNING_OBJECT(self, "cannot tell whether a model serves %s: %s",
                       st->producer->path().c_str(), e.what());
    return false;
  }
}

// Waits until every frame in flight has left (before a serialized event); false when flushing.
static bool drain(GstCudaIpcFilter* self) {
  FilterState* st = self->st;
  std::unique_lock<std::mutex> lock(st->mu);
  st->cv.wait(lock, [&] {
    return st->flushing || (st->pending.empty() && !st->pushing()) || st->flow != GST_FLOW_OK;
  });
  return !st->flushing;
}

// A buffer upstream wrote into a lent slot that goes on unsent (no model serves): its write ends
// unpublished, so the ring can publish other frames, and the slot stays held (its memory is the
// buffer's) until the buffer is freed downstream.
static void end_unsent_lend(FilterState* st, GstBuffer* buf) {
  if (WriteSlot* slot = slot_of(buf, st->producer.get())) {
    st->producer->abort(*slot);
    mark_rendered(buf);  // the pool lends again
  }
}

static GstFlowReturn gst_cuda_ipc_filter_chain(GstPad*, GstObject* parent, GstBuffer* buf) {
  auto* self = GST_CUDA_IPC_FILTER(parent);
  FilterState* st = self->st;
  GST_OBJECT_LOCK(self);
  const GstCudaIpcFilterMissing policy = st->settings.on_missing;
  const guint64 timeout = st->settings.timeout;
  GST_OBJECT_UNLOCK(self);
  st->counts.frames.fetch_add(1, std::memory_order_relaxed);
  {
    std::unique_lock<std::mutex> lock(st->mu);
    st->cv.wait(lock,
                [&] { return st->flushing || !st->pending.full() || st->flow != GST_FLOW_OK; });
    if (st->flushing || st->flow != GST_FLOW_OK) {
      const GstFlowReturn ret = st->flushing ? GST_FLOW_FLUSHING : st->flow;
      lock.unlock();
      gst_buffer_unref(buf);
      return ret;
    }
  }
  auto serving = [st] {
    return st->model_replying.load(std::memory_order_relaxed) && st->producer->consumer_count() > 0;
  };
  bool model = serving();
  if (!model && (policy == GST_CUDA_IPC_FILTER_MISSING_WAIT || model_expected(self))) {
    // A model process that is starting (or restarting), or that is there and about to take the
    // channel, gets one timeout to come; the frames after that pass at once until a model serves
    // again.
    std::unique_lock<std::mutex> lock(st->mu);
    if (!st->model_wait_spent) {
      const std::uint64_t until = monotonic_now_ns() + timeout;
      while (!st->flushing && !(model = serving()) && monotonic_now_ns() < until)
        st->cv.wait_for(lock, std::chrono::milliseconds(2));
      if (st->flushing) {
        lock.unlock();
        gst_buffer_unref(buf);
        return GST_FLOW_FLUSHING;
      }
      if (!model) {
        st->model_wait_spent = true;
        st->counts.timeouts.fetch_add(1, std::memory_order_relaxed);
        GST_INFO_OBJECT(self, "no model process served within timeout: frames pass on");
      }
    }
  }
  if (!model) {
    st->counts.no_model.fetch_add(1, std::memory_order_relaxed);
    if (policy == GST_CUDA_IPC_FILTER_MISSING_DROP) {
      st->counts.dropped.fetch_add(1, std::memory_order_relaxed);
      gst_buffer_unref(buf);
      return GST_FLOW_OK;
    }
    end_unsent_lend(st, buf);
    {
      std::lock_guard<std::mutex> lock(st->mu);
      st->pending.add_unsent(buf);
    }
    st->cv.notify_all();  // the task pushes it on (woken out of the lock: see below)
    return GST_FLOW_OK;
  }

  // Upstream wrote into a slot lent through the allocation query: the inner sink only commits it.
  const bool lent = slot_of(buf, st->producer.get()) != nullptr;
  const std::uint64_t before = st->producer->last_seq();
  const GstFlowReturn ret = gst_pad_push(st->proxy, gst_buffer_ref(buf));
  if (ret != GST_FLOW_OK) {
    gst_buffer_unref(buf);
    return ret;
  }
  const Producer::Stamp sent = st->producer->last_frame();
  if (sent.seq == before) end_unsent_lend(st, buf);
  {
    std::lock_guard<std::mutex> lock(st->mu);
    if (sent.seq == before) {
      // The channel had no free slot within timeout (the model holds them all): not sent.
      st->counts.not_sent.fetch_add(1, std::memory_order_relaxed);
      st->pending.add_unsent(buf);
    } else {
      st->counts.sent.fetch_add(1, std::memory_order_relaxed);
      (lent ? st->counts.in_place : st->counts.copied).fetch_add(1, std::memory_order_relaxed);
      st->pending.add_sent(buf, sent.seq, sent.publish_time_ns, monotonic_now_ns() + timeout);
      st->queued_seq = sent.seq;
    }
  }
  // The task, and a reply already read for this frame. Woken out of the lock: a pushing thread
  // with a shorter slice (time-slice) takes this CPU as it wakes, and this thread, preempted
  // while holding the lock, would keep both pushing threads waiting for it behind the CPU's
  // other threads (the way back's tail after the reply's read, docs/design.md).
  st->cv.notify_all();
  return GST_FLOW_OK;
}

static void set_flushing(GstCudaIpcFilter* self, bool flushing) {
  FilterState* st = self->st;
  std::lock_guard<std::mutex> lock(st->mu);
  st->flushing = flushing;
  if (!flushing) {
    st->flow = GST_FLOW_OK;
    st->pusher = {};
    ++st->flushes;
  }
  st->cv.notify_all();
}

// The task in the reply channel's wait returns at once (it does not read while flushing), so
// pausing or stopping it does not wait for a reply.
static void stop_task_reading(GstCudaIpcFilter* self) {
  if (self->st->replies) self->st->replies->interrupt();
}

static gboolean start_task(GstCudaIpcFilter* self) {
  return gst_pad_start_task(self->srcpad, reinterpret_cast<GstTaskFunction>(task_loop), self,
                            nullptr);
}

static gboolean gst_cuda_ipc_filter_sink_event(GstPad* pad, GstObject* parent, GstEvent* event) {
  auto* self = GST_CUDA_IPC_FILTER(parent);
  FilterState* st = self->st;
  switch (GST_EVENT_TYPE(event)) {
    case GST_EVENT_FLUSH_START:
      set_flushing(self, true);
      gst_pad_push_event(st->proxy, gst_event_ref(event));  // a render waiting for a slot returns
      gst_pad_push_event(self->srcpad, event);
      stop_task_reading(self);
      gst_pad_pause_task(self->srcpad);
      return TRUE;
    case GST_EVENT_FLUSH_STOP: {
      gst_pad_push_event(st->proxy, gst_event_ref(event));
      // The reader's push of a frame from before the flush has returned (downstream flushed).
      wait_for_push(st);
      {
        std::lock_guard<std::mutex> lock(st->mu);
        st->pending.clear();
      }
      set_flushing(self, false);
      const gboolean ok = gst_pad_push_event(self->srcpad, event);
      start_task(self);
      return ok;
    }
    default:
      break;
  }
  if (!GST_EVENT_IS_SERIALIZED(event)) return gst_pad_event_default(pad, parent, event);
  // In order with the frames: every frame before the event leaves first.
  if (!drain(self)) {
    gst_event_unref(event);
    return FALSE;
  }
  if (GST_EVENT_IS_STICKY(event) || GST_EVENT_TYPE(event) == GST_EVENT_EOS) {
    // The model sees the stream's caps, segment, tags and EOS too.
    if (!gst_pad_push_event(st->proxy, gst_event_ref(event)) &&
        GST_EVENT_TYPE(event) == GST_EVENT_CAPS) {
      gst_event_unref(event);
      return FALSE;  // the channel refused the caps (its error says why)
    }
  }
  return gst_pad_push_event(self->srcpad, event);
}

static gboolean gst_cuda_ipc_filter_sink_query(GstPad* pad, GstObject* parent, GstQuery* query) {
  auto* self = GST_CUDA_IPC_FILTER(parent);
  FilterState* st = self->st;
  switch (GST_QUERY_TYPE(query)) {
    case GST_QUERY_CAPS: {
      // What downstream takes that the channel can carry: the buffers go on unchanged.
      GstCaps* filter = nullptr;
      gst_query_parse_caps(query, &filter);
      GstCaps* channel = st->sink ? gst_pad_query_caps(GST_BASE_SINK_PAD(st->sink), filter)
                                  : gst_pad_get_pad_template_caps(pad);
      GstCaps* down = gst_pad_peer_query_caps(self->srcpad, channel);
      gst_caps_unref(channel);
      gst_query_set_caps_result(query, down);
      gst_caps_unref(down);
      return TRUE;
    }
    case GST_QUERY_ACCEPT_CAPS: {
      GstCaps* caps = nullptr;
      gst_query_parse_accept_caps(query, &caps);
      const gboolean ok =
          (!st->sink || gst_pad_query_accept_caps(GST_BASE_SINK_PAD(st->sink), caps)) &&
          gst_pad_peer_query_accept_caps(self->srcpad, caps);
      gst_query_set_accept_caps_result(query, ok);
      return TRUE;
    }
    case GST_QUERY_ALLOCATION:
      // The inner sink answers: upstream writes into the channel's slots (its slot pool), which
      // the filter then pushes on downstream, each slot held until its buffer is freed. Not
      // forwarded downstream: a frame stays here while in flight, up to max-inflight at once,
      // which a downstream pool that lends one buffer at a time cannot allow.
      return st->sink && gst_pad_peer_query(st->proxy, query);
    default:
      return gst_pad_query_default(pad, parent, query);
  }
}

// Downstream asks what latency the stream has: the filter adds its timeout, the longest it holds a
// frame, so sinks that sync on the clock wait for the frames it holds instead of dropping them.
static gboolean gst_cuda_ipc_filter_src_query(GstPad* pad, GstObject* parent, GstQuery* query) {
  auto* self = GST_CUDA_IPC_FILTER(parent);
  if (GST_QUERY_TYPE(query) != GST_QUERY_LATENCY) return gst_pad_query_default(pad, parent, query);
  if (!gst_pad_peer_query(self->sinkpad, query)) return FALSE;
  gboolean live = FALSE;
  GstClockTime min = 0, max = GST_CLOCK_TIME_NONE;
  gst_query_parse_latency(query, &live, &min, &max);
  const GstClockTime timeout = settings_of(self).timeout;
  auto add = [](GstClockTime a, GstClockTime b) {
    return b >= GST_CLOCK_TIME_NONE - a ? GST_CLOCK_TIME_NONE - 1 : a + b;
  };
  min = add(min, timeout);
  if (GST_CLOCK_TIME_IS_VALID(max)) max = add(max, timeout);
  GST_DEBUG_OBJECT(self, "latency: live %d, min %" GST_TIME_FORMAT ", max %" GST_TIME_FORMAT, live,
                   GST_TIME_ARGS(min), GST_TIME_ARGS(max));
  gst_query_set_latency(query, live, min, max);
  return TRUE;
}

// The inner sink's queries (CUDA context, caps) go where the frames come from.
static gboolean gst_cuda_ipc_filter_proxy_query(GstPad* pad, GstObject*, GstQuery* query) {
  auto* self = static_cast<GstCudaIpcFilter*>(gst_pad_get_element_private(pad));
  return gst_pad_peer_query(self->sinkpad, query);
}

static gboolean gst_cuda_ipc_filter_src_activate_mode(GstPad*, GstObject* parent, GstPadMode mode,
                                                      gboolean active) {
  auto* self = GST_CUDA_IPC_FILTER(parent);
  if (mode != GST_PAD_MODE_PUSH) return FALSE;
  if (active) {
    set_flushing(self, false);
    return start_task(self);
  }
  set_flushing(self, true);
  stop_task_reading(self);
  // Downstream stopped first: a push in flight on the reader's thread has returned FLUSHING, and
  // is over before the pad can be active again.
  wait_for_push(self->st);
  return gst_pad_stop_task(self->srcpad);
}

// ---- The inner sink and the reply channel ----

// The inner sink's messages are ours: errors, warnings, infos and element messages reach the
// application posted by the filter itself (an application matches them against the element it
// made, and knows no child named "channel"); context requests go on as they are.
static GstMessage* as_own(GstCudaIpcFilter* self, GstMessage* msg) {
  GstObject* me = GST_OBJECT(self);
  const GstMessageType type = GST_MESSAGE_TYPE(msg);
  if (type == GST_MESSAGE_ELEMENT) {
    const GstStructure* s = gst_message_get_structure(msg);
    return s ? gst_message_new_element(me, gst_structure_copy(s)) : gst_message_ref(msg);
  }
  GError* err = nullptr;
  gchar* debug = nullptr;
  const GstStructure* details = nullptr;
  GstMessage* own = nullptr;
  if (type == GST_MESSAGE_ERROR) {
    gst_message_parse_error(msg, &err, &debug);
    gst_message_parse_error_details(msg, &details);
    own = gst_message_new_error_with_details(me, err, debug,
                                             details ? gst_structure_copy(details) : nullptr);
  } else if (type == GST_MESSAGE_WARNING) {
    gst_message_parse_warning(msg, &err, &debug);
    gst_message_parse_warning_details(msg, &details);
    own = gst_message_new_warning_with_details(me, err, debug,
                                               details ? gst_structure_copy(details) : nullptr);
  } else {
    gst_message_parse_info(msg, &err, &debug);
    gst_message_parse_info_details(msg, &details);
    own = gst_message_new_info_with_details(me, err, debug,
                                            details ? gst_structure_copy(details) : nullptr);
  }
  if (err) g_error_free(err);
  g_free(debug);
  return own;
}

static GstBusSyncReply forward_message(GstBus*, GstMessage* msg, gpointer data) {
  auto* self = static_cast<GstCudaIpcFilter*>(data);
  switch (GST_MESSAGE_TYPE(msg)) {
    case GST_MESSAGE_ERROR:
    case GST_MESSAGE_WARNING:
    case GST_MESSAGE_INFO:
    case GST_MESSAGE_ELEMENT:
      gst_element_post_message(GST_ELEMENT(self), as_own(self, msg));
      break;
    case GST_MESSAGE_NEED_CONTEXT:
    case GST_MESSAGE_HAVE_CONTEXT:
      gst_element_post_message(GST_ELEMENT(self), gst_message_ref(msg));
      break;
    default:
      break;
  }
  return GST_BUS_DROP;
}

static bool open_channel(GstCudaIpcFilter* self) {
  FilterState* st = self->st;
  const Settings s = settings_of(self);
  g_object_set(st->sink, "socket-path", s.socket_path.empty() ? nullptr : s.socket_path.c_str(),
               "num-slots", ring_slots(s), "cuda-device-id", s.device_id, "ipc-mode", s.ipc_mode,
               "socket-mode", s.socket_mode, "meta-size", s.meta_size, "forward-metas",
               s.forward_metas.c_str(), "block-timeout", s.timeout, nullptr);
  // The channel's own error (forwarded) says why it failed.
  if (gst_element_set_state(st->sink, GST_STATE_READY) == GST_STATE_CHANGE_FAILURE) return false;
  st->producer = gst_cuda_ipc_ring_sink_producer(GST_CUDA_IPC_RING_SINK(st->sink));
  if (!st->producer) {
    GST_ELEMENT_ERROR(self, RESOURCE, FAILED,
                      ("The filter's channel on %s has no producer after it started.",
                       s.socket_path.empty() ? "(default path)" : s.socket_path.c_str()),
                      (nullptr));
    return false;
  }
  st->reply_path = reply_path(st->producer->path());
  st->reply_filter = MetaFilter(s.reply_metas);
  try {
    ConsumerOptions co;
    co.path = st->reply_path;
    co.mode = ConsumeMode::every_frame;
    co.reconnect = true;
    co.reconnect_interval = std::chrono::milliseconds(20);
    st->replies = std::make_unique<Consumer>(co);
    // Connected at once: a model process serves this path already (its reply reader says so
    // when it reads the channel's format; the first frame must know now).
    st->model_replying.store(st->replies->connected());
    if (st->model_replying.load()) announce_model(self);
  } catch (const Error& e) {
    post_core_error(GST_ELEMENT(self), e, st->reply_path.c_str());
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->pending.reset(s.max_inflight);
    st->queued_seq = 0;
    st->model_wait_spent = false;
    st->model_looked_for = false;
  }
  st->counts.reset();
  st->warned_bad_reply = false;
  st->warned_bad_metas = false;
  st->warned_priority = false;
  st->told_version_gaps = 0;
  start_reply_reader(self);
  if (s.max_inflight + kSpareSlots + s.downstream_buffers > kMaxSlots)
    GST_WARNING_OBJECT(self, "ring of %u slots: max-inflight + downstream-buffers exceed it by %u",
                       kMaxSlots, s.max_inflight + kSpareSlots + s.downstream_buffers - kMaxSlots);
  GST_INFO_OBJECT(self, "frames on %s, results from %s, %u in flight, %u slots",
                  st->producer->path().c_str(), st->reply_path.c_str(), s.max_inflight,
                  ring_slots(s));
  return true;
}

static void close_channel(GstCudaIpcFilter* self) {
  FilterState* st = self->st;
  stop_reply_reader(self);
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->pending.clear();
  }
  st->replies.reset();
  GST_OBJECT_LOCK(self);
  st->producer.reset();
  GST_OBJECT_UNLOCK(self);
  gst_element_set_state(st->sink, GST_STATE_NULL);
}

// ---- The pushing threads' priority ----

void cudaipc::gst::filter::raise_pushing_thread(GstCudaIpcFilter* self) {
  ThreadPriority p;
  GST_OBJECT_LOCK(self);
  p.rt = self->st->settings.rt_priority;
  p.nice = self->st->settings.nice;
  p.slice_ns = self->st->settings.time_slice;
  GST_OBJECT_UNLOCK(self);
  if (!p.rt && !p.nice && !p.slice_ns) return;
  const std::string why = raise_thread_priority(p);
  if (why.empty()) {
    GST_DEBUG_OBJECT(
        self,
        "this pushing thread runs at rt-priority %u, nice %d, time-slice %" G_GUINT64_FORMAT " ns",
        p.rt, p.nice, static_cast<guint64>(p.slice_ns));
  } else if (!self->st->warned_priority.exchange(true)) {
    GST_ELEMENT_WARNING(self, RESOURCE, SETTINGS,
                        ("The threads that push answered frames on could not get the priority "
                         "asked for (rt-priority %u, nice %d, time-slice %" G_GUINT64_FORMAT
                         " ns): what was refused stays as it was.",
                         p.rt, p.nice, static_cast<guint64>(p.slice_ns)),
                        ("%s", why.c_str()));
  }
}

// The source pad's task says when it enters and leaves its thread, from that thread: raised on
// entering, and given back its scheduling on leaving, since GStreamer's pool lends the thread to
// other tasks afterwards. (Applications set their own threads' priorities on these messages.)
static gboolean gst_cuda_ipc_filter_post_message(GstElement* element, GstMessage* msg) {
  auto* self = GST_CUDA_IPC_FILTER(element);
  if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_STREAM_STATUS &&
      GST_MESSAGE_SRC(msg) == GST_OBJECT_CAST(self->srcpad)) {
    GstStreamStatusType type;
    GstElement* owner = nullptr;
    gst_message_parse_stream_status(msg, &type, &owner);
    if (type == GST_STREAM_STATUS_TYPE_ENTER)
      raise_pushing_thread(self);
    else if (type == GST_STREAM_STATUS_TYPE_LEAVE)
      restore_thread_priority();
  }
  return GST_ELEMENT_CLASS(parent_class)->post_message(element, msg);
}

static GstStateChangeReturn gst_cuda_ipc_filter_change_state(GstElement* element,
                                                             GstStateChange transition) {
  auto* self = GST_CUDA_IPC_FILTER(element);
  FilterState* st = self->st;
  switch (transition) {
    case GST_STATE_CHANGE_NULL_TO_READY:
      if (!open_channel(self)) {
        close_channel(self);
        return GST_STATE_CHANGE_FAILURE;
      }
      break;
    case GST_STATE_CHANGE_READY_TO_PAUSED:
      // The inner sink renders at once in every state (a filter works in PAUSED): never
      // prerolling, never syncing to the clock.
      gst_pad_set_active(st->proxy, TRUE);
      if (gst_element_set_state(st->sink, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
        GST_ELEMENT_ERROR(self, RESOURCE, FAILED,
                          ("The filter's channel on %s could not start rendering frames.",
                           st->producer->path().c_str()),
                          (nullptr));
        return GST_STATE_CHANGE_FAILURE;
      }
      break;
    default:
      break;
  }
  const GstStateChangeReturn ret =
      GST_ELEMENT_CLASS(parent_class)->change_state(element, transition);
  switch (transition) {
    case GST_STATE_CHANGE_PAUSED_TO_READY:
      gst_element_set_state(st->sink, GST_STATE_READY);
      gst_pad_set_active(st->proxy, FALSE);
      {
        std::lock_guard<std::mutex> lock(st->mu);
        st->pending.clear();
      }
      break;
    case GST_STATE_CHANGE_READY_TO_NULL:
      close_channel(self);
      break;
    default:
      break;
  }
  return ret;
}

static void gst_cuda_ipc_filter_set_context(GstElement* element, GstContext* context) {
  auto* self = GST_CUDA_IPC_FILTER(element);
  gst_element_set_context(self->st->sink, context);
  GST_ELEMENT_CLASS(parent_class)->set_context(element, context);
}

// ---- GObject ----

static void gst_cuda_ipc_filter_set_property(GObject* object, guint prop_id, const GValue* value,
                                             GParamSpec* pspec) {
  auto* self = GST_CUDA_IPC_FILTER(object);
  if (!property_write_allowed(GST_ELEMENT(object), pspec, value)) return;
  GST_OBJECT_LOCK(self);
  const bool known = set_filter_setting(self->st->settings, prop_id, value);
  GST_OBJECT_UNLOCK(self);
  if (!known) G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
  if (prop_id == PROP_RT_PRIORITY || prop_id == PROP_NICE || prop_id == PROP_TIME_SLICE)
    self->st->priority_asked.fetch_add(1, std::memory_order_release);
}

static void gst_cuda_ipc_filter_get_property(GObject* object, guint prop_id, GValue* value,
                                             GParamSpec* pspec) {
  auto* self = GST_CUDA_IPC_FILTER(object);
  if (prop_id == PROP_STATS) {
    g_value_take_boxed(value, filter_stats(self));
    return;
  }
  GST_OBJECT_LOCK(self);
  const bool known = get_filter_setting(self->st->settings, prop_id, value);
  GST_OBJECT_UNLOCK(self);
  if (!known) G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
}

static void gst_cuda_ipc_filter_init(GstCudaIpcFilter* self) {
  self->st = std::make_unique<FilterState>().release();  // reclaimed in finalize
  FilterState* st = self->st;
  GstElementClass* klass = GST_ELEMENT_GET_CLASS(self);
  self->sinkpad =
      gst_pad_new_from_template(gst_element_class_get_pad_template(klass, "sink"), "sink");
  gst_pad_set_chain_function(self->sinkpad, gst_cuda_ipc_filter_chain);
  gst_pad_set_event_function(self->sinkpad, gst_cuda_ipc_filter_sink_event);
  gst_pad_set_query_function(self->sinkpad, gst_cuda_ipc_filter_sink_query);
  gst_element_add_pad(GST_ELEMENT(self), self->sinkpad);
  self->srcpad = gst_pad_new_from_template(gst_element_class_get_pad_template(klass, "src"), "src");
  gst_pad_set_activatemode_function(self->srcpad, gst_cuda_ipc_filter_src_activate_mode);
  gst_pad_set_query_function(self->srcpad, gst_cuda_ipc_filter_src_query);
  GST_PAD_SET_PROXY_CAPS(self->srcpad);
  gst_element_add_pad(GST_ELEMENT(self), self->srcpad);

  st->sink =
      GST_ELEMENT(g_object_new(GST_TYPE_CUDA_IPC_RING_SINK, "name", "channel", "sync", FALSE,
                               "async", FALSE, "qos", FALSE, "enable-last-sample", FALSE, nullptr));
  gst_object_ref_sink(st->sink);
  // A model server answers only a channel that says it holds requests.
  gst_cuda_ipc_ring_sink_set_role(GST_CUDA_IPC_RING_SINK(st->sink), ChannelRole::requests);
  gst_object_set_parent(GST_OBJECT(st->sink), GST_OBJECT(self));
  st->bus = gst_bus_new();
  gst_bus_set_sync_handler(st->bus, forward_message, self, nullptr);
  gst_element_set_bus(st->sink, st->bus);
  st->proxy = gst_pad_new("proxy", GST_PAD_SRC);
  gst_pad_set_element_private(st->proxy, self);
  gst_pad_set_query_function(st->proxy, gst_cuda_ipc_filter_proxy_query);
  gst_pad_link_full(st->proxy, GST_BASE_SINK_PAD(st->sink), GST_PAD_LINK_CHECK_NOTHING);
}

static void gst_cuda_ipc_filter_finalize(GObject* object) {
  auto* self = GST_CUDA_IPC_FILTER(object);
  FilterState* st = self->st;
  stop_reply_reader(self);
  gst_element_set_state(st->sink, GST_STATE_NULL);
  gst_pad_unlink(st->proxy, GST_BASE_SINK_PAD(st->sink));
  gst_object_unref(st->proxy);
  gst_element_set_bus(st->sink, nullptr);
  gst_object_unparent(GST_OBJECT(st->sink));
  gst_object_unref(st->sink);
  gst_bus_set_sync_handler(st->bus, nullptr, nullptr, nullptr);
  gst_object_unref(st->bus);
  std::unique_ptr<FilterState> owned(st);
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

static void gst_cuda_ipc_filter_class_init(GstCudaIpcFilterClass* klass) {
  GObjectClass* gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass* element_class = GST_ELEMENT_CLASS(klass);
  gobject_class->set_property = gst_cuda_ipc_filter_set_property;
  gobject_class->get_property = gst_cuda_ipc_filter_get_property;
  gobject_class->finalize = gst_cuda_ipc_filter_finalize;

  install_filter_properties(gobject_class);
  g_object_class_install_property(
      gobject_class, PROP_STATS,
      g_param_spec_boxed(
          "stats", "Statistics",
          "frames, sent, answered (pushed with results), passed (pushed without), "
          "dropped, timeouts, no-model, model-lost, not-sent, replies-malformed/"
          "unknown/stale/duplicate/foreign (replies that answered no frame), "
          "metas-received/unknown/bad/filtered, in-place/copied (sent frames "
          "upstream wrote into lent slots / the filter copied), inflight, slots-held "
          "(lent slots whose buffers are not freed yet), "
          "model-connected",
          GST_TYPE_STRUCTURE, static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));

  gst_element_class_set_static_metadata(
      element_class, "CUDA IPC model filter", "Filter/Analyzer/Video",
      "Sends each frame to a model process over a cudaipc channel and pushes it on with the "
      "model's results attached as metas",
      "cudaipc developers");
  GstCaps* caps = template_caps();
  gst_element_class_add_pad_template(
      element_class, gst_pad_template_new("sink", GST_PAD_SINK, GST_PAD_ALWAYS, caps));
  gst_element_class_add_pad_template(
      element_class, gst_pad_template_new("src", GST_PAD_SRC, GST_PAD_ALWAYS, caps));
  gst_caps_unref(caps);
  element_class->change_state = gst_cuda_ipc_filter_change_state;
  element_class->set_context = gst_cuda_ipc_filter_set_context;
  element_class->post_message = gst_cuda_ipc_filter_post_message;

  GST_DEBUG_CATEGORY_INIT(gst_cuda_ipc_filter_debug, "cudaipcfilter", 0, "cudaipcfilter");
  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_IPC_FILTER_MISSING, static_cast<GstPluginAPIFlags>(0));
}
