// cudaipcfilter's way out: the frames pushed on in input order, each once its reply's results are
// attached (filter_replies.cpp) or it is given up on (timeout, the model left, never sent).
//
// Two threads share the work, the reply reader's own and the source pad's task, in rounds of the
// same function: whichever thread reads a reply for the head frame pushes that frame on itself,
// and the other one reads the replies meanwhile. A reply then reaches downstream in one thread's
// wake, where a reader that handed each frame to the task paid two: on a machine whose CPUs are
// busy (sixteen pipelines drawing their frames), each wake waits for a CPU, and two of them made
// the tail of the way back (many_pipelines.py: 8 ms p99 against 0.4 p50). And a push that blocks
// (a sink syncing on the clock, back-pressure) never holds up the replies behind it: the other
// thread reads them, so results that came in time are not given up on.
#include <gst/gst.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "elements/filter_state.h"
#include "format/time_sync.h"

#define GST_CAT_DEFAULT gst_cuda_ipc_filter_debug

namespace cudaipc::gst::filter {
namespace {

// A frame leaves: pushed on (answered, or missing under pass/wait) or dropped. `flushes`: the count
// when it was popped; a flush that ended meanwhile (a seek from inside this very push, by a probe
// or callback downstream) reset what this push would set.
void finish_frame(GstCudaIpcFilter* self, PendingFrame f, GstCudaIpcFilterMissing policy,
                  std::uint64_t flushes) {
  FilterState* st = self->st;
  GstFlowReturn ret = GST_FLOW_OK;
  if (f.fate != FrameFate::answered && policy == GST_CUDA_IPC_FILTER_MISSING_DROP) {
    st->counts.dropped.fetch_add(1, std::memory_order_relaxed);
    GST_LOG_OBJECT(self, "frame %" G_GUINT64_FORMAT " dropped: no results", f.seq);
    gst_buffer_unref(f.buf);
  } else {
    (f.fate == FrameFate::answered ? st->counts.answered : st->counts.passed)
        .fetch_add(1, std::memory_order_relaxed);
    GST_TRACE_OBJECT(self, "frame %" G_GUINT64_FORMAT " pushed on", f.seq);
    ret = gst_pad_push(self->srcpad, f.buf);
  }
  std::lock_guard<std::mutex> lock(st->mu);
  if (st->flushes == flushes) {
    st->pusher = {};
    if (ret != GST_FLOW_OK) st->flow = ret;
  }
  st->cv.notify_all();
}

GstCudaIpcFilterMissing missing_policy(GstCudaIpcFilter* self) {
  GST_OBJECT_LOCK(self);
  const GstCudaIpcFilterMissing policy = self->st->settings.on_missing;
  GST_OBJECT_UNLOCK(self);
  return policy;
}

}  // namespace

void run_round(GstCudaIpcFilter* self, std::unique_lock<std::mutex>& lock, Runner who) {
  FilterState* st = self->st;
  std::uint64_t wait_ns = kIdlePollNs;
  // While flushing the frames wait for the flush to drop them: none times out or leaves.
  if (!st->pending.empty() && !st->flushing) {
    PendingFrame& head = st->pending.head();
    const std::uint64_t now = monotonic_now_ns();
    if (head.fate == FrameFate::awaiting && now >= head.deadline_ns) {
      head.fate = FrameFate::missing;
      st->counts.timeouts.fetch_add(1, std::memory_order_relaxed);
      GST_DEBUG_OBJECT(self, "frame %" G_GUINT64_FORMAT ": no reply within timeout", head.seq);
    }
    if (head.fate == FrameFate::awaiting) {
      wait_ns = std::min(wait_ns, head.deadline_ns - now);
    } else if (!st->pushing()) {
      PendingFrame f = st->pending.pop();
      st->pusher = std::this_thread::get_id();
      const std::uint64_t flushes = st->flushes;
      // Room for chain(), and the other thread reads the replies while this one pushes.
      st->cv.notify_all();
      lock.unlock();
      finish_frame(self, f, missing_policy(self), flushes);
      return;
    }
  }
  // The task reads only while it runs: a flush pauses it, and its reads would hold that up. (It
  // holds its pad's stream lock meanwhile: a flush interrupts the read, whose wait is short.)
  if (!st->reading && (who == Runner::reader || !st->flushing)) {
    st->reading = true;
    lock.unlock();
    read_reply(self, std::chrono::nanoseconds(wait_ns));
    lock.lock();
    st->reading = false;
    // A task that stops here for a flush hands the reading to the reader at once.
    if (st->flushing) st->cv.notify_all();
    return;
  }
  // The other thread reads (or pushes): woken by a frame queued or pushed, room to read, a flush,
  // or the head's deadline.
  st->cv.wait_for(lock, std::chrono::nanoseconds(wait_ns));
}

void task_loop(GstCudaIpcFilter* self) {
  FilterState* st = self->st;
  std::unique_lock<std::mutex> lock(st->mu);
  if (st->flushing) {
    lock.unlock();
    gst_pad_pause_task(self->srcpad);
    return;
  }
  run_round(self, lock, Runner::task);
}

void wait_for_push(FilterState* st) {
  std::unique_lock<std::mutex> lock(st->mu);
  // Not for a push of this thread's own, from inside which downstream flushes (a seek in a probe).
  const std::thread::id me = std::this_thread::get_id();
  st->cv.wait(lock, [st, me] { return !st->pushing() || st->pusher == me; });
}

}  // namespace cudaipc::gst::filter
