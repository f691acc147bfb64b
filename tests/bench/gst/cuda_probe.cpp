// The little CUDA the benchmark needs, through libgstcuda's own driver loader: whether a GPU
// row can run, and 16-byte stamps in GstCudaMemory. Built against 1.22 it uses only calls whose
// ABI 1.24+ kept (GstCudaMemory's context field, push/pop, CuMemcpy2D); build it against the
// GStreamer it runs with anyway, as the plugin must be.
#include <gst/cuda/cuda-gst.h>
#include <gst/cuda/gstcudacontext.h>
#include <gst/cuda/gstcudaloader.h>
#include <gst/cuda/gstcudamemory.h>
#include <gst/cuda/gstcudautils.h>

#include "gst_bench.hpp"

namespace gstbench {
namespace {

std::string cuda_error(CUresult r) {
  const char* name = nullptr;
  CuGetErrorName(r, &name);
  return name ? name : std::to_string(static_cast<int>(r));
}

// A synchronous copy on the legacy default stream, done on return. From 1.24 memory has a stream
// and may still be written on it (GST_CUDA_MEMORY_TRANSFER_NEED_SYNC): wait for it first, as any
// downstream reader must. 1.22's elements synchronise before pushing.
bool copy(GstMemory* mem, GstMapFlags flags, std::size_t offset, const void* host_src,
          void* host_dst, std::size_t n) {
#if GST_CHECK_VERSION(1, 24, 0)
  gst_cuda_memory_sync(GST_CUDA_MEMORY_CAST(mem));
#endif
  GstMapInfo map;
  if (!gst_memory_map(mem, &map, static_cast<GstMapFlags>(flags | GST_MAP_CUDA))) return false;
  bool ok = false;
  GstCudaContext* ctx = GST_CUDA_MEMORY_CAST(mem)->context;
  if (offset + n <= map.size && gst_cuda_context_push(ctx)) {
    const auto dev = reinterpret_cast<CUdeviceptr>(map.data) + offset;
    CUDA_MEMCPY2D c{};
    c.WidthInBytes = n;
    c.Height = 1;
    if (host_src) {
      c.srcMemoryType = CU_MEMORYTYPE_HOST;
      c.srcHost = host_src;
      c.srcPitch = n;
      c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
      c.dstDevice = dev;
      c.dstPitch = n;
    } else {
      c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
      c.srcDevice = dev;
      c.srcPitch = n;
      c.dstMemoryType = CU_MEMORYTYPE_HOST;
      c.dstHost = host_dst;
      c.dstPitch = n;
    }
    ok = CuMemcpy2D(&c) == CUDA_SUCCESS;
    gst_cuda_context_pop(nullptr);
  }
  gst_memory_unmap(mem, &map);
  return ok;
}

}  // namespace

std::string gpu_unavailable_reason() {
  if (!gst_cuda_load_library()) return "libcuda.so.1 could not be loaded (no NVIDIA driver)";
  if (const CUresult r = CuInit(0); r != CUDA_SUCCESS) return "cuInit failed: " + cuda_error(r);
  int n = 0;
  if (const CUresult r = CuDeviceGetCount(&n); r != CUDA_SUCCESS)
    return "cuDeviceGetCount failed: " + cuda_error(r);
  if (n == 0) return "the driver sees no CUDA device";
  GstElementFactory* up = gst_element_factory_find("cudaupload");
  if (!up) return "nvcodec's cudaupload is not registered (nvcodec missing or found no device)";
  gst_object_unref(up);
  return "";
}

bool is_cuda_memory(GstMemory* mem) {
  return mem && gst_is_cuda_memory(mem);
}

bool cuda_write(GstMemory* mem, std::size_t offset, const void* src, std::size_t n) {
  return copy(mem, GST_MAP_WRITE, offset, src, nullptr, n);
}

bool cuda_read(GstMemory* mem, std::size_t offset, void* dst, std::size_t n) {
  return copy(mem, GST_MAP_READ, offset, nullptr, dst, n);
}

GstContext* cuda_context_of(GstBuffer* buf) {
  GstMemory* mem = gst_buffer_peek_memory(buf, 0);
  if (!is_cuda_memory(mem)) return nullptr;
  return gst_context_new_cuda_context(GST_CUDA_MEMORY_CAST(mem)->context);
}

}  // namespace gstbench
