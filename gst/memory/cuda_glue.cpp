#include "memory/cuda_glue.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cstring>

#include "cuda/driver.hpp"
#include "cudaipc/error.hpp"

namespace cudaipc::gst {

int loaded_gstcuda_minor() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&gst_cuda_context_new), &info) || !info.dli_fname) return -1;
  char real[PATH_MAX];
  if (!realpath(info.dli_fname, real)) return -1;
  // libgstcuda-1.0.so.0.MMmm.0: MM is the minor version, mm the micro.
  const char* v = std::strstr(real, ".so.0.");
  if (!v) return -1;
  long code = std::strtol(v + 6, nullptr, 10);
  return code > 0 ? static_cast<int>(code / 100) : -1;
}

bool cuda_check(CUresult r, const char* what, std::string* error) {
  if (r == CUDA_SUCCESS) return true;
  const char* name = nullptr;
  const char* text = nullptr;
  CuGetErrorName(r, &name);
  CuGetErrorString(r, &text);
  *error = std::string(what) + " failed: " + (name ? name : std::to_string(r)) + " (" +
           (text ? text : "no description") + ")";
  return false;
}

bool copy_2d(const Copy2D& c, CUstream stream, std::string* error) {
  CUDA_MEMCPY2D p{};
  p.srcMemoryType = c.src_device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
  if (c.src_device)
    p.srcDevice = static_cast<CUdeviceptr>(c.src);
  else
    p.srcHost = reinterpret_cast<const void*>(c.src);
  p.srcPitch = c.src_pitch;
  p.dstMemoryType = c.dst_device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
  if (c.dst_device)
    p.dstDevice = static_cast<CUdeviceptr>(c.dst);
  else
    p.dstHost = reinterpret_cast<void*>(c.dst);
  p.dstPitch = c.dst_pitch;
  p.WidthInBytes = c.width;
  p.Height = c.height;
  return cuda_check(CuMemcpy2DAsync(&p, stream), "cuMemcpy2DAsync", error);
}

int context_device_id(GstCudaContext* ctx) {
  guint id = 0;
  g_object_get(ctx, "cuda-device-id", &id, nullptr);
  return static_cast<int>(id);
}

StreamOrder::~StreamOrder() {
  if (event_) cuda::loaded_driver().cuEventDestroy(event_);
}

bool StreamOrder::order(CUstream waiter, CUstream after, std::string* error) {
  try {
    const cuda::Driver& d = cuda::driver();
    if (!event_) cuda::check(d.cuEventCreate(&event_, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    // One event serves every order: a wait takes the event's state when it is queued.
    cuda::check(d.cuEventRecord(event_, after), "cuEventRecord");
    cuda::check(d.cuStreamWaitEvent(waiter, event_, 0), "cuStreamWaitEvent");
    return true;
  } catch (const Error& e) {
    *error = e.what();
    return false;
  }
}

bool StreamOrder::release_to(GstMemory* mem, CUstream ours, std::string* error) {
  CUstream theirs = CU_STREAM_LEGACY;
#if GST_CHECK_VERSION(1, 24, 0)
  if (GstCudaStream* s = gst_cuda_memory_get_stream(reinterpret_cast<GstCudaMemory*>(mem)))
    theirs = gst_cuda_stream_get_handle(s);
  if (theirs == ours) return true;
#else
  (void)mem;
#endif
  return order(theirs, ours, error);
}

bool StreamOrder::order_after(GstMemory* mem, CUstream ours, std::string* error) {
#if GST_CHECK_VERSION(1, 24, 0)
  // Memory without pending writes (no NEED_SYNC, or no stream: complete when pushed).
  if (!GST_MEMORY_FLAG_IS_SET(mem, GST_CUDA_MEMORY_TRANSFER_NEED_SYNC)) return true;
  GstCudaStream* theirs = gst_cuda_memory_get_stream(reinterpret_cast<GstCudaMemory*>(mem));
  CUstream handle = theirs ? gst_cuda_stream_get_handle(theirs) : nullptr;
  if (!theirs || handle == ours) return true;
  return order(ours, handle, error);
#else
  (void)mem;
  (void)ours;
  (void)error;
  return true;
#endif
}

void ElementStream::create(GstCudaContext* ctx) {
  reset();
#if GST_CHECK_VERSION(1, 24, 0)
  stream_ = gst_cuda_stream_new(ctx);
#else
  (void)ctx;
#endif
}

void ElementStream::reset() {
#if GST_CHECK_VERSION(1, 24, 0)
  if (stream_) gst_cuda_stream_unref(stream_);
  stream_ = nullptr;
#endif
}

void* ElementStream::handle() const {
#if GST_CHECK_VERSION(1, 24, 0)
  return stream_ ? gst_cuda_stream_get_handle(stream_) : nullptr;
#else
  return nullptr;
#endif
}

}  // namespace cudaipc::gst
