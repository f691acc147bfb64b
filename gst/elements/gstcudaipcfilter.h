// cudaipcfilter: sends each frame to a model process over a cudaipc channel and pushes the same
// buffer on with the model's results attached as metas (docs/elements.md).
#pragma once

#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_CUDA_IPC_FILTER (gst_cuda_ipc_filter_get_type())
G_DECLARE_FINAL_TYPE(GstCudaIpcFilter, gst_cuda_ipc_filter, GST, CUDA_IPC_FILTER, GstElement)

GST_ELEMENT_REGISTER_DECLARE(cudaipcfilter);

G_END_DECLS
