#include "elements/src_settings.h"

namespace cudaipc::gst::src {

void install_src_properties(GObjectClass* klass) {
  const auto rw = static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                           GST_PARAM_MUTABLE_READY);
  // Read by each create(), under the object lock: they apply from the next wait on.
  const auto live = static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                             GST_PARAM_MUTABLE_PLAYING);
  g_object_class_install_property(
      klass, PROP_SOCKET_PATH,
      g_param_spec_string("socket-path", "Socket path",
                          "Unix socket of the producer (default: $XDG_RUNTIME_DIR/cudaipc/cudaipc, "
                          "else /tmp/cudaipc-UID/cudaipc)",
                          nullptr, rw));
  g_object_class_install_property(
      klass, PROP_DEVICE_ID,
      g_param_spec_int("cuda-device-id", "CUDA device id",
                       "CUDA device to read on (-1: a neighbour's CUDA context, else device 0); "
                       "another device than the producer's needs peer access",
                       -1, G_MAXINT, kDefaultDeviceId, rw));
  g_object_class_install_property(
      klass, PROP_MODE,
      g_param_spec_enum("mode", "Mode", "Which frames to take", GST_TYPE_CUDA_IPC_RING_CONSUME_MODE,
                        GST_CUDA_IPC_RING_CONSUME_LATEST, rw));
  g_object_class_install_property(
      klass, PROP_IO_MODE,
      g_param_spec_enum("io-mode", "IO mode",
                        "Zero-copy import of CUDA slots (GStreamer 1.24+) or a copy per frame",
                        GST_TYPE_CUDA_IPC_RING_IO_MODE, GST_CUDA_IPC_RING_IO_AUTO, rw));
  g_object_class_install_property(
      klass, PROP_CONNECT_TIMEOUT,
      g_param_spec_uint64("connect-timeout", "Connect timeout",
                          "How long to wait for a producer before posting an error (ns, 0: wait "
                          "for ever)",
                          0, G_MAXUINT64, kDefaultConnectTimeout, live));
  g_object_class_install_property(
      klass, PROP_RECONNECT,
      g_param_spec_boolean("reconnect", "Reconnect",
                           "When the producer goes away, wait for a new one on the same path "
                           "(else post an error)",
                           TRUE, live));
  g_object_class_install_property(
      klass, PROP_IS_LIVE,
      g_param_spec_boolean("is-live", "Is live",
                           "Act as a live source: timestamps in this pipeline's running time, "
                           "converted from the producer's",
                           TRUE, rw));
  g_object_class_install_property(
      klass, PROP_FORWARD_METAS,
      g_param_spec_string("forward-metas", "Forward metas",
                          "Comma-separated API names of the metas from the producer to attach "
                          "(such as GstAnalyticsRelationMetaAPI, GstTensorMetaAPI, "
                          "GstReferenceTimestampMetaAPI, or a custom meta's name); '*' for all, "
                          "empty for none (docs/metas.md)",
                          "*", rw));
}

bool set_src_setting(Settings& s, guint prop_id, const GValue* value) {
  switch (prop_id) {
    case PROP_SOCKET_PATH: {
      const gchar* p = g_value_get_string(value);
      s.socket_path = p ? p : "";
      break;
    }
    case PROP_DEVICE_ID:
      s.device_id = g_value_get_int(value);
      break;
    case PROP_MODE:
      s.mode = static_cast<GstCudaIpcRingConsumeMode>(g_value_get_enum(value));
      break;
    case PROP_IO_MODE:
      s.io_mode = static_cast<GstCudaIpcRingIOMode>(g_value_get_enum(value));
      break;
    case PROP_CONNECT_TIMEOUT:
      s.connect_timeout = g_value_get_uint64(value);
      break;
    case PROP_RECONNECT:
      s.reconnect = g_value_get_boolean(value);
      break;
    case PROP_IS_LIVE:
      s.is_live = g_value_get_boolean(value);
      break;
    case PROP_FORWARD_METAS: {
      const gchar* f = g_value_get_string(value);
      s.forward_metas = f ? f : "";
      break;
    }
    default:
      return false;
  }
  return true;
}

bool get_src_setting(const Settings& s, guint prop_id, GValue* value) {
  switch (prop_id) {
    case PROP_SOCKET_PATH:
      g_value_set_string(value, s.socket_path.empty() ? nullptr : s.socket_path.c_str());
      break;
    case PROP_DEVICE_ID:
      g_value_set_int(value, s.device_id);
      break;
    case PROP_MODE:
      g_value_set_enum(value, s.mode);
      break;
    case PROP_IO_MODE:
      g_value_set_enum(value, s.io_mode);
      break;
    case PROP_CONNECT_TIMEOUT:
      g_value_set_uint64(value, s.connect_timeout);
      break;
    case PROP_RECONNECT:
      g_value_set_boolean(value, s.reconnect);
      break;
    case PROP_IS_LIVE:
      g_value_set_boolean(value, s.is_live);
      break;
    case PROP_FORWARD_METAS:
      g_value_set_string(value, s.forward_metas.c_str());
      break;
    default:
      return false;
  }
  return true;
}

}  // namespace cudaipc::gst::src
