// The interface every memory backend (host memfd, CUDA) implements. The channel protocol never
// looks inside a backend: slots and sync objects cross the socket as opaque WireBlobs.
//
// Ordering contract, per slot index:
//   producer: begin_write(i) -> caller writes slot i -> end_write(i, seq) -> publish
//   consumer: acquire -> on_acquire(i, seq) -> caller reads -> on_release(i, seq) -> lease cleared
// begin_write must order the write after every consumer's last read of slot i (their on_release),
// and on_acquire must order the consumer's reads after the producer's end_write. For CUDA both are
// GPU-side semaphore waits (cuda/semaphores.hpp) on words of each connection's page; for host
// memory the lease protocol alone orders them, so they are no-ops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "cudaipc/options.hpp"
#include "unique_fd.hpp"
#include "wire_blob.hpp"

namespace cudaipc {

struct ConnPage;

// Where the bytes handed to ProducerMemory::write come from.
enum class SourceKind { host, device };

// One set of `count` slot buffers of `slot_size` bytes each, owned by the producer. A format change
// that needs bigger slots makes a new set; the old one lives until no consumer lease can reach it.
class ProducerSlots {
 public:
  virtual ~ProducerSlots() = default;
  virtual std::uint32_t count() const noexcept = 0;
  virtual std::uint64_t slot_size() const noexcept = 0;
  // Host pointer (host backend) or CUdeviceptr (CUDA backend) of slot i's first byte.
  virtual std::uintptr_t address(std::uint32_t slot) const noexcept = 0;
  // Describes every slot for a consumer: bytes plus dup'ed fds, sent once per connection and set.
  virtual WireBlob export_slots() const = 0;
};

// The consumer's import of one ProducerSlots. Frames hold it (shared_ptr) while they live, so a
// mapping outlives a format change or the producer's death until the last frame is released.
class ConsumerSlots {
 public:
  virtual ~ConsumerSlots() = default;
  virtual std::uint32_t count() const noexcept = 0;
  virtual std::uint64_t slot_size() const noexcept = 0;
  virtual std::uintptr_t address(std::uint32_t slot) const noexcept = 0;
};

class ProducerMemory {
 public:
  virtual ~ProducerMemory() = default;
  virtual MemoryKind kind() const noexcept = 0;
  virtual std::unique_ptr<ProducerSlots> allocate(std::uint32_t count, std::uint64_t bytes) = 0;
  // Producer-side sync description (CUDA: its device), sent once per connection.
  virtual WireBlob export_sync() const { return {}; }
  // A consumer finished its handshake: `sync` (untrusted) is its ConsumerMemory::export_sync, and
  // `page` its connection page of `page_bytes` (the producer's size, never the page's own word),
  // which `keep` holds mapped. Runs on the socket thread; publishing never waits for it.
  virtual void attach_consumer(std::uint32_t /*consumer*/, const WireBlob& /*sync*/,
                               ConnPage* /*page*/, std::size_t /*page_bytes*/,
                               std::shared_ptr<const void> /*keep*/) {}
  // The consumer is gone. `pidfd` (may be empty: then the hang-up counts as its death) tells
  // whether its process still lives; what it left queued on the GPU is settled in reap().
  virtual void detach_consumer(std::uint32_t /*consumer*/, UniqueFd /*pidfd*/) {}
  // Called by the socket thread every tick: frees what departed consumers left behind once the
  // producer's stream no longer needs it, and releases the producer's stream from waits on a
  // consumer that died, or that left `give_up_ns` ago without finishing its reads. A connected
  // consumer whose GPU reads have held a slot for `give_up_ns` is released the same way and
  // named in `stalled`, for the caller to evict.
  virtual void reap(std::uint64_t /*now_ns*/, std::uint64_t /*give_up_ns*/,
                    std::vector<std::uint32_t>& /*stalled*/) {}
  virtual void begin_write(std::uint32_t /*slot*/) {}
  // `seq` is the frame now in the slot; 0 when the write was abandoned (nothing to announce).
  virtual void end_write(std::uint32_t /*slot*/, std::uint64_t /*seq*/) {}
  // Copies `bytes` from `src` into the slot at `dst` (an address() value plus an offset).
  virtual void write(std::uintptr_t dst, const void* src, std::uint64_t bytes, SourceKind from) = 0;
  // 2-D copy (rows of `width` bytes, `height` rows) from a pitched source into a pitched slot.
  virtual void write_2d(std::uintptr_t dst, std::uint64_t dst_pitch, const void* src,
                        std::uint64_t src_pitch, std::uint64_t width, std::uint64_t height,
                        SourceKind from) = 0;
  // Waits on the CPU until every write so far has landed (tests, shutdown); not on the hot path.
  virtual void flush() {}
  // The CUstream the producer's writes are ordered on (nullptr for host memory).
  virtual void* stream() const noexcept { return nullptr; }
  // Callers' streams (CUDA; no-ops for host memory, whose writes are CPU copies): the producer's
  // stream waits on the GPU for the work queued on `stream` so far (write_after), or `stream` waits
  // for the producer's (order_after_writes). Never a CPU wait.
  virtual void write_after(void* /*stream*/) {}
  virtual void order_after_writes(void* /*stream*/) {}
  // Whether the producer's stream has run frame `seq`'s writes (and all before them); never waits.
  virtual bool written(std::uint64_t /*seq*/) const noexcept { return true; }
  // The CUDA device ordinal slots live on; -1 for host memory.
  virtual int device() const noexcept { return -1; }
  // How slots are exported (CUDA: vmm or legacy, as chosen); automatic for host memory.
  virtual CudaExportMode export_mode() const noexcept { return CudaExportMode::automatic; }
};

class ConsumerMemory {
 public:
  virtual ~ConsumerMemory() = default;
  virtual MemoryKind kind() const noexcept = 0;
  // Imports a set exported by ProducerSlots::export_slots; validates everything in the blob.
  virtual std::shared_ptr<ConsumerSlots> import_slots(std::uint32_t count, std::uint64_t slot_size,
                                                      const WireBlob& blob) = 0;
  // The producer's sync description (from ProducerMemory::export_sync); untrusted.
  virtual void import_sync(const WireBlob& /*sync*/) {}
  // This connection's page, mapped read-write for as long as this object lives, and a pidfd of the
  // producer (-1 where there is none) that stays open as long: its death releases waits on it.
  virtual void attach_page(ConnPage* /*page*/, std::size_t /*bytes*/, int /*producer_pidfd*/) {}
  // This consumer's sync description, for ProducerMemory::attach_consumer.
  virtual WireBlob export_sync() { return {}; }
  // Orders this consumer's reads of frame `seq` in `slot` after the producer's write of it. With
  // CudaOptions::cpu_wait it waits on the CPU until `deadline_ns` and returns false if the frame
  // was not written by then.
  virtual bool on_acquire(std::uint32_t /*slot*/, std::uint64_t /*seq*/,
                          std::uint64_t /*deadline_ns*/) {
    return true;
  }
  virtual void on_release(std::uint32_t /*slot*/, std::uint64_t /*seq*/) {}
  // The producer hung up: frames it announced but never wrote will not come. Releases whatever
  // this consumer's stream still waits for, so its queued work runs and drains.
  virtual void producer_gone() noexcept {}
  // The connection ends: lets this consumer's queued GPU work finish before its imports go,
  // releasing it early when the producer is dead. Bounded; false when the stream still had work
  // (the caller must then keep what that work may touch).
  virtual bool close() noexcept { return true; }
  // Whether close() and the destructor may run on the retiring thread (retire.hpp), after the
  // caller let go: not where they work in a context or stream the caller lent.
  virtual bool retirable() const noexcept { return false; }
  // The CUstream a consumer's reads are ordered on (nullptr for host memory), handed out: reads
  // the caller queues on it are covered by every release from then on.
  virtual void* stream() const noexcept { return nullptr; }
  // How often ordering took GPU work (CUDA): acquires that queued a wait because the frame was not
  // written yet, releases the stream wrote because reads were still queued. Without MPS each is a
  // switch between the two processes' contexts on the GPU.
  virtual std::uint64_t gpu_waits() const noexcept { return 0; }
  virtual std::uint64_t gpu_releases() const noexcept { return 0; }
  // False only for a frame the producer died before writing: its GPU wait was released by the
  // death, so reads ordered after it saw an unwritten slot. Host frames are written before they
  // are published.
  virtual bool written(std::uint64_t /*seq*/) const noexcept { return true; }
  // Callers reading on streams of their own (CUDA; no-ops for host memory). order_reads: work
  // queued on `stream` from now on reads frame `seq` in `slot` only after the producer's write of
  // it landed (nothing is queued when the CPU already sees it landed). order_release_after: the
  // consumer's stream waits for the work queued on `stream` so far, so the on_release that follows
  // comes after it. Callable from any thread; never a CPU wait.
  virtual void order_reads(std::uint32_t /*slot*/, std::uint64_t /*seq*/, void* /*stream*/) {}
  virtual void order_release_after(void* /*stream*/) {}
  // The same after a caller's event: nothing queued when it has completed.
  virtual void order_release_after_event(void* /*event*/) {}
  // The CUDA device ordinal this consumer reads on; -1 for host memory or before it is known.
  virtual int device() const noexcept { return -1; }
  // `bytes` of a frame at `src` (this consumer's mapping of its slot) into host memory at `dst`,
  // after the producer's write of it, complete on return (CUDA: a CPU wait on this consumer's
  // stream, which on_acquire made wait for the frame). Host memory: the mapping is host memory.
  virtual void copy_to_host(const void* src, void* dst, std::uint64_t bytes) {
    if (bytes) std::memcpy(dst, src, bytes);
  }
};

// Host memory: memfd slots, sealed, mapped read-only by consumers.
std::unique_ptr<ProducerMemory> make_host_producer_memory();
std::unique_ptr<ConsumerMemory> make_host_consumer_memory();

// CUDA memory (cuda/producer_memory.cpp, cuda/consumer_memory.cpp); throw Error(Errc::no_cuda) with
// the reason where no driver, no device or no CUDA support in this build.
std::unique_ptr<ProducerMemory> make_cuda_producer_memory(const CudaOptions& opts,
                                                          std::uint32_t slot_count);
// The producer's device identity (UUID) reaches the consumer inside ProducerMemory::export_sync.
std::unique_ptr<ConsumerMemory> make_cuda_consumer_memory(const CudaOptions& opts,
                                                          std::uint32_t slot_count);

}  // namespace cudaipc
