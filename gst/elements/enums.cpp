#include "elements/enums.h"

namespace {

// Registers a GEnum once; `values` must outlive the type (static arrays below).
GType register_enum(GType* type, const char* name, const GEnumValue* values) {
  static_assert(sizeof(gsize) == sizeof(GType), "GType fits in a gsize");
  if (g_once_init_enter(reinterpret_cast<gsize*>(type))) {
    GType t = g_enum_register_static(name, values);
    g_once_init_leave(reinterpret_cast<gsize*>(type), t);
  }
  return *type;
}

}  // namespace

GType gst_cuda_ipc_ring_mode_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_CUDA_IPC_RING_MODE_AUTO, "CUDA memory, VMM where the device supports it, else legacy",
       "auto"},
      {GST_CUDA_IPC_RING_MODE_VMM, "CUDA VMM memory shared as file descriptors", "vmm"},
      {GST_CUDA_IPC_RING_MODE_LEGACY, "CUDA memory shared as legacy IPC handles", "legacy"},
      {GST_CUDA_IPC_RING_MODE_HOST, "Host memory (sealed memfds, no GPU needed)", "host"},
      {0, nullptr, nullptr}};
  return register_enum(&type, "GstCudaIpcRingMode", values);
}

GType gst_cuda_ipc_ring_io_mode_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_CUDA_IPC_RING_IO_AUTO,
       "Import where this GStreamer can wrap foreign CUDA memory (1.24+), else copy", "auto"},
      {GST_CUDA_IPC_RING_IO_IMPORT, "Zero-copy: each buffer holds its slot until freed", "import"},
      {GST_CUDA_IPC_RING_IO_COPY, "Copy each frame into a buffer of our own", "copy"},
      {0, nullptr, nullptr}};
  return register_enum(&type, "GstCudaIpcRingIOMode", values);
}

GType gst_cuda_ipc_ring_policy_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_CUDA_IPC_RING_POLICY_BLOCK,
       "Wait up to block-timeout for a free slot, then drop the frame", "block"},
      {GST_CUDA_IPC_RING_POLICY_DROP, "Drop the frame at once when no slot is free", "drop"},
      {0, nullptr, nullptr}};
  return register_enum(&type, "GstCudaIpcRingPolicy", values);
}

GType gst_cuda_ipc_ring_consume_mode_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_CUDA_IPC_RING_CONSUME_LATEST, "The newest frame; older unread frames are skipped",
       "latest"},
      {GST_CUDA_IPC_RING_CONSUME_EVERY_FRAME,
       "Every frame; the producer waits (or drops) rather than overwrite an unread one",
       "every-frame"},
      {0, nullptr, nullptr}};
  return register_enum(&type, "GstCudaIpcRingConsumeMode", values);
}

GType gst_cuda_ipc_filter_missing_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_CUDA_IPC_FILTER_MISSING_PASS,
       "Push the frame on without results (at once while no model process serves)", "pass"},
      {GST_CUDA_IPC_FILTER_MISSING_DROP, "Drop the frame", "drop"},
      {GST_CUDA_IPC_FILTER_MISSING_WAIT,
       "Wait up to `timeout` for a model process to serve and then for its answer; push the "
       "frame on without results when either does not come",
       "wait"},
      {0, nullptr, nullptr}};
  return register_enum(&type, "GstCudaIpcFilterMissing", values);
}
