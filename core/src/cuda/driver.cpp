#include "driver.hpp"

#include <dlfcn.h>

#include <string>

#include "cudaipc/error.hpp"

namespace cudaipc::cuda {
namespace {

// The outcome of the one load attempt, success or the reason for failure. Failure is remembered
// too, so that every later caller gets the same message without another dlopen.
struct Loaded {
  Driver table;
  std::string error;
};

std::string text_of(const Driver& d, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.cuGetErrorName) d.cuGetErrorName(r, &name);
  if (d.cuGetErrorString) d.cuGetErrorString(r, &text);
  std::string out = name ? name : "CUresult " + std::to_string(static_cast<int>(r));
  if (text) out += std::string(" (") + text + ")";
  return out;
}

bool resolve(PFN_cuGetProcAddress_v12000 get_proc, const char* name, int version, void** fn,
             std::string* why) {
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  // LEGACY_STREAM: the project never passes stream 0 itself, and a caller's CU_STREAM_PER_THREAD
  // handle works with either variant; this pins one behaviour whatever the build defines.
  const CUresult r = get_proc(name, fn, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status);
  if (r == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS && *fn) return true;
  *why = std::string("the CUDA driver has no ") + name + " for API version " +
         std::to_string(version) + " (" +
         (status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? "version not sufficient"
                                                               : "symbol not found") +
         ", cuGetProcAddress returned " + std::to_string(static_cast<int>(r)) + ")";
  return false;
}

Loaded load() {
  Loaded out;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    out.error = std::string("libcuda.so.1 not found: ") + (e ? e : "dlopen failed");
    return out;
  }
  // The library stays loaded for the life of the process even when loading fails below: the
  // driver does not support being unloaded while it has state, and the handle is one per process.
  auto get_proc = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(lib, "cuGetProcAddress_v2"));
  if (!get_proc) {
    out.error = "libcuda.so.1 has no cuGetProcAddress_v2: the driver is older than CUDA 12";
    return out;
  }
  Driver& d = out.table;
#define CUDAIPC_RESOLVE(name, version) \
  if (!resolve(get_proc, #name, version, reinterpret_cast<void**>(&d.name), &out.error)) return out;
  CUDAIPC_DRIVER_FUNCTIONS(CUDAIPC_RESOLVE)
#undef CUDAIPC_RESOLVE

  CUresult r = d.cuInit(0);
  if (r == CUDA_ERROR_NO_DEVICE) {
    out.error = "no CUDA device: cuInit failed: " + text_of(d, r);
    return out;
  }
  if (r != CUDA_SUCCESS) {
    out.error = "cuInit failed: " + text_of(d, r);
    return out;
  }
  r = d.cuDriverGetVersion(&d.version);
  if (r != CUDA_SUCCESS) {
    out.error = "cuDriverGetVersion failed: " + text_of(d, r);
    return out;
  }
  int count = 0;
  r = d.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    out.error = "cuDeviceGetCount failed: " + text_of(d, r);
    return out;
  }
  if (count == 0) out.error = "no CUDA device (the driver reports none)";
  return out;
}

const Loaded& loaded() {
  static const Loaded once = load();
  return once;
}

}  // namespace

const Driver& driver() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw Error(Errc::no_cuda, l.error);
  return l.table;
}

const Driver& loaded_driver() noexcept {
  return loaded().table;
}

bool driver_available(std::string* why) {
  const Loaded& l = loaded();
  if (why) *why = l.error;
  return l.error.empty();
}

std::string error_text(CUresult r) {
  return text_of(loaded_driver(), r);
}

void throw_cuda_error(CUresult r, const char* what) {
  throw Error(Errc::cuda, std::string(what) + " failed: " + error_text(r));
}

// A context already current (the primary one a torch or GStreamer thread works in, the usual case
// on a frame's path) is not pushed again: a push and a pop are two driver calls of a frame's
// release, and the scope ends with the same context current either way.
ScopedContext::ScopedContext(CUcontext ctx) {
  const Driver& d = driver();
  CUcontext current = nullptr;
  if (d.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == ctx) return;
  check(d.cuCtxPushCurrent(ctx), "cuCtxPushCurrent");
  pushed_ = true;
}

ScopedContext::ScopedContext(CUcontext ctx, std::nothrow_t) noexcept {
  if (!driver_available()) return;
  const Driver& d = loaded_driver();
  CUcontext current = nullptr;
  if (d.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == ctx) {
    entered_ = true;
    return;
  }
  pushed_ = entered_ = d.cuCtxPushCurrent(ctx) == CUDA_SUCCESS;
}

ScopedContext::~ScopedContext() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  loaded_driver().cuCtxPopCurrent(&popped);
}

}  // namespace cudaipc::cuda
