// What the CUDA backend's producer and consumer halves share: the wire constants, device lookup by
// UUID, the context and stream each side works in, and the process-wide table of legacy imports.
// The backend itself is in producer_memory.cpp and consumer_memory.cpp (docs/design.md).
//
// Wire formats (all integers little-endian as the host writes them; both ends are one machine):
//   slots:          magic 'CIPS', version, mode, count, producer UUID (16), slot_size, stride,
//                   allocation size, then for legacy the 64-byte memory handle; vmm: one fd.
//   producer sync:  magic 'CIPR', version, producer UUID (16), count.
//   consumer sync:  magic 'CIPD', version, count.
// A set is one allocation with slot i at i * stride: one export and one import per set instead of
// one per slot (a VMM export costs ~0.7 ms), and no per-slot rounding to the 2 MiB granularity.
#pragma once

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "../wire_blob.hpp"
#include "cuda_handles.hpp"
#include "cudaipc/options.hpp"
#include "driver.hpp"
#include "ipc_table.hpp"
#include "semaphores.hpp"

namespace cudaipc::cuda {

inline constexpr std::uint32_t kWireVersion = 3;          // 1: IPC events; 2: no semaphore page
inline constexpr std::uint32_t kSlotsMagic = 0x53504943;  // "CIPS"
inline constexpr std::uint32_t kProducerSyncMagic = 0x52504943;  // "CIPR"
inline constexpr std::uint32_t kConsumerSyncMagic = 0x44504943;  // "CIPD"
// Slot starts are page aligned: enough for any vector load, texture pitch or DMA engine.
inline constexpr std::uint64_t kSlotAlign = 4096;
// Bound on untrusted sizes, far above any GPU's memory, so products below cannot overflow.
inline constexpr std::uint64_t kMaxSetBytes = std::uint64_t{1} << 46;

// A legacy allocation, shared by handle in the process-wide table: this process's own cuMemAlloc
// (a producer; a consumer in the same process then uses it directly) or an import of another
// process's handle.
struct LegacyMemory {
  DeviceAllocation own;
  IpcImport imported;
  CUdeviceptr address() const noexcept { return own ? own.get() : imported.get(); }
};
using LegacyTable = IpcTable<LegacyMemory>;
// How long a destructor lets its stream drain before it gives up on the peer's part: the stream
// may wait on a peer's semaphore that a live but stuck peer never advances.
inline constexpr std::chrono::seconds kDrainLimit{5};
// Consumer ids the core hands out are below this (its record table is smaller).
inline constexpr std::size_t kMaxConsumerIds = 128;
// How often a CPU wait for a frame looks whether the producer died meanwhile.
inline constexpr std::uint64_t kDeadCheckNs = 100'000'000;

inline std::uint64_t round_up(std::uint64_t v, std::uint64_t to) {
  return (v + to - 1) / to * to;
}

// ---- devices ----
std::string uuid_string(const CUuuid& u);
bool same_uuid(const CUuuid& a, const CUuuid& b);
CUuuid device_uuid(CUdevice dev);
// "CUDA device 0 (NVIDIA H100 80GB HBM3, GPU-...)", for messages.
std::string describe(CUdevice dev);
int device_count();
CUdevice device_at(int ordinal);
// Ordinals differ between processes (CUDA_VISIBLE_DEVICES renumbers them); UUIDs do not.
std::optional<CUdevice> device_by_uuid(const CUuuid& uuid);
int attribute(CUdevice dev, CUdevice_attribute a);
CUmemAllocationProp vmm_properties(CUdevice dev);
std::uint64_t vmm_granularity(CUdevice dev);
CUmemAccessDesc read_write_access(CUdevice dev);
// A consumer maps the producer's slots read-only where the driver allows it (read-write else).
Mapping map_for_reading(ContextPtr ctx, CUmemGenericAllocationHandle h, std::size_t size,
                        CUdevice dev);

// A slot set's memory, for keep_until_exit.
struct KeptMemory {
  VmmAllocation allocation;
  Mapping mapping;
  LegacyTable::Ref legacy;
};

// ---- the context and stream one side works in ------------------------------------------------

// Shared by a memory object and every slot set it made, so a set can outlive its memory object
// (frames hold sets) and still synchronise the stream its reads or writes were ordered on.
struct Engine {
  ContextPtr ctx;
  Stream owned_stream;  // empty when the caller passed its own
  CUstream stream = nullptr;
  CUuuid uuid{};

  CUdevice device() const noexcept { return ctx->device(); }
  // Whether the context and the stream are its own (retained, made here), not the caller's:
  // only then may a teardown run after the caller let go (retire.hpp). A caller's context or
  // stream (a GStreamer element's) may be destroyed as soon as the caller is done with us.
  bool own() const noexcept { return ctx->retained() && owned_stream; }
  // Polls until the stream has run everything queued on it, for at most `limit`.
  bool drain(std::chrono::nanoseconds limit) const noexcept {
    ScopedContext current(ctx->get(), std::nothrow);
    return current.pushed() && cuda::drain(stream, limit);
  }
  // Polls until the work recorded before `e` (cuda::mark_queued) has run, for at most `limit`;
  // at once when `e` is empty (nothing was queued).
  bool wait(const Event& e, std::chrono::nanoseconds limit) const noexcept {
    if (!e) return true;
    ScopedContext current(ctx->get(), std::nothrow);
    return current.pushed() && cuda::wait_event(e.get(), limit);
  }
};

// `device` is used when opts.context is null; a caller's context must agree with opts.device.
std::shared_ptr<const Engine> make_engine(const CudaOptions& opts, CUdevice device);

// Where a connection's GPU semaphore words are, as the consumer's sync description says: its
// own page (words_page.hpp, one fd with the description), or the connection page, which both
// processes then register.
enum class SemaphoreWords : std::uint32_t { connection_page = 0, own_page = 1 };
// CUDAIPC_SEMAPHORE_PAGE=registered in the consumer's environment keeps them in the connection
// page where the driver would make their own (a diagnostic switch; the GPU suites run both ways,
// tests/gpu/run-on-device.sh).
bool registered_semaphores_asked();

// Reads and checks a wire description's magic and version (kWireVersion).
void check_header(BlobReader& r, std::uint32_t magic, const char* what);

}  // namespace cudaipc::cuda
