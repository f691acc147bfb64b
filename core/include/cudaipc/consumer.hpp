// The consuming end of a channel. One thread calls next(); frames may be released on any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "cudaipc/frame.hpp"
#include "cudaipc/options.hpp"

namespace cudaipc {

class ConsumerConnection;
class ConsumerSlots;

// A leased frame. The slot stays untouched by the producer until release() or destruction, even if
// the producer changes format or dies meanwhile.
class Frame {
 public:
  Frame() noexcept;
  Frame(Frame&& o) noexcept;
  Frame& operator=(Frame&& o) noexcept;
  Frame(const Frame&) = delete;
  Frame& operator=(const Frame&) = delete;
  ~Frame() { release(); }

  explicit operator bool() const noexcept { return conn_ != nullptr; }
  const FrameDesc& desc() const noexcept { return desc_; }
  std::uint64_t seq() const noexcept { return desc_.seq; }
  // The slot's first byte: host pointer, or CUdeviceptr for CUDA channels.
  std::uintptr_t slot_address() const noexcept { return base_; }
  // The tensor's first byte (slot_address() + tensor.byte_offset) and its span.
  const void* data() const noexcept {
    return reinterpret_cast<const void*>(base_ + desc_.tensor.byte_offset);
  }
  std::uint64_t size() const noexcept { return desc_.tensor.size; }
  std::uint32_t slot() const noexcept { return slot_; }
  // The frame's meta area as the producer wrote it (cudaipc/metas.hpp reads it): desc().metas_bytes
  // bytes of host memory, mapped read-only, checked to lie within the slot's area. Valid while
  // the frame is held; nullptr when the frame has no metas.
  const std::uint8_t* metas() const noexcept { return metas_; }
  std::uint32_t metas_size() const noexcept { return metas_ ? desc_.metas_bytes : 0; }
  // Keeps the slot set this frame lives in mapped (not its lease) for as long as the returned
  // handle lives, and tells sets apart: a wrapper made once per slot and reused frame after frame
  // (cudaipcsrc's buffer pool) holds it. Empty once released.
  std::shared_ptr<const void> slot_memory() const noexcept;
  // What slot_memory() holds, without a reference: which set the slot is in, for as long as the
  // frame is held (nullptr once released).
  const void* slot_set() const noexcept { return slots_.get(); }
  // Ends the lease (for CUDA, after recording the consumer's "done reading" event).
  void release() noexcept;
  // False when the producer died before its GPU had written this frame (CUDA): the consumer let
  // reads ordered after the frame run anyway, so its stream drains, and they saw an unwritten
  // slot. True otherwise: the write landed, or will before reads ordered after it run. Ask after
  // your reads have run (or after the disconnect) and drop their results when false. False once
  // released.
  bool written() const noexcept;

  // Reading on a CUstream of your own (CUDA channels; both are no-ops for host memory, and never
  // make the CPU wait). The stream must belong to the consumer's CUDA context (its device's
  // primary context unless CudaOptions::context names another; CU_STREAM_LEGACY and
  // CU_STREAM_PER_THREAD name that context's default streams).
  // order_reads: work queued on `stream` from now on reads the frame only after its bytes have
  // landed. Nothing is queued when the CPU already sees them landed, the usual case.
  void order_reads(void* stream) const;
  // order_release_after: the lease, when it ends, ends after the work queued on `stream` so far:
  // the consumer's stream waits for it on the GPU and the "done reading" write follows, so the
  // producer's next write into the slot comes after your reads. Once per stream that read the
  // frame, before release(); nothing is queued when `stream` is idle. Any thread.
  void order_release_after(void* stream) const;
  // order_release_after_event: the lease, when it ends, ends once `event` (a CUevent recorded after
  // your reads of the frame) has completed. One query when it already has (a loop that waited for
  // its answer through that event): the release is then a CPU store, where naming the stream its
  // next frame's work keeps busy would have made the GPU write it after that work too. Otherwise
  // the consumer's stream waits for the event on the GPU. Before release(); any thread.
  void order_release_after_event(void* event) const;
  // The CUstream the consumer orders its own reads on (CUDA frames; nullptr for host memory or
  // once released), as Consumer::cuda_stream(): reads queued on it need no order_release_after.
  void* cuda_stream() const noexcept;
  // The frame's first `bytes` (at most size()) copied into host memory at `dst`, after its bytes
  // landed, complete on return: a CPU wait on the consumer's stream for CUDA frames (not for a
  // hot path; a binding's host copy of a frame). Host frames: a memcpy.
  void copy_to_host(void* dst, std::uint64_t bytes) const;

