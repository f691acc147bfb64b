#include "elements/filter_settings.h"

#include "elements/thread_priority.h"

namespace cudaipc::gst::filter {

void install_filter_properties(GObjectClass* klass) {
  const auto rw = static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                           GST_PARAM_MUTABLE_READY);
  const auto live = static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                             GST_PARAM_MUTABLE_PLAYING);
  g_object_class_install_property(
      klass, PROP_SOCKET_PATH,
      g_param_spec_string(
          "socket-path", "Socket path",
          "Where the model process connects for frames (this element creates "
          "the channel); it answers on <socket-path>.reply, which it creates. "
          "Default: $XDG_RUNTIME_DIR/cudaipc/cudaipc, else /tmp/cudaipc-UID/cudaipc",
          nullptr, rw));
  g_object_class_install_property(
      klass, PROP_MAX_INFLIGHT,
      g_param_spec_uint("max-inflight", "Max frames in flight",
                        "Frames sent to the model process and not yet pushed on: upstream waits "
                        "while this many are out. More hides the round trip; each holds a slot",
                        1, kMaxMaxInflight, kDefaultMaxInflight, rw));
  g_object_class_install_property(
      klass, PROP_TIMEOUT,
      g_param_spec_uint64("timeout", "Timeout",
                          "The most a frame waits for its results (ns); then on-missing decides. "
                          "The pipeline never waits longer on the model process",
                          1, G_MAXUINT64, kDefaultTimeout, live));
  g_object_class_install_property(
      klass, PROP_ON_MISSING,
      g_param_spec_enum("on-missing", "On missing results",
                        "What becomes of a frame whose results cannot come: no model process "
                        "serves, it died, or it did not answer within timeout. A model process "
                        "that is there but not yet reading the frames (it serves socket-path or "
                        "watches its directory) is waited for, once, within timeout, whatever "
                        "the policy",
                        GST_TYPE_CUDA_IPC_FILTER_MISSING, GST_CUDA_IPC_FILTER_MISSING_PASS, live));
  g_object_class_install_property(
      klass, PROP_DEVICE_ID,
      g_param_spec_int("cuda-device-id", "CUDA device id",
                       "CUDA device the frames' slots live on (-1: the device of a neighbour's "
                       "CUDA context, else device 0)",
                       -1, G_MAXINT, -1, rw));
  g_object_class_install_property(
      klass, PROP_IPC_MODE,
      g_param_spec_enum("ipc-mode", "IPC mode",
                        "Which memory the frames' slots live in and how it is shared",
                        GST_TYPE_CUDA_IPC_RING_MODE, GST_CUDA_IPC_RING_MODE_AUTO, rw));
  g_object_class_install_property(
      klass, PROP_SOCKET_MODE,
      g_param_spec_uint("socket-mode", "Socket mode",
                        "Permission bits of the socket file: 0600 (owner only) or 0660", 0, 0770,
                        0600, rw));
  g_object_class_install_property(
      klass, PROP_META_SIZE,
      g_param_spec_uint("meta-size", "Meta area size",
                        "Bytes beside each frame for the metas it carries to the model process "
                        "(docs/metas.md); 0: none go",
                        0, 16 * 1024 * 1024, 64 * 1024, rw));
  g_object_class_install_property(
      klass, PROP_FORWARD_METAS,
      g_param_spec_string("forward-metas", "Forward metas",
                          "Comma-separated API names of the metas sent with each frame to the "
                          "model process; '*' for all, empty for none",
                          "*", rw));
  g_object_class_install_property(
      klass, PROP_REPLY_METAS,
      g_param_spec_string("reply-metas", "Reply metas",
                          "Comma-separated API names of the model's results attached to the "
                          "frame (GstAnalyticsRelationMetaAPI, GstTensorMetaAPI, a custom meta's "
                          "name...); '*' for all, empty for none",
                          "*", rw));
  g_object_class_install_property(
      klass, PROP_DOWNSTREAM_BUFFERS,
      g_param_spec_uint("downstream-buffers", "Downstream buffers",
                        "Buffers downstream may keep after the filter pushed them (a sink's "
                        "shown frame, a queue): the ring has this many slots beyond "
                        "max-inflight and two, for upstream writing into slots (32 at most)",
                        0, kMaxDownstreamBuffers, kDefaultDownstreamBuffers, rw));
  g_object_class_install_property(
      klass, PROP_RT_PRIORITY,
      g_param_spec_uint("rt-priority", "Real-time priority",
                        "SCHED_FIFO priority of the two threads that read the model's replies and "
                        "push the answered frames on (0: the default scheduling). Where the "
                        "pipelines keep every CPU busy, a woken thread of the default policy may "
                        "wait milliseconds for one. Needs CAP_SYS_NICE or an RLIMIT_RTPRIO "
                        "(ulimit -r) this high; without, a warning says so and the threads keep "
                        "the default. Downstream of the filter runs in these threads: put a queue "
                        "after it for heavy work",
                        0, 99, 0, rw));
  g_object_class_install_property(
      klass, PROP_NICE,
      g_param_spec_int("nice", "Nice value",
                       "Nice value of the same two threads (0: left as it is). A lower one "
                       "wakes them sooner on a busy CPU (the kernel's EEVDF scheduler, Linux "
                       "6.6+), where real-time priority is refused. A negative one needs "
                       "CAP_SYS_NICE or an RLIMIT_NICE (ulimit -e) that allows it; without, a "
                       "warning says so",
                       -20, 0, 0, rw));
  g_object_class_install_property(
      klass, PROP_TIME_SLICE,
      g_param_spec_uint64("time-slice", "Time slice",
                          "The kernel's time slice for the same two threads, in ns (0: left as "
                          "it is; 100 us to 100 ms). A thread running on a busy CPU keeps it "
                          "until its own slice is used (3 ms on 8 CPUs or more) unless the woken "
                          "thread's slice is shorter, whatever its nice value: a short one lets "
                          "these threads in at once on waking (Linux 6.12+; earlier kernels keep "
                          "no slice of a thread's own, and a warning says so). Needs no privilege. "
                          "A thread at rt-priority has no slice",
                          0, cudaipc::gst::kMaxSliceNs, 0, rw));
}

