// cudaipcfilter's replies: the model's replies read as they come, each one's results attached to
// its frame's buffer. Read by a thread of the filter's own and by the source pad's task, one at a
// time: whichever is not pushing a frame on (filter_task.cpp says why).
#include <gst/gst.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "cudaipc/error.hpp"
#include "elements/element_messages.h"
#include "elements/filter_state.h"
#include "elements/thread_priority.h"
#include "format/time_sync.h"
#include "metas/meta_decoder.h"

#define GST_CAT_DEFAULT gst_cuda_ipc_filter_debug

namespace cudaipc::gst::filter {
namespace {

// How long a reply naming a frame that chain() published but has not queued yet waits for it.
constexpr std::chrono::milliseconds kQueueWait{100};

void count_unmatched(GstCudaIpcFilter* self, const ReplyMatch& m) {
  FilterState* st = self->st;
  std::atomic<std::uint64_t>* c = m.verdict == ReplyVerdict::malformed   ? &st->counts.malformed
                                  : m.verdict == ReplyVerdict::unknown   ? &st->counts.unknown
                                  : m.verdict == ReplyVerdict::duplicate ? &st->counts.duplicate
                                  : m.verdict == ReplyVerdict::foreign   ? &st->counts.foreign
                                                                         : &st->counts.stale;
  c->fetch_add(1, std::memory_order_relaxed);
  const bool warn = m.verdict != ReplyVerdict::stale && !st->warned_bad_reply.exchange(true);
  if (warn)
    GST_ELEMENT_WARNING(
        self, STREAM, DECODE,
        ("The model process sent a reply that answers no frame (%s, frame %" G_GUINT64_FORMAT
         "); it was dropped.",
         to_string(m.verdict), m.seq),
        ("later ones are counted in stats (replies-*)"));
  else
    GST_DEBUG_OBJECT(self, "reply dropped: %s (frame %" G_GUINT64_FORMAT ")", to_string(m.verdict),
                     m.seq);
}

// A reply: its tag matched to a frame, the results attached to that frame's buffer.
void take_reply(GstCudaIpcFilter* self, Frame& reply) {
  FilterState* st = self->st;
  const FrameDesc& d = reply.desc();
  std::unique_lock<std::mutex> lock(st->mu);
  PendingFrame* f = nullptr;
  ReplyMatch m = st->pending.match(d.user_meta, d.user_meta_size, &f);
  if (m.verdict == ReplyVerdict::unknown && m.seq != 0) {
    // A frame chain() published and is about to queue: matched again once it is there. A frame
    // never published (a forged seq) is not waited for.
    lock.unlock();
    const bool published = m.seq <= st->producer->last_seq();
    lock.lock();
    if (published &&
        st->cv.wait_for(lock, kQueueWait, [&] { return st->flushing || st->queued_seq >= m.seq; }))
      m = st->pending.match(d.user_meta, d.user_meta_size, &f);
  }
  if (m.verdict != ReplyVerdict::matched) {
    lock.unlock();
    count_unmatched(self, m);
    return;
  }
  // The frame stays queued until the task pops it, which it does only once its fate is known: its
  // buffer is ours until then.
  f->buf = gst_buffer_make_writable(f->buf);
  DecodeCounts dc;
  std::string error;
  decode_metas(reply.metas(), reply.metas_size(), st->reply_filter, f->buf, &dc, &error);
  // Counted before the task can push the frame: stats read once the stream has ended (or once the
  // frame came out) count its metas.
  st->counts.metas_received.fetch_add(dc.received, std::memory_order_relaxed);
  st->counts.metas_unknown.fetch_add(dc.unknown, std::memory_order_relaxed);
  st->counts.metas_filtered.fetch_add(dc.filtered, std::memory_order_relaxed);
  if (dc.bad) st->counts.metas_bad.fetch_add(dc.bad, std::memory_order_relaxed);
  // Where a tail of the way back goes (GST_DEBUG=cudaipcfilter:7, beside the sink's own traces;
  // python/bench/way_back.py). Under the lock, so that the frame's push, which the other thread
  // may make once it is released, comes after it in the log.
  GST_TRACE_OBJECT(
      self, "reply to frame %" G_GUINT64_FORMAT " read %" G_GINT64_FORMAT " ns after its publish",
      m.seq, static_cast<gint64>(monotonic_now_ns()) - static_cast<gint64>(d.publish_time_ns));
  lock.unlock();  // this thread pushes it on (or the other, once its own push is done)
  if (const unsigned gaps = version_gaps(dc)) {
    if (const unsigned fresh = gaps & ~st->told_version_gaps.fetch_or(gaps))
      GST_ELEMENT_WARNING(self, STREAM, NOT_IMPLEMENTED, ("%s", version_gap_warning(fresh).c_str()),
                          ("told once; later replies are counted in stats (metas-received, "
                           "metas-unknown)"));
  }
  if (dc.bad) {
    if (!st->warned_bad_metas.exchange(true))
      GST_ELEMENT_WARNING(self, STREAM, DECODE,
                          ("The model process sent a malformed result for frame %" G_GUINT64_FORMAT
                           ", dropped (the frame goes on): %s",
                           m.seq, error.c_str()),
                          ("later ones are counted in stats (metas-bad)"));
    else
      GST_DEBUG_OBJECT(self, "frame %" G_GUINT64_FORMAT ": %u malformed results dropped (%s)",
                       m.seq, dc.bad, error.c_str());
  }
}

// What a frame becomes while no model serves, in the words of on-missing's nicks.
const char* missing_fate(GstCudaIpcFilterMissing m) {
  switch (m) {
    case GST_CUDA_IPC_FILTER_MISSING_DROP:
      return "are dropped (on-missing=drop)";
    case GST_CUDA_IPC_FILTER_MISSING_WAIT:
      return "wait up to timeout once, then go on without results (on-missing=wait)";
    default:
      return "go on without results (on-missing=pass)";
  }
}

// A pipeline whose model never came (a typo in either path is the usual cause) is told so once,
// after the frames' own timeout or 2 s, whichever is longer; until then a model starting up is
// not a problem worth a warning.
struct NoModelWarning {
  std::chrono::steady_clock::time_point due;
  std::string path;
  GstCudaIpcFilterMissing policy;
  bool done = false;

