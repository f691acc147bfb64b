// cudaipcfilter's source pad task: it pushes the frames on in input order, each once its reply's
// results are attached (filter_replies.cpp) or it is given up on (timeout, the model left, never
// sent). It only waits and pushes; replies are read on their own thread, so a push that blocks
// never delays the next frame's results.
#include <gst/gst.h>

#include <algorithm>
#include <chrono>

#include "elements/filter_state.h"
#include "format/time_sync.h"

#define GST_CAT_DEFAULT gst_cuda_ipc_filter_debug

namespace cudaipc::gst::filter {
namespace {

// A frame leaves: pushed on (answered, or missing under pass/wait) or dropped.
void finish_frame(GstCudaIpcFilter* self, PendingFrame f, GstCudaIpcFilterMissing policy) {
  FilterState* st = self->st;
  GstFlowReturn ret = GST_FLOW_OK;
  if (f.fate != FrameFate::answered && policy == GST_CUDA_IPC_FILTER_MISSING_DROP) {
    st->counts.dropped.fetch_add(1, std::memory_order_relaxed);
    GST_LOG_OBJECT(self, "frame %" G_GUINT64_FORMAT " dropped: no results", f.seq);
    gst_buffer_unref(f.buf);
  } else {
    (f.fate == FrameFate::answered ? st->counts.answered : st->counts.passed)
        .fetch_add(1, std::memory_order_relaxed);
    ret = gst_pad_push(self->srcpad, f.buf);
  }
  std::lock_guard<std::mutex> lock(st->mu);
  st->pushing = false;
  if (ret != GST_FLOW_OK) st->flow = ret;
  st->cv.notify_all();
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
  if (st->pending.empty()) {
    // Woken by chain() queueing a frame, or a flush.
    st->cv.wait_for(lock, std::chrono::nanoseconds(kIdlePollNs));
    return;
  }
  PendingFrame& head = st->pending.head();
  const std::uint64_t now = monotonic_now_ns();
  if (head.fate == FrameFate::awaiting && now >= head.deadline_ns) {
    head.fate = FrameFate::missing;
    st->counts.timeouts.fetch_add(1, std::memory_order_relaxed);
    GST_DEBUG_OBJECT(self, "frame %" G_GUINT64_FORMAT ": no reply within timeout", head.seq);
  }
  if (head.fate == FrameFate::awaiting) {
    // Woken by its reply, the model leaving, or a flush; else at its deadline.
    st->cv.wait_for(lock, std::chrono::nanoseconds(head.deadline_ns - now));
    return;
  }
  PendingFrame f = st->pending.pop();
  st->pushing = true;
  st->cv.notify_all();  // room for chain()
  lock.unlock();
  finish_frame(self, f, policy);
}

}  // namespace cudaipc::gst::filter
