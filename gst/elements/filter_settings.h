// cudaipcfilter's properties: what they hold, their defaults and limits, and how gst-inspect-1.0
// shows them (docs/elements.md). Read and written under the element's object lock.
#pragma once

#include <gst/gst.h>

#include <algorithm>
#include <string>

#include "cudaipc/options.hpp"
#include "cudaipc/reply.hpp"
#include "elements/enums.h"

namespace cudaipc::gst::filter {

enum {
  PROP_0,
  PROP_SOCKET_PATH,
  PROP_MAX_INFLIGHT,
  PROP_TIMEOUT,
  PROP_ON_MISSING,
  PROP_DEVICE_ID,
  PROP_IPC_MODE,
  PROP_SOCKET_MODE,
  PROP_META_SIZE,
  PROP_FORWARD_METAS,
  PROP_REPLY_METAS,
  PROP_DOWNSTREAM_BUFFERS,
  PROP_RT_PRIORITY,
  PROP_NICE,
  PROP_TIME_SLICE,
  PROP_STATS,
};

constexpr guint kDefaultMaxInflight = 4;
// The slots beyond max-inflight and downstream's: one upstream writes into, one being pushed on.
constexpr guint kSpareSlots = 2;
// The channel has the core's kMaxSlots at most.
using cudaipc::kMaxSlots;
constexpr guint kMaxMaxInflight = kMaxSlots - kSpareSlots;
constexpr guint64 kDefaultTimeout = GST_SECOND;
// Buffers lent upstream that downstream may keep after the filter pushed them (a video sink's
// shown frame and the next): each keeps its slot out of the ring until freed.
constexpr guint kDefaultDownstreamBuffers = 2;
constexpr guint kMaxDownstreamBuffers = 29;  // kMaxSlots less the spares and one in flight

struct Settings {
  std::string socket_path;
  guint max_inflight = kDefaultMaxInflight;
  guint64 timeout = kDefaultTimeout;
  GstCudaIpcFilterMissing on_missing = GST_CUDA_IPC_FILTER_MISSING_PASS;
  gint device_id = -1;
  GstCudaIpcRingMode ipc_mode = GST_CUDA_IPC_RING_MODE_AUTO;
  guint socket_mode = 0600;
  guint meta_size = 64 * 1024;
  std::string forward_metas = "*";
  std::string reply_metas = "*";
  guint downstream_buffers = kDefaultDownstreamBuffers;
  guint rt_priority = 0;   // 0: the threads keep the default scheduling
  gint nice = 0;           // 0: the threads keep the process's nice value
  guint64 time_slice = 0;  // ns; 0: the threads keep the kernel's slice
};

// The frames' ring: the frames in flight, the spare ones and what downstream keeps, at most 32.
inline guint ring_slots(const Settings& s) {
  return std::min(s.max_inflight + kSpareSlots + s.downstream_buffers, kMaxSlots);
}

void install_filter_properties(GObjectClass* klass);
// False when `prop_id` is not one of the settings (stats is the element's).
bool set_filter_setting(Settings& s, guint prop_id, const GValue* value);
bool get_filter_setting(const Settings& s, guint prop_id, GValue* value);

}  // namespace cudaipc::gst::filter
