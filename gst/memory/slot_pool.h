// Zero-copy for host channels: a buffer pool the sink offers upstream whose buffers ARE free ring
// slots, so upstream renders straight into shared memory and render() only commits. The core
// lends one slot at a time; when upstream asks for a second buffer before the first reached the
// sink (a queue in between), or the ring is full under policy=drop, the pool hands out ordinary
// memory and the sink copies it as usual.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "cudaipc/producer.hpp"
#include "memory/cuda_glue.h"

namespace cudaipc::gst {

// The producer as the sink and its slot pool share it. Borrowing a slot goes through begin():
// with a queue before the sink, the pool (upstream's thread) and render() (the sink's) would
// otherwise wait for space at the same time, and the core lends one slot at a time.
class SlotLender {
 public:
  explicit SlotLender(std::shared_ptr<Producer> producer) : producer_(std::move(producer)) {}
  Producer& producer() const { return *producer_; }
  const std::shared_ptr<Producer>& shared() const { return producer_; }
  WriteSlot begin(PublishStatus* status) {
    std::lock_guard<std::mutex> lock(begin_mu_);
    return producer_->begin_frame(status);
  }
  // After the sink stops, the pool hands out plain memory only.
  void close() { closed_.store(true); }
  bool closed() const { return closed_.load(); }
  // Pool buffers handed out and not yet through render(). A slot is lent only when none is: a
  // plain buffer still queued ahead would otherwise find the one slot lent to a later buffer.
  bool idle() const { return in_flight_.load() == 0; }
  void sent() { in_flight_.fetch_add(1); }
  void done() { in_flight_.fetch_sub(1); }

 private:
  std::shared_ptr<Producer> producer_;
  std::mutex begin_mu_;
  std::atomic<bool> closed_{false};
  std::atomic<int> in_flight_{0};
};

// render() calls this when it is done with a buffer (lent or not) from a slot pool.
void mark_rendered(GstBuffer* buf);

// Host channels: a pool whose buffers are slots of system memory; they carry a GstVideoMeta with
// the slot layout for video caps.
GstBufferPool* slot_pool_new(std::shared_ptr<SlotLender> lender);

#if GST_CHECK_VERSION(1, 24, 0)
// CUDA channels (1.24+, which can wrap foreign memory): a GstCudaBufferPool on `ctx`, as nvcodec's
// elements require of a downstream pool, whose buffers are slots wrapped as GstCudaMemory with
// `stream`, the producer's: cudaupload, cudaconvert and decoders that take a downstream pool
// write on it, after the producer's waits for the slot's last readers. Its config carries the
// stream, so elements that forward streams upstream put the whole chain on it.
GstBufferPool* cuda_slot_pool_new(std::shared_ptr<SlotLender> lender, GstCudaContext* ctx,
                                  GstCudaStream* stream);
#endif

// The borrowed slot behind `buf` when it came from a slot pool of `producer` and is still
// uncommitted, else nullptr. The WriteSlot stays owned by the buffer; commit it through `producer`.
WriteSlot* slot_of(GstBuffer* buf, const Producer* producer);

// What the host and CUDA slot pools share (slot_pool.cpp).
namespace slot_pool_detail {
// The pools' debug category, "cudaipcslotpool".
void debug_init();
// A slot lent to a buffer's memory, held out of the ring's rotation until the memory is freed:
// after the commit the buffer may still be read (cudaipcfilter pushes it on downstream; a tee
// upstream of a sink has other branches), and the ring must not write the next frame under it.
// The producer outlives every slot lent from it (members are destroyed in reverse order: the
// slot first, aborted if never committed, then its hold).
struct LentSlot {
  std::shared_ptr<Producer> producer;
  SlotHold hold;
  WriteSlot slot;
};
// A free slot of at least `size` bytes when one can be lent now (none in flight, the sink not
// stopped, a slot free at once or within the policy), else nullptr; *flushing when interrupted.
std::unique_ptr<LentSlot> lend(SlotLender& lender, std::uint64_t size, bool* flushing);
// Makes `mem` own `lent` (freed with the memory) and findable by slot_of().
void attach(GstMemory* mem, std::unique_ptr<LentSlot> lent);
// Counts `buf` in flight until render() is done with it or it is freed or reused unrendered.
void track(GstBuffer* buf, const std::shared_ptr<SlotLender>& lender);
// The slot's buffer: one memory, and a GstVideoMeta with `video`'s default layout for video.
GstBuffer* slot_buffer(GstMemory* mem, bool is_video, const GstVideoInfo& video);
}  // namespace slot_pool_detail

}  // namespace cudaipc::gst
