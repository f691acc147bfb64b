#include "download.hpp"

#include <cstring>

#include "cudaipc/error.hpp"

#ifdef CUDAIPC_CLI_CUDA
#include "cuda/driver.hpp"
#endif

namespace cudaipc::cli {

std::vector<std::uint8_t> frame_bytes(const Consumer& c, const Frame& f) {
  std::vector<std::uint8_t> out(f.size());
  if (c.memory_kind() == MemoryKind::host) {
    if (!out.empty()) std::memcpy(out.data(), f.data(), out.size());
    return out;
  }
#ifdef CUDAIPC_CLI_CUDA
  const cuda::Driver& d = cuda::driver();
  CUdevice dev = 0;
  cuda::check(d.cuDeviceGet(&dev, c.cuda_device()), "cuDeviceGet");
  // The consumer reads in its device's primary context (it was given no other).
  CUcontext ctx = nullptr;
  cuda::check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  struct Release {
    const cuda::Driver& d;
    CUdevice dev;
    ~Release() { d.cuDevicePrimaryCtxRelease(dev); }
  } release{d, dev};
  cuda::ScopedContext current(ctx);
  auto stream = static_cast<CUstream>(c.cuda_stream());
  f.order_reads(stream);
  if (!out.empty())
    cuda::check(d.cuMemcpyDtoHAsync(out.data(), reinterpret_cast<CUdeviceptr>(f.data()), out.size(),
                                    stream),
                "cuMemcpyDtoHAsync (downloading a frame)");
  cuda::check(d.cuStreamSynchronize(stream), "cuStreamSynchronize (downloading a frame)");
  return out;
#else
  throw Error(Errc::no_cuda,
              "this build of cudaipc has no CUDA support: cannot download frames "
              "from a CUDA channel");
#endif
}

}  // namespace cudaipc::cli