  explicit NoModelWarning(GstCudaIpcFilter* self) {
    GST_OBJECT_LOCK(self);
    const Settings& s = self->st->settings;
    const auto patience = std::max<std::chrono::nanoseconds>(std::chrono::nanoseconds(s.timeout),
                                                             std::chrono::seconds(2));
    policy = s.on_missing;
    GST_OBJECT_UNLOCK(self);
    path = self->st->producer ? self->st->producer->path() : std::string();
    due = std::chrono::steady_clock::now() + patience;
  }

  void check(GstCudaIpcFilter* self) {
    if (done) return;
    if (self->st->model_replying.load(std::memory_order_relaxed)) {
      done = true;  // a model came: its leaving is said by model_left
      return;
    }
    if (std::chrono::steady_clock::now() < due) return;
    done = true;
    GST_ELEMENT_WARNING(self, RESOURCE, NOT_FOUND,
                        ("No model process serves %s: frames %s. Start the model on this same "
                         "path (cudaipc.Server in Python, or cudaipc::Server in C++; "
                         "docs/python.md), or check both paths for a typo.",
                         path.c_str(), missing_fate(policy)),
                        ("the model answers on %s; none has since this element went to READY",
                         self->st->reply_path.c_str()));
  }
};

void model_left(GstCudaIpcFilter* self, const std::string& why) {
  FilterState* st = self->st;
  const bool was = st->model_replying.exchange(false);
  std::uint32_t lost = 0;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    lost = st->pending.give_up_all();
    st->cv.notify_all();
  }
  st->counts.model_lost.fetch_add(lost, std::memory_order_relaxed);
  if (was || lost) {
    const std::string text = "The model process left (" + why + "); " + std::to_string(lost) +
                             " frame(s) in flight go on without results, and a new model " +
                             "process is used as soon as it serves " + st->reply_path + ".";
    GST_ELEMENT_INFO(self, RESOURCE, READ, ("%s", text.c_str()), ("%s", text.c_str()));
    post_model_change(GST_ELEMENT(self), false, st->reply_path, why);
  }
}

void model_serves(GstCudaIpcFilter* self) {
  FilterState* st = self->st;
  if (!st->model_replying.exchange(true)) announce_model(self);
  std::lock_guard<std::mutex> lock(st->mu);
  st->model_wait_spent = false;  // the next absence gets its one timeout
  st->model_looked_for = false;
  st->cv.notify_all();
}

void reply_loop(GstCudaIpcFilter* self) {
  FilterState* st = self->st;
  pthread_setname_np(pthread_self(), "cudaipc-replies");  // it runs downstream's chains too
  std::uint32_t applied = st->priority_asked.load(std::memory_order_acquire);
  raise_pushing_thread(self);
  NoModelWarning no_model(self);
  while (!st->reader_stop.load(std::memory_order_acquire)) {
    // Set while READY, where this thread already runs (the task reads them when it enters).
    const std::uint32_t asked = st->priority_asked.load(std::memory_order_acquire);
    if (asked != applied) {
      applied = asked;
      restore_thread_priority();
      raise_pushing_thread(self);
    }
    no_model.check(self);
    std::unique_lock<std::mutex> lock(st->mu);
    run_round(self, lock, Runner::reader);
  }
}

}  // namespace

void read_reply(GstCudaIpcFilter* self, std::chrono::nanoseconds timeout) {
  FilterState* st = self->st;
  Event e;
  try {
    e = st->replies->next(timeout);
  } catch (const Error& err) {
    // A reply channel that breaks the protocol: this connection is dropped, and the frames out
    // are given up on like a model that died.
    GST_WARNING_OBJECT(self, "reply channel %s: %s", st->reply_path.c_str(), err.what());
    e.type = EventType::disconnected;
    e.message = err.what();
  }
  switch (e.type) {
    case EventType::frame:
      if (!st->model_replying.load(std::memory_order_relaxed)) model_serves(self);
      take_reply(self, e.frame);
      e.frame.release();
      break;
    case EventType::format:
      model_serves(self);
      break;
    case EventType::disconnected:
      model_left(self, e.message);
      break;
    default:
      break;
  }
}

void announce_model(GstCudaIpcFilter* self) {
  // gst-launch-1.0 prints an info message's details alone: the sentence goes in both.
  const std::string text = "A model process serves this pipeline (it answers on " +
                           self->st->reply_path + "): frames get its results.";
  GST_ELEMENT_INFO(self, RESOURCE, OPEN_READ, ("%s", text.c_str()), ("%s", text.c_str()));
  post_model_change(GST_ELEMENT(self), true, self->st->reply_path, {});
}

void start_reply_reader(GstCudaIpcFilter* self) {
  FilterState* st = self->st;
  st->reader_stop.store(false, std::memory_order_release);
  st->reader = std::thread(reply_loop, self);
}

void stop_reply_reader(GstCudaIpcFilter* self) {
  FilterState* st = self->st;
  if (!st->reader.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->reader_stop.store(true, std::memory_order_release);
    st->cv.notify_all();  // a reader waiting for the task to read (one about to: within 20 ms)
  }
  st->replies->interrupt();  // a reader in the channel's wait
  st->reader.join();
}

}  // namespace cudaipc::gst::filter