 private:
  friend class ConsumerImpl;
  std::shared_ptr<ConsumerConnection> conn_;
  std::shared_ptr<ConsumerSlots> slots_;
  std::uintptr_t base_ = 0;
  std::uint32_t slot_ = 0;
  const std::uint8_t* metas_ = nullptr;
  FrameDesc desc_;  // user_meta beyond user_meta_size left unset
};

enum class EventType {
  frame,         // `frame` holds a leased frame
  format,        // `format` is the stream's new format; frames after this one use it
  eos,           // end of stream after the last frame
  timeout,       // nothing happened within the timeout
  interrupted,   // interrupt() was called
  disconnected,  // the producer went away (reason in `message`), or turned us away while we
                 // reconnect (`refused`); with reconnect, keep calling next()
};

struct Event {
  EventType type = EventType::timeout;
  Frame frame;
  Format format;
  std::uint64_t generation = 0;
  std::string message;
  // disconnected: a producer is there but turned us away for now, the reason in `message` (it has
  // no file descriptors left, every consumer place is taken). With reconnect, next() keeps trying
  // and reports each new reason once; refusals of who we are are thrown instead.
  bool refused = false;
};

struct ConsumerCounters {
  // Frames taken and passed over since this consumer connected to the current producer: they
  // restart with each new connection, as producer_published does with each new producer.
  std::uint64_t delivered = 0;
  std::uint64_t skipped = 0;
  std::uint64_t producer_published = 0;
  std::uint64_t producer_dropped = 0;
  // CUDA channels, over every connection so far: frames whose acquire queued a GPU wait (not yet
  // written when taken) and releases written by the consumer's stream (reads still queued). Each
  // costs a switch between the processes' contexts on a GPU without MPS; zero is the fast path.
  std::uint64_t gpu_waits = 0;
  std::uint64_t gpu_releases = 0;
};

class Consumer {
 public:
  // Connects at once; throws (Errc::disconnected when nothing listens on the path,
  // permission_denied or version_mismatch when the producer refuses us) unless reconnect is set, in
  // which case a failed first connect is retried by next(). A path no producer can ever serve is
  // thrown at once, reconnect or not: Errc::invalid_argument for a regular file, a directory or a
  // parent that is not a directory; Errc::protocol for a socket whose listener does not speak
  // cudaipc (another socket type, no answer to the handshake within 3 s, garbage).
  explicit Consumer(const ConsumerOptions& options);
  ~Consumer();
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // Waits up to `timeout` for the next event. Throws Error on malformed input from the producer.
  Event next(std::chrono::nanoseconds timeout);
  // Wakes a next() blocked in another thread; it returns EventType::interrupted. Sticky until that
  // next() returns.
  void interrupt() noexcept;

  bool connected() const noexcept;
  ConsumerCounters counters() const;
  MemoryKind memory_kind() const;
  // The CUstream this consumer's reads are ordered on (CUDA channels). Reads you queue on it are
  // covered by the release of the frames they read. Until it is asked for, nobody else's work can
  // be queued there, and a release whose stream has run everything the consumer queued writes its
  // "done reading" without a driver call.
  void* cuda_stream() const;
  // The CUDA device ordinal (in this process) frames are read on; -1 for host memory or while not
  // connected.
  int cuda_device() const;

 private:
  std::unique_ptr<class ConsumerImpl> impl_;
};

}  // namespace cudaipc
