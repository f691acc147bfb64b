// The CUDA memory backend: slot sets in device memory shared through VMM file descriptors or
// legacy IPC handles, and GPU semaphores in each connection's page (semaphores.hpp) that order the
// producer's writes and the consumers' reads on the GPU, so neither side waits on the CPU per
// frame:
//   the producer's stream writes page.ready = seq after frame seq lands (one batch for all pages);
//   a consumer's stream waits page.ready >= seq before its reads, and writes page.done[slot] = seq
//   after its last read; the producer's stream waits page.done[slot] >= seq before rewriting the
//   slot, for each consumer whose page says it took that frame (page.acquired[slot]).
// When a peer dies, the survivor's CPU stores the values its stream waits for, and it runs on.
//
// Wire formats (all integers little-endian as the host writes them; both ends are one machine):
//   slots:          magic 'CIPS', version, mode, count, producer UUID (16), slot_size, stride,
//                   allocation size, then for legacy the 64-byte memory handle; vmm: one fd.
//   producer sync:  magic 'CIPR', version, producer UUID (16), count.
//   consumer sync:  magic 'CIPD', version, count.
// A set is one allocation with slot i at i * stride: one export and one import per set instead of
// one per slot (a VMM export costs ~0.7 ms), and no per-slot rounding to the 2 MiB granularity.
#include <cuda.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bitset>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../clock.hpp"
#include "../conn_page.hpp"
#include "../keep_until_exit.hpp"
#include "../process_watch.hpp"
#include "cuda_handles.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/log.hpp"
#include "driver.hpp"
#include "ipc_table.hpp"
#include "memory_backend.hpp"
#include "semaphores.hpp"