bool set_filter_setting(Settings& s, guint prop_id, const GValue* value) {
  switch (prop_id) {
    case PROP_SOCKET_PATH: {
      const gchar* p = g_value_get_string(value);
      s.socket_path = p ? p : "";
      break;
    }
    case PROP_MAX_INFLIGHT:
      s.max_inflight = g_value_get_uint(value);
      break;
    case PROP_TIMEOUT:
      s.timeout = g_value_get_uint64(value);
      break;
    case PROP_ON_MISSING:
      s.on_missing = static_cast<GstCudaIpcFilterMissing>(g_value_get_enum(value));
      break;
    case PROP_DEVICE_ID:
      s.device_id = g_value_get_int(value);
      break;
    case PROP_IPC_MODE:
      s.ipc_mode = static_cast<GstCudaIpcRingMode>(g_value_get_enum(value));
      break;
    case PROP_SOCKET_MODE:
      s.socket_mode = g_value_get_uint(value);
      break;
    case PROP_META_SIZE:
      s.meta_size = g_value_get_uint(value);
      break;
    case PROP_FORWARD_METAS: {
      const gchar* f = g_value_get_string(value);
      s.forward_metas = f ? f : "";
      break;
    }
    case PROP_REPLY_METAS: {
      const gchar* f = g_value_get_string(value);
      s.reply_metas = f ? f : "";
      break;
    }
    case PROP_DOWNSTREAM_BUFFERS:
      s.downstream_buffers = g_value_get_uint(value);
      break;
    case PROP_RT_PRIORITY:
      s.rt_priority = g_value_get_uint(value);
      break;
    case PROP_NICE:
      s.nice = g_value_get_int(value);
      break;
    case PROP_TIME_SLICE:
      s.time_slice = g_value_get_uint64(value);
      break;
    default:
      return false;
  }
  return true;
}

bool get_filter_setting(const Settings& s, guint prop_id, GValue* value) {
  switch (prop_id) {
    case PROP_SOCKET_PATH:
      g_value_set_string(value, s.socket_path.empty() ? nullptr : s.socket_path.c_str());
      break;
    case PROP_MAX_INFLIGHT:
      g_value_set_uint(value, s.max_inflight);
      break;
    case PROP_TIMEOUT:
      g_value_set_uint64(value, s.timeout);
      break;
    case PROP_ON_MISSING:
      g_value_set_enum(value, s.on_missing);
      break;
    case PROP_DEVICE_ID:
      g_value_set_int(value, s.device_id);
      break;
    case PROP_IPC_MODE:
      g_value_set_enum(value, s.ipc_mode);
      break;
    case PROP_SOCKET_MODE:
      g_value_set_uint(value, s.socket_mode);
      break;
    case PROP_META_SIZE:
      g_value_set_uint(value, s.meta_size);
      break;
    case PROP_FORWARD_METAS:
      g_value_set_string(value, s.forward_metas.c_str());
      break;
    case PROP_REPLY_METAS:
      g_value_set_string(value, s.reply_metas.c_str());
      break;
    case PROP_DOWNSTREAM_BUFFERS:
      g_value_set_uint(value, s.downstream_buffers);
      break;
    case PROP_RT_PRIORITY:
      g_value_set_uint(value, s.rt_priority);
      break;
    case PROP_NICE:
      g_value_set_int(value, s.nice);
      break;
    case PROP_TIME_SLICE:
      g_value_set_uint64(value, s.time_slice);
      break;
    default:
      return false;
  }
  return true;
}

}  // namespace cudaipc::gst::filter
