#include "backend_common.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cudaipc/error.hpp"
#include "cudaipc/log.hpp"

namespace cudaipc::cuda {

std::string uuid_string(const CUuuid& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char s[48];
  std::snprintf(s, sizeof s,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return s;
}

bool same_uuid(const CUuuid& a, const CUuuid& b) {
  return std::memcmp(a.bytes, b.bytes, sizeof a.bytes) == 0;
}

CUuuid device_uuid(CUdevice dev) {
  CUuuid u{};
  check(driver().cuDeviceGetUuid(&u, dev), "cuDeviceGetUuid");
  return u;
}

// "CUDA device 0 (NVIDIA H100 80GB HBM3, GPU-...)", for messages.
std::string describe(CUdevice dev) {
  char name[256] = {};
  if (driver().cuDeviceGetName(name, sizeof name - 1, dev) != CUDA_SUCCESS) name[0] = '\0';
  return "CUDA device " + std::to_string(dev) + " (" + name + ", " + uuid_string(device_uuid(dev)) +
         ")";
}

int device_count() {
  int n = 0;
  check(driver().cuDeviceGetCount(&n), "cuDeviceGetCount");
  return n;
}

CUdevice device_at(int ordinal) {
  const int n = device_count();
  if (ordinal < 0 || ordinal >= n)
    throw Error(Errc::invalid_argument, "CUDA device " + std::to_string(ordinal) +
                                            " does not exist (this process sees " +
                                            std::to_string(n) + ")");
  CUdevice dev = 0;
  check(driver().cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  return dev;
}

// Ordinals differ between processes (CUDA_VISIBLE_DEVICES renumbers them); UUIDs do not.
std::optional<CUdevice> device_by_uuid(const CUuuid& uuid) {
  const int n = device_count();
  for (int i = 0; i < n; ++i) {
    CUdevice dev = 0;
    check(driver().cuDeviceGet(&dev, i), "cuDeviceGet");
    if (same_uuid(device_uuid(dev), uuid)) return dev;
  }
  return std::nullopt;
}

int attribute(CUdevice dev, CUdevice_attribute a) {
  int v = 0;
  check(driver().cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute");
  return v;
}

CUmemAllocationProp vmm_properties(CUdevice dev) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

std::uint64_t vmm_granularity(CUdevice dev) {
  const CUmemAllocationProp prop = vmm_properties(dev);
  std::size_t g = 0;
  check(driver().cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        "cuMemGetAllocationGranularity");
  return g;
}

namespace {

CUmemAccessDesc device_access(CUdevice dev, CUmemAccess_flags flags) {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = dev;
  access.flags = flags;
  return access;
}

}  // namespace

CUmemAccessDesc read_write_access(CUdevice dev) {
  return device_access(dev, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
}

// Set once a driver has refused read-only access to device memory, so later imports do not ask
// again.
namespace {
std::atomic<bool> g_read_only_refused{false};
}  // namespace

// A consumer maps the producer's slots read-only where the driver allows it, so a stray kernel of
// the consumer faults instead of changing frames other consumers read. Drivers that accept only
// read-write access for device memory get read-write (docs/design.md says which do).
Mapping map_for_reading(ContextPtr ctx, CUmemGenericAllocationHandle h, std::size_t size,
                        CUdevice dev) {
  if (!g_read_only_refused.load(std::memory_order_relaxed)) {
    try {
      Mapping m(ctx, h, size, device_access(dev, CU_MEM_ACCESS_FLAGS_PROT_READ));
      static std::atomic<bool> said{false};
      if (!said.exchange(true))
        log(LogLevel::info, "CUDA slots mapped read-only for this consumer");
      return m;
    } catch (const Error& e) {
      g_read_only_refused.store(true, std::memory_order_relaxed);
      log(LogLevel::info,
          (std::string("read-only mapping of CUDA slots refused, mapping them read-write: ") +
           e.what())
              .c_str());
    }
  }
  return Mapping(std::move(ctx), h, size, read_write_access(dev));
}

std::shared_ptr<const Engine> make_engine(const CudaOptions& opts, CUdevice device) {
  auto e = std::make_shared<Engine>();
  if (opts.context) {
    e->ctx = Context::borrowed(static_cast<CUcontext>(opts.context));
    if (opts.device >= 0 && e->ctx->device() != device)
      throw Error(Errc::invalid_argument, "CudaOptions::context is on " +
                                              describe(e->ctx->device()) +
                                              " but CudaOptions::device names " + describe(device));
  } else {
    e->ctx = Context::primary(device);
  }
  if (opts.stream) {
    e->stream = static_cast<CUstream>(opts.stream);
  } else {
    e->owned_stream = make_stream(e->ctx);
    e->stream = e->owned_stream.get();
  }
  e->uuid = device_uuid(e->device());
  return e;
}

bool registered_semaphores_asked() {
  const char* v = std::getenv("CUDAIPC_SEMAPHORE_PAGE");
  return v && std::strcmp(v, "registered") == 0;
}

void check_header(BlobReader& r, std::uint32_t magic, const char* what) {
  if (r.get<std::uint32_t>(what) != magic)
    throw Error(Errc::protocol, std::string("peer sent something that is not ") + what);
  const auto version = r.get<std::uint32_t>(what);
  if (version != kWireVersion)
    throw Error(Errc::version_mismatch, std::string("peer sent ") + what + " version " +
                                            std::to_string(version) + ", this build speaks " +
                                            std::to_string(kWireVersion));
}
}  // namespace cudaipc::cuda