namespace cudaipc {
namespace {

using cuda::check;
using cuda::ContextPtr;
using cuda::Driver;
using cuda::driver;
using cuda::ScopedContext;

constexpr std::uint32_t kWireVersion = 2;                 // 1: IPC events
constexpr std::uint32_t kSlotsMagic = 0x53504943;         // "CIPS"
constexpr std::uint32_t kProducerSyncMagic = 0x52504943;  // "CIPR"
constexpr std::uint32_t kConsumerSyncMagic = 0x44504943;  // "CIPD"
// Slot starts are page aligned: enough for any vector load, texture pitch or DMA engine.
constexpr std::uint64_t kSlotAlign = 4096;
// Bound on untrusted sizes, far above any GPU's memory, so products below cannot overflow.
constexpr std::uint64_t kMaxSetBytes = std::uint64_t{1} << 46;

// A legacy allocation, shared by handle in the process-wide table: this process's own cuMemAlloc
// (a producer; a consumer in the same process then uses it directly) or an import of another
// process's handle.
struct LegacyMemory {
  cuda::DeviceAllocation own;
  cuda::IpcImport imported;
  CUdeviceptr address() const noexcept { return own ? own.get() : imported.get(); }
};
using LegacyTable = cuda::IpcTable<LegacyMemory>;
// How long a destructor lets its stream drain before it gives up on the peer's part: the stream
// may wait on a peer's semaphore that a live but stuck peer never advances.
constexpr std::chrono::seconds kDrainLimit{5};
// Consumer ids the core hands out are below this (its record table is smaller).
constexpr std::size_t kMaxConsumerIds = 128;
// How often a CPU wait for a frame looks whether the producer died meanwhile.
constexpr std::uint64_t kDeadCheckNs = 100'000'000;

std::uint64_t round_up(std::uint64_t v, std::uint64_t to) {
  return (v + to - 1) / to * to;
}

// ---- devices -------------------------------------------------------------------------------

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

CUmemAccessDesc device_access(CUdevice dev, CUmemAccess_flags flags) {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = dev;
  access.flags = flags;
  return access;
}

CUmemAccessDesc read_write_access(CUdevice dev) {
  return device_access(dev, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
}

// Set once a driver has refused read-only access to device memory, so later imports do not ask
// again.
std::atomic<bool> g_read_only_refused{false};

// A consumer maps the producer's slots read-only where the driver allows it, so a stray kernel of
// the consumer faults instead of changing frames other consumers read. Drivers that accept only
// read-write access for device memory get read-write (docs/design.md says which do).
cuda::Mapping map_for_reading(cuda::ContextPtr ctx, CUmemGenericAllocationHandle h,
                              std::size_t size, CUdevice dev) {
  if (!g_read_only_refused.load(std::memory_order_relaxed)) {
    try {
      cuda::Mapping m(ctx, h, size, device_access(dev, CU_MEM_ACCESS_FLAGS_PROT_READ));
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
  return cuda::Mapping(std::move(ctx), h, size, read_write_access(dev));
}

// A slot set's memory, for keep_until_exit.
struct KeptMemory {
  cuda::VmmAllocation allocation;
  cuda::Mapping mapping;
  LegacyTable::Ref legacy;
};

// ---- the context and stream one side works in ------------------------------------------------

// Shared by a memory object and every slot set it made, so a set can outlive its memory object
// (frames hold sets) and still synchronise the stream its reads or writes were ordered on.
struct Engine {
  ContextPtr ctx;
  cuda::Stream owned_stream;  // empty when the caller passed its own
  CUstream stream = nullptr;
  CUuuid uuid{};

  CUdevice device() const noexcept { return ctx->device(); }
  // Polls until the stream has run everything queued on it, for at most `limit`.
  bool drain(std::chrono::nanoseconds limit) const noexcept {
    ScopedContext current(ctx->get(), std::nothrow);
    return current.pushed() && cuda::drain(stream, limit);
  }
};

// `device` is used when opts.context is null; a caller's context must agree with opts.device.
std::shared_ptr<const Engine> make_engine(const CudaOptions& opts, CUdevice device) {
  auto e = std::make_shared<Engine>();
  if (opts.context) {
    e->ctx = cuda::Context::borrowed(static_cast<CUcontext>(opts.context));
    if (opts.device >= 0 && e->ctx->device() != device)
      throw Error(Errc::invalid_argument, "CudaOptions::context is on " +
                                              describe(e->ctx->device()) +
                                              " but CudaOptions::device names " + describe(device));
  } else {
    e->ctx = cuda::Context::primary(device);
  }
  if (opts.stream) {
    e->stream = static_cast<CUstream>(opts.stream);
  } else {
    e->owned_stream = cuda::make_stream(e->ctx);
    e->stream = e->owned_stream.get();
  }
  e->uuid = device_uuid(e->device());
  return e;
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

// ---- producer --------------------------------------------------------------------------------

class CudaProducerSlots final : public ProducerSlots {
 public:
  CudaProducerSlots(std::shared_ptr<const Engine> engine, CudaExportMode mode, std::uint32_t count,
                    std::uint64_t slot_size)
      : engine_(std::move(engine)),
        mode_(mode),
        count_(count),
        slot_size_(slot_size),
        stride_(round_up(slot_size, kSlotAlign)) {
    const Driver& d = driver();
    const ContextPtr& ctx = engine_->ctx;
    const std::uint64_t total = stride_ * count_;
    ScopedContext current(ctx->get());
    if (mode_ == CudaExportMode::vmm) {
      size_ = round_up(total, vmm_granularity(engine_->device()));
      const CUmemAllocationProp prop = vmm_properties(engine_->device());
      CUmemGenericAllocationHandle h = 0;
      check(d.cuMemCreate(&h, size_, &prop, 0), "cuMemCreate");
      allocation_ = cuda::VmmAllocation(ctx, h);
      mapping_ = cuda::Mapping(ctx, h, size_, read_write_access(engine_->device()));
      int fd = -1;
      check(d.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            "cuMemExportToShareableHandle");
      // Exported once per set; each consumer gets a dup of it.
      exported_fd_.reset(fd);
      base_ = mapping_.address();
    } else {
      size_ = total;
      cuda::DeviceAllocation memory = cuda::make_device_allocation(ctx, size_);
      check(d.cuIpcGetMemHandle(&handle_, memory.get()), "cuIpcGetMemHandle");
      legacy_ = LegacyTable::instance().add(cuda::ipc_key(handle_), {std::move(memory), {}});
      base_ = legacy_->address();
    }
  }

  // Writes queued on the stream may still target this set: let them land before the memory goes.
  ~CudaProducerSlots() override {
    if (!engine_->drain(kDrainLimit))
      keep_until_exit(KeptMemory{std::move(allocation_), std::move(mapping_), std::move(legacy_)},
                      "the producer's CUDA stream did not drain: a slot set is kept until exit");
  }

  std::uint32_t count() const noexcept override { return count_; }
  std::uint64_t slot_size() const noexcept override { return slot_size_; }
  std::uintptr_t address(std::uint32_t slot) const noexcept override {
    return base_ + std::uint64_t{slot} * stride_;
  }

  WireBlob export_slots() const override {
    WireBlob b;
    b.put(kSlotsMagic);
    b.put(kWireVersion);
    b.put(static_cast<std::uint32_t>(mode_));
    b.put(count_);
    b.put(engine_->uuid);
    b.put(slot_size_);
    b.put(stride_);
    b.put(size_);
    if (mode_ == CudaExportMode::vmm)
      b.fds.push_back(dup_fd(exported_fd_.get()));
    else
      b.put(handle_);
    return b;
  }

 private:
  std::shared_ptr<const Engine> engine_;
  CudaExportMode mode_;
  std::uint32_t count_;
  std::uint64_t slot_size_;
  std::uint64_t stride_;
  std::uint64_t size_ = 0;
  CUdeviceptr base_ = 0;
  // vmm
  cuda::VmmAllocation allocation_;
  cuda::Mapping mapping_;
  UniqueFd exported_fd_;
  // legacy
  CUipcMemHandle handle_{};
  LegacyTable::Ref legacy_;
};

// One consumer's connection page as the producer's stream uses it. The plain fields are guarded by
// the producer memory's mu_.
struct WatchedPage {
  std::uint32_t id = 0;  // the consumer id
  ConnPage* page = nullptr;
  std::unique_ptr<cuda::RegisteredPage> reg;
  CUdeviceptr ready = 0;
  std::array<CUdeviceptr, kMaxSlots> done{};
  // Per slot, the newest value the producer's stream was told to wait for in done[slot]: what the
  // CPU stores there itself if the consumer dies before its stream does.
  std::array<std::uint32_t, kMaxSlots> owed{};
  std::uint64_t owed_mask = 0;
  bool stalled = false;  // released for good: its reads held a slot too long; no more waits
  std::uint64_t first_batch = 0;  // the first frame whose ready writes include this page

  // Lets the producer's stream past every wait it has queued on this consumer. The values are
  // kept: a consumer that is still alive could write its words back down, so a page that was let
  // go is settled again on every reap until the stream has passed it.
  void settle() noexcept {
    for (std::uint32_t i = 0; i < kMaxSlots; ++i)
      if (owed_mask & (std::uint64_t{1} << i))
        page->done[i].store(owed[i], std::memory_order_release);
  }

  // Whether every frame the page says the consumer took has been read to the end.
  bool reads_finished(std::uint32_t slots) const noexcept {
    for (std::uint32_t i = 0; i < slots; ++i) {
      const std::uint64_t took = page->acquired[i].load(std::memory_order_acquire);
      if (took != 0 &&
          !cuda::reached(page->done[i].load(std::memory_order_acquire), cuda::seq32(took)))
        return false;
    }
    return true;
  }
};

// A consumer that left. Its GPU reads may still be queued, so rewriting a slot keeps waiting for
// them until they finish or the consumer is settled (dead, or gone too long). After that the page
// stays registered until the producer's progress word shows its stream has passed every wait and
// write queued on it (frame `passed_at`).
struct DepartedPage {
  std::unique_ptr<WatchedPage> watched;
  UniqueFd pidfd;
  std::uint64_t since_ns = 0;
  bool done_with = false;  // no more waits are queued on it
  std::uint64_t passed_at = 0;
};

// Threads: attach_consumer, detach_consumer and reap run on the producer's socket thread,
// begin_write and end_write on the publishing thread. mu_ guards the page tables and the frame
// log, and is never held across a call that queues work on the stream: a stream stuck on a dead
// consumer fills the driver's queue, a queueing call then blocks, and the socket thread must still
// be able to take mu_ to release the stream. The socket thread queues nothing on the stream at all.
class CudaProducerMemory final : public ProducerMemory {
 public:
  CudaProducerMemory(const CudaOptions& opts, std::uint32_t slot_count) : slot_count_(slot_count) {
    if (slot_count == 0 || slot_count > kMaxSlots)
      throw Error(Errc::invalid_argument, "a CUDA channel needs 1.." + std::to_string(kMaxSlots) +
                                              " slots, not " + std::to_string(slot_count));
    engine_ = make_engine(opts, device_at(opts.device < 0 ? 0 : opts.device));
    mode_ = resolve_mode(opts.export_mode);
    waits_.reserve(2 * kMaxConsumerIds);
    progress_memory_ = cuda::make_host_allocation(engine_->ctx, sizeof(std::atomic<std::uint32_t>));
    progress_ = new (progress_memory_.get()) std::atomic<std::uint32_t>(0);
    ScopedContext current(engine_->ctx->get());
    check(driver().cuMemHostGetDevicePointer(&progress_word_, progress_memory_.get(), 0),
          "cuMemHostGetDevicePointer (progress word)");
  }

  ~CudaProducerMemory() override {
    // Live consumers finish their reads first; whatever still holds the stream after that is a
    // peer that will not come back, and the producer is leaving anyway.
    if (engine_->drain(kDrainLimit)) return;
    settle_all();
    if (engine_->drain(kDrainLimit)) return;
    // Unregistering pages the stream may still touch would fault it when it resumes.
    const char* why = "the producer's CUDA stream did not drain on close: its pages are kept";
    for (auto& [id, w] : watched_) keep_until_exit(std::move(w), why);
    for (auto& d : departed_) keep_until_exit(std::move(d.watched), why);
    keep_until_exit(std::move(progress_memory_), why);
  }

  MemoryKind kind() const noexcept override { return MemoryKind::cuda; }

  std::unique_ptr<ProducerSlots> allocate(std::uint32_t count, std::uint64_t bytes) override {
    if (count == 0 || count > slot_count_)
      throw Error(Errc::invalid_argument, "slot count " + std::to_string(count) +
                                              " is outside 1.." + std::to_string(slot_count_));
    if (bytes == 0 || bytes > kMaxSetBytes / count)
      throw Error(Errc::invalid_argument,
                  "slot size " + std::to_string(bytes) + " is out of range");
    return std::make_unique<CudaProducerSlots>(engine_, mode_, count, bytes);
  }

  WireBlob export_sync() const override {
    WireBlob b;
    b.put(kProducerSyncMagic);
    b.put(kWireVersion);
    b.put(engine_->uuid);
    b.put(slot_count_);
    return b;
  }

  void attach_consumer(std::uint32_t consumer, const WireBlob& sync, ConnPage* page,
                       std::size_t page_bytes, std::shared_ptr<const void> keep) override {
    BlobReader r(sync);
    check_header(r, kConsumerSyncMagic, "CUDA consumer sync description");
    const auto count = r.get<std::uint32_t>("slot count");
    if (count != slot_count_)
      throw Error(Errc::protocol, "consumer expects " + std::to_string(count) +
                                      " slots, the channel has " + std::to_string(slot_count_));
    if (r.remaining() != 0 || !sync.fds.empty())
      throw Error(Errc::protocol, "trailing data after the consumer's sync description");
    if (!page) throw Error(Errc::invalid_argument, "a CUDA consumer needs its connection page");
    if (consumer >= kMaxConsumerIds)
      throw Error(Errc::invalid_argument, "consumer id " + std::to_string(consumer) +
                                              " is beyond the CUDA backend's table");
    // The slow part (registering the page) before the lock: publishing never waits for it.
    auto w = std::make_unique<WatchedPage>();
    w->id = consumer;
    w->page = page;
    w->reg =
        std::make_unique<cuda::RegisteredPage>(engine_->ctx, std::move(keep), page, page_bytes);
    w->ready = w->reg->device_address(&page->ready);
    for (std::uint32_t i = 0; i < kMaxSlots; ++i)
      w->done[i] = w->reg->device_address(&page->done[i]);
    std::lock_guard<std::mutex> lock(mu_);
    if (watched_.size() + 1 >= cuda::WriteBatch::capacity)  // + the progress word
      throw Error(Errc::busy, "the producer's stream serves " + std::to_string(watched_.size()) +
                                  " consumer pages already");
    // Frames up to the producer's progress have landed; later ones already queued reach this
    // page from the CPU too (reap), until the first frame whose own writes include it.
    page->ready.store(progress_->load(std::memory_order_acquire), std::memory_order_release);
    w->first_batch = last_written_ + 1;
    // The id may have been someone else's: what the log says was waited for is about them.
    for (auto& f : frame_log_) f.waited_for.reset(consumer);
    pending_.waited_for.reset(consumer);
    watched_[consumer] = std::move(w);
  }

  void detach_consumer(std::uint32_t consumer, UniqueFd pidfd) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = watched_.find(consumer);
    if (it == watched_.end()) return;
    DepartedPage d;
    d.watched = std::move(it->second);
    d.pidfd = std::move(pidfd);
    d.since_ns = monotonic_ns();
    watched_.erase(it);
    // Without a pidfd the hang-up is the only sign of death there is.
    if (!d.pidfd || process_exited(d.pidfd.get()))
      finish(d, "its process exited");
    else if (d.watched->stalled)
      finish(d, "its GPU reads held a slot for longer than the lease timeout");
    departed_.push_back(std::move(d));
  }

  void reap(std::uint64_t now_ns, std::uint64_t give_up_ns,
            std::vector<std::uint32_t>& stalled) override {
    std::vector<DepartedPage> gone;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const std::uint32_t written = progress_->load(std::memory_order_acquire);
      for (auto& [id, w] : watched_)
        if (!cuda::reached(written, cuda::seq32(w->first_batch)))
          cuda::raise(w->page->ready, written);
      release_holders(written, now_ns, give_up_ns, stalled);
      for (auto& [id, w] : watched_)
        if (w->stalled) w->settle();
      for (auto& d : departed_) {
        if (d.done_with) {
          d.watched->settle();
          continue;
        }
        if (d.pidfd && process_exited(d.pidfd.get()))
          finish(d, "its process exited");
        else if (d.watched->reads_finished(slot_count_))
          finish(d, nullptr);
        else if (give_up_ns > 0 && now_ns - d.since_ns > give_up_ns)
          finish(d, "it left and its GPU reads did not finish in time");
      }
      for (auto it = departed_.begin(); it != departed_.end();) {
        if (it->done_with && cuda::reached(written, cuda::seq32(it->passed_at))) {
          gone.push_back(std::move(*it));
          it = departed_.erase(it);
        } else {
          ++it;
        }
      }
    }
    // Unregistered here, outside the lock.
  }

  // The write into slot i must follow the last read of every consumer that took the frame the
  // slot holds. A page is untrusted: `acquired` only selects whose `done` to wait on, and a wait
  // that a live consumer never satisfies is ended by reap() after the lease timeout.
  void begin_write(std::uint32_t slot) override {
    check_slot(slot);
    const std::uint64_t held = slot_frame_[slot];
    waits_.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_ = FrameRecord{last_written_ + 1, held, slot, {}};
      writing_ = true;
      if (held == 0) return;
      for (auto& [id, w] : watched_) wait_for_reader(*w, slot, held);
      for (auto& d : departed_)
        if (!d.done_with) wait_for_reader(*d.watched, slot, held);
      // Until a frame is committed after them, these waits may still be ahead of the stream.
      if (!waits_.empty()) waits_unpassed_ = true;
    }
    if (waits_.empty()) return;
    ScopedContext current(engine_->ctx->get());
    for (const Wait& w : waits_) cuda::stream_wait(engine_->stream, w.word, w.target);
  }

  void end_write(std::uint32_t slot, std::uint64_t seq) override {
    check_slot(slot);
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (seq == 0) return;  // abandoned: the slot stays invalid, nobody waits for it
      frame_log_[seq % kFrameLog] = pending_;
      waits_unpassed_ = false;  // this frame's progress write comes after them
      slot_frame_[slot] = seq;
      batch_.clear();
      for (const auto& [id, w] : watched_) batch_.add(w->ready, cuda::seq32(seq));
      // Last: once the progress word shows this frame, every write before it has landed.
      batch_.add(progress_word_, cuda::seq32(seq));
      last_written_ = seq;
    }
    ScopedContext current(engine_->ctx->get());
    batch_.enqueue(engine_->stream);
  }

  // With page-locked host memory or a device source the copy is asynchronous: the source must
  // stay unchanged until the stream has run it (flush(), or the caller's own ordering).
  void write(std::uintptr_t dst, const void* src, std::uint64_t bytes, SourceKind from) override {
    if (bytes == 0) return;
    const Driver& d = driver();
    ScopedContext current(engine_->ctx->get());
    if (from == SourceKind::host)
      check(d.cuMemcpyHtoDAsync(dst, src, bytes, engine_->stream), "cuMemcpyHtoDAsync");
    else
      check(d.cuMemcpyDtoDAsync(dst, reinterpret_cast<CUdeviceptr>(src), bytes, engine_->stream),
            "cuMemcpyDtoDAsync");
  }

  void write_2d(std::uintptr_t dst, std::uint64_t dst_pitch, const void* src,
                std::uint64_t src_pitch, std::uint64_t width, std::uint64_t height,
                SourceKind from) override {
    if (width == 0 || height == 0) return;
    CUDA_MEMCPY2D c{};
    if (from == SourceKind::host) {
      c.srcMemoryType = CU_MEMORYTYPE_HOST;
      c.srcHost = src;
    } else {
      c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
      c.srcDevice = reinterpret_cast<CUdeviceptr>(src);
    }
    c.srcPitch = src_pitch;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dst;
    c.dstPitch = dst_pitch;
    c.WidthInBytes = width;
    c.Height = height;
    ScopedContext current(engine_->ctx->get());
    check(driver().cuMemcpy2DAsync(&c, engine_->stream), "cuMemcpy2DAsync");
  }

  void flush() override {
    if (!engine_->drain(kDrainLimit))
      throw Error(Errc::timeout, "the producer's CUDA stream did not drain within " +
                                     std::to_string(kDrainLimit.count()) +
                                     " s (a consumer's GPU reads hold it)");
  }

  void* stream() const noexcept override { return engine_->stream; }

 private:
  CudaExportMode resolve_mode(CudaExportMode requested) const {
    const CUdevice dev = engine_->device();
    const bool vmm =
        attribute(dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) &&
        attribute(dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
    switch (requested) {
      case CudaExportMode::automatic:
        return vmm ? CudaExportMode::vmm : CudaExportMode::legacy;
      case CudaExportMode::vmm:
        if (!vmm)
          throw Error(Errc::unsupported,
                      describe(dev) + " cannot export VMM memory as POSIX file descriptors");
        return requested;
      case CudaExportMode::legacy:
        return requested;
    }
    throw Error(Errc::invalid_argument,
                "unknown CudaExportMode " + std::to_string(static_cast<std::uint32_t>(requested)));
  }

  void check_slot(std::uint32_t slot) const {
    if (slot >= slot_count_)
      throw Error(Errc::invalid_argument, "slot " + std::to_string(slot) + " out of range");
  }

  // Adds a wait for this reader to waits_ where it took the frame the slot holds and has not
  // finished reading it. Called with mu_ held.
  void wait_for_reader(WatchedPage& w, std::uint32_t slot, std::uint64_t held) {
    const std::uint32_t target = cuda::seq32(held);
    if (w.stalled || w.page->acquired[slot].load(std::memory_order_acquire) != held) return;
    if (cuda::reached(w.page->done[slot].load(std::memory_order_acquire), target)) return;
    waits_.push_back(Wait{w.done[slot], target});  // reserved: allocates only past 256 readers
    w.owed[slot] = target;
    w.owed_mask |= std::uint64_t{1} << slot;
    pending_.waited_for.set(w.id);
  }

  // A consumer whose stream never writes done (a kernel that does not end, or a page claiming
  // frames it never read) would hold the producer's stream, and every consumer behind it, for as
  // long as it lives. It gets as long as a lease, like a CPU hold: when the producer's own
  // progress word (private, written by its stream) has not moved for `give_up_ns` with frames
  // still to write, the frame it is stuck on names the slot, the frame its waits were for and
  // whom they waited for; whoever of those has not finished reading is let go. Called with mu_.
  void release_holders(std::uint32_t written, std::uint64_t now_ns, std::uint64_t give_up_ns,
                       std::vector<std::uint32_t>& stalled) {
    const std::uint32_t behind = cuda::seq32(last_written_) - written;
    // The stream can also be stuck on a write not committed yet: a copy from pageable memory
    // blocks publish() until the stream reaches it, behind the write's waits.
    if (written != last_progress_ || (behind == 0 && !writing_)) {
      last_progress_ = written;
      progress_since_ = now_ns;
      return;
    }
    if (give_up_ns == 0 || now_ns - progress_since_ <= give_up_ns) return;
    progress_since_ = now_ns;  // what is released below gets a fresh period
    const std::uint64_t stuck = last_written_ - behind + 1;
    const FrameRecord& f = behind == 0 ? pending_ : frame_log_[stuck % kFrameLog];
    if (f.seq != stuck || f.replaced == 0) return;  // further behind than the log reaches
    // Only those the stuck write waited for: a consumer's CPU may have taken newer frames since,
    // so its page no longer names the one its GPU still reads.
    auto holds = [&](const WatchedPage& w) {
      return f.waited_for.test(w.id) &&
             !cuda::reached(w.page->done[f.slot].load(std::memory_order_acquire),
                            cuda::seq32(f.replaced));
    };
    for (auto& [id, w] : watched_)
      if (!w->stalled && holds(*w)) {
        w->stalled = true;
        w->settle();
        stalled.push_back(id);  // the core evicts it and says so
      }
    for (auto& d : departed_)
      if (!d.done_with && holds(*d.watched))
        finish(d, "it left and its GPU reads did not finish in time");
  }

  // Stops queueing waits on a departed page; `why` non-null: first releases the ones queued.
  // Called with mu_ held.
  void finish(DepartedPage& d, const char* why) {
    d.done_with = true;
    // Waits queued by a write begun, or abandoned, since the last committed frame are passed
    // only once the next committed frame has landed.
    d.passed_at = last_written_ + (waits_unpassed_ ? 1 : 0);
    // Settled even when its reads look finished: the page could say so and then write its words
    // back down. Storing what the stream waits for is harmless to an honest reader that is done.
    d.watched->settle();
    if (why && d.watched->owed_mask != 0)
      log(LogLevel::info,
          (std::string("released the producer's CUDA stream from a consumer's reads: ") + why)
              .c_str());
  }

  void settle_all() noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, w] : watched_) w->settle();
    for (auto& d : departed_) d.watched->settle();
  }

