// The CUDA backend, consumer half: imports of the producer's slot sets (VMM mapped read-only where
// the driver allows it, or legacy IPC handles through the process-wide table), and the consumer's
// side of the GPU semaphores in its connection page: its reads of a frame wait for `ready`, and its
// release writes `done`. When the producer dies, the death watch stores the `ready` its stream
// waits for.
#include <cuda.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "../clock.hpp"
#include "../conn_page.hpp"
#include "../keep_until_exit.hpp"
#include "../process_watch.hpp"
#include "../retire.hpp"
#include "backend_common.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/log.hpp"
#include "memory_backend.hpp"
#include "semaphores.hpp"
#include "stream_join.hpp"
#include "words_page.hpp"

namespace cudaipc {
namespace {

using cuda::check;
using cuda::ContextPtr;
using cuda::Driver;
using cuda::driver;
using cuda::ScopedContext;
using namespace cuda;  // the backend's shared pieces (backend_common.hpp)

// A caller's event that is no event of this device's (a stale handle, a stream passed for an
// event, another device's) is the likely cause of a failure: say so instead of the bare code.
void check_event(CUresult r, const char* call, CUevent e) {
  if (r == CUDA_SUCCESS) return;
  char handle[32];
  std::snprintf(handle, sizeof handle, "%p", static_cast<void*>(e));
  throw Error(r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_VALUE ||
                      r == CUDA_ERROR_INVALID_CONTEXT
                  ? Errc::invalid_argument
                  : Errc::cuda,
              std::string(call) + " on CUDA event " + handle + " failed: " + error_text(r) +
                  " (the event to release a frame after must be a live CUDA event, recorded on "
                  "a stream of the channel's device)");
}

// ---- consumer --------------------------------------------------------------------------------

class CudaConsumerSlots final : public ConsumerSlots {
 public:
  CudaConsumerSlots(std::shared_ptr<const Engine> engine, std::uint32_t count,
                    std::uint64_t slot_size, std::uint64_t stride)
      : engine_(std::move(engine)), count_(count), slot_size_(slot_size), stride_(stride) {}

  // Frames may have been released while reads queued on the consumer stream still use this set;
  // those must finish before the memory is unmapped (once per set, never per frame). Both on the
  // retiring thread, not the one that let go of the set last (retire.hpp), where everything it
  // works in is the consumer's own: a caller's context or stream, or this process's own export
  // (a producer's allocation, maybe in a caller's context), may be gone once the caller is done.
  ~CudaConsumerSlots() override {
    const bool own = engine_->own() && !(legacy_ && legacy_->own);
    // Retired, the set waits for what the stream holds now, which is what may read it, not for
    // what the connection queues meanwhile (a stream kept busy would never be seen idle).
    std::optional<cuda::Event> reads;  // none: the stream is drained
    if (own) {
      try {
        reads = cuda::mark_queued(engine_->ctx, engine_->stream);
      } catch (const Error& e) {
        log(LogLevel::debug, e.what());
      }
    }
    auto teardown = [engine = std::move(engine_), reads = std::move(reads),
                     kept = KeptMemory{
                         {}, std::move(mapping_), std::move(legacy_)}]() mutable noexcept {
      const bool done = reads ? engine->wait(*reads, kDrainLimit) : engine->drain(kDrainLimit);
      if (!done)
        keep_until_exit(std::move(kept),
                        "a consumer's CUDA stream did not drain: a slot set is kept until exit");
      reads.reset();
      kept = KeptMemory{};  // unmapped before the engine (its context) goes with this work
    };
    if (own)
      detail::retire(std::move(teardown));
    else
      teardown();
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
  bool retirable() const noexcept override { return !engine_ || engine_->own(); }

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
    if (!registered_semaphores_asked()) words_page_ = cuda::WordsPage::make(engine_->ctx);
    if (words_page_) {
      cuda::GpuWords& w = words_page_->words();
      words_ = cuda::WordPlaces::in(*words_page_, w.ready, w.done);
    } else {
      reg_ = std::make_unique<cuda::RegisteredPage>(engine_->ctx, nullptr, page, bytes);
      words_ = cuda::WordPlaces::in(*reg_, page->ready, page->done);
    }
    page_ = page;
    producer_pidfd_ = producer_pidfd;
    join_ = std::make_unique<cuda::StreamJoin>(engine_->ctx);
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
    b.put(static_cast<std::uint32_t>(words_page_ ? SemaphoreWords::own_page
                                                 : SemaphoreWords::connection_page));
    if (words_page_) b.fds.push_back(words_page_->export_fd());
    return b;
  }

