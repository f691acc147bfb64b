// The producing end of a channel: owns the slots, the control block and the socket that
// consumers connect to.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cudaipc/frame.hpp"
#include "cudaipc/options.hpp"

namespace cudaipc {

// interrupted: Producer::interrupt() woke a wait for a free slot; the frame was not published.
enum class PublishStatus { published, dropped, timeout, interrupted };

struct ConsumerStats {
  std::uint32_t id;
  pid_t pid;
  ConsumeMode mode;
  std::uint64_t delivered;
  std::uint64_t skipped;
  std::uint64_t leases;  // bit per slot held now
  std::uint64_t cursor;  // newest frame it has taken
  std::uint64_t lag;     // frames published after its cursor
  bool evicted;          // disconnected for holding publishing back; listed while it holds slots
};

struct ProducerStats {
  std::uint64_t published;
  std::uint64_t dropped;
  std::uint64_t generation;
  std::vector<ConsumerStats> consumers;
  std::uint64_t held = 0;  // bit per slot this process holds past its write (SlotHold)
};

// A slot borrowed for writing in place (zero-copy producers). Commit or abort it before the next
// begin_frame; destroying it uncommitted aborts it.
class WriteSlot {
 public:
  WriteSlot() = default;
  WriteSlot(WriteSlot&& o) noexcept;
  WriteSlot& operator=(WriteSlot&& o) noexcept;
  WriteSlot(const WriteSlot&) = delete;
  WriteSlot& operator=(const WriteSlot&) = delete;
  ~WriteSlot();

  explicit operator bool() const noexcept { return owner_ != nullptr; }
  // Host pointer (host memory) or CUdeviceptr (CUDA memory) of the slot's first byte.
  std::uintptr_t address() const noexcept { return address_; }
  void* data() const noexcept { return reinterpret_cast<void*>(address_); }
  std::uint64_t capacity() const noexcept { return capacity_; }
  std::uint32_t index() const noexcept { return index_; }
  // The slot's meta area (host memory, ProducerOptions::meta_size bytes): encode records here and
  // commit with FrameInfo::metas = metas() to publish them without a copy.
  std::uint8_t* metas() const noexcept { return metas_; }
  std::uint32_t metas_capacity() const noexcept { return metas_capacity_; }

 private:
  friend class ProducerImpl;
  class ProducerImpl* owner_ = nullptr;
  std::uintptr_t address_ = 0;
  std::uint64_t capacity_ = 0;
  std::uint32_t index_ = 0;
  std::uint8_t* metas_ = nullptr;
  std::uint32_t metas_capacity_ = 0;
};

// Keeps a borrowed slot out of the ring's rotation past its commit or abort, until the hold is
// destroyed (from any thread): for a slot whose memory this process still reads or hands on after
// publishing it, as cudaipcfilter pushes the buffer it lent upstream on downstream once the
// model answered. The slot's memory stays valid meanwhile, across a format change too. Destroy
// it before the producer.
class SlotHold {
 public:
  SlotHold() = default;
  SlotHold(SlotHold&& o) noexcept;
  SlotHold& operator=(SlotHold&& o) noexcept;
  SlotHold(const SlotHold&) = delete;
  SlotHold& operator=(const SlotHold&) = delete;
  ~SlotHold();
  explicit operator bool() const noexcept { return owner_ != nullptr; }

 private:
  friend class ProducerImpl;
  class ProducerImpl* owner_ = nullptr;
  std::uint32_t index_ = 0;
};

class Producer {
 public:
  // Creates the channel: binds the socket (replacing a stale one left by a crashed producer;
  // Errc::busy when a live producer holds the path) and starts accepting consumers.
  explicit Producer(const ProducerOptions& options);
  ~Producer();
  // Ends the channel now while this object lives on: consumers see it close, the socket file goes
  // (another producer may take the path) and nobody new is admitted. The slots' memory stays until
  // the object is destroyed, for whatever this process still holds of it (a lent slot's buffer);
  // publishing on a closed producer reaches no one. Idempotent; the destructor closes too.
  void close();
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // Starts a new generation. Consumers see it before the first frame of the new format; slots are
  // reallocated when the format needs more bytes than they have.
  void set_format(const Format& format);
  const Format& format() const;