  // What each frame replaced, for naming who holds the stream when it is stuck on that frame.
  struct FrameRecord {
    std::uint64_t seq = 0;
    std::uint64_t replaced = 0;  // the frame the slot held before, whose readers it waited for
    std::uint32_t slot = 0;
    std::bitset<kMaxConsumerIds> waited_for;  // the consumers it waited for
  };
  struct Wait {
    CUdeviceptr word = 0;
    std::uint32_t target = 0;
  };
  // Longer than the driver lets a stream's queue grow in frames, so the frame a stuck stream is on
  // is still here when it is looked up.
  static constexpr std::size_t kFrameLog = 4096;

  std::shared_ptr<const Engine> engine_;
  std::uint32_t slot_count_;
  CudaExportMode mode_ = CudaExportMode::vmm;
  // Publishing thread only.
  std::vector<Wait> waits_;
  cuda::WriteBatch batch_;
  // mu_.
  std::mutex mu_;
  std::map<std::uint32_t, std::unique_ptr<WatchedPage>> watched_;
  std::vector<DepartedPage> departed_;
  std::array<std::uint64_t, kMaxSlots> slot_frame_{};  // the frame in each slot (publishing thread)
  std::array<FrameRecord, kFrameLog> frame_log_{};
  FrameRecord pending_;          // the write in progress (begin_write to end_write)
  bool waits_unpassed_ = false;  // waits were queued since the last committed frame
  std::uint64_t last_written_ = 0;
  bool writing_ = false;
  std::uint32_t last_progress_ = 0;  // the progress word at reap()'s last look
  std::uint64_t progress_since_ = 0;
  // The newest frame the producer's stream has written, stored by the stream itself in private
  // page-locked memory no consumer can reach.
  cuda::HostAllocation progress_memory_;
  std::atomic<std::uint32_t>* progress_ = nullptr;
  CUdeviceptr progress_word_ = 0;
};

