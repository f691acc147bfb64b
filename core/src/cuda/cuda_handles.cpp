#include "cuda_handles.hpp"

namespace cudaipc::cuda {

std::shared_ptr<const Context> Context::primary(CUdevice device) {
  CUcontext ctx = nullptr;
  check(driver().cuDevicePrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain");
  return std::make_shared<const Context>(Key(), ctx, device, true);
}

std::shared_ptr<const Context> Context::borrowed(CUcontext ctx) {
  CUdevice device = 0;
  {
    ScopedContext current(ctx);
    check(driver().cuCtxGetDevice(&device), "cuCtxGetDevice");
  }
  return std::make_shared<const Context>(Key(), ctx, device, false);
}

Stream make_stream(ContextPtr ctx) {
  ScopedContext current(ctx->get());
  CUstream s = nullptr;
  check(driver().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  return Stream(std::move(ctx), s);
}

Event make_ipc_event(ContextPtr ctx) {
  ScopedContext current(ctx->get());
  CUevent e = nullptr;
  // The only flag set the driver accepts for an event that crosses processes.
  check(driver().cuEventCreate(&e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING),
        "cuEventCreate(CU_EVENT_INTERPROCESS)");
  return Event(std::move(ctx), e);
}

HostAllocation make_host_allocation(ContextPtr ctx, std::size_t bytes) {
  ScopedContext current(ctx->get());
  void* p = nullptr;
  check(driver().cuMemAllocHost(&p, bytes), "cuMemAllocHost");
  return HostAllocation(std::move(ctx), p);
}

DeviceAllocation make_device_allocation(ContextPtr ctx, std::size_t bytes) {
  ScopedContext current(ctx->get());
  CUdeviceptr p = 0;
  check(driver().cuMemAlloc(&p, bytes), "cuMemAlloc");
  return DeviceAllocation(std::move(ctx), p);
}

IpcImport open_ipc_memory(ContextPtr ctx, const CUipcMemHandle& handle) {
  ScopedContext current(ctx->get());
  CUdeviceptr p = 0;
  // Lazy peer access: a consumer on another GPU of a peer-capable pair can map it too.
  check(driver().cuIpcOpenMemHandle(&p, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
        "cuIpcOpenMemHandle");
  return IpcImport(std::move(ctx), p);
}

Mapping::Mapping(ContextPtr ctx, CUmemGenericAllocationHandle allocation, std::size_t size,
                 const CUmemAccessDesc* access, std::size_t count)
    : ctx_(std::move(ctx)) {
  const Driver& d = driver();
  ScopedContext current(ctx_->get());
  check(d.cuMemAddressReserve(&address_, size, 0, 0, 0), "cuMemAddressReserve");
  size_ = size;
  try {
    check(d.cuMemMap(address_, size, 0, allocation, 0), "cuMemMap");
    mapped_ = true;
    check(d.cuMemSetAccess(address_, size, access, count), "cuMemSetAccess");
  } catch (...) {
    reset();  // a constructor that throws gets no destructor call
    throw;
  }
}

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = std::move(o.ctx_);
    address_ = std::exchange(o.address_, 0);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, false);
  }
  return *this;
}

void Mapping::reset() noexcept {
  if (size_ != 0) {
    const Driver& d = loaded_driver();
    ScopedContext current(ctx_->get(), std::nothrow);
    if (mapped_) d.cuMemUnmap(address_, size_);
    d.cuMemAddressFree(address_, size_);
  }
  address_ = 0;
  size_ = 0;
  mapped_ = false;
  ctx_.reset();
}

}  // namespace cudaipc::cuda
