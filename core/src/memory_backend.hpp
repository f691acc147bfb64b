// The interface every memory backend (host memfd, CUDA) implements. The channel protocol never
// looks inside a backend: slots and sync objects cross the socket as opaque WireBlobs.
//
// Ordering contract, per slot index:
//   producer: begin_write(i) -> caller writes slot i -> end_write(i) -> publish
//   consumer: acquire -> on_acquire(i) -> caller reads -> on_release(i) -> lease bit cleared
// begin_write must order the write after every consumer's last read of slot i (their on_release),
// and on_acquire must order the consumer's reads after the producer's end_write. For CUDA both are
// GPU-side event waits; for host memory the lease protocol alone orders them, so they are no-ops.
#pragma once

#include <cstdint>
#include <memory>

#include "cudaipc/options.hpp"
#include "wire_blob.hpp"

namespace cudaipc {

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
  // Producer-side sync objects (CUDA: the per-slot "ready" IPC events), sent once per connection.
  virtual WireBlob export_sync() const { return {}; }
  // A consumer's sync objects (CUDA: its per-slot "done reading" events) arrived; untrusted.
  virtual void attach_consumer(std::uint32_t /*consumer*/, const WireBlob& /*sync*/) {}
  // The consumer is gone: drop whatever attach_consumer opened for it.
  virtual void detach_consumer(std::uint32_t /*consumer*/) {}
  virtual void begin_write(std::uint32_t /*slot*/) {}
  virtual void end_write(std::uint32_t /*slot*/) {}
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
};

class ConsumerMemory {
 public:
  virtual ~ConsumerMemory() = default;
  virtual MemoryKind kind() const noexcept = 0;
  // Imports a set exported by ProducerSlots::export_slots; validates everything in the blob.
  virtual std::shared_ptr<ConsumerSlots> import_slots(std::uint32_t count, std::uint64_t slot_size,
                                                      const WireBlob& blob) = 0;
  // The producer's sync objects (from ProducerMemory::export_sync); untrusted.
  virtual void import_sync(const WireBlob& /*sync*/) {}
  // This consumer's sync objects, for ProducerMemory::attach_consumer.
  virtual WireBlob export_sync() { return {}; }
  virtual void on_acquire(std::uint32_t /*slot*/) {}
  virtual void on_release(std::uint32_t /*slot*/) {}
  // The CUstream a consumer's reads are ordered on (nullptr for host memory).
  virtual void* stream() const noexcept { return nullptr; }
};

// Host memory: memfd slots, sealed, mapped read-only by consumers.
std::unique_ptr<ProducerMemory> make_host_producer_memory();
std::unique_ptr<ConsumerMemory> make_host_consumer_memory();

// CUDA memory (cuda/cuda_memory.cpp); throw Error(Errc::no_cuda) with the reason where no driver,
// no device or no CUDA support in this build.
std::unique_ptr<ProducerMemory> make_cuda_producer_memory(const CudaOptions& opts,
                                                          std::uint32_t slot_count);
// The producer's device identity (UUID) reaches the consumer inside ProducerMemory::export_sync.
std::unique_ptr<ConsumerMemory> make_cuda_consumer_memory(const CudaOptions& opts,
                                                          std::uint32_t slot_count);

}  // namespace cudaipc
