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

// Creates the pool; buffers carry a GstVideoMeta with the slot layout for video caps.
GstBufferPool* slot_pool_new(std::shared_ptr<SlotLender> lender);

// The borrowed slot behind `buf` when it came from a slot pool of `producer` and is still
// uncommitted, else nullptr. The WriteSlot stays owned by the buffer; commit it through `producer`.
WriteSlot* slot_of(GstBuffer* buf, const Producer* producer);

}  // namespace cudaipc::gst
