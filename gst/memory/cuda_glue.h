// GStreamer's CUDA library as the elements use it, across its 1.22 and 1.24+ APIs (same soname,
// different API: see docs/versions.md). Everything version-dependent lives here.
#pragma once

#include <gst/cuda/cuda-gst.h>
#include <gst/cuda/gstcudabufferpool.h>
#include <gst/cuda/gstcudacontext.h>
#include <gst/cuda/gstcudaloader.h>
#include <gst/cuda/gstcudamemory.h>
#include <gst/cuda/gstcudautils.h>
#if GST_CHECK_VERSION(1, 24, 0)
#include <gst/cuda/gstcudastream.h>
#endif

#include <cstdint>
#include <string>

namespace cudaipc::gst {

// True where libgstcuda can wrap foreign device memory (gst_cuda_allocator_alloc_wrapped).
constexpr bool kCanWrapCudaMemory = GST_CHECK_VERSION(1, 24, 0);

// The minor version of the libgstcuda loaded in this process (read from its file name), or -1.
int loaded_gstcuda_minor();

// "cuMemcpy2DAsync failed: CUDA_ERROR_INVALID_VALUE (invalid argument)" in *error; false.
bool cuda_check(CUresult r, const char* what, std::string* error);

// Pushes a GstCudaContext for the scope of a block.
class ContextScope {
 public:
  explicit ContextScope(GstCudaContext* ctx) : pushed_(ctx && gst_cuda_context_push(ctx)) {}
  ~ContextScope() {
    if (pushed_) gst_cuda_context_pop(nullptr);
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
  bool ok() const { return pushed_; }

 private:
  bool pushed_;
};

// One 2-D copy on `stream` between host and device memory in any direction (rows of `width`
// bytes). Pageable host sources are staged by the driver before the call returns.
struct Copy2D {
  std::uintptr_t dst;
  bool dst_device;
  std::uint64_t dst_pitch;
  std::uintptr_t src;
  bool src_device;
  std::uint64_t src_pitch;
  std::uint64_t width;
  std::uint64_t height;
};
bool copy_2d(const Copy2D& c, CUstream stream, std::string* error);

int context_device_id(GstCudaContext* ctx);

// Orders work on the GPU between the sink's stream and the streams of the memory it reads, never
// on the CPU. 1.24+ memory may carry a GstCudaStream; memory without one (1.22's, and 1.24+
// memory from pools configured without a stream, such as cudaupload's output) is used by its
// owner on the legacy default stream or on blocking streams, which the legacy stream orders.
class StreamOrder {
 public:
  StreamOrder() = default;
  ~StreamOrder();
  StreamOrder(const StreamOrder&) = delete;
  StreamOrder& operator=(const StreamOrder&) = delete;
  // Work queued on `ours` from now on runs after the writes pending on `mem`'s stream. Call with
  // the memory's context current.
  bool order_after(GstMemory* mem, CUstream ours, std::string* error);
  // The other direction, after our reads of `mem` are queued on `ours`: its owner may reuse it
  // once we return, so the owner's stream (the memory's, else the legacy default stream) waits
  // for ours on the GPU.
  bool release_to(GstMemory* mem, CUstream ours, std::string* error);
  // `waiter` waits on the GPU for the work queued on `after` so far (an event recorded there).
  bool order(CUstream waiter, CUstream after, std::string* error);

 private:
  CUevent event_ = nullptr;
};

// The stream an element's end of a channel orders its GPU work on, passed to the core
// (CudaOptions::stream). 1.24+: a GstCudaStream, so memory wrapped for GStreamer carries it and
// other elements order themselves after it on the GPU (and put their own work on it when a pool's
// config offers it); 1.22: none, and the core makes a stream of its own.
class ElementStream {
 public:
  ElementStream() = default;
  ~ElementStream() { reset(); }
  ElementStream(const ElementStream&) = delete;
  ElementStream& operator=(const ElementStream&) = delete;
  void create(GstCudaContext* ctx);
  void reset();
  // For CudaOptions::stream: nullptr lets the core create one.
  void* handle() const;
#if GST_CHECK_VERSION(1, 24, 0)
  GstCudaStream* gst_stream() const {
    return stream_;
  }

 private:
  GstCudaStream* stream_ = nullptr;
#endif
};

}  // namespace cudaipc::gst
