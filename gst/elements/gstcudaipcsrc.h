// cudaipcsrc: plays a cudaipc channel: frames from a cudaipcsink (or any cudaipc producer) in
// another process, zero-copy where it can, with caps that say what the producer sent.
#pragma once

#include <gst/base/gstpushsrc.h>
#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_CUDA_IPC_RING_SRC (gst_cuda_ipc_ring_src_get_type())
G_DECLARE_FINAL_TYPE(GstCudaIpcRingSrc, gst_cuda_ipc_ring_src, GST, CUDA_IPC_RING_SRC, GstPushSrc)

GST_ELEMENT_REGISTER_DECLARE(cudaipcsrc);

G_END_DECLS
