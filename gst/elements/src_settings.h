// cudaipcsrc's properties: what they hold, their defaults, and how gst-inspect-1.0 shows them
// (docs/elements.md). Read and written under the element's object lock.
#pragma once

#include <gst/gst.h>

#include <string>

#include "elements/enums.h"

namespace cudaipc::gst::src {

enum {
  PROP_0,
  PROP_SOCKET_PATH,
  PROP_DEVICE_ID,
  PROP_MODE,
  PROP_IO_MODE,
  PROP_CONNECT_TIMEOUT,
  PROP_RECONNECT,
  PROP_IS_LIVE,
  PROP_FORWARD_METAS,
  PROP_STATS,
};

constexpr gint kDefaultDeviceId = -1;
constexpr guint64 kDefaultConnectTimeout = 0;

struct Settings {
  std::string socket_path;
  gint device_id = kDefaultDeviceId;
  GstCudaIpcRingConsumeMode mode = GST_CUDA_IPC_RING_CONSUME_LATEST;
  GstCudaIpcRingIOMode io_mode = GST_CUDA_IPC_RING_IO_AUTO;
  guint64 connect_timeout = kDefaultConnectTimeout;
  bool reconnect = true;
  bool is_live = true;
  std::string forward_metas = "*";
};

void install_src_properties(GObjectClass* klass);
// False when `prop_id` is not one of the settings (stats is the element's).
bool set_src_setting(Settings& s, guint prop_id, const GValue* value);
bool get_src_setting(const Settings& s, guint prop_id, GValue* value);

}  // namespace cudaipc::gst::src
