#include "elements/filter_pending.h"

namespace cudaipc::gst {

void PendingFrames::reset(std::uint32_t capacity) {
  clear();
  frames_.assign(capacity, PendingFrame{});
  frame_of_place_.assign(capacity, 0);
  window_ = ReplyWindow(capacity);
  first_ = 0;
}

void PendingFrames::add_sent(GstBuffer* buf, std::uint64_t seq, std::uint64_t publish_time_ns,
                             std::uint64_t deadline_ns) {
  const std::uint32_t at = (first_ + count_) % frames_.size();
  // The window's capacity is ours and it only holds sent frames, so it has room when we do.
  frame_of_place_[window_.admit(seq, publish_time_ns)] = at;
  frames_[at] = PendingFrame{buf, seq, deadline_ns, FrameFate::awaiting};
  ++count_;
}

void PendingFrames::add_unsent(GstBuffer* buf) {
  const std::uint32_t at = (first_ + count_) % frames_.size();
  frames_[at] = PendingFrame{buf, 0, 0, FrameFate::missing};
  ++count_;
}

PendingFrame PendingFrames::pop() noexcept {
  PendingFrame f = frames_[first_];
  frames_[first_] = PendingFrame{};
  if (f.seq) window_.pop();  // sent frames enter and leave the window in the same order
  first_ = (first_ + 1) % frames_.size();
  --count_;
  return f;
}

ReplyMatch PendingFrames::match(const void* tag, std::uint32_t size,
                                PendingFrame** frame) noexcept {
  ReplyMatch m = window_.match(tag, size);
  if (m.verdict != ReplyVerdict::matched) return m;
  PendingFrame& f = frames_[frame_of_place_[m.place]];
  if (f.fate == FrameFate::missing) {
    // Given up on (the model left) but still queued: its results come too late to attach
    // consistently with the frames around it.
    m.verdict = ReplyVerdict::stale;
    return m;
  }
  f.fate = FrameFate::answered;
  *frame = &f;
  return m;
}

std::uint32_t PendingFrames::give_up_all() noexcept {
  std::uint32_t n = 0;
  for (std::uint32_t i = 0; i < count_; ++i) {
    PendingFrame& f = frames_[(first_ + i) % frames_.size()];
    if (f.fate == FrameFate::awaiting) {
      f.fate = FrameFate::missing;
      ++n;
    }
  }
  return n;
}

void PendingFrames::clear() noexcept {
  for (std::uint32_t i = 0; i < count_; ++i) {
    PendingFrame& f = frames_[(first_ + i) % frames_.size()];
    if (f.buf) gst_buffer_unref(f.buf);
    f = PendingFrame{};
  }
  count_ = 0;
  first_ = 0;
  window_.clear();
}

}  // namespace cudaipc::gst
