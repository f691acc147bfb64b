// RAII owners of CUDA driver objects. Each owner keeps the context it was made in alive and makes
// it current to free the object, so owners can be destroyed from any thread and in any order.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <memory>
#include <utility>

#include "driver.hpp"

namespace cudaipc::cuda {

// A context the backend works in, and its device. A primary context is retained here and released
// when the last owner (every handle below holds one) lets go; a caller's context is borrowed and
// must outlive everything made in it.
class Context {
  struct Key {
    explicit Key() = default;
  };

 public:
  static std::shared_ptr<const Context> primary(CUdevice device);
  static std::shared_ptr<const Context> borrowed(CUcontext ctx);

  Context(Key, CUcontext ctx, CUdevice device, bool retained) noexcept
      : ctx_(ctx), device_(device), retained_(retained) {}
  ~Context() {
    if (retained_) loaded_driver().cuDevicePrimaryCtxRelease(device_);
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  CUcontext get() const noexcept { return ctx_; }
  CUdevice device() const noexcept { return device_; }
  bool retained() const noexcept { return retained_; }

 private:
  CUcontext ctx_;
  CUdevice device_;
  bool retained_;
};

using ContextPtr = std::shared_ptr<const Context>;

// One driver object that Policy::release frees; move-only.
template <typename Policy>
class Owned {
 public:
  using Handle = typename Policy::Handle;

  Owned() = default;
  Owned(ContextPtr ctx, Handle h) noexcept : ctx_(std::move(ctx)), h_(h) {}
  Owned(Owned&& o) noexcept : ctx_(std::move(o.ctx_)), h_(std::exchange(o.h_, Handle{})) {}
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) {
      reset();
      ctx_ = std::move(o.ctx_);
      h_ = std::exchange(o.h_, Handle{});
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { reset(); }

  Handle get() const noexcept { return h_; }
  explicit operator bool() const noexcept { return h_ != Handle{}; }

  void reset() noexcept {
    if (h_ != Handle{}) {
      ScopedContext current(ctx_->get(), std::nothrow);
      Policy::release(h_);
      h_ = Handle{};
    }
    ctx_.reset();
  }

 private:
  ContextPtr ctx_;
  Handle h_{};
};

struct StreamPolicy {
  using Handle = CUstream;
  static void release(CUstream s) noexcept { loaded_driver().cuStreamDestroy(s); }
};
// Events made here and events opened from another process's IPC handle alike: cuEventDestroy
// is how both are let go.
struct EventPolicy {
  using Handle = CUevent;
  static void release(CUevent e) noexcept { loaded_driver().cuEventDestroy(e); }
};
struct VmmAllocationPolicy {
  using Handle = CUmemGenericAllocationHandle;
  static void release(CUmemGenericAllocationHandle h) noexcept { loaded_driver().cuMemRelease(h); }
};
struct DeviceAllocationPolicy {
  using Handle = CUdeviceptr;
  static void release(CUdeviceptr p) noexcept { loaded_driver().cuMemFree(p); }
};
struct IpcImportPolicy {
  using Handle = CUdeviceptr;
  static void release(CUdeviceptr p) noexcept { loaded_driver().cuIpcCloseMemHandle(p); }
};

struct HostAllocationPolicy {
  using Handle = void*;
  static void release(void* p) noexcept { loaded_driver().cuMemFreeHost(p); }
};

using Stream = Owned<StreamPolicy>;
using HostAllocation = Owned<HostAllocationPolicy>;  // cuMemAllocHost
using Event = Owned<EventPolicy>;
using VmmAllocation = Owned<VmmAllocationPolicy>;        // cuMemCreate / cuMemImport...
using DeviceAllocation = Owned<DeviceAllocationPolicy>;  // cuMemAlloc
using IpcImport = Owned<IpcImportPolicy>;                // cuIpcOpenMemHandle

// The factories make the context current themselves and throw Error(Errc::cuda) on failure.
Stream make_stream(ContextPtr ctx);    // CU_STREAM_NON_BLOCKING: never serialised with stream 0
Event make_ipc_event(ContextPtr ctx);  // the channel no longer uses them; the call-cost probe does
HostAllocation make_host_allocation(ContextPtr ctx, std::size_t bytes);  // page-locked, mapped
DeviceAllocation make_device_allocation(ContextPtr ctx, std::size_t bytes);
IpcImport open_ipc_memory(ContextPtr ctx, const CUipcMemHandle& handle);

// A reserved address range with a VMM allocation mapped into it, accessible from one device.
class Mapping {
 public:
  Mapping() = default;
  // Reserves `size` bytes, maps all of `allocation` (which must span at least `size`) there and
  // grants `access`; the mapping holds its own reference to the physical memory, so the caller may
  // release `allocation` afterwards.
  Mapping(ContextPtr ctx, CUmemGenericAllocationHandle allocation, std::size_t size,
          const CUmemAccessDesc& access)
      : Mapping(std::move(ctx), allocation, size, &access, 1) {}
  // The same with `count` grants (a device and the CPU, for host memory the driver made).
  Mapping(ContextPtr ctx, CUmemGenericAllocationHandle allocation, std::size_t size,
          const CUmemAccessDesc* access, std::size_t count);
  Mapping(Mapping&& o) noexcept { *this = std::move(o); }
  Mapping& operator=(Mapping&& o) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { reset(); }

  CUdeviceptr address() const noexcept { return address_; }
  std::size_t size() const noexcept { return size_; }
  void reset() noexcept;

 private:
  ContextPtr ctx_;
  CUdeviceptr address_ = 0;
  std::size_t size_ = 0;
  bool mapped_ = false;
};

}  // namespace cudaipc::cuda