  // on_acquire runs on the thread that acquires frames, on_release on any thread; both touch only
  // what was set up before the first frame existed.
  bool on_acquire(std::uint32_t slot, std::uint64_t seq, std::uint64_t deadline_ns) override {
    check_slot(slot);
    ConnPage& page = *page_;
    std::atomic<std::uint32_t>& done = words_.done[slot];
    const std::uint32_t t = cuda::seq32(seq);
    // Tells the producer to wait for done[slot] before it rewrites the slot. A done value from
    // more than 2^30 frames ago could read as "ahead" of t once the counter wraps: move it just
    // behind t (no write of ours to it can still be queued after so many frames).
    page.acquired[slot].store(seq, std::memory_order_release);
    if (t - done.load(std::memory_order_acquire) > (1u << 30))
      done.store(t - 1, std::memory_order_release);
    // Already written (the common case once the consumer has woken up): the write and its
    // release landed before this load saw `ready`, so kernels queued from here read the whole
    // frame, exactly as after a CPU wait. No driver call, no wait queued.
    if (cuda::reached(words_.ready->load(std::memory_order_acquire), t)) return true;
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
        if (cuda::cpu_wait(*words_.ready, t, slice)) return true;
        if (slice >= deadline_ns || producer_dead()) return false;
      }
    }
    ScopedContext current(engine_->ctx->get());
    cuda::stream_wait(engine_->stream, words_.ready_at, t);
    note_queued();
    gpu_waits_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // Without MPS the GPU runs one process's context at a time, and work of the consumer's context
  // that the producer's stream waits for costs a switch between them (~170 µs on the H100,
  // docs/benchmarks.md). When the stream has nothing queued, every read ordered on it has
  // finished: the CPU stores `done` itself and the consumer puts no work on the GPU at all.
  // Otherwise the stream writes it after the reads it still has queued.
  void on_release(std::uint32_t slot, std::uint64_t seq) override {
    check_slot(slot);
    if (known_idle()) {
      cuda::raise(words_.done[slot], cuda::seq32(seq));
      return;
    }
    ScopedContext current(engine_->ctx->get());
    // Right after a join onto a busy caller's stream (a model's reply while its next frame's
    // network runs) the query would say busy: the stream writes it, one driver call fewer.
    if (!joined_.exchange(false, std::memory_order_acq_rel)) {
      const std::uint64_t queued = queued_.load(std::memory_order_acquire);
      const CUresult idle = driver().cuStreamQuery(engine_->stream);
      if (idle == CUDA_SUCCESS) {
        // Nothing of ours is queued either: no stream write can land after this store.
        note_idle(queued);
        cuda::raise(words_.done[slot], cuda::seq32(seq));
        return;
      }
      if (idle != CUDA_ERROR_NOT_READY) check(idle, "cuStreamQuery");
    }
    cuda::stream_write(engine_->stream, words_.done_at[slot], cuda::seq32(seq));
    note_queued();
    gpu_releases_.fetch_add(1, std::memory_order_relaxed);
  }

  std::uint64_t gpu_waits() const noexcept override {
    return gpu_waits_.load(std::memory_order_relaxed);
  }
  std::uint64_t gpu_releases() const noexcept override {
    return gpu_releases_.load(std::memory_order_relaxed);
  }

