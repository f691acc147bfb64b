#include "test_kernels.hpp"

#include <algorithm>

// The fatbin of kernels.cu, embedded by embed.py.
extern const unsigned char cudaipc_test_kernels[];

namespace cudaipc::gputest {
namespace {

using cuda::check;
using cuda::driver;
using cuda::ScopedContext;

constexpr std::uint32_t kThreads = 256;

}  // namespace

std::string gpu_unavailable_reason() {
  std::string why;
  return cuda::driver_available(&why) ? std::string() : why;
}

Kernels::Kernels(int ordinal) {
  const cuda::Driver& d = driver();
  CUdevice dev = 0;
  check(d.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  ctx_ = cuda::Context::primary(dev);
  stream_ = cuda::make_stream(ctx_);
  counters_ = cuda::make_device_allocation(ctx_, 2 * sizeof(std::uint64_t));
  ScopedContext current(ctx_->get());
  check(d.cuModuleLoadData(&module_, cudaipc_test_kernels), "cuModuleLoadData");
  check(d.cuModuleGetFunction(&fill_, module_, "fill_pattern"), "cuModuleGetFunction");
  check(d.cuModuleGetFunction(&verify_, module_, "verify_pattern"), "cuModuleGetFunction");
  check(d.cuModuleGetFunction(&slow_fill_, module_, "slow_fill"), "cuModuleGetFunction");
  check(d.cuModuleGetFunction(&slow_read_, module_, "slow_read"), "cuModuleGetFunction");
  int sms = 0;
  check(d.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
        "cuDeviceGetAttribute");
  // One block per multiprocessor: the spinning kernels then run in one wave, so their spin is
  // paid once, not once per wave.
  spin_blocks_ = static_cast<std::uint32_t>(std::max(sms, 1));
  reset_counters();
}

Kernels::~Kernels() {
  ScopedContext current(ctx_->get(), std::nothrow);
  cuda::loaded_driver().cuStreamSynchronize(stream_.get());
  if (module_) cuda::loaded_driver().cuModuleUnload(module_);
}

void Kernels::launch(CUfunction f, CUstream s, std::uint32_t blocks, void** args) {
  ScopedContext current(ctx_->get());
  check(driver().cuLaunchKernel(f, blocks, 1, 1, kThreads, 1, 1, 0, s, args, nullptr),
        "cuLaunchKernel");
}

namespace {
std::uint32_t blocks_for(std::uint64_t bytes, std::uint32_t sms) {
  const std::uint64_t words = bytes / 8 + 1;
  return static_cast<std::uint32_t>(
      std::min<std::uint64_t>((words + kThreads - 1) / kThreads, std::uint64_t{sms} * 8));
}
}  // namespace

void Kernels::fill(CUstream s, CUdeviceptr dst, std::uint64_t bytes, std::uint64_t key) {
  void* args[] = {&dst, &bytes, &key};
  launch(fill_, s, blocks_for(bytes, spin_blocks_), args);
}

void Kernels::slow_fill(CUstream s, CUdeviceptr dst, std::uint64_t bytes, std::uint64_t key,
                        std::uint64_t spin_ns) {
  void* args[] = {&dst, &bytes, &key, &spin_ns};
  launch(slow_fill_, s, spin_blocks_, args);
}

void Kernels::verify(CUstream s, CUdeviceptr src, std::uint64_t bytes, std::uint64_t key) {
  CUdeviceptr c = counters_.get();
  void* args[] = {&src, &bytes, &key, &c};
  launch(verify_, s, blocks_for(bytes, spin_blocks_), args);
}

void Kernels::slow_read(CUstream s, CUdeviceptr src, std::uint64_t bytes, std::uint64_t key,
                        std::uint64_t spin_ns) {
  CUdeviceptr c = counters_.get();
  void* args[] = {&src, &bytes, &key, &spin_ns, &c};
  launch(slow_read_, s, spin_blocks_, args);
}

Counters Kernels::counters(CUstream s) {
  const cuda::Driver& d = driver();
  ScopedContext current(ctx_->get());
  check(d.cuStreamSynchronize(s), "cuStreamSynchronize");
  std::uint64_t host[2] = {};
  check(d.cuMemcpyDtoHAsync(host, counters_.get(), sizeof host, stream_.get()),
        "cuMemcpyDtoHAsync");
  check(d.cuStreamSynchronize(stream_.get()), "cuStreamSynchronize");
  return Counters{host[0], host[1]};
}

void Kernels::reset_counters() {
  const cuda::Driver& d = driver();
  ScopedContext current(ctx_->get());
  check(d.cuMemsetD8Async(counters_.get(), 0, 2 * sizeof(std::uint64_t), stream_.get()),
        "cuMemsetD8Async");
  check(d.cuStreamSynchronize(stream_.get()), "cuStreamSynchronize");
}

PublishStatus publish_pattern(Producer& producer, Kernels& kernels, std::uint64_t key,
                              std::uint64_t bytes, std::uint64_t spin_ns) {
  PublishStatus status = PublishStatus::published;
  WriteSlot slot = producer.begin_frame(&status);
  if (!slot) return status;
  const auto stream = static_cast<CUstream>(producer.cuda_stream());
  if (spin_ns)
    kernels.slow_fill(stream, slot.address(), bytes, key, spin_ns);
  else
    kernels.fill(stream, slot.address(), bytes, key);
  FrameInfo info;
  info.pts = key;
  producer.commit(slot, info);
  return status;
}

std::uint64_t free_device_memory(const cuda::ContextPtr& ctx) {
  ScopedContext current(ctx->get());
  std::size_t free = 0, total = 0;
  check(driver().cuMemGetInfo(&free, &total), "cuMemGetInfo");
  return free;
}

}  // namespace cudaipc::gputest