// ---- consumer --------------------------------------------------------------------------------

class CudaConsumerSlots final : public ConsumerSlots {
 public:
  CudaConsumerSlots(std::shared_ptr<const Engine> engine, std::uint32_t count,
                    std::uint64_t slot_size, std::uint64_t stride)
      : engine_(std::move(engine)), count_(count), slot_size_(slot_size), stride_(stride) {}

  // Frames may have been released while reads queued on the consumer stream still use this set;
  // those must finish before the memory is unmapped (once per set, never per frame).
  ~CudaConsumerSlots() override {
    if (!engine_->drain(kDrainLimit))
      keep_until_exit(KeptMemory{{}, std::move(mapping_), std::move(legacy_)},
                      "a consumer's CUDA stream did not drain: a slot set is kept until exit");
  }

  std::uint32_t count() const noexcept override { return count_; }
  std::uint64_t slot_size() const noexcept override { return slot_size_; }
  std::uintptr_t address(std::uint32_t slot) const noexcept override {
    return base_ + std::uint64_t{slot} * stride_;
  }

  void import_vmm(int fd, std::uint64_t size, CUdevice memory_device) {
    const Driver& d = driver();
    const ContextPtr& ctx = engine_->ctx;
    ScopedContext current(ctx->get());
    CUmemGenericAllocationHandle h = 0;
    check(d.cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
          "cuMemImportFromShareableHandle");
    // Only needed until mapped: the mapping holds its own reference to the memory.
    cuda::VmmAllocation allocation(ctx, h);
    CUmemAllocationProp prop{};
    check(d.cuMemGetAllocationPropertiesFromHandle(&prop, h),
          "cuMemGetAllocationPropertiesFromHandle");
    if (prop.type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop.location.id != memory_device)
      throw Error(Errc::protocol, "the producer's slot memory is not device memory of " +
                                      describe(memory_device) + " as announced");
    try {
      mapping_ = map_for_reading(ctx, h, size, engine_->device());
    } catch (const Error& e) {
      // The likely cause of a failure here is an allocation smaller than the producer claimed.
      throw Error(e.code(), "mapping the producer's " + std::to_string(size) +
                                "-byte slot memory: " + e.what());
    }
    base_ = mapping_.address();
  }

