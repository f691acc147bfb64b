#include "elements/sink_settings.h"

namespace cudaipc::gst::sink {

void install_sink_properties(GObjectClass* klass) {
  const auto rw = static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                           GST_PARAM_MUTABLE_READY);
  g_object_class_install_property(
      klass, PROP_SOCKET_PATH,
      g_param_spec_string("socket-path", "Socket path",
                          "Unix socket consumers connect to (default: "
                          "$XDG_RUNTIME_DIR/cudaipc/cudaipc, else /tmp/cudaipc-UID/cudaipc). A "
                          "stale socket left by a crashed producer is replaced.",
                          nullptr, rw));
  g_object_class_install_property(
      klass, PROP_NUM_SLOTS,
      g_param_spec_uint("num-slots", "Number of slots",
                        "Frames the ring holds; more slots let consumers fall further behind "
                        "before the policy applies",
                        1, kMaxSlots, kDefaultSlots, rw));
  g_object_class_install_property(
      klass, PROP_DEVICE_ID,
      g_param_spec_int("cuda-device-id", "CUDA device id",
                       "CUDA device the slots live on (-1: the device of a neighbour's CUDA "
                       "context, else device 0)",
                       -1, G_MAXINT, kDefaultDeviceId, rw));
  g_object_class_install_property(
      klass, PROP_IPC_MODE,
      g_param_spec_enum("ipc-mode", "IPC mode",
                        "Which memory the slots live in and how it is shared",
                        GST_TYPE_CUDA_IPC_RING_MODE, GST_CUDA_IPC_RING_MODE_AUTO, rw));
  g_object_class_install_property(
      klass, PROP_POLICY,
      g_param_spec_enum("policy", "Policy",
                        "What to do when every slot is held or unread by an every-frame consumer",
                        GST_TYPE_CUDA_IPC_RING_POLICY, GST_CUDA_IPC_RING_POLICY_BLOCK, rw));
  g_object_class_install_property(
      klass, PROP_BLOCK_TIMEOUT,
      g_param_spec_uint64("block-timeout", "Block timeout",
                          "With policy=block, how long to wait for a free slot before dropping "
                          "the frame (ns)",
                          0, G_MAXUINT64, kDefaultBlockTimeout, static_cast<GParamFlags>(rw)));
  g_object_class_install_property(
      klass, PROP_WAIT_FOR_CONSUMER,
      g_param_spec_boolean("wait-for-consumer", "Wait for consumer",
                           "Hold upstream until at least one consumer is connected", FALSE,
                           static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                                    GST_PARAM_MUTABLE_PLAYING)));
  g_object_class_install_property(
      klass, PROP_SOCKET_MODE,
      g_param_spec_uint("socket-mode", "Socket mode",
                        "Permission bits of the socket file: 0600 (owner only) or 0660 with "
                        "allowed-group; others are never granted access",
                        0, 0770, kDefaultSocketMode, rw));
  g_object_class_install_property(
      klass, PROP_ALLOWED_GROUP,
      g_param_spec_string("allowed-group", "Allowed group",
                          "Group (name or gid) whose members may also connect; use with "
                          "socket-mode=0660",
                          nullptr, rw));
  g_object_class_install_property(
      klass, PROP_MAX_CONSUMERS,
      g_param_spec_uint("max-consumers", "Max consumers", "Consumers admitted at once", 1,
                        kMaxConsumers, kDefaultMaxConsumers, rw));
  g_object_class_install_property(
      klass, PROP_META_SIZE,
      g_param_spec_uint("meta-size", "Meta area size",
                        "Bytes beside each slot for the metas a frame carries (analytics, tensor, "
                        "custom and any serializable GstMeta; docs/metas.md). Metas that do not "
                        "fit are left out and counted (stats: metas-oversized); the frame always "
                        "goes. 0: no metas cross",
                        0, kMaxMetaSize, kDefaultMetaSize, rw));
  g_object_class_install_property(
      klass, PROP_FORWARD_METAS,
      g_param_spec_string("forward-metas", "Forward metas",
                          "Comma-separated API names of the metas that cross (such as "
                          "GstAnalyticsRelationMetaAPI, GstTensorMetaAPI, "
                          "GstReferenceTimestampMetaAPI, or a custom meta's name); '*' for all, "
                          "empty for none",
                          "*", rw));
}

bool set_sink_setting(Settings& s, guint prop_id, const GValue* value) {
  switch (prop_id) {
    case PROP_SOCKET_PATH: {
      const gchar* p = g_value_get_string(value);
      s.socket_path = p ? p : "";
      break;
    }
    case PROP_NUM_SLOTS:
      s.num_slots = g_value_get_uint(value);
      break;
    case PROP_DEVICE_ID:
      s.device_id = g_value_get_int(value);
      break;
    case PROP_IPC_MODE:
      s.ipc_mode = static_cast<GstCudaIpcRingMode>(g_value_get_enum(value));
      break;
    case PROP_POLICY:
      s.policy = static_cast<GstCudaIpcRingPolicy>(g_value_get_enum(value));
      break;
    case PROP_BLOCK_TIMEOUT:
      s.block_timeout = g_value_get_uint64(value);
      break;
    case PROP_WAIT_FOR_CONSUMER:
      s.wait_for_consumer = g_value_get_boolean(value);
      break;
    case PROP_SOCKET_MODE:
      s.socket_mode = g_value_get_uint(value);
      break;
    case PROP_ALLOWED_GROUP: {
      const gchar* g = g_value_get_string(value);
      s.allowed_group = g ? g : "";
      break;
    }
    case PROP_MAX_CONSUMERS:
      s.max_consumers = g_value_get_uint(value);
      break;
    case PROP_META_SIZE:
      s.meta_size = g_value_get_uint(value);
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

bool get_sink_setting(const Settings& s, guint prop_id, GValue* value) {
  switch (prop_id) {
    case PROP_SOCKET_PATH:
      g_value_set_string(value, s.socket_path.empty() ? nullptr : s.socket_path.c_str());
      break;
    case PROP_NUM_SLOTS:
      g_value_set_uint(value, s.num_slots);
      break;
    case PROP_DEVICE_ID:
      g_value_set_int(value, s.device_id);
      break;
    case PROP_IPC_MODE:
      g_value_set_enum(value, s.ipc_mode);
      break;
    case PROP_POLICY:
      g_value_set_enum(value, s.policy);
      break;
    case PROP_BLOCK_TIMEOUT:
      g_value_set_uint64(value, s.block_timeout);
      break;
    case PROP_WAIT_FOR_CONSUMER:
      g_value_set_boolean(value, s.wait_for_consumer);
      break;
    case PROP_SOCKET_MODE:
      g_value_set_uint(value, s.socket_mode);
      break;
    case PROP_ALLOWED_GROUP:
      g_value_set_string(value, s.allowed_group.empty() ? nullptr : s.allowed_group.c_str());
      break;
    case PROP_MAX_CONSUMERS:
      g_value_set_uint(value, s.max_consumers);
      break;
    case PROP_META_SIZE:
      g_value_set_uint(value, s.meta_size);
      break;
    case PROP_FORWARD_METAS:
      g_value_set_string(value, s.forward_metas.c_str());
      break;
    default:
      return false;
  }
  return true;
}

}  // namespace cudaipc::gst::sink
