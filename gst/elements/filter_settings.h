// cudaipcfilter's properties: what they hold, their defaults and limits, and how gst-inspect-1.0
// shows them (docs/elements.md). Read and written under the element's object lock.
#pragma once

#include <gst/gst.h>

#include <string>

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
  PROP_STATS,
};

constexpr guint kDefaultMaxInflight = 4;
// The channel has 32 slots at most, and two more than the frames in flight.
constexpr guint kMaxMaxInflight = 30;
constexpr guint64 kDefaultTimeout = GST_SECOND;

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
};

void install_filter_properties(GObjectClass* klass);
// False when `prop_id` is not one of the settings (stats is the element's).
bool set_filter_setting(Settings& s, guint prop_id, const GValue* value);
bool get_filter_setting(const Settings& s, guint prop_id, GValue* value);

}  // namespace cudaipc::gst::filter