  bool written(std::uint64_t seq) const noexcept override {
    if (!gone_.load(std::memory_order_seq_cst)) return true;
    return cuda::reached(written_at_death_.load(std::memory_order_seq_cst), cuda::seq32(seq));
  }

  void producer_gone() noexcept override {
    if (page_) note_written_at_death(words_.ready->load(std::memory_order_seq_cst));
    gone_.store(true, std::memory_order_seq_cst);
    if (!page_ || !waited_.load(std::memory_order_seq_cst)) return;
    cuda::raise(*words_.ready, newest_wait_.load(std::memory_order_seq_cst));
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

  // Handed out, the stream may carry anyone's reads, which a release must then follow: from here
  // on every release asks the driver.
  void* stream() const noexcept override {
    if (!engine_) return nullptr;
    lent_.store(true, std::memory_order_release);
    return engine_->stream;
  }

  // A caller reading on a stream of its own (bindings: torch's or cupy's current stream). The
  // frame's bytes landing is what its reads must follow: once the CPU sees `ready` there, nothing
  // is queued; otherwise the caller's stream waits for ours, which on_acquire made wait for it.
  void order_reads(std::uint32_t slot, std::uint64_t seq, void* stream) override {
    check_slot(slot);
    if (cuda::reached(words_.ready->load(std::memory_order_acquire), cuda::seq32(seq))) return;
    join_->wait(static_cast<CUstream>(stream), engine_->stream);
  }

  // Releases stay on our stream (close() and the slot sets drain it before memory goes), so a
  // caller's stream is waited for by ours: the `done` write of on_release then follows its reads.
  void order_release_after(void* stream) override {
    if (!join_) throw Error(Errc::invalid_argument, "no frame was read on this connection yet");
    if (join_->wait(engine_->stream, static_cast<CUstream>(stream))) {
      note_queued();
      joined_.store(true, std::memory_order_release);
    }
  }

  // A model's loop that waited for its answer through an event recorded after its network knows
  // the frame's reads are over; its stream, meanwhile busy with the next frame's network, would
  // make the release a GPU write behind that network (the slot back a network later; without MPS,
  // the producer's stream waiting on the model's context). One query here, and on_release's CPU
  // store.
  void order_release_after_event(void* event) override {
    if (!engine_) throw Error(Errc::invalid_argument, "no frame was read on this connection yet");
    if (!event) throw Error(Errc::invalid_argument, "no CUDA event to release after (null)");
    ScopedContext current(engine_->ctx->get());
    const CUevent e = static_cast<CUevent>(event);
    const CUresult done = driver().cuEventQuery(e);
    if (done == CUDA_SUCCESS) return;
    if (done != CUDA_ERROR_NOT_READY) check_event(done, "cuEventQuery", e);
    check_event(driver().cuStreamWaitEvent(engine_->stream, e, 0), "cuStreamWaitEvent", e);
    note_queued();
    joined_.store(true, std::memory_order_release);
  }

  int device() const noexcept override {
    return engine_ ? static_cast<int>(engine_->device()) : -1;
  }

  void copy_to_host(const void* src, void* dst, std::uint64_t bytes) override {
    if (!engine_) throw Error(Errc::invalid_argument, "no frame was read on this connection yet");
    if (!bytes) return;
    ScopedContext current(engine_->ctx->get());
    check(driver().cuMemcpyDtoHAsync(dst, reinterpret_cast<CUdeviceptr>(src),
                                     static_cast<std::size_t>(bytes), engine_->stream),
          "cuMemcpyDtoHAsync");
    note_queued();
    const std::uint64_t queued = queued_.load(std::memory_order_acquire);
    check(driver().cuStreamSynchronize(engine_->stream), "cuStreamSynchronize");
    note_idle(queued);  // everything counted before the wait has run
  }

 private:
  void check_slot(std::uint32_t slot) const {
    if (!page_ || slot >= slot_count_)
      throw Error(Errc::invalid_argument, "slot " + std::to_string(slot) + " out of range");
  }

  // Whether the stream is idle without asking the driver (a cuStreamQuery per release cost 2-6 µs
  // of the GPU machine's CPU, cold after the wait for a frame): nobody else queues on it, and
  // everything this object queued on it was seen finished by a query.
  bool known_idle() const noexcept {
    if (lent_.load(std::memory_order_acquire)) return false;
    const std::uint64_t seen = seen_idle_.load(std::memory_order_acquire);
    return seen == queued_.load(std::memory_order_acquire);
  }

  // Counted once the work is queued: a query that began before then may not have seen it.
  void note_queued() noexcept { queued_.fetch_add(1, std::memory_order_acq_rel); }

  // A query found the stream idle: the `queued` pieces counted before it began have run.
  void note_idle(std::uint64_t queued) noexcept {
    std::uint64_t seen = seen_idle_.load(std::memory_order_acquire);
    while (seen < queued &&
           !seen_idle_.compare_exchange_weak(seen, queued, std::memory_order_acq_rel,
                                             std::memory_order_acquire)) {
    }
  }

  bool producer_dead() const noexcept {
    return producer_pidfd_ >= 0 && process_exited(producer_pidfd_);
  }

  // `ready` as a producer_gone() caller read it before its own raise. Callers may race (the death
  // watch, close()), and a later one may read a value an earlier one raised: the lowest value any
  // of them read is what the producer itself wrote.
  void note_written_at_death(std::uint32_t ready) noexcept {
    std::uint32_t kept = written_at_death_.load(std::memory_order_seq_cst);
    const auto lower = [&] {
      return !death_noted_.load(std::memory_order_seq_cst) || !cuda::reached(ready, kept);
    };
    while (lower() &&
           !written_at_death_.compare_exchange_weak(kept, ready, std::memory_order_seq_cst)) {
    }
    death_noted_.store(true, std::memory_order_seq_cst);
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
      // The caller's own stream carries the caller's work.
      if (!engine_->owned_stream) lent_.store(true, std::memory_order_release);
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
  // The GPU semaphore words: in a page of their own (words_page.hpp), or in the connection page,
  // registered (reg_), where the driver makes no such page.
  std::unique_ptr<cuda::WordsPage> words_page_;
  std::unique_ptr<cuda::RegisteredPage> reg_;
  cuda::WordPlaces words_;
  std::unique_ptr<cuda::StreamJoin> join_;  // callers' streams and ours (attach_page)
  // Pieces of work this object queued on the stream, and as many of them as a query saw finished;
  // lent_: the stream is the caller's or was handed out. See known_idle().
  std::atomic<std::uint64_t> queued_{0};
  std::atomic<std::uint64_t> seen_idle_{0};
  mutable std::atomic<bool> lent_{false};
  // A join onto a busy caller's stream was just queued: the release that follows skips its query
  // (whichever release takes the flag, the stream's write is always correct, only not always
  // needed).
  std::atomic<bool> joined_{false};
  std::atomic<bool> waited_{false};
  std::atomic<std::uint32_t> newest_wait_{0};
  std::atomic<bool> gone_{false};  // the producer is known dead
  // The producer's own `ready` when it was found dead (valid once death_noted_): frames after it
  // were never written.
  std::atomic<std::uint32_t> written_at_death_{0};
  std::atomic<bool> death_noted_{false};
  // Statistics only, read by any thread: relaxed.
  std::atomic<std::uint64_t> gpu_waits_{0};
  std::atomic<std::uint64_t> gpu_releases_{0};
};

}  // namespace

std::unique_ptr<ConsumerMemory> make_cuda_consumer_memory(const CudaOptions& opts,
                                                          std::uint32_t slot_count) {
  return std::make_unique<CudaConsumerMemory>(opts, slot_count);
}

}  // namespace cudaipc
