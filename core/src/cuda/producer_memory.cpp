// The CUDA backend, producer half: slot sets in device memory shared through VMM file
// descriptors or legacy IPC handles, and the producer's side of the GPU semaphores in each
// connection's page (semaphores.hpp): its stream writes `ready` after each frame and, before
// rewriting a slot, waits for the `done` of every consumer that took the frame the slot held.
// When a consumer dies, the producer's CPU stores the values its stream waits for, and it runs on.
// The wire formats are in backend_common.hpp's constants and docs/protocol.md.
#include <cuda.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bitset>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "../clock.hpp"
#include "../conn_page.hpp"
#include "../keep_until_exit.hpp"
#include "../process_watch.hpp"
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
  std::shared_ptr<const void> keep;  // the connection page's mapping
  // The GPU semaphore words: in the consumer's page of their own (words_page.hpp), or in the
  // connection page, registered (reg).
  std::unique_ptr<cuda::WordsPage> words_page;
  std::unique_ptr<cuda::RegisteredPage> reg;
  cuda::WordPlaces words;
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
        words.done[i].store(owed[i], std::memory_order_release);
  }

  // Whether every frame the page says the consumer took has been read to the end.
  bool reads_finished(std::uint32_t slots) const noexcept {
    for (std::uint32_t i = 0; i < slots; ++i) {
      const std::uint64_t took = page->acquired[i].load(std::memory_order_acquire);
      if (took != 0 &&
          !cuda::reached(words.done[i].load(std::memory_order_acquire), cuda::seq32(took)))
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
    join_ = std::make_unique<cuda::StreamJoin>(engine_->ctx);
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
    const auto where = static_cast<SemaphoreWords>(r.get<std::uint32_t>("semaphore words"));
    if (where != SemaphoreWords::connection_page && where != SemaphoreWords::own_page)
      throw Error(Errc::protocol, "unknown place of the semaphore words " +
                                      std::to_string(static_cast<std::uint32_t>(where)));
    const std::size_t fds = where == SemaphoreWords::own_page ? 1 : 0;
    if (r.remaining() != 0)
      throw Error(Errc::protocol, "trailing data after the consumer's sync description");
    if (sync.fds.size() != fds)
      throw Error(Errc::protocol, "the consumer's sync description came with " +
                                      std::to_string(sync.fds.size()) + " fds, its semaphore " +
                                      "words need " + std::to_string(fds));
    if (!page) throw Error(Errc::invalid_argument, "a CUDA consumer needs its connection page");
    if (consumer >= kMaxConsumerIds)
      throw Error(Errc::invalid_argument, "consumer id " + std::to_string(consumer) +
                                              " is beyond the CUDA backend's table");
    {
      // Refused before the slow part, which would be thrown away (checked again below).
      std::lock_guard<std::mutex> lock(mu_);
      if (watched_.size() + 1 >= cuda::WriteBatch::capacity) throw_full();
    }
    // The slow part (mapping or registering the words) before the lock: publishing never waits
    // for it.
    auto w = std::make_unique<WatchedPage>();
    w->id = consumer;
    w->page = page;
    w->keep = std::move(keep);
    if (where == SemaphoreWords::own_page) {
      w->words_page = cuda::WordsPage::import(engine_->ctx, sync.fds[0].get());
      cuda::GpuWords& own = w->words_page->words();
      w->words = cuda::WordPlaces::in(*w->words_page, own.ready, own.done);
    } else {
      w->reg = std::make_unique<cuda::RegisteredPage>(engine_->ctx, nullptr, page, page_bytes);
      w->words = cuda::WordPlaces::in(*w->reg, page->ready, page->done);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (watched_.size() + 1 >= cuda::WriteBatch::capacity) throw_full();  // + the progress word
    // Frames up to the producer's progress have landed; later ones already queued reach this
    // page from the CPU too (reap), until the first frame whose own writes include it.
    w->words.ready->store(progress_->load(std::memory_order_acquire), std::memory_order_release);
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
          cuda::raise(*w->words.ready, written);
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
    // Unregistered or unmapped here, outside the lock.
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
      for (const auto& [id, w] : watched_) batch_.add(w->words.ready_at, cuda::seq32(seq));
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

  // A caller's stream and the producer's, for copies from and rendering on streams of the caller's
  // (docs/python.md): GPU-side waits only, skipped when the stream waited for is idle.
  void write_after(void* stream) override {
    join_->wait(engine_->stream, static_cast<CUstream>(stream));
  }
  void order_after_writes(void* stream) override {
    join_->wait(static_cast<CUstream>(stream), engine_->stream);
  }
  // The progress word follows each committed frame's writes on the stream, so a frame's copy and
  // everything queued before it have run once it shows that frame (or a later one).
  bool written(std::uint64_t seq) const noexcept override {
    return cuda::reached(progress_->load(std::memory_order_acquire), cuda::seq32(seq));
  }
  int device() const noexcept override { return static_cast<int>(engine_->device()); }
  CudaExportMode export_mode() const noexcept override { return mode_; }

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

  // Called with mu_ held.
  [[noreturn]] void throw_full() const {
    throw Error(Errc::busy, "the producer's stream serves " + std::to_string(watched_.size()) +
                                " consumer pages already");
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
    if (cuda::reached(w.words.done[slot].load(std::memory_order_acquire), target)) return;
    // Reserved: allocates only past 256 readers.
    waits_.push_back(Wait{w.words.done_at[slot], target});
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
             !cuda::reached(w.words.done[f.slot].load(std::memory_order_acquire),
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
  std::unique_ptr<cuda::StreamJoin> join_;  // callers' streams and the producer's
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

}  // namespace

std::unique_ptr<ProducerMemory> make_cuda_producer_memory(const CudaOptions& opts,
                                                          std::uint32_t slot_count) {
  driver();  // Errc::no_cuda with the reason before anything else
  return std::make_unique<CudaProducerMemory>(opts, slot_count);
}

}  // namespace cudaipc
