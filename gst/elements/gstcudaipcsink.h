// cudaipcsink: publishes a pipeline's frames (CUDA or system memory, video or tensors) into a
// cudaipc channel that other processes read with cudaipcsrc or the core library.
#pragma once

#include <gst/base/gstbasesink.h>
#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_CUDA_IPC_RING_SINK (gst_cuda_ipc_ring_sink_get_type())
G_DECLARE_FINAL_TYPE(GstCudaIpcRingSink, gst_cuda_ipc_ring_sink, GST, CUDA_IPC_RING_SINK,
                     GstBaseSink)

GST_ELEMENT_REGISTER_DECLARE(cudaipcsink);

G_END_DECLS

#include <cstdint>
#include <memory>

namespace cudaipc {
class Producer;
enum class ChannelRole : std::uint32_t;
}  // namespace cudaipc
// The channel's producer while the sink is started (READY and up), else null: cudaipcfilter,
// which publishes through a cudaipcsink of its own, reads each frame's seq and its consumers there.
std::shared_ptr<cudaipc::Producer> gst_cuda_ipc_ring_sink_producer(GstCudaIpcRingSink* sink);
// What the channel the sink creates at its next start is for (cudaipcfilter's: requests).
void gst_cuda_ipc_ring_sink_set_role(GstCudaIpcRingSink* sink, cudaipc::ChannelRole role);