  // Zero-copy: borrow a free slot, write into it, commit. An empty WriteSlot means the frame was
  // dropped (policy drop) or timed out (policy block); `status` says which.
  WriteSlot begin_frame(PublishStatus* status = nullptr);
  void commit(WriteSlot& slot, const FrameInfo& info = {});
  void abort(WriteSlot& slot);
  // Holds `slot` (borrowed, not yet committed or aborted) out of rotation until the hold goes.
  SlotHold hold(const WriteSlot& slot);

  // Copying producers: one copy into a free slot, then publish. `data` is host memory, or for a
  // CUDA channel either host memory (from_device=false) or a CUdeviceptr (from_device=true).
  PublishStatus publish(const void* data, std::uint64_t bytes, const FrameInfo& info = {},
                        bool from_device = false);
  // CUDA channels: a pitched 2-D device (or host) source, one cuMemcpy2DAsync into the slot,
  // laid out with the slot pitch `dst_pitch` (0: width).
  PublishStatus publish_2d(const void* src, std::uint64_t src_pitch, std::uint64_t width,
                           std::uint64_t height, std::uint64_t dst_pitch, const FrameInfo& info,
                           bool from_device);

  // Wakes every begin_frame()/publish() blocked waiting for a free slot (other threads): they
  // return PublishStatus::interrupted, and so does any that would wait, until clear_interrupt().
  void interrupt() noexcept;
  void clear_interrupt() noexcept;

  // Consumers see end-of-stream after the last frame published so far. Publishing again clears it.
  void end_of_stream();

  ProducerStats stats() const;
  std::size_t consumer_count() const;
  const std::string& path() const;
  MemoryKind memory_kind() const;
  // The CUstream writes are ordered on (CUDA channels), for producers that render in place.
  void* cuda_stream() const;
  // The CUDA device ordinal slots live on; -1 for host memory.
  int cuda_device() const;
  // Bytes of meta area per slot (ProducerOptions::meta_size).
  std::uint32_t meta_size() const;

  // Writing from a CUstream of your own (CUDA channels; no-ops for host memory, whose copies are
  // done when publish() returns). Neither makes the CPU wait, and neither queues anything when the
  // stream waited for is idle. `stream` must belong to the producer's CUDA context.
  // write_after: the producer's next writes (a publish()'s copy, a borrowed slot's commit) wait on
  // the GPU for the work queued on `stream` so far: publish a tensor your kernels are still
  // computing, or commit a slot you render into on `stream`.
  void write_after(void* stream);
  // order_after_writes: work queued on `stream` from now on runs after the producer's stream as it
  // is now, including a borrowed slot's wait for the consumers still reading its previous frame:
  // call it after begin_frame(), before rendering into the slot on `stream`.
  void order_after_writes(void* stream);
  // Whether frame `seq`, and everything the producer's stream ran before it, has landed: the
  // source of a copy published as frame `seq` (or before it) may be reused or freed from then on.
  // Never waits. Host channels: every committed frame.
  bool written(std::uint64_t seq) const;
  // The seq of the newest committed frame; 0 before the first.
  std::uint64_t last_seq() const;
  // The newest committed frame's seq and publish time as consumers read them (FrameDesc); what a
  // reply names (cudaipc/reply.hpp). Zeros before the first.
  struct Stamp {
    std::uint64_t seq = 0;
    std::uint64_t publish_time_ns = 0;
  };
  Stamp last_frame() const;

 private:
  std::unique_ptr<class ProducerImpl> impl_;
};

}  // namespace cudaipc