  void import_legacy(const CUipcMemHandle& handle, std::uint64_t size, CUdevice memory_device) {
    const ContextPtr& ctx = engine_->ctx;
    legacy_ = LegacyTable::instance().get_or_open(cuda::ipc_key(handle), [&] {
      return LegacyMemory{{}, cuda::open_ipc_memory(ctx, handle)};
    });
    if (legacy_->own) {
      // This process's own export (a producer here too): its size is what it allocated, and only
      // its context can look it up. On another GPU the kernels reading it need peer access, which
      // cuIpcOpenMemHandle would have enabled lazily for an import.
      if (memory_device != engine_->device()) enable_peer_access(memory_device);
      base_ = legacy_->address();
      return;
    }
    CUdeviceptr start = 0;
    std::size_t bytes = 0;
    ScopedContext current(ctx->get());
    check(driver().cuMemGetAddressRange(&start, &bytes, legacy_->address()),
          "cuMemGetAddressRange");
    if (start != legacy_->address() || bytes < size)
      throw Error(Errc::protocol, "the producer's slot memory spans " + std::to_string(bytes) +
                                      " bytes, not the " + std::to_string(size) + " it announced");
    base_ = legacy_->address();
  }

 private:
  void enable_peer_access(CUdevice owner) {
    const ContextPtr peer = cuda::Context::primary(owner);
    ScopedContext current(engine_->ctx->get());
    const CUresult r = driver().cuCtxEnablePeerAccess(peer->get(), 0);
    if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
      check(r, "cuCtxEnablePeerAccess (slots of another GPU in this process)");
  }

