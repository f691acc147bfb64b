#include "words_page.hpp"

#include <atomic>
#include <cstring>
#include <string>

#include "backend_common.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/log.hpp"

namespace cudaipc::cuda {
namespace {

// Host NUMA allocations came with CUDA 12.2; a driver that predates them refuses the allocation,
// and the connection page is registered instead.
constexpr int kHostNumaDriver = 12020;

#if CUDA_VERSION >= 12020
constexpr CUmemLocationType kHostNuma = CU_MEM_LOCATION_TYPE_HOST_NUMA;

// The host NUMA node nearest `dev` (0 where the system has no NUMA or the driver does not say:
// any node works, the nearest is only faster).
int host_node(CUdevice dev) {
  int node = -1;
  const CUresult r = driver().cuDeviceGetAttribute(&node, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev);
  return r == CUDA_SUCCESS && node >= 0 ? node : 0;
}
#else
// Built against older headers: 12.2's value of CU_MEM_LOCATION_TYPE_HOST_NUMA (the enum's range
// reaches 0x7FFFFFFF), and node 0.
constexpr auto kHostNuma = static_cast<CUmemLocationType>(0x3);
int host_node(CUdevice) {
  return 0;
}
#endif

CUmemAllocationProp host_properties(CUdevice dev) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = kHostNuma;
  prop.location.id = host_node(dev);
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

std::size_t page_bytes(const CUmemAllocationProp& prop) {
  std::size_t g = 0;
  check(driver().cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        "cuMemGetAllocationGranularity (semaphore page)");
  return round_up(sizeof(GpuWords), g);
}

// The device and the CPU, both read-write.
Mapping map_for_both(const ContextPtr& ctx, CUmemGenericAllocationHandle h, std::size_t size) {
  CUmemAccessDesc access[2] = {};
  access[0] = read_write_access(ctx->device());
  access[1].location.type = kHostNuma;
  access[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return Mapping(ctx, h, size, access, 2);
}

}  // namespace

std::unique_ptr<WordsPage> WordsPage::make(const ContextPtr& ctx) {
  auto page = std::make_unique<WordsPage>(Key{});
  page->ctx_ = ctx;
  try {
    const CUmemAllocationProp prop = host_properties(ctx->device());
    const std::size_t size = page_bytes(prop);
    ScopedContext current(ctx->get());
    CUmemGenericAllocationHandle h = 0;
    check(driver().cuMemCreate(&h, size, &prop, 0), "cuMemCreate (host memory, semaphore page)");
    page->allocation_ = VmmAllocation(ctx, h);
    page->mapping_ = map_for_both(ctx, h, size);
  } catch (const Error& e) {
    // Expected of a driver before 12.2, said once; a newer one that refuses (a memory limit, no
    // pinned memory left) brings back the launches held while pipelines start: a warning, once.
    const bool expected = driver().version < kHostNumaDriver;
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      log(expected ? LogLevel::info : LogLevel::warning,
          (std::string("GPU semaphores in the registered connection page, whose registration "
                       "holds this process's launches while other processes make contexts (no "
                       "shareable host page: ") +
           e.what() + ")")
              .c_str());
    return nullptr;
  }
  // Host memory the kernel hands out is zeroed; the words start from a known state regardless.
  std::memset(static_cast<void*>(&page->words()), 0, sizeof(GpuWords));
  return page;
}

std::unique_ptr<WordsPage> WordsPage::import(const ContextPtr& ctx, int fd) {
  const Driver& d = driver();
  ScopedContext current(ctx->get());
  CUmemGenericAllocationHandle h = 0;
  const CUresult r =
      d.cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (r != CUDA_SUCCESS)
    throw Error(Errc::protocol,
                "the consumer's semaphore page is no CUDA allocation "
                "(cuMemImportFromShareableHandle: " +
                    error_text(r) + ")");
  // Only needed until mapped: the mapping holds its own reference to the memory.
  const VmmAllocation imported(ctx, h);
  CUmemAllocationProp prop{};
  check(d.cuMemGetAllocationPropertiesFromHandle(&prop, h),
        "cuMemGetAllocationPropertiesFromHandle (the consumer's semaphore page)");
  // Device memory mapped for the CPU would fault on the first read: refused before mapping.
  if (prop.type != CU_MEM_ALLOCATION_TYPE_PINNED || prop.location.type != kHostNuma)
    throw Error(Errc::protocol, "the consumer's semaphore page is not host memory");
  auto page = std::make_unique<WordsPage>(Key{});
  page->ctx_ = ctx;
  try {
    // Its own granularity (its node's), not this process's.
    page->mapping_ = map_for_both(ctx, h, page_bytes(prop));
  } catch (const Error& e) {
    // The likely cause: a page smaller than the words.
    throw Error(Errc::protocol, std::string("mapping the consumer's semaphore page: ") + e.what());
  }
  return page;
}

UniqueFd WordsPage::export_fd() const {
  int fd = -1;
  ScopedContext current(ctx_->get());
  check(driver().cuMemExportToShareableHandle(&fd, allocation_.get(),
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        "cuMemExportToShareableHandle (semaphore page)");
  return UniqueFd(fd);
}

}  // namespace cudaipc::cuda
