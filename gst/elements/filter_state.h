// cudaipcfilter's state, shared by the element (gstcudaipcfilter.cpp: pads, events, states) and
// its task (filter_task.cpp: replies read, frames pushed on). Private to the element.
#pragma once

#include <gst/gst.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cudaipc/consumer.hpp"
#include "cudaipc/producer.hpp"
#include "elements/filter_pending.h"
#include "elements/filter_settings.h"
#include "elements/gstcudaipcfilter.h"
#include "metas/meta_filter.h"

GST_DEBUG_CATEGORY_EXTERN(gst_cuda_ipc_filter_debug);

namespace cudaipc::gst::filter {

// How long the reply reader waits for a reply before it looks at whether it should stop, and the
// task for a frame when none is queued.
constexpr std::uint64_t kIdlePollNs = 20 * 1000 * 1000;

struct Counters {
  std::atomic<std::uint64_t> frames{0}, sent{0}, answered{0}, passed{0}, dropped{0}, timeouts{0},
      no_model{0}, model_lost{0}, not_sent{0};
  // How sent frames got into their slots: written there by upstream (a slot lent through the
  // allocation query), or copied by the inner sink.
  std::atomic<std::uint64_t> in_place{0}, copied{0};
  std::atomic<std::uint64_t> malformed{0}, unknown{0}, stale{0}, duplicate{0}, foreign{0};
  std::atomic<std::uint64_t> metas_received{0}, metas_unknown{0}, metas_bad{0}, metas_filtered{0};
  void reset() {
    for (auto* c : {&frames,   &sent,           &answered,      &passed,    &dropped,
                    &timeouts, &no_model,       &model_lost,    &not_sent,  &in_place,
                    &copied,   &malformed,      &unknown,       &stale,     &duplicate,
                    &foreign,  &metas_received, &metas_unknown, &metas_bad, &metas_filtered})
      c->store(0, std::memory_order_relaxed);
  }
};

struct FilterState {
  Settings settings;  // under the object lock

  // The frames' channel: a cudaipcsink of our own, fed through `proxy`, its messages through
  // `bus` to ours. The producer is the sink's, from READY up.
  GstElement* sink = nullptr;
  GstPad* proxy = nullptr;
  GstBus* bus = nullptr;
  std::shared_ptr<Producer> producer;
  // The replies: the model process's channel, reconnected whenever one serves, read by the
  // reply reader's thread (filter_replies.cpp) from READY up.
  std::unique_ptr<Consumer> replies;
  MetaFilter reply_filter;
  std::atomic<bool> model_replying{false};
  std::string reply_path;
  std::thread reader;
  std::atomic<bool> reader_stop{false};

  // The frames in flight, and who waits on them: chain() for room or a drain, the task for a
  // frame's fate, the reply reader for a frame chain() has published but not yet queued.
  std::mutex mu;
  std::condition_variable cv;
  PendingFrames pending;
  std::uint64_t queued_seq = 0;  // the newest frame sent and queued
  bool flushing = true;
  GstFlowReturn flow = GST_FLOW_OK;  // the last downstream push's, for chain() to return
  // The thread pushing a frame it popped (none: no push in flight); a drain waits for it.
  std::thread::id pusher;
  bool pushing() const noexcept { return pusher != std::thread::id(); }
  std::uint64_t flushes = 0;  // flushes ended (and activations): a push from before leaves no mark
  bool reading = false;       // a thread reads the reply channel (one at a time, the other pushes)
  // The one timeout given to a missing model (on-missing=wait), or to one that is there but not
  // yet reading the frames (any policy), is spent; frames pass until a model serves again.
  bool model_wait_spent = false;
  // Whether a model is there was asked since a model last served (once per absence).
  bool model_looked_for = false;
  std::atomic<bool> warned_bad_reply{false}, warned_bad_metas{false}, warned_priority{false};
  // Bumped when rt-priority, nice or time-slice is set: the reply reader, running from READY,
  // applies them.
  std::atomic<std::uint32_t> priority_asked{0};
  std::atomic<unsigned> told_version_gaps{0};  // VersionGap bits warned about since READY

  Counters counts;
};

// Who runs a round: the reply reader's thread (from READY up) or the source pad's task (while the
// pad is active and not flushing).
enum class Runner { reader, task };

// One round of either thread, `lock` (st->mu) held on entry: the oldest frame pushed on once its
// fate is known (never while flushing), else one read of the reply channel if the other thread is
// not reading, else a wait until there is something to do or the head's deadline.
void run_round(GstCudaIpcFilter* self, std::unique_lock<std::mutex>& lock, Runner who);
// The source pad's task: rounds, paused while flushing.
void task_loop(GstCudaIpcFilter* self);
// Waits for a push in flight on the other thread to return (a flush or a stop, before pushes may
// start again); a push of the calling thread's own is the one that flushes.
void wait_for_push(FilterState* st);

// One event of the reply channel, waited for up to `timeout` and acted on (a reply's results
// attached to its frame, a model that came or left). Called without st->mu, by the thread that
// holds `reading`.
void read_reply(GstCudaIpcFilter* self, std::chrono::nanoseconds timeout);

// Says on the bus, once per arrival, that a model process serves this pipeline.
void announce_model(GstCudaIpcFilter* self);

// The calling thread, one of the two that push answered frames on (the reply reader's, the
// source pad's task on entering it), at rt-priority, nice and time-slice when set; a warning once
// per start when it cannot be.
void raise_pushing_thread(GstCudaIpcFilter* self);

// The reply reader's thread, from opening the channels (READY) to closing them.
void start_reply_reader(GstCudaIpcFilter* self);
void stop_reply_reader(GstCudaIpcFilter* self);

}  // namespace cudaipc::gst::filter

struct _GstCudaIpcFilter {
  GstElement parent;
  GstPad* sinkpad;
  GstPad* srcpad;
  cudaipc::gst::filter::FilterState* st;
};