  std::shared_ptr<const Engine> engine_;
  std::uint32_t count_;
  std::uint64_t slot_size_;
  std::uint64_t stride_;
  CUdeviceptr base_ = 0;
  cuda::Mapping mapping_;
  LegacyTable::Ref legacy_;
};

class CudaConsumerMemory final : public ConsumerMemory {
 public:
  CudaConsumerMemory(const CudaOptions& opts, std::uint32_t slot_count)
      : opts_(opts), slot_count_(slot_count) {
    if (slot_count == 0 || slot_count > kMaxSlots)
      throw Error(Errc::invalid_argument, "a CUDA channel needs 1.." + std::to_string(kMaxSlots) +
                                              " slots, not " + std::to_string(slot_count));
    driver();  // fail now, with the reason, where there is no CUDA
    if (opts_.context || opts_.device >= 0) bind(nullptr);
  }

  // close() ran before (the connection keeps this object alive for ever when it did not drain);
  // this catches a connection that failed during its handshake, before any frame.
  ~CudaConsumerMemory() override { close(); }

  MemoryKind kind() const noexcept override { return MemoryKind::cuda; }

  std::shared_ptr<ConsumerSlots> import_slots(std::uint32_t count, std::uint64_t slot_size,
                                              const WireBlob& blob) override {
    BlobReader r(blob);
    check_header(r, kSlotsMagic, "CUDA slot memory");
    const auto mode = static_cast<CudaExportMode>(r.get<std::uint32_t>("export mode"));
    const auto sent_count = r.get<std::uint32_t>("slot count");
    const auto uuid = r.get<CUuuid>("device UUID");
    const auto sent_size = r.get<std::uint64_t>("slot size");
    const auto stride = r.get<std::uint64_t>("slot stride");
    const auto size = r.get<std::uint64_t>("allocation size");
    if (mode != CudaExportMode::vmm && mode != CudaExportMode::legacy)
      throw Error(Errc::protocol,
                  "unknown CUDA export mode " + std::to_string(static_cast<std::uint32_t>(mode)));
    if (sent_count != count || count == 0 || count > slot_count_)
      throw Error(Errc::protocol, "slot memory for " + std::to_string(sent_count) +
                                      " slots, expected " + std::to_string(count));
    if (sent_size != slot_size || slot_size == 0)
      throw Error(Errc::protocol, "slot memory of " + std::to_string(sent_size) +
                                      " bytes per slot, expected " + std::to_string(slot_size));
    if (stride < slot_size || stride % kSlotAlign != 0 || stride > kMaxSetBytes / count ||
        size < stride * count || size > kMaxSetBytes)
      throw Error(Errc::protocol, "inconsistent slot layout: stride " + std::to_string(stride) +
                                      ", allocation " + std::to_string(size));
    CUipcMemHandle handle{};
    if (mode == CudaExportMode::legacy) handle = r.get<CUipcMemHandle>("memory handle");
    if (r.remaining() != 0) throw Error(Errc::protocol, "trailing bytes after the slot memory");
    const std::size_t fds = mode == CudaExportMode::vmm ? 1 : 0;
    if (blob.fds.size() != fds)
      throw Error(Errc::protocol, "slot memory came with " + std::to_string(blob.fds.size()) +
                                      " fds, expected " + std::to_string(fds));

    std::lock_guard<std::mutex> lock(mu_);
    const CUdevice memory_device = bind(&uuid);
    auto slots = std::make_shared<CudaConsumerSlots>(engine_, count, slot_size, stride);
    if (mode == CudaExportMode::vmm) {
      if (size % vmm_granularity(memory_device) != 0)
        throw Error(Errc::protocol, "VMM allocation size " + std::to_string(size) +
                                        " is not a multiple of the device's granularity");
      slots->import_vmm(blob.fds[0].get(), size, memory_device);
    } else {
      slots->import_legacy(handle, size, memory_device);
    }
    return slots;
  }

