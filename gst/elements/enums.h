// The elements' enum property types. Their GType names differ from nvcodec's cudaipc elements
// (GstCudaIpcMode, GstCudaIpcIOMode) so both plugins can be loaded in one process.
#pragma once

#include <glib-object.h>

G_BEGIN_DECLS

// Which memory the sink's slots live in (ipc-mode).
typedef enum {
  GST_CUDA_IPC_RING_MODE_AUTO = 0,    // CUDA (VMM where the device allows, else legacy)
  GST_CUDA_IPC_RING_MODE_VMM = 1,     // CUDA VMM allocations, shared as fds
  GST_CUDA_IPC_RING_MODE_LEGACY = 2,  // cuMemAlloc + legacy IPC handles
  GST_CUDA_IPC_RING_MODE_HOST = 3,    // host memory (sealed memfds)
} GstCudaIpcRingMode;

// How the source hands out frames (io-mode).
typedef enum {
  GST_CUDA_IPC_RING_IO_AUTO = 0,    // import where the GStreamer version can wrap, else copy
  GST_CUDA_IPC_RING_IO_IMPORT = 1,  // zero-copy: buffers hold the slot's lease
  GST_CUDA_IPC_RING_IO_COPY = 2,    // one copy into a buffer of our own, lease released at once
} GstCudaIpcRingIOMode;

typedef enum {
  GST_CUDA_IPC_RING_POLICY_BLOCK = 0,
  GST_CUDA_IPC_RING_POLICY_DROP = 1,
} GstCudaIpcRingPolicy;

typedef enum {
  GST_CUDA_IPC_RING_CONSUME_LATEST = 0,
  GST_CUDA_IPC_RING_CONSUME_EVERY_FRAME = 1,
} GstCudaIpcRingConsumeMode;

// What cudaipcfilter does with a frame whose results cannot come (on-missing).
typedef enum {
  GST_CUDA_IPC_FILTER_MISSING_PASS = 0,  // pushed on without results; at once when no model serves
  GST_CUDA_IPC_FILTER_MISSING_DROP = 1,  // dropped
  GST_CUDA_IPC_FILTER_MISSING_WAIT = 2,  // waits `timeout` for a model to serve, then as pass
} GstCudaIpcFilterMissing;

#define GST_TYPE_CUDA_IPC_RING_MODE (gst_cuda_ipc_ring_mode_get_type())
#define GST_TYPE_CUDA_IPC_RING_IO_MODE (gst_cuda_ipc_ring_io_mode_get_type())
#define GST_TYPE_CUDA_IPC_RING_POLICY (gst_cuda_ipc_ring_policy_get_type())
#define GST_TYPE_CUDA_IPC_RING_CONSUME_MODE (gst_cuda_ipc_ring_consume_mode_get_type())
GType gst_cuda_ipc_ring_mode_get_type(void);
GType gst_cuda_ipc_ring_io_mode_get_type(void);
GType gst_cuda_ipc_ring_policy_get_type(void);
GType gst_cuda_ipc_ring_consume_mode_get_type(void);
#define GST_TYPE_CUDA_IPC_FILTER_MISSING (gst_cuda_ipc_filter_missing_get_type())
GType gst_cuda_ipc_filter_missing_get_type(void);

G_END_DECLS
