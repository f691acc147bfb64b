// cudaipcfilter's source pad task: it reads the model's replies, attaches each one's results to
// its own frame's buffer, and pushes the frames on in input order once answered or given up on.
#include <gst/gst.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "cudaipc/error.hpp"
#include "elements/filter_state.h"
#include "format/time_sync.h"
#include "metas/meta_decoder.h"

#define GST_CAT_DEFAULT gst_cuda_ipc_filter_debug

namespace cudaipc::gst::filter {
namespace {

// A frame leaves: pushed on (answered, or missing under pass/wait) or dropped.
void finish_frame(GstCudaIpcFilter* self, PendingFrame f, GstCudaIpcFilterMissing policy) {
  FilterState* st = self->st;
  if (f.fate != FrameFate::answered && policy == GST_CUDA_IPC_FILTER_MISSING_DROP) {
    st->counts.dropped.fetch_add(1, std::memory_order_relaxed);
    GST_LOG_OBJECT(self, "frame %" G_GUINT64_FORMAT " dropped: no results", f.seq);
    gst_buffer_unref(f.buf);
    std::lock_guard<std::mutex> lock(st->mu);
    st->pushing = false;
    st->cv.notify_all();
    return;
  }
  (f.fate == FrameFate::answered ? st->counts.answered : st->counts.passed)
      .fetch_add(1, std::memory_order_relaxed);
  const GstFlowReturn ret = gst_pad_push(self->srcpad, f.buf);
  std::lock_guard<std::mutex> lock(st->mu);
  st->pushing = false;
  if (ret != GST_FLOW_OK) st->flow = ret;
  st->cv.notify_all();
}

// A reply: its tag matched to a frame, the results attached to that frame's buffer.
void take_reply(GstCudaIpcFilter* self, Frame& reply) {
  FilterState* st = self->st;
  const FrameDesc& d = reply.desc();
  std::unique_lock<std::mutex> lock(st->mu);
  PendingFrame* f = nullptr;
  ReplyMatch m = st->pending.match(d.user_meta, d.user_meta_size, &f);
  if (m.verdict == ReplyVerdict::unknown) {
    // Perhaps a frame chain() is publishing now: once it is queued, the reply is matched again.
    lock.unlock();
    std::lock_guard<std::mutex> published(st->publish_mu);
    lock.lock();
    m = st->pending.match(d.user_meta, d.user_meta_size, &f);
  }
  if (m.verdict != ReplyVerdict::matched) {
    std::atomic<std::uint64_t>* c = m.verdict == ReplyVerdict::malformed   ? &st->counts.malformed
                                    : m.verdict == ReplyVerdict::unknown   ? &st->counts.unknown
                                    : m.verdict == ReplyVerdict::duplicate ? &st->counts.duplicate
                                    : m.verdict == ReplyVerdict::foreign   ? &st->counts.foreign
                                                                           : &st->counts.stale;
    c->fetch_add(1, std::memory_order_relaxed);
    const bool warn = m.verdict != ReplyVerdict::stale && !st->warned_bad_reply;
    st->warned_bad_reply = st->warned_bad_reply || warn;
    lock.unlock();
    if (warn)
      GST_ELEMENT_WARNING(
          self, STREAM, DECODE,
          ("The model process sent a reply that answers no frame (%s, frame %" G_GUINT64_FORMAT
           "); it was dropped.",
           to_string(m.verdict), m.seq),
          ("later ones are counted in stats (replies-*)"));
    else
      GST_DEBUG_OBJECT(self, "reply dropped: %s (frame %" G_GUINT64_FORMAT ")",
                       to_string(m.verdict), m.seq);
    return;
  }
  // The frame stays queued until the task pops it, and only the task does: its buffer is ours.
  f->buf = gst_buffer_make_writable(f->buf);
  DecodeCounts dc;
  std::string error;
  decode_metas(reply.metas(), reply.metas_size(), st->reply_filter, f->buf, &dc, &error);
  lock.unlock();
  st->counts.metas_received.fetch_add(dc.received, std::memory_order_relaxed);
  st->counts.metas_unknown.fetch_add(dc.unknown, std::memory_order_relaxed);
  st->counts.metas_filtered.fetch_add(dc.filtered, std::memory_order_relaxed);
  if (dc.bad) {
    st->counts.metas_bad.fetch_add(dc.bad, std::memory_order_relaxed);
    GST_WARNING_OBJECT(self, "frame %" G_GUINT64_FORMAT ": %u malformed results dropped (%s)",
                       m.seq, dc.bad, error.c_str());
  }
}

}  // namespace

void task_loop(GstCudaIpcFilter* self) {
  FilterState* st = self->st;
  GST_OBJECT_LOCK(self);
  const GstCudaIpcFilterMissing policy = st->settings.on_missing;
  GST_OBJECT_UNLOCK(self);

  std::unique_lock<std::mutex> lock(st->mu);
  if (st->flushing) {
    lock.unlock();
    gst_pad_pause_task(self->srcpad);
    return;
  }
  const std::uint64_t now = monotonic_now_ns();
  if (!st->pending.empty()) {
    PendingFrame& head = st->pending.head();
    if (head.fate == FrameFate::awaiting && now >= head.deadline_ns) {
      head.fate = FrameFate::missing;
      st->counts.timeouts.fetch_add(1, std::memory_order_relaxed);
      GST_DEBUG_OBJECT(self, "frame %" G_GUINT64_FORMAT ": no reply within timeout", head.seq);
    }
    if (head.fate != FrameFate::awaiting) {
      PendingFrame f = st->pending.pop();
      st->pushing = true;
      st->cv.notify_all();  // room for chain()
      lock.unlock();
      finish_frame(self, f, policy);
      return;
    }
  }
  const std::uint64_t until = st->pending.empty()
                                  ? now + kIdlePollNs
                                  : std::min(st->pending.head().deadline_ns, now + kIdlePollNs);
  lock.unlock();

  Event e;
  try {
    e = st->replies->next(std::chrono::nanoseconds(until > now ? until - now : 0));
  } catch (const Error& err) {
    // A reply channel that breaks the protocol: this connection is dropped, and the frames out
    // are given up on like a model that died.
    GST_WARNING_OBJECT(self, "reply channel %s: %s", st->reply_path.c_str(), err.what());
    e.type = EventType::disconnected;
    e.message = err.what();
  }
  switch (e.type) {
    case EventType::frame:
      st->model_replying.store(true, std::memory_order_relaxed);
      take_reply(self, e.frame);
      e.frame.release();
      break;
    case EventType::format:
      if (!st->model_replying.exchange(true))
        GST_INFO_OBJECT(self, "a model process answers on %s", st->reply_path.c_str());
      break;
    case EventType::disconnected: {
      const bool was = st->model_replying.exchange(false);
      lock.lock();
      const std::uint32_t lost = st->pending.give_up_all();
      lock.unlock();
      st->counts.model_lost.fetch_add(lost, std::memory_order_relaxed);
      if (was || lost)
        GST_ELEMENT_INFO(self, RESOURCE, READ,
                         ("The model process left (%s); %u frame(s) in flight go on without "
                          "results, and a new model process is used as soon as it serves %s.",
                          e.message.c_str(), lost, st->reply_path.c_str()),
                         (nullptr));
      break;
    }
    default:
      break;
  }
}

}  // namespace cudaipc::gst::filter
