// cudaipcsink's properties: what they hold, their defaults and limits, and how gst-inspect-1.0
// shows them (docs/elements.md). Read and written under the element's object lock.
#pragma once

#include <gst/gst.h>

#include <string>

#include "cudaipc/options.hpp"
#include "elements/enums.h"

namespace cudaipc::gst::sink {

enum {
  PROP_0,
  PROP_SOCKET_PATH,
  PROP_NUM_SLOTS,
  PROP_DEVICE_ID,
  PROP_IPC_MODE,
  PROP_POLICY,
  PROP_BLOCK_TIMEOUT,
  PROP_WAIT_FOR_CONSUMER,
  PROP_SOCKET_MODE,
  PROP_ALLOWED_GROUP,
  PROP_MAX_CONSUMERS,
  PROP_META_SIZE,
  PROP_FORWARD_METAS,
  PROP_STATS,
};

constexpr guint kDefaultSlots = 4;
constexpr gint kDefaultDeviceId = -1;
constexpr guint64 kDefaultBlockTimeout = GST_SECOND;
constexpr guint kDefaultSocketMode = 0600;
constexpr guint kDefaultMaxConsumers = 16;
// The core's limits (its control block has room for this many slots and consumers).
constexpr guint kMaxSlots = cudaipc::kMaxSlots;
constexpr guint kMaxConsumers = 32;
constexpr guint kDefaultMetaSize = 64 * 1024;
constexpr guint kMaxMetaSize = 16 * 1024 * 1024;

struct Settings {
  std::string socket_path;
  guint num_slots = kDefaultSlots;
  gint device_id = kDefaultDeviceId;
  GstCudaIpcRingMode ipc_mode = GST_CUDA_IPC_RING_MODE_AUTO;
  GstCudaIpcRingPolicy policy = GST_CUDA_IPC_RING_POLICY_BLOCK;
  guint64 block_timeout = kDefaultBlockTimeout;
  bool wait_for_consumer = false;
  guint socket_mode = kDefaultSocketMode;
  std::string allowed_group;
  guint max_consumers = kDefaultMaxConsumers;
  guint meta_size = kDefaultMetaSize;
  std::string forward_metas = "*";
  // Not a property: what the channel is for. cudaipcfilter's inner sink makes a request channel,
  // which model servers answer (and refuse any other).
  ChannelRole role = ChannelRole::frames;
};

void install_sink_properties(GObjectClass* klass);
// False when `prop_id` is not one of the settings (stats is the element's).
bool set_sink_setting(Settings& s, guint prop_id, const GValue* value);
bool get_sink_setting(const Settings& s, guint prop_id, GValue* value);

}  // namespace cudaipc::gst::sink
