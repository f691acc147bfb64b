// cudaipcfilter's frames in flight, oldest first: each waits for its reply (or was never sent),
// and leaves in input order once answered or given up on. A reply from the model process is
// untrusted: ReplyWindow (cudaipc/reply.hpp) checks its tag, and only a match reaches a buffer.
// Fixed capacity: no allocation per frame. Not thread-safe; the element locks around it.
#pragma once

#include <gst/gst.h>

#include <cstdint>
#include <vector>

#include "cudaipc/reply.hpp"

namespace cudaipc::gst {

enum class FrameFate : std::uint8_t {
  awaiting,  // sent; its reply may still come
  answered,  // its reply's metas are on the buffer
  missing,   // its reply will not come (no model, the model left, timeout, not sent)
};

struct PendingFrame {
  GstBuffer* buf = nullptr;  // owned while pending
  std::uint64_t seq = 0;     // 0: never sent to the model
  std::uint64_t deadline_ns = 0;
  FrameFate fate = FrameFate::missing;
};

class PendingFrames {
 public:
  // Empties the queue (unreffing its buffers) and sets its capacity (1 .. kMaxInflight).
  void reset(std::uint32_t capacity);
  ~PendingFrames() { clear(); }

  bool empty() const noexcept { return count_ == 0; }
  bool full() const noexcept { return count_ == frames_.size(); }
  std::uint32_t size() const noexcept { return count_; }

  // A frame sent as `seq` at `publish_time_ns`, waiting until `deadline_ns`. Takes `buf`.
  void add_sent(GstBuffer* buf, std::uint64_t seq, std::uint64_t publish_time_ns,
                std::uint64_t deadline_ns);
  // A frame that was not sent: it leaves as missing. Takes `buf`.
  void add_unsent(GstBuffer* buf);

  PendingFrame& head() noexcept { return frames_[first_]; }
  // The oldest frame, now the caller's (its buffer too).
  PendingFrame pop() noexcept;

  // Matches a reply's tag (its user metadata) to a frame awaiting it; on a match, `*frame` is
  // that frame, now answered.
  ReplyMatch match(const void* tag, std::uint32_t size, PendingFrame** frame) noexcept;
  // Every frame still awaiting becomes missing (the model process left); returns how many.
  std::uint32_t give_up_all() noexcept;
  // Unrefs every pending buffer (flush, stop).
  void clear() noexcept;

 private:
  std::vector<PendingFrame> frames_;
  std::vector<std::uint32_t> frame_of_place_;  // the window's place -> index in frames_
  ReplyWindow window_{1};
  std::uint32_t first_ = 0;
  std::uint32_t count_ = 0;
};

}  // namespace cudaipc::gst