  void import_sync(const WireBlob& sync) override {
    BlobReader r(sync);
    check_header(r, kProducerSyncMagic, "CUDA producer sync description");
    const auto uuid = r.get<CUuuid>("device UUID");
    const auto count = r.get<std::uint32_t>("slot count");
    if (count != slot_count_)
      throw Error(Errc::protocol, "producer describes " + std::to_string(count) +
                                      " slots, the channel has " + std::to_string(slot_count_));
    if (r.remaining() != 0 || !sync.fds.empty())
      throw Error(Errc::protocol, "trailing data after the producer's sync description");
    std::lock_guard<std::mutex> lock(mu_);
    bind(&uuid);
  }

  void attach_page(ConnPage* page, std::size_t bytes, int producer_pidfd) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!engine_)
      throw Error(Errc::invalid_argument,
                  "the consumer's CUDA device follows the producer's: import_sync comes first");
    reg_ = std::make_unique<cuda::RegisteredPage>(engine_->ctx, nullptr, page, bytes);
    page_ = page;
    producer_pidfd_ = producer_pidfd;
    ready_ = reg_->device_address(&page->ready);
    for (std::uint32_t i = 0; i < kMaxSlots; ++i) done_[i] = reg_->device_address(&page->done[i]);
  }

  WireBlob export_sync() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!engine_ || !page_)
      throw Error(Errc::invalid_argument,
                  "the consumer's CUDA side is set up by import_sync and attach_page first");
    WireBlob b;
    b.put(kConsumerSyncMagic);
    b.put(kWireVersion);
    b.put(slot_count_);
    return b;
  }

  // on_acquire runs on the thread that acquires frames, on_release on any thread; both touch only
  // what was set up before the first frame existed.
  bool on_acquire(std::uint32_t slot, std::uint64_t seq, std::uint64_t deadline_ns) override {
    check_slot(slot);
    ConnPage& page = *page_;
    const std::uint32_t t = cuda::seq32(seq);
    // Tells the producer to wait for done[slot] before it rewrites the slot. A done value from
    // more than 2^30 frames ago could read as "ahead" of t once the counter wraps: move it just
    // behind t (no write of ours to it can still be queued after so many frames).
    page.acquired[slot].store(seq, std::memory_order_release);
    if (t - page.done[slot].load(std::memory_order_acquire) > (1u << 30))
      page.done[slot].store(t - 1, std::memory_order_release);
    // Already written (the common case once the consumer has woken up): the write and its
    // release landed before this load saw `ready`, so kernels queued from here read the whole
    // frame, exactly as after a CPU wait. No driver call, no wait queued.
    if (cuda::reached(page.ready.load(std::memory_order_acquire), t)) return true;
    note_wait(t);
    // After the death watch has fired nobody will release a new wait: the frame will never be
    // written. (Before it fires, note_wait's newest value is what the watch releases.)
    if (gone_.load(std::memory_order_seq_cst))
      throw Error(Errc::disconnected,
                  "the producer died before frame " + std::to_string(seq) + " was written");
    if (opts_.cpu_wait) {
      // In slices, so a dead producer ends the wait however far off the caller's deadline is.
      for (;;) {
        const std::uint64_t slice = std::min(deadline_ns, monotonic_ns() + kDeadCheckNs);
        if (cuda::cpu_wait(page.ready, t, slice)) return true;
        if (slice >= deadline_ns || producer_dead()) return false;
      }
    }
    ScopedContext current(engine_->ctx->get());
    cuda::stream_wait(engine_->stream, ready_, t);
    return true;
  }

  void on_release(std::uint32_t slot, std::uint64_t seq) override {
    check_slot(slot);
    ScopedContext current(engine_->ctx->get());
    cuda::stream_write(engine_->stream, done_[slot], cuda::seq32(seq));
  }

  void producer_gone() noexcept override {
    gone_.store(true, std::memory_order_seq_cst);
    if (!page_ || !waited_.load(std::memory_order_seq_cst)) return;
    cuda::raise(page_->ready, newest_wait_.load(std::memory_order_seq_cst));
  }

  bool close() noexcept override {
    if (!engine_) return true;
    ScopedContext current(engine_->ctx->get(), std::nothrow);
    if (!current.pushed()) return false;
    std::uint64_t deadline =
        monotonic_ns() + static_cast<std::uint64_t>(std::chrono::nanoseconds(kDrainLimit).count());
    bool released = false;
    while (!cuda::drain(engine_->stream, std::chrono::milliseconds(1))) {
      // A live producer writes what our stream waits for; a dead one never will.
      if (!released && producer_dead()) {
        producer_gone();
        released = true;
      }
      if (monotonic_ns() >= deadline) {
        if (released) return false;
        // Out of patience: a stuck producer must not hold this thread. One more second for
        // what is released to run.
        producer_gone();
        released = true;
        deadline = monotonic_ns() + 1'000'000'000;
      }
    }
    return true;
  }

  void* stream() const noexcept override { return engine_ ? engine_->stream : nullptr; }

 private:
  void check_slot(std::uint32_t slot) const {
    if (!page_ || slot >= slot_count_)
      throw Error(Errc::invalid_argument, "slot " + std::to_string(slot) + " out of range");
  }

  bool producer_dead() const noexcept {
    return producer_pidfd_ >= 0 && process_exited(producer_pidfd_);
  }

  // The newest frame this stream waits for: what producer_gone() stores for it.
  void note_wait(std::uint32_t t) noexcept {
    // seq_cst, paired with producer_gone(): either the watch sees this value or on_acquire sees
    // the watch's flag.
    if (!waited_.load(std::memory_order_relaxed) ||
        cuda::reached(t, newest_wait_.load(std::memory_order_relaxed)))
      newest_wait_.store(t, std::memory_order_seq_cst);
    waited_.store(true, std::memory_order_seq_cst);
  }

  // Picks this consumer's device and context the first time (from `producer` when the options
  // leave it to the producer), then checks that the producer's device is reachable from it.
  // Returns the producer's device; with producer == nullptr, binds only.
  CUdevice bind(const CUuuid* producer) {
    std::optional<CUdevice> producer_device;
    if (producer) {
      producer_device = device_by_uuid(*producer);
      if (!producer_device)
        throw Error(Errc::unsupported,
                    "the producer's GPU " + uuid_string(*producer) +
                        " is not visible to this process (CUDA_VISIBLE_DEVICES?)");
    }
    if (!engine_) {
      const CUdevice device = opts_.device >= 0 ? device_at(opts_.device)
                              : producer_device ? *producer_device
                                                : 0;
      engine_ = make_engine(opts_, device);
    }
    if (!producer_device) return engine_->device();
    const CUdevice mine = engine_->device();
    if (*producer_device != mine) {
      int can = 0;
      check(driver().cuDeviceCanAccessPeer(&can, mine, *producer_device), "cuDeviceCanAccessPeer");
      if (!can)
        throw Error(Errc::unsupported, "consumer " + describe(mine) + " cannot access producer " +
                                           describe(*producer_device) + " (no peer access)");
    }
    return *producer_device;
  }

  CudaOptions opts_;
  std::uint32_t slot_count_;
  std::mutex mu_;  // binding and the import paths; the per-frame calls take no lock
  std::shared_ptr<const Engine> engine_;
  ConnPage* page_ = nullptr;
  int producer_pidfd_ = -1;  // owned by the connection, which outlives this object
  std::unique_ptr<cuda::RegisteredPage> reg_;
  CUdeviceptr ready_ = 0;
  std::array<CUdeviceptr, kMaxSlots> done_{};
  std::atomic<bool> waited_{false};
  std::atomic<std::uint32_t> newest_wait_{0};
  std::atomic<bool> gone_{false};  // the producer is known dead
};

}  // namespace

std::unique_ptr<ProducerMemory> make_cuda_producer_memory(const CudaOptions& opts,
                                                          std::uint32_t slot_count) {
  driver();  // Errc::no_cuda with the reason before anything else
  return std::make_unique<CudaProducerMemory>(opts, slot_count);
}

std::unique_ptr<ConsumerMemory> make_cuda_consumer_memory(const CudaOptions& opts,
                                                          std::uint32_t slot_count) {
  return std::make_unique<CudaConsumerMemory>(opts, slot_count);
}

}  // namespace cudaipc
