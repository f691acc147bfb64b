#include "replies/result_staging.hpp"

#include <cuda.h>

#include <exception>
#include <string>

#include "cudaipc/error.hpp"
#include "cudaipc/log.hpp"
#include "driver.hpp"
#include "replies/ready_results.hpp"
#include "stream_point.hpp"

namespace cudaipc::detail {

namespace {

constexpr std::size_t kAlign = 64;

std::size_t aligned(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// One array's copy, packed into `dst`: one run when it is packed already, else a 2D copy whose
// rows are its detections (a box's values together), or for boxes strided within, one 2D copy per
// coordinate (rows of one value, landing 4 values apart).
void copy_array(const cuda::Driver& drv, const ResultArray& a, std::uint32_t n, std::uint32_t per,
                std::uint8_t* dst, CUstream s) {
  const std::size_t es = dtype_size(a.dtype);
  const std::size_t row = per * es;
  const auto src = reinterpret_cast<CUdeviceptr>(a.data);
  const std::int64_t stride = n <= 1 ? static_cast<std::int64_t>(per) * a.inner : a.stride;
  if (a.inner == 1 && stride == per) {
    cuda::check(drv.cuMemcpyDtoHAsync(dst, src, n * row, s),
                "cuMemcpyDtoHAsync of a reply's detections");
    return;
  }
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstMemoryType = CU_MEMORYTYPE_HOST;
  c.srcPitch = static_cast<std::size_t>(stride) * es;
  c.Height = n;
  if (a.inner == 1) {
    c.srcDevice = src;
    c.dstHost = dst;
    c.WidthInBytes = row;
    c.dstPitch = row;
    cuda::check(drv.cuMemcpy2DAsync(&c, s), "cuMemcpy2DAsync of a reply's detections");
    return;
  }
  c.WidthInBytes = es;
  c.dstPitch = row;
  for (std::uint32_t k = 0; k < per; ++k) {
    c.srcDevice = src + k * static_cast<std::size_t>(a.inner) * es;
    c.dstHost = dst + k * es;
    cuda::check(drv.cuMemcpy2DAsync(&c, s), "cuMemcpy2DAsync of a reply's boxes");
  }
}

}  // namespace

ResultStaging::ResultStaging(std::size_t places, std::size_t place_bytes)
    : place_bytes_(aligned(place_bytes)), own_(places) {}

ResultStaging::~ResultStaging() {
  void* const context = context_.load(std::memory_order_acquire);
  if (!context) return;
  const cuda::Driver& drv = cuda::loaded_driver();
  {
    cuda::ScopedContext current(static_cast<CUcontext>(context), std::nothrow);
    for (Block& b : own_)
      if (b.p) drv.cuMemFreeHost(b.p);
    if (void* region = region_.load(std::memory_order_acquire)) drv.cuMemFreeHost(region);
  }
  drv.cuDevicePrimaryCtxRelease(device_);
}

void ResultStaging::retain_context(int device) {
  if (context_.load(std::memory_order_acquire)) return;
  // The memory outlives any one model stream: it is freed in the device's primary context.
  const cuda::Driver& drv = cuda::driver();
  CUdevice dev = device;
  if (device < 0)
    cuda::check(drv.cuCtxGetDevice(&dev), "cuCtxGetDevice for the replies' page-locked memory");
  else
    cuda::check(drv.cuDeviceGet(&dev, device), "cuDeviceGet for the replies' page-locked memory");
  CUcontext primary = nullptr;
  cuda::check(drv.cuDevicePrimaryCtxRetain(&primary, dev), "cuDevicePrimaryCtxRetain");
  device_ = dev;
  context_.store(primary, std::memory_order_release);
}

void* ResultStaging::make_region() {
  void* region = region_.load(std::memory_order_acquire);
  if (region) return region;
  cuda::ScopedContext current(static_cast<CUcontext>(context_.load(std::memory_order_acquire)));
  cuda::check(
      cuda::driver().cuMemHostAlloc(&region, place_bytes_ * own_.size(), CU_MEMHOSTALLOC_PORTABLE),
      "cuMemHostAlloc of the replies' page-locked memory");
  region_.store(region, std::memory_order_release);
  return region;
}

void ResultStaging::prepare(int device) noexcept {
  try {
    std::lock_guard<std::mutex> lock(made_mu_);
    if (!context_.load(std::memory_order_acquire)) {
      // Only a primary context someone already made (the model's, torch's; the server's readers'
      // by default): made for this alone it would cost the device hundreds of MB, and under MPS
      // a client of its own.
      const cuda::Driver& drv = cuda::driver();
      CUdevice dev = 0;
      cuda::check(drv.cuDeviceGet(&dev, device), "cuDeviceGet for the replies' page-locked memory");
      unsigned flags = 0;
      int active = 0;
      cuda::check(drv.cuDevicePrimaryCtxGetState(dev, &flags, &active),
                  "cuDevicePrimaryCtxGetState");
      if (!active) return;
    }
    retain_context(device);
    make_region();
  } catch (const std::exception& e) {
    log(LogLevel::debug,
        (std::string("the replies' page-locked memory not made ahead: ") + e.what()).c_str());
  }
}

std::uint8_t* ResultStaging::memory(std::size_t place, std::size_t bytes) {
  if (!context_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(made_mu_);
    retain_context(-1);
  }
  const cuda::Driver& drv = cuda::driver();
  Block& own = own_[place];
  if (own.size >= bytes) return static_cast<std::uint8_t*>(own.p);
  if (bytes <= place_bytes_) {
    void* region = region_.load(std::memory_order_acquire);
    if (!region) {
      std::lock_guard<std::mutex> lock(made_mu_);
      region = make_region();
    }
    return static_cast<std::uint8_t*>(region) + place * place_bytes_;
  }
  // A larger reply than the place held: it grows, for good.
  const std::size_t size = aligned(bytes > 2 * own.size ? bytes : 2 * own.size);
  void* p = nullptr;
  cuda::check(
      drv.cuMemHostAlloc(&p, size, CU_MEMHOSTALLOC_PORTABLE),
      ("cuMemHostAlloc of " + std::to_string(size) + " bytes for a reply's detections").c_str());
  if (own.p) drv.cuMemFreeHost(own.p);  // its last reply was sent: the place is free
  own.p = p;
  own.size = size;
  return static_cast<std::uint8_t*>(p);
}

void ResultStaging::copy(std::size_t place, const ResultDetections& d, void* stream,
                         ResultDetections& out) {
  if (!stream)
    throw Error(Errc::invalid_argument,
                "detections in GPU memory need the stream that computed them "
                "(CU_STREAM_LEGACY for the default stream)");
  const cuda::Driver& drv = cuda::driver();
  cuda::ScopedContext current(static_cast<CUcontext>(stream_context(stream)));
  const std::uint32_t n = d.n;
  const std::size_t sizes[4] = {packed_bytes(d.boxes, n, 4), packed_bytes(d.scores, n, 1),
                                packed_bytes(d.labels, n, 1), packed_bytes(d.rotation, n, 1)};
  std::size_t bytes = 0;
  for (std::size_t s : sizes) bytes += aligned(s);
  std::uint8_t* at = memory(place, bytes);
  out = d;
  out.on_device = false;
  const ResultArray* in[4] = {&d.boxes, &d.scores, &d.labels, &d.rotation};
  ResultArray* packed[4] = {&out.boxes, &out.scores, &out.labels, &out.rotation};
  auto s = static_cast<CUstream>(stream);
  for (int k = 0; k < 4; ++k) {
    if (!in[k]->data) continue;
    const std::uint32_t per = k == 0 ? 4 : 1;
    if (n) copy_array(drv, *in[k], n, per, at, s);
    packed[k]->data = at;
    packed[k]->stride = per;
    packed[k]->inner = 1;
    at += aligned(sizes[k]);
  }
}

}  // namespace cudaipc::detail
