// The CUDA driver, loaded at run time. Nothing links libcuda: a build with this backend still loads
// and runs (host memory only) on a machine without a driver or a GPU, and reports why CUDA is
// unavailable instead of failing to start.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <new>
#include <string>

namespace cudaipc::cuda {

// Every entry point the project calls, with the API version whose signature it is called with.
// The version goes to cuGetProcAddress, so each pointer has exactly the ABI of its PFN_ type even
// when the driver is newer than these headers (or older, down to CUDA 12.0). Names are the
// unversioned API names: cuda.h's #defines (cuMemAlloc -> cuMemAlloc_v2) rename the member in
// declaration and use alike, while the string looked up stays the base name.
// The last group is used by the GPU tests (and cuMemAllocHost/cuMemFreeHost by the producer's
// progress word); every CUDA 12 driver has them.
#define CUDAIPC_DRIVER_FUNCTIONS(X)                \
  X(cuInit, 2000)                                  \
  X(cuDriverGetVersion, 2020)                      \
  X(cuGetErrorName, 6000)                          \
  X(cuGetErrorString, 6000)                        \
  X(cuDeviceGetCount, 2000)                        \
  X(cuDeviceGet, 2000)                             \
  X(cuDeviceGetUuid, 11040)                        \
  X(cuDeviceGetName, 2000)                         \
  X(cuDeviceGetPCIBusId, 4010)                     \
  X(cuDeviceGetAttribute, 2000)                    \
  X(cuDeviceCanAccessPeer, 4000)                   \
  X(cuDevicePrimaryCtxRetain, 7000)                \
  X(cuDevicePrimaryCtxGetState, 7000)              \
  X(cuDevicePrimaryCtxRelease, 11000)              \
  X(cuCtxPushCurrent, 4000)                        \
  X(cuCtxPopCurrent, 4000)                         \
  X(cuCtxGetDevice, 2000)                          \
  X(cuCtxEnablePeerAccess, 4000)                   \
  X(cuStreamCreate, 2000)                          \
  X(cuStreamDestroy, 4000)                         \
  X(cuStreamSynchronize, 2000)                     \
  X(cuStreamWaitEvent, 3020)                       \
  X(cuEventCreate, 2000)                           \
  X(cuEventDestroy, 4000)                          \
  X(cuEventRecord, 2000)                           \
  X(cuEventSynchronize, 2000)                      \
  X(cuEventQuery, 2000)                            \
  X(cuIpcGetMemHandle, 4010)                       \
  X(cuIpcOpenMemHandle, 11000)                     \
  X(cuIpcCloseMemHandle, 4010)                     \
  X(cuMemAlloc, 3020)                              \
  X(cuMemFree, 3020)                               \
  X(cuMemGetInfo, 3020)                            \
  X(cuMemGetAddressRange, 3020)                    \
  X(cuMemCreate, 10020)                            \
  X(cuMemRelease, 10020)                           \
  X(cuMemExportToShareableHandle, 10020)           \
  X(cuMemImportFromShareableHandle, 10020)         \
  X(cuMemGetAllocationGranularity, 10020)          \
  X(cuMemGetAllocationPropertiesFromHandle, 10020) \
  X(cuMemAddressReserve, 10020)                    \
  X(cuMemAddressFree, 10020)                       \
  X(cuMemMap, 10020)                               \
  X(cuMemUnmap, 10020)                             \
  X(cuMemSetAccess, 10020)                         \
  X(cuMemHostRegister, 6050)                       \
  X(cuMemHostUnregister, 4000)                     \
  X(cuMemHostGetDevicePointer, 3020)               \
  X(cuStreamWaitValue32, 11070)                    \
  X(cuStreamWriteValue32, 11070)                   \
  X(cuStreamBatchMemOp, 11070)                     \
  X(cuMemcpyHtoDAsync, 3020)                       \
  X(cuMemcpyDtoDAsync, 3020)                       \
  X(cuMemcpy2DAsync, 3020)                         \
  X(cuMemcpyDtoHAsync, 3020)                       \
  X(cuMemsetD8Async, 3020)                         \
  X(cuStreamQuery, 2000)                           \
  X(cuStreamGetCtx, 9020)                          \
  X(cuCtxGetCurrent, 4000)                         \
  X(cuModuleLoadData, 2000)                        \
  X(cuModuleUnload, 2000)                          \
  X(cuModuleGetFunction, 2000)                     \
  X(cuLaunchKernel, 4000)                          \
  X(cuMemAllocHost, 3020)                          \
  X(cuMemHostAlloc, 2020)                          \
  X(cuMemFreeHost, 2000)

struct Driver {
#define CUDAIPC_DRIVER_MEMBER(name, version) PFN_##name##_v##version name = nullptr;
  CUDAIPC_DRIVER_FUNCTIONS(CUDAIPC_DRIVER_MEMBER)
#undef CUDAIPC_DRIVER_MEMBER
  int version = 0;  // cuDriverGetVersion, e.g. 13000
};

// The process-wide table, loaded (and cuInit'ed) on first use. Throws Error(Errc::no_cuda) naming
// the reason (no libcuda.so.1, a driver older than CUDA 12, no device) on this and every later
// call.
const Driver& driver();

// The table without the availability check, for destructors (noexcept) of objects that exist only
// because driver() once succeeded.
const Driver& loaded_driver() noexcept;

// True when driver() would succeed; the reason otherwise (for tests that skip).
bool driver_available(std::string* why = nullptr);

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
std::string error_text(CUresult r);

[[noreturn]] void throw_cuda_error(CUresult r, const char* what);

// Throws Error(Errc::cuda, "<what> failed: <error_text>") unless r is CUDA_SUCCESS. Inline so the
// per-frame calls pay one compare.
inline void check(CUresult r, const char* what) {
  if (__builtin_expect(r != CUDA_SUCCESS, 0)) throw_cuda_error(r, what);
}

// Makes a context current on this thread for a scope: the core calls the backend from whatever
// thread it is on (publishing thread, socket thread, a frame's release), and the CUDA calls must
// land in the backend's context, not the caller's.
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext ctx);
  // For destructors: never throws; pushed() says whether `ctx` is current in the scope (pushed,
  // or current already).
  ScopedContext(CUcontext ctx, std::nothrow_t) noexcept;
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  bool pushed() const noexcept { return entered_; }

 private:
  bool pushed_ = false;   // popped at the end of the scope
  bool entered_ = false;  // the nothrow form's answer
};

}  // namespace cudaipc::cuda
